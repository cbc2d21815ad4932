/* Matrix multiplication (Drepper, sections 6.2.1 and 9.1, table 6.2) and
 * matrix initialisation with normal and non-temporal stores (table 6.1).
 *
 * Two families: "matrix" multiplies two N x N float64 matrices handed in as
 * buffers into a third, "matrix_init" writes an N x N int32 matrix row- or
 * column-wise.  The reference kernels (naive, transposed, tiled, init with
 * normal stores) are built with auto-vectorisation and loop interchange off,
 * so that each runs the algorithm it is named after; tiled_sse2 is the
 * source's own vectorised sub-matrix listing (section 9.1: 16-byte SSE2
 * vectors, mulpd + addpd); tiled_simd is what memlab adds beyond it, written
 * with explicit intrinsics for the widest ISA the CPU has. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memlab.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MATRIX_X86 1
#else
#define MATRIX_X86 0
#endif

/* How the reference kernels are kept scalar and in their written loop
 * order.  gcc: per-function optimize attributes; clang has no such
 * attribute, so every loop of those kernels carries a loop pragma.  The
 * string is reported with every sample (memlab/matrix.py reads it from the
 * family description). */
#if defined(__clang__)
#define MATRIX_REFERENCE __attribute__((noinline))
#define MATRIX_SCALAR_LOOP                                                          \
    _Pragma("clang loop vectorize(disable) interleave(disable) unroll(disable)")
#define MATRIX_REFERENCE_FLAGS                                                      \
    "clang loop pragmas vectorize(disable) interleave(disable) unroll(disable)"
#else
#define MATRIX_REFERENCE                                                            \
    __attribute__((noinline, optimize("no-tree-vectorize", "no-tree-loop-vectorize", \
                                      "no-tree-slp-vectorize", "no-loop-interchange", \
                                      "no-loop-unroll-and-jam",                       \
                                      "no-tree-loop-distribution",                    \
                                      "no-tree-loop-distribute-patterns")))
#define MATRIX_SCALAR_LOOP
#define MATRIX_REFERENCE_FLAGS                                                      \
    "-fno-tree-vectorize -fno-tree-loop-vectorize -fno-tree-slp-vectorize "         \
    "-fno-loop-interchange -fno-loop-unroll-and-jam -fno-tree-loop-distribution "   \
    "-fno-tree-loop-distribute-patterns"
#endif

#define MATRIX_MAX_N (1 << 20)
/* Work between two interrupt checks: ~2^24 flops is at most ~0.1 s for the
 * slowest kernel (naive at 0.3 GFLOP/s would take 56 ms). */
#define MATRIX_CHUNK_FLOPS (1.0 * (1 << 24))
#define INIT_CHUNK_ELEMENTS ((int64_t)1 << 22)
/* Packed B panel of tiled_simd when block_cols is 0: at most this many doubles (8 MiB). */
#define PACK_B_MAX_DOUBLES ((int64_t)1 << 20)

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Wall time (the measurement) and this thread's CPU time (how much of it the
 * kernel actually ran: on a shared machine the two differ) of timed chunks. */
typedef struct stopwatch {
    uint64_t wall_ns, cpu_ns;
    uint64_t wall_start, cpu_start;
} stopwatch;

static void stopwatch_start(stopwatch *watch)
{
    watch->cpu_start = ml_thread_cpu_ns();
    watch->wall_start = ml_now_ns();
}

/* Adds the chunk to the totals and returns its wall time. */
static uint64_t stopwatch_stop(stopwatch *watch)
{
    uint64_t wall = ml_now_ns() - watch->wall_start;
    watch->cpu_ns += ml_thread_cpu_ns() - watch->cpu_start;
    watch->wall_ns += wall;
    return wall;
}

/* ---- reference kernels ------------------------------------------------- */

/* i-j-k, as printed in section 6.2.1: rows [i0, i1) of c += a * b. */
MATRIX_REFERENCE static void multiply_naive(const double *restrict a, const double *restrict b,
                                            double *restrict c, int64_t n, int64_t i0,
                                            int64_t i1)
{
    MATRIX_SCALAR_LOOP
    for (int64_t i = i0; i < i1; ++i)
        MATRIX_SCALAR_LOOP
        for (int64_t j = 0; j < n; ++j) {
            double sum = c[i * n + j];
            MATRIX_SCALAR_LOOP
            for (int64_t k = 0; k < n; ++k)
                sum += a[i * n + k] * b[k * n + j];
            c[i * n + j] = sum;
        }
}

MATRIX_REFERENCE static void transpose(const double *restrict b, double *restrict t, int64_t n)
{
    MATRIX_SCALAR_LOOP
    for (int64_t i = 0; i < n; ++i)
        MATRIX_SCALAR_LOOP
        for (int64_t j = 0; j < n; ++j)
            t[i * n + j] = b[j * n + i];
}

/* i-j-k over the transposed second matrix: both walks are sequential. */
MATRIX_REFERENCE static void multiply_transposed(const double *restrict a,
                                                 const double *restrict t, double *restrict c,
                                                 int64_t n, int64_t i0, int64_t i1)
{
    MATRIX_SCALAR_LOOP
    for (int64_t i = i0; i < i1; ++i)
        MATRIX_SCALAR_LOOP
        for (int64_t j = 0; j < n; ++j) {
            double sum = c[i * n + j];
            MATRIX_SCALAR_LOOP
            for (int64_t k = 0; k < n; ++k)
                sum += a[i * n + k] * t[j * n + k];
            c[i * n + j] = sum;
        }
}

/* Sub-matrix blocking of section 6.2.1 with tile sm, for the row blocks
 * starting in [i0, i1) (i0 a multiple of sm); edge blocks are cut short. */
