"""memlab.compare on fixture datasets with known shifts, and its CLI."""

import json
import math

import numpy as np
import pytest

from memlab import cli
from memlab.compare import (
    Comparison,
    DatasetReadError,
    compare,
    load_dataset,
    metric_direction,
    parse_fraction,
)
from memlab.dataset import Dataset
from memlab.significance import coefficient_of_variation

METRIC = "ns_per_element"
MACHINE = {"cpu_model": "Test CPU 3000", "kernel_release": "6.1.0", "thp_enabled": "madvise"}
POINTS = [(4096, "sequential"), (4096, "random"), (1 << 20, "sequential"), (1 << 20, "random")]


def point_row(working_set_bytes, order, median, spread, *, repeat=9, seed=0, metric=METRIC):
    """A dataset row whose samples are ``median * (1 + spread * z)``."""
    rng = np.random.default_rng(seed)
    samples = (median * (1.0 + spread * rng.standard_normal(repeat))).tolist()
    row = {"family": "chase", "working_set_bytes": working_set_bytes, "order": order}
    row[metric] = float(np.median(samples))
    row[f"{metric}_min"] = min(samples)
    row[f"{metric}_max"] = max(samples)
    row[f"{metric}_mean"] = float(np.mean(samples))
    row[f"{metric}_stdev"] = float(np.std(samples, ddof=1)) if repeat > 1 else 0.0
    row[f"{metric}_iqr"] = float(np.subtract(*np.percentile(samples, [75, 25])))
    row[f"{metric}_samples"] = samples
    row["counter_page_faults"] = 3.0
    row["repeat"] = repeat
    return row


def make_dataset(shift=1.0, spread=0.005, *, points=POINTS, seed=0, repeat=9,
                 machine=MACHINE, metric=METRIC, param_names=("working_set_bytes", "order")):
    """Points with medians 10, 20, 30 ... ns times ``shift``."""
    rows = [
        point_row(size, order, 10.0 * (index + 1) * shift, spread,
                  repeat=repeat, seed=seed * 100 + index, metric=metric)
        for index, (size, order) in enumerate(points)
    ]
    metadata = {"param_names": list(param_names), "primary_metric": metric,
                "machine": dict(machine)}
    return Dataset(rows=rows, metadata=metadata)


def verdicts(comparison):
    return [p.verdict for p in comparison.points]


def test_twenty_percent_slowdown_with_tight_samples_is_a_regression():
    result = compare(make_dataset(seed=1), make_dataset(1.2, seed=2))
    assert verdicts(result) == ["regression"] * 4
    for point in result.points:
        assert point.ratio == pytest.approx(1.2, rel=0.01)
        assert point.ci_low <= point.ratio <= point.ci_high
        assert 1.17 < point.ci_low and point.ci_high < 1.23
        assert point.p_value < 1e-3
        assert point.change == pytest.approx(0.2, abs=0.01)
    assert result.geometric_mean_ratio == pytest.approx(1.2, rel=0.01)
    assert len(result.failing()) == 4
    assert result.failing(0.25) == []
    text = result.format()
    assert "4 regression" in text and "20.0% worse" in text.replace("19.9", "20.0").replace("20.1", "20.0")


def lognormal_dataset(median, cv, *, seed, repeat=9, exact_cv=False):
    """One chase point whose samples are lognormal with this median and coefficient of variation.

    With ``exact_cv`` the deviations from the median are scaled so that the
    samples' CV is exactly ``cv`` (the skew, and the median, stay).
    """
    sigma = math.sqrt(math.log(1.0 + cv * cv))
    samples = median * np.random.default_rng(seed).lognormal(0.0, sigma, repeat)
    if exact_cv:
        middle = float(np.median(samples))
        spread, offset = np.std(samples, ddof=1), np.mean(samples) - middle
        samples = middle + (samples - middle) * (cv * middle / (spread - cv * offset))
        assert samples.min() > 0 and coefficient_of_variation(samples) == pytest.approx(cv)
    samples = samples.tolist()
    row = {"family": "chase", "working_set_bytes": 1 << 26, "order": "random",
           METRIC: float(np.median(samples)), f"{METRIC}_samples": samples}
    return Dataset([row], {"param_names": ["working_set_bytes", "order"], "primary_metric": METRIC})


