"""What every experiment family declares, and the checks its parameters share.

A family module (``memlab/chase.py`` ...) builds one :class:`Family`::

    FAMILY = Family(
        name="chase",
        params_type=ChaseParams,     # frozen dataclass validating itself
        core="chase",                # the C family (ML_FAMILY(chase) in csrc/chase.c)
        to_core=_to_core,            # params -> the C config dict
        unit="element",              # gives ns_per_element, cycles_per_element
        sweeps={"quick": quick_sweep, "fig3_10": fig3_10_sweep},
        figure=figure,               # Dataset -> its standard matplotlib figure
        caption="Time per element of a walk through a linked list ...",
        report_columns=("cycles_per_element",),
    )

and is listed in ``memlab/registry.py``. A family module imports only the
layers below it (``memlab.grid``, ``memlab.family``, ``memlab.measure``,
``memlab.dataset``, ``memlab.chart``, ``memlab.units``, ``memlab.machine``),
never the runner, the registry, the views or another family.
"""

from __future__ import annotations

import contextvars
import dataclasses
import math
import numbers
import os
import re
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from memlab.conditions import ONE_BUSY_THREAD, OnCpu, expected_on_cpu
from memlab.dataset import COLUMN_ALIASES, NEGATED_ALIASES, check_param_name
from memlab.grid import Sweep
from memlab.measure import Measurement, measure
from memlab.placement import check_cpu as _check_one_cpu, cpu_not_applicable
from memlab.units import format_bytes, format_param, is_bytes_name, suggest, unit_of

__all__ = [
    "Family",
    "OnCpu",
    "ParamSpec",
    "describe_params",
    "check_bool",
    "check_choice",
    "check_cpu",
    "check_int",
    "check_number",
    "coerce_fields",
    "coerce_params",
    "param_defaults",
    "param_rules",
    "renamed_params",
    "ONE_CPU",
]

#: What ``cpu=`` of :meth:`Family.run` does in a family (every measuring thread on that one CPU):
#: ``caller`` pins the calling thread, which measures; ``workers`` passes the CPU to ``to_core``
#: (``to_core(params, cpu=cpu)``), which puts every worker thread there, the calling thread only
#: waiting where it is; ``refused`` raises :class:`memlab.placement.CpuNotApplicable` with
#: ``one_cpu_refusal`` (how the family places its threads).
ONE_CPU = ("caller", "workers", "refused")


