"""pytest plugin: guard a user's own test suite against performance regressions.

Registered through the ``pytest11`` entry point, so installing memlab makes
the ``memlab_regression`` fixture available everywhere. A test hands it a
sweep (or an already measured dataset)::

    import memlab

    def test_chase_latency(memlab_regression):
        sweep = memlab.Sweep("guard", "chase",
                             memlab.grid(working_set_bytes=[2**14, 2**22]), repeat=9)
        memlab_regression.check(sweep)

``pytest --memlab-save-baseline`` measures and stores the baseline dataset
(one per test, under ``--memlab-baseline-dir``, default ``memlab-baselines``
next to the rootdir, named after the test id and a hash of it:
:func:`baseline_stem`); a later plain ``pytest`` measures again and fails the
test with the comparison table when a significant regression of at least
``--memlab-fail-above`` (default 5%) appears. The guard judges on the run
level: it measures ``--memlab-runs`` runs (default 3) of every point, stores
them in the baseline (a ``run`` column) and compares runs with runs. Every run's
dataset is stored under ``history/`` in the baseline directory, named by time and
machine fingerprint; a failing run's dataset is also kept beside the baseline
(``NAME.failed.csv``) and named in the failure. ``pytest --memlab-history``
lists the stored runs of every test and compares each with its baseline.
Inconclusive points, points found on one side only and machine differences
never fail a test: they raise a
:class:`MemlabRegressionWarning` (``--memlab-require-same-machine`` turns a
baseline from another machine into a failure). A missing or unreadable baseline fails the
test with a message saying how to record one. See docs/regression.md.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

import pytest

from memlab.compare import DatasetReadError, compare, load_dataset, metadata_fingerprint, parse_fraction
from memlab.conditions import MemlabWarning
from memlab.dataset import RUN_COLUMN, Dataset, run_index
from memlab.grid import Sweep
from memlab.machine import collect, fingerprint, fingerprint_id
from memlab.runner import Run
from memlab.significance import INCONCLUSIVE

__all__ = ["MemlabRegressionWarning", "RegressionGuard", "baseline_stem", "history_report"]

#: The longest readable part of a baseline's file name. With the hash, ``.failed.json`` and the
#: additions of a temporary file (``.<name>.<pid>.<random>.memlab-tmp``) the name stays far below
#: the 255 bytes a file name may have; the hash of the full id keeps two ids apart however long.
MAX_NAME_PREFIX = 96
#: Where, under the baseline directory, every run's dataset is stored (one folder per baseline).
HISTORY_DIR = "history"
#: What a failing run's dataset adds to the baseline's name, beside it.
FAILED_SUFFIX = ".failed"


def _legacy_stem(key: str) -> str:
    """The file name the guard gave a baseline before names were bounded and hashed."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", key).strip("_.") or "baseline"


def baseline_stem(key: str) -> str:
    """The file name (without suffix) of the baseline of a test id or a ``check(name=...)``:
    the id made readable (letters, digits, ``_.-``), cut to :data:`MAX_NAME_PREFIX`
    characters, and 12 hex digits of the SHA-256 of the whole id, so that two ids never
    share a file (``a/b`` and ``a_b`` did) and a long parametrized id fits a file name.

    >>> baseline_stem("tests/test_speed.py::test_chase[4096]")
    'tests_test_speed.py_test_chase_4096-0ac6239c0ffc'
    """
    readable = _legacy_stem(key)[:MAX_NAME_PREFIX].rstrip("_.-") or "baseline"
    return f"{readable}-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:12]}"


DEFAULT_RUNS = 3
"""Runs of every point the guard measures: a sweep is run this many times (rounds), a
callable called this many times. 3 keeps a guard's cost at three sweeps; with between-run
noise twice the threshold, 3 runs a side give a false verdict for 2-4% of points, 5 runs
for under 2.5% (tests/test_compare.py, docs/regression.md)."""