MATRIX_REFERENCE static void multiply_tiled(const double *restrict a, const double *restrict b,
                                            double *restrict c, int64_t n, int64_t sm,
                                            int64_t i0, int64_t i1)
{
    MATRIX_SCALAR_LOOP
    for (int64_t i = i0; i < i1; i += sm) {
        int64_t rows = min64(sm, n - i);
        MATRIX_SCALAR_LOOP
        for (int64_t j = 0; j < n; j += sm) {
            int64_t cols = min64(sm, n - j);
            MATRIX_SCALAR_LOOP
            for (int64_t k = 0; k < n; k += sm) {
                int64_t depth = min64(sm, n - k);
                double *restrict rres = &c[i * n + j];
                const double *restrict rmul1 = &a[i * n + k];
                MATRIX_SCALAR_LOOP
                for (int64_t i2 = 0; i2 < rows; ++i2, rres += n, rmul1 += n) {
                    const double *restrict rmul2 = &b[k * n + j];
                    MATRIX_SCALAR_LOOP
                    for (int64_t k2 = 0; k2 < depth; ++k2, rmul2 += n)
                        MATRIX_SCALAR_LOOP
                        for (int64_t j2 = 0; j2 < cols; ++j2)
                            rres[j2] += rmul1[k2] * rmul2[j2];
                }
            }
        }
    }
}

/* ---- tiled_sse2: the source's SSE2 listing (section 9.1) -----------------
 * The loops of the tiled variant; the innermost one works on two doubles at a
 * time: rmul1[k2] is loaded once per k2 and duplicated into both halves of a
 * 16-byte vector (_mm_load_sd + _mm_unpacklo_pd), each pair of rres gets
 * m1d * rmul2[j2..j2+1] added (mulpd, addpd), and the next cache line of
 * rmul1 is prefetched non-temporally for every row.  The source's matrices
 * were aligned and N even, so it used aligned loads and stores; here those
 * are used when a, b, c and every row are 16-byte aligned (else the
 * unaligned forms), and an odd column left at a tile's edge is done alone.
 * Built without auto-vectorisation and without contracting mul + add into
 * an FMA, so it stays the source's instructions at 16 bytes. */
#if MATRIX_X86
#if defined(__clang__)
#define MATRIX_SSE2_LISTING __attribute__((noinline, target("sse2")))
#define MATRIX_SSE2_NO_CONTRACT _Pragma("clang fp contract(off)")
#else
#define MATRIX_SSE2_LISTING                                                          \
    __attribute__((noinline, target("sse2"),                                       \
                   optimize("no-tree-vectorize", "no-tree-loop-vectorize",          \
                            "no-tree-slp-vectorize", "no-loop-interchange",         \
                            "no-loop-unroll-and-jam", "no-tree-loop-distribution",  \
                            "no-tree-loop-distribute-patterns", "fp-contract=off")))
#define MATRIX_SSE2_NO_CONTRACT
#endif

