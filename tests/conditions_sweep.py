"""A two-point chase sweep for tests/test_conditions.py (memlab sweep SCRIPT)."""

import memlab
from memlab.sweep import Sweep


def sweep(quick=False):
    return Sweep("conditions", "chase", memlab.grid(working_set_bytes=[16 << 10, 64 << 10]),
                 repeat=3, target_seconds=0.05, runs=1)