class MemlabRegressionWarning(MemlabWarning):
    """A comparison the guard could not judge fully (noise, unmatched points,
    different machine); one of memlab's warnings (:class:`memlab.conditions.MemlabWarning`)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("memlab", "memlab performance regression guard")
    group.addoption(
        "--memlab-save-baseline", action="store_true", default=False,
        help="measure and store baselines for memlab_regression instead of comparing",
    )
    group.addoption(
        "--memlab-baseline-dir", default=None, metavar="DIR",
        help="directory of baseline datasets (default: ini memlab_baseline_dir, "
        "else memlab-baselines under the rootdir)",
    )
    group.addoption(
        "--memlab-fail-above", default=None, metavar="PERCENT",
        help="fail on a significant regression of at least this much, e.g. 5%% (default 5%%)",
    )
    group.addoption(
        "--memlab-fail-on-noise", action="store_true", default=False,
        help="also fail when a point gets no verdict (inconclusive)",
    )
    group.addoption(
        "--memlab-require-same-machine", action="store_true", default=False,
        help="fail (instead of warning) when the baseline was measured on another machine "
        "(CPU model, core count, kernel or memory differ) or records no machine fingerprint",
    )
    group.addoption(
        "--memlab-alpha", default=None, type=float, metavar="ALPHA",
        help="significance level of the Mann-Whitney U test (default 0.05)",
    )
    group.addoption(
        "--memlab-repeat", default=None, type=int, metavar="N",
        help="samples per run when a sweep is run (default: the sweep's repeat)",
    )
    group.addoption(
        "--memlab-runs", default=None, type=int, metavar="N",
        help=f"runs of every point, each a fresh setup, the points interleaved in rounds "
        f"(default {DEFAULT_RUNS})",
    )
    group.addoption(
        "--memlab-history", nargs="?", const="", default=None, metavar="MATCH",
        help="run no test: list the stored runs of every baseline (or of the test ids containing "
        "MATCH) and compare each with its baseline",
    )
    parser.addini("memlab_baseline_dir", "directory of memlab baseline datasets",
                  default="memlab-baselines")
    parser.addini("memlab_fail_above", "default of --memlab-fail-above", default="5%")


class RegressionGuard:
    """What the ``memlab_regression`` fixture gives a test.

    :meth:`check` measures (or takes) a dataset and either stores it as the
    baseline or compares it with the stored one.
    """

    def __init__(
        self,
        *,
        test_id: str,
        baseline_dir: Path,
        save_baseline: bool,
        fail_above: float,
        alpha: float,
        repeat: int | None,
        fail_on_noise: bool = False,
        require_same_machine: bool = False,
        runs: int = DEFAULT_RUNS,
        record: Callable[[str, str], None],
    ) -> None:
        self.test_id = test_id
        self.baseline_dir = baseline_dir
        self.save_baseline = save_baseline
        self.fail_above = fail_above
        self.alpha = alpha
        self.repeat = repeat
        self.fail_on_noise = fail_on_noise
        self.require_same_machine = require_same_machine
        self.runs = runs
        self._record = record
        self._used: set[str] = set()

    def baseline_path(self, name: str | None = None) -> Path:
        """Where the baseline of this test (or of ``name``) is stored (a .csv
        with a .json sidecar), named by :func:`baseline_stem`."""
        return self.baseline_dir / f"{baseline_stem(self._key(name))}.csv"

    def failed_path(self, name: str | None = None) -> Path:
        """Where the dataset of this test's last failing run is kept, beside its baseline."""
        return self.baseline_dir / f"{baseline_stem(self._key(name))}{FAILED_SUFFIX}.csv"

    def history_dir(self, name: str | None = None) -> Path:
        """The folder holding the dataset of every run of this test (or of ``name``)."""
        return self.baseline_dir / HISTORY_DIR / baseline_stem(self._key(name))

    def _key(self, name: str | None) -> str:
        return name if name is not None else self.test_id

    def _stored_baseline(self, name: str | None) -> Path:
        """The baseline to compare with: under its name, else under the name an earlier
        memlab gave it (the id with every other character replaced by ``_``)."""
        path = self.baseline_path(name)
        legacy = self.baseline_dir / f"{_legacy_stem(self._key(name))}.csv"
        if not path.exists() and legacy.exists():
            return legacy
        return path

    def _keep(self, dataset: Any, name: str | None, outcome: str, settings: Mapping[str, Any],
              failed: bool = False) -> Path:
        """Store this run's dataset in the history (and beside the baseline when it failed);
        return where the failing run is kept, else its place in the history."""
        metadata = dict(dataset.metadata)
        metadata["guard"] = {"test_id": self.test_id, "name": name, "outcome": outcome,
                             "kind": "baseline" if self.save_baseline else "check", **settings}
        kept = Dataset(list(dataset.rows), metadata)
        folder = self.history_dir(name)
        folder.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.timezone.utc)
        machine = fingerprint_id(metadata.get("machine_fingerprint") or {})
        path = folder / f"{now:%Y%m%dT%H%M%S.%fZ}-{machine}.csv"
        for attempt in range(1, 1000):
            if not path.exists():
                break
            path = folder / f"{now:%Y%m%dT%H%M%S.%fZ}-{machine}-{attempt}.csv"
        kept.save(path)
        failed_path = self.failed_path(name)
        if failed:
            kept.save(failed_path)
            return failed_path
        for stale in (failed_path, failed_path.with_suffix(".json")):  # the history keeps that run
            if stale.exists():
                stale.unlink()
        return path

    def check(
        self,
        data: Any,
        *,
        name: str | None = None,
        metric: str | None = None,
        better: str | Mapping[str, str] | None = None,
        threshold: float | None = None,
    ) -> Any:
        """Measure ``data`` and compare it with the stored baseline.

        ``data``: a :class:`memlab.grid.Sweep` (run here ``runs`` times,
        without progress bar), a :class:`memlab.dataset.Dataset` (taken as
        it is: its ``run`` column says its runs), or a zero-argument callable
        returning either (called ``runs`` times, each call a run). ``name`` names the baseline file (default: the
        test's id; give distinct names to check several sweeps in one test).
        ``metric``/``better``/``threshold`` are passed to
        :func:`memlab.compare.compare` (``threshold`` defaults to the
        fail-above fraction). Returns the :class:`memlab.compare.Comparison`,
        or None when the baseline was just saved. Fails the test on a
        significant regression of at least ``--memlab-fail-above``.

        Example: ``memlab_regression.check(memlab.Sweep("g", "chase", points))``
        """
        path = self.baseline_path(name)
        if str(path) in self._used:
            raise ValueError(
                f"name={name!r}: this test already checked the baseline {path}; "
                f"give each check a distinct name="
            )
        self._used.add(str(path))
        dataset = _with_fingerprint(self._measure(data))
        limit = self.fail_above
        threshold = (limit if limit < 1 else 0.05) if threshold is None else threshold
        settings = {"metric": metric, "better": better, "threshold": threshold, "alpha": self.alpha}
        if self.save_baseline:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._keep(dataset, name, "saved", settings)
            dataset.metadata["guard"] = {"test_id": self.test_id, "name": name, **settings}
            dataset.save(path)
            self._record("saved", f"{self.test_id}: {path}")
            return None
        stored = self._stored_baseline(name)

        def fail(outcome: str, message: str) -> None:
            kept = self._keep(dataset, name, outcome, settings, failed=True)
            self._record("failed", f"{self.test_id}: {outcome}")
            pytest.fail(f"memlab_regression: {message}\n\nthis run's dataset is kept in {kept} "
                        f"(memlab compare {stored} {kept}; history: pytest --memlab-history)",
                        pytrace=False)

        try:
            baseline = load_dataset(stored, "baseline")
        except DatasetReadError as error:
            hint = (
                "record it with: pytest --memlab-save-baseline"
                if not stored.exists()
                else "delete it or record it again with: pytest --memlab-save-baseline"
            )
            fail("no readable baseline", f"{error}; {hint}")
        old_kernel, new_kernel = baseline.metadata.get("kernel_sha256"), dataset.metadata.get("kernel_sha256")
        if old_kernel and new_kernel and old_kernel != new_kernel:  # a user kernel's source changed
            fail("baseline of another kernel source",
                 f"the baseline {stored} was measured with another source of the kernel "
                 f"(kernel_sha256 {str(old_kernel)[:12]}, this run {str(new_kernel)[:12]}); "
                 "record it again with: pytest --memlab-save-baseline")
        comparison = compare(baseline, dataset, metric=metric, better=better, threshold=threshold,
                             alpha=self.alpha)
        comparison.baseline_label = str(stored)
        comparison.candidate_label = f"this run of {self.test_id}"
        if not comparison.points:
            fail("no point in common with the baseline",
                 f"this run has no point in common with the baseline {stored}; "
                 f"record it again with: pytest --memlab-save-baseline\n\n{comparison.format()}")
        if self.require_same_machine and not comparison.same_machine:
            fail("baseline from another machine",
                 f"the baseline {stored} was not measured on this machine "
                 f"and --memlab-require-same-machine is set:\n"
                 + "\n".join(f"  {note}" for note in comparison.machine_notes())
                 + "\nrecord it here with: pytest --memlab-save-baseline"
                 + f"\n\n{comparison.format()}")
        failing = comparison.failing(limit)
        if failing:
            fail(f"{len(failing)} regression(s)",
                 f"{len(failing)} significant regression(s) of at least "
                 f"{limit:.1%} against {stored}\n\n{comparison.format()}")
        if self.fail_on_noise and comparison.unjudged:
            fail(f"{len(comparison.unjudged)} point(s) without a verdict",
                 f"{len(comparison.unjudged)} point(s) without a verdict "
                 f"(inconclusive) and --memlab-fail-on-noise\n\n{comparison.format()}")
        self._keep(dataset, name, "passed", settings)
        self._warn_unjudged(comparison)
        self._record("passed", f"{self.test_id}: {comparison.summary()}")
        return comparison

    def _measure(self, data: Any) -> Any:
        """The runs of ``data`` as one dataset with a ``run`` column (a Dataset: as it is). A Sweep
        is measured by the run loop in ``--memlab-runs`` runs taken in rounds; a callable is
        called once per run."""
        if hasattr(data, "rows") and hasattr(data, "metadata"):
            return data
        if isinstance(data, Sweep):
            return Run(data, resume=False, repeat=self.repeat, runs=self.runs).execute(progress=False)
        return _as_runs([self._measure_once(data) for _ in range(self.runs)])

    def _measure_once(self, data: Any) -> Any:
        if callable(data) and not hasattr(data, "rows") and not hasattr(data, "points"):
            data = data()
        if hasattr(data, "rows") and hasattr(data, "metadata"):
            return data
        if isinstance(data, Sweep):  # one run: the caller numbers the runs
            return Run(data, resume=False, repeat=self.repeat, runs=1).execute(progress=False)
        raise TypeError(
            f"memlab_regression.check(data={type(data).__name__}): expected a Sweep, "
            f"a Dataset or a callable returning one"
        )

    def _warn_unjudged(self, comparison: Any) -> None:
        notes = [
            f"regression below the --memlab-fail-above limit: {p.label} ({p.reason})"
            for p in comparison.regressions
        ]
        for verdict in (INCONCLUSIVE, "not comparable"):
            points = comparison.by_verdict(verdict)
            if points:
                notes.append(f"{len(points)} point(s) {verdict}: " + "; ".join(
                    f"{p.label} ({p.reason})" for p in points))
        for title, unmatched in (("only in the baseline", comparison.only_in_baseline),
                                 ("only in this run", comparison.only_in_candidate)):
            if unmatched:
                notes.append(f"{len(unmatched)} point(s) {title}")
        notes.extend(
            note.replace("(candidate)", "(this run)").replace("the candidate", "this run")
            for note in comparison.machine_notes()
        )
        for note in notes:
            warnings.warn(MemlabRegressionWarning(f"{self.test_id}: {note}"), stacklevel=3)