#define SSE2_LISTING_BODY(LOAD, STORE)                                                         \
    MATRIX_SCALAR_LOOP                                                                       \
    for (int64_t i = i0; i < i1; i += sm) {                                                  \
        int64_t rows = min64(sm, n - i);                                                     \
        MATRIX_SCALAR_LOOP                                                                   \
        for (int64_t j = 0; j < n; j += sm) {                                                \
            int64_t cols = min64(sm, n - j);                                                 \
            MATRIX_SCALAR_LOOP                                                               \
            for (int64_t k = 0; k < n; k += sm) {                                            \
                int64_t depth = min64(sm, n - k);                                            \
                double *restrict rres = &c[i * n + j];                                       \
                const double *restrict rmul1 = &a[i * n + k];                                \
                MATRIX_SCALAR_LOOP                                                           \
                for (int64_t i2 = 0; i2 < rows; ++i2, rres += n, rmul1 += n) {               \
                    if ((i + i2) * n + k + 8 < n * n) /* the next line, inside a */          \
                        _mm_prefetch((const char *)(rmul1 + 8), _MM_HINT_NTA);               \
                    const double *restrict rmul2 = &b[k * n + j];                            \
                    MATRIX_SCALAR_LOOP                                                       \
                    for (int64_t k2 = 0; k2 < depth; ++k2, rmul2 += n) {                     \
                        __m128d m1d = _mm_load_sd(&rmul1[k2]);                               \
                        m1d = _mm_unpacklo_pd(m1d, m1d);                                     \
                        int64_t j2 = 0;                                                      \
                        MATRIX_SCALAR_LOOP                                                   \
                        for (; j2 + 2 <= cols; j2 += 2) {                                    \
                            __m128d m2 = LOAD(&rmul2[j2]);                                   \
                            __m128d r2 = LOAD(&rres[j2]);                                    \
                            STORE(&rres[j2], _mm_add_pd(_mm_mul_pd(m2, m1d), r2));           \
                        }                                                                    \
                        if (j2 < cols)                                                       \
                            rres[j2] += rmul1[k2] * rmul2[j2];                               \
                    }                                                                        \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }

MATRIX_SSE2_LISTING static void multiply_tiled_sse2(const double *restrict a, const double *restrict b,
                                                    double *restrict c, int64_t n, int64_t sm, int64_t i0,
                                                    int64_t i1)
{
    MATRIX_SSE2_NO_CONTRACT
    SSE2_LISTING_BODY(_mm_load_pd, _mm_store_pd)
}

MATRIX_SSE2_LISTING static void multiply_tiled_sse2_unaligned(const double *restrict a,
                                                              const double *restrict b, double *restrict c,
                                                              int64_t n, int64_t sm, int64_t i0, int64_t i1)
{
    MATRIX_SSE2_NO_CONTRACT
    SSE2_LISTING_BODY(_mm_loadu_pd, _mm_storeu_pd)
}

/* Whether the aligned listing may run: every row of a, b and c, and every
 * tile's first column, starts on a 16-byte boundary. */
static int sse2_aligned(const void *a, const void *b, const void *c, int64_t n, int64_t sm)
{
    uintptr_t bases = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c;
    return bases % 16 == 0 && n % 2 == 0 && sm % 2 == 0;
}
#endif

/* ---- tiled_simd: packed panels and register-blocked micro-kernels -------
 * C (MR x NR) = or += Ap (kc x MR, k-major) * Bp (kc x NR, k-major).  Panels
 * are zero-padded, so a kernel always computes a full tile; at the matrix
 * edge only the rows x cols part that exists is written to C.  The first
 * depth panel stores its tile (C = AB), later ones add to it (C += AB).
 *
 * Each ISA's packing and micro-kernels are written once with the compilers'
 * vector extensions and built for exactly that ISA with a target attribute
 * that also switches the wider ones off (SSE2: no SSE3 and above; AVX2: no
 * AVX-512), so that a core built with -march=native still runs the path it
 * names: under MEMLAB_HIDE_CPU_FEATURES the AVX2 path is what an AVX2 CPU
 * runs (16 ymm registers, no EVEX), and the SSE2 path multiplies and adds
 * (no FMA, no VEX). */

typedef void (*micro_kernel)(int64_t kc, const double *restrict ap, const double *restrict bp,
                             double *restrict c, int64_t ldc, int rows, int cols, int accumulate);
typedef void (*pack_panels)(const double *restrict m, int64_t n, int64_t row0, int64_t col0,
                            int64_t extent, int64_t depth, int width, double *restrict out);

/* Ap: rows [i, i+mc) x depth [p, p+kc) of a, as mr-row panels (mc a multiple
 * of mr; rows past n are zeros).  Each row of a is read sequentially. */
#define DEFINE_PACK_A(NAME, TARGET)                                                          \
    TARGET static void NAME(const double *restrict a, int64_t n, int64_t i, int64_t p,      \
                            int64_t mc, int64_t kc, int mr, double *restrict ap)            \
    {                                                                                        \
        for (int64_t panel = 0; panel < mc; panel += mr, ap += kc * mr) {                    \
            int64_t rows = min64(mr, n - (i + panel));                                       \
            for (int64_t r = 0; r < rows; ++r) {                                             \
                const double *restrict row = a + (i + panel + r) * n + p;                    \
                for (int64_t k = 0; k < kc; ++k)                                             \
                    ap[k * mr + r] = row[k];                                                 \
            }                                                                                \
            for (int64_t r = rows; r < mr; ++r)                                              \
                for (int64_t k = 0; k < kc; ++k)                                             \
                    ap[k * mr + r] = 0.0;                                                    \
        }                                                                                    \
    }

/* Bp: depth [p, p+kc) x columns [j, j+nc) of b, as nr-column panels (nc a
 * multiple of nr; columns past n are zeros). */
#define DEFINE_PACK_B(NAME, TARGET)                                                          \
    TARGET static void NAME(const double *restrict b, int64_t n, int64_t p, int64_t j,      \
                            int64_t nc, int64_t kc, int nr, double *restrict bp)            \
    {                                                                                        \
        for (int64_t panel = 0; panel < nc; panel += nr) {                                   \
            int64_t cols = min64(nr, n - (j + panel));                                       \
            for (int64_t k = 0; k < kc; ++k, bp += nr) {                                     \
                const double *restrict row = b + (p + k) * n + j + panel;                    \
                for (int64_t q = 0; q < cols; ++q)                                           \
                    bp[q] = row[q];                                                          \
                for (int64_t q = cols; q < nr; ++q)                                          \
                    bp[q] = 0.0;                                                             \
            }                                                                                \
        }                                                                                    \
    }

#define MATRIX_STR(x) #x
#define MATRIX_UNROLL(n) _Pragma(MATRIX_STR(GCC unroll n))

/* An MR x (NV vectors of LANES doubles) micro-kernel: MR * NV accumulators.
 * VT is the aligned vector type (the packed panels are aligned), VTU the
 * same vector at 8-byte alignment (rows of C), SPLAT(x) x in every lane. */
#define DEFINE_MICRO_KERNEL(NAME, TARGET, VT, VTU, SPLAT, LANES, MR, NV)                          \
    TARGET static void NAME(int64_t kc, const double *restrict ap, const double *restrict bp, \
                            double *restrict c, int64_t ldc, int rows, int cols,            \
                            int accumulate)                                                 \
    {                                                                                        \
        VT acc[MR][NV];                                                                      \
        MATRIX_UNROLL(MR)                                                                    \
        for (int r = 0; r < MR; ++r)                                                         \
            MATRIX_UNROLL(NV)                                                                \
            for (int v = 0; v < NV; ++v)                                                     \
                acc[r][v] = (VT){0};                                                         \
        /* the C tile is touched once per panel: ask for it while the k loop runs */         \
        for (int r = 0; r < rows; ++r) {                                                     \
            __builtin_prefetch(c + r * ldc, 1, 3);                                           \
            __builtin_prefetch(c + r * ldc + cols - 1, 1, 3);                                \
        }                                                                                    \
        MATRIX_UNROLL(2)                                                                     \
        for (int64_t p = 0; p < kc; ++p, ap += MR, bp += NV * LANES) {                       \
            VT bv[NV];                                                                       \
            MATRIX_UNROLL(NV)                                                                \
            for (int v = 0; v < NV; ++v)                                                     \
                bv[v] = ((const VT *)bp)[v];                                                 \
            MATRIX_UNROLL(MR)                                                                \
            for (int r = 0; r < MR; ++r) {                                                   \
                double scalar = ap[r];                                                       \
                VT x = SPLAT(scalar);                                                        \
                MATRIX_UNROLL(NV)                                                            \
                for (int v = 0; v < NV; ++v)                                                 \
                    acc[r][v] += x * bv[v];                                                  \
            }                                                                                \
        }                                                                                    \
        if (rows == MR && cols == NV * LANES && accumulate) {                                 \
            MATRIX_UNROLL(MR)                                                                \
            for (int r = 0; r < MR; ++r)                                                     \
                MATRIX_UNROLL(NV)                                                            \
                for (int v = 0; v < NV; ++v) {                                               \
                    VTU *out = (VTU *)(c + r * ldc + v * LANES);                             \
                    *out = (VT)*out + acc[r][v];                                             \
                }                                                                            \
            return;                                                                          \
        }                                                                                    \
        if (rows == MR && cols == NV * LANES) {                                              \
            MATRIX_UNROLL(MR)                                                                \
            for (int r = 0; r < MR; ++r)                                                     \
                MATRIX_UNROLL(NV)                                                            \
                for (int v = 0; v < NV; ++v)                                                 \
                    *(VTU *)(c + r * ldc + v * LANES) = acc[r][v];                           \
            return;                                                                          \
        }                                                                                    \
        double tile[MR][NV * LANES];                                                         \
        MATRIX_UNROLL(MR)                                                                    \
        for (int r = 0; r < MR; ++r)                                                         \
            MATRIX_UNROLL(NV)                                                                \
            for (int v = 0; v < NV; ++v)                                                     \
                *(VTU *)&tile[r][v * LANES] = acc[r][v];                                     \
        for (int r = 0; r < rows; ++r)                                                       \
            for (int q = 0; q < cols; ++q)                                                   \
                c[r * ldc + q] = accumulate ? c[r * ldc + q] + tile[r][q] : tile[r][q];       \
    }

/* The portable C kernel (any architecture): 4 x 4 scalars. */
static void kernel_scalar_4x4(int64_t kc, const double *restrict ap, const double *restrict bp,
                              double *restrict c, int64_t ldc, int rows, int cols, int accumulate)
{
    double acc[4][4] = {{0}};
    for (int64_t p = 0; p < kc; ++p, ap += 4, bp += 4) {
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q)
                acc[r][q] += ap[r] * bp[q];
    }
    for (int r = 0; r < rows; ++r)
        for (int q = 0; q < cols; ++q)
            c[r * ldc + q] = accumulate ? c[r * ldc + q] + acc[r][q] : acc[r][q];
}
DEFINE_PACK_A(pack_a_scalar, )
DEFINE_PACK_B(pack_b_scalar, )

#if MATRIX_X86
typedef double v2d __attribute__((vector_size(16)));
typedef double v2du __attribute__((vector_size(16), aligned(8), may_alias));
typedef double v4d __attribute__((vector_size(32)));
typedef double v4du __attribute__((vector_size(32), aligned(8), may_alias));
typedef double v8d __attribute__((vector_size(64)));
typedef double v8du __attribute__((vector_size(64), aligned(8), may_alias));
#define SPLAT2(x) ((v2d){(x), (x)})
#define SPLAT4(x) ((v4d){(x), (x), (x), (x)})
#define SPLAT8(x) ((v8d){(x), (x), (x), (x), (x), (x), (x), (x)})

#define TARGET_SSE2 __attribute__((target("no-sse3,sse2")))
#define TARGET_AVX2 __attribute__((target("no-avx512f,avx2,fma")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))

/* SSE2 (every x86-64): 16 xmm registers, multiply and add. */
DEFINE_PACK_A(pack_a_sse2, TARGET_SSE2)
DEFINE_PACK_B(pack_b_sse2, TARGET_SSE2)
DEFINE_MICRO_KERNEL(kernel_sse2_6x4, TARGET_SSE2, v2d, v2du, SPLAT2, 2, 6, 2)
DEFINE_MICRO_KERNEL(kernel_sse2_4x6, TARGET_SSE2, v2d, v2du, SPLAT2, 2, 4, 3)
DEFINE_MICRO_KERNEL(kernel_sse2_4x4, TARGET_SSE2, v2d, v2du, SPLAT2, 2, 4, 2)
/* AVX2 + FMA: 16 ymm registers. */
DEFINE_PACK_A(pack_a_avx2, TARGET_AVX2)
DEFINE_PACK_B(pack_b_avx2, TARGET_AVX2)
DEFINE_MICRO_KERNEL(kernel_avx2_6x8, TARGET_AVX2, v4d, v4du, SPLAT4, 4, 6, 2)
DEFINE_MICRO_KERNEL(kernel_avx2_4x12, TARGET_AVX2, v4d, v4du, SPLAT4, 4, 4, 3)
/* AVX-512F: 32 zmm registers. */
DEFINE_PACK_A(pack_a_avx512, TARGET_AVX512)
DEFINE_PACK_B(pack_b_avx512, TARGET_AVX512)
DEFINE_MICRO_KERNEL(kernel_avx512_12x16, TARGET_AVX512, v8d, v8du, SPLAT8, 8, 12, 2)
DEFINE_MICRO_KERNEL(kernel_avx512_14x16, TARGET_AVX512, v8d, v8du, SPLAT8, 8, 14, 2)
DEFINE_MICRO_KERNEL(kernel_avx512_8x24, TARGET_AVX512, v8d, v8du, SPLAT8, 8, 8, 3)
DEFINE_MICRO_KERNEL(kernel_avx512_6x32, TARGET_AVX512, v8d, v8du, SPLAT8, 8, 6, 4)
#endif

enum { ISA_AUTO, ISA_AVX512, ISA_AVX2, ISA_SSE2, ISA_SCALAR, ISA_COUNT };
static const char *const matrix_isa_names[] = {"auto", "avx512", "avx2", "sse2", "scalar", NULL};
static const int isa_bits[ISA_COUNT] = {0, 512, 256, 128, 64};

typedef struct simd_kernel {
    int isa;
    const char *name; /* rows x cols of C, as the register_block parameter names it */
    micro_kernel fn;
    pack_panels pack_a, pack_b;
    int mr, nr;
} simd_kernel;

/* Every micro-kernel, the default of each ISA first among its own.  The
 * register_block choices are "auto" followed by these names, in this order. */
static const simd_kernel simd_kernels[] = {
#if MATRIX_X86
    {ISA_AVX512, "12x16", kernel_avx512_12x16, pack_a_avx512, pack_b_avx512, 12, 16},
    {ISA_AVX512, "14x16", kernel_avx512_14x16, pack_a_avx512, pack_b_avx512, 14, 16},
    {ISA_AVX512, "8x24", kernel_avx512_8x24, pack_a_avx512, pack_b_avx512, 8, 24},
    {ISA_AVX512, "6x32", kernel_avx512_6x32, pack_a_avx512, pack_b_avx512, 6, 32},
    {ISA_AVX2, "6x8", kernel_avx2_6x8, pack_a_avx2, pack_b_avx2, 6, 8},
    {ISA_AVX2, "4x12", kernel_avx2_4x12, pack_a_avx2, pack_b_avx2, 4, 12},
    {ISA_SSE2, "6x4", kernel_sse2_6x4, pack_a_sse2, pack_b_sse2, 6, 4},
    {ISA_SSE2, "4x6", kernel_sse2_4x6, pack_a_sse2, pack_b_sse2, 4, 6},
    {ISA_SSE2, "4x4", kernel_sse2_4x4, pack_a_sse2, pack_b_sse2, 4, 4},
#endif
    {ISA_SCALAR, "4x4", kernel_scalar_4x4, pack_a_scalar, pack_b_scalar, 4, 4},
};
#define SIMD_KERNEL_COUNT ((int)(sizeof simd_kernels / sizeof simd_kernels[0]))
/* "auto" and every distinct name of simd_kernels */
static const char *const register_block_names[] = {"auto", "12x16", "14x16", "8x24", "6x32",
                                                   "6x8", "4x12", "6x4", "4x6", "4x4", NULL};

static int isa_supported(int isa)
{
    switch (isa) {
    case ISA_SCALAR:
        return 1;
#if MATRIX_X86
    case ISA_SSE2:
        return ml_cpu_supports(ML_CPU_SSE2);
    case ISA_AVX2:
        return ml_cpu_supports(ML_CPU_AVX2);
    case ISA_AVX512:
        return ml_cpu_supports(ML_CPU_AVX512F) && ml_cpu_supports(ML_CPU_AVX2);
#endif
    default:
        return 0;
    }
}

static int isa_widest(void)
{
    for (int isa = ISA_AVX512; isa < ISA_COUNT; ++isa)
        if (isa_supported(isa))
            return isa;
    return ISA_SCALAR;
}

/* The kernel of isa named register_block_names[block] (0: the ISA's
 * default), or NULL when that ISA has no such tile. */
static const simd_kernel *find_kernel(int isa, int block)
{
    for (int k = 0; k < SIMD_KERNEL_COUNT; ++k)
        if (simd_kernels[k].isa == isa &&
            (block == 0 || strcmp(simd_kernels[k].name, register_block_names[block]) == 0))
            return &simd_kernels[k];
    return NULL;
}

/* "12x16, 14x16, ..." for an error message. */
static void kernel_names(int isa, char *text, size_t size)
{
    size_t used = 0;
    text[0] = '\0';
    for (int k = 0; k < SIMD_KERNEL_COUNT && used < size; ++k)
        if (simd_kernels[k].isa == isa)
            used += (size_t)snprintf(text + used, size - used, "%s%s", used ? ", " : "",
                                     simd_kernels[k].name);
}

typedef struct simd_plan {
    const simd_kernel *kernel;
    int64_t kc, mc, nc;
    double *ap, *bp; /* packing buffers, 64-byte aligned */
} simd_plan;

/* One block of the packed product: depth [p, p+kc) x columns [j, j+nc). */
static void multiply_simd_block(const simd_plan *plan, const double *a, const double *b,
                                double *c, int64_t n, int64_t p, int64_t j)
{
    const simd_kernel *kernel = plan->kernel;
    const int mr = kernel->mr, nr = kernel->nr;
    int64_t kc = min64(plan->kc, n - p), nc = min64(plan->nc, n - j);
    int accumulate = p > 0;
    kernel->pack_b(b, n, p, j, (int64_t)ml_round_up(nc, nr), kc, nr, plan->bp);
    for (int64_t i = 0; i < n; i += plan->mc) {
        int64_t mc = min64(plan->mc, n - i);
        kernel->pack_a(a, n, i, p, (int64_t)ml_round_up(mc, mr), kc, mr, plan->ap);
        for (int64_t jr = 0; jr < nc; jr += nr) {
            int cols = (int)min64(nr, nc - jr);
            const double *bp = plan->bp + jr * kc;
            for (int64_t ir = 0; ir < mc; ir += mr) {
                int rows = (int)min64(mr, mc - ir);
                kernel->fn(kc, plan->ap + ir * kc, bp, c + (i + ir) * n + j + jr, n, rows, cols,
                           accumulate);
            }
        }
    }
}

/* ---- the "matrix" family ---------------------------------------------- */

enum { VARIANT_NAIVE, VARIANT_TRANSPOSED, VARIANT_TILED, VARIANT_TILED_SSE2, VARIANT_TILED_SIMD };
static const char *const matrix_variant_names[] = {"naive", "transposed", "tiled", "tiled_sse2",
                                                   "tiled_simd", NULL};

typedef struct matrix_config {
    ml_buffer a, b, c;
    int64_t n;
    int variant;
    int64_t tile;
    int isa;
    int64_t block_rows, block_cols; /* tiled_simd's mc and nc; 0: from L2 and an 8 MiB bound */
    int register_block;             /* index into register_block_names; 0: the ISA's default */
} matrix_config;

typedef struct matrix_state {
    matrix_config config;
    ml_region transposed; /* the N x N temporary of the transposed variant */
    int has_transposed;
    simd_plan plan;
    int isa;
    int sse2_aligned; /* tiled_sse2: the aligned loads and stores of the listing */
} matrix_state;

static const ml_param matrix_params[] = {
    {.name = "a", .kind = ML_PARAM_BUFFER, .offset = offsetof(matrix_config, a)},
    {.name = "b", .kind = ML_PARAM_BUFFER, .offset = offsetof(matrix_config, b)},
    {.name = "c", .kind = ML_PARAM_BUFFER, .offset = offsetof(matrix_config, c), .writable = 1},
    {.name = "n", .kind = ML_PARAM_INT, .offset = offsetof(matrix_config, n), .min = 1,
     .max = MATRIX_MAX_N, ML_DEFAULT(1000)},
    {.name = "variant", .kind = ML_PARAM_CHOICE, .offset = offsetof(matrix_config, variant),
     .choices = matrix_variant_names, ML_DEFAULT_CHOICE("tiled")},
    {.name = "tile", .kind = ML_PARAM_INT, .offset = offsetof(matrix_config, tile), .min = 1,
     .max = MATRIX_MAX_N, ML_DEFAULT(8)},
    {.name = "isa", .kind = ML_PARAM_CHOICE, .offset = offsetof(matrix_config, isa),
     .choices = matrix_isa_names, ML_DEFAULT_CHOICE("auto")},
    {.name = "block_rows", .kind = ML_PARAM_INT, .offset = offsetof(matrix_config, block_rows),
     .min = 0, .max = MATRIX_MAX_N, ML_DEFAULT(0)},
    {.name = "block_cols", .kind = ML_PARAM_INT, .offset = offsetof(matrix_config, block_cols),
     .min = 0, .max = MATRIX_MAX_N, ML_DEFAULT(0)},
    {.name = "register_block", .kind = ML_PARAM_CHOICE,
     .offset = offsetof(matrix_config, register_block), .choices = register_block_names,
     ML_DEFAULT_CHOICE("auto")},
    {0},
};

static int check_matrix_buffer(const ml_buffer *buffer, const char *name, int64_t n,
                               ml_error *err)
{
    size_t expected = (size_t)n * (size_t)n * sizeof(double);
    if (buffer->itemsize != sizeof(double))
        return ml_fail(err, ML_ERR_VALUE, 0, "%s has items of %zu bytes; float64 (8) is required",
                       name, buffer->itemsize);
    if (buffer->bytes != expected)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "%s holds %zu bytes; n=%lld needs exactly %zu (n*n float64)", name,
                       buffer->bytes, (long long)n, expected);
    return 0;
}

static size_t l2_cache_bytes(void)
{
    long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return bytes > 0 ? (size_t)bytes : 256 * 1024;
}

/* kc = tile; mc and nc as given (rounded up to the register block), else Ap
 * fills half of L2 and Bp at most 8 MiB; none beyond the matrix. */
static int plan_simd(simd_plan *plan, const simd_kernel *kernel, const matrix_config *config,
                     ml_error *err)
{
    int64_t n = config->n;
    plan->kernel = kernel;
    int mr = kernel->mr, nr = kernel->nr;
    plan->kc = min64(config->tile, n);
    int64_t mc = config->block_rows
                     ? (int64_t)ml_round_up(config->block_rows, mr)
                     : (int64_t)(l2_cache_bytes() / 2 / sizeof(double)) / plan->kc / mr * mr;
    plan->mc = min64(max64(mc, mr), (int64_t)ml_round_up(n, mr));
    int64_t nc = config->block_cols ? (int64_t)ml_round_up(config->block_cols, nr)
                                    : PACK_B_MAX_DOUBLES / plan->kc / nr * nr;
    plan->nc = min64(max64(nc, nr), (int64_t)ml_round_up(n, nr));
    size_t ap_bytes = (size_t)ml_round_up(plan->mc, mr) * (size_t)plan->kc * sizeof(double);
    size_t bp_bytes = (size_t)ml_round_up(plan->nc, nr) * (size_t)plan->kc * sizeof(double);
    if (ml_check_memory(ap_bytes + bp_bytes, "tiled_simd packing buffers", err) < 0)
        return -1;
    plan->ap = aligned_alloc(64, ml_round_up(ap_bytes, 64));
    plan->bp = aligned_alloc(64, ml_round_up(bp_bytes, 64));
    if (!plan->ap || !plan->bp) {
        free(plan->ap);
        free(plan->bp);
        plan->ap = plan->bp = NULL;
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM,
                       "cannot allocate %zu bytes of tiled_simd packing buffers",
                       ap_bytes + bp_bytes);
    }
    return 0;
}

