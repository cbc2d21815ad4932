"""C families register themselves: ML_FAMILY(name) in a csrc/*.c file is all it takes.

The macro puts a pointer to the family into the linker section
``ml_families``; the core reads the section back (``ml_family_table``), so no
central list names a family. The first tests hold the real build to that;
the last builds a core of two new family files with each compiler at hand.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from memlab import _core

CSRC = Path(__file__).resolve().parent.parent / "csrc"
DEFINITION = re.compile(r"^ML_FAMILY\((\w+)\)\s*=\s*\{(.*?)^\};", re.M | re.S)


def declared_families() -> dict[str, tuple[str, str]]:
    """ML_FAMILY id -> (the family's .name, its file), from the sources."""
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(CSRC.glob("*.c")):
        for match in DEFINITION.finditer(path.read_text()):
            name = re.search(r'\.name\s*=\s*"(\w+)"', match.group(2))
            found[match.group(1)] = (name.group(1) if name else "", path.name)
    return found


def test_every_c_family_in_csrc_is_listed_by_the_core():
    families = declared_families()
    assert len(families) >= 10, families
    assert {name for name, _ in families.values()} == set(_core.families())
    for ident, (name, path) in families.items():
        assert ident == name, f"{path}: ML_FAMILY({ident}) names its family {name!r}"


def test_no_family_is_defined_around_the_macro():
    # a family defined without ML_FAMILY would be missing from the core, silently
    plain = re.compile(r"^\s*(static\s+)?const\s+ml_family\s+\w+\s*=", re.M)
    for path in sorted(CSRC.glob("*.c")):
        assert not plain.search(path.read_text()), f"{path.name} defines an ml_family without ML_FAMILY"
    assert not (CSRC / "families.h").exists(), "a central family list is back"


def test_core_lists_families_sorted_by_name():
    names = list(_core.families())
    assert names == sorted(names)


PROBE_ONE = """
#include "memlab.h"
static const ml_param no_params[] = {{0}};
ML_FAMILY(probe_alpha) = {.name = "probe_alpha", .description = "a", .params = no_params};
"""

PROBE_TWO = """
#include "memlab.h"
static const ml_param no_params[] = {{0}};
ML_FAMILY(probe_beta) = {.name = "probe_beta", .description = "b", .params = no_params};
ML_FAMILY(probe_gamma) = {.name = "probe_gamma", .description = "c", .params = no_params};
"""


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_new_family_files_register_themselves(compiler, tmp_path):
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed here")
    (tmp_path / "probe_one.c").write_text(PROBE_ONE)
    (tmp_path / "probe_two.c").write_text(PROBE_TWO)
    library = tmp_path / "libprobe.so"
    command = [compiler, "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
               f"-I{CSRC}", str(CSRC / "core.c"), str(CSRC / "counters.c"),
               str(tmp_path / "probe_one.c"), str(tmp_path / "probe_two.c"),
               "-Wl,--no-undefined", "-o", str(library)]
    built = subprocess.run(command, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    probe = ctypes.CDLL(str(library))
    probe.ml_family_table.restype = ctypes.POINTER(ctypes.c_void_p)
    probe.ml_family_table.argtypes = [ctypes.POINTER(ctypes.c_size_t)]
    count = ctypes.c_size_t()
    table = probe.ml_family_table(ctypes.byref(count))
    # ml_family begins with its name
    names = [ctypes.cast(table[i], ctypes.POINTER(ctypes.c_char_p))[0].decode() for i in range(count.value)]
    assert sorted(names) == ["probe_alpha", "probe_beta", "probe_gamma"]