@pytest.mark.parametrize("seed", range(5))
def test_four_times_slower_with_fifty_percent_spread_is_a_regression(seed):
    # The case: a loaded machine spreads samples widely, the change is
    # far larger than the spread. The old CV rule answered "too noisy".
    base = lognormal_dataset(10.0, 0.5, seed=2 * seed, exact_cv=True)
    cand = lognormal_dataset(40.0, 0.5, seed=2 * seed + 1, exact_cv=True)
    point = compare(base, cand).points[0]
    assert point.verdict == "regression", point.reason
    assert point.ci_low >= 1.05 and point.p_value < 0.05
    assert "beyond the 5.0% threshold" in point.reason
    assert compare(base, cand).failing() == [point]


def test_two_times_slower_with_tight_samples_is_a_regression():
    result = compare(make_dataset(spread=0.002, seed=1), make_dataset(2.0, spread=0.002, seed=2))
    assert verdicts(result) == ["regression"] * 4
    assert all(1.9 < p.ci_low <= p.ci_high < 2.1 for p in result.points)


def test_one_percent_shift_is_not_flagged_even_when_significant():
    result = compare(make_dataset(spread=0.001, seed=1), make_dataset(1.01, spread=0.001, seed=2))
    assert verdicts(result) == ["unchanged"] * 4
    assert all(p.p_value < 0.05 for p in result.points)
    assert all("significant (p=" in p.reason and "within the 5.0% threshold" in p.reason
               for p in result.points)
    assert all(0.95 < p.ci_low and p.ci_high < 1.05 for p in result.points)
    assert result.failing() == []


def test_identical_data_is_unchanged():
    result = compare(make_dataset(seed=3), make_dataset(seed=3))
    assert verdicts(result) == ["unchanged"] * 4
    assert all(p.p_value == 1.0 and p.ratio == 1.0 for p in result.points)
    assert all("not significant" in p.reason for p in result.points)
    assert result.geometric_mean_ratio == 1.0


def test_interval_straddling_the_threshold_is_too_noisy_with_the_samples_needed():
    result = compare(make_dataset(spread=0.05, seed=1), make_dataset(1.05, spread=0.05, seed=2))
    for point in result.points:  # the fixture straddles: the precondition of the test
        assert point.ci_low < 1.05 < point.ci_high
    assert verdicts(result) == ["too noisy"] * 4
    for point in result.points:
        assert "straddles the 5.0% threshold" in point.reason
        assert point.repeats_needed is None or point.repeats_needed > 9
        if point.repeats_needed is not None:
            assert f"about {point.repeats_needed} samples per side" in point.reason
    assert result.failing() == []
    assert len(result.unjudged) == 4


def test_the_samples_needed_do_decide_a_straddling_point():
    # Same distributions, the suggested number of samples: the interval clears the edge.
    base, cand = lognormal_dataset(10.0, 0.08, seed=11), lognormal_dataset(11.0, 0.08, seed=12)
    point = compare(base, cand).points[0]
    assert point.verdict == "too noisy" and point.ci_low < 1.05 < point.ci_high
    needed = point.repeats_needed
    assert 9 < needed < 200
    bigger = compare(lognormal_dataset(10.0, 0.08, seed=13, repeat=2 * needed),
                     lognormal_dataset(11.0, 0.08, seed=14, repeat=2 * needed)).points[0]
    assert bigger.verdict == "regression", bigger.reason


def test_spread_alone_never_withholds_a_verdict():
    # Wide samples on one side, a change far beyond the threshold: decided.
    result = compare(make_dataset(spread=0.002, seed=1), make_dataset(1.5, spread=0.08, seed=2))
    assert verdicts(result) == ["regression"] * 4
    assert all(p.candidate_cv > 0.05 for p in result.points)


