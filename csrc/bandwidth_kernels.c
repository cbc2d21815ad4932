/* The bandwidth kernels (bandwidth.h): Drepper's read, write and copy loops
 * (seed 004, sections 3.5.1 and 3.5.3) and the 2:1 add mix, one per
 * operation x vector width x store kind, chosen at run time. */
#define _GNU_SOURCE
#include "bandwidth.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define BW_X86 1
#else
#define BW_X86 0
#endif

const char *const ml_bw_op_names[] = {"read", "write", "copy", "add", NULL};
const char *const ml_bw_width_names[] = {"scalar", "sse2", "avx2", "avx512", NULL};
const char *const ml_bw_stores_names[] = {"normal", "nontemporal", NULL};

/* ---- scalar kernels: 8-byte words in general registers ----------------- */

/* Keep a loaded value alive without an instruction: the load must happen,
 * nothing is done with it (Drepper's read test). */
#define BW_KEEP_WORD(w) __asm__ volatile("" ::"r"(w))
#define BW_KEEP_VECTOR(v) __asm__ volatile("" ::"x"(v))

/* clang merges neighbouring scalar (or 16-byte) accesses into wider vector
 * moves even with loop vectorization disabled (the SLP vectorizer and the
 * store merger are not loop passes): a compiler barrier between the accesses
 * of a turn keeps each kernel at its width.  It emits no instruction; gcc,
 * whose kernels are built with vectorization off, does not need it. */
#if defined(__clang__)
#define BW_APART() __asm__ volatile("" ::: "memory")
#define BW_IN_GPR(w) __asm__ volatile("" : "+r"(w))
#else
#define BW_APART() ((void)0)
#define BW_IN_GPR(w) ((void)0)
#endif

ML_BW_KERNEL static uint64_t read_scalar(void *dst, const void *src, size_t bytes, uint64_t passes,
                                      uint64_t value)
{
    (void)dst, (void)value;
    const uint64_t *end = (const uint64_t *)src + bytes / 8;
    const uint64_t *end8 = (const uint64_t *)src + bytes / 8 / ML_BW_UNROLL * ML_BW_UNROLL;
    ML_BW_PLAIN_LOOP
    for (uint64_t pass = 0; pass < passes; ++pass) {
        const uint64_t *p = src;
        ML_BW_PLAIN_LOOP
        for (; p < end8; p += ML_BW_UNROLL) {
            uint64_t w0 = p[0], w1 = p[1], w2 = p[2], w3 = p[3];
            uint64_t w4 = p[4], w5 = p[5], w6 = p[6], w7 = p[7];
            BW_KEEP_WORD(w0); BW_KEEP_WORD(w1); BW_KEEP_WORD(w2); BW_KEEP_WORD(w3);
            BW_KEEP_WORD(w4); BW_KEEP_WORD(w5); BW_KEEP_WORD(w6); BW_KEEP_WORD(w7);
        }
        ML_BW_PLAIN_LOOP
        for (; p < end; ++p)
            BW_KEEP_WORD(*p);
    }
    return 0;
}

/* The read's twin for checking: the same walk, adding the words up. */
ML_BW_KERNEL static uint64_t sum_scalar(void *dst, const void *src, size_t bytes, uint64_t passes,
                                     uint64_t value)
{
    (void)dst, (void)value;
    const uint64_t *end = (const uint64_t *)src + bytes / 8;
    const uint64_t *end8 = (const uint64_t *)src + bytes / 8 / ML_BW_UNROLL * ML_BW_UNROLL;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    ML_BW_PLAIN_LOOP
    for (uint64_t pass = 0; pass < passes; ++pass) {
        const uint64_t *p = src;
        ML_BW_PLAIN_LOOP
        for (; p < end8; p += ML_BW_UNROLL) {
            a0 += p[0]; BW_APART(); a1 += p[1]; BW_APART(); a2 += p[2]; BW_APART(); a3 += p[3]; BW_APART();
            a0 += p[4]; BW_APART(); a1 += p[5]; BW_APART(); a2 += p[6]; BW_APART(); a3 += p[7]; BW_APART();
        }
        ML_BW_PLAIN_LOOP
        for (; p < end; ++p)
            a0 += *p;
    }
    return a0 + a1 + a2 + a3;
}

