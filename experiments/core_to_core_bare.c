/* A bare core-to-core ping-pong in the style of multichase's `pingpong`:
 * two threads pinned to two CPUs pass a token in one cache line, a fixed
 * number of round trips timed as a whole, nothing else; the two threads
 * stay up for all samples, which follow each other without a pause.  Written apart
 * from memlab's csrc/core_to_core.c (no chunks, no stop flag, no median
 * inside a sample) so that experiments/core_to_core_vs_bare.py can compare
 * the two.
 *
 * usage: core_to_core_bare CPU_A CPU_B cas|store ROUND_TRIPS SAMPLES
 * prints one line per sample: ns per round trip (wall) */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
    _Alignas(128) volatile uint64_t token;
    char pad[120];
} shared;

static int use_cas;
static uint64_t trips;
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

/* Wait for `mine`, write mine + 1: the token goes 0 -> 1 (ping) -> 2 (pong) -> ... */
static inline void take_turn(uint64_t mine)
{
    if (use_cas) {
        while (!__sync_bool_compare_and_swap(&shared.token, mine, mine + 1))
            ;
    } else {
        while (shared.token != mine)
            __builtin_ia32_pause();
        __atomic_store_n(&shared.token, mine + 1, __ATOMIC_RELEASE);
    }
}

static void *pong(void *arg)
{
    pin(*(int *)arg);
    __sync_fetch_and_add(&started, 1);
    for (uint64_t i = 0; i < trips; i++)
        take_turn(2 * i + 1);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: %s CPU_A CPU_B cas|store ROUND_TRIPS SAMPLES\n", argv[0]);
        return 2;
    }
    int cpu_a = atoi(argv[1]), cpu_b = atoi(argv[2]);
    use_cas = strcmp(argv[3], "cas") == 0;
    uint64_t per_sample = strtoull(argv[4], NULL, 10);
    int samples = atoi(argv[5]);
    trips = per_sample * (uint64_t)samples;
    double *ns = malloc(sizeof *ns * (size_t)samples);
    pin(cpu_a);
    pthread_t thread;
    if (!ns || pthread_create(&thread, NULL, pong, &cpu_b) != 0) {
        perror("pthread_create");
        return 2;
    }
    while (!started)
        ;
    uint64_t i = 0;
    for (int s = 0; s < samples; s++) {
        uint64_t t0 = now_ns();
        for (uint64_t end = i + per_sample; i < end; i++)
            take_turn(2 * i);
        ns[s] = (double)(now_ns() - t0) / (double)per_sample;
    }
    pthread_join(thread, NULL);
    for (int s = 0; s < samples; s++)
        printf("%.3f\n", ns[s]);
    free(ns);
    return 0;
}
