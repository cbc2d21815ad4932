"""Two datasets -> per-point ratios with confidence, and a regression verdict.

:func:`compare` matches the rows of a baseline and a candidate dataset by
their parameters (the metadata's ``param_names``, plus ``family``) and groups
each point's rows into its runs (``memlab.dataset.point_runs``: one row per
run, a row without a ``run`` column is run 0). For every point in both it
reports the ratio of the medians of run medians of one metric, a two-level
bootstrap interval of that ratio (``memlab.significance``), each side's run
spread, and a two-sided Mann-Whitney U test (on the run medians, or on the
samples when a side has one run). The verdict comes from the run level
(docs/regression.md): runs that disagree beyond the unstable bound make the
point ``inconclusive`` unless every run of one side is beyond every run of
the other by more than they disagree; otherwise the interval against the
minimum effect size decides (beyond it a regression or an improvement,
inside it unchanged, across it inconclusive, with the runs per side that
would decide it), and a side of one run, which shows no between-run
variation, needs a change beyond what two runs of a stable point may differ
by. Points found in only one dataset are listed; a different machine (CPU
model, core count, kernel, memory) and different memory settings (THP) are
shown as warnings.

``memlab compare A B`` (in :mod:`memlab.cli`) prints :meth:`Comparison.format`;
it exits 0 when no significant regression beyond ``--fail-above`` exists, 1
when one does, and 2 when the input cannot be compared (unreadable file,
unknown metric direction, no point in common).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from memlab.chart import default_machine, machine_entries, machine_labels
from memlab.machine import FINGERPRINT_FACTS, fingerprint
from memlab.dataset import (
    SAMPLES,
    MACHINE_PARAM,
    Dataset,
    DatasetError,
    key_value,
    machine_key,
    paths_for,
    point_runs,
    statistic_column,
)
from memlab.dataset import param_names as schema_param_names
from memlab.display import table_html
from memlab.significance import (
    INCONCLUSIVE,
    UNSTABLE_RUN_SPREAD,
    clean_samples,
    coefficient_of_variation,
    is_unstable,
    mann_whitney_u,
    median_of_runs,
    repetitions_to_decide,
    run_medians,
    run_spread,
    runs_ratio_interval,
    smallest_two_sided_p,
    within_run_spread,
)
from memlab.units import format_number, format_plain

__all__ = [
    "Comparison",
    "DatasetReadError",
    "MACHINE_FACTS",
    "SETTING_FACTS",
    "PointComparison",
    "compare",
    "compare_machines",
    "load_dataset",
    "metadata_fingerprint",
    "metric_direction",
    "parse_fraction",
]

REGRESSION = "regression"
IMPROVEMENT = "improvement"
UNCHANGED = "unchanged"
NOT_COMPARABLE = "not comparable"
VERDICTS = (REGRESSION, IMPROVEMENT, UNCHANGED, INCONCLUSIVE, NOT_COMPARABLE)
MIN_SAMPLES = 3
"""Samples a side needs, over all its runs, for an interval to mean anything."""

MACHINE_FACTS = FINGERPRINT_FACTS
"""Keys of the machine fingerprint (``memlab.machine.fingerprint``): when
they differ, the two datasets come from different machines."""

SETTING_FACTS = ("thp_enabled", "thp_defrag", "virtualization")
"""Keys of ``metadata["machine"]`` that are settings of a machine rather than
its identity; when they differ, a warning says so."""

_LOWER_PREFIXES = ("ns_per_", "cycles_per_", "seconds_per_", "us_per_", "ms_per_")
_HIGHER_SUFFIXES = ("_per_s", "_per_second")
_LOWER_SUFFIXES = ("_ns", "_us", "_ms", "_seconds")
_LOWER_NAMES = ("elapsed_ns", "seconds", "elapsed_s", "wall_s")


class DatasetReadError(ValueError):
    """A dataset file is missing or cannot be parsed; ``path`` says which."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


def metric_direction(metric: str, better: str | Mapping[str, str] | None = None) -> str:
    """Whether a smaller or a larger value of ``metric`` is better.

    Returns ``"lower"`` or ``"higher"``. ``better`` overrides the rule: a
    string applies to any metric, a mapping applies to the metrics it names.
    Without an override the name decides:

    - lower is better: ``ns_per_*``, ``cycles_per_*``, ``seconds_per_*``,
      ``elapsed_ns``, ``seconds`` and names ending in ``_ns``, ``_us``,
      ``_ms``, ``_seconds`` (times);
    - higher is better: names ending in ``_per_s`` or ``_per_second``
      (``GiB_per_s``, ``GB_per_s``, ``GFLOP_per_s``, ``elements_per_s``:
      rates).

    Any other name raises ValueError asking for ``better=``.

    >>> metric_direction("ns_per_element"), metric_direction("GiB_per_s")
    ('lower', 'higher')
    >>> metric_direction("index_score", better={"index_score": "higher"})
    'higher'
    """
    if isinstance(better, Mapping):
        better = better.get(metric)
    if better is not None:
        if better not in ("lower", "higher"):
            raise ValueError(f"better={better!r} is not one of 'lower', 'higher'")
        return better
    if metric.startswith(_LOWER_PREFIXES):
        return "lower"
    if metric.endswith(_HIGHER_SUFFIXES):
        return "higher"
    if metric in _LOWER_NAMES or metric.endswith(_LOWER_SUFFIXES):
        return "lower"
    raise ValueError(
        f"metric={metric!r}: cannot tell whether lower or higher is better; "
        f"pass better='lower' or better='higher'"
    )


