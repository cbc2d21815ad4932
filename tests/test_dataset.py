"""Dataset: CSV + sidecar round trip, truncated files, resumable writer, merge, views."""

import csv
import io
import json
import math
from collections.abc import Mapping

import numpy as np
import pytest

from memlab.dataset import FORMAT_NAME, FORMAT_VERSION, Dataset, DatasetWriter, paths_for

META = {"family": "chase", "sweep": "quick", "param_names": ["working_set_bytes", "order"]}


def sample_rows():
    return [
        {
            "family": "chase",
            "working_set_bytes": 4096,
            "order": "random",
            "ns_per_element": 1.25,
            "ns_per_element_samples": [1.2, 1.25, 1.3],
            "counter_page_faults": 3.0,
            "counters_missing": {"cycles": "ENOENT: not supported"},
            "counters_scope": "user",
            "huge": True,
            "note": "comma, \"quote\"\nnewline",
            "empty_text": "",
            "maybe": None,
            "repeat": 3,
        },
        {
            "family": "chase",
            "working_set_bytes": 1 << 30,
            "order": "linear",
            "ns_per_element": 0.5,
            "ns_per_element_samples": [],
            "counter_page_faults": math.nan,
            "counters_missing": {},
            "counters_scope": "kernel+user",
            "huge": False,
            "note": "plain",
            "empty_text": "x",
            "maybe": 7,
            "repeat": 5,
        },
    ]


def same_rows(left, right):
    """Row equality with NaN equal to NaN (at top level and inside lists)."""

    def norm(value):
        if isinstance(value, float) and math.isnan(value):
            return "NaN"
        if isinstance(value, list):
            return [norm(v) for v in value]
        if isinstance(value, Mapping):  # a loaded row is a Mapping over columns, not a dict
            return {k: norm(v) for k, v in value.items()}
        return value

    return norm(left) == norm(right)


def test_round_trip_restores_types_exactly(tmp_path):
    ds = Dataset(sample_rows(), META)
    ds.save(tmp_path / "x.csv")
    loaded = Dataset.load(tmp_path / "x.csv")
    assert same_rows(loaded.rows, ds.rows)
    assert type(loaded[0]["working_set_bytes"]) is int
    assert type(loaded[0]["huge"]) is bool
    assert loaded[0]["empty_text"] == "" and loaded[0]["maybe"] is None
    assert math.isnan(loaded[1]["counter_page_faults"])
    assert loaded.metadata["param_names"] == META["param_names"]
    assert loaded.columns == ds.columns


def test_sidecar_keys_and_csv_encoding(tmp_path):
    Dataset(sample_rows(), META).save(tmp_path / "x.csv")
    sidecar = json.loads((tmp_path / "x.json").read_text())
    assert sidecar["format"] == FORMAT_NAME and sidecar["format_version"] == FORMAT_VERSION
    assert "created" in sidecar and sidecar["family"] == "chase"
    assert sidecar["column_types"]["working_set_bytes"] == "int"
    assert sidecar["column_types"]["huge"] == "bool"
    assert sidecar["column_types"]["ns_per_element_samples"] == "json"
    lines = (tmp_path / "x.csv").read_text().splitlines()
    assert lines[0].startswith("family,working_set_bytes,order,ns_per_element,")
    first = next(csv.DictReader(io.StringIO((tmp_path / "x.csv").read_text())))
    assert first["huge"] == "true"
    assert first["ns_per_element_samples"] == "[1.2,1.25,1.3]"
    assert not list(tmp_path.glob("*.tmp*"))


def test_load_accepts_sidecar_path_and_missing_sidecar(tmp_path):
    Dataset(sample_rows(), META).save(tmp_path / "x.csv")
    assert len(Dataset.load(tmp_path / "x.json")) == 2
    (tmp_path / "x.json").unlink()
    bare = Dataset.load(tmp_path / "x.csv")
    assert bare.metadata == {}
    assert bare[0]["working_set_bytes"] == 4096 and bare[0]["huge"] is True
    assert bare[0]["ns_per_element_samples"] == [1.2, 1.25, 1.3]
    assert paths_for("a/b") == ("a/b.csv", "a/b.json")


