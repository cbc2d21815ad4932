"""Python twins of what the C core computes: the reference the tests hold C to.

Each function here computes in plain Python (numpy for the long byte
pattern) what a piece of ``csrc/`` computes, bit for bit, so that a test can
run both on the same inputs and compare (``tests/test_twins.py``). The C is
reached through small helper families that hand back what it computed:
``chase_trace`` (the list), ``clear_kernel_order`` and ``clear_plan`` (the
clearing orders) and ``pipe_pattern`` (the pipe check's byte pattern).

- The generator: :func:`splitmix64` and :class:`SplitMix64`
  (``ml_splitmix64`` in ``csrc/memlab.h``), with Lemire's unbiased bounded
  draw (``chase_below`` in ``csrc/chase_list.c``).
- The pointer chase (``csrc/chase_list.c``): :func:`chase_successors` (sequential,
  random by Sattolo's seeded shuffle, random_blocks), :func:`chase_visit_order`,
  :func:`chase_order_hash` (the ``check_order_hash`` metric) and
  :func:`chase_pad0` (pad[0] after ``inc``, ``addnext0`` or ``addnextlast`` laps).
- Page clearing (``csrc/clear_plan.c``): :func:`kernel_order` (the old
  kernel's ``process_huge_page()``), :func:`clear_unit_order` (sequential,
  kernel, reverse, random) and :func:`clear_plan` (the byte offset of every
  clear call of a pass).
- The pipe check (``csrc/pipe_pattern.c``): :func:`pipe_pattern_byte` (the
  definition), :func:`pipe_pattern` and :func:`pipe_pattern_errors`.
- Threads that measured together (``ml_team_metrics`` in ``csrc/team.c``,
  through the helper family ``team_metrics``): :func:`team_metrics`.

This module imports nothing from memlab: it is the bottom of the house.

>>> kernel_order(8, 5)
[0, 1, 2, 7, 3, 6, 4, 5]
>>> chase_successors(4, chains=1, order="sequential")
[1, 2, 3, 0]
>>> pipe_pattern(0, 8).hex()
'157c4a7fb979379e'
"""

from __future__ import annotations

from typing import Sequence

import numpy

__all__ = [
    "MASK64",
    "splitmix64",
    "SplitMix64",
    "sattolo",
    "chase_successors",
    "chase_visit_order",
    "chase_order_hash",
    "chase_pad0",
    "CLEAR_SUBPAGE_BYTES",
    "CLEAR_CHUNK_BYTES",
    "CLEAR_ORDERS",
    "kernel_order",
    "clear_unit_order",
    "clear_plan",
    "PIPE_PATTERN_STEP",
    "pipe_pattern_byte",
    "pipe_pattern",
    "pipe_pattern_errors",
    "team_metrics",
]

MASK64 = (1 << 64) - 1

# ---- the generator -------------------------------------------------------------


def splitmix64(state: int) -> tuple[int, int]:
    """One step of splitmix64: returns (new state, 64-bit output).

    >>> splitmix64(0)[1] == 0xE220A8397B1DCDAF
    True
    """
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


class SplitMix64:
    """The C core's seeded generator, drawn the two ways the core draws it.

    >>> rng = SplitMix64(1)
    >>> 0 <= rng.below(10) < 10
    True
    """

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK64

    def next(self) -> int:
        """The next 64-bit output (``ml_splitmix64``)."""
        self.state, value = splitmix64(self.state)
        return value

    def below(self, bound: int) -> int:
        """Uniform in [0, bound) without modulo bias (Lemire's multiply-shift)."""
        m = self.next() * bound
        low = m & MASK64
        if low < bound:
            threshold = ((1 << 64) - bound) % bound
            while low < threshold:
                m = self.next() * bound
                low = m & MASK64
        return m >> 64


# ---- the pointer chase ---------------------------------------------------------