def parse_fraction(name: str, text: str | float) -> float:
    """Read a threshold written as ``"5%"`` or as a fraction ``0.05``.

    A bare number of 1 or more is refused as ambiguous (is "5" 5% or 500%?).

    >>> parse_fraction("fail_above", "5%"), parse_fraction("fail_above", "0.2")
    (0.05, 0.2)
    """
    raw = str(text).strip()
    percent = raw.endswith("%")
    try:
        value = float(raw[:-1] if percent else raw)
    except ValueError:
        raise ValueError(
            f"{name}={raw!r} must be a percentage like 5% or a fraction like 0.05"
        ) from None
    if percent:
        value /= 100.0
    elif value >= 1.0:
        raise ValueError(f"{name}={raw} is ambiguous: write {raw}% or a fraction such as 0.05")
    if not 0.0 < value < 10.0 or math.isnan(value):
        raise ValueError(f"{name}={raw} is outside (0%, 1000%)")
    return value


@dataclass(frozen=True)
class PointComparison:
    """One point present in both datasets, compared on one metric.

    ``baseline_median``/``candidate_median`` are each side's median of run
    medians; ``ratio`` is candidate / baseline; ``change`` is ``ratio - 1``
    (a signed fraction: +0.2 means the metric grew by 20%);
    ``ci_low``/``ci_high`` bound the ratio (two-level bootstrap);
    ``p_value`` is the two-sided Mann-Whitney U test on the run medians when
    both sides have two runs or more, else on the samples (``test_method``
    says which); ``*_cv`` are coefficients of variation of all samples of a
    side (shown, not used for the verdict); ``*_samples`` count a side's
    samples over all its runs and ``*_runs`` its runs; ``*_run_spread`` is
    the largest run median over the smallest (1.0 for one run) and
    ``*_within_spread`` a typical run's largest sample over its smallest;
    ``unstable`` is true when a side's runs disagree beyond the bound;
    ``verdict`` is one of ``regression``, ``improvement``, ``unchanged``,
    ``inconclusive``, ``not comparable`` and ``reason`` explains it in
    words; ``runs_needed`` is, for an inconclusive point whose interval
    straddles the threshold, the runs per side that would likely decide it
    (None otherwise, or when none would).
    """

    family: str | None
    params: dict[str, Any]
    baseline_median: float
    candidate_median: float
    ratio: float
    ci_low: float
    ci_high: float
    change: float
    p_value: float
    test_method: str
    baseline_cv: float
    candidate_cv: float
    baseline_samples: int
    candidate_samples: int
    baseline_runs: int
    candidate_runs: int
    baseline_run_spread: float
    candidate_run_spread: float
    baseline_within_spread: float
    candidate_within_spread: float
    unstable: bool
    runs_needed: int | None
    verdict: str
    reason: str

    @property
    def run_spread(self) -> float:
        """The larger of the two sides' run spreads (what the table shows; NaN when unknown)."""
        spreads = [v for v in (self.baseline_run_spread, self.candidate_run_spread) if math.isfinite(v)]
        return max(spreads) if spreads else math.nan

    @property
    def label(self) -> str:
        """The point in words: ``chase working_set_bytes=4096 order=random``."""
        parts = [self.family] if self.family else []
        parts.extend(f"{name}={format_plain(value)}" for name, value in self.params.items())
        return " ".join(parts)