static void matrix_teardown(void *state_)
{
    matrix_state *state = state_;
    if (!state)
        return;
    if (state->has_transposed)
        ml_region_unmap(&state->transposed);
    free(state->plan.ap);
    free(state->plan.bp);
    free(state);
}

static int matrix_setup(const void *config_, void **state_out, ml_context *ctx, ml_error *err)
{
    const matrix_config *config = config_;
    (void)ctx;
    int64_t n = config->n;
    if (check_matrix_buffer(&config->a, "a", n, err) < 0 ||
        check_matrix_buffer(&config->b, "b", n, err) < 0 ||
        check_matrix_buffer(&config->c, "c", n, err) < 0)
        return -1;
    if (!config->c.writable)
        return ml_fail(err, ML_ERR_VALUE, 0, "c must be a writable buffer");
    int isa = config->isa == ISA_AUTO ? isa_widest() : config->isa;
    if (config->variant == VARIANT_TILED_SIMD && !isa_supported(isa))
        return ml_fail(err, ML_ERR_VALUE, 0, "isa=%s is not supported by this CPU (widest: %s)",
                       matrix_isa_names[isa], matrix_isa_names[isa_widest()]);
    const simd_kernel *kernel = find_kernel(isa, config->register_block);
    if (config->variant == VARIANT_TILED_SIMD && !kernel) {
        char names[128];
        kernel_names(isa, names, sizeof names);
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "register_block=%s is not a tile of isa=%s (its tiles: %s)",
                       register_block_names[config->register_block], matrix_isa_names[isa], names);
    }
    if (config->variant == VARIANT_TILED_SSE2 && !(MATRIX_X86 && ml_cpu_supports(ML_CPU_SSE2)))
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "variant=tiled_sse2 needs SSE2, which this CPU does not have (or "
                       "MEMLAB_HIDE_CPU_FEATURES hides)");
    matrix_state *state = calloc(1, sizeof *state);
    if (!state)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the matrix state");
    state->config = *config;
    state->isa = isa;