def _as_runs(datasets: list[Any]) -> Dataset:
    """One dataset of the runs: each measurement's rows numbered on from the runs before it."""
    rows: list[dict[str, Any]] = []
    first_run = 0
    for dataset in datasets:
        indices = [run_index(row) for row in dataset.rows]
        rows.extend({**row, RUN_COLUMN: first_run + index} for row, index in zip(dataset.rows, indices))
        first_run += max(indices, default=-1) + 1
    return Dataset(rows, dict(datasets[0].metadata or {}))


def _with_fingerprint(dataset: Any) -> Any:
    """The dataset with ``metadata["machine_fingerprint"]``: the one it records, else this machine's.

    A dataset measured by a sweep records the machine it ran on; one built by
    hand (or by an older memlab) was measured here, so this machine's
    fingerprint is the right one.
    """
    metadata = dict(getattr(dataset, "metadata", None) or {})
    recorded = metadata_fingerprint(metadata)
    metadata["machine_fingerprint"] = recorded or fingerprint(collect(include_core=False))
    return Dataset(list(dataset.rows), metadata)


def history_report(baseline_dir: Path, match: str = "") -> str:
    """``pytest --memlab-history``: every stored run of every baseline (or of the test ids
    containing ``match``), oldest first, each with its machine, its outcome and its
    comparison with the baseline as it is now (with the metric and threshold the check used).

    >>> print(history_report(Path("/nonexistent")))
    memlab history: no runs stored under /nonexistent/history (every memlab_regression.check stores one)
    """
    root = Path(baseline_dir) / HISTORY_DIR
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    blocks = []
    for folder in folders:
        runs = sorted(folder.glob("*.csv"))
        if not runs:
            continue
        loaded = []
        for path in runs:
            try:
                loaded.append((path, load_dataset(path, "stored run")))
            except DatasetReadError as error:
                loaded.append((path, error))
        guard = next((d.metadata.get("guard") for _, d in reversed(loaded) if isinstance(d, Dataset)), None) or {}
        test_id = str(guard.get("test_id") or folder.name)
        label = test_id if guard.get("name") is None else f"{test_id} (name={guard['name']!r})"
        if match and match not in label and match not in folder.name:
            continue
        blocks.append(_history_block(Path(baseline_dir), folder.name, label, loaded))
    if not blocks:
        which = f" of a test id containing {match!r}" if match else ""
        return (f"memlab history: no runs{which} stored under {root} "
                "(every memlab_regression.check stores one)")
    return f"memlab history: {Path(baseline_dir)} ({len(blocks)} baseline(s))\n\n" + "\n\n".join(blocks)


