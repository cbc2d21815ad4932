"""Build the C core memlab._core from csrc/*.c.

Flags: -O2, -march=native when the compiler accepts it (portable otherwise),
-Wall -Wextra. MEMLAB_CFLAGS adds flags (CI passes -Werror);
MEMLAB_SANITIZE=address builds with AddressSanitizer; MEMLAB_MARCH overrides
the -march choice ("none" for a portable build).
"""

import glob
import os
import shlex
import subprocess
import sys
import tempfile

from setuptools import Extension, setup


def compiler_accepts(flag: str) -> bool:
    compiler = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "probe.c")
        with open(source, "w") as handle:
            handle.write("int main(void) { return 0; }\n")
        result = subprocess.run(
            [compiler, flag, "-c", source, "-o", os.path.join(tmp, "probe.o")],
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


def compile_flags() -> tuple:
    flags = ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-fno-strict-aliasing"]
    flags += march_flags()
    link = ["-lpthread"]
    if os.environ.get("MEMLAB_SANITIZE"):
        sanitizer = os.environ["MEMLAB_SANITIZE"]
        flags += [f"-fsanitize={sanitizer}", "-fno-omit-frame-pointer", "-g"]
        link += [f"-fsanitize={sanitizer}"]
    flags += shlex.split(os.environ.get("MEMLAB_CFLAGS", ""))
    return flags, link


cflags, ldflags = compile_flags()
build_flags = " ".join(cflags)

core = Extension(
    "memlab._core",
    sources=sorted(glob.glob("csrc/*.c")),
    depends=sorted(glob.glob("csrc/*.h")),
    include_dirs=["csrc"],
    extra_compile_args=cflags,
    extra_link_args=ldflags,
    define_macros=[("ML_BUILD_CFLAGS", '"' + build_flags.replace('"', "") + '"')],
)

setup(ext_modules=[core])
