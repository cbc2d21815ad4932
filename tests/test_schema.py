"""The row schema memlab.dataset owns: names a metric may take, inference, point keys, renamed columns."""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import json
import math

import pytest

import memlab
from memlab import dataset as schema
from memlab import registry, units
from memlab.dataset import Dataset, DatasetWriter
from memlab.family import Family
from memlab.measure import Measurement


def measurement(metrics: dict[str, float], params: dict | None = None, family: str = "demo") -> Measurement:
    samples = [{name: value * factor for name, value in metrics.items()} for factor in (0.9, 1.0, 1.1)]
    return Measurement(family=family, params=dict(params or {"n": 1}), samples=samples, counters=[],
                       counters_missing={}, counters_scope="none", warmup_samples=[],
                       primary_metric=next(iter(metrics)))


# ---- names -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["core_GHz_min", "x_max", "x_mean", "x_stdev", "x_iqr", "x_samples"])
def test_a_metric_ending_in_a_statistic_suffix_is_refused(name):
    with pytest.raises(ValueError, match=rf"metric name '{name}' ends with '_[a-z]+', which the dataset "
                                         "format reserves"):
        schema.check_metric_name(name)


@pytest.mark.parametrize("name, reason", [("counter_cycles", "reserved"), ("context_cpu", "reserved"),
                                          ("repeat", "reserved"), ("warmup", "bookkeeping column"),
                                          ("", "non-empty")])
def test_reserved_metric_names(name, reason):
    with pytest.raises(ValueError, match=reason):
        schema.check_metric_name(name)


def test_ordinary_names_pass():
    for name in ("ns_per_element", "core_GHz_lowest", "check_visits_fewest", "GiB_per_s", "minimum"):
        assert schema.check_metric_name(name) == name


def test_the_collision_the_schema_prevents():
    # Before the check, a metric core_GHz_min overwrote core_GHz's minimum column: the later write won.
    with pytest.raises(ValueError, match="family 'calibrate': metric name 'core_GHz_min'"):
        measurement({"core_GHz": 3.0, "core_GHz_min": 2.5}, {"budget_ns": 1}, "calibrate").to_row()


def test_calibrate_rows_keep_the_clock_statistics_apart_from_its_spread():
    row = memlab.run("calibrate", budget_ns=10_000_000, repeat=3, warmup=0).to_row()
    assert row["core_GHz_min"] == min(row["core_GHz_samples"])
    assert row["core_GHz_max"] == max(row["core_GHz_samples"])
    assert row["core_GHz_lowest"] <= row["core_GHz"] <= row["core_GHz_highest"]
    assert row["calibration_timings"] >= 3
    for name in row:
        if name.endswith(schema.RESERVED_SUFFIXES) and name not in schema.BOOKKEEPING_COLUMNS:
            assert name.rsplit("_", 1)[0] in row, f"{name} is a statistic of no metric"


def test_a_family_with_a_reserved_parameter_name_is_refused():
    @dataclasses.dataclass(frozen=True)
    class Params:
        size_max: int = 1

    with pytest.raises(ValueError, match="family 'demo': parameter name 'size_max' ends with '_max'"):
        Family(name="demo", params_type=Params, core="calibrate")


def test_every_registered_family_has_legal_parameter_names():
    for family in registry.all_families().values():
        for name in family.param_names:
            assert schema.check_param_name(name) == name


# ---- inference -------------------------------------------------------------------------------


def test_inference_without_metadata_matches_the_metadata_of_a_real_row():
    row = memlab.run("region", {"region_bytes": 1 << 20}, repeat=2, warmup=0).to_row()
    family = registry.family("region")
    assert schema.param_names([row]) == family.param_names
    assert schema.param_names([row], {"param_names": family.param_names}) == family.param_names
    metrics = schema.metric_names([row])
    assert "GB_per_s" in metrics and "ns_per_page" in metrics
    assert not set(metrics) & set(family.param_names)
    assert not any(m.startswith(("counter_", "context_")) or m.endswith("_min") for m in metrics)
    assert schema.primary_metric([row]) == "ns_per_page"
    assert schema.primary_metric([row], {"primary_metric": "GB_per_s"}) == "GB_per_s"
    assert Dataset([row]).primary_metric(("huge_fraction",)) == "huge_fraction"


