"""Data out: Dataset.long(), the Table Schema in the sidecar, memlab export (Parquet, csv-long, JSON)."""

from __future__ import annotations

import json
import math
import sys

import pytest

from memlab.cli import main
from memlab.dataset import Dataset, table_schema
from memlab import export


def same(a, b) -> bool:
    """Equal values of the same kind (an int is not a float), NaN equal to NaN, recursively."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def same_rows(rows_a, rows_b) -> bool:
    return len(rows_a) == len(rows_b) and all(same(dict(a), dict(b)) for a, b in zip(rows_a, rows_b))


NAN = float("nan")

#: Every kind of cell the dataset format has: ints, floats with NaN and None, a bool, text, samples with
#: NaN, integer samples, an object, a mixed JSON column, an empty string, and a row lacking columns.
ROWS = [
    {"family": "demo", "working_set_bytes": 4096, "order": "random", "strict_pages": False,
     "ns_per_element": 1.25, "ns_per_element_min": 1.0, "ns_per_element_samples": [1.0, 1.25, NAN],
     "elements": 64, "elements_samples": [64, 64, 64], "counter_page_faults": NAN,
     "counters_missing": {"cycles": "ENOENT: event not supported"}, "repeat": 3,
     "context_note": "", "context_tags": ["a", 1], "context_host": "node-a"},
    {"family": "demo", "working_set_bytes": 1 << 40, "order": "sequential", "strict_pages": True,
     "ns_per_element": float("inf"), "ns_per_element_min": None, "ns_per_element_samples": [2.5, -0.0, 1e-300],
     "elements": 65, "elements_samples": [65, 65, 65], "counter_page_faults": 12.0,
     "counters_missing": {}, "repeat": 3, "context_note": "x,\"y\"\nz", "context_tags": {"k": None},
     "context_host": "node-a"},
    {"family": "demo", "working_set_bytes": 8192, "order": "random", "strict_pages": False,
     "ns_per_element": 3.0, "ns_per_element_samples": [3.0, 3.0, 3.0], "repeat": 3},
]
META = {"family": "demo", "param_names": ["working_set_bytes", "order", "strict_pages"],
        "primary_metric": "ns_per_element", "machine": {"cpu_model": "Test CPU"}}


@pytest.fixture
def saved(tmp_path):
    """The rows saved and loaded again: what a dataset file holds (a float column's None reads as NaN)."""
    Dataset(ROWS, META).save(tmp_path / "demo.csv")
    return Dataset.load(tmp_path / "demo.csv")


# ---- Dataset.long -------------------------------------------------------------------------------


def test_long_has_one_row_per_sample_with_run_and_sample(saved):
    long = saved.long()
    assert len(long) == 9
    first = long.rows[0]
    assert list(first) == ["family", "working_set_bytes", "order", "strict_pages", "context_host",
                           "run", "sample", "ns_per_element", "elements"]
    assert [(row["working_set_bytes"], row["run"], row["sample"]) for row in long.rows[:4]] == [
        (4096, 0, 0), (4096, 0, 1), (4096, 0, 2), (1 << 40, 0, 0)]
    assert same([row["ns_per_element"] for row in long.rows[:3]], [1.0, 1.25, NAN])
    assert [row["elements"] for row in long.rows[:3]] == [64, 64, 64]
    assert all(math.isnan(row["elements"]) for row in long.rows[6:])  # the third point has no such samples
    assert long.metadata["layout"] == "long"
    assert long.metadata["param_names"] == META["param_names"]
    assert long.metadata["metric_names"] == ["ns_per_element", "elements"]
    assert long.metadata["machine"] == META["machine"]


def test_long_chooses_metrics_and_refuses_what_it_cannot_do(saved):
    assert list(saved.long(metrics=["elements"]).rows[0])[-1] == "elements"
    with pytest.raises(ValueError, match=r"metrics='counter_page_faults' is not a metric with samples here "
                                         r"\(metrics with samples: ns_per_element, elements\)"):
        saved.long(metrics=["counter_page_faults"])
    with pytest.raises(ValueError, match="already in long form"):
        saved.long().long()
    clash = Dataset([{"family": "f", "sample": 1, "t": 1.0, "t_samples": [1.0]}], {"param_names": ["sample"]})
    with pytest.raises(ValueError, match="named 'sample', the column long form adds"):
        clash.long()


def test_long_keeps_a_run_index_the_rows_carry():
    rows = [{"family": "f", "n": 1, "run": run, "t": 1.0, "t_samples": [1.0, 2.0]} for run in (0, 1)]
    long = Dataset(rows, {"param_names": ["n"]}).long()
    assert [(row["run"], row["sample"]) for row in long.rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_long_form_saves_and_loads_as_a_dataset(saved, tmp_path):
    long = saved.long()
    long.save(tmp_path / "long.csv")
    again = Dataset.load(tmp_path / "long.csv")
    assert same_rows(again.rows, long.rows)
    assert again.metadata["layout"] == "long"
    schema = json.loads((tmp_path / "long.json").read_text())["schema"]
    fields = {field["name"]: field for field in schema["fields"]}
    assert fields["ns_per_element"]["description"] == "metric ns_per_element: the value of this sample"
    assert fields["run"]["type"] == "integer" and "run of the point" in fields["run"]["description"]
    assert schema["primaryKey"] == ["family", "working_set_bytes", "order", "strict_pages", "context_host",
                                    "run", "sample"]


# ---- the Table Schema in the sidecar ------------------------------------------------------------


def test_sidecar_describes_every_column_as_a_table_schema(saved, tmp_path):
    document = json.loads((tmp_path / "demo.json").read_text())
    schema = document["schema"]
    assert [field["name"] for field in schema["fields"]] == list(document["column_types"])
    fields = {field["name"]: field for field in schema["fields"]}
    assert fields["working_set_bytes"] == {"name": "working_set_bytes", "type": "integer",
                                           "description": "parameter (part of the identity of the point)",
                                           "unit": "bytes"}
    assert fields["strict_pages"]["type"] == "boolean" and fields["order"]["type"] == "string"
    assert fields["ns_per_element"]["type"] == "number"
    assert fields["ns_per_element"]["unit"] == "ns per element"
    assert fields["ns_per_element_min"]["description"] == "metric ns_per_element: minimum over the kept samples"
    assert fields["ns_per_element_samples"]["type"] == "array"
    assert fields["counters_missing"]["type"] == "object"
    assert fields["context_tags"]["type"] == "any"
    assert schema["primaryKey"] == ["family", "working_set_bytes", "order", "strict_pages", "context_host"]
    assert schema["missingValues"] == [""]
    assert "schema" not in saved.metadata  # derived, written afresh: never stale in memory


def test_schema_without_param_names_has_no_primary_key():
    schema = table_schema({"family": "str", "t": "float", "t_samples": "json"})
    assert "primaryKey" not in schema
    assert schema["fields"][2]["type"] == "array"


# ---- Parquet ------------------------------------------------------------------------------------


def test_parquet_round_trip_gives_the_same_values(saved, tmp_path):
    pytest.importorskip("pyarrow", reason="the parquet extra (pyarrow) is not installed")
    path = export.export(saved, tmp_path / "demo.parquet", "parquet")
    back = export.read_parquet(path)
    assert same_rows(back.rows, saved.rows)
    assert back.rows[0]["elements_samples"] == [64, 64, 64] and type(back.rows[0]["elements_samples"][0]) is int
    assert math.isnan(back.rows[0]["ns_per_element_samples"][2])
    assert back.rows[1]["working_set_bytes"] == 1 << 40 and back.rows[1]["ns_per_element"] == float("inf")
    assert {k: v for k, v in back.metadata.items() if k != "created"} == \
        {k: v for k, v in saved.metadata.items() if k != "created"}
    # what was never saved to CSV round-trips too: None in a float column reads as NaN, as from the CSV
    direct = export.read_parquet(export.export(Dataset(ROWS, META), tmp_path / "direct.parquet", "parquet"))
    assert same_rows(direct.rows, saved.rows)


def test_parquet_holds_native_types_and_the_schema(saved, tmp_path):
    pyarrow = pytest.importorskip("pyarrow", reason="the parquet extra (pyarrow) is not installed")
    import pyarrow.parquet as parquet

    with open(export.export(saved, tmp_path / "demo.parquet", "parquet"), "rb") as handle:
        table = parquet.read_table(pyarrow.BufferReader(handle.read()))
    types = {field.name: field.type for field in table.schema}
    assert types["working_set_bytes"] == pyarrow.int64()
    assert types["ns_per_element"] == pyarrow.float64()
    assert types["ns_per_element_samples"] == pyarrow.list_(pyarrow.float64())
    assert types["elements_samples"] == pyarrow.list_(pyarrow.int64())
    assert types["strict_pages"] == pyarrow.bool_()
    assert types["counters_missing"] == pyarrow.string()  # JSON text
    document = json.loads(table.schema.metadata[b"memlab"])
    assert document["format"] == "memlab-dataset" and document["schema"]["fields"][0]["name"] == "family"


def test_parquet_of_a_real_measurement_round_trips(tmp_path):
    pytest.importorskip("pyarrow", reason="the parquet extra (pyarrow) is not installed")
    assert main(["run", "calibrate", "budget_ns=2000000", "--repeat", "3", "--warmup", "0",
                 "--out", str(tmp_path / "clock.csv")]) == 0
    assert main(["export", str(tmp_path / "clock.csv"), "--format", "parquet"]) == 0
    loaded = Dataset.load(tmp_path / "clock.csv")
    back = export.read_parquet(tmp_path / "clock.parquet")
    assert same_rows(back.rows, loaded.rows)
    assert back.metadata["check_start"] == loaded.metadata["check_start"]


def test_parquet_without_pyarrow_exits_2_naming_the_extra(saved, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    assert main(["export", str(tmp_path / "demo.csv"), "--format", "parquet"]) == 2
    error = capsys.readouterr().err
    assert error.strip() == ("memlab export: error: Parquet needs pyarrow, which is not installed; "
                             "install it with: pip install 'memlab[parquet]'")
    assert not (tmp_path / "demo.parquet").exists()


def test_read_parquet_refuses_a_file_memlab_did_not_write(tmp_path):
    pyarrow = pytest.importorskip("pyarrow", reason="the parquet extra (pyarrow) is not installed")
    import pyarrow.parquet as parquet

    parquet.write_table(pyarrow.table({"a": [1]}), str(tmp_path / "other.parquet"))
    with pytest.raises(ValueError, match="no memlab metadata: not a dataset memlab exported"):
        export.read_parquet(tmp_path / "other.parquet")
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(ValueError, match="broken.parquet: cannot be read as Parquet"):
        export.read_parquet(tmp_path / "broken.parquet")


# ---- csv-long and JSON through the command line ------------------------------------------------


def test_export_csv_long_writes_a_dataset_beside_the_source(saved, tmp_path, capsys):
    assert main(["export", str(tmp_path / "demo.csv"), "--format", "csv-long"]) == 0
    assert "demo-long.csv (csv-long, one row per sample)" in capsys.readouterr().out
    again = Dataset.load(tmp_path / "demo-long.csv")
    assert same_rows(again.rows, saved.long().rows)


def test_export_json_is_strict_json_with_the_schema(saved, tmp_path):
    def refuse(token):
        raise AssertionError(f"non-standard JSON token {token}")

    assert main(["export", str(tmp_path / "demo.csv"), "--format", "json"]) == 0
    text = (tmp_path / "demo-export.json").read_text()
    document = json.loads(text, parse_constant=refuse)
    assert document["format"] == "memlab-dataset" and document["param_names"] == META["param_names"]
    assert document["schema"]["fields"][1]["name"] == "working_set_bytes"
    rows = document["rows"]
    assert rows[0]["ns_per_element_samples"] == [1.0, 1.25, None]  # NaN is null
    assert rows[1]["ns_per_element"] == float("inf")  # 1e999, which JSON readers take for infinity
    assert rows[1]["working_set_bytes"] == 1 << 40 and rows[0]["elements_samples"] == [64, 64, 64]
    assert rows[1]["context_note"] == "x,\"y\"\nz"
    assert main(["export", str(tmp_path / "demo.csv"), "--format", "json", "--long",
                 "--out", str(tmp_path / "long.json")]) == 0
    assert len(json.loads((tmp_path / "long.json").read_text())["rows"]) == 9


@pytest.mark.parametrize("args, message", [
    (["--format", "json", "--out", "{d}/demo.json"], "would overwrite the dataset"),
    (["--format", "csv-long", "--out", "{d}/demo.csv"], "would overwrite the dataset"),
    (["--format", "xml"], "invalid choice: 'xml'"),
])
def test_export_refuses_bad_arguments_with_exit_2(saved, tmp_path, capsys, args, message):
    before = (tmp_path / "demo.json").read_bytes()
    args = [a.format(d=tmp_path) for a in args]
    assert main(["export", str(tmp_path / "demo.csv"), *args]) == 2
    assert message in capsys.readouterr().err
    assert (tmp_path / "demo.json").read_bytes() == before


def test_export_of_a_missing_dataset_exits_2(tmp_path, capsys):
    assert main(["export", str(tmp_path / "none.csv"), "--format", "json"]) == 2
    assert "none.csv" in capsys.readouterr().err
