"""Footnote 19 of "Making Linux pipes fast": vmsplice of pages never touched.

vmsplice + splice with a buffer whose pages were written first and with one
whose pages never were (get_user_pages_fast then takes its slow path on every
call), with 4 KiB pages and with huge pages. The article: 25 GiB/s instead of
30 with 4 KiB pages; no slowdown with huge pages. 0.5 s samples (0.1 s and
three repetitions with --quick, under 10 s).

    python experiments/pipes_touch.py [--quick] [--out results/pipe-touch.csv]
"""

from __future__ import annotations

import memlab.cli
from memlab import pipe
from memlab.grid import Sweep


def sweep(quick: bool = False) -> Sweep:
    """The pipe family's touch sweep (shorter samples with ``quick``)."""
    base = pipe.FAMILY.sweep("touch")
    if quick:
        base.target_seconds, base.repeat, base.name = 0.1, 3, "touch_quick"
    return base


if __name__ == "__main__":
    raise SystemExit(memlab.cli.script_main(sweep))