@dataclass(frozen=True)
class Family:
    """An experiment family: its parameters, its kernel, its sweeps and how it is shown.

    Measuring: ``params_type`` (a frozen dataclass validating itself),
    ``core`` (the C family's name) with ``to_core`` (params -> C config), or
    ``python_sample`` (a sample timed in Python); ``unit`` names the derived
    ``ns_per_<unit>``; ``derive(params, values)`` adds metrics computed from a
    sample (``values``: its metrics, and its counters as ``counter_<name>``
    where they opened).
    Presenting: ``figure(dataset)`` draws the family's standard figure (a
    matplotlib Figure, from the kinds in :mod:`memlab.chart`; None: the
    generic one), ``caption`` says in a sentence or two how to read it (or,
    a function of the dataset, says it per sweep), and
    ``report_columns`` lists metrics worth a column of their own in the
    report's table (shown when present). ``sample_seconds(params, target)``
    says how long one sample of a point lasts when that is not the target
    duration (a sample of fixed length, a pause before it): the runner's
    duration estimate (``memlab sweep --list``) uses it, and ``setup_seconds(params)`` how long a
    run of a point takes beyond its samples (building its list or region, the first touch, the run
    loop's own work; None: :data:`memlab.runner.POINT_OVERHEAD_SECONDS`). ``one_cpu`` says what
    ``cpu=`` does (:data:`ONE_CPU`).

    A family whose result is a number or a table rather than a picture sets
    ``figure=None`` and gives ``headline(dataset)`` (one sentence with the
    number, shown in large type) and/or ``table(dataset)`` (header and
    cells, with units, shown instead of the generic table).

    ``metadata`` goes into every dataset of the family: a user kernel's
    ``kernel_sha256`` and build (memlab.userkernel), which resume and the
    pytest guard compare. ``prelude`` (``"module:function"`` and its keyword
    arguments) is what a worker process (memlab.worker) runs first to know
    the family: a user kernel's builds and registers it there.
    """

    name: str
    params_type: type
    core: str | None = None
    to_core: Callable[[Any], Mapping[str, Any]] | None = None
    python_sample: Callable[[Any, float], Mapping[str, Any]] | None = None
    unit: str | None = None
    primary_metric: str | None = None
    derive: Callable[[Any, dict[str, float]], Mapping[str, float]] | None = None
    sweeps: Mapping[str, Callable[[], Any]] = field(default_factory=dict)
    description: str = ""
    default_repeat: int = 5
    default_warmup: int = 1
    default_target_seconds: float = 0.1
    figure: Callable[[Any], Any] | None = None
    caption: str | Callable[[Any], str] = ""
    report_columns: tuple[str, ...] = ()
    sample_seconds: Callable[[Any, float], float] | None = None
    setup_seconds: Callable[[Any], float] | None = None
    headline: Callable[[Any], str] | None = None
    table: Callable[[Any], tuple[list[str], list[list[str]]]] | None = None
    one_cpu: str = "caller"
    one_cpu_refusal: str = ""
    on_cpu: Callable[[Any], Sequence[OnCpu]] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    prelude: tuple[str, Mapping[str, Any]] | None = None

    def __post_init__(self) -> None:
        if self.one_cpu not in ONE_CPU:
            raise ValueError(f"family {self.name!r}: one_cpu={self.one_cpu!r} is not one of {ONE_CPU}")
        if self.one_cpu == "refused" and not self.one_cpu_refusal:
            raise ValueError(f"family {self.name!r}: one_cpu='refused' needs one_cpu_refusal, the reason")
        for name in self.param_names:
            try:
                check_param_name(name)
            except ValueError as error:
                raise ValueError(f"family {self.name!r}: {error}") from None

    @property
    def param_names(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self.params_type)]

    def caption_for(self, dataset: Any) -> str:
        """How to read this dataset's figure: ``caption``, or ``caption(dataset)`` when it is a function
        (a family whose sweeps draw different figures).

        >>> @dataclasses.dataclass(frozen=True)
        ... class NoParams:
        ...     pass
        >>> Family("f", NoParams, caption="Read it left to right.").caption_for(None)
        'Read it left to right.'
        """
        return self.caption(dataset) if callable(self.caption) else self.caption

    def params(self, params: Any = None, **overrides: Any) -> Any:
        """Coerce a dict, a params object or keywords into the params type; a parameter's old
        name (:data:`memlab.dataset.COLUMN_ALIASES`) is taken with a DeprecationWarning."""
        if isinstance(params, Mapping):
            params = renamed_params(self.name, params, set(self.param_names))
        return coerce_params(self.params_type, params, renamed_params(self.name, overrides, set(self.param_names)),
                             f"family {self.name!r}")

    def defaults(self) -> dict[str, Any]:
        """Each parameter's default value (see :func:`param_defaults`)."""
        return param_defaults(self.params_type)

    def required_params(self) -> list[str]:
        """The parameters that always have a value (see :func:`required_params`)."""
        return required_params(self.params_type)

    def on_cpu_parts(self, params: Any = None) -> tuple[OnCpu, ...]:
        """The threads and processes of a point that should be on a CPU, with their shares
        (``on_cpu(params)``; one busy thread for a family that does not say).

        >>> @dataclasses.dataclass(frozen=True)
        ... class NoParams:
        ...     pass
        >>> [part.who for part in Family("f", NoParams).on_cpu_parts()]
        ['the measuring thread']
        """
        if self.on_cpu is None:
            return ONE_BUSY_THREAD
        return tuple(self.on_cpu(self.params(params)))

    def expected_on_cpu(self, params: Any = None, cpu: int | None = None) -> float:
        """The on-CPU fraction a point should reach (:func:`memlab.conditions.expected_on_cpu` of
        :meth:`on_cpu_parts`), at most the CPUs it may use: one with ``cpu``, else the caller's
        affinity."""
        cpus = 1 if cpu is not None else len(os.sched_getaffinity(0))
        return expected_on_cpu(self.on_cpu_parts(params), cpus)

    def run(
        self,
        params: Any = None,
        *,
        repeat: int | None = None,
        warmup: int | None = None,
        cpu: int | None = None,
        target_seconds: float | None = None,
        counters: bool = True,
        **overrides: Any,
    ) -> Measurement:
        """Measure one point; keywords not listed here are parameters."""
        checked = self.params(params, **overrides)
        param_dict = dataclasses.asdict(checked)
        workers_cpu = None
        if cpu is not None:
            if self.one_cpu == "refused":
                raise cpu_not_applicable(self.name, cpu, self.one_cpu_refusal)
            cpu = _check_one_cpu(cpu)
            if self.one_cpu == "workers":  # the workers go there; the calling thread only waits
                workers_cpu, cpu = cpu, None
        config = None
        if self.core is not None:
            if workers_cpu is not None:
                config = self.to_core(checked, cpu=workers_cpu)
            else:
                config = self.to_core(checked) if self.to_core else param_dict
        python_sample = None
        if self.python_sample is not None:
            sample_fn = self.python_sample

            def python_sample(target: float) -> Mapping[str, Any]:
                return sample_fn(checked, target)

        derive = None
        if self.derive is not None:
            derive_fn = self.derive

            def derive(_: Any, values: dict[str, float]) -> Mapping[str, float]:
                return derive_fn(checked, values)

        measurement = measure(
            self.name,
            param_dict,
            core=self.core,
            config=config,
            python_sample=python_sample,
            unit=self.unit,
            primary_metric=self.primary_metric,
            derive=derive,
            repeat=self.default_repeat if repeat is None else repeat,
            warmup=self.default_warmup if warmup is None else warmup,
            cpu=cpu,
            target_seconds=self.default_target_seconds if target_seconds is None else target_seconds,
            counters=counters,
        )
        if workers_cpu is not None:
            measurement.context["cpu"] = workers_cpu
        one = workers_cpu if workers_cpu is not None else cpu
        measurement.context["on_cpu_expected"] = self.expected_on_cpu(checked, one)
        return measurement

    def sweep(self, name: str) -> Sweep | list[Sweep]:
        """The named sweep (a :class:`memlab.grid.Sweep`, or a list of them)."""
        try:
            factory = self.sweeps[name]
        except KeyError:
            known = ", ".join(sorted(self.sweeps)) or "none"
            raise ValueError(f"sweep={name!r} is not a sweep of {self.name}{suggest(name, self.sweeps)} "
                             f"(known: {known})") from None
        return factory()

    @property
    def has_figure(self) -> bool:
        """Whether the family's data is shown as a figure (its own, or the generic one)."""
        return self.figure is not None or (self.headline is None and self.table is None)

    def describe_params(self) -> list["ParamSpec"]:
        """Each parameter's name, type, default, allowed values, unit and help (see :func:`describe_params`)."""
        return describe_params(self.params_type)