/* ---- write and copy: one body each, the store a parameter --------------
 * T is the word or vector type, LOOP the loop pragma (ML_BW_PLAIN_LOOP for the
 * scalar kernels), LOAD an aligned load, SET1 a broadcast of the 64-bit
 * value, HOLD(v) what keeps the value at its width (BW_IN_GPR for the
 * scalar kernels), PUT(address, value) the store: a plain one or a
 * non-temporal one (movnti, movntdq, vmovntdq).  KIND (PLAIN or NT) says
 * what the store needs around it: a compiler barrier after each pass, so
 * that the compiler keeps every pass's plain stores; one sfence at the
 * end, so that the non-temporal stores are visible when the kernel
 * returns.  Eight accesses per loop turn, BW_APART() between them. */
#define BW_PLAIN_PASS_END() __asm__ volatile("" ::: "memory")
#define BW_PLAIN_END() ((void)0)
#define BW_NT_PASS_END() ((void)0)
#define BW_NT_END() _mm_sfence()
#define BW_PLAIN_PUT(address, value) (*(address) = (value))
#define BW_WORD_LOAD(address) (*(address))
#define BW_WORD_SET1(value) ((long long)(value))
#define BW_NO_HOLD(v) ((void)0)

#define BW_WRITE_BODY(T, LOOP, SET1, HOLD, PUT, KIND)                                         \
    {                                                                                      \
        (void)src;                                                                         \
        T *end = (T *)dst + bytes / sizeof(T);                                             \
        T *end8 = (T *)dst + bytes / sizeof(T) / ML_BW_UNROLL * ML_BW_UNROLL;               \
        T v = SET1((long long)value);                                                      \
        LOOP                                                                               \
        for (uint64_t pass = 0; pass < passes; ++pass) {                                    \
            T *p = dst;                                                                    \
            LOOP                                                                           \
            for (; p < end8; p += ML_BW_UNROLL) {                                           \
                HOLD(v);                                                                   \
                PUT(p + 0, v); BW_APART(); PUT(p + 1, v); BW_APART(); PUT(p + 2, v); BW_APART(); PUT(p + 3, v); BW_APART(); \
                PUT(p + 4, v); BW_APART(); PUT(p + 5, v); BW_APART(); PUT(p + 6, v); BW_APART(); PUT(p + 7, v); BW_APART(); \
            }                                                                              \
            LOOP                                                                           \
            for (; p < end; ++p)                                                           \
                PUT(p, v);                                                                 \
            BW_##KIND##_PASS_END();                                                        \
        }                                                                                  \
        BW_##KIND##_END();                                                                 \
        return 0;                                                                          \
    }

#define BW_COPY_BODY(T, LOOP, LOAD, PUT, KIND)                                                \
    {                                                                                      \
        (void)value;                                                                       \
        const T *end = (const T *)src + bytes / sizeof(T);                                 \
        const T *end8 = (const T *)src + bytes / sizeof(T) / ML_BW_UNROLL * ML_BW_UNROLL;   \
        LOOP                                                                               \
        for (uint64_t pass = 0; pass < passes; ++pass) {                                    \
            const T *s = src;                                                              \
            T *d = dst;                                                                    \
            LOOP                                                                           \
            for (; s < end8; s += ML_BW_UNROLL, d += ML_BW_UNROLL) {                        \
                T w0 = LOAD(s + 0); BW_APART(); T w1 = LOAD(s + 1); BW_APART(); T w2 = LOAD(s + 2); BW_APART(); T w3 = LOAD(s + 3); BW_APART(); \
                T w4 = LOAD(s + 4); BW_APART(); T w5 = LOAD(s + 5); BW_APART(); T w6 = LOAD(s + 6); BW_APART(); T w7 = LOAD(s + 7); BW_APART(); \
                PUT(d + 0, w0); BW_APART(); PUT(d + 1, w1); BW_APART(); PUT(d + 2, w2); BW_APART(); PUT(d + 3, w3); BW_APART(); \
                PUT(d + 4, w4); BW_APART(); PUT(d + 5, w5); BW_APART(); PUT(d + 6, w6); BW_APART(); PUT(d + 7, w7); BW_APART(); \
            }                                                                              \
            LOOP                                                                           \
            for (; s < end; ++s, ++d)                                                      \
                PUT(d, LOAD(s));                                                           \
            BW_##KIND##_PASS_END();                                                        \
        }                                                                                  \
        BW_##KIND##_END();                                                                 \
        return 0;                                                                          \
    }