def test_the_threshold_sets_what_the_interval_must_clear():
    base, cand = make_dataset(spread=0.04, seed=1), make_dataset(1.2, spread=0.04, seed=2)
    loose = compare(base, cand, threshold=0.4)
    assert all(0.6 < p.ci_low and p.ci_high < 1.4 for p in loose.points)
    assert verdicts(loose) == ["unchanged"] * 4
    strict = compare(base, cand, threshold=0.05)
    assert all(p.ci_low >= 1.05 for p in strict.points)
    assert verdicts(strict) == ["regression"] * 4


def test_improvement_and_direction_of_rates():
    faster = compare(make_dataset(seed=1), make_dataset(0.8, seed=2))
    assert verdicts(faster) == ["improvement"] * 4
    assert faster.failing() == []
    rate = "GiB_per_s"
    slower_rate = compare(make_dataset(seed=1, metric=rate), make_dataset(0.8, seed=2, metric=rate))
    assert slower_rate.better == "higher"
    assert verdicts(slower_rate) == ["regression"] * 4
    forced = compare(make_dataset(seed=1, metric=rate), make_dataset(0.8, seed=2, metric=rate),
                     better="lower")
    assert verdicts(forced) == ["improvement"] * 4


def test_few_samples_cannot_give_a_verdict():
    result = compare(make_dataset(repeat=3, seed=1), make_dataset(1.5, repeat=3, seed=2))
    assert verdicts(result) == ["too few samples"] * 4
    assert "cannot reach p<0.05 (smallest possible p 0.1)" in result.points[0].reason
    single = compare(make_dataset(repeat=1, seed=1), make_dataset(1.5, repeat=1, seed=2))
    assert verdicts(single) == ["too few samples"] * 4


def test_five_samples_each_are_enough_for_a_clear_shift():
    result = compare(make_dataset(repeat=5, seed=1), make_dataset(1.2, repeat=5, seed=2))
    assert verdicts(result) == ["regression"] * 4


def test_points_only_in_one_dataset_are_listed():
    base = make_dataset(points=POINTS[:3], seed=1)
    cand = make_dataset(points=POINTS[1:] + [(1 << 24, "random")], seed=1)
    result = compare(base, cand)
    assert [(p.params["working_set_bytes"], p.params["order"]) for p in result.points] == [
        (4096, "random"), (1 << 20, "sequential")]
    assert result.only_in_baseline == [
        {"family": "chase", "working_set_bytes": 4096, "order": "sequential"}]
    assert [p["working_set_bytes"] for p in result.only_in_candidate] == [1 << 20, 1 << 24]
    text = result.format()
    assert "only in baseline (1):\n  chase working_set_bytes=4096 order=sequential" in text
    assert "only in candidate (2):" in text
    assert "3 unmatched" in text


def test_different_parameter_names_are_reported():
    base = make_dataset(seed=1)
    cand = make_dataset(seed=1)
    for row in cand.rows:
        row["npad"] = 0
    cand.metadata["param_names"] = ["working_set_bytes", "order", "npad"]
    result = compare(base, cand)
    assert result.points == []
    assert len(result.only_in_baseline) == len(result.only_in_candidate) == 4
    assert any("only in candidate ['npad']" in w for w in result.warnings)


def test_machine_differences_are_warned():
    other = dict(MACHINE, kernel_release="6.8.0", thp_enabled="always")
    result = compare(make_dataset(seed=1), make_dataset(seed=2, machine=other))
    assert result.machine_differences == [("kernel_release", "6.1.0", "6.8.0")]
    assert result.setting_differences == [("thp_enabled", "madvise", "always")]
    assert not result.same_machine
    text = result.format()
    assert "WARNING: machine differs: kernel_release: 6.1.0 (baseline) vs 6.8.0 (candidate)" in text
    assert "WARNING: setting differs: thp_enabled: madvise (baseline) vs always (candidate)" in text
    same = compare(make_dataset(seed=1), make_dataset(seed=2))
    assert same.machine_differences == [] and same.same_machine and "WARNING" not in same.format()


