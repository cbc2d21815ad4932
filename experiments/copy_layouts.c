/* Where a copy's source and destination sit, and what it costs: one process, layouts
 * alternating pass by pass, so that a loaded machine's noise falls on every layout alike.
 *
 * Layouts of a copy of WORKING_SET_BYTES / 2 bytes (the working set is all memory touched):
 *   halves     one region, the first half copied into the second (memlab's bandwidth copy)
 *   apart      two separate mappings of half the working set each
 *   offset64   one region, the destination 64 bytes past the half (source and destination
 *              no longer at the same offset in a 4 KiB page)
 *   offset2k   the same, 2048 bytes past
 *   apart64    two mappings, the destination 64 bytes into its mapping
 * Every region is of the page kind asked (THP: madvise(MADV_HUGEPAGE), 2 MiB aligned) and is
 * filled before the first pass: sources with a pattern, destinations with zeros.
 * The copy is an eight-vector loop of aligned loads and stores, the widest of AVX-512 and
 * AVX2 the CPU runs, as memlab's copy kernels.
 *
 * usage: copy_layouts WORKING_SET_BYTES ROUNDS [thp|4k] [forward|reverse]
 *   (the regions are mapped and filled in the order above, or in the reverse order: memory
 *   allocated first may be backed differently, by the guest's and the host's allocators)
 * prints per layout: the median over rounds of bytes read plus written per second of the
 * thread's CPU time and of wall time (GB/s), and the median of each round's on-CPU rate over
 * the halves layout's in the same round. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define LAYOUTS 5

static const char *const names[LAYOUTS] = {"halves", "apart", "offset64", "offset2k", "apart64"};

static uint64_t now_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

__attribute__((noinline, target("avx512f"))) static void copy_avx512(const char *src, char *dst, size_t n)
{
    const __m512i *s = (const __m512i *)src, *e = (const __m512i *)(src + n);
    __m512i *d = (__m512i *)dst;
    for (; s < e; s += 8, d += 8) {
        __m512i x0 = _mm512_load_si512(s), x1 = _mm512_load_si512(s + 1), x2 = _mm512_load_si512(s + 2);
        __m512i x3 = _mm512_load_si512(s + 3), x4 = _mm512_load_si512(s + 4), x5 = _mm512_load_si512(s + 5);
        __m512i x6 = _mm512_load_si512(s + 6), x7 = _mm512_load_si512(s + 7);
        _mm512_store_si512(d, x0), _mm512_store_si512(d + 1, x1), _mm512_store_si512(d + 2, x2);
        _mm512_store_si512(d + 3, x3), _mm512_store_si512(d + 4, x4), _mm512_store_si512(d + 5, x5);
        _mm512_store_si512(d + 6, x6), _mm512_store_si512(d + 7, x7);
    }
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline, target("avx2"))) static void copy_avx2(const char *src, char *dst, size_t n)
{
    const __m256i *s = (const __m256i *)src, *e = (const __m256i *)(src + n);
    __m256i *d = (__m256i *)dst;
    for (; s < e; s += 8, d += 8) {
        __m256i x0 = _mm256_load_si256(s), x1 = _mm256_load_si256(s + 1), x2 = _mm256_load_si256(s + 2);
        __m256i x3 = _mm256_load_si256(s + 3), x4 = _mm256_load_si256(s + 4), x5 = _mm256_load_si256(s + 5);
        __m256i x6 = _mm256_load_si256(s + 6), x7 = _mm256_load_si256(s + 7);
        _mm256_store_si256(d, x0), _mm256_store_si256(d + 1, x1), _mm256_store_si256(d + 2, x2);
        _mm256_store_si256(d + 3, x3), _mm256_store_si256(d + 4, x4), _mm256_store_si256(d + 5, x5);
        _mm256_store_si256(d + 6, x6), _mm256_store_si256(d + 7, x7);
    }
    __asm__ volatile("" ::: "memory");
}

static char *map_region(size_t bytes, int thp)
{
    size_t page = thp ? 2u << 20 : 4096u, map = (bytes + page - 1) / page * page + page;
    char *raw = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    char *start = (char *)(((uintptr_t)raw + page - 1) / page * page);
    madvise(start, bytes, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    return start; /* unmapped at exit */
}