def renamed_params(family: str, given: Mapping[str, Any], names: set[str]) -> dict[str, Any]:
    """``given`` with each old parameter name of ``family`` (:data:`memlab.dataset.COLUMN_ALIASES`)
    under its new one, and one DeprecationWarning line per old name; a value whose new name says
    the opposite (:data:`memlab.dataset.NEGATED_ALIASES`) is negated.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     renamed_params("share", {"disp": 8}, {"disp_longs"})
    {'disp_longs': 8}
    """
    aliases = COLUMN_ALIASES.get(family, {})
    negated = NEGATED_ALIASES.get(family, frozenset())
    renamed: dict[str, Any] = {}
    for name, value in given.items():
        new = aliases.get(name)
        if new is None or new not in names or name in names:
            renamed[name] = value
            continue
        if new in given:
            raise ValueError(f"{name}= and {new}= are one parameter of {family} ({name} is its old name): give {new}")
        warnings.warn(f"{family}: parameter {name}= is now {new}=" + (" (negated)" if name in negated else ""),
                      DeprecationWarning, stacklevel=3)
        renamed[new] = (not value) if name in negated and isinstance(value, bool) else value
    return renamed


def coerce_params(params_type: type, params: Any, overrides: Mapping[str, Any], owner: str = "") -> Any:
    """Build params_type from None, a mapping, or an instance plus overrides.

    ``owner`` names whose parameters these are in an error (``family 'chase'``);
    by default the params type's name.

    >>> @dataclasses.dataclass(frozen=True)
    ... class SizeParams:
    ...     size_bytes: int = 4096
    >>> coerce_params(SizeParams, None, {"sise_bytes": 1}, "family 'f'")
    Traceback (most recent call last):
    ...
    ValueError: unknown parameter 'sise_bytes' of family 'f'; did you mean 'size_bytes'? (known: size_bytes)
    """
    if params is None:
        base: dict[str, Any] = {}
    elif isinstance(params, params_type):
        base = dataclasses.asdict(params)
    elif isinstance(params, Mapping):
        base = dict(params)
    else:
        raise ValueError(
            f"params={params!r} must be a {params_type.__name__}, a dict or None"
        )
    base.update(overrides)
    known = {f.name for f in dataclasses.fields(params_type)}
    unknown = sorted(set(base) - known)
    if unknown:
        raise ValueError(
            f"unknown parameter {unknown[0]!r} of {owner or params_type.__name__}{suggest(unknown[0], known)} "
            f"(known: {', '.join(sorted(known)) or 'none'})"
        )
    return params_type(**base)