/* The 2:1 read/write mix: src added into dst word by word (64-bit lanes,
 * wrapping), dst[i] += src[i]: two loads and one store per word or vector
 * (ADD a 64-bit lane add).  dst is read before it is written, so a normal
 * store finds its line in the cache and the memory traffic is 2:1 as well (a
 * copy's normal store reads its line first); plain stores only. */
#define BW_WORD_ADD(a, b) ((a) + (b))
#define BW_ADD_BODY(T, LOOP, LOAD, ADD, PUT)                                                  \
    {                                                                                      \
        (void)value;                                                                       \
        const T *end = (const T *)src + bytes / sizeof(T);                                 \
        const T *end8 = (const T *)src + bytes / sizeof(T) / ML_BW_UNROLL * ML_BW_UNROLL;   \
        LOOP                                                                               \
        for (uint64_t pass = 0; pass < passes; ++pass) {                                    \
            const T *s = src;                                                              \
            T *d = dst;                                                                    \
            LOOP                                                                           \
            for (; s < end8; s += ML_BW_UNROLL, d += ML_BW_UNROLL) {                        \
                PUT(d + 0, ADD(LOAD(d + 0), LOAD(s + 0))); BW_APART(); PUT(d + 1, ADD(LOAD(d + 1), LOAD(s + 1))); BW_APART(); \
                PUT(d + 2, ADD(LOAD(d + 2), LOAD(s + 2))); BW_APART(); PUT(d + 3, ADD(LOAD(d + 3), LOAD(s + 3))); BW_APART(); \
                PUT(d + 4, ADD(LOAD(d + 4), LOAD(s + 4))); BW_APART(); PUT(d + 5, ADD(LOAD(d + 5), LOAD(s + 5))); BW_APART(); \
                PUT(d + 6, ADD(LOAD(d + 6), LOAD(s + 6))); BW_APART(); PUT(d + 7, ADD(LOAD(d + 7), LOAD(s + 7))); BW_APART(); \
            }                                                                              \
            LOOP                                                                           \
            for (; s < end; ++s, ++d)                                                      \
                PUT(d, ADD(LOAD(d), LOAD(s)));                                             \
            BW_PLAIN_PASS_END();                                                           \
        }                                                                                  \
        return 0;                                                                          \
    }

#define ML_BW_KERNEL_ARGS void *dst, const void *src, size_t bytes, uint64_t passes, uint64_t value

ML_BW_KERNEL static uint64_t write_scalar(ML_BW_KERNEL_ARGS)
    BW_WRITE_BODY(long long, ML_BW_PLAIN_LOOP, BW_WORD_SET1, BW_IN_GPR, BW_PLAIN_PUT, PLAIN)

ML_BW_KERNEL static uint64_t copy_scalar(ML_BW_KERNEL_ARGS)
    BW_COPY_BODY(long long, ML_BW_PLAIN_LOOP, BW_WORD_LOAD, BW_PLAIN_PUT, PLAIN)

ML_BW_KERNEL static uint64_t add_scalar(ML_BW_KERNEL_ARGS)
    BW_ADD_BODY(unsigned long long, ML_BW_PLAIN_LOOP, BW_WORD_LOAD, BW_WORD_ADD, BW_PLAIN_PUT)

