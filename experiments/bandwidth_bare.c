/* Bandwidth loops with nothing around them: no Python, no threads, no memlab.
 *
 * experiments/bandwidth_vs_bare.py compiles this and runs it beside
 * memlab.bandwidth, alternately and pinned to the same CPU, to show
 *   1. that memlab's read / write / copy cost only the loop (the same kind of
 *      loop written here on its own: eight vectors per turn, the widest width);
 *   2. how memlab's best rates compare with the loops other tools time, written
 *      here in their style: STREAM's copy and triad (double arrays, compiled
 *      loops), tinymembench's SSE2 non-temporal fill and copy (movntdq,
 *      prefetchnta ahead of the copy), and glibc's memset and memcpy.
 *
 * usage: bandwidth_bare MODE WIDTH WORKING_SET_BYTES SAMPLES TARGET_MS [4k|thp] [LAYOUT]
 *   (WORKING_SET_BYTES: a multiple of 1024)
 *   LAYOUT (copies): halves (default: the first half of one region into its second half, as
 *   memlab copied before 2026-12-07), apart (two separate mappings of half the working set
 *   each, both of the page kind asked: as memlab copies), offset=N (one region, the destination N bytes past its half: N a
 *   multiple of 64, to move the destination's addresses against the source's)
 *   MODE: read write copy write_nt copy_nt stream_copy stream_triad tmb_fill_nt
 *         tmb_copy_nt memset memcpy
 *   WIDTH: scalar sse2 avx2 avx512 (read/write/copy/_nt only)
 * The working set is all memory touched (copy: two halves; triad: three
 * thirds).  One line per sample: traffic GB/s by wall clock, traffic GB/s on
 * the CPU (thread CPU time), where traffic is bytes read plus bytes written
 * (STREAM's count; memlab's copy counts bytes copied, half of it). */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static uint64_t now_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Where the copies write: the second half of the region (memlab's layout), or the mapping or
 * offset the LAYOUT argument chose. */
static char *copy_dst;
#define DST(a, n) (copy_dst ? copy_dst : (a) + (n) / 2)

#define KEEP(v) __asm__ volatile("" ::"x"(v))
#define KEEPW(v) __asm__ volatile("" ::"r"(v))
#define PASSES for (uint64_t pass = 0; pass < passes; pass++)

/* ---- the memlab kind of loop, written again: 8 vectors per turn ---- */

#define LOOPS(NAME, T, VEC, LOAD, STORE, STREAM, SET1)                                    \
    __attribute__((noinline, target(T))) static void read_##NAME(char *a, size_t n,      \
                                                                 uint64_t passes)        \
    {                                                                                    \
        PASSES for (VEC *p = (VEC *)a, *e = (VEC *)(a + n); p < e; p += 8) {             \
            VEC x0 = LOAD(p), x1 = LOAD(p + 1), x2 = LOAD(p + 2), x3 = LOAD(p + 3);      \
            VEC x4 = LOAD(p + 4), x5 = LOAD(p + 5), x6 = LOAD(p + 6), x7 = LOAD(p + 7);  \
            KEEP(x0); KEEP(x1); KEEP(x2); KEEP(x3); KEEP(x4); KEEP(x5); KEEP(x6); KEEP(x7); \
        }                                                                                \
    }                                                                                    \
    __attribute__((noinline, target(T))) static void write_##NAME(char *a, size_t n,     \
                                                                  uint64_t passes)       \
    {                                                                                    \
        VEC v = SET1(0x5a5a5a5a5a5a5a5all);                                              \
        PASSES {                                                                         \
            for (VEC *p = (VEC *)a, *e = (VEC *)(a + n); p < e; p += 8) {                \
                STORE(p, v); STORE(p + 1, v); STORE(p + 2, v); STORE(p + 3, v);          \
                STORE(p + 4, v); STORE(p + 5, v); STORE(p + 6, v); STORE(p + 7, v);      \
            }                                                                            \
            __asm__ volatile("" ::: "memory");                                           \
        }                                                                                \
    }                                                                                    \
    __attribute__((noinline, target(T))) static void write_nt_##NAME(char *a, size_t n,  \
                                                                     uint64_t passes)    \
    {                                                                                    \
        VEC v = SET1(0x5a5a5a5a5a5a5a5all);                                              \
        PASSES for (VEC *p = (VEC *)a, *e = (VEC *)(a + n); p < e; p += 8) {             \
            STREAM(p, v); STREAM(p + 1, v); STREAM(p + 2, v); STREAM(p + 3, v);          \
            STREAM(p + 4, v); STREAM(p + 5, v); STREAM(p + 6, v); STREAM(p + 7, v);      \
        }                                                                                \
        _mm_sfence();                                                                    \
    }                                                                                    \
    __attribute__((noinline, target(T))) static void copy_##NAME(char *a, size_t n,      \
                                                                 uint64_t passes)        \
    {                                                                                    \
        PASSES {                                                                         \
            VEC *d = (VEC *)DST(a, n);                                                 \
            for (VEC *s = (VEC *)a, *e = (VEC *)(a + n / 2); s < e; s += 8, d += 8) {    \
                VEC x0 = LOAD(s), x1 = LOAD(s + 1), x2 = LOAD(s + 2), x3 = LOAD(s + 3);  \
                VEC x4 = LOAD(s + 4), x5 = LOAD(s + 5), x6 = LOAD(s + 6), x7 = LOAD(s + 7); \
                STORE(d, x0); STORE(d + 1, x1); STORE(d + 2, x2); STORE(d + 3, x3);      \
                STORE(d + 4, x4); STORE(d + 5, x5); STORE(d + 6, x6); STORE(d + 7, x7);  \
            }                                                                            \
            __asm__ volatile("" ::: "memory");                                           \
        }                                                                                \
    }                                                                                    \
    __attribute__((noinline, target(T))) static void copy_nt_##NAME(char *a, size_t n,   \
                                                                    uint64_t passes)     \
    {                                                                                    \
        PASSES {                                                                         \
            VEC *d = (VEC *)DST(a, n);                                                 \
            for (VEC *s = (VEC *)a, *e = (VEC *)(a + n / 2); s < e; s += 8, d += 8) {    \
                VEC x0 = LOAD(s), x1 = LOAD(s + 1), x2 = LOAD(s + 2), x3 = LOAD(s + 3);  \
                VEC x4 = LOAD(s + 4), x5 = LOAD(s + 5), x6 = LOAD(s + 6), x7 = LOAD(s + 7); \
                STREAM(d, x0); STREAM(d + 1, x1); STREAM(d + 2, x2); STREAM(d + 3, x3);  \
                STREAM(d + 4, x4); STREAM(d + 5, x5); STREAM(d + 6, x6); STREAM(d + 7, x7); \
            }                                                                            \
        }                                                                                \
        _mm_sfence();                                                                    \
    }

