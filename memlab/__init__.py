"""memlab: memory and kernel experiments from Python, measured by a C core.

>>> import memlab
>>> m = memlab.run("calibrate", budget_ns=20_000_000, repeat=1)
>>> m.median("core_GHz") > 0.1
True
"""

from __future__ import annotations

from memlab._version import __version__
from memlab.dataset import Dataset
# The function shadows the submodule attribute: use `from memlab.compare import ...`
# (or importlib) to reach the module's other names.
from memlab.compare import compare, compare_machines
from memlab.check import check
from memlab.conditions import ConditionsWarning, MachineWarning, MemlabWarning
from memlab.grid import Sweep, grid, zipped
from memlab.measure import Measurement, core_ghz
from memlab.registry import FAMILY_MODULES, all_families
from memlab.registry import family as get_family
# As for compare: memlab.reproduce is the function; the module is memlab.reproduce in sys.modules.
from memlab.reproduce import reproduce
from memlab.sweep import run_sweep
from memlab.userkernel import include_dir, is_kernel_path, kernel_family
from memlab.userkernel import run as run_kernel_file

__all__ = [
    "ConditionsWarning",
    "Dataset",
    "FAMILY_MODULES",
    "MachineWarning",
    "Measurement",
    "MemlabWarning",
    "Sweep",
    "__version__",
    "all_families",
    "check",
    "compare",
    "compare_machines",
    "core_ghz",
    "get_family",
    "grid",
    "include_dir",
    "kernel_family",
    "reproduce",
    "run",
    "run_sweep",
    "zipped",
]


def run(family_name: str, params=None, **options) -> Measurement:
    """Measure one point of a family: ``memlab.run("chase", working_set_bytes=2**20)``, or of a
    kernel file (built, cached and registered first: ``memlab.run("./probe.c", size_bytes=4096)``;
    ``isolate=True`` measures it in a worker process, where a crash cannot take this one down)."""
    if is_kernel_path(family_name):
        return run_kernel_file(family_name, params, **options)
    return get_family(family_name).run(params, **options)