def test_a_listed_parameter_that_carries_samples_is_a_metric():
    rows = [{"family": "f", "laps": 3.0, "laps_samples": [3.0], "n": 1}]
    assert schema.param_names(rows, {"param_names": ["n", "laps"]}) == ["n"]


def test_no_metric_is_a_value_error():
    with pytest.raises(ValueError, match="no metric"):
        schema.primary_metric([{"family": "x", "n": 1}])


def test_point_keys_survive_a_csv_round_trip_without_types():
    names = ["working_set_bytes", "order", "tile", "sizes"]
    typed = {"family": "f", "working_set_bytes": 4096, "order": "random", "tile": None, "sizes": [1, 2]}
    text = {"family": "f", "working_set_bytes": "4096", "order": "random", "tile": math.nan,
            "sizes": [1.0, 2.0]}
    assert schema.point_key(typed, names) == schema.point_key(text, names) == ("f", 4096, "random", None, (1, 2))
    assert schema.point_key(typed, names) != schema.point_key({**typed, "working_set_bytes": 4097}, names)


def test_statistic_columns():
    assert schema.statistic_column("GiB_per_s", "stdev") == "GiB_per_s_stdev"
    with pytest.raises(ValueError, match="statistic='median'"):
        schema.statistic_column("GiB_per_s", "median")
    assert schema.metric_column("laps", ["laps"]) == "measured_laps"


# ---- renamed columns --------------------------------------------------------------------------


def old_calibrate_row(median: float) -> dict:
    """A calibrate row as memlab wrote it before the rename (the metric overwrote core_GHz's minimum)."""
    return {
        "family": "calibrate", "budget_ns": 50_000_000,
        "core_GHz": median, "core_GHz_min": median - 0.3, "core_GHz_max": median + 0.2,
        "core_GHz_samples": [median - 0.01, median, median + 0.01],
        "core_GHz_min_min": median - 0.4, "core_GHz_min_samples": [median - 0.3] * 3,
        "calibration_samples": 500.0, "calibration_samples_samples": [500.0] * 3,
        "repeat": 3,
    }


def test_a_dataset_written_before_the_rename_loads_under_the_new_names(tmp_path):
    meta = {"family": "calibrate", "sweep": "quick", "param_names": ["budget_ns"],
            "primary_metric": "core_GHz"}
    Dataset([old_calibrate_row(3.0)], meta).save(tmp_path / "old.csv")
    loaded = Dataset.load(tmp_path / "old.csv")
    row = loaded.rows[0]
    assert row["core_GHz_lowest"] == pytest.approx(2.7) and row["core_GHz_highest"] == pytest.approx(3.2)
    assert row["core_GHz_lowest_samples"] == [2.7] * 3 and row["core_GHz_lowest_min"] == pytest.approx(2.6)
    assert row["calibration_timings"] == 500.0 and row["calibration_timings_samples"] == [500.0] * 3
    assert not {"core_GHz_min", "core_GHz_max", "calibration_samples"} & set(row)
    assert loaded.metric_names == ["core_GHz", "core_GHz_lowest", "calibration_timings"]


def test_resuming_an_old_dataset_rewrites_it_under_the_new_names(tmp_path):
    meta = {"family": "calibrate", "sweep": "quick", "param_names": ["budget_ns"]}
    path = tmp_path / "old.csv"
    Dataset([old_calibrate_row(3.0)], meta).save(path)
    new_row = memlab.run("calibrate", budget_ns=5_000_000, repeat=1, warmup=0).to_row()
    with DatasetWriter(path, meta) as writer:
        assert writer.existing_rows[0]["core_GHz_highest"] == pytest.approx(3.2)
        writer.append(new_row)
    header = path.read_text().splitlines()[0].split(",")
    assert "core_GHz_min" in header  # now the minimum of core_GHz, as in any row
    assert "calibration_samples" not in header and "core_GHz_lowest" in header
    rows = Dataset.load(path).rows
    assert [r["budget_ns"] for r in rows] == [50_000_000, 5_000_000]
    assert rows[0]["core_GHz_highest"] == pytest.approx(3.2)
    assert rows[1]["core_GHz_min"] == min(rows[1]["core_GHz_samples"])