def test_fingerprint_ignores_volatile_facts():
    base_machine = dict(MACHINE, cpu_count=2, memory_total_bytes=25_100_000_000,
                        memory_available_bytes=20 << 30, cpuinfo_mhz=2100.0,
                        core_clock={"core_GHz": 2.9})
    # a later boot: a few MiB less memory, another clock reading, less free memory
    cand_machine = dict(base_machine, memory_total_bytes=25_090_000_000,
                        memory_available_bytes=3 << 30, cpuinfo_mhz=2394.4,
                        core_clock={"core_GHz": 2.1})
    result = compare(make_dataset(seed=1, machine=base_machine),
                     make_dataset(seed=2, machine=cand_machine))
    assert result.same_machine and result.machine_differences == []
    bigger = dict(base_machine, memory_total_bytes=64 << 30, cpu_count=8)
    result = compare(make_dataset(seed=1, machine=base_machine),
                     make_dataset(seed=2, machine=bigger))
    assert sorted(result.machine_differences) == [("cpu_count", 2, 8), ("memory_total_GiB", 23, 64)]


def test_recorded_fingerprint_wins_over_the_machine_facts():
    base = make_dataset(seed=1)
    base.metadata["machine_fingerprint"] = {"cpu_model": "Other CPU", "cpu_count": 4}
    cand = make_dataset(seed=2)
    cand.metadata["machine_fingerprint"] = {"cpu_model": "Test CPU 3000", "cpu_count": 4}
    result = compare(base, cand)
    assert result.machine_differences == [("cpu_model", "Other CPU", "Test CPU 3000")]


def test_a_baseline_without_fingerprint_is_reported():
    base = make_dataset(seed=1)
    del base.metadata["machine"]
    result = compare(base, make_dataset(seed=2))
    assert result.machine_unknown == ["baseline"] and not result.same_machine
    assert ("WARNING: the baseline records no machine fingerprint: cannot tell whether both "
            "were measured on the same machine") in result.format()


def test_geometric_mean_ratio_over_points():
    base = make_dataset(points=POINTS[:2], spread=0.0)
    cand = make_dataset(points=POINTS[:2], spread=0.0)
    cand.rows[0][f"{METRIC}_samples"] = [11.0] * 9
    cand.rows[1][f"{METRIC}_samples"] = [24.2] * 9
    result = compare(base, cand)
    assert result.geometric_mean_ratio == pytest.approx(math.sqrt(1.1 * 1.21))
    assert "geometric mean ratio candidate/baseline: 1.1537 over 2 points (15.4% worse)" in result.summary()


def test_rows_after_a_csv_round_trip_still_match():
    base = make_dataset(seed=1)
    cand = make_dataset(1.2, seed=2)
    for row in cand.rows:
        row["working_set_bytes"] = str(row["working_set_bytes"])
        row[f"{METRIC}_samples"] = json.dumps(row[f"{METRIC}_samples"])
    assert verdicts(compare(base, cand)) == ["regression"] * 4


def test_parameter_names_are_inferred_without_metadata():
    base, cand = make_dataset(seed=1), make_dataset(1.2, seed=2)
    del base.metadata["param_names"], cand.metadata["param_names"]
    result = compare(base, cand)
    assert result.param_names == ["working_set_bytes", "order"]
    assert verdicts(result) == ["regression"] * 4


def test_duplicate_points_are_pooled_with_a_warning():
    base = make_dataset(points=POINTS[:1], seed=1)
    base.rows.append(dict(base.rows[0]))
    result = compare(base, make_dataset(points=POINTS[:1], seed=2))
    assert result.points[0].baseline_samples == 18
    assert any("more than once; samples pooled" in w for w in result.warnings)


def test_a_zero_baseline_is_not_comparable():
    base, cand = make_dataset(points=POINTS[:1]), make_dataset(points=POINTS[:1])
    base.rows[0][f"{METRIC}_samples"] = [0.0] * 9
    point = compare(base, cand).points[0]
    assert point.verdict == "not comparable" and math.isnan(point.ratio)
    assert math.isnan(compare(base, cand).geometric_mean_ratio)