@dataclass
class Comparison:
    """Everything :func:`compare` found, with a printable report.

    ``points``: the points in both datasets; ``only_in_baseline`` and
    ``only_in_candidate``: parameter dicts of unmatched points;
    ``machine_differences``: (fact, baseline value, candidate value) for the
    machine fingerprint (CPU model, core count, kernel, memory);
    ``machine_unknown``: the sides ("baseline", "candidate") that record no
    fingerprint; ``setting_differences``: the same triples for machine
    settings (THP); ``warnings``: other things a reader should know
    (duplicate points, different parameter names, different primary metrics).
    """

    metric: str
    better: str
    threshold: float
    alpha: float
    confidence: float
    points: list[PointComparison]
    only_in_baseline: list[dict[str, Any]]
    only_in_candidate: list[dict[str, Any]]
    machine_differences: list[tuple[str, Any, Any]]
    warnings: list[str] = field(default_factory=list)
    machine_unknown: list[str] = field(default_factory=list)
    setting_differences: list[tuple[str, Any, Any]] = field(default_factory=list)
    param_names: list[str] = field(default_factory=list)
    baseline_label: str = "baseline"
    candidate_label: str = "candidate"

    @property
    def same_machine(self) -> bool:
        """True when both sides record a fingerprint and the fingerprints agree."""
        return not self.machine_differences and not self.machine_unknown

    def machine_notes(self) -> list[str]:
        """One sentence per machine difference, missing fingerprint or setting difference."""
        notes = [
            f"machine differs: {fact}: {format_plain(base_value)} (baseline) "
            f"vs {format_plain(cand_value)} (candidate)"
            for fact, base_value, cand_value in self.machine_differences
        ]
        notes.extend(
            f"the {side} records no machine fingerprint: cannot tell whether both "
            f"were measured on the same machine"
            for side in self.machine_unknown
        )
        notes.extend(
            f"setting differs: {fact}: {format_plain(base_value)} (baseline) "
            f"vs {format_plain(cand_value)} (candidate)"
            for fact, base_value, cand_value in self.setting_differences
        )
        return notes

    def by_verdict(self, verdict: str) -> list[PointComparison]:
        """The points with this verdict (e.g. ``"regression"``)."""
        if verdict not in VERDICTS:
            raise ValueError(f"verdict={verdict!r} is not one of {', '.join(map(repr, VERDICTS))}")
        return [point for point in self.points if point.verdict == verdict]

    @property
    def regressions(self) -> list[PointComparison]:
        return self.by_verdict(REGRESSION)

    @property
    def unjudged(self) -> list[PointComparison]:
        """Points that got no verdict: inconclusive (runs disagree, the interval straddles the
        threshold, one run a side cannot tell, too few samples)."""
        return self.by_verdict(INCONCLUSIVE)

    def failing(self, fail_above: float | None = None) -> list[PointComparison]:
        """Regressions whose whole interval lies at least ``fail_above`` on the worse side.

        ``fail_above`` is a fraction (0.05 = 5%) and defaults to the
        comparison's threshold (every regression then fails). Inconclusive
        points never fail: they have no verdict.
        """
        limit = self.threshold if fail_above is None else fail_above
        if self.better == "lower":
            return [p for p in self.regressions if p.ci_low >= 1.0 + limit]
        return [p for p in self.regressions if p.ci_high <= 1.0 - limit]

    @property
    def geometric_mean_ratio(self) -> float:
        """Geometric mean of candidate/baseline median ratios over all points
        with a finite positive ratio (NaN when there is none)."""
        ratios = np.array([p.ratio for p in self.points], dtype=float)
        ratios = ratios[np.isfinite(ratios) & (ratios > 0)]
        if ratios.size == 0:
            return math.nan
        return float(np.exp(np.mean(np.log(ratios))))

    def summary(self) -> str:
        """One line: geometric mean ratio and the count of each verdict."""
        geomean = self.geometric_mean_ratio
        if math.isnan(geomean):
            head = "geometric mean ratio: n/a (no comparable point)"
        else:
            head = (
                f"geometric mean ratio candidate/baseline: {geomean:.4f} over "
                f"{sum(1 for p in self.points if math.isfinite(p.ratio) and p.ratio > 0)} points "
                f"({_change_words(geomean - 1.0, self.better)})"
            )
        counts = [
            f"{len(self.by_verdict(v))} {v}" for v in VERDICTS if self.by_verdict(v)
        ]
        unmatched = len(self.only_in_baseline) + len(self.only_in_candidate)
        if unmatched:
            counts.append(f"{unmatched} unmatched")
        return head + "; " + (", ".join(counts) if counts else "no points")

    def format(self) -> str:
        """The full report: header, warnings, table, unmatched points, summary."""
        lines = [
            f"memlab compare: {self.metric} ({self.better} is better), "
            f"minimum effect {self.threshold:.1%}, alpha {self.alpha:g}, "
            f"{self.confidence:.0%} interval of the ratio of medians of run medians",
            f"baseline:  {self.baseline_label}",
            f"candidate: {self.candidate_label}",
        ]
        lines.extend(f"WARNING: {note}" for note in self.machine_notes())
        lines.extend(f"WARNING: {warning}" for warning in self.warnings)
        if self.points:
            lines.append("")
            lines.extend(self._table())
        for title, unmatched in (
            ("only in baseline", self.only_in_baseline),
            ("only in candidate", self.only_in_candidate),
        ):
            if unmatched:
                lines.append("")
                lines.append(f"{title} ({len(unmatched)}):")
                lines.extend("  " + _params_words(params) for params in unmatched)
        lines.append("")
        lines.append(self.summary())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def _repr_html_(self) -> str:
        """What a notebook shows: the summary line, then one row per point (the parameters that
        vary, both medians, the ratio and its interval, the runs, the verdict and its reason);
        machine differences, warnings and unstable points as flags."""
        shown = self.varying_params()
        header = [*shown, "baseline", "candidate", "ratio", f"{self.confidence:.0%} CI", "runs", "verdict"]
        rows = []
        for point in self.points:
            rows.append([*(format_plain(point.params.get(name, "")) for name in shown),
                         _cell(point.baseline_median), _cell(point.candidate_median), _cell(point.ratio, "{:.3f}"),
                         f"{_cell(point.ci_low, '{:.3f}')} … {_cell(point.ci_high, '{:.3f}')}",
                         f"{point.baseline_runs}/{point.candidate_runs}", f"{point.verdict}: {point.reason}"])
        flags = [*self.machine_notes(), *self.warnings]
        unstable = [p for p in self.points if p.unstable]
        if unstable:
            flags.append(f"{len(unstable)} of {len(self.points)} points unstable (runs disagree; "
                         f"first: {unstable[0].label})")
        heading = f"compare {self.metric} ({self.better} is better): {self.summary()}"
        return table_html(heading, header, rows, flags=flags,
                          flagged=[p.verdict in ("regression", "inconclusive") for p in self.points])

    def varying_params(self) -> list[str]:
        """The parameter names whose value differs between the compared points (the table's columns)."""
        return [name for name in self.param_names
                if len({repr(p.params.get(name)) for p in self.points}) > 1]

    def _table(self) -> list[str]:
        has_family = any(p.family for p in self.points)
        shown = self.varying_params()
        fixed = [name for name in self.param_names if name not in shown]
        header = (["family"] if has_family else []) + shown + [
            "baseline", "candidate", "ratio", f"{self.confidence:.0%} CI", "p", "runs",
            "spread", "verdict",
        ]
        lines = []
        if fixed and self.points:
            first = self.points[0]
            said = [f"{name}={format_plain(first.params.get(name, ''))}" for name in fixed]
            lines.append("every point: " + " ".join(said))
        rows = []
        for point in self.points:
            cells = [point.family or ""] if has_family else []
            cells.extend(format_plain(point.params.get(name, "")) for name in shown)
            cells.extend([
                _cell(point.baseline_median),
                _cell(point.candidate_median),
                _cell(point.ratio, "{:.3f}"),
                f"[{_cell(point.ci_low, '{:.3f}')}, {_cell(point.ci_high, '{:.3f}')}]",
                _cell(point.p_value, "{:.3g}"),
                f"{point.baseline_runs}/{point.candidate_runs}",
                _cell(point.run_spread, "{:.2f}") + ("!" if point.unstable else ""),
                f"{point.verdict}: {point.reason}",
            ])
            rows.append(cells)
        widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header) - 1)]
        formatted = list(lines)
        for cells in [header] + rows:
            text = "  ".join(str(c).ljust(w) for c, w in zip(cells[:-1], widths))
            formatted.append((text + "  " + str(cells[-1])).rstrip())
        return formatted

    def to_rows(self) -> list[dict[str, Any]]:
        """One flat dict per compared point (for pandas or a CSV)."""
        rows = []
        for point in self.points:
            row = {"family": point.family, **point.params}
            row.update({k: v for k, v in asdict(point).items() if k not in ("family", "params")})
            rows.append(row)
        return rows

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain JSON-ready data."""
        return {
            "metric": self.metric,
            "better": self.better,
            "threshold": self.threshold,
            "alpha": self.alpha,
            "confidence": self.confidence,
            "baseline": self.baseline_label,
            "candidate": self.candidate_label,
            "geometric_mean_ratio": _json_number(self.geometric_mean_ratio),
            "points": [
                {k: _json_number(v) for k, v in row.items()} for row in self.to_rows()
            ],
            "only_in_baseline": self.only_in_baseline,
            "only_in_candidate": self.only_in_candidate,
            "machine_differences": [list(d) for d in self.machine_differences],
            "machine_unknown": list(self.machine_unknown),
            "setting_differences": [list(d) for d in self.setting_differences],
            "warnings": list(self.warnings),
        }


def load_dataset(path: str | os.PathLike[str], role: str = "dataset") -> Any:
    """Load a dataset file with :meth:`memlab.dataset.Dataset.load`.

    A missing or unreadable file raises :class:`DatasetReadError` whose
    message names the role ("baseline", "candidate") and the path.
    """
    text = os.fspath(path)
    if not any(os.path.exists(candidate) for candidate in paths_for(text)):
        raise DatasetReadError(text, f"{role} dataset {text} does not exist")
    try:
        return Dataset.load(text)
    except DatasetError as error:  # says the file and what is wrong with it
        raise DatasetReadError(text, f"{role} dataset {text} cannot be read: {error}") from error
    except Exception as error:  # any other failure of a corrupt file
        raise DatasetReadError(
            text, f"{role} dataset {text} cannot be read: {type(error).__name__}: {error}"
        ) from error


def compare(
    baseline: Any,
    candidate: Any,
    *,
    metric: str | None = None,
    better: str | Mapping[str, str] | None = None,
    threshold: float = 0.05,
    alpha: float = 0.05,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    run_spread_limit: float = UNSTABLE_RUN_SPREAD,
) -> Comparison:
    """Compare a candidate dataset with a baseline, point by point, on the run level.

    ``baseline``/``candidate``: a :class:`memlab.dataset.Dataset` (or any
    object with ``rows`` and ``metadata``), or a path to load. ``metric``
    defaults to the baseline's ``primary_metric``; ``better`` overrides
    :func:`metric_direction`. ``threshold`` is the minimum effect size as a
    fraction of the baseline median (0.05 = 5%); ``alpha`` the significance
    level of the Mann-Whitney U test, which must agree with a verdict when
    its sizes let it reach ``alpha``; ``confidence`` that of the two-level
    bootstrap interval of the ratio of medians of run medians;
    ``run_spread_limit`` the largest run spread (largest / smallest run
    median) of a stable point. Returns a :class:`Comparison`; print it for
    the report.

    When either side holds rows of several machines (a fleet sweep,
    docs/fleet.md), each machine is compared with the same machine on the
    other side (``machine`` is then a parameter of the points) and machine
    differences are listed per machine.

    >>> from memlab.dataset import Dataset
    >>> meta = {"param_names": ["n"], "primary_metric": "ns_per_element"}
    >>> def rows(n, scale):  # three runs of five samples
    ...     return [{"family": "demo", "n": n, "run": run, "ns_per_element_samples":
    ...              [scale * level * v for v in (10.0, 10.1, 9.9, 10.05, 9.95)]}
    ...             for run, level in enumerate((1.0, 1.01, 0.99))]
    >>> result = compare(Dataset(rows(1, 1.0) + rows(2, 1.0), meta),
    ...                  Dataset(rows(1, 1.2) + rows(3, 1.0), meta))
    >>> [(p.params, p.verdict) for p in result.points], result.only_in_baseline
    ([({'n': 1}, 'regression')], [{'family': 'demo', 'n': 2}])
    """
    _check_fraction("threshold", threshold)
    _check_fraction("alpha", alpha)
    _check_fraction("confidence", confidence)
    base_rows, base_meta, base_label = _unpack(baseline, "baseline")
    cand_rows, cand_meta, cand_label = _unpack(candidate, "candidate")
    warnings: list[str] = []
    metric = metric or base_meta.get("primary_metric") or cand_meta.get("primary_metric")
    if not metric:
        raise ValueError("metric=None and neither dataset's metadata names a primary_metric")
    cand_primary = cand_meta.get("primary_metric")
    if base_meta.get("primary_metric") and cand_primary and cand_primary != base_meta["primary_metric"]:
        warnings.append(
            f"primary metrics differ: {base_meta['primary_metric']} (baseline) "
            f"vs {cand_primary} (candidate); comparing {metric}"
        )
    direction = metric_direction(metric, better)
    for role, rows in (("baseline", base_rows), ("candidate", cand_rows)):
        _check_metric_present(metric, rows, role)
    per_machine = _per_machine(base_rows, base_meta, cand_rows, cand_meta)
    if per_machine is not None:
        base_rows, base_meta, cand_rows, cand_meta, machine_differences, machine_unknown = per_machine
    else:
        machine_differences = _differences(
            metadata_fingerprint(base_meta) or {}, metadata_fingerprint(cand_meta) or {}, MACHINE_FACTS)
        machine_unknown = [side for side, meta in (("baseline", base_meta), ("candidate", cand_meta))
                           if not metadata_fingerprint(meta)]
    param_names = _param_names(base_rows, base_meta, cand_rows, cand_meta, warnings)
    base_points = _index_rows(base_rows, param_names, metric, "baseline", warnings)
    cand_points = _index_rows(cand_rows, param_names, metric, "candidate", warnings)
    if not run_spread_limit >= 1.0:
        raise ValueError(f"run_spread_limit={run_spread_limit} is below the minimum 1")
    points = []
    for key, (params, base_runs) in base_points.items():
        if key not in cand_points:
            continue
        _, cand_runs = cand_points[key]
        family = params.get("family")
        shown = {name: params[name] for name in param_names if name in params}
        points.append(_compare_point(
            family, shown, base_runs, cand_runs,
            direction=direction, threshold=threshold, alpha=alpha, confidence=confidence,
            resamples=resamples, seed=seed, run_spread_limit=run_spread_limit,
        ))
    return Comparison(
        metric=metric,
        better=direction,
        threshold=threshold,
        alpha=alpha,
        confidence=confidence,
        points=points,
        only_in_baseline=[p for k, (p, _) in base_points.items() if k not in cand_points],
        only_in_candidate=[p for k, (p, _) in cand_points.items() if k not in base_points],
        machine_differences=machine_differences,
        machine_unknown=machine_unknown,
        setting_differences=_differences(
            base_meta.get("machine") or {}, cand_meta.get("machine") or {}, SETTING_FACTS
        ),
        warnings=warnings,
        param_names=param_names,
        baseline_label=base_label,
        candidate_label=cand_label,
    )


def compare_machines(
    data: Any,
    baseline: str | None = None,
    **options: Any,
) -> dict[str, Comparison]:
    """The machines of one dataset compared point by point: each against the baseline machine.

    ``data`` is a Dataset (or path) holding rows of several machines (a
    fleet sweep in each-host mode, merged shards of several hosts); the
    machines are told apart as its figures tell them apart
    (:func:`memlab.chart.machine_labels`). ``baseline`` names the machine the
    others are compared with (default: the first by name). Returns ``{machine:
    Comparison}`` for every other machine; ``options`` go to :func:`compare`
    (metric, better, threshold, ...). Each side's metadata carries its own
    machine's fingerprint, so the comparison lists how the machines differ.

    >>> rows = [{"family": "f", "n": 1, "t_ns": v, "t_ns_samples": [v] * 5, "context_host": h,
    ...          "context_fingerprint_id": h * 3} for h, v in (("a", 1.0), ("b", 2.0))]
    >>> result = compare_machines(Dataset(rows, {"param_names": ["n"], "primary_metric": "t_ns"}))
    >>> list(result), result["b"].points[0].ratio
    (['b'], 2.0)
    """
    ds = data if isinstance(data, Dataset) else load_dataset(data, "dataset")
    labels = machine_labels(ds)
    names = sorted(set(labels))
    if len(names) < 2:
        raise ValueError("the dataset holds the rows of one machine; comparing machines needs "
                         "rows from two or more (a fleet sweep, or merged datasets of several hosts)")
    if baseline is None:
        baseline = names[0]
    if baseline not in names:
        raise ValueError(f"baseline machine {baseline!r} is not in the dataset (machines: {', '.join(names)})")
    entries = machine_entries(ds)

    def side(name: str) -> Dataset:
        rows = [row for row, label in zip(ds.rows, labels) if label == name]
        metadata = {k: v for k, v in ds.metadata.items()
                    if k not in ("machine", "machine_id", "machine_fingerprint", "machines")}
        keys = {machine_key(row) for row in rows}
        mine = [e for e in entries if (e.get("host"), e.get("fingerprint_id")) in keys
                or (None, e.get("fingerprint_id")) in keys]
        if mine:
            metadata["machine"] = dict(mine[0].get("facts") or {})
            metadata["machine_fingerprint"] = dict(mine[0].get("fingerprint") or {})
        return Dataset(rows, metadata)

    base = side(baseline)
    return {name: compare(base, side(name), **options) for name in names if name != baseline}


def _machines_of(rows: Sequence[Mapping[str, Any]], metadata: Mapping[str, Any]) -> tuple[list[str], dict]:
    """Each row's machine label, and ``{label: fingerprint}`` of the machines the metadata describes.

    A dataset of one machine labels every row with that machine's host name
    (else its fingerprint id), so that it matches the same host in a
    dataset of several."""
    ds = Dataset(list(rows), dict(metadata))
    labels = machine_labels(ds)
    default = default_machine(ds)
    keys = [machine_key(row, default) for row in rows]
    if not any(labels):
        labels = [host or print_id or "unknown machine" for host, print_id in keys]
    entries = {(e.get("host") or None, e.get("fingerprint_id")): e for e in machine_entries(ds)}
    prints: dict[str, Any] = {}
    for label, key in zip(labels, keys):
        entry = entries.get(key) or next((e for (h, p), e in entries.items() if p == key[1]), None)
        if label not in prints or not prints[label]:
            prints[label] = dict((entry or {}).get("fingerprint") or {})
    return labels, prints


def _per_machine(
    base_rows: Sequence[Mapping[str, Any]],
    base_meta: Mapping[str, Any],
    cand_rows: Sequence[Mapping[str, Any]],
    cand_meta: Mapping[str, Any],
) -> tuple | None:
    """When either side holds rows of several machines (a fleet sweep): both sides with a
    ``machine`` parameter, so that each machine's points meet the same machine's points
    rather than pooling the machines' samples, and the fingerprint differences and
    missing fingerprints machine by machine (``"node-a: kernel_release"``). None when
    both sides are one machine each."""
    base_labels, base_prints = _machines_of(base_rows, base_meta)
    cand_labels, cand_prints = _machines_of(cand_rows, cand_meta)
    if len(set(base_labels)) < 2 and len(set(cand_labels)) < 2:
        return None

    def tagged(rows, metadata, labels):
        names = [MACHINE_PARAM] + [n for n in schema_param_names(rows, metadata) if n != MACHINE_PARAM]
        return ([{**row, MACHINE_PARAM: label} for row, label in zip(rows, labels)],
                {**metadata, "param_names": names})

    differences: list[tuple[str, Any, Any]] = []
    unknown: set[str] = set()
    for label in sorted(set(base_labels) & set(cand_labels)):
        differences += [(f"{label}: {fact}", b, c) for fact, b, c in
                        _differences(base_prints[label], cand_prints[label], MACHINE_FACTS)]
        unknown.update(side for side, prints in (("baseline", base_prints), ("candidate", cand_prints))
                       if not prints[label])
    return (*tagged(base_rows, base_meta, base_labels), *tagged(cand_rows, cand_meta, cand_labels),
            differences, [side for side in ("baseline", "candidate") if side in unknown])


def _compare_point(
    family: str | None,
    params: dict[str, Any],
    base_runs: list[np.ndarray],
    cand_runs: list[np.ndarray],
    *,
    direction: str,
    threshold: float,
    alpha: float,
    confidence: float,
    resamples: int,
    seed: int,
    run_spread_limit: float,
) -> PointComparison:
    base_median, cand_median = median_of_runs(base_runs), median_of_runs(cand_runs)
    base_all = np.concatenate(base_runs) if base_runs else np.empty(0)
    cand_all = np.concatenate(cand_runs) if cand_runs else np.empty(0)
    base_spread, cand_spread = run_spread(base_runs), run_spread(cand_runs)
    common = dict(
        family=family, params=params, baseline_median=base_median,
        candidate_median=cand_median, baseline_cv=coefficient_of_variation(base_all),
        candidate_cv=coefficient_of_variation(cand_all),
        baseline_samples=int(base_all.size), candidate_samples=int(cand_all.size),
        baseline_runs=len(base_runs), candidate_runs=len(cand_runs),
        baseline_run_spread=base_spread, candidate_run_spread=cand_spread,
        baseline_within_spread=within_run_spread(base_runs),
        candidate_within_spread=within_run_spread(cand_runs),
        unstable=is_unstable(base_spread, run_spread_limit) or is_unstable(cand_spread, run_spread_limit),
    )
    if not (math.isfinite(base_median) and math.isfinite(cand_median)) or base_median <= 0:
        return PointComparison(
            **common, ratio=math.nan, ci_low=math.nan, ci_high=math.nan, change=math.nan,
            p_value=math.nan, test_method="none", runs_needed=None, verdict=NOT_COMPARABLE,
            reason=f"medians {_cell(base_median)} and {_cell(cand_median)} "
            f"give no ratio (the baseline must be finite and positive)",
        )
    ratio = cand_median / base_median
    ci_low, ci_high = runs_ratio_interval(
        base_runs, cand_runs, confidence=confidence, resamples=resamples, seed=seed)
    on_runs = len(base_runs) >= 2 and len(cand_runs) >= 2
    first, second = ((run_medians(base_runs), run_medians(cand_runs)) if on_runs
                     else (base_all, cand_all))
    test = mann_whitney_u(first, second)
    common.update(ratio=ratio, ci_low=ci_low, ci_high=ci_high, change=ratio - 1.0,
                  p_value=test.p_value,
                  test_method=f"{test.method} on {'run medians' if on_runs else 'samples'}")
    test_can_decide = smallest_two_sided_p(first.size, second.size) < alpha
    judge = _Judge(common, direction, threshold, alpha, test_can_decide)
    if not (math.isfinite(ci_low) and math.isfinite(ci_high)):
        return judge.point(NOT_COMPARABLE, f"no {judge.interval} of the ratio "
                           "(a resampled baseline median is not positive)")
    fewest = min(base_all.size, cand_all.size)
    if fewest < MIN_SAMPLES:
        return judge.point(INCONCLUSIVE, f"{base_all.size} and {cand_all.size} samples "
                           f"(in {len(base_runs)} and {len(cand_runs)} runs): an interval needs "
                           f"at least {MIN_SAMPLES} a side")
    if common["unstable"]:
        return judge.unstable(run_medians(base_runs), run_medians(cand_runs),
                              base_spread, cand_spread, run_spread_limit)
    if on_runs:
        return judge.by_interval(1.0 + threshold, 1.0 - threshold,
                                 max(len(base_runs), len(cand_runs)))
    side = 0 if len(base_runs) == len(cand_runs) else 1 if len(base_runs) < 2 else 2
    return judge.one_run(run_spread_limit, side)


class _Judge:
    """The verdict of one point from its interval, its runs and the threshold (docs/regression.md)."""

    def __init__(self, common: dict[str, Any], direction: str, threshold: float, alpha: float,
                 test_can_decide: bool) -> None:
        self.common = common
        self.direction = direction
        self.threshold = threshold
        self.alpha = alpha
        self.test_can_decide = test_can_decide
        self.ratio, self.change = common["ratio"], common["change"]
        self.ci_low, self.ci_high = common["ci_low"], common["ci_high"]
        self.interval = f"interval [{_cell(self.ci_low, '{:.3f}')}, {_cell(self.ci_high, '{:.3f}')}]"

    def point(self, verdict: str, reason: str, runs_needed: int | None = None) -> PointComparison:
        return PointComparison(**self.common, runs_needed=runs_needed, verdict=verdict, reason=reason)

    def changed(self, reason: str) -> PointComparison:
        worse = self.change > 0 if self.direction == "lower" else self.change < 0
        return self.point(REGRESSION if worse else IMPROVEMENT,
                          f"{self.change:+.1%} ({_change_words(self.change, self.direction)}), {reason}")

    def test_disagrees(self) -> PointComparison | None:
        """Inconclusive when the U test could reach alpha and does not."""
        p_value = self.common["p_value"]
        if not self.test_can_decide or p_value < self.alpha:
            return None
        return self.point(INCONCLUSIVE, f"change {self.change:+.1%}, {self.interval} beyond the "
                          f"threshold but the U test ({self.common['test_method']}) gives "
                          f"p={p_value:.3g}, not below {self.alpha:g}; more runs would settle it")

    def by_interval(self, upper: float, lower: float, runs_per_side: int) -> PointComparison:
        """Both sides have runs: the interval decides against the edges 1 -/+ threshold."""
        if self.ci_low >= upper or self.ci_high <= lower:
            return self.test_disagrees() or self.changed(
                f"{self.interval} beyond the {self.threshold:.1%} threshold")
        if lower < self.ci_low and self.ci_high < upper:
            return self.point(UNCHANGED, f"change {self.change:+.1%}, {self.interval} within the "
                              f"{self.threshold:.1%} threshold")
        needed = repetitions_to_decide(runs_per_side, self.ratio, self.ci_low, self.ci_high,
                                       (lower, upper))
        if needed is None:
            advice = "the change sits on the threshold itself: no number of runs decides it"
        else:
            advice = f"about {needed} runs per side (now {runs_per_side}) would decide it"
        return self.point(INCONCLUSIVE, f"change {self.change:+.1%}, {self.interval} straddles the "
                          f"{self.threshold:.1%} threshold; {advice}", needed)

    def one_run(self, limit: float, side: int) -> PointComparison:
        """A side of one run shows no between-run variation: a change must exceed the threshold
        even if the two runs differ by ``limit``, the most two runs of a stable point differ by."""
        upper, lower = (1.0 + self.threshold) * limit, (1.0 - self.threshold) / limit
        which = {0: "each side has", 1: "the baseline has", 2: "the candidate has"}[side]
        if self.ci_low >= upper or self.ci_high <= lower:
            return self.test_disagrees() or self.changed(
                f"{self.interval} beyond the {self.threshold:.1%} threshold even if runs of the "
                f"point differ by {limit - 1:.0%} ({which} one run)")
        if 1.0 - self.threshold < self.ci_low and self.ci_high < 1.0 + self.threshold:
            return self.point(UNCHANGED, f"change {self.change:+.1%}, {self.interval} within the "
                              f"{self.threshold:.1%} threshold ({which} one run)")
        return self.point(INCONCLUSIVE, f"{which} one run: a change of {self.change:+.1%} "
                          f"({self.interval}) may be the difference between two runs of one "
                          f"point (up to {limit - 1:.0%} on a stable point); measure 3 or more "
                          f"runs per side")

    def unstable(self, base_medians: np.ndarray, cand_medians: np.ndarray, base_spread: float,
                 cand_spread: float, limit: float) -> PointComparison:
        """Runs disagree beyond ``limit``: only a change larger than the disagreement decides."""
        spreads = [v for v in (base_spread, cand_spread) if math.isfinite(v)]
        needed = max([1.0 + self.threshold, *spreads])
        higher = float(cand_medians.min() / base_medians.max())
        lower = float(cand_medians.max() / base_medians.min())
        disagree = (f"runs disagree by {max(spreads) - 1:.0%} (run spread "
                    f"{_cell(base_spread, '{:.2f}')} baseline, {_cell(cand_spread, '{:.2f}')} candidate, "
                    f"above {limit:.2f})")
        if higher >= needed or lower <= 1.0 / needed:
            gap = higher if higher >= needed else lower
            return self.changed(f"every candidate run is {abs(gap - 1):.0%} "
                                f"{'above' if gap > 1 else 'below'} every baseline run: beyond the "
                                f"{self.threshold:.1%} threshold and more than the {disagree}")
        return self.point(INCONCLUSIVE, f"{disagree}: a change of {self.change:+.1%} cannot be told "
                          f"from the variation between runs; see memlab check for what disturbs "
                          f"this machine, or measure more runs")


def _unpack(data: Any, role: str) -> tuple[list[Mapping[str, Any]], dict[str, Any], str]:
    """(rows, metadata, label) of a dataset, a {"rows", "metadata"} mapping or a path."""
    name = role
    if isinstance(data, (str, os.PathLike)):
        name = os.fspath(data)
        data = load_dataset(data, role)
    if isinstance(data, Mapping):
        rows, metadata = data.get("rows"), data.get("metadata")
    else:
        rows, metadata = getattr(data, "rows", None), getattr(data, "metadata", None)
    if rows is None:
        raise ValueError(
            f"{role}={type(data).__name__} is not a dataset (needs rows and metadata) or a path"
        )
    return list(rows), dict(metadata or {}), f"{name} ({len(rows)} rows)"


def _check_metric_present(metric: str, rows: Sequence[Mapping[str, Any]], role: str) -> None:
    samples = statistic_column(metric, SAMPLES)
    if not rows or any(metric in row or samples in row for row in rows):
        return
    suffix = statistic_column("", SAMPLES)
    known = sorted({c[: -len(suffix)] for row in rows for c in row if c.endswith(suffix)})
    raise ValueError(
        f"metric={metric!r} is not a column of the {role} dataset "
        f"(metrics with samples: {', '.join(known) or 'none'})"
    )


def _param_names(
    base_rows: Sequence[Mapping[str, Any]],
    base_meta: Mapping[str, Any],
    cand_rows: Sequence[Mapping[str, Any]],
    cand_meta: Mapping[str, Any],
    warnings: list[str],
) -> list[str]:
    base_names = schema_param_names(base_rows, base_meta)
    cand_names = schema_param_names(cand_rows, cand_meta)
    names = [n for n in base_names if n != "family"]
    names += [n for n in cand_names if n not in names and n != "family"]
    only_base = [n for n in base_names if n not in cand_names]
    only_cand = [n for n in cand_names if n not in base_names]
    if only_base or only_cand:
        warnings.append(
            "parameter names differ: "
            f"only in baseline {only_base or 'none'}, only in candidate {only_cand or 'none'}; "
            "points are matched on all of them, so points differing there do not match"
        )
    return names


def _index_rows(
    rows: Sequence[Mapping[str, Any]],
    param_names: Sequence[str],
    metric: str,
    role: str,
    warnings: list[str],
) -> dict[tuple[Any, ...], tuple[dict[str, Any], list[np.ndarray]]]:
    """``{point key: (params, runs)}``: each run the finite samples of its rows (the median
    column alone where a row has no samples); runs without a value are left out."""
    points: dict[tuple[Any, ...], tuple[dict[str, Any], list[np.ndarray]]] = {}
    for key, runs in point_runs(rows, param_names).items():
        first = next(iter(runs.values()))[0]
        params = {"family": first.get("family")} if first.get("family") is not None else {}
        params.update({name: first.get(name) for name in param_names})
        samples_of_runs = []
        for index, run_rows in runs.items():
            if len(run_rows) > 1:
                warnings.append(f"{role} has the point {_params_words(params)} more than once "
                                f"in run {index}; samples pooled")
            samples = np.concatenate([_row_samples(row, metric) for row in run_rows])
            if samples.size:
                samples_of_runs.append(samples)
        points[key] = (params, samples_of_runs)
    return points


def _row_samples(row: Mapping[str, Any], metric: str) -> np.ndarray:
    samples = clean_samples(_sample_list(row.get(statistic_column(metric, SAMPLES))))
    if samples.size == 0:
        samples = clean_samples([_to_float(row.get(metric))])
    return samples


def metadata_fingerprint(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The machine fingerprint a dataset's metadata records, or None.

    ``metadata["machine_fingerprint"]`` when present, else the fingerprint of
    ``metadata["machine"]`` (datasets written before fingerprints existed).

    >>> metadata_fingerprint({"machine": {"cpu_model": "Example CPU", "cpuinfo_mhz": 2100.0}})
    {'cpu_model': 'Example CPU'}
    """
    recorded = metadata.get("machine_fingerprint")
    if isinstance(recorded, Mapping) and recorded:
        return dict(recorded)
    machine = metadata.get("machine")
    if isinstance(machine, Mapping):
        return fingerprint(dict(machine)) or None
    return None