#if BW_X86
/* movnti: the non-temporal store of a general register (SSE2, every x86-64). */
ML_BW_KERNEL static uint64_t write_nt_scalar(ML_BW_KERNEL_ARGS)
    BW_WRITE_BODY(long long, ML_BW_PLAIN_LOOP, BW_WORD_SET1, BW_IN_GPR, _mm_stream_si64, NT)

ML_BW_KERNEL static uint64_t copy_nt_scalar(ML_BW_KERNEL_ARGS)
    BW_COPY_BODY(long long, ML_BW_PLAIN_LOOP, BW_WORD_LOAD, _mm_stream_si64, NT)

/* ---- vector kernels: one set per width, written once as a macro ---------
 * VEC is the register type, LOAD/STORE/STREAM aligned moves, ADD a 64-bit
 * lane add, SET1 a broadcast.  Eight vectors per loop turn; the read's
 * checking twin (sum_) adds into four accumulators. */
#define BW_VECTOR_KERNELS(NAME, TARGET, VEC, LOAD, STORE, STREAM, ADD, ZERO, SET1)           \
    ML_BW_KERNEL __attribute__((target(TARGET))) static uint64_t read_##NAME(                  \
        void *dst, const void *src, size_t bytes, uint64_t passes, uint64_t value)            \
    {                                                                                      \
        (void)dst, (void)value;                                                             \
        const VEC *end = (const VEC *)src + bytes / sizeof(VEC);                           \
        const VEC *end8 = (const VEC *)src + bytes / sizeof(VEC) / ML_BW_UNROLL * ML_BW_UNROLL; \
        for (uint64_t pass = 0; pass < passes; ++pass) {                                    \
            const VEC *p = src;                                                            \
            for (; p < end8; p += ML_BW_UNROLL) {                                           \
                VEC v0 = LOAD(p + 0), v1 = LOAD(p + 1), v2 = LOAD(p + 2), v3 = LOAD(p + 3); \
                VEC v4 = LOAD(p + 4), v5 = LOAD(p + 5), v6 = LOAD(p + 6), v7 = LOAD(p + 7); \
                BW_KEEP_VECTOR(v0); BW_KEEP_VECTOR(v1); BW_KEEP_VECTOR(v2); BW_KEEP_VECTOR(v3); \
                BW_KEEP_VECTOR(v4); BW_KEEP_VECTOR(v5); BW_KEEP_VECTOR(v6); BW_KEEP_VECTOR(v7); \
            }                                                                              \
            for (; p < end; ++p) {                                                         \
                VEC v = LOAD(p);                                                           \
                BW_KEEP_VECTOR(v);                                                         \
            }                                                                              \
        }                                                                                  \
        return 0;                                                                          \
    }                                                                                      \
    ML_BW_KERNEL __attribute__((target(TARGET))) static uint64_t sum_##NAME(                   \
        void *dst, const void *src, size_t bytes, uint64_t passes, uint64_t value)            \
    {                                                                                      \
        (void)dst, (void)value;                                                             \
        const VEC *end = (const VEC *)src + bytes / sizeof(VEC);                           \
        const VEC *end8 = (const VEC *)src + bytes / sizeof(VEC) / ML_BW_UNROLL * ML_BW_UNROLL; \
        VEC a0 = ZERO(), a1 = ZERO(), a2 = ZERO(), a3 = ZERO();                             \
        for (uint64_t pass = 0; pass < passes; ++pass) {                                    \
            const VEC *p = src;                                                            \
            for (; p < end8; p += ML_BW_UNROLL) {                                           \
                a0 = ADD(a0, LOAD(p + 0)), a1 = ADD(a1, LOAD(p + 1));                       \
                a2 = ADD(a2, LOAD(p + 2)), a3 = ADD(a3, LOAD(p + 3));                       \
                a0 = ADD(a0, LOAD(p + 4)), a1 = ADD(a1, LOAD(p + 5));                       \
                a2 = ADD(a2, LOAD(p + 6)), a3 = ADD(a3, LOAD(p + 7));                       \
            }                                                                              \
            for (; p < end; ++p)                                                           \
                a0 = ADD(a0, LOAD(p));                                                     \
        }                                                                                  \
        uint64_t lanes[sizeof(VEC) / 8];                                                   \
        STORE((VEC *)lanes, ADD(ADD(a0, a1), ADD(a2, a3)));                                 \
        uint64_t sum = 0;                                                                  \
        for (size_t i = 0; i < sizeof(VEC) / 8; ++i)                                       \
            sum += lanes[i];                                                               \
        return sum;                                                                        \
    }                                                                                      \
    ML_BW_KERNEL __attribute__((target(TARGET))) static uint64_t write_##NAME(ML_BW_KERNEL_ARGS)      \
        BW_WRITE_BODY(VEC, , SET1, BW_NO_HOLD, STORE, PLAIN)                                \
    ML_BW_KERNEL __attribute__((target(TARGET))) static uint64_t write_nt_##NAME(ML_BW_KERNEL_ARGS)   \
        BW_WRITE_BODY(VEC, , SET1, BW_NO_HOLD, STREAM, NT)                                  \
    ML_BW_KERNEL __attribute__((target(TARGET))) static uint64_t copy_##NAME(ML_BW_KERNEL_ARGS)       \
        BW_COPY_BODY(VEC, , LOAD, STORE, PLAIN)                                             \
    ML_BW_KERNEL __attribute__((target(TARGET))) static uint64_t copy_nt_##NAME(ML_BW_KERNEL_ARGS)    \
        BW_COPY_BODY(VEC, , LOAD, STREAM, NT)                                               \
    ML_BW_KERNEL __attribute__((target(TARGET))) static uint64_t add_##NAME(ML_BW_KERNEL_ARGS)        \
        BW_ADD_BODY(VEC, , LOAD, ADD, STORE)