def sattolo(successor: list[int], lo: int, count: int, rng: SplitMix64) -> None:
    """Sattolo's shuffle of successor[lo:lo + count] in place, as chase.c does it.

    Starting from the identity the entries become one cycle through all of them.

    >>> s = list(range(5)); sattolo(s, 0, 5, SplitMix64(3))
    >>> sorted(s) == list(range(5)) and all(s[i] != i for i in range(5))
    True
    """
    for i in range(count - 1, 0, -1):
        j = rng.below(i)
        a, b = lo + i, lo + j
        successor[a], successor[b] = successor[b], successor[a]


def chase_successors(
    elements: int, chains: int = 1, order: str = "random", block_elements: int = 1, seed: int = 1
) -> list[int]:
    """The list ``csrc/chase.c`` builds: element i links to ``result[i]``.

    ``elements`` (all chains together, a multiple of ``chains``) are split
    into equal consecutive ranges, one circular list per chain, linked in
    ``order``: ``sequential`` (i -> i + 1), ``random`` (Sattolo's shuffle,
    one generator seeded with ``seed`` for all chains, in chain order) or
    ``random_blocks`` (each block of ``block_elements`` shuffled into a path
    from its first element to the next block's first element).

    >>> chase_successors(6, chains=2, order="sequential")
    [1, 2, 0, 4, 5, 3]
    """
    if elements < 1 or chains < 1 or elements % chains:
        raise ValueError(f"elements={elements} must be a positive multiple of chains={chains}")
    if order not in ("sequential", "random", "random_blocks"):
        raise ValueError(f"order={order!r} is not one of sequential, random, random_blocks")
    chain = elements // chains
    block = max(1, block_elements)
    rng = SplitMix64(seed)
    successor = list(range(elements))
    for c in range(chains):
        lo = c * chain
        if order == "sequential":
            for i in range(chain):
                successor[lo + i] = lo + (i + 1) % chain
        elif order == "random" or block >= chain:
            sattolo(successor, lo, chain, rng)
        else:
            for start in range(lo, lo + chain, block):
                size = min(block, lo + chain - start)
                then = start + size if start + size < lo + chain else lo
                sattolo(successor, start, size, rng)
                for i in range(start, start + size):
                    if successor[i] == start:
                        successor[i] = then
                        break
    return successor


def chase_visit_order(successors: Sequence[int], start: int, steps: int) -> list[int]:
    """The elements a walk from ``start`` visits in ``steps`` steps, in order.

    >>> chase_visit_order([2, 0, 1], 0, 4)
    [0, 2, 1, 0]
    """
    visited = []
    element = start
    for _ in range(steps):
        visited.append(element)
        element = successors[element]
    return visited


def _mix(hash_value: int, value: int) -> int:
    hash_value ^= (value + 0x9E3779B97F4A7C15 + ((hash_value << 6) & MASK64) + (hash_value >> 2)) & MASK64
    return (hash_value * 0xFF51AFD7ED558CCD) & MASK64


def chase_order_hash(successors: Sequence[int], chains: int) -> int:
    """The chase's ``check_order_hash`` metric: a hash of one lap of every chain.

    The walk of each chain from its first element, chain after chain, mixed
    index by index as ``chase_verify`` does, kept to 52 bits (exact in a
    double).

    >>> chase_order_hash([1, 0], 1) == chase_order_hash([1, 0], 1)
    True
    """
    chain = len(successors) // chains
    hash_value = 0
    for c in range(chains):
        for index in chase_visit_order(successors, c * chain, chain):
            hash_value = _mix(hash_value, index)
    return hash_value & ((1 << 52) - 1)


