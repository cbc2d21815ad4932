/* A bare core-to-core ping-pong in the style of multichase's `pingpong`:
 * two threads pinned to two CPUs pass a token in one cache line, a fixed
 * number of round trips timed as a whole, nothing else; the two threads
 * stay up for all samples, which follow each other without a pause.  Written apart
 * from memlab's csrc/core_to_core.c (no chunks, no stop flag, no median
 * inside a sample) so that experiments/core_to_core_vs_bare.py can compare
 * the two.
 *
 * With LINES above 1, sample s bounces line s % LINES, each line on a 4 KiB
 * page of its own (a line's round trip depends on its address), its counter
 * going on from where its last sample left it; 1 (the default) is one line
 * for the whole run, as multichase does.
 *
 * usage: core_to_core_bare CPU_A CPU_B cas|store ROUND_TRIPS SAMPLES [LINES]
 * prints one line per sample: ns per round trip (wall) */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile uint64_t **tokens; /* tokens[l]: line l's counter */
static int use_cas;
static uint64_t per_sample, lines;
static int samples;
static volatile int started;


static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        exit(2);
    }
}

/* Sample s on line s % lines, whose counter stands at 2 * per_sample * (s / lines).
 * Each step waits for `mine` in the token and writes mine + 1: the counter
 * goes 0 -> 1 (ping) -> 2 (pong) -> ...  The method and the count are read
 * once, before the loop: a locked instruction orders the loads after it,
 * and reloading the two from memory at every step (as the first version of
 * this program did) cost 9 ns a step on the development guest. */
static void play(int s, uint64_t odd)
{
    volatile uint64_t *token = tokens[(uint64_t)s % lines];
    const uint64_t n = per_sample, first = n * ((uint64_t)s / lines);
    if (use_cas) {
        for (uint64_t mine = 2 * first + odd; mine < 2 * (first + n); mine += 2)
            while (!__sync_bool_compare_and_swap(token, mine, mine + 1))
                ;
    } else {
        for (uint64_t mine = 2 * first + odd; mine < 2 * (first + n); mine += 2) {
            while (*token != mine)
                __builtin_ia32_pause();
            __atomic_store_n(token, mine + 1, __ATOMIC_RELEASE);
        }
    }
}

static void *pong(void *arg)
{
    pin(*(int *)arg);
    __sync_fetch_and_add(&started, 1);
    for (int s = 0; s < samples; s++)
        play(s, 1);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: %s CPU_A CPU_B cas|store ROUND_TRIPS SAMPLES [LINES]\n", argv[0]);
        return 2;
    }
    int cpu_a = atoi(argv[1]), cpu_b = atoi(argv[2]);
    use_cas = strcmp(argv[3], "cas") == 0;
    per_sample = strtoull(argv[4], NULL, 10);
    samples = atoi(argv[5]);
    lines = argc == 7 ? strtoull(argv[6], NULL, 10) : 1;
    if (per_sample < 1 || samples < 1 || lines < 1 || lines > 1024) {
        fprintf(stderr, "ROUND_TRIPS and SAMPLES must be at least 1, LINES 1 to 1024\n");
        return 2;
    }
    char *pages;
    tokens = malloc(lines * sizeof *tokens);
    if (!tokens || posix_memalign((void **)&pages, 4096, lines * 4096) != 0) {
        perror("posix_memalign");
        return 2;
    }
    for (uint64_t l = 0; l < lines; l++) { /* page l, 128-byte slot 5l mod 32 */
        tokens[l] = (volatile uint64_t *)(pages + l * 4096 + (l * 5 % 32) * 128);
        *tokens[l] = 0;
    }
    double *ns = malloc(sizeof *ns * (size_t)samples);
    pin(cpu_a);
    pthread_t thread;
    if (!ns || pthread_create(&thread, NULL, pong, &cpu_b) != 0) {
        perror("pthread_create");
        return 2;
    }
    while (!started)
        ;
    for (int s = 0; s < samples; s++) {
        uint64_t t0 = now_ns();
        play(s, 0);
        ns[s] = (double)(now_ns() - t0) / (double)per_sample;
    }
    pthread_join(thread, NULL);
    for (int s = 0; s < samples; s++)
        printf("%.3f\n", ns[s]);
    free(ns);
    free(pages);
    free(tokens);
    return 0;
}