BW_VECTOR_KERNELS(sse2, "sse2", __m128i, _mm_load_si128, _mm_store_si128, _mm_stream_si128,
                  _mm_add_epi64, _mm_setzero_si128, _mm_set1_epi64x)
BW_VECTOR_KERNELS(avx2, "avx2", __m256i, _mm256_load_si256, _mm256_store_si256,
                  _mm256_stream_si256, _mm256_add_epi64, _mm256_setzero_si256, _mm256_set1_epi64x)
BW_VECTOR_KERNELS(avx512, "avx512f", __m512i, _mm512_load_si512, _mm512_store_si512,
                  _mm512_stream_si512, _mm512_add_epi64, _mm512_setzero_si512, _mm512_set1_epi64)
#endif /* BW_X86 */

/* kernels[op][width][stores]; NULL where the combination does not exist. */
static const ml_bw_kernel bw_kernels[ML_BW_OP_COUNT][ML_BW_WIDTH_COUNT][ML_BW_STORES_COUNT] = {
#if BW_X86
    [ML_BW_READ] = {{read_scalar, NULL}, {read_sse2, NULL}, {read_avx2, NULL}, {read_avx512, NULL}},
    [ML_BW_WRITE] = {{write_scalar, write_nt_scalar},
                     {write_sse2, write_nt_sse2},
                     {write_avx2, write_nt_avx2},
                     {write_avx512, write_nt_avx512}},
    [ML_BW_COPY] = {{copy_scalar, copy_nt_scalar},
                    {copy_sse2, copy_nt_sse2},
                    {copy_avx2, copy_nt_avx2},
                    {copy_avx512, copy_nt_avx512}},
    [ML_BW_ADD] = {{add_scalar, NULL}, {add_sse2, NULL}, {add_avx2, NULL}, {add_avx512, NULL}},
#else
    [ML_BW_READ] = {{read_scalar, NULL}},
    [ML_BW_WRITE] = {{write_scalar, NULL}},
    [ML_BW_COPY] = {{copy_scalar, NULL}},
    [ML_BW_ADD] = {{add_scalar, NULL}},
#endif
};

