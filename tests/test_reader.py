"""Reading datasets never yields wrong values silently: each way a file can be wrong is an error
naming the file (and record and column), or a documented recovery; random corruptions likewise."""

from __future__ import annotations

import atexit
import json
import math
import os
import pickle
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab.dataset import Dataset, DatasetError, DatasetWriter
from memlab.table import Row

META = {"family": "chase", "sweep": "quick", "param_names": ["working_set_bytes", "order", "huge"]}


def measured_row(size: int, order: str, huge: bool, base: float) -> dict:
    samples = [base * f for f in (0.98, 1.0, 1.05)]
    return {
        "family": "chase", "working_set_bytes": size, "order": order, "huge": huge,
        "ns_per_element": samples[1], "ns_per_element_min": samples[0], "ns_per_element_max": samples[2],
        "ns_per_element_samples": samples, "counter_page_faults": 3.0 if huge else math.nan,
        "counters_missing": {"cycles": "ENOENT no such event"}, "counters_scope": "user",
        "repeat": 3, "warmup_samples": [base * 1.2], "context_cpu": "",
    }


ROWS = [measured_row(4096 << i, order, i % 2 == 0, 1.0 + i + 0.125 * (order == "random"))
        for i in range(3) for order in ("random", "sequential")]


@pytest.fixture
def saved(tmp_path):
    Dataset(ROWS, META).save(tmp_path / "d.csv")
    return tmp_path / "d.csv"


def norm(value):
    """Values as compared by the oracle: NaN and None are both missing, 3 equals 3.0, rows compare as dicts."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "missing"
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [norm(v) for v in value]
    if isinstance(value, Mapping):
        return {k: norm(v) for k, v in value.items()}
    return value


# ---- each way a file can be wrong ---------------------------------------------------------------


def edit_sidecar(csv_path: Path, types: dict | None = None, untyped: str | None = None, **keys) -> None:
    """Change the sidecar of the dataset at csv_path: column types, a column's type removed, keys."""
    sidecar = csv_path.with_suffix(".json")
    document = json.loads(sidecar.read_text())
    document["column_types"].update(types or {})
    if untyped:
        del document["column_types"][untyped]
    document.update(keys)
    sidecar.write_text(json.dumps(document))


def rewrite(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, count), encoding="utf-8")


def test_a_byte_order_mark_is_accepted_and_a_resume_finds_the_rows(saved):
    saved.write_bytes(b"\xef\xbb\xbf" + saved.read_bytes())
    sidecar = saved.with_suffix(".json")
    sidecar.write_bytes(b"\xef\xbb\xbf" + sidecar.read_bytes())
    loaded = Dataset.load(saved)
    assert list(loaded.rows[0])[0] == "family"
    assert norm(loaded.rows) == norm(ROWS)
    with DatasetWriter(saved, META) as writer:
        assert len(writer.existing_rows) == len(ROWS)  # a resume measures nothing again
        writer.append(measured_row(1 << 20, "random", False, 9.0))
    assert len(Dataset.load(saved)) == len(ROWS) + 1


def test_crlf_line_endings_read_the_same(saved):
    saved.write_bytes(saved.read_bytes().replace(b"\n", b"\r\n"))
    assert norm(Dataset.load(saved).rows) == norm(ROWS)


def test_a_duplicated_header_name_is_an_error_naming_it(saved):
    rewrite(saved, "ns_per_element_max,", "ns_per_element_min,")
    with pytest.raises(DatasetError, match=r"d\.csv: the header names column 'ns_per_element_min' twice "
                                           r"\(columns 6 and 7\)"):
        Dataset.load(saved)


def test_a_sidecar_declaring_str_for_a_metric_is_refused(saved):
    edit_sidecar(saved, types={"ns_per_element": "str"})
    with pytest.raises(DatasetError, match=r"d\.json: column_types\['ns_per_element'\]='str'"):
        Dataset.load(saved)


@pytest.mark.parametrize("column", ["ns_per_element_samples", "counters_missing", "family"])
def test_schema_columns_must_have_their_types(saved, column):
    edit_sidecar(saved, types={column: "bool"})
    with pytest.raises(DatasetError, match=rf"column_types\['{column}'\]='bool'"):
        Dataset.load(saved)