static void fill(char *p, size_t n, int pattern)
{
    for (size_t i = 0; i < n / 8; i++)
        ((uint64_t *)p)[i] = pattern ? (i + 1) * 0x9e3779b97f4a7c15ull : 0;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* the median of n values, sorted in scratch (v stays as it is) */
static double median(const double *v, double *scratch, int n)
{
    memcpy(scratch, v, (size_t)n * sizeof *v);
    qsort(scratch, (size_t)n, sizeof *scratch, by_value);
    return n % 2 ? scratch[n / 2] : (scratch[n / 2 - 1] + scratch[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s WORKING_SET_BYTES ROUNDS [thp|4k]\n", argv[0]);
        return 2;
    }
    size_t bytes = strtoull(argv[1], NULL, 10), half = bytes / 2;
    int rounds = atoi(argv[2]), thp = argc > 3 && !strcmp(argv[3], "thp");
    int reverse = argc > 4 && !strcmp(argv[4], "reverse");
    if (bytes < 4096 || bytes % 4096 || rounds < 1) {
        fprintf(stderr, "WORKING_SET_BYTES must be a multiple of 4096, ROUNDS at least 1\n");
        return 2;
    }
    void (*copy)(const char *, char *, size_t) = __builtin_cpu_supports("avx512f") ? copy_avx512 : copy_avx2;
    const char *src[LAYOUTS];
    char *dst[LAYOUTS];
    for (int k = 0; k < LAYOUTS; k++) {
        int l = reverse ? LAYOUTS - 1 - k : k;
        size_t extra = l == 2 ? 64 : l == 3 ? 2048 : 0;
        if (l == 1 || l == 4) {
            char *s = map_region(half, thp), *d = map_region(half + 64, thp);
            fill(s, half, 1);
            fill(d, half + 64, 0);
            src[l] = s;
            dst[l] = d + (l == 4 ? 64 : 0);
        } else {
            char *r = map_region(bytes + extra, thp);
            fill(r, half, 1);
            fill(r + half, half + extra, 0);
            src[l] = r;
            dst[l] = r + half + extra;
        }
        copy(src[l], dst[l], half); /* warm-up pass */
    }
    double *cpu_rate = calloc((size_t)(LAYOUTS * rounds), sizeof(double));
    double *wall_rate = calloc((size_t)(LAYOUTS * rounds), sizeof(double));
    double *ratio = calloc((size_t)rounds, sizeof(double)), *scratch = calloc((size_t)rounds, sizeof(double));
    if (!cpu_rate || !wall_rate || !ratio || !scratch)
        return 1;
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < LAYOUTS; k++) {
            int l = (k + r) % LAYOUTS; /* each layout takes every place in the order in turn */
            uint64_t wall0 = now_ns(CLOCK_MONOTONIC), cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
            copy(src[l], dst[l], half);
            uint64_t cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0, wall = now_ns(CLOCK_MONOTONIC) - wall0;
            cpu_rate[l * rounds + r] = (double)bytes / (double)cpu;
            wall_rate[l * rounds + r] = (double)bytes / (double)wall;
        }
    printf("%-10s %14s %12s %26s\n", "layout", "on-CPU GB/s", "wall GB/s", "on-CPU / halves per round");
    for (int l = 0; l < LAYOUTS; l++) {
        for (int r = 0; r < rounds; r++)
            ratio[r] = cpu_rate[l * rounds + r] / cpu_rate[r];
        double q = median(ratio, scratch, rounds);
        double c = median(cpu_rate + l * rounds, scratch, rounds), w = median(wall_rate + l * rounds, scratch, rounds);
        printf("%-10s %14.2f %12.2f %26.4f\n", names[l], c, w, q);
    }
    free(cpu_rate);
    free(wall_rate);
    free(ratio);
    free(scratch);
    return 0;
}