#if MATRIX_X86
    state->sse2_aligned = sse2_aligned(config->a.data, config->b.data, config->c.data, n, config->tile);
#endif
    if (config->variant == VARIANT_TRANSPOSED) {
        size_t bytes = (size_t)n * (size_t)n * sizeof(double);
        if (ml_region_map(&state->transposed, bytes, ML_PAGES_4K, 64, ML_POPULATE_TOUCH, 1,
                          err) < 0) {
            free(state);
            return -1;
        }
        state->has_transposed = 1;
    }
    if (config->variant == VARIANT_TILED_SIMD && plan_simd(&state->plan, kernel, config, err) < 0) {
        matrix_teardown(state);
        return -1;
    }
    *state_out = state;
    return 0;
}

/* One full product c = a * b (c zeroed first, untimed), timed in chunks
 * with interrupt checks between them. */
static int multiply_once(matrix_state *state, ml_context *ctx, stopwatch *watch,
                         uint64_t *transpose_ns, ml_error *err)
{
    const matrix_config *config = &state->config;
    const double *a = config->a.data, *b = config->b.data;
    double *c = config->c.data;
    int64_t n = config->n, sm = config->tile;
    double row_flops = 2.0 * (double)n * (double)n;
    memset(c, 0, (size_t)n * (size_t)n * sizeof(double));
    if (config->variant == VARIANT_TRANSPOSED) {
        stopwatch_start(watch);
        transpose(b, state->transposed.base, n);
        *transpose_ns += stopwatch_stop(watch);
        ML_CHECK_INTERRUPT(ctx, err);
    }
    if (config->variant == VARIANT_TILED_SIMD) {
        for (int64_t j = 0; j < n; j += state->plan.nc)
            for (int64_t p = 0; p < n; p += state->plan.kc) {
                stopwatch_start(watch);
                multiply_simd_block(&state->plan, a, b, c, n, p, j);
                stopwatch_stop(watch);
                ML_CHECK_INTERRUPT(ctx, err);
            }
        return 0;
    }
    int64_t step = config->variant == VARIANT_TILED || config->variant == VARIANT_TILED_SSE2 ? sm : 1;
    int64_t blocks = max64(1, (int64_t)(MATRIX_CHUNK_FLOPS / (row_flops * (double)step)));
    for (int64_t i = 0; i < n; i += blocks * step) {
        int64_t end = min64(n, i + blocks * step);
        stopwatch_start(watch);
        if (config->variant == VARIANT_NAIVE)
            multiply_naive(a, b, c, n, i, end);
        else if (config->variant == VARIANT_TRANSPOSED)
            multiply_transposed(a, state->transposed.base, c, n, i, end);
#if MATRIX_X86
        else if (config->variant == VARIANT_TILED_SSE2 && state->sse2_aligned)
            multiply_tiled_sse2(a, b, c, n, sm, i, end);
        else if (config->variant == VARIANT_TILED_SSE2)
            multiply_tiled_sse2_unaligned(a, b, c, n, sm, i, end);
#endif
        else
            multiply_tiled(a, b, c, n, sm, i, end);
        stopwatch_stop(watch);
        ML_CHECK_INTERRUPT(ctx, err);
    }
    return 0;
}