def replace_in_record(path: Path, record: int, old: str, new: str) -> None:
    """Replace the first ``old`` in data record ``record`` (1 is the first after the header)."""
    lines = path.read_text().split("\n")
    assert old in lines[record]
    lines[record] = lines[record].replace(old, new, 1)
    path.write_text("\n".join(lines))


#: (text in the file, what replaces its first occurrence, the error that must follow).
DAMAGED_TEXT = {
    "nul": ("ns_per_element,", "ns_per_\x00element,", r"d\.csv: line 1 holds a NUL byte"),
    "quote_inside": (",random,", ',ran"d"om,', r"record 2 \(line 2\): a quote inside an unquoted field"),
    "stray_quote": (",random,", ',ran"dom,', "the record at line 2 opens a quote that never closes"),
    "lone_cr": (",random,", ",ran\rdom,", "a carriage return inside an unquoted field"),
    "inner_bom": (",random,", ",ran\ufeffdom,", "byte order mark"),
}


@pytest.mark.parametrize("old, new, error", DAMAGED_TEXT.values(), ids=DAMAGED_TEXT.keys())
def test_damaged_text_is_an_error_naming_where(saved, old, new, error):
    """A NUL, a quote in an unquoted field or one that never closes (not the loss of every later
    row), a carriage return that ends no line, a byte order mark inside the text."""
    rewrite(saved, old, new)
    with pytest.raises(DatasetError, match=error):
        Dataset.load(saved)


def test_a_cell_error_names_file_record_and_column(saved):
    replace_in_record(saved, 3, ",3,", ",nan,")  # the repeat column of the third data record
    with pytest.raises(DatasetError, match=r"d\.csv: record 4 \(line 4\), column 'repeat' \(int\): "
                                           r"'nan' is not an integer"):
        Dataset.load(saved)


@pytest.mark.parametrize("cell", ["1_000", "１０", " 7", "0x10"])
def test_integers_are_plain_ascii_digits(saved, cell):
    replace_in_record(saved, 1, ",3,", f",{cell},")
    with pytest.raises(DatasetError, match="not an integer"):
        Dataset.load(saved)


def test_text_that_is_not_utf8_is_an_error(saved):
    saved.write_bytes(saved.read_bytes().replace(b",random,", b",ran\xffdom,", 1))
    with pytest.raises(DatasetError, match=r"line 2 is not UTF-8"):
        Dataset.load(saved)


def test_a_pipe_csv_beside_a_chase_sidecar_is_refused_and_not_resumed(saved, tmp_path):
    pipe = [{"family": "pipe", "writer": "write", "GiB_per_s": 3.0, "GiB_per_s_samples": [3.0]}]
    Dataset(pipe, {"family": "pipe", "param_names": ["writer"]}).save(tmp_path / "p.csv")
    shutil.copy(saved.with_suffix(".json"), tmp_path / "p.json")
    with pytest.raises(DatasetError, match=r"p\.csv: record 2 holds family='pipe', but its sidecar .*p\.json "
                                           r"says family='chase'"):
        Dataset.load(tmp_path / "p.csv")
    with pytest.raises(DatasetError):
        DatasetWriter(tmp_path / "p.csv", META)
    assert len((tmp_path / "p.csv").read_text().splitlines()) == 2  # nothing appended


@pytest.mark.parametrize("key, value, expected", [
    ("machine", "a string", "machine=\"a string\" must be a JSON object"),
    ("column_types", ["family"], "column_types=\\[\"family\"\\] must be a JSON object"),
    ("param_names", 3, "param_names=3 must be a JSON array"),
    ("param_names", [1, 2], "param_names must be a list of column names"),
    ("family", {"a": 1}, "family=.* must be a string"),
    ("format_version", True, "format_version=True is not supported"),
    ("column_types", {"n": "decimal"}, "column_types\\['n'\\]='decimal' is not one of"),
])
def test_sidecar_keys_of_the_wrong_type_are_errors_naming_them(saved, key, value, expected):
    edit_sidecar(saved, **{key: value})
    with pytest.raises(DatasetError, match=r"d\.json: " + expected):
        Dataset.load(saved)


