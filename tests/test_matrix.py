"""Matrix family: products equal numpy, init writes exactly its values, bad input fails."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from memlab import _core
from conftest import experiment
from memlab import matrix as mx
from memlab.sweep import Sweep

from conftest import python_with_hidden_features
from disasm import function_instructions, packed_instructions

# Every test here runs code whose instructions depend on the -march level of the build.
pytestmark = pytest.mark.build

FAST = {"repeat": 1, "warmup": 0, "target_seconds": 0}
SIZES = (1, 2, 7, 64, 100, 129)
TILES = (1, 3, 8, 16, 33)


def _tolerance(n: int) -> float:
    # inputs are in [-1, 1): each element sums n products below 1 in magnitude
    return 1e-15 * 4 * max(n, 1) ** 1.5 + 1e-15


@functools.cache
def supported_isas() -> tuple[str, ...]:
    """The ISAs of tiled_simd this CPU runs, widest first (asked of the kernel, at first use)."""
    supported = []
    for isa in mx.ISAS[1:]:
        try:
            mx.multiply(2, "tiled_simd", isa=isa, **FAST)
        except ValueError as error:
            assert "not supported by this CPU" in str(error)
            continue
        supported.append(isa)
    return tuple(supported)


def require_isa(isa: str) -> None:
    if isa not in supported_isas():
        pytest.skip(f"this CPU does not support {isa} (supported: {', '.join(supported_isas())})")


def _product(n: int, variant: str, **kw) -> tuple[np.ndarray, np.ndarray, np.ndarray, object]:
    rng = np.random.default_rng(n)
    a = rng.uniform(-1, 1, (n, n))
    b = rng.uniform(-1, 1, (n, n))
    out = np.full((n, n), np.nan)
    m = mx.multiply(n, variant, a=a, b=b, out=out, **kw, **FAST)
    return a, b, out, m


# ---- correctness ---------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("variant", mx.VARIANTS)
def test_every_variant_equals_numpy(variant, n):
    a, b, out, m = _product(n, variant)
    np.testing.assert_allclose(out, a @ b, rtol=0, atol=_tolerance(n))
    assert m.median("max_abs_error") <= _tolerance(n)
    assert m.params["seed"] is None
    assert m.median("GFLOP_per_s") > 0
    assert m.median("seconds") > 0
    assert m.median("cpu_fraction") > 0
    assert m.median("GFLOP_per_cpu_s") == pytest.approx(
        m.median("GFLOP_per_s") / m.median("cpu_fraction"), rel=1e-9
    )


@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("variant", ["tiled", "tiled_sse2", "tiled_simd"])
def test_tiled_variants_equal_numpy_for_any_tile(variant, n, tile):
    a, b, out, m = _product(n, variant, tile=tile)
    np.testing.assert_allclose(out, a @ b, rtol=0, atol=_tolerance(n))
    assert m.params["tile"] == tile


@pytest.mark.parametrize("isa", mx.ISAS[1:])
@pytest.mark.parametrize("n,tile", [(7, 3), (100, 33), (129, 256), (64, 16)])
def test_every_supported_isa_equals_numpy(isa, n, tile):
    require_isa(isa)
    a, b, out, m = _product(n, "tiled_simd", tile=tile, isa=isa)
    np.testing.assert_allclose(out, a @ b, rtol=0, atol=_tolerance(n))
    bits = {"avx512": 512, "avx2": 256, "sse2": 128, "scalar": 64}[isa]
    assert m.median("simd_bits") == bits


def test_auto_isa_is_the_widest_supported_unless_it_executes_narrower():
    m = mx.multiply(16, "tiled_simd", **FAST)
    bits = {"avx512": 512, "avx2": 256, "sse2": 128, "scalar": 64}
    widest = supported_isas()[0]
    width = mx.vector_execution_bits()
    allowed = {bits[widest]}
    if width is not None and width < bits[widest] and len(supported_isas()) > 1:
        allowed.add(bits[supported_isas()[1]])  # the search measured the next narrower one too
    assert m.median("simd_bits") in allowed
    assert m.median("simd_bits") == bits[m.context["isa_used"]]
    assert m.context["block_choice"] in ("searched", "cached")


def test_unsupported_isa_is_a_value_error():
    unsupported = [isa for isa in mx.ISAS[1:] if isa not in supported_isas()]
    if not unsupported:
        pytest.skip("this CPU supports every ISA the kernel has (the refusal is shown with a hidden one)")
    with pytest.raises(ValueError, match=f"isa={unsupported[0]} is not supported"):
        mx.multiply(8, "tiled_simd", isa=unsupported[0], **FAST)


HIDE = {"avx512": "avx512f", "avx2": "avx2", "sse2": "sse2"}
NARROWER = {"avx512": 256, "avx2": 128, "sse2": 64}


@pytest.mark.parametrize("isa", ["avx512", "avx2", "sse2"])
def test_a_hidden_isa_is_refused_and_auto_takes_the_next_narrower(isa):
    # MEMLAB_HIDE_CPU_FEATURES: this host plays a CPU without the ISA (an AVX2
    # host on an AVX-512 one), whatever the host really has.
    require_isa(isa)
    script = (
        "from memlab import matrix as mx\n"
        "fast = dict(repeat=1, warmup=0, target_seconds=0)\n"
        f"try:\n    mx.multiply(8, 'tiled_simd', isa={isa!r}, **fast)\n"
        "except ValueError as error:\n    print('refused:', error)\n"
        "print('auto bits:', mx.multiply(16, 'tiled_simd', **fast).median('simd_bits'))\n"
    )
    out = python_with_hidden_features(script, HIDE[isa])
    assert f"refused: isa={isa} is not supported by this CPU" in out, out
    assert f"auto bits: {float(NARROWER[isa])}" in out, out
def _sse2_or_skip() -> None:
    try:
        mx.multiply(2, "tiled_sse2", **FAST)
    except ValueError as error:
        pytest.skip(f"this CPU runs no SSE2: {error}")


def _offset_matrix(n: int, offset_doubles: int, seed: int) -> np.ndarray:
    """A C-contiguous (n, n) float64 matrix starting offset_doubles after a 64-byte boundary."""
    buffer = np.empty(n * n + 16)
    skip = (-buffer.ctypes.data % 64) // 8 + offset_doubles
    m = buffer[skip:skip + n * n].reshape(n, n)
    m[:] = np.random.default_rng(seed).uniform(-1, 1, (n, n))
    return m


@pytest.mark.parametrize("n, offset, aligned", [(64, 0, 1), (64, 1, 0), (63, 0, 0), (100, 2, 1)])
def test_the_source_listing_uses_aligned_vectors_only_where_every_row_is_aligned(n, offset, aligned):
    _sse2_or_skip()
    a, b, out = _offset_matrix(n, offset, 1), _offset_matrix(n, offset, 2), _offset_matrix(n, offset, 3)
    m = mx.multiply(n, "tiled_sse2", tile=8, a=a, b=b, out=out, **FAST)
    assert m.median("aligned_vectors") == aligned
    assert m.median("simd_bits") == 128
    np.testing.assert_allclose(out, a @ b, rtol=0, atol=_tolerance(n))


def test_the_source_listing_is_refused_where_sse2_is_hidden():
    _sse2_or_skip()
    script = (
        "from memlab import matrix as mx\n"
        "try:\n    mx.multiply(8, 'tiled_sse2', repeat=1, warmup=0, target_seconds=0)\n"
        "except ValueError as error:\n    print('refused:', error)\n"
        "print('naive still runs:', mx.multiply(8, 'naive', repeat=1, warmup=0).median('max_abs_error') < 1e-12)\n"
    )
    out = python_with_hidden_features(script, "sse2")
    assert "refused: variant=tiled_sse2 needs SSE2" in out, out
    assert "naive still runs: True" in out, out


@pytest.mark.parametrize("function", ["multiply_tiled_sse2", "multiply_tiled_sse2_unaligned"])
def test_the_source_listing_is_16_byte_mul_and_add_only(function):
    instructions = function_instructions(_core.__file__, function)
    if instructions is None:
        pytest.skip(f"objdump is missing or {function} is not in the symbol table (stripped build)")
    packed = packed_instructions(instructions)
    mnemonics = {line.split()[0] for line in packed}
    # the listing's _mm_mul_pd and _mm_add_pd on xmm registers: no wider vectors, no fused multiply-add
    assert mnemonics & {"mulpd", "vmulpd"} and mnemonics & {"addpd", "vaddpd"}, packed
    assert not [line for line in packed if "ymm" in line or "zmm" in line], packed
    assert not [m for m in mnemonics if m.startswith("vfmadd")], packed
    assert any(line.startswith("prefetchnta") for line in instructions)


def test_seeded_inputs_are_reproducible_and_checked():
    first = np.empty((50, 50))
    second = np.empty((50, 50))
    m = mx.multiply(50, "transposed", seed=3, out=first, **FAST)
    mx.multiply(50, "naive", seed=3, out=second, **FAST)
    np.testing.assert_allclose(first, second, atol=1e-13)
    assert m.params["seed"] == 3
    assert m.median("max_abs_error") < 1e-13


def test_several_products_per_sample_stay_correct():
    out = np.empty((40, 40))
    m = mx.multiply(40, "tiled", out=out, repeat=2, warmup=1, target_seconds=0.02)
    assert m.median("multiplies") > 1
    assert m.median("max_abs_error") < 1e-13
    for sample in m.samples:
        assert sample["GFLOP_per_s"] == pytest.approx(2 * 40**3 / sample["seconds"] / 1e9, rel=1e-9)


def test_transposed_reports_the_transpose_and_its_temporary():
    m = mx.multiply(96, "transposed", **FAST)
    assert 0 < m.median("transpose_seconds") < m.median("seconds")
    assert m.median("temporary_bytes") == 96 * 96 * 8


@pytest.mark.parametrize("variant", ["naive", "tiled"])
def test_in_place_variants_allocate_nothing(variant):
    assert mx.multiply(64, variant, **FAST).median("temporary_bytes") == 0


# The largest register block side of any tiled_simd micro-kernel (AVX-512: 12 x 16).
MAX_REGISTER_BLOCK = 16


@pytest.mark.parametrize("n,tile", [(512, 64), (300, 100), (1000, 8)])
def test_simd_packing_buffers_stay_below_one_matrix(n, tile):
    # csrc/matrix.c packs at most one row panel of a (mc x kc, mc <= n) and one column
    # panel of b (kc x nc, nc <= n), each rounded up to a register block, kc = min(tile, n):
    # whatever the L2 size, never an N x N copy while kc stays below n / 2.
    m = mx.multiply(n, "tiled_simd", tile=tile, **FAST)
    depth = min(tile, n)
    rounded = n + MAX_REGISTER_BLOCK - 1  # n rounded up to a register block of any ISA
    bound = 2 * rounded * depth * 8
    assert 0 < m.median("temporary_bytes") <= bound
    assert bound < n * n * 8


# ---- what each variant is built as -----------------------------------------------


@pytest.mark.parametrize("variant", mx.C_VARIANTS)
def test_flags_are_recorded(variant):
    m = mx.multiply(8, variant, **FAST)
    flags = m.context["kernel_flags"]
    reference = variant != "tiled_simd"
    assert (mx.reference_flags() in flags) == reference
    assert m.median("autovectorize_disabled") == float(reference)
    assert m.median("loop_interchange_disabled") == float(reference)
    assert m.to_row()["context_kernel_flags"] == flags


def test_reference_flags_name_what_the_compiler_used():
    flags = mx.reference_flags()
    compiler = _core.build_info()["compiler_family"]
    if compiler == "clang":
        assert flags == "clang loop pragmas vectorize(disable) interleave(disable) unroll(disable)"
    else:
        assert compiler == "gcc"
        for flag in ("-fno-tree-vectorize", "-fno-tree-slp-vectorize", "-fno-loop-interchange"):
            assert flag in flags.split()
    assert _core.families()["matrix_init"]["description"].endswith(flags)


@pytest.mark.parametrize(
    "function", ["multiply_naive", "multiply_transposed", "multiply_tiled", "transpose", "init_normal"]
)
def test_reference_kernels_hold_no_packed_arithmetic(function):
    instructions = function_instructions(_core.__file__, function)
    if instructions is None:
        pytest.skip(f"objdump is missing or {function} is not in the symbol table (stripped build)")
    assert instructions, f"no disassembly for {function}"
    packed = packed_instructions(instructions)
    assert not packed, f"{function} contains packed arithmetic: {packed[:5]}"


def test_the_simd_kernel_does_hold_packed_arithmetic():
    # the classifier sees vector code where there is some (tiled_simd's micro-kernels)
    names = {"sse2": "kernel_sse2_6x4", "avx2": "kernel_avx2_6x8", "avx512": "kernel_avx512_12x16"}
    isa = next((isa for isa in supported_isas() if isa in names), None)
    if isa is None:
        pytest.skip("this CPU runs no vector ISA of tiled_simd")
    instructions = function_instructions(_core.__file__, names[isa])
    if instructions is None:
        pytest.skip(f"objdump is missing or {names[isa]} is not in the symbol table")
    assert packed_instructions(instructions)


@pytest.mark.parametrize("isa", ["sse2", "avx2"])
def test_each_narrow_path_is_built_for_its_own_isa(isa):
    # whatever -march the core was built with, the SSE2 path multiplies and adds 16-byte
    # vectors (no VEX, no FMA) and the AVX2 path keeps to 16 ymm registers (no EVEX)
    for block in mx.REGISTER_BLOCKS[isa]:
        name = f"kernel_{isa}_{block}"
        instructions = function_instructions(_core.__file__, name)
        if instructions is None:
            pytest.skip(f"objdump is missing or {name} is not in the symbol table")
        packed = packed_instructions(instructions)
        assert packed, name
        wide = [line for line in instructions if "zmm" in line or any(
            f"mm{r}" in line for r in range(16, 32))]
        assert not wide, (name, wide[:3])
        if isa == "sse2":
            assert not [line for line in instructions if "ymm" in line or line.startswith("v")], name
        else:
            assert any(line.startswith("vfmadd") for line in instructions), name


# ---- BLAS --------------------------------------------------------------------------


def test_blas_runs_single_threaded_and_restores():
    m = mx.multiply(64, "blas", **FAST)
    method = m.context["blas_thread_limit"]
    if method == "none":
        pytest.skip("this BLAS cannot be limited from inside the process")
    assert m.median("blas_threads") == 1
    with mx.single_thread_blas() as (_, threads):
        assert threads == 1


# ---- init -----------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 64, 100])
@pytest.mark.parametrize("stores", mx.STORES)
@pytest.mark.parametrize("order", mx.ORDERS)
def test_init_writes_exactly_the_expected_values(order, stores, n):
    out = np.zeros((n, n), dtype=np.int32)
    m = mx.init(n, order, stores, out=out, **FAST)
    np.testing.assert_array_equal(out, mx.expected_init(n))
    assert out[n - 1, n - 1] == n * n - 1
    assert m.median("wrong_elements") == 0
    assert m.median("GB_per_s") > 0
    assert m.median("cpu_fraction") > 0


def test_expected_init_wraps_to_32_bits():
    rows = mx.expected_init(70000, slice(61356, 61357))
    # 61356 * 70000 = 4294920000, so the row crosses 2**32 at column 47296
    assert rows[0, 47295] == np.int32(-1)
    assert rows[0, 47296] == 0


def test_init_bytes_are_n_squared_ints():
    m = mx.init(256, "row", "normal", **FAST)
    passes = m.median("passes")
    moved = m.median("GB_per_s") * m.median("elapsed_ns")
    assert moved == pytest.approx(256 * 256 * 4 * passes, rel=1e-9)


@pytest.mark.parametrize(
    "out,match",
    [
        (np.zeros((8, 8), dtype=np.int64), "int32"),
        (np.zeros((8, 9), dtype=np.int32), "int32"),
        (np.zeros((8, 8), dtype=np.int32).T.copy(order="F"), "int32"),
    ],
)
def test_init_rejects_bad_output(out, match):
    with pytest.raises(ValueError, match=match):
        mx.init(8, out=out, **FAST)


def test_init_rejects_read_only_output():
    out = np.zeros((8, 8), dtype=np.int32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        mx.init(8, out=out, **FAST)


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"n": 0}, "n=0 is below the minimum 1"),
        ({"n": -5}, "n=-5 is below the minimum 1"),
        ({"order": "diagonal"}, "order='diagonal' is not one of"),
        ({"stores": "uncached"}, "stores='uncached' is not one of"),
    ],
)
def test_init_bad_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        mx.init(**{"n": 8, **kw}, **FAST)


# ---- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"n": 0}, "n=0 is below the minimum 1"),
        ({"n": -1}, "n=-1 is below the minimum 1"),
        ({"tile": 0}, "tile=0 is below the minimum 1"),
        ({"tile": -8}, "tile=-8 is below the minimum 1"),
        ({"variant": "strassen"}, "variant='strassen' is not one of"),
        ({"isa": "neon"}, "isa='neon' is not one of"),
        ({"n": 2.5}, "n=2.5 must be an integer"),
    ],
)
def test_bad_parameters_name_themselves(kw, match):
    with pytest.raises(ValueError, match=match):
        mx.multiply(**{"n": 8, "variant": "tiled", **kw}, **FAST)


def _square(n=8, dtype=np.float64):
    return np.ones((n, n), dtype=dtype)


@pytest.mark.parametrize(
    "a,b,match",
    [
        (_square(dtype=np.float32), _square(), "a has dtype float32; float64 is required"),
        (_square(), _square(dtype=np.int64), "b has dtype int64; float64 is required"),
        (np.ones((8, 9)), np.ones((8, 9)), r"a has shape \(8, 9\); a square"),
        (np.ones(64), _square(), r"a has shape \(64,\); a square"),
        (_square(7), _square(7), r"a has shape \(7, 7\) but n=8"),
        (_square(), _square(9), r"b has shape \(9, 9\) but n=8"),
        (np.asfortranarray(np.arange(64.0).reshape(8, 8)), _square(), "a is not C-contiguous"),
        (_square(), np.ones((8, 16))[:, ::2], "b is not C-contiguous"),
        ([[1.0] * 8] * 8, _square(), "a must be a numpy.ndarray"),
        (_square(), None, "a and b must be given together"),
    ],
)
def test_bad_inputs_are_value_errors(a, b, match):
    with pytest.raises(ValueError, match=match):
        mx.multiply(8, "naive", a=a, b=b, **FAST)


def test_output_must_be_its_own_writable_matrix():
    a, b = _square(), _square()
    with pytest.raises(ValueError, match="out overlaps a"):
        mx.multiply(8, "naive", a=a, b=b, out=a, **FAST)
    frozen = _square()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="out must be writable"):
        mx.multiply(8, "naive", a=a, b=b, out=frozen, **FAST)
    with pytest.raises(ValueError, match="out has dtype float32"):
        mx.multiply(8, "naive", out=_square(dtype=np.float32), **FAST)


@pytest.mark.parametrize("variant", mx.VARIANTS)
def test_huge_n_is_a_memory_error_before_allocating(variant):
    # 3 x (2**20)^2 doubles = 24 TiB: refused before numpy or C allocate
    with pytest.raises(MemoryError, match=r"n=1048576: .* need \d+ bytes"):
        mx.multiply(mx.MAX_N, variant, **FAST)
    with pytest.raises(MemoryError, match="int32 matrix need"):
        mx.init(mx.MAX_N, **FAST)


def test_c_boundary_rejects_wrong_buffers():
    good = np.zeros((4, 4))
    base = {"a": good, "b": good, "c": np.zeros((4, 4)), "n": 4, "variant": "naive", "tile": 1,
            "isa": "auto", "block_rows": 0, "block_cols": 0, "register_block": "auto"}
    cases = [
        ({"a": np.zeros((4, 4), dtype=np.int32)}, "a has items of 4 bytes"),
        ({"b": np.zeros((3, 3))}, "b holds 72 bytes; n=4 needs exactly 128"),
        ({"c": np.zeros((4, 4)).T[:, ::2]}, "c must be a C-contiguous"),
        ({"tile": 0}, "tile"),
    ]
    for change, match in cases:
        with pytest.raises(ValueError, match=match):
            with _core.Kernel("matrix", {**base, **change}):
                pass
    frozen = np.zeros((4, 4))
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="c must be a C-contiguous, writable"):
        with _core.Kernel("matrix", {**base, "c": frozen}):
            pass
    with pytest.raises(ValueError, match="matrix holds 36 bytes; n=4 needs exactly 64"):
        with _core.Kernel("matrix_init", {"matrix": np.zeros((3, 3), dtype=np.int32), "n": 4,
                                          "order": "row", "stores": "normal"}):
            pass


# ---- tables and sweeps ------------------------------------------------------------------------


def test_table_6_2_quick_has_every_variant_relative_to_naive():
    ds = experiment("table6_2").table(quick=True)
    runs = len(ds.rows) // len(mx.VARIANTS)
    assert runs >= 1 and sorted(ds.column("variant")) == sorted(list(mx.VARIANTS) * runs)  # every variant, every run
    assert all(row["percent_of_naive"] == pytest.approx(100.0) for row in ds.rows if row["variant"] == "naive")
    by_variant = {row["variant"]: row for row in ds.rows}
    assert by_variant["naive"]["percent_of_naive"] == pytest.approx(100.0)
    for row in ds.rows:
        assert row["max_abs_error"] < 1e-12
        assert math.isfinite(row["percent_of_naive"]) and row["percent_of_naive"] > 0
    assert by_variant["tiled"]["tile"] == mx.default_tile("tiled")
    assert by_variant["tiled_sse2"]["tile"] == mx.default_tile("tiled_sse2")


def test_table_6_1_quick_has_both_orders_and_stores(tmp_path):
    ds = experiment("table6_1").table(quick=True, out=str(tmp_path / "t61.csv"))
    assert {(r["order"], r["stores"]) for r in ds.rows} == {
        (o, s) for o in mx.ORDERS for s in mx.STORES
    }
    assert all(r["wrong_elements"] == 0 and r["GB_per_s"] > 0 for r in ds.rows)
    assert (tmp_path / "t61.csv").exists()


@pytest.mark.parametrize("family", [mx.FAMILY, mx.INIT_FAMILY])
def test_named_sweeps_exist(family):
    for name in family.sweeps:
        sweep = family.sweep(name)
        assert isinstance(sweep, Sweep) and len(sweep) > 0
        for point in sweep.points:
            family.params(point)


def test_default_tile_is_one_cache_line_of_doubles():
    assert mx.MultiplyParams(variant="tiled").tile == mx.cache_line_bytes() // 8
    assert mx.MultiplyParams(variant="tiled_simd").tile is None  # chosen per machine
    assert mx.MultiplyParams(variant="naive").tile is None


# ---- tiled_simd's blocks -------------------------------------------------------------------


@pytest.mark.parametrize("isa", mx.ISAS[1:])
@pytest.mark.parametrize("n,tile,rows,cols", [(7, 3, 1, 1), (100, 33, 13, 37), (129, 64, 50, 200), (200, 512, 24, 48)])
def test_every_register_block_equals_numpy(isa, n, tile, rows, cols):
    require_isa(isa)
    for block in mx.REGISTER_BLOCKS[isa]:
        a, b, out, m = _product(n, "tiled_simd", tile=tile, isa=isa, register_block=block,
                                block_rows=rows, block_cols=cols)
        np.testing.assert_allclose(out, a @ b, rtol=0, atol=_tolerance(n))
        mr, nr = (int(side) for side in block.split("x"))
        assert (m.median("register_block_rows"), m.median("register_block_cols")) == (mr, nr)
        assert m.median("block_depth") == min(tile, n)
        assert m.median("block_rows") == min(-(-rows // mr) * mr, -(-n // mr) * mr)
        assert m.median("block_cols") == min(-(-cols // nr) * nr, -(-n // nr) * nr)
        assert m.context["block_choice"] == "given"
        assert m.context["register_block"] == block


def test_a_register_block_of_another_isa_is_refused():
    require_isa("avx2")
    with pytest.raises(ValueError, match=r"register_block='12x16' is not one of '6x8', '4x12'"):
        mx.multiply(8, "tiled_simd", isa="avx2", register_block="12x16", **FAST)
    good = np.zeros((4, 4))
    config = {"a": good, "b": good, "c": np.zeros((4, 4)), "n": 4, "variant": "tiled_simd", "tile": 4,
              "isa": "avx2", "block_rows": 0, "block_cols": 0, "register_block": "12x16"}
    with pytest.raises(ValueError, match=r"register_block=12x16 is not a tile of isa=avx2 \(its tiles: 6x8, 4x12\)"):
        with _core.Kernel("matrix", config):
            pass


@pytest.mark.parametrize("kw,match", [({"block_rows": 0}, "block_rows=0 is below the minimum 1"),
                                      ({"block_cols": -3}, "block_cols=-3 is below the minimum 1"),
                                      ({"blocks": "guess"}, "blocks='guess' is not one of"),
                                      ({"register_block": "3x3"}, "register_block='3x3' is not one of")])
def test_bad_block_parameters_name_themselves(kw, match):
    with pytest.raises(ValueError, match=match):
        mx.multiply(8, "tiled_simd", **kw, **FAST)


def test_model_blocks_follow_the_cache_sizes():
    small = mx.model_blocks("avx2", "6x8", caches={"L1d": 32768, "L2": 256 << 10, "L3": 8 << 20}, l3_sharing=4)
    large = mx.model_blocks("avx2", "6x8", caches={"L1d": 49152, "L2": 2 << 20, "L3": 64 << 20}, l3_sharing=1)
    # one 6-row panel of a fills two thirds of L1d, the row block a quarter of L2,
    # the column block half of this CPU's share of L3
    assert small["block_depth"] == 448 and large["block_depth"] == 640
    assert small["block_rows"] == 256 * 1024 // 4 // (448 * 8) // 6 * 6
    assert large["block_rows"] == 2 * 2**20 // 4 // (640 * 8) // 6 * 6
    assert small["block_cols"] == (8 << 20) // 4 // 2 // (448 * 8) // 8 * 8
    assert large["block_cols"] == (8 << 20) // (640 * 8) // 8 * 8  # at most 8 MiB of packed b
    assert mx.model_blocks("avx512", caches={})["register_block"] == mx.REGISTER_BLOCKS["avx512"][0]


def test_vector_execution_bits_from_cpuinfo(tmp_path):
    (tmp_path / "proc").mkdir()
    cpuinfo = tmp_path / "proc" / "cpuinfo"

    def width(text):
        cpuinfo.write_text(text)
        return mx.vector_execution_bits(mx.cpu_vector_facts(str(tmp_path)))

    zen4 = "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nflags\t\t: sse2 fma avx2 avx512f\n"
    cpuinfo.write_text(zen4)
    assert mx.cpu_vector_facts(str(tmp_path)) == {"vendor": "AuthenticAMD", "family": 25, "model": 17,
                                                  "flags": ["sse2", "avx2", "fma", "avx512f"]}
    assert width(zen4) == 256  # the machine model: Zen 4 runs 512-bit FMAs as two halves
    assert width(zen4.replace("25", "26")) == 512  # family 26 model 17: Zen 5, full width
    assert width(zen4.replace("AuthenticAMD", "HygonGenuine")) == 512  # unknown core: what the ISA offers
    assert width("flags : sse2 avx2 fma\n") == 256
    assert width("flags : sse2\n") == 128
    assert width("") is None


def test_the_search_measures_every_candidate_and_returns_one(monkeypatch):
    isa = supported_isas()[0]
    candidates = mx.search_candidates([isa])
    assert {c["register_block"] for c in candidates} == set(mx.REGISTER_BLOCKS[isa])
    best = mx.search_blocks([isa], n=48, rounds=2, seconds=0)
    chosen = {key: best[key] for key in candidates[0]}
    assert chosen in candidates
    assert best["candidates"] == len(candidates) and best["search_n"] == 48 and best["rounds"] == 2
    assert best["GFLOP_per_cpu_s"] >= best["runner_up"]["GFLOP_per_cpu_s"] > 0


def test_tuned_blocks_are_cached_per_machine(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMLAB_CACHE_DIR", str(tmp_path))
    searches = []

    def search(isas, **_):
        searches.append(list(isas))
        return {**mx.model_blocks(isas[0], depth=40), "GFLOP_per_cpu_s": 1.0}

    monkeypatch.setattr(mx, "search_blocks", search)
    first = mx.tuned_blocks("scalar")
    assert first["choice"] == "searched" and searches == [["scalar"]]
    again = mx.tuned_blocks("scalar")
    assert again["choice"] == "cached" and again["block_depth"] == 40 and len(searches) == 1
    assert (tmp_path / mx.BLOCKS_CACHE_FILE).exists()
    m = mx.multiply(30, "tiled_simd", isa="scalar", **FAST)
    assert m.context["block_choice"] == "cached" and m.median("block_depth") == 30  # min(40, n)
    # another machine (another fingerprint) searches again
    monkeypatch.setattr(mx, "_search_key", lambda isas: "another machine " + "+".join(isas))
    assert mx.tuned_blocks("scalar")["choice"] == "searched" and len(searches) == 2
    monkeypatch.setenv("MEMLAB_CACHE_DIR", str(tmp_path / "empty"))
    assert mx.tuned_blocks("scalar", search=False)["choice"] == "model"


def test_the_cache_directory_follows_the_environment(tmp_path):
    assert mx.cache_directory({"MEMLAB_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert mx.cache_directory({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "memlab"
    assert str(mx.cache_directory({})).endswith("/.cache/memlab")


def test_given_blocks_with_the_model_for_the_rest():
    isa = supported_isas()[0]
    m = mx.multiply(64, "tiled_simd", isa=isa, tile=16, blocks="model", **FAST)
    model = mx.model_blocks(isa, depth=16)
    assert m.median("block_depth") == 16
    assert m.context["block_choice"] == "model (tile given)"
    assert m.median("block_rows") == min(model["block_rows"], -(-64 // m.median("register_block_rows")) * m.median("register_block_rows"))


def test_blas_rows_name_the_blas_and_its_environment():
    m = mx.multiply(32, "blas", **FAST)
    facts = mx.blas_facts()
    for key in ("blas_library", "blas_architecture", "openblas_coretype", "openblas_l2_size"):
        assert m.context[key] == facts[key]
    import os
    assert m.context["openblas_coretype"] == os.environ.get("OPENBLAS_CORETYPE", "")


def test_the_ratio_table_pairs_each_width_with_blas():
    script = experiment("matmul_tiles")
    isas = [isa for isa in supported_isas() if isa != "scalar"][:2] or ["scalar"]
    ds = script.ratio(sizes=(48,), rounds=2, isas=isas, target_seconds=0)
    assert [(r["round"], r["isa"]) for r in ds.rows] == [(k, isa) for k in range(2) for isa in isas]
    for row in ds.rows:
        assert row["max_abs_error"] <= _tolerance(48)
        assert row["ratio"] == pytest.approx(row["simd_GFLOP_per_s"] / row["blas_GFLOP_per_s"])
    text = script.format_ratio(ds, "1.0 1.0 1.0", "2.0 2.0 2.0")
    assert "load average before 1.0 1.0 1.0, after 2.0 2.0 2.0; 2 interleaved rounds" in text
    assert "OPENBLAS_CORETYPE=" in text and "family" in text
    assert len(text.splitlines()) == 4 + len(isas)
