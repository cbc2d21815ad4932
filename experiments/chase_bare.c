/* The chase with nothing around it: no Python, no counters, no memlab.
 *
 * Builds the list exactly as csrc/chase.c does (same generator, same
 * Sattolo shuffle, same element layout, same page kind and populate step)
 * and walks it with the plainest loop, timing whole samples with
 * clock_gettime.  experiments/chase_vs_bare.py compiles and runs it beside
 * memlab.chase to show that memlab's walk costs only the walk.
 *
 * usage: chase_bare WORKING_SET_BYTES NPAD ORDER(sequential|random) PAGES(4k|thp)
 *                   SEED SAMPLES TARGET_MS
 * prints one line per sample: ns_per_element (wall clock) and
 * cpu_ns_per_element (the thread's CPU time: descheduled gaps excluded) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t *state, uint64_t bound)
{
    unsigned __int128 m = (unsigned __int128)next_random(state) * bound;
    uint64_t low = (uint64_t)m;
    if (low < bound) {
        uint64_t threshold = (0 - bound) % bound;
        while (low < threshold) {
            m = (unsigned __int128)next_random(state) * bound;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

static void **walk(void **p, uint64_t steps)
{
    for (uint64_t i = 0; i < steps; i++)
        p = (void **)*p;
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: %s WORKING_SET_BYTES NPAD ORDER PAGES SEED SAMPLES TARGET_MS\n", argv[0]);
        return 2;
    }
    uint64_t working_set = strtoull(argv[1], NULL, 10), npad = strtoull(argv[2], NULL, 10);
    int random_order = strcmp(argv[3], "random") == 0, thp = strcmp(argv[4], "thp") == 0;
    uint64_t seed = strtoull(argv[5], NULL, 10);
    int samples = atoi(argv[6]);
    double target_ns = atof(argv[7]) * 1e6;
    uint64_t element = 8 * (npad + 1), n = working_set / element, words = element / 8;
    size_t page = thp ? 2u << 20 : 4096u, bytes = n * element;
    size_t map_bytes = (bytes + page - 1) / page * page + page;
    char *map = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED || n < 1) {
        perror("mmap");
        return 1;
    }
    uint64_t *base = (uint64_t *)(((uintptr_t)map + page - 1) / page * page);
    madvise(base, (bytes + 4095) / 4096 * 4096, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    for (size_t off = 0; off < bytes; off += 4096)
        ((volatile char *)base)[off] = 0;
    for (uint64_t i = 0; i < n; i++) {
        base[i * words] = random_order ? i : (i + 1) % n;
        for (uint64_t w = 1; w < words; w++)
            base[i * words + w] = w == 1 ? i + 1 : 0;
    }
    if (random_order) {
        uint64_t state = seed;
        for (uint64_t i = n - 1; i >= 1; i--) {
            uint64_t j = below(&state, i), t = base[i * words];
            base[i * words] = base[j * words];
            base[j * words] = t;
        }
    }
    for (uint64_t i = 0; i < n; i++)
        base[i * words] = (uint64_t)(base + base[i * words] * words);

    void **p = (void **)base;
    uint64_t probe = 1024, t0 = now_ns();
    p = walk(p, probe);
    double estimate = (double)(now_ns() - t0) / (double)probe;
    for (int s = -1; s < samples; s++) { /* sample -1 warms up */
        uint64_t steps = (uint64_t)(target_ns / (estimate > 0.01 ? estimate : 0.01));
        if (steps >= n)
            steps = (steps + n - 1) / n * n;
        if (steps < 1)
            steps = 1;
        uint64_t c0 = thread_cpu_ns();
        t0 = now_ns();
        p = walk(p, steps);
        uint64_t elapsed = now_ns() - t0;
        uint64_t on_cpu = thread_cpu_ns() - c0;
        estimate = (double)elapsed / (double)steps;
        if (s >= 0)
            printf("%.4f %.4f\n", estimate, (double)on_cpu / (double)steps);
    }
    fprintf(stderr, "end %p\n", (void *)p);
    return 0;
}