def test_a_deeply_nested_sidecar_is_an_error_not_a_recursion_crash(saved):
    saved.with_suffix(".json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DatasetError, match=r"d\.json: JSON nested too deeply"):
        Dataset.load(saved)


def test_a_sidecar_listing_parameters_the_csv_lacks_is_refused(saved):
    edit_sidecar(saved, param_names=[*META["param_names"], "threads"])
    with pytest.raises(DatasetError, match="lists parameter\\(s\\) 'threads' that the CSV has no column for"):
        Dataset.load(saved)


def test_columns_without_a_type_are_guessed_with_a_warning(saved):
    edit_sidecar(saved, untyped="context_cpu")
    loaded = Dataset.load(saved)
    assert "gives no type for column(s) context_cpu" in loaded.metadata["load_warnings"][0]


def test_types_for_columns_the_csv_lacks_are_ignored(saved):
    """The writer updates the sidecar before the CSV: a crash between them leaves this."""
    edit_sidecar(saved, types={"not_yet_written": "float"})
    assert norm(Dataset.load(saved).rows) == norm(ROWS)


def test_an_integer_beyond_64_bits_keeps_its_value(tmp_path):
    rows = [{"family": "f", "seed": 1 << 70}, {"family": "f", "seed": None}, {"family": "f", "seed": 3}]
    Dataset(rows, {"family": "f"}).save(tmp_path / "x.csv")
    assert [r["seed"] for r in Dataset.load(tmp_path / "x.csv").rows] == [1 << 70, None, 3]


# ---- the rows of a loaded dataset -----------------------------------------------------------------


def test_loaded_rows_behave_as_dicts_and_keep_their_own_changes(saved):
    ds = Dataset.load(saved)
    row = ds.rows[0]
    assert isinstance(row, Row) and row == ROWS[0] | {"counter_page_faults": 3.0}
    assert dict(row) == {**row} and list(row) == list(ROWS[0])
    assert "order" in row and "nope" not in row and row.get("nope", 7) == 7
    row["order"] = "changed"
    row["extra"] = 1
    del row["context_cpu"]
    assert row["order"] == "changed" and row["extra"] == 1 and "context_cpu" not in row
    assert ds.rows[1]["order"] == "sequential" and "extra" not in ds.rows[1]
    copy = Dataset(ds.rows).rows[0]
    copy["order"] = "again"
    assert row["order"] == "changed"
    assert pickle.loads(pickle.dumps(row)) == dict(row)
    assert repr(ds.rows[1]).startswith("{'family': 'chase'")
    assert ds.filter(order="random").column("working_set_bytes") == [8192, 16384]  # row 0 changed
    assert ds.to_numpy(["working_set_bytes"])["working_set_bytes"].dtype.kind == "f"


def test_loaded_columns_take_about_the_files_size(tmp_path):
    rows = [measured_row(4096 * (i + 1), "random", bool(i % 2), 1.0 + i / 7) for i in range(2000)]
    Dataset(rows, META).save(tmp_path / "big.csv")
    table = Dataset.load(tmp_path / "big.csv").rows[0]._table
    size = (tmp_path / "big.csv").stat().st_size
    assert table.nbytes() < 1.5 * size, (table.nbytes(), size)


# ---- random corruptions ------------------------------------------------------------------------

STRUCTURAL = ',"\n[]{}:'
HOSTILE_TEXT = ['"', "\n", "\r", "\x00", "\ufeff"]
HOSTILE_BYTES = [b"\xff", b"\xc3", b"\xe2\x82"]


@st.composite
def corruption(draw, csv_data: bytes, json_data: bytes):
    """One corruption of the CSV or the sidecar as they are now: (which file, its new bytes).

    Structural damage only: a cut, a structural character deleted (the base
    data has none inside its text values), a hostile character or byte
    inserted, lines swapped, a header name repeated, a column type or the
    family changed. A changed character inside a value (a digit, a letter,
    a comma inside quotes) cannot be told from the truth without checksums,
    which the format does not have (docs/dataset.md, "Reading").
    """
    target = draw(st.sampled_from(["csv", "csv", "csv", "json"]))
    data = csv_data if target == "csv" else json_data
    text = data.decode("utf-8", errors="surrogateescape")
    try:
        document = json.loads(json_data)
        typed = isinstance(document, dict) and isinstance(document.get("column_types"), dict)
    except (ValueError, RecursionError):
        typed = False
    lines = text.split("\n")
    kinds = ["truncate", "insert", "insert_bytes"]
    kinds += ["delete"] if any(c in STRUCTURAL for c in text) else []
    if target == "csv":
        kinds += ["header"] + (["swap_lines"] if len(lines) >= 3 else [])
    kinds += ["types", "family"] if typed else []
    kind = draw(st.sampled_from(kinds))
    if kind == "truncate":
        return target, data[: draw(st.integers(0, max(len(data) - 1, 0)))]
    if kind == "insert_bytes":
        at = draw(st.integers(0, len(data)))
        return target, data[:at] + draw(st.sampled_from(HOSTILE_BYTES)) + data[at:]
    if kind == "delete":
        at = draw(st.sampled_from([i for i, c in enumerate(text) if c in STRUCTURAL]))
        text = text[:at] + text[at + 1:]
    elif kind == "insert":
        at = draw(st.integers(0, len(text)))
        char = draw(st.sampled_from(HOSTILE_TEXT + ([","] if target == "csv" else [])))
        if char == "," and (text[:at].count('"') % 2 or '"' in text[max(at - 1, 0): at + 1]):
            char = "\n"  # a comma inside a quoted value changes it undetectably: not a structural fault
        text = text[:at] + char + text[at:]
    elif kind == "swap_lines":
        i, j = draw(st.integers(1, len(lines) - 2)), draw(st.integers(1, len(lines) - 2))
        lines[i], lines[j] = lines[j], lines[i]
        text = "\n".join(lines)
    elif kind == "header":
        names = lines[0].split(",")
        i, j = draw(st.integers(0, len(names) - 1)), draw(st.integers(0, len(names) - 1))
        names[i] = names[j]
        text = "\n".join([",".join(names), *lines[1:]])
    elif kind == "types":
        # the sidecar alone gives the types of parameter and context columns (docs/dataset.md):
        # only the columns the row schema knows are checked against it
        schema_columns = [c for c in document["column_types"]
                          if c not in META["param_names"] and not c.startswith("context_")]
        if schema_columns:
            column = draw(st.sampled_from(schema_columns))
            document["column_types"][column] = draw(st.sampled_from(["int", "float", "bool", "str", "json"]))
        return "json", json.dumps(document).encode("utf-8")
    else:
        document["family"] = draw(st.sampled_from(["pipe", "", "chase "]))
        return "json", json.dumps(document).encode("utf-8")
    return target, text.encode("utf-8", errors="surrogateescape")


#: MEMLAB_HYPOTHESIS_EXAMPLES=20000 hunts with that many random examples; the suite runs a fixed 300.
HUNT = os.environ.get("MEMLAB_HYPOTHESIS_EXAMPLES")
EXAMPLES = int(HUNT) if HUNT else 300
_BASE = tempfile.mkdtemp(prefix="memlab-reader-")
atexit.register(shutil.rmtree, _BASE, ignore_errors=True)
Dataset(ROWS, META).save(Path(_BASE) / "d.csv")
CSV_TEXT = (Path(_BASE) / "d.csv").read_text()
JSON_TEXT = (Path(_BASE) / "d.json").read_text()
ORIGINAL = [norm(row) for row in ROWS]


@settings(max_examples=EXAMPLES, deadline=None, derandomize=HUNT is None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), st.integers(1, 3))
def test_random_corruptions_give_an_error_or_true_rows(data, times):
    """Corrupt a valid dataset one to three times (each corruption applied to the result of the
    last): loading fails naming a file, or every row it gives is one that was written (a dropped
    truncated record is reported in load_warnings)."""
    csv_data, json_data = CSV_TEXT.encode(), JSON_TEXT.encode()
    for _ in range(times):
        target, new = data.draw(corruption(csv_data, json_data))
        if target == "csv":
            csv_data = new
        else:
            json_data = new
    folder = Path(tempfile.mkdtemp(dir=_BASE))
    (folder / "d.csv").write_bytes(csv_data)
    (folder / "d.json").write_bytes(json_data)
    try:
        loaded = Dataset.load(folder / "d.csv")
    except DatasetError as error:
        assert str(folder / "d.csv") in str(error) or str(folder / "d.json") in str(error), error
        return
    finally:
        shutil.rmtree(folder)
    for row in loaded.rows:
        assert norm(row) in ORIGINAL, dict(row)
    written_rows = CSV_TEXT.count("\n") - 1
    if len(loaded.rows) < written_rows and not csv_data.endswith(b"\n"):
        assert loaded.metadata.get("load_warnings")


