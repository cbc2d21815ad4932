/* memlab_system_helper: the process loops of UnixBench's spawn and execl.
 *
 * The loops run in this small C program rather than in a process forked from
 * the Python interpreter, because fork() copies the page tables of the whole
 * address space: forking a clone of CPython costs several times what forking
 * a small C program costs, and UnixBench measures the latter.  csrc/system.c
 * starts one copy per parallel worker; setup.py builds this file into
 * memlab/_bin/ so that it is installed with the package.
 *
 *   memlab_system_helper spawn REPORT_FD REPORT_OFFSET DURATION_NS ITERATIONS
 *   memlab_system_helper execl REPORT_FD REPORT_OFFSET DURATION_NS ITERATIONS [START_NS START_CPU_NS COUNT]
 *
 * ITERATIONS > 0 runs exactly that many loops (execs), otherwise the loop
 * runs until DURATION_NS have passed.  The result is a system_report
 * (../system_report.h) written with pwrite() to REPORT_FD, the memory the
 * parent shares with its workers, at REPORT_OFFSET.  Its cpu_ns is the CPU
 * time (user + system) the loop used, its reaped children included; the
 * usage of a process survives execve.  Its stage names what failed when
 * errnum is not 0.  argv[0] must be the helper's own absolute path: execl
 * re-executes it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../system_report.h"

typedef struct report_place {
    int fd;
    uint64_t offset;
} report_place;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rusage_ns(int who)
{
    struct rusage usage;
    if (getrusage(who, &usage) < 0)
        return 0;
    return ((uint64_t)usage.ru_utime.tv_sec + (uint64_t)usage.ru_stime.tv_sec) * 1000000000u
           + ((uint64_t)usage.ru_utime.tv_usec + (uint64_t)usage.ru_stime.tv_usec) * 1000u;
}

static uint64_t cpu_ns(void)
{
    return rusage_ns(RUSAGE_SELF) + rusage_ns(RUSAGE_CHILDREN);
}

static int parse_u64(const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno || end == text || *end != '\0')
        return -1;
    *out = value;
    return 0;
}

static int report(const report_place *place, int errnum, int stage, uint64_t count,
                  uint64_t elapsed_ns, uint64_t reaped, uint64_t used_cpu_ns)
{
    system_report r = {
        .count = count,
        .elapsed_ns = elapsed_ns,
        .reaped = reaped,
        .cpu_ns = used_cpu_ns,
        .errnum = errnum,
        .stage = stage,
        .done = 1,
    };
    return pwrite(place->fd, &r, sizeof r, (off_t)place->offset) == (ssize_t)sizeof r ? 0 : 1;
}

static int spawn_loop(const report_place *place, uint64_t duration_ns, uint64_t iterations)
{
    uint64_t count = 0, reaped = 0;
    uint64_t start_cpu = cpu_ns();
    uint64_t start = now_ns(), now = start;
    for (;;) {
        if (iterations ? count >= iterations : now - start >= duration_ns)
            break;
        pid_t child = fork();
        if (child == 0)
            _exit(0);
        if (child < 0)
            return report(place, errno, SYSTEM_STAGE_FORK, count, now_ns() - start, reaped, 0);
        int status;
        pid_t got;
        do
            got = waitpid(child, &status, 0);
        while (got < 0 && errno == EINTR);
        if (got != child)
            return report(place, errno, SYSTEM_STAGE_WAIT, count, now_ns() - start, reaped, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            reaped++;
        count++;
        now = now_ns();
    }
    return report(place, 0, SYSTEM_STAGE_NONE, count, now - start, reaped, cpu_ns() - start_cpu);
}

static int execl_step(char **argv, const report_place *place, uint64_t duration_ns,
                      uint64_t iterations, uint64_t start, uint64_t start_cpu, uint64_t count)
{
    uint64_t now = now_ns();
    if (iterations ? count >= iterations : now - start >= duration_ns)
        return report(place, 0, SYSTEM_STAGE_NONE, count, now - start, 0, cpu_ns() - start_cpu);
    char start_text[24], cpu_text[24], count_text[24];
    snprintf(start_text, sizeof start_text, "%" PRIu64, start);
    snprintf(cpu_text, sizeof cpu_text, "%" PRIu64, start_cpu);
    snprintf(count_text, sizeof count_text, "%" PRIu64, count + 1);
    execl(argv[0], argv[0], "execl", argv[2], argv[3], argv[4], argv[5], start_text, cpu_text, count_text,
          (char *)NULL);
    return report(place, errno, SYSTEM_STAGE_EXEC, count, now_ns() - start, 0, 0);
}

int main(int argc, char **argv)
{
    uint64_t fd, offset, duration_ns, iterations, start = 0, start_cpu = 0, count = 0;
    if (argc < 6 || parse_u64(argv[2], &fd) || fd > 1 << 20 || parse_u64(argv[3], &offset)
        || parse_u64(argv[4], &duration_ns) || parse_u64(argv[5], &iterations)) {
        fprintf(stderr,
                "usage: %s spawn|execl REPORT_FD REPORT_OFFSET DURATION_NS ITERATIONS "
                "[START_NS START_CPU_NS COUNT]\n",
                argv[0]);
        return 2;
    }
    report_place place = {.fd = (int)fd, .offset = offset};
    if (strcmp(argv[1], "spawn") == 0 && argc == 6)
        return spawn_loop(&place, duration_ns, iterations);
    if (strcmp(argv[1], "execl") == 0 && argc == 6)
        return execl_step(argv, &place, duration_ns, iterations, now_ns(), cpu_ns(), 0);
    if (strcmp(argv[1], "execl") == 0 && argc == 9 && parse_u64(argv[6], &start) == 0
        && parse_u64(argv[7], &start_cpu) == 0 && parse_u64(argv[8], &count) == 0)
        return execl_step(argv, &place, duration_ns, iterations, start, start_cpu, count);
    report(&place, EINVAL, SYSTEM_STAGE_USAGE, 0, 0, 0, 0);
    return 2;
}