def test_truncated_last_line_is_dropped_and_recorded(tmp_path):
    Dataset(sample_rows(), META).save(tmp_path / "x.csv")
    path = tmp_path / "x.csv"
    text = path.read_text()
    path.write_text(text[: len(text) - 10])  # crash in the middle of the last row
    loaded = Dataset.load(path)
    assert len(loaded) == 1
    assert same_rows(loaded.rows, sample_rows()[:1])
    assert "truncated" in loaded.metadata["load_warnings"][0]


def test_truncated_inside_quoted_field(tmp_path):
    Dataset(sample_rows(), META).save(tmp_path / "x.csv")
    path = tmp_path / "x.csv"
    text = path.read_text()
    cut = text.index("comma,") + 3  # inside the quoted multi-line "note" of row 1
    path.write_text(text[:cut])
    loaded = Dataset.load(path)
    assert len(loaded) == 0 and loaded.metadata["load_warnings"]


def test_short_record_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("family,n\nf,1\nf\nf,3\n")
    with pytest.raises(ValueError, match=r"record 3 \(line 3\) has 1 fields"):
        Dataset.load(path)


def test_unknown_format_version_is_rejected(tmp_path):
    Dataset(sample_rows(), META).save(tmp_path / "x.csv")
    sidecar = json.loads((tmp_path / "x.json").read_text())
    sidecar["format_version"] = 99
    (tmp_path / "x.json").write_text(json.dumps(sidecar))
    with pytest.raises(ValueError, match="format_version=99"):
        Dataset.load(tmp_path / "x.csv")
    sidecar["format_version"], sidecar["format"] = FORMAT_VERSION, "other"
    (tmp_path / "x.json").write_text(json.dumps(sidecar))
    with pytest.raises(ValueError, match="format='other'"):
        Dataset.load(tmp_path / "x.csv")


def test_writer_appends_and_resumes(tmp_path):
    path = tmp_path / "run.csv"
    rows = sample_rows()
    with DatasetWriter(path, META) as writer:
        assert writer.existing_rows == []
        writer.append(rows[0])
    assert same_rows(Dataset.load(path).rows, rows[:1])
    with DatasetWriter(path, META) as writer:
        assert same_rows(writer.existing_rows, rows[:1])
        writer.append(rows[1])
    loaded = Dataset.load(path)
    assert same_rows(loaded.rows, rows)
    assert loaded.metadata["sweep"] == "quick"
    assert path.read_text().count("\nchase,") == 2


def test_writer_rewrites_header_for_new_column(tmp_path):
    path = tmp_path / "run.csv"
    with DatasetWriter(path, META) as writer:
        writer.append({"family": "chase", "working_set_bytes": 1, "order": "a", "x": 1})
        writer.append({"family": "chase", "working_set_bytes": 2, "order": "a", "x": 2, "extra": [1]})
        writer.append({"family": "chase", "working_set_bytes": 3, "order": "a", "x": 3})
    loaded = Dataset.load(path)
    assert loaded.columns == ["family", "working_set_bytes", "order", "x", "extra"]
    assert loaded.column("extra") == [None, [1], None]
    assert loaded.column("x") == [1, 2, 3]
    assert path.read_text().splitlines()[0] == "family,working_set_bytes,order,x,extra"


def test_writer_type_change_keeps_values_exact(tmp_path):
    path = tmp_path / "run.csv"
    with DatasetWriter(path, {}) as writer:
        writer.append({"family": "f", "v": "text"})
        writer.append({"family": "f", "v": 5})
        writer.append({"family": "f", "v": 1})
        writer.append({"family": "f", "v": 2.5})
    assert Dataset.load(path).column("v") == ["text", 5, 1, 2.5]


