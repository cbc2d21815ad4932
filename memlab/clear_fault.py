"""The ``clear_fault`` family: the kernel zeroing pages on first touch.

Registered under its own name so sweeps and the CLI can address it; the
experiment itself lives in :mod:`memlab.clear` (see :func:`memlab.clear.fault`).
"""

from memlab.clear import FAULT_FAMILY as FAMILY
from memlab.clear import fault as run

__all__ = ["FAMILY", "run"]