LOOPS(sse2, "sse2", __m128i, _mm_load_si128, _mm_store_si128, _mm_stream_si128, _mm_set1_epi64x)
LOOPS(avx2, "avx2", __m256i, _mm256_load_si256, _mm256_store_si256, _mm256_stream_si256,
      _mm256_set1_epi64x)
LOOPS(avx512, "avx512f", __m512i, _mm512_load_si512, _mm512_store_si512, _mm512_stream_si512,
      _mm512_set1_epi64)

__attribute__((noinline)) static void read_scalar(char *a, size_t n, uint64_t passes)
{
    PASSES for (uint64_t *p = (uint64_t *)a, *e = (uint64_t *)(a + n); p < e; p += 8) {
        uint64_t x0 = p[0], x1 = p[1], x2 = p[2], x3 = p[3], x4 = p[4], x5 = p[5], x6 = p[6], x7 = p[7];
        KEEPW(x0); KEEPW(x1); KEEPW(x2); KEEPW(x3); KEEPW(x4); KEEPW(x5); KEEPW(x6); KEEPW(x7);
    }
}

/* volatile: plain 8-byte stores, not turned into memset or vectorised */
__attribute__((noinline)) static void write_scalar(char *a, size_t n, uint64_t passes)
{
    PASSES for (volatile uint64_t *p = (uint64_t *)a, *e = (uint64_t *)(a + n); p < e; p += 8) {
        p[0] = 1, p[1] = 1, p[2] = 1, p[3] = 1, p[4] = 1, p[5] = 1, p[6] = 1, p[7] = 1;
    }
}

__attribute__((noinline)) static void write_nt_scalar(char *a, size_t n, uint64_t passes)
{
    PASSES for (long long *p = (long long *)a, *e = (long long *)(a + n); p < e; p += 8)
        for (int i = 0; i < 8; i++)
            _mm_stream_si64(p + i, 1);
    _mm_sfence();
}

