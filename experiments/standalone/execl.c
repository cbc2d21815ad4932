/* Standalone execl loop, for comparison with memlab.system.execl: the
 * program re-executes itself with its counter and start time in argv until
 * DURATION seconds have passed, as UnixBench's execl does.
 *   execl DURATION_S   ->   "loops <n> elapsed_s <t> loops_per_s <r>" */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    double start, duration = argc > 1 ? atof(argv[1]) : 10.0;
    unsigned long count = 0;
    if (argc == 4) { /* a re-executed invocation: DURATION START COUNT */
        start = atof(argv[2]);
        count = strtoul(argv[3], NULL, 10) + 1;
    } else {
        start = seconds();
    }
    double now = seconds();
    if (count > 0 && now - start >= duration) {
        printf("loops %lu elapsed_s %.6f loops_per_s %.3f\n", count, now - start, count / (now - start));
        return 0;
    }
    char start_text[40], count_text[24];
    snprintf(start_text, sizeof start_text, "%.9f", start);
    snprintf(count_text, sizeof count_text, "%lu", count);
    execl("/proc/self/exe", argv[0], argv[1], start_text, count_text, (char *)NULL);
    perror("execl");
    return 1;
}
