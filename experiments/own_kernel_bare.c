/* The kernel file examples/kernels/walk.c run by a bare C program: no memlab,
 * a stub host, one timed call of its measure over `iterations` walks.
 *   own_kernel_bare SIZE_BYTES LAYOUT(0 array, 1 list) SECONDS
 * prints ns_per_element of the median of 5 timed calls, each about SECONDS
 * long (the iteration count found by doubling, as memlab's harness grows it),
 * by the wall clock and by the thread's CPU time. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../examples/kernels/walk.c"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int stub_fail(mlk_host *host, int code, const char *fmt, ...)
{
    (void)host;
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "error %d: ", code);
    vfprintf(stderr, fmt, args);
    va_end(args);
    return -1;
}

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s SIZE_BYTES LAYOUT SECONDS\n", argv[0]);
        return 2;
    }
    walk_config config = {.size_bytes = atoll(argv[1]), .layout = atoi(argv[2])};
    double seconds = atof(argv[3]);
    mlk_host host = {.api_version = ML_KERNEL_API_VERSION, .fail = stub_fail, .now_ns = now_ns};
    void *state;
    if (walk_setup(&config, &state, &host) < 0)
        return 1;
    uint64_t iterations = 1;
    for (;;) { /* warm-up and calibration: double until one call lasts `seconds` */
        mlk_sample sample = {0};
        uint64_t start = now_ns();
        walk_measure(state, iterations, &sample, &host);
        if ((double)(now_ns() - start) >= seconds * 1e9)
            break;
        iterations *= 2;
    }
    double wall[5], cpu[5];
    for (int i = 0; i < 5; i++) {
        mlk_sample sample = {0};
        uint64_t start = now_ns(), start_cpu = cpu_ns();
        walk_measure(state, iterations, &sample, &host);
        cpu[i] = (double)(cpu_ns() - start_cpu) / sample.units;
        wall[i] = (double)(now_ns() - start) / sample.units;
    }
    qsort(wall, 5, sizeof wall[0], compare);
    qsort(cpu, 5, sizeof cpu[0], compare);
    printf("%.6f %.6f\n", wall[2], cpu[2]);
    walk_teardown(state);
    return 0;
}