def test_an_old_region_sweep_resumes_on_the_renamed_parameter(tmp_path):
    """Rows measured as region ``bytes`` count as done for ``region_bytes``: only the new point is measured."""
    path = tmp_path / "region.csv"
    sweep = memlab.Sweep("sizes", "region", memlab.grid(region_bytes=[1 << 20, 2 << 20], populate=["touch"]),
                         repeat=1, warmup=0, runs=1)
    old = memlab.run("region", region_bytes=1 << 20, populate="touch", repeat=1, warmup=0).to_row()
    old = {("bytes" if k == "region_bytes" else k): v for k, v in old.items() if k != "strict_pages"}
    old["allow_fallback"] = True  # the old name said the opposite: True is strict_pages=False
    old["GB_per_s"] = -1.0  # a marker: re-measuring the point would replace it
    names = ["bytes", "pages", "populate", "allow_fallback"]
    Dataset([old], {"family": "region", "sweep": "sizes", "param_names": names}).save(path)
    dataset = memlab.run_sweep(sweep, path, progress=False)
    assert [r["region_bytes"] for r in dataset.rows] == [1 << 20, 2 << 20]
    assert dataset.rows[0]["GB_per_s"] == -1.0 and dataset.rows[1]["GB_per_s"] > 0
    loaded = Dataset.load(path)
    assert "bytes" not in loaded.columns and loaded.metadata["param_names"][0] == "region_bytes"


def test_a_sidecar_naming_a_parameter_the_csv_holds_under_its_old_name_loads(tmp_path):
    """What a resume before the fix left: the header still ``bytes``, the sidecar ``region_bytes``."""
    Dataset([{"family": "region", "bytes": 4096, "t": 1.0, "t_samples": [1.0]}],
            {"family": "region", "param_names": ["bytes"]}).save(tmp_path / "r.csv")
    sidecar = json.loads((tmp_path / "r.json").read_text())
    sidecar["param_names"] = ["region_bytes"]
    (tmp_path / "r.json").write_text(json.dumps(sidecar))
    loaded = Dataset.load(tmp_path / "r.csv")
    assert loaded.param_names == ["region_bytes"] and loaded.rows[0]["region_bytes"] == 4096


@pytest.mark.parametrize("family, old, new, value", [
    ("pipe", "buffer_size", "buffer_bytes", 65536), ("pipe", "pipe_size", "pipe_size_bytes", 65536),
    ("system", "buffer_size", "buffer_bytes", 1024), ("share", "disp", "disp_longs", 8),
    ("region", "bytes", "region_bytes", 4096), ("clear_fault", "strict", "strict_pages", True)])
def test_renamed_parameters_load_under_their_new_names(tmp_path, family, old, new, value):
    Dataset([{"family": family, old: value, "t": 1.0, "t_samples": [1.0]}],
            {"family": family, "param_names": [old]}).save(tmp_path / "old.csv")
    loaded = Dataset.load(tmp_path / "old.csv")
    assert loaded.rows[0][new] == value and old not in loaded.rows[0]
    assert loaded.param_names == [new]
    assert new in registry.family(family).param_names


@pytest.mark.parametrize("family, old, new, value, expected", [
    ("share", "disp", "disp_longs", 16, 16), ("region", "bytes", "region_bytes", 8192, 8192),
    ("pipe", "buffer_size", "buffer_bytes", 4096, 4096), ("clear_fault", "strict", "strict_pages", True, True),
    ("region", "allow_fallback", "strict_pages", True, False)])