static int matrix_measure(void *state_, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    matrix_state *state = state_;
    const matrix_config *config = &state->config;
    int64_t n = config->n;
    ml_counting counting;
    stopwatch watch = {0};
    uint64_t transpose_total = 0;
    int64_t multiplies = 0;
    /* Counters run across the whole sample (including the untimed zeroing
     * of c); the zeroing moves n*n*8 bytes, small next to n^3 flops. */
    ml_counting_start(&counting, ctx);
    do {
        if (multiply_once(state, ctx, &watch, &transpose_total, err) < 0) {
            ml_counting_stop(&counting, out);
            return -1;
        }
        multiplies++;
    } while (watch.wall_ns < ctx->target_ns);
    ml_counting_stop(&counting, out);
    double flops = 2.0 * (double)n * (double)n * (double)n;
    uint64_t elapsed = watch.wall_ns > 0 ? watch.wall_ns : 1;
    out->elapsed_ns = elapsed;
    out->units = flops * (double)multiplies;
    out->bytes = 0;
    ml_metric_add(out, "multiplies", (double)multiplies);
    ml_metric_add(out, "seconds", (double)elapsed / 1e9 / (double)multiplies);
    ml_metric_add(out, "GFLOP_per_s", flops * (double)multiplies / (double)elapsed);
    ml_metric_add(out, "cpu_fraction", (double)watch.cpu_ns / (double)elapsed);
    if (config->variant == VARIANT_TRANSPOSED)
        ml_metric_add(out, "transpose_seconds",
                      (double)transpose_total / 1e9 / (double)multiplies);
    /* every variant but tiled_simd is built without auto-vectorisation (tiled_sse2's vectors are
     * its own intrinsics) and without loop interchange */
    int reference = config->variant != VARIANT_TILED_SIMD;
    ml_metric_add(out, "autovectorize_disabled", reference);
    ml_metric_add(out, "loop_interchange_disabled", reference);
    if (config->variant == VARIANT_TILED_SSE2) {
        ml_metric_add(out, "simd_bits", 128);
        ml_metric_add(out, "aligned_vectors", state->sse2_aligned);
    }
    if (config->variant == VARIANT_TILED_SIMD) {
        ml_metric_add(out, "simd_bits", isa_bits[state->plan.kernel->isa]);
        ml_metric_add(out, "register_block_rows", state->plan.kernel->mr);
        ml_metric_add(out, "register_block_cols", state->plan.kernel->nr);
        ml_metric_add(out, "block_depth", (double)state->plan.kc);
        ml_metric_add(out, "block_rows", (double)state->plan.mc);
        ml_metric_add(out, "block_cols", (double)state->plan.nc);
    }
    size_t temporary = state->has_transposed ? state->transposed.bytes : 0;
    if (config->variant == VARIANT_TILED_SIMD)
        temporary = (size_t)(ml_round_up(state->plan.mc, state->plan.kernel->mr) +
                             ml_round_up(state->plan.nc, state->plan.kernel->nr)) *
                    (size_t)state->plan.kc * sizeof(double);
    ml_metric_add(out, "temporary_bytes", (double)temporary);
    return 0;
}

