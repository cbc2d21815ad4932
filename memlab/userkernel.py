"""Your own experiment: a C kernel file becomes a memlab family (docs/own-kernel.md).

A kernel file includes ``memlab_kernel.h`` (its directory: :func:`include_dir`,
``memlab --include``), declares its parameters and defines setup, measure and
teardown. :func:`kernel_family` compiles it with the compiler and flags memlab
itself was built with (``memlab._core.build_info()``), caches the shared
object under the user's cache directory (``MEMLAB_CACHE_DIR``, else
``$XDG_CACHE_HOME/memlab``, else ``~/.cache/memlab``) keyed by a hash of the
source, the header, the compiler, the flags and the API version, loads it into
the core and registers it as a family for the life of the process; every
feature then takes its name (``run``, ``Sweep``, ``run_sweep``, the views, the
pytest guard). ``kernel_sha256`` (of the source) goes into every dataset of
the family (``metadata["kernel_sha256"]``): resume and the guard compare it.

>>> import memlab.userkernel as uk
>>> (uk.Path(uk.include_dir()) / "memlab_kernel.h").is_file()
True
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from memlab import chart, worker
from memlab._core import KERNEL_API_VERSION, build_info, load_kernel
from memlab.dataset import Dataset
from memlab.files import cache_directory
from memlab.family import Family, check_bool, check_choice, check_int, check_number, coerce_fields
from memlab.grid import Sweep
from memlab.measure import Measurement
from memlab.registry import register
from memlab.units import unit_of

__all__ = ["API_VERSION", "Build", "KernelBuildError", "build", "cache_dir", "include_dir", "is_kernel_path",
           "kernel_family", "load_in_worker", "measurement_from_row", "run", "run_isolated"]

#: The kernel API this memlab takes (``ML_KERNEL_API_VERSION`` of memlab_kernel.h).
API_VERSION: int = KERNEL_API_VERSION

#: How many lines of the compiler's errors a KernelBuildError quotes.
ERROR_LINES = 6

_HEADER = "memlab_kernel.h"
_TYPES = {"int": "int", "float": "float", "bool": "bool", "choice": "str"}  # annotations, as `from __future__ import annotations` writes them


class KernelBuildError(ValueError):
    """A kernel file that does not compile: the compiler's first error lines, with file:line."""


@dataclass(frozen=True)
class Build:
    """A kernel file built into a shared object (``cached``: found in the cache, not compiled)."""

    source: Path
    shared_object: Path
    kernel_sha256: str
    compiler: tuple[str, ...]
    cflags: tuple[str, ...]
    cached: bool
    seconds: float

    def metadata(self) -> dict[str, Any]:
        """What a dataset records of the build (beside ``kernel_sha256``)."""
        return {"source": str(self.source), "compiler": " ".join(self.compiler), "cflags": " ".join(self.cflags),
                "api_version": API_VERSION}


def include_dir() -> str:
    """The directory holding ``memlab_kernel.h``, for a compiler's ``-I`` (as numpy's ``get_include()``).

    >>> include_dir().endswith("include")
    True
    """
    return str(Path(__file__).resolve().parent / "include")


def cache_dir() -> Path:
    """Where built kernels are kept: :func:`memlab.files.cache_directory` (``$MEMLAB_CACHE_DIR``,
    else ``$XDG_CACHE_HOME/memlab``, else ``~/.cache/memlab``); the shared objects go to its
    ``kernels`` folder.

    >>> isinstance(cache_dir(), Path)
    True
    """
    return cache_directory()


def is_kernel_path(name: Any) -> bool:
    """Whether ``name`` means a kernel file rather than a family name (it ends in ``.c``).

    >>> is_kernel_path("./probe.c"), is_kernel_path("chase")
    (True, False)
    """
    return isinstance(name, (str, os.PathLike)) and str(name).endswith(".c")


def compiler_command() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The compiler and flags memlab's core was built with, and those a shared object adds."""
    info = build_info()
    compiler = tuple(shlex.split(info.get("cc") or "cc"))
    flags = tuple(shlex.split(info.get("cflags") or "")) + ("-fPIC", "-shared", "-fvisibility=hidden")
    return compiler, flags


def _build_key(source_bytes: bytes, compiler: tuple[str, ...], flags: tuple[str, ...]) -> str:
    header = (Path(include_dir()) / _HEADER).read_bytes()
    digest = hashlib.sha256()
    for part in (source_bytes, header, "\0".join(compiler).encode(), "\0".join(flags).encode(),
                 str(API_VERSION).encode()):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


def _compile_error(source: Path, command: list[str], stderr: str) -> KernelBuildError:
    lines = [line for line in stderr.splitlines() if line.strip()]
    where = re.compile(r"^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?P<column>\d+:)?\s*(fatal )?error:")
    errors = [i for i, line in enumerate(lines) if where.match(line)]
    if errors:
        first = errors[0]
        match = where.match(lines[first])
        quoted = lines[first:first + ERROR_LINES]
        place = f"{match['file']}:{match['line']}"
    else:
        quoted = lines[:ERROR_LINES]
        place = str(source)
    text = "\n  ".join(quoted) or "(the compiler said nothing)"
    return KernelBuildError(f"{place}: the kernel {source.name} does not compile ({shlex.join(command[:1])} "
                            f"exited with an error):\n  {text}")