def _history_block(baseline_dir: Path, stem: str, label: str, loaded: list) -> str:
    path = baseline_dir / f"{stem}.csv"
    lines = [label]
    baseline = None
    if path.exists():
        try:
            baseline = load_dataset(path, "baseline")
        except DatasetReadError as error:
            lines.append(f"  baseline {path}: {error}")
    if baseline is not None:
        print_ = metadata_fingerprint(baseline.metadata) or {}
        lines.append(f"  baseline {path} (machine {fingerprint_id(print_) if print_ else 'unknown'}, "
                     f"written {baseline.metadata.get('created', '?')})")
    elif not path.exists():
        lines.append(f"  baseline {path}: none (record it with pytest --memlab-save-baseline)")
    for run_path, run in loaded:
        if not isinstance(run, Dataset):
            lines.append(f"  {run_path.name}: {run}")
            continue
        guard = run.metadata.get("guard") or {}
        print_ = metadata_fingerprint(run.metadata) or {}
        lines.append(f"  {_run_time(run_path)}  {guard.get('kind', '?'):<8}  "
                     f"machine {fingerprint_id(print_) if print_ else 'unknown'}  {guard.get('outcome', '?')}  "
                     f"{run_path}")
        if baseline is None:
            continue
        try:
            comparison = compare(baseline, run, metric=guard.get("metric"), better=guard.get("better"),
                                 threshold=guard.get("threshold") or 0.05, alpha=guard.get("alpha") or 0.05)
        except ValueError as error:
            lines.append(f"      against the baseline: cannot compare: {error}")
            continue
        same = "" if comparison.same_machine else " (another machine)"
        lines.append(f"      against the baseline{same}: {comparison.summary()}")
    return "\n".join(lines)


