/* A bare C loop clearing a faulted region, with no memlab code in it: the
 * yardstick for "the harness costs nothing" (experiments/clear_harness.py).
 *
 *   gcc -O2 -march=native -o clear_bare clear_bare.c
 *   ./clear_bare REGION_BYTES 4k|thp memset|rep_stosb|vector|nontemporal EXTENT_BYTES PASSES
 *
 * Prints one line per timed pass:
 *   "pass <i> ns <wall> cpu_ns <thread CPU time> cpu_GB_per_s <rate> GB_per_s <rate>". */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef void (*zero_fn)(char *, size_t);

/* 256 bytes a turn, written out store by store (as memlab's clear_store.c does: a loop of one
 * store per branch is what gcc -O2 made of an inner loop, and it clears the caches slower) */
#define STORES4(STORE, P, STEP, V)                                                                 \
    STORE((void *)((P) + 0 * (STEP)), V), STORE((void *)((P) + 1 * (STEP)), V),                     \
        STORE((void *)((P) + 2 * (STEP)), V), STORE((void *)((P) + 3 * (STEP)), V)
#define STORES8(STORE, P, STEP, V) STORES4(STORE, P, STEP, V), STORES4(STORE, (P) + 4 * (STEP), STEP, V)

static uint64_t clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void zero_memset(char *p, size_t n)
{
    memset(p, 0, n);
}

static void zero_stosb(char *p, size_t n)
{
    __asm__ volatile("rep stosb" : "+D"(p), "+c"(n) : "a"(0) : "memory");
}

__attribute__((target("avx512f"))) static void zero_avx512(char *p, size_t n)
{
    __m512i z = _mm512_setzero_si512();
    __asm__("" : "+v"(z));
    for (size_t i = 0; i < n; i += 256)
        STORES4(_mm512_store_si512, p + i, 64, z);
}

__attribute__((target("avx512f"))) static void zero_avx512_nt(char *p, size_t n)
{
    __m512i z = _mm512_setzero_si512();
    for (size_t i = 0; i < n; i += 256)
        STORES4(_mm512_stream_si512, p + i, 64, z);
    _mm_sfence();
}

__attribute__((target("avx2"))) static void zero_avx2(char *p, size_t n)
{
    __m256i z = _mm256_setzero_si256();
    __asm__("" : "+x"(z));
    for (size_t i = 0; i < n; i += 256)
        STORES8(_mm256_store_si256, p + i, 32, z);
}

__attribute__((target("avx2"))) static void zero_avx2_nt(char *p, size_t n)
{
    __m256i z = _mm256_setzero_si256();
    for (size_t i = 0; i < n; i += 256)
        STORES8(_mm256_stream_si256, p + i, 32, z);
    _mm_sfence();
}

static zero_fn pick(const char *method)
{
    int wide = __builtin_cpu_supports("avx512f");
    if (!strcmp(method, "memset"))
        return zero_memset;
    if (!strcmp(method, "rep_stosb"))
        return zero_stosb;
    if (!strcmp(method, "vector"))
        return wide ? zero_avx512 : zero_avx2;
    if (!strcmp(method, "nontemporal"))
        return wide ? zero_avx512_nt : zero_avx2_nt;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: %s REGION_BYTES 4k|thp METHOD EXTENT_BYTES PASSES\n", argv[0]);
        return 2;
    }
    size_t bytes = strtoull(argv[1], NULL, 0), extent = strtoull(argv[4], NULL, 0);
    int passes = atoi(argv[5]);
    zero_fn zero = pick(argv[3]);
    if (!zero || extent == 0 || extent % 4096 || bytes % extent || passes < 1) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    size_t align = (size_t)2 << 20;
    char *raw = mmap(NULL, bytes + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    char *p = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
    madvise(p, bytes, strcmp(argv[2], "thp") ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
    for (size_t i = 0; i < bytes; i += 4096)
        p[i] = 1;
    memset(p, 0xA5, bytes);
    for (size_t i = 0; i < bytes; i += extent) /* warm-up pass */
        zero(p + i, extent);
    for (int pass = 0; pass < passes; pass++) {
        uint64_t cpu_start = clock_ns(CLOCK_THREAD_CPUTIME_ID), start = clock_ns(CLOCK_MONOTONIC);
        for (size_t i = 0; i < bytes; i += extent)
            zero(p + i, extent);
        uint64_t ns = clock_ns(CLOCK_MONOTONIC) - start, cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
        printf("pass %d ns %llu cpu_ns %llu cpu_GB_per_s %.4f GB_per_s %.4f\n", pass, (unsigned long long)ns,
               (unsigned long long)cpu, (double)bytes / (double)cpu, (double)bytes / (double)ns);
    }
    for (size_t i = 0; i < bytes; i += 4096)
        if (p[i] || p[i + 4095]) {
            fprintf(stderr, "not zero at %zu\n", i);
            return 1;
        }
    munmap(raw, bytes + align);
    return 0;
}