__attribute__((noinline)) static void copy_scalar(char *a, size_t n, uint64_t passes)
{
    PASSES {
        volatile uint64_t *d = (uint64_t *)DST(a, n);
        for (uint64_t *s = (uint64_t *)a, *e = (uint64_t *)(a + n / 2); s < e; s += 8, d += 8) {
            uint64_t x0 = s[0], x1 = s[1], x2 = s[2], x3 = s[3], x4 = s[4], x5 = s[5], x6 = s[6], x7 = s[7];
            d[0] = x0, d[1] = x1, d[2] = x2, d[3] = x3, d[4] = x4, d[5] = x5, d[6] = x6, d[7] = x7;
        }
    }
}

__attribute__((noinline)) static void copy_nt_scalar(char *a, size_t n, uint64_t passes)
{
    PASSES {
        long long *d = (long long *)DST(a, n);
        for (long long *s = (long long *)a, *e = (long long *)(a + n / 2); s < e; s += 8, d += 8)
            for (int i = 0; i < 8; i++)
                _mm_stream_si64(d + i, s[i]);
    }
    _mm_sfence();
}

/* ---- STREAM's kernels (double arrays, compiled loops; -O3 -march=native) ---- */

__attribute__((noinline)) static void stream_copy(char *a, size_t n, uint64_t passes)
{
    size_t count = n / 2 / sizeof(double);
    double *restrict x = (double *)a, *restrict c = (double *)DST(a, n);
    PASSES {
        for (size_t j = 0; j < count; j++)
            c[j] = x[j];
        __asm__ volatile("" ::: "memory");
    }
}

__attribute__((noinline)) static void stream_triad(char *a, size_t n, uint64_t passes)
{
    size_t count = n / 3 / sizeof(double) / 8 * 8;
    double *restrict x = (double *)a, *restrict b = x + count, *restrict c = b + count;
    const double q = 3.0;
    PASSES {
        for (size_t j = 0; j < count; j++)
            x[j] = b[j] + q * c[j];
        __asm__ volatile("" ::: "memory");
    }
}

/* ---- tinymembench's SSE2 non-temporal fill and copy (64-byte blocks) ---- */

__attribute__((noinline)) static void tmb_fill_nt(char *a, size_t n, uint64_t passes)
{
    __m128i v = _mm_setzero_si128();
    PASSES for (char *p = a, *e = a + n; p < e; p += 64) {
        _mm_stream_si128((__m128i *)p, v);
        _mm_stream_si128((__m128i *)(p + 16), v);
        _mm_stream_si128((__m128i *)(p + 32), v);
        _mm_stream_si128((__m128i *)(p + 48), v);
    }
    _mm_sfence();
}

__attribute__((noinline)) static void tmb_copy_nt(char *a, size_t n, uint64_t passes)
{
    PASSES {
        char *d = DST(a, n);
        for (char *s = a, *e = a + n / 2; s < e; s += 64, d += 64) {
            _mm_prefetch(s + 320, _MM_HINT_NTA);
            __m128i x0 = _mm_load_si128((__m128i *)s), x1 = _mm_load_si128((__m128i *)(s + 16));
            __m128i x2 = _mm_load_si128((__m128i *)(s + 32)), x3 = _mm_load_si128((__m128i *)(s + 48));
            _mm_stream_si128((__m128i *)d, x0);
            _mm_stream_si128((__m128i *)(d + 16), x1);
            _mm_stream_si128((__m128i *)(d + 32), x2);
            _mm_stream_si128((__m128i *)(d + 48), x3);
        }
    }
    _mm_sfence();
}

__attribute__((noinline)) static void libc_memset(char *a, size_t n, uint64_t passes)
{
    PASSES {
        memset(a, (int)(pass & 0xff), n);
        __asm__ volatile("" ::: "memory");
    }
}

__attribute__((noinline)) static void libc_memcpy(char *a, size_t n, uint64_t passes)
{
    PASSES {
        memcpy(DST(a, n), a, n / 2);
        __asm__ volatile("" ::: "memory");
    }
}

typedef void (*loop_fn)(char *, size_t, uint64_t);

/* A mapping of map bytes whose start is rounded up to page (the raw start in *raw). */
static char *map_aligned(size_t map, size_t page, char **raw)
{
    *raw = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (*raw == MAP_FAILED) {
        perror("mmap");
        return NULL;
    }
    return (char *)(((uintptr_t)*raw + page - 1) / page * page);
}