def test_missing_metric_samples_fall_back_to_the_median_column():
    base, cand = make_dataset(points=POINTS[:1]), make_dataset(1.2, points=POINTS[:1])
    for row in base.rows + cand.rows:
        del row[f"{METRIC}_samples"]
    point = compare(base, cand).points[0]
    assert point.ratio == pytest.approx(1.2, rel=0.01)
    assert point.verdict == "too few samples"


def test_bad_arguments_are_errors():
    base = make_dataset()
    with pytest.raises(ValueError, match=r"threshold=0 is outside \(0, 1\)"):
        compare(base, base, threshold=0)
    with pytest.raises(ValueError, match=r"alpha=1.5 is outside \(0, 1\)"):
        compare(base, base, alpha=1.5)
    with pytest.raises(ValueError, match="cannot tell whether lower or higher is better"):
        compare(base, base, metric="core_GHz")
    with pytest.raises(ValueError, match="is not a dataset"):
        compare(42, base)
    with pytest.raises(ValueError, match="metric='elements_per_s' is not a column of the baseline "
                       r"dataset \(metrics with samples: ns_per_element\)"):
        compare(base, base, metric="elements_per_s")
    bare = Dataset(rows=[], metadata={})
    with pytest.raises(ValueError, match="neither dataset's metadata names a primary_metric"):
        compare(bare, bare)
    with pytest.raises(ValueError, match="verdict='slow' is not one of"):
        compare(base, base).by_verdict("slow")


@pytest.mark.parametrize("metric,direction", [
    ("ns_per_element", "lower"), ("cycles_per_element", "lower"), ("elapsed_ns", "lower"),
    ("seconds", "lower"), ("fault_ns", "lower"), ("GiB_per_s", "higher"), ("GB_per_s", "higher"),
    ("GFLOP_per_s", "higher"), ("elements_per_s", "higher"), ("loops_per_second", "higher"),
])
def test_metric_direction_from_the_name(metric, direction):
    assert metric_direction(metric) == direction


def test_metric_direction_overrides():
    assert metric_direction("GiB_per_s", "lower") == "lower"
    assert metric_direction("score", {"score": "higher"}) == "higher"
    assert metric_direction("ns_per_element", {"score": "higher"}) == "lower"
    with pytest.raises(ValueError, match="metric='score': cannot tell"):
        metric_direction("score")
    with pytest.raises(ValueError, match="better='faster' is not one of 'lower', 'higher'"):
        metric_direction("score", "faster")


def test_parse_fraction():
    assert parse_fraction("fail_above", "5%") == pytest.approx(0.05)
    assert parse_fraction("fail_above", "0.1") == pytest.approx(0.1)
    with pytest.raises(ValueError, match="fail_above=5 is ambiguous: write 5% or a fraction"):
        parse_fraction("fail_above", "5")
    with pytest.raises(ValueError, match="fail_above='five' must be a percentage like 5%"):
        parse_fraction("fail_above", "five")
    with pytest.raises(ValueError, match=r"fail_above=-3% is outside"):
        parse_fraction("fail_above", "-3%")


def test_to_rows_and_to_dict_are_plain_data():
    result = compare(make_dataset(seed=1), make_dataset(1.2, seed=2))
    rows = result.to_rows()
    assert rows[0]["working_set_bytes"] == 4096 and rows[0]["verdict"] == "regression"
    assert json.loads(json.dumps(result.to_dict()))["points"][0]["order"] == "sequential"
    assert isinstance(result, Comparison)


# --- files and the CLI -------------------------------------------------------


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name, dataset in {
        "base": make_dataset(seed=1),
        "same": make_dataset(seed=2),
        "slow": make_dataset(1.2, seed=2),
        "noisy": make_dataset(1.05, spread=0.05, seed=2),
        "other": make_dataset(points=[(1 << 30, "random")], seed=2),
    }.items():
        paths[name] = tmp_path / f"{name}.csv"
        dataset.save(paths[name])
    return paths