# ---- what memlab writes, memlab reads back (issue 27) ------------------------------------------


def long_row(samples: int) -> dict:
    """A point of --repeat ``samples``: its samples cell is far beyond the 131,072 characters
    Python's csv module accepts in one field by default."""
    values = [1.0 + i * 1e-7 + 1 / 3 for i in range(samples)]
    return {**measured_row(4096, "random", False, 1.0), "ns_per_element_samples": values, "repeat": samples,
            "context_note": "a quoted, multi-line\n\"note\""}


def test_a_point_of_ten_thousand_samples_reads_back_and_resumes(tmp_path, capsys):
    from memlab.cli import main

    rows = [long_row(10_000), {**measured_row(8192, "random", False, 2.0), "context_note": "short"}]
    path = tmp_path / "long.csv"
    Dataset(rows, META).save(path)
    assert max(len(line) for line in path.read_text().splitlines()) > 131_072
    assert norm(Dataset.load(path).rows) == norm(rows)
    with DatasetWriter(path, META) as writer:  # a resume reads the rows on disk
        assert norm(writer.existing_rows) == norm(rows)
    assert main(["merge", str(tmp_path / "merged.csv"), str(path)]) == 0, capsys.readouterr().err
    assert norm(Dataset.load(tmp_path / "merged.csv").rows) == norm(rows)


