/* Standalone execl loop, for comparison with memlab.system.execl: the
 * program re-executes itself with its counter and start time in argv until
 * DURATION seconds have passed, as UnixBench's execl does.
 *   execl DURATION_S   ->   "loops <n> elapsed_s <t> cpu_s <c> rate <lps> rate_per_cpu_s <r>"
 * (CPU time of a process survives execve.) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* user + system seconds of this process and its reaped children */
static double cpu_seconds(void)
{
    struct rusage self, children;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &children);
    return self.ru_utime.tv_sec + self.ru_stime.tv_sec + children.ru_utime.tv_sec + children.ru_stime.tv_sec
           + (self.ru_utime.tv_usec + self.ru_stime.tv_usec + children.ru_utime.tv_usec
              + children.ru_stime.tv_usec) * 1e-6;
}

int main(int argc, char **argv)
{
    double start, start_cpu, duration = argc > 1 ? atof(argv[1]) : 10.0;
    unsigned long count = 0;
    if (argc == 5) { /* a re-executed invocation: DURATION START START_CPU COUNT */
        start = atof(argv[2]);
        start_cpu = atof(argv[3]);
        count = strtoul(argv[4], NULL, 10) + 1;
    } else {
        start = seconds();
        start_cpu = cpu_seconds();
    }
    double now = seconds();
    if (count > 0 && now - start >= duration) {
        double cpu = cpu_seconds() - start_cpu;
        printf("loops %lu elapsed_s %.6f cpu_s %.6f rate %.3f rate_per_cpu_s %.3f\n", count, now - start, cpu,
               count / (now - start), count / cpu);
        return 0;
    }
    char start_text[40], cpu_text[40], count_text[24];
    snprintf(start_text, sizeof start_text, "%.9f", start);
    snprintf(cpu_text, sizeof cpu_text, "%.6f", start_cpu);
    snprintf(count_text, sizeof count_text, "%lu", count);
    /* argv[0] is the program's full path (the benchmark runs it so), as
     * UnixBench's execl re-executes its full path */
    execl(argv[0], argv[0], argv[1], start_text, cpu_text, count_text, (char *)NULL);
    perror("execl");
    return 1;
}