# --------------------------------------------------------------------------
# what a parameter accepts, read from the checks themselves

#: While describe_params() builds a params object with its defaults, the
#: check_* functions below append what they were asked to check here.
_RULES: contextvars.ContextVar[list | None] = contextvars.ContextVar("memlab_param_rules", default=None)


def _record(name: str, **rule: Any) -> None:
    rules = _RULES.get()
    if rules is not None:
        rules.append({"name": name, **rule})


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a family, as ``memlab run FAMILY --help`` lists it.

    ``type`` is the dataclass field's type; ``allowed`` the range or choices
    its check accepts (as text); ``unit`` the unit its name carries;
    ``help`` the first sentence the params docstring says about it.
    """

    name: str
    type: str
    default: Any
    allowed: str
    unit: str
    help: str

    @property
    def default_text(self) -> str:
        if self.default is None:
            return "None"
        if isinstance(self.default, int) and not isinstance(self.default, bool) and is_bytes_name(self.name):
            return format_bytes(self.default).replace(" ", "") if self.default >= 1024 else str(self.default)
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        if self.default == "":
            return '""'
        return format_param(self.name, self.default)


def _bound(name: str, value: float) -> str:
    if isinstance(value, int) and is_bytes_name(name) and value >= 1024:
        return format_bytes(value).replace(" ", "")
    if isinstance(value, int) and value >= 1 << 20 and value & (value - 1) == 0:
        return f"2^{value.bit_length() - 1}"
    if isinstance(value, int) and value >= (1 << 62):
        return f"2^{round(math.log2(value))}"
    if isinstance(value, float) and value.is_integer():
        return f"{int(value):,}"
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _allowed_text(name: str, rule: Mapping[str, Any] | None) -> str:
    if rule is None:
        return ""
    kind = rule["kind"]
    if kind == "choice":
        return ", ".join(map(str, rule["choices"]))
    if kind == "bool":
        return "true, false"
    low, high = rule.get("minimum"), rule.get("maximum")
    if low is not None and high is not None:
        if rule.get("exclusive_minimum"):
            return f"above {_bound(name, low)}, up to {_bound(name, high)}"
        return f"{_bound(name, low)} .. {_bound(name, high)}"
    if low is not None:
        return f"> {_bound(name, low)}" if rule.get("exclusive_minimum") else f">= {_bound(name, low)}"
    if high is not None:
        return f"<= {_bound(name, high)}"
    return "any integer" if kind == "int" else "any number"


def _docstring_help(doc: str, name: str) -> str:
    """The first sentence the params docstring writes after ``name``: (or ``name``:)."""
    text = " ".join(doc.split())
    match = re.search(rf"(?:``{re.escape(name)}``|(?<![\w`]){re.escape(name)})(?: \([^)]*\))?: (.+)", text)
    if not match:
        return ""
    rest = re.split(r" - ``|\s``\w+``(?: \([^)]*\))?: ", match.group(1))[0]
    sentence = re.split(r"(?<=[a-z0-9)\]])\. (?=[A-Z`])", rest)[0].strip().rstrip(".")
    while sentence.endswith(")") and sentence.count(")") > sentence.count("("):
        sentence = sentence[:-1].rstrip(".")  # the help sat inside a parenthesis: "(``name``: ...)"
    return sentence + "." if sentence else ""


def param_rules(params_type: type) -> dict[str, dict]:
    """What each parameter's check accepts, as the check_* calls of ``params_type`` record it:
    ``{name: {"kind": "int", "minimum": ..., "maximum": ...}}`` (``choice``: ``choices``).

    >>> from memlab.calibrate import CalibrateParams
    >>> param_rules(CalibrateParams)["budget_ns"]["minimum"]
    1000000
    """
    rules: dict[str, dict] = {}
    for rule in _recorded_rules(params_type, {}):
        rules.setdefault(rule["name"], rule)
    for f in dataclasses.fields(params_type):
        if f.name in rules or "int" not in str(f.type):
            continue
        # An optional number (None by default) is checked only when given: try a few.
        for probe in (1, 4096, 1 << 20, 0):
            try:
                found = [r for r in _recorded_rules(params_type, {f.name: probe}) if r["name"] == f.name]
            except (ValueError, TypeError):
                continue
            if found:
                rules[f.name] = found[0]
                break
    return rules


def describe_params(params_type: type) -> list[ParamSpec]:
    """Every parameter of ``params_type`` with its type, default, allowed values, unit and help.

    Read from the class itself, so it cannot drift from what the class
    accepts: names, types and defaults from the dataclass fields, allowed
    values from the check_* calls its ``__post_init__`` makes on the
    defaults, units from the names, help from its docstring (or its module's
    when the class's does not describe the parameter).

    >>> from memlab.calibrate import CalibrateParams
    >>> spec = describe_params(CalibrateParams)[0]
    >>> spec.name, spec.type, spec.default, spec.allowed, spec.unit
    ('budget_ns', 'int', 100000000, '1,000,000 .. 60,000,000,000', 'ns')
    """
    rules = param_rules(params_type)
    fields = dataclasses.fields(params_type)
    # A params class may leave its parameters to the module docstring ("see the module docstring").
    module = sys.modules.get(params_type.__module__)
    docs = [params_type.__doc__ or "", getattr(module, "__doc__", None) or ""]
    specs = []
    for f in fields:
        type_text = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        default = f.default if f.default is not dataclasses.MISSING else None
        allowed = _allowed_text(f.name, rules.get(f.name))
        if default is None and allowed:
            allowed = f"None or {allowed}"
        specs.append(ParamSpec(name=f.name, type=type_text, default=default, allowed=allowed,
                               unit="" if type_text == "bool" else unit_of(f.name),
                               help=next((h for h in (_docstring_help(d, f.name) for d in docs) if h),
                                         "").replace("``", "")))
    return specs


def _recorded_rules(params_type: type, values: Mapping[str, Any]) -> list[dict]:
    """The checks ``params_type(**values)`` runs, as recorded by the check_* functions."""
    token = _RULES.set([])
    try:
        params_type(**values)
        return list(_RULES.get() or [])
    finally:
        _RULES.reset(token)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"  # numpy.bool_


def check_int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return value as an int if it is an integer within [minimum, maximum], else ValueError.

    Python and numpy integers are integers, and so is an integral float
    (48.0, what a grid of floats or a CSV may give); bools are not.

    >>> check_int("n", 48.0), check_int("n", 7, 1, 8)
    (48, 7)
    """
    _record(name, kind="int", minimum=minimum, maximum=maximum)
    if _is_bool(value):
        raise ValueError(f"{name}={value!r} must be an integer")
    if isinstance(value, numbers.Integral):
        value = int(value)
    elif isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        value = int(value)
    else:
        raise ValueError(f"{name}={value!r} must be an integer")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}={value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}={value} is above the maximum {maximum}")
    return value


