"""The ``clear_order`` family: user-space re-clearing in a chosen order.

Registered under its own name so sweeps and the CLI can address it; the
experiment itself lives in :mod:`memlab.clear` (see :func:`memlab.clear.order`).
"""

from memlab.clear import ORDER_FAMILY as FAMILY
from memlab.clear import order as run

__all__ = ["FAMILY", "run"]
