/* The chase with nothing around it: no Python, no counters, no memlab.
 *
 * Builds the list exactly as csrc/chase.c does (same generator, same
 * Sattolo shuffle, same element layout: misalignment, pointer word, element
 * distance; same page kind and populate step) and walks it with the
 * plainest loop, timing whole samples with clock_gettime.  With THREADS > 1
 * every thread walks the one list from evenly spaced starts, each pinned to
 * its own CPU (the caller's first, then one per core), the same number of
 * steps; the fastest thread's time is printed, as memlab (and the source)
 * report it.  experiments/chase_vs_bare.py compiles and runs it beside
 * memlab.chase to show that memlab's walk costs only the walk.
 *
 * usage: chase_bare WORKING_SET_BYTES NPAD ORDER(sequential|random) PAGES(4k|thp)
 *                   SEED SAMPLES TARGET_MS [THREADS MISALIGN_BYTES POINTER_WORD ELEMENT_DISTANCE]
 * prints one line per sample: ns_per_element (wall clock) and
 * cpu_ns_per_element (the thread's CPU time: descheduled gaps excluded) */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define MAX_THREADS 64

typedef uint64_t word __attribute__((aligned(1)));

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

static word *walk(word *p, uint64_t steps)
{
    for (uint64_t i = 0; i < steps; i++)
        p = (word *)*p;
    return p;
}

typedef struct walker {
    pthread_t thread;
    int cpu;
    word *p;
    uint64_t steps, elapsed, on_cpu;
} walker;

static atomic_int go;
static walker walkers[MAX_THREADS];
static volatile uint64_t sink;

static void *run_walker(void *arg)
{
    walker *w = arg;
    while (!atomic_load_explicit(&go, memory_order_acquire))
        ;
    uint64_t c0 = thread_cpu_ns(), t0 = now_ns();
    w->p = walk(w->p, w->steps);
    w->elapsed = now_ns() - t0;
    w->on_cpu = thread_cpu_ns() - c0;
    return NULL;
}

static void pin(pthread_t thread, int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(thread, sizeof one, &one);
}

/* One CPU per core first, as memlab places its walking threads. */
static int pick_cpus(int threads)
{
    cpu_set_t allowed;
    pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed);
    int picked = 0;
    walkers[picked++].cpu = sched_getcpu();
    for (int pass = 0; pass < 2 && picked < threads; pass++) {
        for (int c = 0; c < CPU_SETSIZE && picked < threads; c++) {
            int taken = 0, sibling = 0;
            for (int t = 0; t < picked; t++) {
                taken |= walkers[t].cpu == c;
                char path[96], line[256];
                snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c);
                FILE *f = fopen(path, "r");
                if (f && fgets(line, sizeof line, f)) {
                    char needle[16];
                    snprintf(needle, sizeof needle, "%d", walkers[t].cpu);
                    for (char *tok = strtok(line, ",-\n"); tok; tok = strtok(NULL, ",-\n"))
                        sibling |= strcmp(tok, needle) == 0;
                }
                if (f)
                    fclose(f);
            }
            if (CPU_ISSET(c, &allowed) && !taken && (pass == 1 || !sibling))
                walkers[picked++].cpu = c;
        }
    }
    return picked;
}