def test_old_parameter_names_are_taken_with_one_deprecation_line(family, old, new, value, expected):
    params_of = registry.family(family).params
    with pytest.warns(DeprecationWarning, match=f"{family}: parameter {old}= is now {new}=") as caught:
        params = params_of(**{old: value})
    assert getattr(params, new) == expected and len(caught) == 1
    with pytest.warns(DeprecationWarning):
        assert getattr(params_of({old: value}), new) == expected  # a dict of parameters too
    with pytest.raises(ValueError, match=f"{old}= and {new}= are one parameter of {family}"):
        params_of(**{old: value, new: value})


def test_bandwidths_old_overlap_loads_as_the_window_overlap_and_a_new_file_keeps_both(tmp_path):
    """bandwidth's overlap_fraction was the threads' common window; the team's one definition took
    the name, so old files load it as window_overlap_fraction and new files keep the two apart."""
    old = {"family": "bandwidth", "threads": 2, "GB_per_s": 9.0, "overlap_fraction": 0.97,
           "overlap_fraction_samples": [0.97]}
    Dataset([old], {"family": "bandwidth", "param_names": ["threads"]}).save(tmp_path / "old.csv")
    row = Dataset.load(tmp_path / "old.csv").rows[0]
    assert row["window_overlap_fraction"] == 0.97 and row["window_overlap_fraction_samples"] == [0.97]
    assert "overlap_fraction" not in row
    new = dict(old, window_overlap_fraction=0.99, overlap_fraction=0.8)
    Dataset([new], {"family": "bandwidth", "param_names": ["threads"]}).save(tmp_path / "new.csv")
    row = Dataset.load(tmp_path / "new.csv").rows[0]
    assert (row["overlap_fraction"], row["window_overlap_fraction"]) == (0.8, 0.99)


@pytest.mark.parametrize("allow_fallback", [True, False])
def test_region_allow_fallback_loads_as_its_negation_strict_pages(tmp_path, allow_fallback):
    """The old name said the opposite of the new one: allow_fallback=True is strict_pages=False."""
    row = {"family": "region", "region_bytes": 4096, "allow_fallback": allow_fallback, "t": 1.0, "t_samples": [1.0]}
    Dataset([row], {"family": "region", "param_names": ["region_bytes", "allow_fallback"]}).save(tmp_path / "old.csv")
    for path in (tmp_path / "old.csv", tmp_path / "old.json"):
        loaded = Dataset.load(path)
        assert loaded.rows[0]["strict_pages"] is (not allow_fallback)
        assert "allow_fallback" not in loaded.rows[0] and loaded.param_names == ["region_bytes", "strict_pages"]
    (tmp_path / "old.json").unlink()  # the CSV alone: the booleans are read from their text
    assert Dataset.load(tmp_path / "old.csv").rows[0]["strict_pages"] is (not allow_fallback)


def test_every_alias_points_at_a_legal_name():
    for family, aliases in schema.COLUMN_ALIASES.items():
        assert family in registry.all_families()
        for new in aliases.values():
            assert schema.check_metric_name(new) == new
            assert new not in aliases, f"{family}: {new} is renamed twice"


# ---- the examples in the docstrings of the pure modules ----------------------------------------


@pytest.mark.parametrize("name", ["memlab.units", "memlab.grid", "memlab.dataset", "memlab.chart", "memlab.files",
                                  "memlab.hierarchy"])
def test_docstring_examples(name, tmp_path, monkeypatch):
    module = importlib.import_module(name)  # memlab.grid the attribute is the grid() function
    monkeypatch.chdir(tmp_path)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for attribute in module.__all__:
        target = getattr(module, attribute)
        if not callable(target) or isinstance(target, type):
            continue
        for test in finder.find(target, f"{name}.{attribute}", globs=vars(module).copy()):
            runner.run(test)
    assert runner.failures == 0, f"{runner.failures} docstring example(s) of {module.__name__} failed"
