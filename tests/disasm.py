"""Read the C core's machine code: which instructions are packed vector arithmetic.

The reference kernels of the matrix family must stay the scalar algorithms
they are named after. What gives a vectorised loop away is packed arithmetic
(``vmulpd``, ``vfmadd231pd``, ``vpaddd``), or any 256/512-bit register
(even a zeroing: scalar code has no use for one).
Compilers also use xmm registers in scalar code: scalar SSE/AVX arithmetic
(``vmulsd``, ``vaddsd``, ``vfmadd231sd``), zeroing idioms (``vpxor
%xmm1,%xmm1,%xmm1``), moves (``vmovq``, ``movapd``, ``kmovq`` spills under
AVX-512) and bitwise masks (``andpd`` for fabs). Those are allowed.
"""

from __future__ import annotations

import re
import shutil
import subprocess

_PREFIXES = {"lock", "rep", "repe", "repz", "repne", "repnz", "notrack", "bnd", "cs", "ds", "data16", "addr32"}

_PACKED_FLOAT = re.compile(
    r"^v?(add|sub|mul|div|sqrt|min|max|hadd|hsub|addsub|dp|rcp|rsqrt|round|rcp14|rsqrt14|"
    r"scalef|getexp|getmant|range|reduce|rndscale|fixupimm)p[sdh]$"
)
_PACKED_FMA = re.compile(r"^vf(n?m(add|sub)|maddsub|msubadd)(132|213|231)p[sdh]$")
_PACKED_CONVERT = re.compile(r"^v?cvt(t?p[sdh]2\w+|\w+2p[sdh])$")
_PACKED_INTEGER = re.compile(r"^v?p(add|sub|mul|madd|sad|avg|min|max|abs|sign|hadd|hsub)\w*$")
_ZEROING = {"xorps", "xorpd", "vxorps", "vxorpd", "pxor", "vpxor", "vpxord", "vpxorq"}
_WIDE_REGISTER = re.compile(r"%[yz]mm\d+")
_REGISTER = re.compile(r"%[a-z0-9]+")


def mnemonic_and_operands(line: str) -> tuple[str, str]:
    """Split one disassembled instruction (AT&T syntax) into mnemonic and operands.

    >>> mnemonic_and_operands("lock addq $0x1,(%rax)")
    ('addq', '$0x1,(%rax)')
    """
    words = line.split("#", 1)[0].split()
    while words and words[0] in _PREFIXES:
        words = words[1:]
    if not words:
        return "", ""
    return words[0], " ".join(words[1:])


def is_zeroing_idiom(mnemonic: str, operands: str) -> bool:
    """``xor`` of a register with itself: the register is set to zero, nothing is computed."""
    if mnemonic not in _ZEROING:
        return False
    parts = [part.strip() for part in operands.split(",")]
    return len(parts) >= 2 and len(set(parts)) == 1 and bool(_REGISTER.fullmatch(parts[0]))


def is_packed_arithmetic(line: str) -> bool:
    """Whether one instruction line is packed (SIMD) arithmetic or uses a ymm/zmm register.

    >>> is_packed_arithmetic("vfmadd231pd %ymm2,%ymm1,%ymm0")
    True
    >>> is_packed_arithmetic("vfmadd231sd (%rdx),%xmm1,%xmm0")
    False
    >>> is_packed_arithmetic("vpxor %xmm1,%xmm1,%xmm1")
    False
    """
    mnemonic, operands = mnemonic_and_operands(line)
    if _WIDE_REGISTER.search(operands):
        return True
    if not mnemonic or is_zeroing_idiom(mnemonic, operands):
        return False
    return any(
        pattern.match(mnemonic)
        for pattern in (_PACKED_FLOAT, _PACKED_FMA, _PACKED_CONVERT, _PACKED_INTEGER)
    )


def function_instructions(library: str, function: str) -> list[str] | None:
    """The instruction lines of one function of a shared library (objdump -d).

    None when objdump is missing or the symbol is not in the table (a
    stripped build); callers skip with that reason.
    """
    lines = function_lines(library, function)
    return None if lines is None else [instruction for _, instruction in lines]


def packed_instructions(instructions: list[str]) -> list[str]:
    """The packed-arithmetic lines among instructions (see :func:`is_packed_arithmetic`)."""
    return [line for line in instructions if is_packed_arithmetic(line)]


_BRANCH = re.compile(r"^(j[a-z]+)\s+([0-9a-f]+)\b")


def function_lines(library: str, function: str) -> list[tuple[int, str]] | None:
    """(address, instruction) of each instruction of one function of a shared library (objdump -d);
    None when objdump is missing or the symbol is not in the table (a stripped build)."""
    objdump = shutil.which("objdump")
    if objdump is None:
        return None
    text = subprocess.run(
        [objdump, "-d", "--no-show-raw-insn", f"--disassemble={function}", library],
        capture_output=True, text=True, check=False,
    ).stdout
    body = text.split(f"<{function}>:", 1)
    if len(body) < 2:
        return None
    lines = []
    for line in body[1].splitlines():
        if "\t" not in line or ":" not in line.split("\t", 1)[0]:
            continue
        address, instruction = line.split("\t", 1)
        lines.append((int(address.strip().rstrip(":"), 16), instruction.strip()))
    return lines


def loops(lines: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """(first instruction, closing branch) of each loop: every backward conditional jump and its target.

    A backward ``jmp`` is left out: compilers use one to enter a rotated loop at its test.

    >>> loops([(0x40, "vmovdqa (%rax),%ymm0"), (0x44, "add $0x20,%rax"), (0x48, "jb     40 <f+0x40>"),
    ...        (0x4a, "jmp    44 <f+0x44>")])
    [(64, 72)]
    """
    found = []
    for address, instruction in lines:
        mnemonic, operands = mnemonic_and_operands(instruction)
        match = _BRANCH.match(f"{mnemonic} {operands}")
        if match and match.group(1) != "jmp" and int(match.group(2), 16) <= address:
            found.append((int(match.group(2), 16), address))
    return sorted(found)


def widest_loop(lines: list[tuple[int, str]]) -> tuple[int, int] | None:
    """The loop with the most bytes between its first instruction and its closing branch (an
    unrolled kernel's main loop; its head and tail loops are shorter), None without a loop."""
    found = loops(lines)
    return max(found, key=lambda loop: loop[1] - loop[0]) if found else None
