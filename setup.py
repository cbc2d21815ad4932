"""Build the C core memlab._core from csrc/*.c.

Flags: -O2, -march=native when the compiler accepts it (portable otherwise),
-falign-loops=64 when it accepts that, -Wall -Wextra. MEMLAB_CFLAGS adds flags (CI passes -Werror);
MEMLAB_SANITIZE=address builds with AddressSanitizer; MEMLAB_MARCH overrides
the -march choice ("none" for a portable build).
"""

import glob
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


BUILD_PACKAGES = (
    "Debian/Ubuntu: sudo apt-get install gcc python3-dev; "
    "Fedora: sudo dnf install gcc python3-devel"
)


def check_build_tools() -> None:
    """Stop with one sentence, not a traceback, when the C compiler or Python's headers are missing."""
    compiler = shlex.split(os.environ.get("CC", "cc"))
    if not compiler or shutil.which(compiler[0]) is None:
        name = compiler[0] if compiler else "(empty CC)"
        sys.exit(f"memlab: building memlab's C core needs a C compiler, and {name!r} was not found "
                 f"(set CC to one, or install one: {BUILD_PACKAGES}).")
    include = sysconfig.get_paths().get("include") or ""
    if not os.path.exists(os.path.join(include, "Python.h")):
        sys.exit(f"memlab: building memlab's C core needs Python's C headers, and Python.h is not in "
                 f"{include or 'the include directory'} (install them: {BUILD_PACKAGES}).")


def compiler_accepts(flag: str) -> bool:
    compiler = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "probe.c")
        with open(source, "w") as handle:
            handle.write("int main(void) { return 0; }\n")
        result = subprocess.run(
            [*shlex.split(compiler), flag, "-c", source, "-o", os.path.join(tmp, "probe.o")],
            capture_output=True,
        )
    return result.returncode == 0


def march_flags() -> list:
    choice = os.environ.get("MEMLAB_MARCH", "native")
    if choice == "none":
        return []
    flag = f"-march={choice}"
    if compiler_accepts(flag):
        return [flag]
    print(f"memlab: {flag} not accepted, building portable code", file=sys.stderr)
    return []


def loop_alignment_flags() -> list:
    """Every loop starts on a 64-byte boundary, where the compiler takes -falign-loops=64.

    Where a hot loop starts inside its 64-byte fetch line changes its speed, by
    0.92-0.97 of the aligned rate for the L1d read on a Zen 3 (docs/parity.md,
    "The gaps found on the Zen 3 guest"), and a link order decides it: the same kernel ran at
    0.92 of a bare program in _core.so and at parity in a library of its own.
    Aligning every loop makes the placement the best one, not the linker's pick.
    """
    flag = "-falign-loops=64"
    return [flag] if compiler_accepts(flag) else []


def compile_flags() -> tuple:
    flags = ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-fno-strict-aliasing"]
    flags += march_flags()
    flags += loop_alignment_flags()
    link = ["-lpthread", "-ldl"]
    if os.environ.get("MEMLAB_SANITIZE"):
        sanitizer = os.environ["MEMLAB_SANITIZE"]
        flags += [f"-fsanitize={sanitizer}", "-fno-omit-frame-pointer", "-g"]
        link += [f"-fsanitize={sanitizer}"]
    flags += shlex.split(os.environ.get("MEMLAB_CFLAGS", ""))
    return flags, link


check_build_tools()
cflags, ldflags = compile_flags()
build_flags = " ".join(cflags)

core = Extension(
    "memlab._core",
    sources=sorted(glob.glob("csrc/*.c")),
    depends=sorted(glob.glob("csrc/*.h")) + ["memlab/include/memlab_kernel.h"],
    include_dirs=["csrc", "memlab/include"],
    extra_compile_args=cflags,
    extra_link_args=ldflags,
    define_macros=[("ML_BUILD_CFLAGS", '"' + build_flags.replace('"', "") + '"'),
                   # the compiler user kernels are built with (memlab.userkernel)
                   ("ML_BUILD_CC", '"' + os.environ.get("CC", "cc").replace('"', "") + '"')],
)

# Small C programs the package runs as separate processes (memlab/_bin/):
# memlab.system execs memlab_system_helper for UnixBench's spawn and execl.
PROGRAMS = {"memlab_system_helper": "csrc/tools/memlab_system_helper.c"}


class build_ext_and_programs(build_ext):
    """build_ext that also compiles PROGRAMS into memlab/_bin/.

    The directory is the one _core goes to: build/lib*/memlab for a wheel
    (`pip install .`), the source tree's memlab/ for an editable install.
    """

    def run(self):
        super().run()
        package_dir = os.path.dirname(self.get_ext_fullpath("memlab._core"))
        out_dir = os.path.join(package_dir, "_bin")
        os.makedirs(out_dir, exist_ok=True)
        compiler = shlex.split(os.environ.get("CC", "cc"))
        for name, source in PROGRAMS.items():
            target = os.path.join(out_dir, name)
            command = compiler + cflags + [source, "-o", target] + ldflags
            print(" ".join(command))
            subprocess.run(command, check=True)

    def get_source_files(self):
        return super().get_source_files() + list(PROGRAMS.values())

    def get_outputs(self):
        package_dir = os.path.dirname(self.get_ext_fullpath("memlab._core"))
        programs = [os.path.join(package_dir, "_bin", name) for name in PROGRAMS]
        return super().get_outputs() + programs


setup(ext_modules=[core], cmdclass={"build_ext": build_ext_and_programs})