int main(int argc, char **argv)
{
    if (argc != 8 && argc != 12) {
        fprintf(stderr, "usage: %s WORKING_SET_BYTES NPAD ORDER PAGES SEED SAMPLES TARGET_MS "
                        "[THREADS MISALIGN_BYTES POINTER_WORD ELEMENT_DISTANCE]\n", argv[0]);
        return 2;
    }
    uint64_t working_set = strtoull(argv[1], NULL, 10), npad = strtoull(argv[2], NULL, 10);
    int random_order = strcmp(argv[3], "random") == 0, thp = strcmp(argv[4], "thp") == 0;
    uint64_t seed = strtoull(argv[5], NULL, 10);
    int samples = atoi(argv[6]);
    double target_ns = atof(argv[7]) * 1e6;
    int threads = argc == 12 ? atoi(argv[8]) : 1;
    uint64_t misalign = argc == 12 ? strtoull(argv[9], NULL, 10) : 0;
    uint64_t pointer_word = argc == 12 ? strtoull(argv[10], NULL, 10) : 0;
    uint64_t distance = argc == 12 ? strtoull(argv[11], NULL, 10) : 1;
    uint64_t element = 8 * (npad + 1), n = working_set / element, words = element / 8;
    uint64_t slot = element * distance;
    size_t page = thp ? 2u << 20 : 4096u, bytes = n * slot + misalign;
    size_t map_bytes = (bytes + page - 1) / page * page + page;
    if (threads < 1 || threads > MAX_THREADS || pick_cpus(threads) < threads) {
        fprintf(stderr, "threads=%d: not enough CPUs\n", threads);
        return 1;
    }
    char *map = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED || n < 1) {
        perror("mmap");
        return 1;
    }
    char *base = (char *)(((uintptr_t)map + page - 1) / page * page);
    madvise(base, (bytes + 4095) / 4096 * 4096, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    for (size_t off = 0; off < bytes; off += 4096)
        ((volatile char *)base)[off] = 0;
#define ELEMENT(i) ((word *)(base + misalign + (i) * slot))
#define NEXT(i) (ELEMENT(i) + pointer_word)
    for (uint64_t i = 0; i < n; i++) {
        for (uint64_t w = 0; w < words; w++)
            ELEMENT(i)[w] = w == (pointer_word == 1 ? 0 : 1) || (w == words - 1 && words > 2) ? i + 1 : 0;
        *NEXT(i) = random_order ? i : (i + 1) % n;
    }
    if (random_order) {
        uint64_t state = seed;
        for (uint64_t i = n - 1; i >= 1; i--) {
            uint64_t j = below(&state, i), t = *NEXT(i);
            *NEXT(i) = *NEXT(j);
            *NEXT(j) = t;
        }
    }
    for (uint64_t i = 0; i < n; i++)
        *NEXT(i) = (uint64_t)NEXT(*NEXT(i));

    for (int t = 0; t < threads; t++) {
        word *p = NEXT(0);
        for (uint64_t i = 0; i < n * (uint64_t)t / (uint64_t)threads; i++)
            p = (word *)*p;
        walkers[t].p = p;
    }
    pin(pthread_self(), walkers[0].cpu);
    uint64_t probe = 1024, t0 = now_ns();
    walkers[0].p = walk(walkers[0].p, probe);
    double estimate = (double)(now_ns() - t0) / (double)probe;
    for (int s = -1; s < samples; s++) { /* sample -1 warms up */
        uint64_t steps = (uint64_t)(target_ns / (estimate > 0.01 ? estimate : 0.01));
        if (steps >= n)
            steps = (steps + n - 1) / n * n;
        if (steps < 1)
            steps = 1;
        atomic_store(&go, 0);
        for (int t = 0; t < threads; t++)
            walkers[t].steps = steps;
        for (int t = 1; t < threads; t++) {
            pthread_create(&walkers[t].thread, NULL, run_walker, &walkers[t]);
            pin(walkers[t].thread, walkers[t].cpu);
        }
        atomic_store_explicit(&go, 1, memory_order_release);
        run_walker(&walkers[0]);
        for (int t = 1; t < threads; t++)
            pthread_join(walkers[t].thread, NULL);
        const walker *fastest = &walkers[0];
        for (int t = 1; t < threads; t++)
            if (walkers[t].elapsed < fastest->elapsed)
                fastest = &walkers[t];
        estimate = (double)walkers[0].elapsed / (double)steps;
        if (s >= 0)
            printf("%.4f %.4f\n", (double)fastest->elapsed / (double)steps,
                   (double)fastest->on_cpu / (double)steps);
    }
    for (int t = 0; t < threads; t++)
        sink += (uint64_t)walkers[t].p;
    fprintf(stderr, "end %llx\n", (unsigned long long)sink);
    return 0;
}