def test_writer_repairs_truncated_tail_before_appending(tmp_path):
    path = tmp_path / "run.csv"
    with DatasetWriter(path, META) as writer:
        writer.append({"family": "chase", "working_set_bytes": 1, "order": "a"})
    with open(path, "a") as handle:
        handle.write("chase,2,b")  # a crash mid-write
    with DatasetWriter(path, META) as writer:
        assert len(writer.existing_rows) == 1
        writer.append({"family": "chase", "working_set_bytes": 3, "order": "c"})
    loaded = Dataset.load(path)
    assert loaded.column("working_set_bytes") == [1, 3]
    assert "load_warnings" not in loaded.metadata


def test_writer_rejects_conflicting_metadata(tmp_path):
    path = tmp_path / "run.csv"
    with DatasetWriter(path, META) as writer:
        writer.append({"family": "chase", "working_set_bytes": 1, "order": "a"})
    with pytest.raises(ValueError, match="sweep='quick' but this run has sweep='full'"):
        DatasetWriter(path, {**META, "sweep": "full"})
    with pytest.raises(ValueError, match="family='chase'"):
        DatasetWriter(path, {**META, "family": "pipe"})
    DatasetWriter(path, {"family": "chase"}).close()  # sweep unset on one side: compatible


def test_writer_append_after_close_fails(tmp_path):
    writer = DatasetWriter(tmp_path / "run.csv", {})
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.append({"family": "f"})


def test_merge_concatenates_and_records_sources():
    a = Dataset(sample_rows()[:1], {**META, "shard": "1/2"})
    b = Dataset(sample_rows()[1:], {**META, "shard": "2/2"})
    merged = Dataset.merge(a, b)
    assert same_rows(merged.rows, sample_rows())
    assert merged.metadata["family"] == "chase"
    assert [m["shard"] for m in merged.metadata["merged_from"]] == ["1/2", "2/2"]
    assert [m["rows"] for m in merged.metadata["merged_from"]] == [1, 1]


def test_merge_duplicates_raise_unless_dedupe():
    first = Dataset(sample_rows(), META)
    again = Dataset([dict(sample_rows()[0], ns_per_element=9.0)], META)
    with pytest.raises(ValueError, match=r"duplicate point .*; pass dedupe=True to keep the first"):
        Dataset.merge(first, again)
    merged = Dataset.merge(first, again, dedupe=True)
    assert len(merged) == 2 and merged[0]["ns_per_element"] == 1.25
    with pytest.raises(ValueError, match="at least one"):
        Dataset.merge()


def test_key_uses_param_names():
    ds = Dataset(sample_rows(), META)
    assert ds.key(ds[0]) == ("chase", 4096, "random")


def test_filter_column_and_views():
    ds = Dataset(sample_rows(), META)
    assert ds.filter(order="linear").column("working_set_bytes") == [1 << 30]
    assert len(ds.filter(lambda row: row["ns_per_element"] > 1)) == 1
    assert len(ds.filter(lambda row: True, huge=False)) == 1
    assert ds.filter(order="none").rows == []
    assert ds.filter(order="linear").metadata == ds.metadata
    with pytest.raises(ValueError, match="no column 'colour'"):
        ds.filter(colour="red")
    assert Dataset([{"a": 1}, {"b": 2}]).column("a") == [1, None]
    assert Dataset([{"a": 1}, {"b": 2, "a": 3}]).columns == ["a", "b"]
    assert [row["order"] for row in ds] == ["random", "linear"]
    assert len(ds[1:]) == 1
    assert "2 rows" in repr(ds) and "chase" in repr(ds)


def test_to_numpy():
    arrays = Dataset(sample_rows(), META).to_numpy()
    assert arrays["working_set_bytes"].dtype == np.float64
    np.testing.assert_array_equal(arrays["working_set_bytes"], [4096.0, float(1 << 30)])
    assert np.isnan(arrays["counter_page_faults"][1])
    assert arrays["maybe"].dtype == np.float64 and np.isnan(arrays["maybe"][0])
    assert arrays["order"].dtype == object and list(arrays["order"]) == ["random", "linear"]
    assert arrays["ns_per_element_samples"].dtype == object
    assert arrays["ns_per_element_samples"][0] == [1.2, 1.25, 1.3]
    only = Dataset(sample_rows(), META).to_numpy(["repeat"])
    assert list(only) == ["repeat"]


