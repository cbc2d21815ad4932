"""Matrix initialisation (Drepper table 6.1), registered as its own family.

The code lives in :mod:`memlab.matrix`; this module gives the sweep and CLI
machinery the family name ``matrix_init``.
"""

from __future__ import annotations

from typing import Any

from memlab.matrix import INIT_FAMILY as FAMILY, InitParams
from memlab.measure import Measurement

__all__ = ["FAMILY", "InitParams", "run"]


def run(params: InitParams | dict | None = None, **options: Any) -> Measurement:
    """Measure one initialisation point (see :func:`memlab.matrix.init`); GB_per_s.

    >>> run(n=64, order="row", stores="normal", repeat=1, warmup=0).median("wrong_elements")
    0.0
    """
    return FAMILY.run(params, **options)
