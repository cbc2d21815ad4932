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
next to the rootdir); a later plain ``pytest`` measures again and fails the
test with the comparison table when a significant regression of at least
``--memlab-fail-above`` (default 5%) appears. The guard judges on the run
level: it measures ``--memlab-runs`` runs (default 3) of every point, stores
them in the baseline (a ``run`` column) and compares runs with runs.
Inconclusive points, points found on one side only and machine differences
never fail a test: they raise a
:class:`MemlabRegressionWarning` (``--memlab-require-same-machine`` turns a
baseline from another machine into a failure). A missing or unreadable baseline fails the
test with a message saying how to record one. See docs/regression.md.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

import pytest

from memlab.compare import DatasetReadError, compare, load_dataset, metadata_fingerprint, parse_fraction
from memlab.dataset import RUN_COLUMN, Dataset, run_index
from memlab.grid import Sweep
from memlab.significance import INCONCLUSIVE
from memlab.machine import collect, fingerprint
from memlab.sweep import run_sweep

__all__ = ["MemlabRegressionWarning", "RegressionGuard"]


DEFAULT_RUNS = 3
"""Runs of every point the guard measures: a sweep is run this many times (rounds), a
callable called this many times. 3 keeps a guard's cost at three sweeps; with between-run
noise twice the threshold, 3 runs a side give a false verdict for 2-4% of points, 5 runs
for under 2.5% (tests/test_compare.py, docs/regression.md)."""


class MemlabRegressionWarning(UserWarning):
    """A comparison the guard could not judge fully (noise, unmatched points,
    different machine)."""


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
        with a .json sidecar)."""
        stem = name if name is not None else self.test_id
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem).strip("_.") or "baseline"
        return self.baseline_dir / f"{safe}.csv"

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
        if self.save_baseline:
            path.parent.mkdir(parents=True, exist_ok=True)
            dataset.save(path)
            self._record("saved", f"{self.test_id}: {path}")
            return None
        try:
            baseline = load_dataset(path, "baseline")
        except DatasetReadError as error:
            hint = (
                "record it with: pytest --memlab-save-baseline"
                if not path.exists()
                else "delete it or record it again with: pytest --memlab-save-baseline"
            )
            pytest.fail(f"memlab_regression: {error}; {hint}", pytrace=False)
        limit = self.fail_above
        comparison = compare(
            baseline, dataset, metric=metric, better=better,
            threshold=(limit if limit < 1 else 0.05) if threshold is None else threshold,
            alpha=self.alpha,
        )
        comparison.baseline_label = str(path)
        comparison.candidate_label = f"this run of {self.test_id}"
        if not comparison.points:
            pytest.fail(
                f"memlab_regression: this run has no point in common with the baseline {path}; "
                f"record it again with: pytest --memlab-save-baseline\n\n{comparison.format()}",
                pytrace=False,
            )
        if self.require_same_machine and not comparison.same_machine:
            self._record("failed", f"{self.test_id}: baseline from another machine")
            pytest.fail(
                f"memlab_regression: the baseline {path} was not measured on this machine "
                f"and --memlab-require-same-machine is set:\n"
                + "\n".join(f"  {note}" for note in comparison.machine_notes())
                + "\nrecord it here with: pytest --memlab-save-baseline"
                + f"\n\n{comparison.format()}",
                pytrace=False,
            )
        failing = comparison.failing(limit)
        if failing:
            self._record("failed", f"{self.test_id}: {len(failing)} regression(s)")
            pytest.fail(
                f"memlab_regression: {len(failing)} significant regression(s) of at least "
                f"{limit:.1%} against {path}\n\n{comparison.format()}",
                pytrace=False,
            )
        if self.fail_on_noise and comparison.unjudged:
            self._record("failed", f"{self.test_id}: {len(comparison.unjudged)} point(s) without a verdict")
            pytest.fail(
                f"memlab_regression: {len(comparison.unjudged)} point(s) without a verdict "
                f"(inconclusive) and --memlab-fail-on-noise\n\n{comparison.format()}",
                pytrace=False,
            )
        self._warn_unjudged(comparison)
        self._record("passed", f"{self.test_id}: {comparison.summary()}")
        return comparison

    def _measure(self, data: Any) -> Any:
        """The runs of ``data`` as one dataset with a ``run`` column (a Dataset: as it is)."""
        if hasattr(data, "rows") and hasattr(data, "metadata"):
            return data
        return _as_runs([self._measure_once(data) for _ in range(self.runs)])

    def _measure_once(self, data: Any) -> Any:
        if callable(data) and not hasattr(data, "rows") and not hasattr(data, "points"):
            data = data()
        if hasattr(data, "rows") and hasattr(data, "metadata"):
            return data
        if isinstance(data, Sweep):
            return run_sweep(data, progress=False, resume=False, repeat=self.repeat)
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


def _baseline_dir(config: pytest.Config) -> Path:
    option = config.getoption("memlab_baseline_dir")
    text = option if option else config.getini("memlab_baseline_dir")
    path = Path(text)
    if not path.is_absolute():
        path = (Path.cwd() if option else Path(config.rootpath)) / path
    return path


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