def test_compare_loads_paths(files):
    result = compare(files["base"], files["slow"])
    assert verdicts(result) == ["regression"] * 4
    assert str(files["base"]) in result.format()


def test_cli_exit_zero_without_regression(files, capsys):
    assert cli.main(["compare", str(files["base"]), str(files["same"])]) == 0
    out = capsys.readouterr().out
    assert "ns_per_element (lower is better)" in out and "4 unchanged" in out


def test_cli_exit_one_on_regression(files, capsys):
    assert cli.main(["compare", str(files["base"]), str(files["slow"]), "--fail-above", "5%"]) == 1
    captured = capsys.readouterr()
    assert "regression: +" in captured.out
    assert "4 significant regression(s) of at least 5.0%" in captured.err


def test_cli_fail_above_loosens_the_gate(files, capsys):
    assert cli.main(["compare", str(files["base"]), str(files["slow"]), "--threshold", "5%",
                     "--fail-above", "30%"]) == 0
    assert "4 regression" in capsys.readouterr().out


def test_cli_noisy_data_does_not_fail_unless_asked(files, capsys):
    assert cli.main(["compare", str(files["base"]), str(files["noisy"])]) == 0
    assert "too noisy" in capsys.readouterr().out
    assert cli.main(["compare", str(files["base"]), str(files["noisy"]), "--fail-on-noise"]) == 1
    assert "4 point(s) without a verdict" in capsys.readouterr().err
    assert cli.main(["compare", str(files["base"]), str(files["same"]), "--fail-on-noise"]) == 0


def test_cli_exit_two_on_unusable_input(files, tmp_path, capsys):
    missing = tmp_path / "missing.csv"
    assert cli.main(["compare", str(files["base"]), str(missing)]) == 2
    assert f"candidate dataset {missing} does not exist" in capsys.readouterr().err
    corrupt = tmp_path / "corrupt.csv"
    corrupt.write_bytes(b"\x00\xff garbage, not a dataset\n\x01")
    assert cli.main(["compare", str(corrupt), str(files["base"])]) == 2
    assert f"baseline dataset {corrupt} cannot be read" in capsys.readouterr().err
    assert cli.main(["compare", str(files["base"]), str(files["other"])]) == 2
    assert "no point in common" in capsys.readouterr().err
    assert cli.main(["compare", str(files["base"]), str(files["slow"]), "--fail-above", "5"]) == 2
    assert "ambiguous" in capsys.readouterr().err
    assert cli.main(["compare", str(files["base"]), str(files["slow"]), "--metric", "score"]) == 2
    assert cli.main(["compare", str(files["base"])]) == 2


def test_cli_json_output(files, capsys):
    assert cli.main(["compare", str(files["base"]), str(files["slow"]), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["metric"] == METRIC and len(data["points"]) == 4
    assert data["points"][0]["verdict"] == "regression"


def test_load_dataset_errors(tmp_path):
    with pytest.raises(DatasetReadError, match="baseline dataset .* does not exist") as info:
        load_dataset(tmp_path / "nope.csv", "baseline")
    assert info.value.path == str(tmp_path / "nope.csv")


def test_load_dataset_accepts_the_stem_and_reports_a_bad_sidecar(files):
    stem = str(files["base"])[: -len(".csv")]
    assert len(load_dataset(stem).rows) == 4
    sidecar = files["slow"].with_suffix(".json")
    sidecar.write_text("{not json")
    with pytest.raises(DatasetReadError, match=r"candidate dataset .* cannot be read: .*slow\.json: not valid JSON"):
        load_dataset(files["slow"], "candidate")


def test_compare_is_part_of_the_public_api():
    import memlab

    assert memlab.compare is compare
    assert "compare" in memlab.__all__


def test_memlab_cli_dispatches_compare(files, capsys):
    from memlab.cli import main

    assert main(["compare", str(files["base"]), str(files["slow"])]) == 1
    assert main(["compare", str(files["base"]), str(files["same"])]) == 0
    assert main(["compare", str(files["base"]), "/nonexistent/x.csv"]) == 2
    assert "regression" in capsys.readouterr().out
