"""How stable this machine is right now: a short A/A run (``memlab check --stability``).

Two cheap pointer-chase points, one in the L1d and one past the last cache,
are measured twice back to back, each side in ``runs`` runs (a fresh list per
run, the runs taken in rounds), and the sides are compared point by point on
the run level (:func:`memlab.compare.compare`). Nothing changed between the
sides, so a point that compares as a regression or an improvement *flipped*:
the count, with each side's run spread (largest / smallest run median), says
how far a comparison on this machine can be trusted at this moment. The
whole check takes a few seconds (about 12 lists built, 24 short samples).

>>> result = stability(runs=2, repeat=2)            # doctest: +SKIP
>>> print(result.format())                          # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from memlab.chase import quick_sizes
from memlab.compare import IMPROVEMENT, REGRESSION, Comparison, compare
from memlab.grid import Sweep, check_runs
from memlab.runner import Run
from memlab.significance import UNSTABLE_RUN_SPREAD
from memlab.units import format_param

__all__ = ["STABILITY_L1_BYTES", "Stability", "stability", "stability_sweep"]

#: The point inside every L1d (16 KiB: a quarter to a third of the L1d of recent CPUs).
STABILITY_L1_BYTES = 1 << 14

#: Samples per run, and their length (seconds): short, the check is about runs.
STABILITY_REPEAT = 3
STABILITY_TARGET_SECONDS = 0.02


def stability_sweep(runs: int = 3, repeat: int = STABILITY_REPEAT) -> Sweep:
    """The A/A's sweep: a random chase in the L1d and one just past the last cache
    (:func:`memlab.chase.quick_sizes`' largest size, at most 128 MiB), ``runs`` runs of
    ``repeat`` samples.

    >>> [p["working_set_bytes"] for p in stability_sweep().points][0]
    16384
    """
    memory = quick_sizes()[-1]
    points = [{"working_set_bytes": size, "order": "random", "npad": 7} for size in (STABILITY_L1_BYTES, memory)]
    return Sweep("stability", "chase", points, repeat=repeat, warmup=0, target_seconds=STABILITY_TARGET_SECONDS,
                 description="memlab check --stability: a random chase in the L1d and past the last cache",
                 runs=check_runs(runs))


@dataclasses.dataclass
class Stability:
    """What the A/A found: the comparison of the two sides, its wall seconds and the runs a side."""

    comparison: Comparison
    seconds: float
    runs: int

    @property
    def flips(self) -> int:
        """Points that compared as a regression or an improvement although nothing changed."""
        return sum(point.verdict in (REGRESSION, IMPROVEMENT) for point in self.comparison.points)

    @property
    def unstable(self) -> int:
        """Points whose runs (on either side) disagree beyond the unstable bound."""
        return sum(point.unstable for point in self.comparison.points)

    def to_dict(self) -> dict[str, Any]:
        """The result as plain data (``memlab check --stability --json``)."""
        return {
            "runs": self.runs, "seconds": round(self.seconds, 2), "flips": self.flips,
            "unstable": self.unstable, "unstable_bound": UNSTABLE_RUN_SPREAD,
            "points": [{"point": _where(point), "verdict": point.verdict,
                        "baseline_run_spread": point.baseline_run_spread,
                        "candidate_run_spread": point.candidate_run_spread,
                        "change": point.change} for point in self.comparison.points],
        }

    def format(self) -> str:
        """Lines for the terminal: each point's spreads and verdict, then the counts."""
        lines = [f"stability (A/A: the same two points measured twice, {self.runs} runs a side, "
                 f"{self.seconds:.1f} s):"]
        for point in self.comparison.points:
            lines.append(f"  {_where(point)}: run spread {point.baseline_run_spread:.3f} then "
                         f"{point.candidate_run_spread:.3f}; {point.verdict} ({point.change:+.1%})")
        total = len(self.comparison.points)
        verdict = "stable" if self.flips == 0 and self.unstable == 0 else "NOT stable"
        lines.append(f"  {self.flips} of {total} points flipped, {self.unstable} of {total} unstable "
                     f"(runs disagree beyond {UNSTABLE_RUN_SPREAD:g}x): {verdict} right now")
        return "\n".join(lines)


def _where(point: Any) -> str:
    """A point of the A/A in words: ``random chase of 16 KiB``."""
    return f"random chase of {format_param('working_set_bytes', point.params.get('working_set_bytes'))}"


def stability(runs: int = 3, repeat: int = STABILITY_REPEAT) -> Stability:
    """Measure the A/A of :func:`stability_sweep` (two sides back to back) and compare them.

    ``runs`` runs a side (1..1000), ``repeat`` samples a run. Returns a
    :class:`Stability`; its ``flips`` count the points that changed verdict.
    """
    sweep = stability_sweep(runs, repeat)
    started = time.monotonic()
    sides = [Run(sweep, runs=runs).execute(progress=False, warn=lambda text: None) for _ in range(2)]
    return Stability(compare(sides[0], sides[1]), time.monotonic() - started, runs)