def _run_time(path: Path) -> str:
    """The UTC time a history file's name records (``20261201T234912.123456Z-...``)."""
    stamp = path.name.split("-", 1)[0]
    try:
        when = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%S.%fZ")
    except ValueError:
        return stamp
    return f"{when:%Y-%m-%d %H:%M:%S} UTC"


def _baseline_dir(config: pytest.Config) -> Path:
    option = config.getoption("memlab_baseline_dir")
    text = option if option else config.getini("memlab_baseline_dir")
    path = Path(text)
    if not path.is_absolute():
        path = (Path.cwd() if option else Path(config.rootpath)) / path
    return path


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """``pytest --memlab-history [MATCH]``: print the stored runs and their comparisons; run no test."""
    match = config.getoption("memlab_history")
    if match is None:
        return None
    print(history_report(_baseline_dir(config), match))
    return 0


_RECORDS = pytest.StashKey[dict]()
_SETTINGS = pytest.StashKey[dict]()


def pytest_configure(config: pytest.Config) -> None:
    fail_text = config.getoption("memlab_fail_above") or config.getini("memlab_fail_above")
    try:
        fail_above = parse_fraction("memlab-fail-above", fail_text)
    except ValueError as error:
        raise pytest.UsageError(f"--{error}") from None
    alpha = config.getoption("memlab_alpha")
    if alpha is None:
        alpha = 0.05
    elif not 0.0 < alpha < 1.0:
        raise pytest.UsageError(f"--memlab-alpha={alpha} is outside (0, 1)")
    repeat = config.getoption("memlab_repeat")
    if repeat is not None and repeat < 1:
        raise pytest.UsageError(f"--memlab-repeat={repeat} is below the minimum 1")
    runs = config.getoption("memlab_runs")
    if runs is None:
        runs = DEFAULT_RUNS
    elif runs < 1:
        raise pytest.UsageError(f"--memlab-runs={runs} is below the minimum 1")
    config.stash[_SETTINGS] = {"fail_above": fail_above, "alpha": alpha, "repeat": repeat, "runs": runs}
    config.stash[_RECORDS] = {}


@pytest.fixture
def memlab_regression(request: pytest.FixtureRequest) -> RegressionGuard:
    """Compare a sweep measured in this test with its stored baseline.

    ``memlab_regression.check(sweep_or_dataset)``; see :class:`RegressionGuard`.
    """
    config = request.config
    settings = config.stash[_SETTINGS]
    records = config.stash[_RECORDS]

    def record(kind: str, text: str) -> None:
        records.setdefault(kind, []).append(text)

    return RegressionGuard(
        test_id=request.node.nodeid,
        baseline_dir=_baseline_dir(config),
        save_baseline=config.getoption("memlab_save_baseline"),
        fail_above=settings["fail_above"],
        alpha=settings["alpha"],
        repeat=settings["repeat"],
        runs=settings["runs"],
        fail_on_noise=config.getoption("memlab_fail_on_noise"),
        require_same_machine=config.getoption("memlab_require_same_machine"),
        record=record,
    )


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    records = config.stash.get(_RECORDS, None)
    if not records:
        return
    terminalreporter.section("memlab regression guard")
    for kind in ("saved", "passed", "failed"):
        for line in records.get(kind, []):
            terminalreporter.write_line(f"{kind}: {line}")