static loop_fn pick(const char *mode, const char *width)
{
    static const struct { const char *mode, *width; loop_fn fn; } table[] = {
        {"read", "scalar", read_scalar}, {"read", "sse2", read_sse2}, {"read", "avx2", read_avx2},
        {"read", "avx512", read_avx512}, {"write", "scalar", write_scalar}, {"write", "sse2", write_sse2},
        {"write", "avx2", write_avx2}, {"write", "avx512", write_avx512},
        {"write_nt", "scalar", write_nt_scalar}, {"write_nt", "sse2", write_nt_sse2},
        {"write_nt", "avx2", write_nt_avx2}, {"write_nt", "avx512", write_nt_avx512},
        {"copy", "scalar", copy_scalar}, {"copy", "sse2", copy_sse2}, {"copy", "avx2", copy_avx2},
        {"copy", "avx512", copy_avx512}, {"copy_nt", "scalar", copy_nt_scalar},
        {"copy_nt", "sse2", copy_nt_sse2}, {"copy_nt", "avx2", copy_nt_avx2},
        {"copy_nt", "avx512", copy_nt_avx512},
    };
    static const struct { const char *mode; loop_fn fn; } tools[] = {
        {"stream_copy", stream_copy}, {"stream_triad", stream_triad}, {"tmb_fill_nt", tmb_fill_nt},
        {"tmb_copy_nt", tmb_copy_nt}, {"memset", libc_memset}, {"memcpy", libc_memcpy},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (!strcmp(mode, table[i].mode) && !strcmp(width, table[i].width))
            return table[i].fn;
    for (size_t i = 0; i < sizeof tools / sizeof *tools; i++)
        if (!strcmp(mode, tools[i].mode))
            return tools[i].fn;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s MODE WIDTH WORKING_SET_BYTES SAMPLES TARGET_MS [4k|thp]\n", argv[0]);
        return 2;
    }
    loop_fn fn = pick(argv[1], argv[2]);
    size_t bytes = strtoull(argv[3], NULL, 10);
    int samples = atoi(argv[4]);
    double target_ns = atof(argv[5]) * 1e6;
    int thp = argc > 6 && !strcmp(argv[6], "thp");
    const char *layout = argc > 7 ? argv[7] : "halves";
    int apart = !strcmp(layout, "apart");
    size_t offset = !strncmp(layout, "offset=", 7) ? strtoull(layout + 7, NULL, 10) : 0;
    if (!fn || bytes < 1024 || bytes % 1024 || offset % 64
        || (!apart && !offset && strcmp(layout, "halves"))) { /* copies: two halves of whole 8-vector turns */
        fprintf(stderr, "unknown mode/width/layout, a size that is not a multiple of 1024, or an offset "
                        "that is not a multiple of 64\n");
        return 2;
    }
    /* traffic per pass: bytes read plus bytes written */
    double traffic = !strcmp(argv[1], "stream_triad") ? 3.0 * (double)(bytes / 3 / 8 / 8 * 8) * 8.0
                                                      : (double)bytes;
    size_t page = thp ? 2u << 20 : 4096u;
    size_t first = apart ? bytes / 2 : bytes + offset;
    size_t map = (first + page - 1) / page * page + page;
    char *raw;
    char *a = map_aligned(map, page, &raw);
    if (!a)
        return 1;
    madvise(a, first, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    for (size_t i = 0; i < first / 8; i++) /* populate: every word written, as memlab does */
        ((uint64_t *)a)[i] = (i + 1) * 0x9e3779b97f4a7c15ull;
    char *raw_second = NULL;
    size_t map_second = apart ? (bytes / 2 + page - 1) / page * page + page : 0;
    if (apart) {
        copy_dst = map_aligned(map_second, page, &raw_second);
        if (!copy_dst)
            return 1;
        madvise(copy_dst, bytes / 2, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
        memset(copy_dst, 0, bytes / 2);
    } else if (offset) {
        copy_dst = a + bytes / 2 + offset;
    }
    fn(a, bytes, 1); /* warm-up pass */
    double ns_per_pass = 0;
    for (int s = 0; s < samples; s++) {
        uint64_t passes = 0, wall0 = now_ns(CLOCK_MONOTONIC), cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        uint64_t wall = 0;
        while (wall < target_ns) { /* a few batches of whole passes per sample */
            uint64_t batch = ns_per_pass > 0 ? (uint64_t)((target_ns - wall) / ns_per_pass / 2) + 1 : 1;
            fn(a, bytes, batch);
            passes += batch;
            wall = now_ns(CLOCK_MONOTONIC) - wall0;
            ns_per_pass = (double)wall / (double)passes;
        }
        uint64_t cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
        double moved = traffic * (double)passes;
        printf("%.4f %.4f\n", moved / (double)wall, moved / (double)cpu);
    }
    munmap(raw, map);
    if (raw_second)
        munmap(raw_second, map_second);
    return 0;
}
