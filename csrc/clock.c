/* The monotonic clock and the core-frequency calibration.  Without a PMU the
 * only way to cycles is to time work of known cycle count: a chain of
 * dependent register-register adds retires one add per cycle.  (Adds of an
 * immediate can be folded by some cores, so they are not used.) */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "memlab.h"

#define ADDS_PER_ITERATION 200
#define IMULS_PER_ITERATION 100
#define IMUL_LATENCY_CYCLES 3
#define SAMPLE_NS 5000000ull

uint64_t ml_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t add_chain(uint64_t iterations)
{
    uint64_t x = 0, one = 1;
    for (uint64_t i = 0; i < iterations; i++) {
#if defined(__x86_64__)
        __asm__ volatile(".rept 200\n\tadd %1, %0\n\t.endr" : "+r"(x) : "r"(one));
#elif defined(__aarch64__)
        __asm__ volatile(".rept 200\n\tadd %0, %0, %1\n\t.endr" : "+r"(x) : "r"(one));
#else
        x = ml_dependent_work(x, ADDS_PER_ITERATION);
#endif
    }
    return x;
}

static uint64_t imul_chain(uint64_t iterations)
{
    uint64_t x = 3, factor = 1;
    for (uint64_t i = 0; i < iterations; i++) {
#if defined(__x86_64__)
        __asm__ volatile(".rept 100\n\timul %1, %0\n\t.endr" : "+r"(x) : "r"(factor));
#elif defined(__aarch64__)
        __asm__ volatile(".rept 100\n\tmul %0, %0, %1\n\t.endr" : "+r"(x) : "r"(factor));
#else
        for (int k = 0; k < IMULS_PER_ITERATION; k++)
            x *= factor;
#endif
    }
    return x;
}

uint64_t ml_thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t calibration_sink;

/* GHz from timing `chain` so that one run lasts about SAMPLE_NS.  Thread CPU
 * time, not wall time: a sample during which another task held the core
 * would otherwise read as a slower clock. */
static double time_chain(uint64_t (*chain)(uint64_t), double cycles_per_iteration)
{
    uint64_t iterations = 1000;
    for (;;) {
        uint64_t start = ml_thread_cpu_ns();
        calibration_sink = chain(iterations);
        uint64_t elapsed = ml_thread_cpu_ns() - start;
        if (elapsed >= SAMPLE_NS / 2)
            return cycles_per_iteration * (double)iterations / (double)elapsed;
        iterations *= elapsed ? (SAMPLE_NS / elapsed + 1) : 16;
    }
}

int ml_calibrate_frequency(ml_frequency *out, uint64_t budget_ns, ml_context *ctx,
                           ml_error *err)
{
    int samples = (int)(budget_ns / SAMPLE_NS);
    if (samples < 3)
        samples = 3;
    if (samples > 20000)
        samples = 20000;
    double *ghz = malloc(sizeof(double) * (size_t)samples);
    if (!ghz)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for %d calibration samples", samples);
    /* The first run wakes the core up from a low-power state. */
    time_chain(add_chain, ADDS_PER_ITERATION);
    for (int i = 0; i < samples; i++) {
        if (ml_interrupted(ctx)) {
            free(ghz);
            return ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
        }
        ghz[i] = time_chain(add_chain, ADDS_PER_ITERATION);
    }
    out->ghz = ml_median(ghz, (size_t)samples); /* sorts: the ends are min and max */
    out->ghz_min = ghz[0];
    out->ghz_max = ghz[samples - 1];
    out->samples = samples;
    /* The cross-check is a median too: one preempted sample must not skew it. */
    double imul[5];
    for (int i = 0; i < 5; i++)
        imul[i] = time_chain(imul_chain, IMULS_PER_ITERATION * IMUL_LATENCY_CYCLES);
    out->imul_ghz = ml_median(imul, 5);
    out->method = "dependent register-register add chain (1 cycle per add) timed by thread CPU "
                  "time; imul chain cross-check";
    free(ghz);
    return 0;
}
