"""The packed-arithmetic classifier the kernel disassembly tests rely on."""

from __future__ import annotations

import pytest

from disasm import is_packed_arithmetic, is_zeroing_idiom, mnemonic_and_operands, packed_instructions


PACKED = [
    "vmulpd %xmm1,%xmm2,%xmm3",
    "mulpd  %xmm1,%xmm0",
    "addps  (%rax),%xmm0",
    "vaddpd 0x8(%rdi),%xmm1,%xmm0",
    "vfmadd231pd %xmm2,%xmm1,%xmm0",
    "vfmadd213ps (%rsi),%xmm1,%xmm0",
    "vfnmsub132pd %xmm2,%xmm1,%xmm0",
    "vfmaddsub231pd %xmm2,%xmm1,%xmm0",
    "vdivpd %xmm2,%xmm1,%xmm0",
    "sqrtpd %xmm1,%xmm0",
    "vmaxps %xmm2,%xmm1,%xmm0",
    "haddpd %xmm1,%xmm0",
    "vcvtdq2pd %xmm1,%xmm0",
    "cvttpd2dq %xmm1,%xmm0",
    "vpaddd %xmm2,%xmm1,%xmm0",
    "paddq  %xmm1,%xmm0",
    "vpmulld %xmm2,%xmm1,%xmm0",
    # any 256- or 512-bit register, whatever the instruction
    "vmovupd %ymm0,(%rax)",
    "vmovupd (%rax),%zmm0",
    "vbroadcastsd (%rcx),%ymm2",
    "vpxor  %ymm1,%ymm1,%ymm1",
    "vxorpd %zmm0,%zmm0,%zmm0",
    "vmulsd %xmm1,%xmm2,%ymm3",
]

ALLOWED = [
    "vmulsd %xmm1,%xmm2,%xmm3",
    "mulsd  %xmm1,%xmm0",
    "vaddsd 0x8(%rdi),%xmm1,%xmm0",
    "addss  (%rax),%xmm0",
    "vfmadd231sd (%rdx),%xmm1,%xmm0",
    "vfmadd213sd %xmm2,%xmm1,%xmm0",
    "vfnmadd231ss %xmm2,%xmm1,%xmm0",
    "vsqrtsd %xmm1,%xmm1,%xmm0",
    "vcvtsi2sd %rax,%xmm1,%xmm0",
    "cvtsd2ss %xmm1,%xmm0",
    # zeroing idioms
    "vpxor  %xmm1,%xmm1,%xmm1",
    "pxor   %xmm0,%xmm0",
    "vxorpd %xmm0,%xmm0,%xmm0",
    "xorps  %xmm3,%xmm3",
    "vpxord %xmm17,%xmm17,%xmm17",
    # moves, including integers through xmm and AVX-512 mask spills
    "vmovq  %xmm0,%rax",
    "vmovq  %rdx,%xmm1",
    "movq   %xmm0,%rcx",
    "vmovd  %eax,%xmm0",
    "vmovsd (%rax,%rdx,8),%xmm0",
    "movsd  %xmm0,(%rdi)",
    "movapd %xmm1,%xmm0",
    "vmovapd %xmm1,%xmm0",
    "kmovq  %rax,%k1",
    "kmovq  %k1,%rax",
    # bitwise masks (fabs, negation) and comparisons are not arithmetic
    "andpd  0x0(%rip),%xmm0",
    "vucomisd %xmm1,%xmm0",
    "comisd %xmm1,%xmm0",
    # ordinary integer code
    "add    $0x8,%rax",
    "lea    0x0(,%rax,8),%rdx",
    "imul   %rsi,%rdx",
    "lock addq $0x1,(%rax)",
    "cs nopw 0x0(%rax,%rax,1)",
    "pause",
    "vzeroupper",
    "ret",
]


@pytest.mark.parametrize("line", PACKED)
def test_packed_arithmetic_is_found(line):
    assert is_packed_arithmetic(line), line


@pytest.mark.parametrize("line", ALLOWED)
def test_scalar_forms_zeroing_and_moves_are_allowed(line):
    assert not is_packed_arithmetic(line), line


def test_the_list_helper_keeps_exactly_the_packed_lines():
    assert packed_instructions(ALLOWED + PACKED[:3]) == PACKED[:3]


def test_zeroing_needs_one_register_repeated():
    assert is_zeroing_idiom("vpxor", "%xmm1,%xmm1,%xmm1")
    assert not is_zeroing_idiom("vpxor", "%xmm1,%xmm2,%xmm1")
    assert not is_zeroing_idiom("vpxor", "(%rax),%xmm1,%xmm1")
    assert not is_zeroing_idiom("vpaddd", "%xmm1,%xmm1,%xmm1")
    # a xor of different registers computes: vxorpd with a sign mask is arithmetic on bits,
    # but it is not packed floating-point arithmetic either
    assert not is_packed_arithmetic("vxorpd %xmm2,%xmm1,%xmm0")


def test_prefixes_and_comments_are_stripped():
    assert mnemonic_and_operands("data16 cs nopw 0x0(%rax,%rax,1)") == ("nopw", "0x0(%rax,%rax,1)")
    assert mnemonic_and_operands("vmovsd 0x10(%rip),%xmm0        # 2f30 <x>") == (
        "vmovsd", "0x10(%rip),%xmm0")
    assert mnemonic_and_operands("") == ("", "")