#if BW_X86
static const ml_bw_kernel bw_sum_kernels[ML_BW_WIDTH_COUNT] = {sum_scalar, sum_sse2, sum_avx2, sum_avx512};
#else
static const ml_bw_kernel bw_sum_kernels[ML_BW_WIDTH_COUNT] = {sum_scalar};
#endif

ml_bw_kernel ml_bw_sum_kernel(ml_bw_width width)
{
    return ml_bw_width_supported(width, NULL) ? bw_sum_kernels[width] : NULL;
}

size_t ml_bw_vector_bytes(ml_bw_width width)
{
    static const size_t bytes[ML_BW_WIDTH_COUNT] = {8, 16, 32, 64};
    return (unsigned)width < ML_BW_WIDTH_COUNT ? bytes[width] : 0;
}

int ml_bw_width_supported(ml_bw_width width, const char **why)
{
    static const ml_cpu_feature needs[ML_BW_WIDTH_COUNT] = {
        [ML_BW_SSE2] = ML_CPU_SSE2, [ML_BW_AVX2] = ML_CPU_AVX2, [ML_BW_AVX512] = ML_CPU_AVX512F};
    static const char *const missing_text[ML_BW_WIDTH_COUNT] = {
        [ML_BW_SSE2] = "this CPU has no SSE2",
        [ML_BW_AVX2] = "this CPU has no AVX2 and FMA",
        [ML_BW_AVX512] = "this CPU has no AVX-512F"};
    const char *missing = NULL;
    if ((unsigned)width >= ML_BW_WIDTH_COUNT)
        missing = "no such width";
    else if (width != ML_BW_SCALAR && !BW_X86)
        missing = "vector widths are x86-64 only in this build";
    else if (width != ML_BW_SCALAR && !ml_cpu_supports(needs[width]))
        missing = missing_text[width]; /* or its OS does not save the registers, or
                                          MEMLAB_HIDE_CPU_FEATURES hides it */
    if (why)
        *why = missing;
    return missing == NULL;
}

void ml_bw_op_traffic(ml_bw_op op, unsigned *reads, unsigned *writes)
{
    static const unsigned r[ML_BW_OP_COUNT] = {[ML_BW_READ] = 1, [ML_BW_COPY] = 1, [ML_BW_ADD] = 2};
    static const unsigned w[ML_BW_OP_COUNT] = {[ML_BW_WRITE] = 1, [ML_BW_COPY] = 1, [ML_BW_ADD] = 1};
    int known = (unsigned)op < ML_BW_OP_COUNT;
    *reads = known ? r[op] : 0;
    *writes = known ? w[op] : 0;
}

ml_bw_width ml_bw_widest(void)
{
    for (int width = ML_BW_WIDTH_COUNT - 1; width > ML_BW_SCALAR; --width)
        if (ml_bw_width_supported((ml_bw_width)width, NULL))
            return (ml_bw_width)width;
    return ML_BW_SCALAR;
}

ml_bw_kernel ml_bw_kernel_for(ml_bw_op op, ml_bw_width width, ml_bw_stores stores, const char **why)
{
    const char *reason = NULL;
    if ((unsigned)op >= ML_BW_OP_COUNT || (unsigned)width >= ML_BW_WIDTH_COUNT ||
        (unsigned)stores >= ML_BW_STORES_COUNT)
        reason = "no such operation, width or store kind";
    else if (op == ML_BW_READ && stores == ML_BW_STORES_NONTEMPORAL)
        reason = "a read makes no stores: non-temporal stores apply to write and copy";
    else if (op == ML_BW_ADD && stores == ML_BW_STORES_NONTEMPORAL)
        reason = "add reads every line it writes (it is in the cache when stored): non-temporal "
                 "stores apply to write and copy";
    else if (!ml_bw_width_supported(width, &reason))
        ;
    else if (!bw_kernels[op][width][stores])
        reason = "non-temporal stores are x86-64 only in this build";
    if (why)
        *why = reason;
    return reason ? NULL : bw_kernels[op][width][stores];
}
