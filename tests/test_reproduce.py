"""memlab reproduce: planning, running (resumable, failures recorded), the report, the command line.

The runs here use a stand-in catalogue of items on the ``calibrate`` family
(one point, about a second), so that every path is exercised without the
minutes a real item takes; ``test_a_real_item_end_to_end`` runs one real item.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
import sys

import pytest

from html_check import parse_report
from memlab import catalogue, cli
from memlab.catalogue import (FAILS, INCONCLUSIVE, NOT_MEASURABLE, NOT_REPRODUCED, PASSES, REPRODUCED, Claim, Item,
                              NotMeasurable, Number, Sanity, Verdict)
from memlab.dataset import Dataset
from memlab.family import Family
from memlab.grid import Sweep
from memlab.runner import POINT_OVERHEAD_SECONDS, Run, estimate_seconds

# the module: the package attribute memlab.reproduce is the function
reproducing = importlib.import_module("memlab.reproduce")


def _holds(ds: Dataset) -> Verdict:
    value = catalogue.value_of(ds, "core_GHz")
    return catalogue.verdict(value > 0, f"core clock {value:.3g} GHz", ghz=value)


def _fails(ds: Dataset) -> Verdict:
    value = catalogue.value_of(ds, "core_GHz")
    return catalogue.verdict(value > 1e6, f"core clock {value:.3g} GHz (claim: above 1e6)", ghz=value)


def _cannot(ds: Dataset) -> Verdict:
    raise NotMeasurable("no PMU: cycles not supported")


def _straddles(ds: Dataset) -> Verdict:
    return Verdict(INCONCLUSIVE, "clock / 2 GHz 1.01 (run-level 95% interval 0.9-1.1) (claim: above 1)")


def fake_item(key: str = "clock", quick="calibrate.quick", claims=None) -> Item:
    return Item(
        key=key, source="drepper", section="0.0", label="Figure 0.1", title="the clock <and> friends",
        sweep="calibrate.quick", quick=quick, measured="a dependent add chain", machine="none",
        numbers=(Number("core clock", 2.0, "GHz", lambda ds: catalogue.value_of(ds, "core_GHz"),
                        provenance=catalogue.Provenance(catalogue.ORIGINAL, "https://example.org/original")),
                 Number("counter", 1.0, "x", lambda ds: _cannot(ds),
                        provenance=catalogue.Provenance(catalogue.TRANSLATION, "https://example.org/original"))),
        claims=tuple(claims or (Claim("the clock ticks", "nowhere 1.1", _holds),
                                Claim("the clock is absurdly fast", "nowhere 1.2", _fails),
                                Claim("cycles are counted", "nowhere 1.3", _cannot),
                                Claim("the clock is faster than 2 GHz", "nowhere 1.4", _straddles),
                                Claim("the clock ticks at all", "nowhere 1.5", Sanity(_holds, "any machine")))),
        script="experiments/fig3_10.py", notebook="notebooks/chase.ipynb",
        note="A stand-in item for the tests.",
    )


def unbuildable(sweep: Sweep) -> Sweep:
    raise ValueError("needs SMT: this machine has one thread per core")


@pytest.fixture
def fake_catalogue(monkeypatch):
    items = (fake_item(), fake_item("smt", quick=unbuildable,
                                    claims=[Claim("siblings share", "nowhere 2.1", _holds)]))
    monkeypatch.setattr(catalogue, "ITEMS", items)
    return items


# ---- planning -----------------------------------------------------------------------------


def test_items_sharing_a_sweep_share_one_task(tmp_path):
    tasks = reproducing.plan(catalogue.select(["clear-fault", "bulk-populate", "clear-order", "clear-extent"]),
                             False, tmp_path)
    by_name = {t.name: [i.key for i in t.items] for t in tasks}
    assert by_name["clear_fault.clear_fault"] == ["clear-fault", "bulk-populate"]
    assert by_name["clear_order.clear_order"] == ["clear-order", "clear-extent"]
    assert all(t.path.parent == tmp_path and t.seconds > 0 for t in tasks)


def test_named_sweeps_measuring_the_same_points_run_once(fake_catalogue, monkeypatch, tmp_path):
    items = (fake_item("a"), fake_item("b", quick="calibrate.quick_twin"))
    monkeypatch.setattr(catalogue, "ITEMS", items)
    calibrate = reproducing.get_family("calibrate")
    monkeypatch.setitem(calibrate.sweeps, "quick_twin",
                        lambda: dataclasses.replace(calibrate.sweep("quick"), name="quick_twin"))
    (task,) = reproducing.plan(catalogue.select(["a", "b"]), True, tmp_path)
    assert [i.key for i in task.items] == ["a", "b"] and task.path.name == "calibrate-quick.csv"


def test_quick_variants_are_shorter_and_named_apart(tmp_path):
    for entry in catalogue.ITEMS:
        try:
            full = reproducing.item_sweep(entry, quick=False)
        except ValueError as why:  # a placement this machine cannot give (SMT, two cores)
            assert "placement=" in str(why), entry.key
            with pytest.raises(ValueError):
                reproducing.item_sweep(entry, quick=True)
            continue
        quick = reproducing.item_sweep(entry, quick=True)
        assert quick.name != full.name, entry.key
        assert estimate_seconds(quick) < estimate_seconds(full), entry.key


def test_a_sweep_this_machine_cannot_build_is_not_measurable(fake_catalogue, tmp_path):
    (task,) = [t for t in reproducing.plan(catalogue.select(["smt"]), True, tmp_path)]
    assert task.sweep is None and "needs SMT" in task.unmeasurable


def test_estimate_uses_each_points_duration(tmp_path):
    """A task's estimate is the run's (memlab.runner: one rule for every command)."""
    sweep = Sweep("s", "system", [{"test": "spawn", "duration_s": 2.0}], repeat=3, warmup=0, runs=1)
    assert estimate_seconds(sweep) == pytest.approx(6.0 + POINT_OVERHEAD_SECONDS)
    runs = dataclasses.replace(sweep, runs=3)  # every run costs its samples and its setup
    assert estimate_seconds(runs) == pytest.approx(3 * (6.0 + POINT_OVERHEAD_SECONDS))
    assert Run(sweep).plan().seconds == pytest.approx(estimate_seconds(sweep))
    (task,) = reproducing.plan(catalogue.select(["unixbench-spawn"]), True, tmp_path)
    assert task.seconds == pytest.approx(estimate_seconds(task.sweep))


def test_estimate_uses_the_familys_sample_length():
    """A clearing point that pauses 5 s before each sample costs those seconds (clear's sample_seconds)."""
    paused = Sweep("s", "clear_fault", [{"region_bytes": 2 << 20, "pages": "4k", "pause_s": 5.0}],
                   repeat=1, warmup=0, target_seconds=0.01, runs=1)
    assert estimate_seconds(paused) == pytest.approx(5.01 + POINT_OVERHEAD_SECONDS)


def test_listing_shows_every_item_and_the_totals():
    text = reproducing.listing()
    for entry in catalogue.ITEMS:
        assert entry.key in text
    assert "quick run" in text and "full run" in text and "(shared)" in text


def test_listing_totals_use_the_seconds_measured_into_the_folder(fake_catalogue, tmp_path):
    (task,) = [t for t in reproducing.plan(catalogue.select(["clock"]), True, tmp_path) if t.sweep is not None]
    runs = len(task.sweep.points) * task.sweep.runs_per_point  # the file holds seconds per run of a point
    (tmp_path / reproducing.TIMES_FILE).write_text(json.dumps({task.path.stem: 3600.0 / runs}))
    text = reproducing.listing(catalogue.select(["clock"]), quick=True, out=tmp_path)
    assert "quick run 60.0 min" in text and "measured by the runs into this folder" in text


# ---- running -------------------------------------------------------------------------------


def test_reproduce_writes_datasets_report_and_verdicts(fake_catalogue, tmp_path):
    result = reproducing.reproduce(["clock", "smt"], quick=True, out=tmp_path, progress=False)
    clock, smt = result.items
    assert [v.status for v in clock.verdicts] == [REPRODUCED, NOT_REPRODUCED, NOT_MEASURABLE, INCONCLUSIVE, PASSES]
    assert clock.path == tmp_path / "calibrate-quick.csv"
    assert len(Dataset.load(clock.path)) == reproducing.QUICK_RUNS  # one point, in the quick runs
    assert [v.status for v in smt.verdicts] == [NOT_MEASURABLE] and "needs SMT" in smt.verdicts[0].detail
    data = json.loads((tmp_path / "verdicts.json").read_text())
    assert data["counts"] == {REPRODUCED: 1, NOT_REPRODUCED: 1, INCONCLUSIVE: 1, NOT_MEASURABLE: 2}
    assert data["sanity_counts"] == {PASSES: 1, FAILS: 0, NOT_MEASURABLE: 0}
    assert [c["sanity"] for c in data["items"][0]["claims"]] == [False, False, False, False, True]
    assert result.count(REPRODUCED) == 1 and result.sanity_count(PASSES) == 1
    # inconclusive is noise (the run's conditions) or the interval itself, never "a candidate defect"
    assert clock.verdicts[3].reason and "candidate defect" not in clock.verdicts[3].reason
    assert data["items"][0]["numbers"][0]["measured"] > 0
    assert "no PMU" in data["items"][0]["numbers"][1]["reason"]
    assert [n["provenance"] for n in data["items"][0]["numbers"]] == [
        {"kind": "original", "url": "https://example.org/original"},
        {"kind": "translation", "url": "https://example.org/original"}]
    assert "ratio" in clock.table() and "[original]" in clock.table() and "[translation]" in clock.table()
    assert "no PMU" in data["items"][0]["claims"][2]["detail"]


def test_report_shows_source_numbers_and_each_verdict_kind(fake_catalogue, tmp_path):
    result = reproducing.reproduce(["clock", "smt"], quick=True, out=tmp_path, progress=False)
    text = result.report.read_text()
    parsed = parse_report(text, allow_external=True)
    assert "Drepper, Figure 0.1: the clock &lt;and&gt; friends" in text
    for kind in ("verdict-good", "verdict-bad", "verdict-none"):
        assert kind in text
    assert "https://people.freebsd.org/~lstewart/articles/cpumemory.pdf" in parsed.links
    assert "here / source" in parsed.cells and "core clock" in parsed.cells
    assert "read in" in parsed.cells and "original" in parsed.cells
    assert "translation" in parsed.cells and "https://example.org/original" in parsed.links
    assert "A stand-in item for the tests." in text
    assert "Sanity checks (not counted as reproduced)" in text and "inconclusive" in text
    assert "needs SMT" in text and "no PMU" in text
    assert "#" + parsed.ids[0] in parsed.links or any(link.startswith("#s0-") for link in parsed.links)


def test_a_second_run_measures_nothing_again(fake_catalogue, tmp_path, monkeypatch):
    reproducing.reproduce(["clock"], quick=True, out=tmp_path, progress=False)
    before = (tmp_path / "calibrate-quick.csv").read_text()

    def refuse(*args, **kwargs):
        raise AssertionError("a point on disk was measured again")

    monkeypatch.setattr(Family, "run", refuse)
    result = reproducing.reproduce(["clock"], quick=True, out=tmp_path, progress=False)
    assert not result.failed
    assert (tmp_path / "calibrate-quick.csv").read_text() == before
    assert result.items[0].verdicts[0].status == REPRODUCED
    assert "on disk" not in reproducing.listing(catalogue.select(["clock"]), quick=True)
    assert "1/1 points" in reproducing.listing(catalogue.select(["clock"]), quick=True, out=tmp_path)


def test_the_run_says_how_long_measuring_and_reporting_took(fake_catalogue, tmp_path, capsys):
    """The time split into its phases is printed, kept in verdicts.json and the result, and the
    report says how long measuring took (what the 3-minute target of --quick is about)."""
    assert cli.main(["reproduce", "clock", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"time: measuring [\d.]+ (s|min), reporting [\d.]+ (s|min): [\d.]+ (s|min) "
                     r"\(CPU [\d.]+ (s|min)\)", out), out
    data = json.loads((tmp_path / "verdicts.json").read_text())
    assert list(data["phases"]) == list(reproducing.PHASES)
    measuring, reporting = (data["phases"][name] for name in reproducing.PHASES)
    assert measuring["cpu_s"] > 0  # the calibrate point spins a CPU: its CPU time is counted
    assert reporting["wall_s"] > 0 and reporting["cpu_s"] >= 0
    assert data["seconds"] == pytest.approx(measuring["wall_s"] + reporting["wall_s"], abs=0.1)
    assert ", measured in " in (tmp_path / "report.html").read_text()


def test_verdicts_and_times_are_kept_when_the_report_fails(fake_catalogue, tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(reproducing, "write_report", broken)
    with pytest.raises(OSError):
        reproducing.reproduce(["clock"], quick=True, out=tmp_path, progress=False)
    data = json.loads((tmp_path / "verdicts.json").read_text())
    assert data["counts"][REPRODUCED] == 1 and set(data["phases"]) == set(reproducing.PHASES)


def test_a_failing_sweep_is_recorded_and_the_run_goes_on(fake_catalogue, tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(Family, "run", refuse)
    result = reproducing.reproduce(["clock", "smt"], quick=True, out=tmp_path, progress=False)
    assert [t.name for t in result.failed] == ["calibrate.quick"]
    assert "Cannot allocate memory" in result.items[0].error
    assert all(v.status == NOT_MEASURABLE for v in result.items[0].verdicts)
    assert "Failed" in result.report.read_text()


def test_a_check_that_breaks_does_not_cost_the_report(tmp_path):
    broken = Claim("breaks", "nowhere", lambda ds: 1 / 0)
    entry = fake_item(claims=[broken])
    judged = reproducing.judge(entry, Dataset([{"family": "calibrate", "core_GHz": 3.0}]))
    assert judged.verdicts[0].status == NOT_MEASURABLE and "ZeroDivisionError" in judged.verdicts[0].detail


def test_progress_bar_reports_to_stderr_on_a_terminal_only(fake_catalogue, tmp_path, capsys, monkeypatch):
    reproducing.reproduce(["clock"], quick=True, out=tmp_path / "log", progress=True)
    assert "report.html" not in capsys.readouterr().err  # stderr is not a terminal: no bar
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    reproducing.reproduce(["clock"], quick=True, out=tmp_path / "terminal", progress=True)
    err = capsys.readouterr().err
    assert "clock" in err and "report.html" in err


def _bw_rows(threads: int, read: float, write: float) -> list[dict]:
    return [{"family": "bandwidth", "op": op, "threads": threads, "shared": True, "background_op": "none",
             "stores": "normal", "placement": "cores", "working_set_bytes": ws, "bytes_per_cycle": rate}
            for op, rate in (("read", read), ("write", write)) for ws in (8 << 10, 256 << 10, 64 << 20)]


def test_judge_reads_the_rows_of_the_items_it_compares_with():
    machine = {"machine": {"caches": [{"level": 1, "type": "Data", "size_bytes": 32 << 10},
                                      {"level": 2, "type": "Unified", "size_bytes": 1 << 20},
                                      {"level": 3, "type": "Unified", "size_bytes": 8 << 20}]}}
    two, one = Dataset(_bw_rows(2, 16.0, 1.0), machine), Dataset(_bw_rows(1, 16.0, 16.0), machine)
    alone = reproducing.judge("fig3.27", two)
    assert alone.verdicts[0].status == NOT_MEASURABLE and "threads=1" in alone.verdicts[0].detail
    judged = reproducing.judge("fig3.27", two, compare_with=[one])
    assert [v.status for v in judged.verdicts[:2]] == [REPRODUCED, REPRODUCED]
    assert judged.dataset is two  # the report shows the item's own rows


def test_reproduce_judges_an_item_with_the_rows_of_the_items_it_compares_with(monkeypatch, tmp_path):
    def check(ds: Dataset) -> Verdict:  # it may run in a worker process: what it saw is in its detail
        return catalogue.verdict(True, f"{len(ds)} rows")

    base = fake_item("base")
    pair = dataclasses.replace(fake_item("pair", quick="calibrate.quick_twin"),
                               claims=(Claim("both", "nowhere", check),), compare_with=("base",))
    monkeypatch.setattr(catalogue, "ITEMS", (base, pair))
    calibrate = reproducing.get_family("calibrate")
    monkeypatch.setitem(calibrate.sweeps, "quick_twin",
                        lambda: dataclasses.replace(calibrate.sweep("quick"), name="quick_twin", repeat=1))
    result = reproducing.reproduce(["pair"], quick=True, out=tmp_path, progress=False)
    assert [r.item.key for r in result.items] == ["base", "pair"]  # "pair" brings "base" along
    base_rows, pair_rows = (len(r.dataset) for r in result.items)
    assert result.items[1].verdicts[0].status == REPRODUCED
    assert result.items[1].verdicts[0].detail == f"{base_rows + pair_rows} rows" and base_rows and pair_rows


def _judging_jobs():
    machine = {"machine": {"caches": [{"level": 1, "type": "Data", "size_bytes": 32 << 10},
                                      {"level": 2, "type": "Unified", "size_bytes": 1 << 20},
                                      {"level": 3, "type": "Unified", "size_bytes": 8 << 20}]}}
    two, one = Dataset(_bw_rows(2, 16.0, 1.0), machine), Dataset(_bw_rows(1, 16.0, 16.0), machine)
    ub = Dataset([{"family": "system", "test": "execl", "copies": 1, "loops_per_s": 430.0, "index": 100.0}],
                 {"family": "system", "param_names": ["test", "copies"]})
    return [(catalogue.item("fig3.27"), two, [one], None, None), (catalogue.item("fig3.26"), one, [], None, None),
            (catalogue.item("unixbench-execl"), ub, [], None, None)]


def test_judging_in_worker_processes_gives_what_judging_here_gives_and_reaps_them():
    import multiprocessing
    here = reproducing.judge_all(_judging_jobs(), workers=1)
    done = []
    there = reproducing.judge_all(_judging_jobs(), workers=3, on_item=lambda n, total: done.append((n, total)))
    assert done == [(1, 3), (2, 3), (3, 3)]
    assert [r.item.key for r in there] == ["fig3.27", "fig3.26", "unixbench-execl"]
    for a, b in zip(here, there):
        assert [(v.status, v.detail, v.reason) for v in a.verdicts] == [(v.status, v.detail, v.reason) for v in b.verdicts]
        assert [(n.quantity, value, note) for n, value, note in a.numbers] == \
            [(n.quantity, value, note) for n, value, note in b.numbers]
        assert b.dataset is not None and len(b.dataset) == len(a.dataset)
    assert [v.status for v in there[0].verdicts[:2]] == [REPRODUCED, REPRODUCED]
    assert multiprocessing.active_children() == []


def test_judge_reads_a_dataset_file_and_keeps_the_item_rows(tmp_path):
    rows = [{"family": "system", "test": "execl", "copies": 1, "loops_per_s": 430.0, "index": 100.0},
            {"family": "system", "test": "spawn", "copies": 1, "loops_per_s": 1260.0, "index": 100.0}]
    Dataset(rows, {"family": "system", "param_names": ["test", "copies"]}).save(tmp_path / "ub.csv")
    judged = reproducing.judge("unixbench-execl", tmp_path / "ub.csv")
    assert len(judged.dataset) == 1 and judged.verdicts[0].status == PASSES  # index above 10: a sanity check
    assert "unixbench-execl" not in judged.table() and "Execl" in judged.table()
    assert "[sanity check: passes]" in judged.table()
    assert "verdict-good" in judged._repr_html_()


# ---- the command line -------------------------------------------------------------------


def test_cli_runs_and_check_turns_a_failed_claim_into_exit_1(fake_catalogue, tmp_path, capsys):
    assert cli.main(["reproduce", "clock", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "1 reproduced, 1 not reproduced, 1 inconclusive, 1 not measurable" in out and "report.html" in out
    assert "sanity checks: 1 passes, 0 fails, 0 not measurable" in out
    assert cli.main(["reproduce", "clock", "--quick", "--out", str(tmp_path), "--no-progress", "--check"]) == 1
    assert "not reproduced and --check" in capsys.readouterr().err


def test_cli_usage_errors_exit_2(capsys):
    assert cli.main(["reproduce", "nosuch", "--out", "x"]) == 2
    assert "nosuch" in capsys.readouterr().err
    assert cli.main(["reproduce", "fig3.15"]) == 2
    assert "--out" in capsys.readouterr().err


def test_cli_list(capsys):
    assert cli.main(["reproduce", "--list", "--quick", "pipes"]) == 0
    out = capsys.readouterr().out
    assert "pipes-ladder" in out and "pipes-touch" in out and "fig3.15" not in out


def test_cli_failed_sweep_exits_1(fake_catalogue, tmp_path, monkeypatch):
    monkeypatch.setattr(Family, "run", lambda *a, **k: (_ for _ in ()).throw(OSError(5, "I/O error")))
    assert cli.main(["reproduce", "clock", "--quick", "--out", str(tmp_path), "--no-progress"]) == 1


@pytest.mark.slow
def test_a_real_item_end_to_end(tmp_path):
    """Table 6.1 quick (four points at N=3000): a verdict for every claim, the figure in the report."""
    result = reproducing.reproduce(["table6.1"], quick=True, out=tmp_path, progress=False)
    (judged,) = result.items
    assert not result.failed
    assert len(judged.verdicts) == len(catalogue.item("table6.1").claims)
    assert all(v.status in catalogue.VERDICTS and v.detail for v in judged.verdicts)
    parsed = parse_report(result.report.read_text(), allow_external=True)
    pytest.importorskip("matplotlib")
    assert len(parsed.images) == 1


def test_a_machine_without_cache_sizes_plans_the_other_items(monkeypatch, tmp_path):
    """No cache facts in sysfs: the quick variants that pick working sets by cache size cannot be
    made; those items are not measurable with the reason, the others are planned as usual."""

    def no_caches(ds):
        raise NotMeasurable("the machine's L1d and L2 sizes are unknown (no cache facts in sysfs)")

    monkeypatch.setattr(catalogue.core, "caches", no_caches)
    tasks = reproducing.plan(catalogue.select(["fig3.15", "fig3.24", "table6.1"]), True, tmp_path)
    by_item = {t.items[0].key: t for t in tasks}
    assert by_item["fig3.15"].sweep is None and "no cache facts" in by_item["fig3.15"].unmeasurable
    assert by_item["fig3.24"].sweep is None and "no cache facts" in by_item["fig3.24"].unmeasurable
    assert by_item["table6.1"].sweep is not None


def test_the_overall_eta_uses_the_rate_of_the_whole_run():
    """tqdm's default smoothing extrapolates from the last few updates: one slow point made the
    full run's ETA read twelve hours half-way through a 78-minute run. reproduce's bar is the
    run loop's ETA bar (memlab.runner.eta_bar), which never passes its total."""
    module = importlib.import_module("memlab.runner")
    bar = module.eta_bar(100.0, "reproduce", enabled=True)
    try:
        assert not bar.disable and bar.smoothing == 0
        bar.update(70.0)
        bar.update(70.0)  # more than is left: the bar stops at its total
        assert bar.n == pytest.approx(100.0)
    finally:
        bar.close()
    assert module.eta_bar(100.0, "reproduce", enabled=False).disable
    assert module.eta_bar(0.0, "reproduce", enabled=True).disable  # nothing to do: no bar


def test_verdicts_and_times_are_written_without_following_a_planted_link(fake_catalogue, tmp_path):
    """They were written to ``verdicts.json.tmp<pid>`` and ``<times file>.tmp<pid>``, predictable names
    opened following links: whoever can write to the folder could aim memlab's writes anywhere."""
    victim = tmp_path / "victim"
    victim.write_text("secret")
    out = tmp_path / "r"
    out.mkdir()
    for name in (reproducing.VERDICTS_FILE, reproducing.TIMES_FILE):
        for pid in range(os.getpid() - 5, os.getpid() + 50):
            os.symlink(victim, out / f"{name}.tmp{pid}")
    reproducing.reproduce(["clock"], quick=True, out=out, progress=False)
    assert victim.read_text() == "secret"
    assert json.loads((out / reproducing.VERDICTS_FILE).read_text())["items"]
    assert json.loads((out / reproducing.TIMES_FILE).read_text())


def test_the_report_leads_with_the_counts_and_every_claim_that_differs(fake_catalogue, tmp_path, monkeypatch):
    """The summary comes first: counts by verdict (any verdict the catalogue has, "inconclusive"
    included), then each claim that differs here with its reason and a link to its item; the
    claims not measurable are folded."""
    clock = catalogue.item("clock")
    ds = Dataset([{"family": "calibrate", "budget_ns": 10**7, "core_GHz": 3.0}], {"family": "calibrate"})
    judged = reproducing.judge(clock, ds)
    judged.verdicts[0] = Verdict("inconclusive", "runs disagree by 40%", reason="runs disagree by 40%")
    result = reproducing.ReproduceResult(out=tmp_path, quick=True, items=[judged])
    text = reproducing.write_results(result).read_text()
    parse_report(text, allow_external=True)
    summary = text[text.index('<section id="summary">'):text.index("</section>")]
    assert text.index('<section id="summary">') < text.index('<section id="s0-')
    statuses = [found.status for found in judged.verdicts]
    for status in ("inconclusive", "not reproduced"):
        assert f'<span class="verdict {reproducing._BADGE[status]}">{status}</span> {statuses.count(status)}' in summary
    differing = [claim.text for claim, status in zip(clock.claims, statuses) if reproducing.differs(status)]
    differs = summary[summary.index("What differs here"):summary.index("</ul>")]
    assert f"({len(differing)} claims)" in differs and f'href="#{reproducing.anchor(0, clock.heading)}"' in differs
    assert "runs disagree by 40%" in differs and clock.claims[0].text in differs
    assert all(text in differs for text in differing)
    for claim, status in zip(clock.claims, statuses):  # not measurable, sanity checks passed: not listed
        if not reproducing.differs(status):
            assert claim.text not in differs
    unmeasured = statuses.count(NOT_MEASURABLE)
    assert f"<details><summary>Not measurable here ({unmeasured} claim{'s' if unmeasured != 1 else ''})</summary>" in summary
    assert unmeasured >= 1 and len(differing) >= 2
    assert reproducing.differs("inconclusive") and not reproducing.differs(NOT_MEASURABLE)


def test_an_inconclusive_verdict_no_rule_explains_says_the_run_cannot_tell():
    entry = fake_item()
    found = reproducing._with_reason(entry, "a claim", Verdict(INCONCLUSIVE, "1.01 (interval 0.9-1.1)"), Dataset())
    assert found.reason == reproducing.INCONCLUSIVE_REASON
    departed = reproducing._with_reason(entry, "a claim", Verdict(NOT_REPRODUCED, "0.5"), Dataset())
    assert "candidate defect" in departed.reason


def test_a_quick_run_splits_its_samples_over_runs():
    QUICK_RUNS, in_quick_runs = reproducing.QUICK_RUNS, reproducing.in_quick_runs
    two = in_quick_runs(Sweep("q", "calibrate", [{}], repeat=2))
    assert (two.runs, two.repeat) == (QUICK_RUNS, max(1, 2 // QUICK_RUNS))
    assert in_quick_runs(Sweep("q", "calibrate", [{}], repeat=2, runs=5)).runs == 5  # a sweep's own runs stay
    tasks = reproducing.plan(catalogue.select(), True, "/nonexistent-memlab-plan")
    assert [t.items[0].key for t in tasks if t.sweep is not None and t.sweep.runs is None] == []


# ---- the source's numbers on the item's figure, the cache each working set falls in -------------

_CACHES = {"caches": [{"level": 1, "type": "Data", "size_bytes": 48 << 10},
                      {"level": 2, "type": "Unified", "size_bytes": 1 << 20},
                      {"level": 3, "type": "Unified", "size_bytes": 32 << 20}]}


def _chase_dataset() -> Dataset:
    """A random walk from 4 KiB to 128 MiB at 3 cycles a ns, on a machine with sysfs caches of 48 KiB, 1 MiB, 32 MiB."""
    rows = [{"family": "chase", "working_set_bytes": 1 << k, "order": "random", "ns_per_element": 2.0 * k,
             "cycles_per_element": 6.0 * k, "repeat": 2} for k in range(12, 28)]
    return Dataset(rows, {"family": "chase", "sweep": "quick", "param_names": ["working_set_bytes", "order"],
                          "machine": _CACHES})


def _chase_item(*numbers: Number) -> Item:
    return Item(key="walk", source="drepper", section="3.3.2", label="Figure 0.2", title="a walk", sweep="chase.quick",
                quick="chase.quick", measured="a random walk", machine="none", numbers=numbers,
                claims=(Claim("the clock ticks", "nowhere", lambda ds: catalogue.verdict(True, "yes")),),
                script="experiments/fig3_10.py", notebook="notebooks/chase.ipynb")


def _source_marks(fig) -> tuple[list[str], list]:
    """The labels and the diamonds chart.mark_source drew on a figure."""
    from memlab.chart import SOURCE_GID
    labels = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == SOURCE_GID]
    diamonds = [line for ax in fig.axes for line in ax.lines if line.get_gid() == SOURCE_GID and line.get_marker() == "D"]
    return labels, diamonds


def test_the_items_figure_marks_a_source_number_on_its_axis_and_leaves_another_unit_out(monkeypatch):
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    from memlab import report
    item = _chase_item(Number("cycles per element, random, beyond the last cache", 240, "cycles",
                              lambda ds: catalogue.value_of(ds, "cycles_per_element")),
                       Number("random / sequential beyond the L2", 3.0, "x"))
    judged = reproducing.judge(item, _chase_dataset())
    (section,) = reproducing._report_items(reproducing.ReproduceResult(out=None, quick=True, items=[judged]))
    embedded = []
    real = report.chart.embedded_image
    monkeypatch.setattr(report.chart, "embedded_image", lambda fig, *a, **k: embedded.append(fig) or real(fig, *a, **k))
    text = report.build_report([section])
    (fig,) = embedded
    labels, diamonds = _source_marks(fig)
    # One marker, for the number in cycles; the ratio (unit "x") is on no axis of the figure.
    assert labels == ["source: 240 cycles, random, beyond the last cache"]
    (diamond,) = diamonds
    # Beyond twice the 32 MiB last cache the figure has 64 and 128 MiB: the marker at their middle,
    # at 240 cycles read on the figure's cycles axis (3 cycles a ns: 80 ns on its ns axis).
    assert list(diamond.get_xdata()) == [pytest.approx(2 ** 26.5)]
    assert list(diamond.get_ydata()) == [pytest.approx(80.0, rel=1e-6)]
    assert parse_report(text, allow_external=True).images[0]["data-figure-title"] == report.chart.figure_title(report.plot.figure(judged.dataset))


def test_a_number_on_a_figure_without_working_sets_is_a_line_across():
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    from memlab import chart
    fig, ax = chart.new_figure()
    ax.bar(["one CPU", "two CPUs"], [8.0, 11.0])
    ax.set_ylabel("GiB per s")
    labels = reproducing.mark_numbers(fig, Dataset([]), [
        Number("vmsplice, two CPUs", 20.0, "GiB/s"),          # applies to the bars: a line across
        Number("copy beyond the L2", 5.0, "GiB/s"),           # names working sets the figure has none of
        Number("a page size", 4096.0, "bytes", compare=False),
    ])
    assert labels == ["source: 20 GiB/s, vmsplice, two CPUs"]
    (line,) = [line for line in ax.lines if line.get_gid() == chart.SOURCE_GID]
    assert list(line.get_ydata()) == [20.0, 20.0] and ax.get_ylim()[1] > 20.0  # the axis grew to show it


def test_a_number_naming_a_bar_group_is_marked_over_it():
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    from memlab import chart
    fig, ax = chart.new_figure()
    ax.bar([0, 1, 2], [1.0, 3.0, 4.0])
    ax.set_xticks([0, 1, 2], ["write/read", "vmsplice/splice", "vmsplice/splice\n+huge pages"])
    ax.set_ylabel("GiB per s")
    numbers = [Number("vmsplice/splice, two CPUs", 32.8, "GiB/s"), Number("+huge pages, two CPUs", 51.0, "GiB/s")]
    assert reproducing.mark_numbers(fig, Dataset([]), numbers) == [
        "source: 32.8 GiB/s, vmsplice/splice, two CPUs", "source: 51 GiB/s, +huge pages, two CPUs"]
    labels, diamonds = _source_marks(fig)
    # Each over its own group (the label's last line names the third), not a line across.
    assert [(list(d.get_xdata()), list(d.get_ydata())) for d in diamonds] == [([1.0], [32.8]), ([2.0], [51.0])]
    spans = [list(line.get_xdata()) for line in ax.lines if line.get_gid() == chart.SOURCE_GID and line.get_marker() != "D"]
    assert spans == [[pytest.approx(0.6), pytest.approx(1.4)], [pytest.approx(1.6), pytest.approx(2.4)]]


def test_a_region_the_figure_has_no_point_in_gets_no_marker():
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    from memlab import plot
    small = Dataset([row for row in _chase_dataset().rows if row["working_set_bytes"] <= 1 << 20],
                    _chase_dataset().metadata)
    fig = plot.figure(small)
    assert reproducing.mark_numbers(fig, small, [Number("cycles per element, beyond the last cache", 240, "cycles"),
                                                 Number("cycles per element, L2 region", 14, "cycles")]) == [
        "source: 14 cycles, L2 region"]


def test_mark_source_refuses_what_an_axis_cannot_show():
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    from memlab import chart
    fig, ax = chart.new_figure()
    ax.set_yscale("log")
    with pytest.raises(ValueError, match="y=0"):
        chart.mark_source(ax, 1.0, 0.0, "source: 0")
    with pytest.raises(ValueError, match="y=nan"):
        chart.mark_source(ax, 1.0, float("nan"), "source: nan")


def test_the_numbers_table_names_the_cache_here_from_the_measured_hierarchy():
    from memlab import hierarchy
    from memlab.hierarchy import Hierarchy, Level
    # Measured edges (32 KiB, 512 KiB, 8 MiB) below what sysfs says (48 KiB, 1 MiB, 32 MiB): the column goes by them.
    found = Hierarchy((Level("L1d", 32 << 10, None, 1.0, None, "L1d", 48 << 10),
                       Level("L2", 512 << 10, None, 4.0, None, "L2", 1 << 20),
                       Level("L3", 8 << 20, None, 12.0, None, "L3", 32 << 20)), 90.0, ())
    ds = _chase_dataset()
    ds.metadata["hierarchy"] = hierarchy.attach(found, 1 << 34)
    item = _chase_item(Number("cycles per element, L2 region", 14, "cycles"),
                       Number("cycles per element, beyond the L2", 240, "cycles"),
                       Number("speed-up of huge pages at 2^20 bytes", 0.57, "fraction"),
                       Number("naive", 0.318, "GFLOP/s"))
    cells = parse_report("<!doctype html>" + reproducing._numbers_html(reproducing.judge(item, ds))).cells
    header, rows = cells[:8], [cells[i:i + 8] for i in range(8, len(cells), 8)]
    assert header[5] == "cache here" and len(rows) == 4
    column = [row[5] for row in rows]
    # 2^20 bytes is in the L2 by sysfs, beyond the measured 512 KiB L2 edge: the L3 here.
    assert column == ["L2", "L3 / memory", "L3", "-"]


def test_numbers_at_one_place_share_one_marker_with_a_line_each():
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    from memlab import plot
    ds = _chase_dataset()
    fig = plot.figure(ds)
    numbers = [Number("cycles per element, write, beyond the last cache", 90, "cycles"),
               Number("cycles per element, copy, beyond the last cache", 90, "cycles")]
    assert reproducing.mark_numbers(fig, ds, numbers) == ["source: 90 cycles, write, beyond the last cache",
                                                          "source: 90 cycles, copy, beyond the last cache"]
    labels, diamonds = _source_marks(fig)
    assert labels == ["source: 90 cycles, write, beyond the last cache\nsource: 90 cycles, copy, beyond the last cache"]
    assert len(diamonds) == 1


def test_pool_workers_end_quietly_where_the_command_made_sigterm_stop_it(capfd):
    """memlab's CLI turns SIGTERM into a stop; the pool's own end sends each worker a SIGTERM, which
    printed a traceback from every idle worker until they took the default back."""
    import signal

    from memlab import cli
    from memlab.report import draw_figures
    before = signal.getsignal(signal.SIGTERM)
    with cli._sigterm_stops():
        assert signal.getsignal(signal.SIGTERM) is not before
        judged = reproducing.judge_all(_judging_jobs(), workers=3)
        draw_figures([], workers=3)
    assert signal.getsignal(signal.SIGTERM) is before
    assert [v.status for v in judged[0].verdicts[:2]] == [REPRODUCED, REPRODUCED]
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Terminated" not in err, err