def build(source: str | os.PathLike, *, cache: str | os.PathLike | None = None,
          include: str | os.PathLike | None = None) -> Build:
    """Compile the kernel file ``source`` into a shared object in the cache (``cache``, default
    :func:`cache_dir`), or find it there when the source, the header, the compiler, its flags
    and the API version are unchanged. :class:`KernelBuildError` (a ValueError) with the compiler's
    first error lines when it does not compile; FileNotFoundError when there is no such file.
    ``include``: a directory for the file's own headers (default: the file's).
    """
    path = Path(source).expanduser().resolve()
    if not path.is_file():
        raise FileNotFoundError(2, f"kernel file {source} does not exist", str(source))
    started = time.perf_counter()
    source_bytes = path.read_bytes()
    compiler, flags = compiler_command()
    key = _build_key(source_bytes, compiler, flags)
    folder = Path(cache).expanduser() if cache is not None else cache_dir()
    folder = folder / "kernels"
    target = folder / f"{path.stem}-{key[:24]}.so"
    kernel_sha256 = hashlib.sha256(source_bytes).hexdigest()
    if target.is_file():
        return Build(path, target, kernel_sha256, compiler, flags, True, time.perf_counter() - started)
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".so", dir=folder)
    os.close(handle)
    try:
        # the bytes hashed are the bytes compiled: a copy, so an edit meanwhile cannot slip in
        with tempfile.TemporaryDirectory(prefix="memlab-kernel-") as scratch:
            copy = Path(scratch) / path.name
            copy.write_bytes(source_bytes)
            own = Path(include) if include is not None else path.parent
            command = [*compiler, *flags, f"-I{include_dir()}", f"-I{own}", str(copy), "-o", temporary]
            result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise _compile_error(path, command, result.stderr.replace(str(copy), str(path)))
        os.replace(temporary, target)  # whole or absent: never half a shared object under its key
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return Build(path, target, kernel_sha256, compiler, flags, False, time.perf_counter() - started)


# --------------------------------------------------------------------------
# the family of a loaded kernel

def _params_type(name: str, params: list[Mapping[str, Any]]) -> type:
    """A frozen params dataclass checking each parameter as the kernel's table declares it."""
    fields = [(p["name"], _TYPES[p["kind"]], dataclasses.field(default=p["default"])) for p in params]
    docs = "\n".join(f"``{p['name']}``: {(p.get('help') or p['name']).rstrip('.')}"
                     + (f" (in {p['unit']})" if p.get("unit") and not unit_of(p["name"]) else "") + "."
                     for p in params)

    def __post_init__(self) -> None:
        coerce_fields(self)
        for p in params:
            value = getattr(self, p["name"])
            if p["kind"] == "int":
                check_int(p["name"], value, p["min"], p["max"])
            elif p["kind"] == "float":
                check_number(p["name"], value, p["min"], p["max"])
            elif p["kind"] == "bool":
                check_bool(p["name"], value)
            else:
                check_choice(p["name"], value, p["choices"])

    title = "".join(part.capitalize() for part in name.split("_")) + "Params"
    cls = dataclasses.make_dataclass(title, fields, frozen=True, namespace={"__post_init__": __post_init__})
    cls.__doc__ = docs or "The kernel has no parameters."
    cls.__module__ = __name__
    return cls


def default_figure(data: Dataset | str | os.PathLike):
    """A kernel family's figure: its primary metric against the first parameter the sweep varies
    (lines for a number, bars otherwise)."""
    ds = chart.as_dataset(data)
    metric = ds.primary_metric()
    rows = chart.rows_with(ds, metric)
    changing = chart.varying(rows, ds.param_names)
    if changing and all(isinstance(r.get(changing[0]), (int, float)) for r in rows):
        return chart.line_figure(ds, changing[0], metric, title=f"{ds.metadata.get('family', '')}: {metric}")
    return chart.bars_figure(ds, metric)


def _quick_sweep(name: str, defaults: Mapping[str, Any]) -> Sweep:
    return Sweep(name="quick", family=name, points=[dict(defaults)], repeat=3)


def family_of(description: Mapping[str, Any], build_info: Build | None = None) -> Family:
    """The :class:`Family` of a loaded kernel (``description``: what ``_core.load_kernel`` returned)."""
    name, unit = description["name"], description.get("unit") or "iteration"
    params = list(description["params"])
    params_type = _params_type(name, params)
    defaults = {p["name"]: p["default"] for p in params}
    metadata: dict[str, Any] = {}
    if build_info is not None:
        metadata = {"kernel_sha256": build_info.kernel_sha256, "kernel": build_info.metadata()}
    return Family(
        name=name,
        params_type=params_type,
        core=name,
        unit=unit,
        primary_metric=description.get("primary_metric") or f"ns_per_{unit}",
        sweeps={"quick": lambda: _quick_sweep(name, defaults)},
        description=description.get("description") or f"user kernel {name}",
        figure=default_figure,
        caption=f"{description.get('description') or name} (a user kernel"
                + (f", {build_info.source.name}" if build_info else "") + "): its primary metric against "
                "the first parameter the sweep varies; the band is each point's min..max over its repetitions.",
        metadata=metadata,
    )