def test_a_long_field_that_is_damaged_is_an_error_naming_file_line_and_column(tmp_path):
    rows = [measured_row(8192, "random", False, 2.0), long_row(10_000)]
    path = tmp_path / "long.csv"
    Dataset(rows, META).save(path)
    rewrite(path, "[1.3333333333333333,", "[1.33x,")  # inside the second record's samples cell
    with pytest.raises(DatasetError, match=r"long\.csv: record 3 \(line 3\), column 'ns_per_element_samples' "
                                           r"\(json\): .* is not JSON"):
        Dataset.load(path)
    rewrite(path, "[1.33x,", '[1.33"x",')  # a quote that ends the quoted field early
    with pytest.raises(DatasetError, match=r"long\.csv: record 3 \(line 3\): text after a closing quote"):
        Dataset.load(path)


def test_without_a_sidecar_nan_stays_nan_and_none_stays_none(tmp_path):
    """NaN was written as an empty cell, which reads back as None without the sidecar (issue 27)."""
    rows = [{"family": "f", "n": 1, "t": math.nan, "u": None, "v": 2.5},
            {"family": "f", "n": 2, "t": 1.5, "u": 3, "v": math.nan}]
    Dataset(rows, {"family": "f", "param_names": ["n"]}).save(tmp_path / "d.csv")
    (tmp_path / "d.json").unlink()
    first, second = Dataset.load(tmp_path / "d.csv").rows
    assert math.isnan(first["t"]) and first["u"] is None and first["v"] == 2.5
    assert second["t"] == 1.5 and second["u"] == 3 and math.isnan(second["v"])


def test_ints_and_nan_in_one_column_read_back_exactly(tmp_path):
    """A column of ints with a NaN was typed int, and its NaN read back as None."""
    rows = [{"family": "f", "n": 1, "count": 7}, {"family": "f", "n": 2, "count": math.nan},
            {"family": "f", "n": 3, "count": None}]
    Dataset(rows, {"family": "f", "param_names": ["n"]}).save(tmp_path / "d.csv")
    loaded = [row["count"] for row in Dataset.load(tmp_path / "d.csv").rows]
    assert loaded[0] == 7 and type(loaded[0]) is int and math.isnan(loaded[1]) and math.isnan(loaded[2])


def test_integers_in_a_float_column_load_as_integers(saved):
    """A sidecar saying float for a column of integers loaded them as floats (issue 27); memlab writes
    an int in a float column (a mix) as its digits, so the text says which it was."""
    edit_sidecar(saved, types={"working_set_bytes": "float", "repeat": "float"})
    rows = Dataset.load(saved).rows
    assert [row["working_set_bytes"] for row in rows] == [r["working_set_bytes"] for r in ROWS]
    assert all(type(row["working_set_bytes"]) is int and type(row["repeat"]) is int for row in rows)
    mixed = [{"family": "f", "n": 1, "x": 1 << 60}, {"family": "f", "n": 2, "x": 0.5}, {"family": "f", "n": 3, "x": 2.0}]
    Dataset(mixed, {"family": "f", "param_names": ["n"]}).save(saved.parent / "mixed.csv")
    loaded = [row["x"] for row in Dataset.load(saved.parent / "mixed.csv").rows]
    assert loaded == [1 << 60, 0.5, 2.0] and [type(v) for v in loaded] == [int, float, float]
