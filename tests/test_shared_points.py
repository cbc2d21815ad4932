"""memlab reproduce measures a point once when several sweeps measure it alike
(``memlab.reproduce.share_points``): the first task keeps it, a later one leaves it out and its
items are judged on the rows the first measured. Stand-in items on the ``calibrate`` family
(``test_reproduce.fake_item``); the real catalogue's plan is checked for the invariant."""

from __future__ import annotations

import dataclasses
import importlib


from memlab import catalogue
from memlab.catalogue import Claim, Verdict
from memlab.dataset import Dataset, point_key
from memlab.grid import Precision, Sweep
from memlab.registry import family

from test_reproduce import fake_item

reproducing = importlib.import_module("memlab.reproduce")
CALIBRATE = family("calibrate")
A, B, C = 2_000_000, 3_000_000, 4_000_000


def task(name: str, budgets, *, repeat: int = 1, precision: Precision | None = None, runs: int | None = 2,
         key: str | None = None) -> reproducing.Task:
    sweep = Sweep(name, "calibrate", [{"budget_ns": b} for b in budgets], repeat=repeat, warmup=0,
                  runs=None if precision is not None else runs, precision=precision)
    return reproducing.Task(sweep, None, [fake_item(key or name)])


def test_a_point_two_tasks_measure_alike_is_measured_by_the_first():
    first, second, third = task("first", [A, B]), task("second", [B, C]), task("third", [A, B])
    reproducing.share_points([first, second, third])
    assert [p["budget_ns"] for p in first.sweep.points] == [A, B] and not first.shared
    assert [p["budget_ns"] for p in second.sweep.points] == [C]
    assert [(owner.items[0].key, [p["budget_ns"] for p in points]) for owner, points in second.shared] == \
        [("first", [B])]
    assert not third.measured_here and [p["budget_ns"] for p in third.sweep.points] == [A, B]  # kept for judging
    assert [p["budget_ns"] for p in third.shared[0][1]] == [A, B]


def test_points_measured_otherwise_are_not_shared():
    base = task("base", [A])
    other_samples = task("samples", [A], repeat=3)
    other_runs = task("runs", [A], runs=3)
    reproducing.share_points([base, other_samples, other_runs])
    assert not other_samples.shared and not other_runs.shared


def test_a_point_is_shared_only_from_a_rule_at_least_as_narrow():
    wide, narrow = Precision(2, 4, 0.10), Precision(2, 4, 0.02)
    loose, strict = task("loose", [A], precision=wide), task("strict", [A], precision=narrow)
    reproducing.share_points([loose, strict])
    assert not strict.shared  # the loose task's runs may stop before the strict one's claims allow
    strict2, loose2 = task("strict2", [B], precision=narrow), task("loose2", [B], precision=wide)
    reproducing.share_points([strict2, loose2])
    assert loose2.shared and not loose2.measured_here
    fixed = task("fixed", [C], runs=2)
    ruled = task("ruled", [C], precision=wide)
    reproducing.share_points([fixed, ruled])
    assert not ruled.shared  # fixed runs and a rule: not alike


def test_the_judged_dataset_takes_the_shared_rows_once():
    owner, later = task("owner", [A, B]), task("later", [B, C])
    reproducing.share_points([owner, later])
    row = lambda budget, run, ghz: {"family": "calibrate", "budget_ns": budget, "run": run, "core_GHz": ghz}
    theirs = Dataset([row(A, 0, 3.0), row(B, 0, 3.1), row(B, 1, 3.2)], {"family": "calibrate", "sweep": "owner"})
    # the later task's own file from a run before the points were shared still holds B: left out
    mine = Dataset([row(C, 0, 2.9), row(B, 0, 9.9)], {"family": "calibrate", "sweep": "later"})
    composed = reproducing._with_shared(later, mine, {id(owner): theirs})
    assert sorted((r["budget_ns"], r["core_GHz"]) for r in composed.rows) == [(B, 3.1), (B, 3.2), (C, 2.9)]
    assert composed.metadata["sweep"] == "later"
    whole = task("whole", [A, B])
    reproducing.share_points([owner, whole])
    alone = reproducing._with_shared(whole, None, {id(owner): theirs})
    assert alone.metadata["sweep"] == "whole" and len(alone.rows) == 3  # the owner's metadata, its own name
    assert reproducing._with_shared(whole, None, {id(owner): None}) is None  # nothing measured anywhere


def test_reproduce_measures_a_shared_point_once_and_judges_both_items_on_it(monkeypatch, tmp_path):
    def check(name):  # it may run in a worker process: what it saw is in its verdict's detail
        def verdict(ds: Dataset) -> Verdict:
            return catalogue.verdict(True, f"{name}: {sorted({row['budget_ns'] for row in ds.rows})}")
        return verdict

    first = dataclasses.replace(fake_item("first", quick="calibrate.pair_a"), claims=(Claim("a", "n", check("first")),))
    second = dataclasses.replace(fake_item("second", quick="calibrate.pair_b"),
                                 claims=(Claim("b", "n", check("second")),))
    monkeypatch.setattr(catalogue, "ITEMS", (first, second))
    for name, budgets in (("pair_a", [A, B]), ("pair_b", [B])):
        monkeypatch.setitem(CALIBRATE.sweeps, name, lambda name=name, budgets=budgets: Sweep(
            name, "calibrate", [{"budget_ns": b} for b in budgets], repeat=2, warmup=0))
    result = reproducing.reproduce(["first", "second"], quick=True, out=tmp_path, progress=False)
    seen = {r.item.key: r.verdicts[0].detail for r in result.items}
    assert seen == {"first": f"first: {[A, B]}", "second": f"second: {[B]}"}
    assert not (tmp_path / "calibrate-pair_b.csv").exists()  # every point of it measured by the first
    measured = Dataset.load(tmp_path / "calibrate-pair_a.csv")
    assert sorted(r["budget_ns"] for r in measured.rows) == [A, A, B, B]  # two runs each, once
    judged = {r.item.key: r for r in result.items}
    assert judged["second"].path.name == "calibrate-pair_a.csv" and judged["second"].dataset.metadata["sweep"] == "pair_b"
    assert "1 point measured once, with first" in reproducing.listing(catalogue.select(["first", "second"]), quick=True)


def test_in_the_catalogue_no_point_is_measured_twice_alike_and_each_shared_one_has_a_measurer(tmp_path):
    for quick in (True, False):
        tasks = [t for t in reproducing.plan(catalogue.select(), quick, tmp_path) if t.sweep is not None]
        measured: dict[tuple, str] = {}
        for t in tasks:
            fam = family(t.sweep.family)
            keys = {point_key({"family": fam.name, **dataclasses.asdict(fam.params(p))}, fam.param_names)
                    for p in t.sweep.points}
            if t.measured_here:
                for k in keys:
                    settings = (reproducing._sample_settings(t.sweep), k)
                    if settings in measured:  # alike twice: only where the rules differ
                        other = next(o for o in tasks if o.name == measured[settings])
                        assert not reproducing._covers(other.sweep.precision, t.sweep.precision), (t.name, k)
                    measured.setdefault(settings, t.name)
            for owner, points in t.shared:
                assert owner.measured_here and tasks.index(owner) < tasks.index(t)
                owned = {point_key({"family": fam.name, **dataclasses.asdict(fam.params(p))}, fam.param_names)
                         for p in owner.sweep.points}
                assert {point_key({"family": fam.name, **dataclasses.asdict(fam.params(p))}, fam.param_names)
                        for p in points} <= owned
        assert any(t.shared for t in tasks)  # figures 3.15, 3.16 and 7.1 walk the same lists