ML_FAMILY(matrix) = {
    .name = "matrix",
    .description = "N x N float64 matrix multiply c = a * b (Drepper 6.2.1): naive, transposed, "
                   "tiled, tiled_sse2 (the source's SSE2 listing), tiled_simd (memlab's, beyond it); "
                   "reference kernels built with " MATRIX_REFERENCE_FLAGS,
    .config_size = sizeof(matrix_config),
    .params = matrix_params,
    .setup = matrix_setup,
    .measure = matrix_measure,
    .teardown = matrix_teardown,
};

/* ---- the "matrix_init" family: table 6.1 ------------------------------ */

enum { ORDER_ROW, ORDER_COLUMN };
static const char *const init_order_names[] = {"row", "column", NULL};
enum { STORES_NORMAL, STORES_NONTEMPORAL };
static const char *const init_store_names[] = {"normal", "nontemporal", NULL};

typedef struct init_config {
    ml_buffer matrix;
    int64_t n;
    int order;
    int stores;
} init_config;

static const ml_param init_params[] = {
    {.name = "matrix", .kind = ML_PARAM_BUFFER, .offset = offsetof(init_config, matrix),
     .writable = 1},
    {.name = "n", .kind = ML_PARAM_INT, .offset = offsetof(init_config, n), .min = 1,
     .max = MATRIX_MAX_N, ML_DEFAULT(3000)},
    {.name = "order", .kind = ML_PARAM_CHOICE, .offset = offsetof(init_config, order),
     .choices = init_order_names, ML_DEFAULT_CHOICE("row")},
    {.name = "stores", .kind = ML_PARAM_CHOICE, .offset = offsetof(init_config, stores),
     .choices = init_store_names, ML_DEFAULT_CHOICE("normal")},
    {0},
};