def check_number(
    name: str, value: Any, minimum: float | None = None, maximum: float | None = None,
    *, exclusive_minimum: bool = False,
) -> float:
    """Return value as a float if it is a finite number in range, else ValueError."""
    _record(name, kind="number", minimum=minimum, maximum=maximum, exclusive_minimum=exclusive_minimum)
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}={value!r} must be a number")
    value = float(value)
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{name}={value} must be finite")
    if minimum is not None:
        if exclusive_minimum and value <= minimum:
            raise ValueError(f"{name}={value:g} must be above {minimum:g}")
        if not exclusive_minimum and value < minimum:
            raise ValueError(f"{name}={value:g} is below the minimum {minimum:g}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name}={value:g} is above the maximum {maximum:g}")
    return value


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """Return value if it is one of choices, else ValueError listing them (and the closest).

    >>> check_choice("order", "randon", ["sequential", "random"])
    Traceback (most recent call last):
    ...
    ValueError: order='randon' is not one of 'sequential', 'random'; did you mean 'random'?
    """
    _record(name, kind="choice", choices=tuple(choices))
    if not isinstance(value, str) or value not in choices:
        hint = suggest(value, choices) if isinstance(value, str) else ""
        raise ValueError(f"{name}={value!r} is not one of {', '.join(map(repr, choices))}{hint}")
    return value


