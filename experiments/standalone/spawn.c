/* Standalone process-creation loop, for comparison with memlab.system.spawn:
 * fork, the child exits at once, the parent waits; stopped by alarm() after
 * DURATION seconds as UnixBench's spawn is.
 *   spawn DURATION_S   ->   "loops <n> elapsed_s <t> cpu_s <c> rate <lps> rate_per_cpu_s <r>" */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_alarm(int signum)
{
    (void)signum;
    stop = 1;
}

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
    double duration = argc > 1 ? atof(argv[1]) : 10.0;
    struct sigaction sa = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval timer = {.it_value = {(time_t)duration, (suseconds_t)((duration - (time_t)duration) * 1e6)}};
    unsigned long loops = 0;
    double start = seconds(), start_cpu = cpu_seconds();
    setitimer(ITIMER_REAL, &timer, NULL);
    while (!stop) {
        pid_t child = fork();
        if (child == 0)
            _exit(0);
        if (child < 0) {
            perror("fork");
            return 1;
        }
        while (waitpid(child, NULL, 0) < 0)
            ;
        loops++;
    }
    double elapsed = seconds() - start, cpu = cpu_seconds() - start_cpu;
    printf("loops %lu elapsed_s %.6f cpu_s %.6f rate %.3f rate_per_cpu_s %.3f\n", loops, elapsed, cpu,
           loops / elapsed, loops / cpu);
    return 0;
}