def test_numpy_values_are_saved_as_plain_values(tmp_path):
    ds = Dataset([{"family": "f", "n": np.int64(3), "x": np.float64(0.5), "v": np.arange(3)}])
    ds.save(tmp_path / "x.csv")
    assert Dataset.load(tmp_path / "x.csv").rows == [{"family": "f", "n": 3, "x": 0.5, "v": [0, 1, 2]}]


def test_to_pandas_without_pandas_names_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas":
            raise ImportError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(ImportError, match=r"pip install memlab\[pandas\]"):
        Dataset(sample_rows(), META).to_pandas()


def test_to_pandas_when_installed():
    pandas = pytest.importorskip("pandas")
    frame = Dataset(sample_rows(), META).to_pandas()
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame["order"]) == ["random", "linear"]
    assert frame.attrs["family"] == "chase"


def test_all_missing_columns_keep_none_or_nan(tmp_path):
    ds = Dataset([{"family": "f", "none": None, "nan": math.nan}])
    ds.save(tmp_path / "x.csv")
    row = Dataset.load(tmp_path / "x.csv")[0]
    assert row["none"] is None and math.isnan(row["nan"])
    path = tmp_path / "w.csv"
    with DatasetWriter(path, {}) as writer:
        writer.append({"family": "f", "late": None})
        writer.append({"family": "f", "late": math.nan})
        writer.append({"family": "f", "late": None, "text": None})
        writer.append({"family": "f", "late": 2.5, "text": "t"})
    assert same_rows(Dataset.load(path).column("late"), [math.nan, math.nan, math.nan, 2.5])
    assert Dataset.load(path).column("text") == [None, None, None, "t"]


def test_save_is_atomic_over_an_existing_dataset(tmp_path):
    Dataset(sample_rows(), META).save(tmp_path / "x.csv")
    Dataset(sample_rows()[:1], META).save(tmp_path / "x.csv")
    assert len(Dataset.load(tmp_path / "x.csv")) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv", "x.json"]


# ---- runs of a point -------------------------------------------------------------------------


def test_rows_of_a_point_group_into_its_runs(tmp_path):
    from memlab.dataset import RUN_COLUMN, check_param_name, param_names, point_runs, run_index

    rows = [
        {"family": "f", "n": 1, "run": 1, "t_ns": 2.0, "t_ns_samples": [2.0]},
        {"family": "f", "n": 1, "run": 0, "t_ns": 1.0, "t_ns_samples": [1.0]},
        {"family": "f", "n": 2, "t_ns": 3.0, "t_ns_samples": [3.0]},  # written before runs: run 0
        {"family": "f", "n": 1, "run": 1, "t_ns": 2.5, "t_ns_samples": [2.5]},  # run 1 twice
    ]
    path = tmp_path / "runs.csv"
    Dataset(rows, {"param_names": ["n"]}).save(path)
    loaded = Dataset.load(path)
    runs = point_runs(loaded.rows, ["n"])
    assert list(runs) == [("f", 1), ("f", 2)]
    assert list(runs[("f", 1)]) == [0, 1]  # ordered by run index
    assert [row["t_ns"] for row in runs[("f", 1)][1]] == [2.0, 2.5]
    assert [row["t_ns"] for row in runs[("f", 2)][0]] == [3.0]
    # without the sidecar the run column is bookkeeping, not a parameter
    path.with_suffix(".json").unlink()
    assert param_names(Dataset.load(path).rows) == ["n"]
    assert run_index({"run": 3.0}) == 3 and run_index({"run": None}) == 0
    for bad in (-1, 1.5, "first", True):
        with pytest.raises(ValueError, match="is not a run index"):
            run_index({"run": bad})
    with pytest.raises(ValueError, match="reserved by the dataset format"):
        check_param_name(RUN_COLUMN)
