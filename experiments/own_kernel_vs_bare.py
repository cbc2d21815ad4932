"""The harness cost on a user kernel, and the time to build one.

examples/kernels/walk.c measured by memlab (``memlab.run`` on the file) and
by a bare C program that includes the same file and times its measure
directly (experiments/own_kernel_bare.c, built with the same compiler and
flags), in interleaved rounds (memlab first in even rounds, the bare program
first in odd ones), both pinned to one CPU. Per case: each side's median
ns_per_element over the rounds, the median of the per-round ratios bare /
memlab (1 = parity, below 1 = memlab slower) with its range, and the load
average. Then the first build of the kernel (an empty cache) and a cached
one, each in a fresh process, and memlab's build() alone. Last, how long
after a SIGINT a long sample of the kernel stops (KeyboardInterrupt), five
times (``--ctrl-c-only``: that alone).

    python experiments/own_kernel_vs_bare.py [--rounds 7] [--cpu 1] [--ctrl-c-only]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import memlab
from memlab import _core, machine, userkernel

HERE = Path(__file__).resolve().parent
WALK = HERE.parent / "examples" / "kernels" / "walk.c"
CASES = [("array", 16 << 10), ("list", 16 << 10), ("array", 256 << 10), ("list", 256 << 10)]


def bare_program(folder: Path) -> Path:
    compiler, flags = userkernel.compiler_command()
    flags = [f for f in flags if f not in ("-shared", "-fPIC", "-fvisibility=hidden")]
    target = folder / "own_kernel_bare"
    subprocess.run([*compiler, *flags, f"-I{userkernel.include_dir()}", str(HERE / "own_kernel_bare.c"),
                    "-o", str(target)], check=True)
    return target


def bare(program: Path, layout: str, size: int, seconds: float, cpu: int) -> tuple[float, float]:
    """The bare program's ns_per_element by the wall clock and by its CPU time."""
    out = subprocess.run(["taskset", "-c", str(cpu), str(program), str(size), str(["array", "list"].index(layout)),
                          str(seconds)], check=True, capture_output=True, text=True).stdout
    wall, on_cpu = map(float, out.split())
    return wall, on_cpu


def harness(layout: str, size: int, seconds: float, cpu: int) -> tuple[float, float]:
    """memlab's ns_per_element by the wall clock, and scaled by the samples' on-CPU fraction."""
    m = memlab.run(str(WALK), size_bytes=size, layout=layout, repeat=5, warmup=1, target_seconds=seconds, cpu=cpu)
    return m.median("ns_per_element"), m.median("ns_per_element") * m.on_cpu_fraction


def build_times() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "MEMLAB_CACHE_DIR": cache}
        code = ("import time; t = time.perf_counter(); import memlab; s = time.perf_counter(); "
                f"memlab.kernel_family({str(WALK)!r}); print(time.perf_counter() - s)")
        first = float(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                                     text=True).stdout)
        cached = float(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                                      text=True).stdout)
        started = time.perf_counter()
        userkernel.build(WALK, cache=cache)
        build_only = time.perf_counter() - started
    return {"first build + load (s)": first, "cached build + load (s)": cached, "cached build() alone (s)": build_only}


def ctrl_c_seconds(times: int = 5) -> list[float]:
    """Seconds from a SIGINT 0.3 s into a 60 s sample of walk.c to the KeyboardInterrupt."""
    family = memlab.kernel_family(WALK)
    stops = []
    for _ in range(times):
        sent = []

        def interrupt() -> None:
            sent.append(time.perf_counter())
            os.kill(os.getpid(), signal.SIGINT)

        with _core.Kernel(family.core, {"size_bytes": 1 << 20, "layout": "list"}) as kernel:
            timer = threading.Timer(0.3, interrupt)
            timer.start()
            try:
                kernel.measure(target_ns=60 * 10**9, counters=False, deadline_ns=10 * 10**9)
            except KeyboardInterrupt:
                stops.append(time.perf_counter() - sent[0])
            finally:
                timer.cancel()
                timer.join()
    return stops


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cpu", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=0.1, help="one sample's target (s)")
    parser.add_argument("--ctrl-c-only", action="store_true", help="only the Ctrl-C measurement")
    args = parser.parse_args()
    if args.ctrl_c_only:
        return _print_ctrl_c()
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as folder:
        program = bare_program(Path(folder))
        memlab.kernel_family(WALK)
        results = {case: ([], []) for case in CASES}
        for r in range(args.rounds):
            for layout, size in CASES:
                sides = [lambda: harness(layout, size, args.seconds, args.cpu),
                         lambda: bare(program, layout, size, args.seconds, args.cpu)]
                order = sides if r % 2 == 0 else sides[::-1]
                values = [side() for side in order]
                memlab_ns, bare_ns = values if r % 2 == 0 else values[::-1]
                results[(layout, size)][0].append(memlab_ns)
                results[(layout, size)][1].append(bare_ns)
            loads.append(os.getloadavg()[0])
    facts = machine.collect(include_core=False)
    print(f"host: {facts.get('cpu_model', '?')} (family {facts.get('cpu_family', '?')}, model "
          f"{facts.get('cpu_model_number', '?')}); load average {min(loads):.1f}-{max(loads):.1f}; "
          f"{args.rounds} rounds, CPU {args.cpu}")
    print("| case | memlab ns/element | bare ns/element | bare/memlab wall: median (range) "
          "| bare/memlab on CPU: median (range) |")
    print("| --- | --- | --- | --- | --- |")
    for (layout, size), (ours, theirs) in results.items():
        wall = [b[0] / m[0] for m, b in zip(ours, theirs)]
        on_cpu = [b[1] / m[1] for m, b in zip(ours, theirs)]
        print(f"| {layout} {size >> 10} KiB | {statistics.median(m[0] for m in ours):.4f} | "
              f"{statistics.median(b[0] for b in theirs):.4f} | {statistics.median(wall):.3f} "
              f"({min(wall):.3f}-{max(wall):.3f}) | {statistics.median(on_cpu):.3f} "
              f"({min(on_cpu):.3f}-{max(on_cpu):.3f}) |")
    for name, seconds in build_times().items():
        print(f"{name}: {seconds:.3f}")
    return _print_ctrl_c()


def _print_ctrl_c() -> int:
    stops = ctrl_c_seconds()
    print(f"Ctrl-C: the sample stopped {statistics.median(stops) * 1000:.1f} ms after SIGINT (median of "
          f"{len(stops)}; {min(stops) * 1000:.1f}-{max(stops) * 1000:.1f} ms); load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
