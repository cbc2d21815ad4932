/* Standalone file copy, for comparison with memlab.system.file_copy: write a
 * MAX_BLOCKS KiB file, then read it BUFFER_SIZE bytes at a time and write
 * each buffer to a second file, rewinding both at the end of the first,
 * until alarm() fires after DURATION seconds (UnixBench's fstime -c).  Both
 * files are unlinked as soon as they are open.
 *   fstime DURATION_S BUFFER_SIZE MAX_BLOCKS DIRECTORY
 *     -> "loops <buffers> elapsed_s <t> cpu_s <c> rate <KBps> rate_per_cpu_s <KB per CPU s>" */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
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

static int scratch_file(const char *dir, const char *tag)
{
    char name[4096];
    snprintf(name, sizeof name, "%s/fstime-%s-%ld-XXXXXX", dir, tag, (long)getpid());
    int fd = mkstemp(name);
    if (fd < 0 || unlink(name) < 0) {
        perror(name);
        exit(1);
    }
    return fd;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s DURATION_S BUFFER_SIZE MAX_BLOCKS DIRECTORY\n", argv[0]);
        return 2;
    }
    double duration = atof(argv[1]);
    size_t size = strtoul(argv[2], NULL, 10);
    long blocks = atol(argv[3]);
    char *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, size) != 0) { /* page-aligned, as memlab's */
        perror("posix_memalign");
        return 1;
    }
    int src = scratch_file(argv[4], "src"), dst = scratch_file(argv[4], "dst");
    for (size_t i = 0; i < size; i++)
        buf[i] = (char)(i & 0xff);
    for (long done = 0; done < blocks * 1024; done += (long)size)
        if (write(src, buf, size) != (ssize_t)size) {
            perror("write source");
            return 1;
        }
    lseek(src, 0, SEEK_SET);

    struct sigaction sa = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval timer = {.it_value = {(time_t)duration, (suseconds_t)((duration - (time_t)duration) * 1e6)}};
    unsigned long loops = 0;
    double start = seconds(), start_cpu = cpu_seconds();
    setitimer(ITIMER_REAL, &timer, NULL);
    while (!stop) {
        if (read(src, buf, size) != (ssize_t)size) {
            lseek(src, 0, SEEK_SET);
            lseek(dst, 0, SEEK_SET);
            continue;
        }
        if (write(dst, buf, size) != (ssize_t)size) {
            if (stop)
                break;
            perror("write copy");
            return 1;
        }
        loops++;
    }
    double elapsed = seconds() - start, cpu = cpu_seconds() - start_cpu;
    double kilobytes = loops * (double)size / 1024;
    printf("loops %lu elapsed_s %.6f cpu_s %.6f rate %.3f rate_per_cpu_s %.3f\n", loops, elapsed, cpu,
           kilobytes / elapsed, kilobytes / cpu);
    return 0;
}