def chase_pad0(successors: Sequence[int], chains: int, op: str, laps: int, npad: int = 1) -> list[int]:
    """pad[0] of every element after ``laps`` laps of ``op``, as chase.c leaves it.

    pad[0] starts at index + 1, and so does the last pad word (pad[npad-1])
    when npad >= 2; ``inc`` adds 1 per visit, ``addnext0`` adds the next
    element's pad[0], ``addnextlast`` the next element's last pad word (its
    pad[0] when npad is 1), all modulo 2**64; ``follow`` and ``addpair``
    (which adds into a register) leave memory alone. ``chains`` counts every
    list in memory.

    >>> chase_pad0([1, 0], 1, "inc", laps=3)
    [4, 5]
    >>> chase_pad0([1, 0], 1, "addnextlast", laps=1, npad=3)
    [3, 3]
    """
    n = len(successors)
    pad = [i + 1 for i in range(n)]
    if op in ("follow", "addpair"):
        return pad
    if op not in ("inc", "addnext0", "addnextlast"):
        raise ValueError(f"op={op!r} is not one of follow, inc, addnext0, addnextlast, addpair")
    last = pad if npad == 1 else [i + 1 for i in range(n)]  # nobody writes the last word when npad >= 2
    chain = n // chains
    for c in range(chains):
        i = c * chain
        for _ in range(laps * chain):
            if op == "inc":
                pad[i] = (pad[i] + 1) & MASK64
            elif op == "addnext0":
                pad[i] = (pad[i] + pad[successors[i]]) & MASK64
            else:
                pad[i] = (pad[i] + last[successors[i]]) & MASK64
            i = successors[i]
    return pad


# ---- page clearing ------------------------------------------------------------------

CLEAR_SUBPAGE_BYTES = 4096
CLEAR_CHUNK_BYTES = 2 << 20
CLEAR_ORDERS = ("sequential", "kernel", "reverse", "random")


def kernel_order(n: int, target: int) -> list[int]:
    """The old kernel's ``process_huge_page()`` order of n subpages faulted at ``target``.

    The far end first, then pairs from both sides converging on the target,
    which comes last (its cache lines stay hot for the faulting access).

    >>> kernel_order(8, 0)
    [7, 6, 5, 4, 3, 2, 1, 0]
    """
    if not 0 <= target < n:
        raise ValueError(f"target={target} is outside the huge page [0, {n - 1}]")
    visited: list[int] = []
    if 2 * target <= n:
        visited += list(range(n - 1, 2 * target - 1, -1))
        base, pairs = 0, target
    else:
        pairs = n - target
        base = n - 2 * pairs
        visited += list(range(base))
    for i in range(pairs):
        visited += [base + i, base + 2 * pairs - 1 - i]
    return visited


def clear_unit_order(n: int, order: str, target: int, rng: SplitMix64) -> list[int]:
    """The order of n units of one chunk; ``random`` draws from ``rng``.

    random is a Fisher-Yates shuffle of the identity drawing ``next() % i``
    (not Lemire's draw: this is clear_plan.c's own).

    >>> clear_unit_order(4, "reverse", 0, SplitMix64(1))
    [3, 2, 1, 0]
    """
    if order == "kernel":
        return kernel_order(n, target)
    if order == "reverse":
        return list(range(n - 1, -1, -1))
    units = list(range(n))
    if order == "random":
        for i in range(n, 1, -1):
            j = rng.next() % i
            units[i - 1], units[j] = units[j], units[i - 1]
    elif order != "sequential":
        raise ValueError(f"order={order!r} is not one of {', '.join(CLEAR_ORDERS)}")
    return units