def _differences(
    base: Mapping[str, Any], cand: Mapping[str, Any], facts: Sequence[str]
) -> list[tuple[str, Any, Any]]:
    differences = []
    if not base or not cand:
        return differences
    for fact in facts:
        if fact not in base and fact not in cand:
            continue
        base_value = base.get(fact, "unknown")
        cand_value = cand.get(fact, "unknown")
        if key_value(base_value) != key_value(cand_value):
            differences.append((fact, base_value, cand_value))
    return differences


def _sample_list(value: Any) -> list[Any] | None:
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            value = json.loads(text)  # accepts NaN, dropped by clean_samples
        except json.JSONDecodeError:
            return None
    if isinstance(value, (list, tuple, np.ndarray)):
        return [v for v in value if v is not None]
    return None


def _to_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _check_fraction(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise ValueError(f"{name}={value!r} is outside (0, 1)")


def _change_words(change: float, direction: str) -> str:
    if change == 0 or math.isnan(change):
        return "no change"
    worse = change > 0 if direction == "lower" else change < 0
    return f"{abs(change):.1%} {'worse' if worse else 'better'}"


def _cell(value: float, pattern: str = "{:.4g}") -> str:
    return format_number(value, pattern, missing="n/a")


def _params_words(params: Mapping[str, Any]) -> str:
    parts = []
    for name, value in params.items():
        parts.append(str(value) if name == "family" else f"{name}={format_plain(value)}")
    return " ".join(parts) or "(no parameters)"


def _json_number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