/* Element (i, j) gets the value i*n + j, wrapped to 32 bits. */
static inline int32_t init_value(int64_t n, int64_t i, int64_t j)
{
    return (int32_t)(uint32_t)(uint64_t)(i * n + j);
}

/* Rows [o0, o1) (order row) or columns [o0, o1) (order column). */
MATRIX_REFERENCE static void init_normal(int32_t *restrict m, int64_t n, int order, int64_t o0,
                                         int64_t o1)
{
    if (order == ORDER_ROW) {
        MATRIX_SCALAR_LOOP
        for (int64_t i = o0; i < o1; ++i)
            MATRIX_SCALAR_LOOP
            for (int64_t j = 0; j < n; ++j)
                m[i * n + j] = init_value(n, i, j);
    } else {
        MATRIX_SCALAR_LOOP
        for (int64_t j = o0; j < o1; ++j)
            MATRIX_SCALAR_LOOP
            for (int64_t i = 0; i < n; ++i)
                m[i * n + j] = init_value(n, i, j);
    }
}

#if MATRIX_X86
MATRIX_REFERENCE static void init_nontemporal(int32_t *restrict m, int64_t n, int order,
                                              int64_t o0, int64_t o1)
{
    if (order == ORDER_ROW) {
        MATRIX_SCALAR_LOOP
        for (int64_t i = o0; i < o1; ++i)
            MATRIX_SCALAR_LOOP
            for (int64_t j = 0; j < n; ++j)
                _mm_stream_si32(&m[i * n + j], init_value(n, i, j));
    } else {
        MATRIX_SCALAR_LOOP
        for (int64_t j = o0; j < o1; ++j)
            MATRIX_SCALAR_LOOP
            for (int64_t i = 0; i < n; ++i)
                _mm_stream_si32(&m[i * n + j], init_value(n, i, j));
    }
    _mm_sfence();
}
#endif

typedef struct init_state {
    init_config config;
} init_state;

static int init_setup(const void *config_, void **state_out, ml_context *ctx, ml_error *err)
{
    const init_config *config = config_;
    (void)ctx;
    size_t expected = (size_t)config->n * (size_t)config->n * sizeof(int32_t);
    if (config->matrix.itemsize != sizeof(int32_t))
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "matrix has items of %zu bytes; int32 (4) is required",
                       config->matrix.itemsize);
    if (config->matrix.bytes != expected)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "matrix holds %zu bytes; n=%lld needs exactly %zu (n*n int32)",
                       config->matrix.bytes, (long long)config->n, expected);
    if (!config->matrix.writable)
        return ml_fail(err, ML_ERR_VALUE, 0, "matrix must be a writable buffer");
#if !MATRIX_X86
    if (config->stores == STORES_NONTEMPORAL)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "stores=nontemporal is not available on this architecture (only normal)");
#endif
    init_state *state = calloc(1, sizeof *state);
    if (!state)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the init state");
    state->config = *config;
    *state_out = state;
    return 0;
}

static int init_measure(void *state_, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    init_state *state = state_;
    const init_config *config = &state->config;
    int32_t *m = config->matrix.data;
    int64_t n = config->n;
    int64_t lines_per_chunk = max64(1, INIT_CHUNK_ELEMENTS / n);
    ml_counting counting;
    ml_counting_start(&counting, ctx);
    stopwatch watch = {0};
    int64_t passes = 0;
    do {
        for (int64_t o = 0; o < n; o += lines_per_chunk) {
            int64_t end = min64(n, o + lines_per_chunk);
            stopwatch_start(&watch);
#if MATRIX_X86
            if (config->stores == STORES_NONTEMPORAL)
                init_nontemporal(m, n, config->order, o, end);
            else
#endif
                init_normal(m, n, config->order, o, end);
            stopwatch_stop(&watch);
            if (ml_interrupted(ctx)) {
                ml_counting_stop(&counting, out);
                return ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
            }
        }
        passes++;
    } while (watch.wall_ns < ctx->target_ns);
    ml_counting_stop(&counting, out);
    double elements = (double)n * (double)n;
    uint64_t elapsed = watch.wall_ns > 0 ? watch.wall_ns : 1;
    out->elapsed_ns = elapsed;
    out->units = elements * (double)passes;
    out->bytes = elements * sizeof(int32_t) * (double)passes;
    ml_metric_add(out, "passes", (double)passes);
    ml_metric_add(out, "cpu_fraction", (double)watch.cpu_ns / (double)elapsed);
    ml_metric_add(out, "seconds", (double)elapsed / 1e9 / (double)passes);
    ml_metric_add(out, "autovectorize_disabled", 1);
    return 0;
}

static void init_teardown(void *state) { free(state); }

ML_FAMILY(matrix_init) = {
    .name = "matrix_init",
    .description = "N x N int32 matrix written row- or column-wise with normal or non-temporal "
                   "stores (Drepper table 6.1); built with " MATRIX_REFERENCE_FLAGS,
    .config_size = sizeof(init_config),
    .params = init_params,
    .setup = init_setup,
    .measure = init_measure,
    .teardown = init_teardown,
};