_BUILT: dict[Path, Family] = {}
#: The keywords of Family.run that are options, not parameters.
_RUN_OPTIONS = ("repeat", "warmup", "cpu", "target_seconds", "counters")


def kernel_family(source: str | os.PathLike, *, cache: str | os.PathLike | None = None) -> Family:
    """Build (or find in the cache) the kernel file ``source``, load it and register its family for
    the life of the process; the :class:`Family`. A newer source of the same file replaces the
    family of its name; a file built before is not loaded twice.
    """
    return _load(build(source, cache=cache))


def _load(built: Build) -> Family:
    family = _BUILT.get(built.shared_object)
    if family is None:
        description = load_kernel(str(built.shared_object))
        source_text = built.source.read_text(errors="replace")
        prelude = ("memlab.userkernel:load_in_worker",
                   {"source_text": source_text, "file_name": built.source.name, "include": str(built.source.parent),
                    "kernel_sha256": built.kernel_sha256})
        family = dataclasses.replace(family_of(description, built), prelude=prelude)
        _BUILT[built.shared_object] = family
    register(family, replace=True)
    return family


def load_in_worker(source_text: str, file_name: str, include: str, kernel_sha256: str) -> Family:
    """A worker process's prelude (memlab.worker): build the kernel source the parent measured, kept
    in the cache under its hash (the parent's file may have changed since), and register its family.
    ValueError when the text is not the source of ``kernel_sha256``."""
    data = source_text.encode()
    if hashlib.sha256(data).hexdigest() != kernel_sha256:
        raise ValueError(f"{file_name}: the kernel source handed to the worker is not the one of "
                         f"kernel_sha256={kernel_sha256[:12]}")
    folder = cache_dir() / "sources" / kernel_sha256[:24]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name
    if not path.is_file() or path.read_bytes() != data:
        path.write_bytes(data)
    return _load(build(path, include=include))


def measurement_from_row(family: Family, row: Mapping[str, Any]) -> Measurement:
    """The :class:`memlab.measure.Measurement` a dataset row was made of (its samples from the
    ``_samples`` columns, its counters' medians, its context): what an isolated run hands back."""
    params = {name: row[name] for name in family.param_names if name in row}
    samples: list[dict[str, float]] = []
    for column, values in row.items():
        if not column.endswith("_samples") or column == "warmup_samples" or not isinstance(values, list):
            continue
        name = column[: -len("_samples")]
        if name.startswith("measured_") and name[len("measured_"):] in params:
            name = name[len("measured_"):]
        for index, value in enumerate(values):
            while len(samples) <= index:
                samples.append({})
            if isinstance(value, (int, float)) and value == value:
                samples[index][name] = float(value)
    counters = [{column[len("counter_"):]: value for column, value in row.items()
                 if column.startswith("counter_") and isinstance(value, (int, float)) and value == value}]
    context = {column[len("context_"):]: value for column, value in row.items() if column.startswith("context_")}
    warmup = [{family.primary_metric: v} for v in row.get("warmup_samples") or []]
    return Measurement(family.name, params, samples, counters, dict(row.get("counters_missing") or {}),
                       str(row.get("counters_scope") or ""), warmup, family.primary_metric or "elapsed_ns", context)


def run_isolated(family: Family, params: Any = None, *, timeout_seconds: float | None = None,
                 **options: Any) -> Measurement:
    """One point of a kernel family measured in a worker process (memlab.worker): a kernel that
    crashes is a :class:`memlab.worker.WorkerFailed` (a RuntimeError: "killed by SIGSEGV") and this
    process goes on."""
    if family.prelude is None:
        raise ValueError(f"isolate=True: family {family.name!r} is not a kernel file's")
    overrides = {name: options.pop(name) for name in list(options) if name not in _RUN_OPTIONS}
    point = dataclasses.asdict(family.params(params, **overrides))
    prelude, prelude_args = family.prelude
    result = worker.measure_run(family.name, point, options, prelude=prelude, prelude_args=prelude_args,
                                timeout_seconds=timeout_seconds)
    return measurement_from_row(family, result.rows[0])


def run(source: str | os.PathLike, params: Any = None, *, isolate: bool = False, **options: Any) -> Measurement:
    """Measure one point of the kernel file ``source``: ``memlab.run("./probe.c", size_bytes=4096)``;
    ``isolate=True`` measures it in a worker process (:func:`run_isolated`)."""
    if isolate is not True and isolate is not False:
        raise ValueError(f"isolate={isolate!r} must be True or False")
    family = kernel_family(source)
    return run_isolated(family, params, **options) if isolate else family.run(params, **options)
