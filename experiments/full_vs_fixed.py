"""The full run against the long fixed run: do they give the same verdicts?

The full run (``memlab reproduce``) takes 2 to 3 runs a point, stopping once a
point's interval is as narrow as its claims need, each run of half the sweep's
samples a quarter as long, the points its claims, numbers and figure need (the
items' ``full`` variants) and UnixBench's samples 1 s long; the long fixed run
(``memlab reproduce --fixed``) measures every point in 3 runs of the sweep's
own samples, UnixBench's 30 s. This script runs both, one after the other, each
into its own folder (``--out``/full and ``--out``/fixed; ``--fixed-first``
swaps the order), or with ``--compare A B`` reads two finished runs' folders,
and prints:

- every claim whose verdict differs between the two, apart from those
  inconclusive or not measurable in either run (a verdict that cannot tell in
  one run says nothing of the other), sanity checks listed apart;
- the counts by verdict of both runs, and how many claims were compared;
- the two wall times (measuring and reporting), the host's CPU and the load
  average before and after.

The exit status is 0 when no compared claim differs, 1 when one does, 2 for a
bad argument.

    python experiments/full_vs_fixed.py --out DIR [--fixed-first] [ITEM ...]
    python experiments/full_vs_fixed.py --compare DIR_A DIR_B
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from memlab.catalogue import INCONCLUSIVE, NOT_MEASURABLE
from memlab.machine import collect

#: Verdicts that cannot tell: a claim with one of them in either run is not compared.
UNDECIDED = (INCONCLUSIVE, NOT_MEASURABLE)


def load_average() -> str:
    with open("/proc/loadavg") as handle:
        return " ".join(handle.read().split()[:3])


@dataclass
class Side:
    """One run's verdicts, read from its folder's verdicts.json."""

    folder: Path
    mode: str
    seconds: float
    claims: dict[tuple[str, str], str]  # (item, claim) -> status
    sanity: set[tuple[str, str]] = field(default_factory=set)

    def counts(self, sanity: bool = False) -> dict[str, int]:
        found: dict[str, int] = {}
        for key, status in self.claims.items():
            if (key in self.sanity) == sanity:
                found[status] = found.get(status, 0) + 1
        return dict(sorted(found.items()))


def read_side(folder: Path) -> Side:
    """A finished (or interrupted) run's verdicts; ValueError when the folder holds none."""
    path = Path(folder) / "verdicts.json"
    try:
        data = json.loads(path.read_text())
    except OSError as error:
        raise ValueError(f"{path}: {error.strerror or error} (is it a memlab reproduce folder?)") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON ({error})") from None
    claims, sanity = {}, set()
    for item in data.get("items", []):
        for claim in item.get("claims", []):
            key = (item["item"], claim["claim"])
            claims[key] = claim["status"]
            if claim.get("sanity"):
                sanity.add(key)
    mode = data.get("mode") or ("quick" if data.get("quick") else "full")
    return Side(Path(folder), mode, float(data.get("seconds") or 0.0), claims, sanity)


@dataclass
class Comparison:
    differ: list[tuple[tuple[str, str], str, str]]  # (item, claim), status in a, status in b
    undecided: int  # claims inconclusive or not measurable in either run
    agree: int
    only_one: int  # claims in one run only (an item the other did not judge)

    @property
    def compared(self) -> int:
        return self.agree + len(self.differ)


def compare_sides(a: Side, b: Side, sanity: bool = False) -> Comparison:
    """The claims (``sanity``: the sanity checks) of both runs, compared verdict by verdict."""
    differ, undecided, agree, only_one = [], 0, 0, 0
    for key in sorted(set(a.claims) | set(b.claims)):
        if (key in a.sanity or key in b.sanity) != sanity:
            continue
        if key not in a.claims or key not in b.claims:
            only_one += 1
        elif a.claims[key] in UNDECIDED or b.claims[key] in UNDECIDED:
            undecided += 1
        elif a.claims[key] == b.claims[key]:
            agree += 1
        else:
            differ.append((key, a.claims[key], b.claims[key]))
    return Comparison(differ, undecided, agree, only_one)


def run_side(folder: Path, fixed: bool, items: list[str]) -> float:
    """``memlab reproduce [--fixed]`` into ``folder``; its wall seconds seen from outside."""
    command = [sys.executable, "-m", "memlab", "reproduce", *items, "--out", str(folder)]
    if fixed:
        command.append("--fixed")
    started = time.monotonic()
    subprocess.run(command, check=False)
    return time.monotonic() - started


def describe(label: str, side: Side) -> str:
    return (f"{label}: {side.folder} ({side.mode} run, {side.seconds / 60:.1f} min in verdicts.json): "
            f"claims {side.counts()}, sanity checks {side.counts(sanity=True)}")


def print_comparison(a: Side, b: Side) -> int:
    claims, checks = compare_sides(a, b), compare_sides(a, b, sanity=True)
    for title, found in (("claims", claims), ("sanity checks", checks)):
        for (item, text), first, second in found.differ:
            print(f"  {title[:-1] if title == 'claims' else 'sanity check'} differs: {item}: {first} -> {second}: "
                  f"{text}")
    print(describe("A", a))
    print(describe("B", b))
    print(f"claims compared: {claims.compared}, differing: {len(claims.differ)}; left apart: {claims.undecided} "
          f"inconclusive or not measurable in either run, {claims.only_one} in one run only")
    print(f"sanity checks compared: {checks.compared}, differing: {len(checks.differ)}")
    return 1 if claims.differ or checks.differ else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("items", nargs="*", metavar="ITEM", help="items or sources (default: all)")
    parser.add_argument("--out", help="folder for the two runs (out/full and out/fixed)")
    parser.add_argument("--fixed-first", action="store_true", help="run the long fixed run first")
    parser.add_argument("--compare", nargs=2, metavar=("DIR_A", "DIR_B"), help="compare two finished runs")
    args = parser.parse_args(argv)
    machine = collect(include_core=False)
    host = (f"host: {machine.get('cpu_model', 'unknown CPU')}, family {machine.get('cpu_family', '?')} "
            f"model {machine.get('cpu_model_number', '?')}")
    if args.compare:
        if args.items or args.out:
            parser.error("--compare takes two folders and nothing else")
        try:
            a, b = (read_side(Path(folder)) for folder in args.compare)
        except ValueError as error:
            parser.error(str(error))
        status = print_comparison(a, b)
        print(host)
        return status
    if not args.out:
        parser.error("give --out DIR for the two runs, or --compare DIR_A DIR_B")
    out = Path(args.out)
    before = load_average()
    order = [("fixed", True), ("full", False)] if args.fixed_first else [("full", False), ("fixed", True)]
    seconds = {}
    for name, fixed in order:
        seconds[name] = run_side(out / name, fixed, args.items)
    after = load_average()
    try:
        full, fixed_side = read_side(out / "full"), read_side(out / "fixed")
    except ValueError as error:
        print(f"full_vs_fixed: {error}", file=sys.stderr)
        return 1
    status = print_comparison(full, fixed_side)
    print(f"wall time from outside: full {seconds['full'] / 60:.1f} min, fixed {seconds['fixed'] / 60:.1f} min "
          f"({' then '.join(name for name, _ in order)})")
    print(f"{host}; load average {before} before, {after} after")
    return status


if __name__ == "__main__":
    sys.exit(main())