def check_bool(name: str, value: Any) -> bool:
    """Return value if it is a bool (or 0/1), else ValueError."""
    _record(name, kind="bool")
    if _is_bool(value):
        return bool(value)
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    raise ValueError(f"{name}={value!r} must be True or False")


def check_cpu(name: str, value: Any, *, none: Any = None) -> int | None:
    """Return value if it is a CPU this process may run on (``os.sched_getaffinity(0)``), else ValueError.

    ``none`` is the value meaning "no CPU chosen" (None, or -1 for some
    kernels), returned as it is. A CPU outside the caller's affinity (``taskset``,
    a cpuset) is refused: memlab never runs anything where its caller may not.

    >>> check_cpu("writer_cpu", None) is None
    True
    """
    if value is none or (none is not None and not _is_bool(value) and value == none):
        return none
    cpu = check_int(name, value, 0)
    allowed = sorted(os.sched_getaffinity(0))
    if cpu not in allowed:
        raise ValueError(f"{name}={cpu} is not among the CPUs this process may run on {_cpu_list(allowed)}")
    return cpu


def _cpu_list(cpus: Sequence[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    parts, start = [], None
    for index, cpu in enumerate(cpus):
        if start is None:
            start = cpu
        if index + 1 == len(cpus) or cpus[index + 1] != cpu + 1:
            parts.append(str(start) if start == cpu else f"{start}-{cpu}")
            start = None
    return "(" + ",".join(parts) + ")"


def _field_kinds(annotation: Any) -> set[str]:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    return {part.strip() for part in text.split("|")}


def coerce_fields(params: Any) -> None:
    """Give a params dataclass's fields plain Python values of their declared types, in place.

    Call it first in ``__post_init__``: numpy scalars become Python values,
    an integral float in an ``int`` field becomes an int (``n=48.0`` -> 48),
    an int in a ``float`` field a float, 0/1 in a ``bool`` field a bool.
    Anything else is left for the field's check to refuse.
    """
    for item in dataclasses.fields(params):
        value = getattr(params, item.name)
        kinds = _field_kinds(item.type)
        new = value
        if _is_bool(value):
            new = bool(value)
            if "bool" not in kinds:
                new = value  # True is no integer here: the field's check refuses it
        elif isinstance(value, numbers.Integral):
            new = int(value)
            if "bool" in kinds and new in (0, 1) and "int" not in kinds:
                new = bool(new)
            elif "float" in kinds and "int" not in kinds:
                new = float(new)
        elif isinstance(value, numbers.Real):
            new = float(value)
            if "int" in kinds and math.isfinite(new) and new.is_integer():
                new = int(new)
        elif isinstance(value, str) and type(value) is not str:
            new = str.__str__(value)
        if new is not value:
            object.__setattr__(params, item.name, new)


def required_params(params_type: type) -> list[str]:
    """The parameters whose declared type does not take None: a row without a value there is damaged.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class P:
    ...     n: int
    ...     cpu: int | None = None
    >>> required_params(P)
    ['n']
    """
    required = []
    for item in dataclasses.fields(params_type):
        kinds = _field_kinds(item.type)
        if item.default is None or kinds & {"None", "Any", "typing.Any"} or "Optional" in str(item.type):
            continue
        required.append(item.name)
    return required


def param_defaults(params_type: type) -> dict[str, Any]:
    """The default of every parameter that has one ({name: value}).

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class P:
    ...     n: int
    ...     order: str = "random"
    >>> param_defaults(P)
    {'order': 'random'}
    """
    defaults = {}
    for item in dataclasses.fields(params_type):
        if item.default is not dataclasses.MISSING:
            defaults[item.name] = item.default
        elif item.default_factory is not dataclasses.MISSING:
            defaults[item.name] = item.default_factory()
    return defaults
