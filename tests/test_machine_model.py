"""The machine model: CPU identity from /proc/cpuinfo and the per-microarchitecture table.

Synthetic machines only (a Zen 4, a Sapphire Rapids, a Zen 5, an unknown CPU), so the tests hold
on whatever host runs them."""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest

from memlab import cli, machine
from memlab.machine_model import MICROARCHITECTURES, UNKNOWN, core_model, format_model

ZEN4 = {"cpu_vendor": "AuthenticAMD", "cpu_family": 25, "cpu_model_number": 17, "cpu_stepping": 1,
        "cpu_microcode": "0xa101148"}
SAPPHIRE_RAPIDS = {"cpu_vendor": "GenuineIntel", "cpu_family": 6, "cpu_model_number": 0x8F}
ZEN5 = {"cpu_vendor": "AuthenticAMD", "cpu_family": 26, "cpu_model_number": 2}
UNKNOWN_CPU = {"cpu_vendor": "GenuineIntel", "cpu_family": 6, "cpu_model_number": 1}


def test_zen4_loads_64_and_stores_32_bytes_per_cycle_at_its_widest_vectors():
    model = core_model(ZEN4)
    assert model.name == "Zen 4"
    assert model.l1d_bytes_per_cycle("read", 64) == 64
    assert model.l1d_bytes_per_cycle("write", 64) == 32
    assert model.l1d_bytes_per_cycle("write", 32) == 32
    assert model.l1d_bytes_per_cycle("read", 16) == 32  # two 16-byte loads per cycle
    assert model.l1d_bytes_per_cycle("copy", 64) == 32  # a copied byte is a load and a store
    fields = model.fields()
    assert "two 256-bit halves" in fields["vector_execution"]
    assert fields["l3"] == "victim" and "CCD" in fields["l3_shared_by"]
    assert fields["cpu_microcode"] == "0xa101148" and fields["cpu_stepping"] == 1
    assert fields["integer_alus"] == 4


def test_sapphire_rapids_loads_128_and_stores_64_bytes_per_cycle():
    model = core_model(SAPPHIRE_RAPIDS)
    assert model.name.startswith("Golden Cove")
    assert model.l1d_bytes_per_cycle("read", 64) == 128
    assert model.l1d_bytes_per_cycle("read", 32) == 96  # three 256-bit loads
    assert model.l1d_bytes_per_cycle("write", 64) == 64
    assert model.fields()["clear_skips_cache_beyond_llc"] == UNKNOWN
    assert model.fields()["integer_alus"] == 5


def test_zen5_server_is_known_and_its_mobile_parts_are_not():
    assert core_model(ZEN5).name == "Zen 5"
    assert core_model(ZEN5).l1d_bytes_per_cycle("read", 64) == 128
    assert core_model(ZEN5).fields()["integer_alus"] == 6
    assert core_model({**ZEN5, "cpu_model_number": 0x24}).name == UNKNOWN


def test_an_unknown_cpu_says_unknown_in_every_field_never_a_guess():
    model = core_model(UNKNOWN_CPU)
    assert not model.known and model.l1d_bytes_per_cycle("write", 64) is None
    fields = model.fields()
    assert fields["cpu_vendor"] == "GenuineIntel"
    assert all(value == UNKNOWN for name, value in fields.items()
               if name not in ("cpu_vendor", "cpu_family", "cpu_model_number"))
    assert core_model({}).fields()["cpu_family"] == UNKNOWN
    assert "unknown" in format_model(model)


def test_the_table_ranges_do_not_overlap():
    for index, entry in enumerate(MICROARCHITECTURES):
        for other in MICROARCHITECTURES[index + 1:]:
            if (entry.vendor, entry.family) != (other.vendor, other.family):
                continue
            for low, high in entry.models:
                assert not any(low <= b and a <= high for a, b in other.models), (entry.name, other.name)


@pytest.mark.parametrize("op, width, message", [("add", 64, "op='add'"), ("read", 0, "vector_bytes=0"),
                                                 ("read", True, "vector_bytes=True")])
def test_bad_arguments_name_the_parameter(op, width, message):
    with pytest.raises(ValueError, match=message):
        core_model(ZEN4).l1d_bytes_per_cycle(op, width)


def test_collect_cpu_reads_vendor_family_model_stepping_and_microcode(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
        "model name\t: AMD EPYC 9654\nstepping\t: 1\nmicrocode\t: 0xa10113e\n\nprocessor\t: 1\n")
    facts: dict = {}
    machine.collect_cpu(facts, root=str(tmp_path))
    assert (facts["cpu_vendor"], facts["cpu_family"], facts["cpu_model_number"], facts["cpu_stepping"],
            facts["cpu_microcode"]) == ("AuthenticAMD", 25, 17, 1, "0xa10113e")
    assert core_model(facts).name == "Zen 4"
    assert "AuthenticAMD family 25 model 17 stepping 1" in machine.format_facts(facts)


def test_collect_cpu_leaves_absent_what_cpuinfo_does_not_say(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Some CPU\n")
    facts: dict = {}
    machine.collect_cpu(facts, root=str(tmp_path))
    assert not {"cpu_vendor", "cpu_family", "cpu_model_number", "cpu_stepping", "cpu_microcode"} & set(facts)
    assert core_model(facts).name == UNKNOWN


def test_memlab_info_prints_the_model_fields(monkeypatch):
    output = io.StringIO()
    with redirect_stdout(output):
        assert cli.main(["info", "--no-calibrate"]) == 0
    text = output.getvalue()
    for label in ("core design", "L1d load B/cycle", "L1d store B/cycle", "vectors", "L3 kind", "prefetchers"):
        assert label in text