def clear_plan(
    region_bytes: int, order: str = "sequential", extent_bytes: int = CLEAR_SUBPAGE_BYTES,
    target_subpage: int = 0, seed: int = 1,
) -> list[int]:
    """Byte offsets of the clear calls of one clear_order pass, in order.

    Extents below 2 MiB split each 2 MiB chunk into units visited in
    ``order`` (the target is the unit holding ``target_subpage``); chunks
    follow in address order, one generator for all of them. Extents of
    2 MiB and more go in address order.

    >>> clear_plan(2 << 20, "kernel", extent_bytes=512 << 10)
    [1572864, 1048576, 524288, 0]
    """
    calls = -(-region_bytes // extent_bytes)
    if extent_bytes >= CLEAR_CHUNK_BYTES:
        return [i * extent_bytes for i in range(calls)]
    units = CLEAR_CHUNK_BYTES // extent_bytes
    target = target_subpage * CLEAR_SUBPAGE_BYTES // extent_bytes
    rng = SplitMix64(seed)
    offsets = []
    for chunk in range(0, region_bytes, CLEAR_CHUNK_BYTES):
        offsets += [chunk + unit * extent_bytes for unit in clear_unit_order(units, order, target, rng)]
    return offsets


# ---- the pipe check's byte pattern -----------------------------------------------------

PIPE_PATTERN_STEP = 0x9E3779B97F4A7C15


def pipe_pattern_byte(stream_offset: int) -> int:
    """Byte ``stream_offset`` of the stream: the definition the check relies on.

    Byte p is byte (p mod 8) of the little-endian word (p // 8 + 1) * STEP
    (mod 2**64), so that a byte at the wrong position, a repeat or a stale
    buffer is caught.

    >>> pipe_pattern_byte(0) == PIPE_PATTERN_STEP & 0xFF
    True
    """
    word = ((stream_offset // 8 + 1) * PIPE_PATTERN_STEP) & MASK64
    return (word >> (8 * (stream_offset % 8))) & 0xFF


def pipe_pattern(stream_offset: int, length: int) -> bytes:
    """``length`` bytes of the stream from ``stream_offset`` on.

    >>> pipe_pattern(5, 3) == bytes(pipe_pattern_byte(p) for p in range(5, 8))
    True
    """
    if stream_offset < 0 or length < 0:
        raise ValueError(f"stream_offset={stream_offset} and length={length} must be at least 0")
    if length == 0:
        return b""
    first_word = stream_offset // 8
    last_word = (stream_offset + length - 1) // 8
    words = numpy.arange(first_word + 1, last_word + 2, dtype=numpy.uint64)
    words *= numpy.uint64(PIPE_PATTERN_STEP)  # wraps modulo 2**64
    skip = stream_offset % 8
    return words.astype("<u8").tobytes()[skip : skip + length]


def pipe_pattern_errors(data: bytes, stream_offset: int) -> tuple[int, int]:
    """(wrong bytes, stream offset of the first one or -1) of data checked against the stream.

    >>> pipe_pattern_errors(pipe_pattern(100, 16), 100)
    (0, -1)
    """
    expected = numpy.frombuffer(pipe_pattern(stream_offset, len(data)), dtype=numpy.uint8)
    wrong = numpy.flatnonzero(numpy.frombuffer(bytes(data), dtype=numpy.uint8) != expected)
    return int(wrong.size), int(stream_offset + wrong[0]) if wrong.size else -1


# ---- threads that measured together ------------------------------------------------


def team_metrics(times: Sequence[tuple[int, int, int]]) -> dict[str, float]:
    """The metrics every thread team reports, from each thread's (start_ns, end_ns, cpu_ns).

    ``cpu_fraction``: the mean over threads of CPU time over wall time; ``lowest_cpu_fraction``:
    the lowest thread's; ``overlap_fraction``: the least share of the span (first start to last
    end) in which every thread was on its CPU at once, 1 - sum(1 - cpu / span), at least 0.

    >>> {name: round(value, 3) for name, value in team_metrics([(0, 100, 90), (10, 100, 80)]).items()}
    {'cpu_fraction': 0.894, 'lowest_cpu_fraction': 0.889, 'overlap_fraction': 0.7}
    """
    fractions = [cpu / (end - start) if end > start else 0.0 for start, end, cpu in times]
    span = max(end for _, end, _ in times) - min(start for start, _, _ in times)
    span = max(span, 0)
    away = sum(1.0 - min(cpu / span, 1.0) if span > 0 else 1.0 for _, _, cpu in times)
    return {"cpu_fraction": sum(fractions) / len(fractions), "lowest_cpu_fraction": min(fractions),
            "overlap_fraction": 1.0 - away if away < 1.0 else 0.0}
