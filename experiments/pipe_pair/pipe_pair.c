/* A minimal standalone writer | reader pair, the control for memlab's pipe
 * family: the same system calls and flags, run from the shell as
 *
 *   taskset -c 0 ./pipe_pair write [options] | taskset -c 1 ./pipe_pair read [options]
 *
 * options: --vmsplice (writer) --splice (reader) --huge-pages --busy-loop
 *          --no-touch --buffer-size N --pipe-size N --total-bytes N
 * The reader prints: bytes=<n> ns=<n> GiB_per_s=<x>, timed from the end of its
 * first read (the bytes of that read are not counted).
 * Built and run by experiments/pipes_standalone.py; not part of memlab. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

struct options {
    int vmsplice, splice, huge_pages, busy_loop, touch;
    size_t buffer_size, pipe_size;
    uint64_t total_bytes;
};

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "pipe_pair: %s: %s\n", what, strerror(errno));
    exit(1);
}

static unsigned char *buffer(size_t bytes, const struct options *o)
{
    size_t huge = (size_t)2 << 20;
    size_t size = o->huge_pages ? (bytes + huge - 1) / huge * huge : bytes;
    void *p = NULL;
    if (posix_memalign(&p, o->huge_pages ? huge : 4096, size) != 0)
        die("posix_memalign");
    if (madvise(p, size, o->huge_pages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0)
        die("madvise");
    if (o->touch)
        memset(p, 0x5a, size);
    return p;
}

static void writer(const struct options *o)
{
    if (o->pipe_size && fcntl(STDOUT_FILENO, F_SETPIPE_SZ, (int)o->pipe_size) < 0)
        die("F_SETPIPE_SZ");
    if (o->busy_loop && fcntl(STDOUT_FILENO, F_SETFL, fcntl(STDOUT_FILENO, F_GETFL) | O_NONBLOCK) < 0)
        die("O_NONBLOCK");
    /* vmsplice: two halves, each at least the pipe size, used in turn */
    size_t half = (o->buffer_size + 4095) / 4096 * 4096;
    unsigned char *buf = buffer(o->vmsplice ? 2 * half : half, o);
    unsigned int flags = o->busy_loop ? SPLICE_F_NONBLOCK : 0;
    uint64_t sent = 0;
    int which = 0;
    while (sent < o->total_bytes) {
        size_t len = o->total_bytes - sent < o->buffer_size ? o->total_bytes - sent : o->buffer_size;
        unsigned char *p = buf + (o->vmsplice ? which * half : 0);
        size_t done = 0;
        while (done < len) {
            ssize_t n;
            if (o->vmsplice) {
                struct iovec iov = {p + done, len - done};
                n = vmsplice(STDOUT_FILENO, &iov, 1, flags);
            } else {
                n = write(STDOUT_FILENO, p + done, len - done);
            }
            if (n < 0) {
                if (errno == EAGAIN || errno == EINTR)
                    continue;
                die(o->vmsplice ? "vmsplice" : "write");
            }
            done += (size_t)n;
        }
        sent += len;
        which ^= 1;
    }
}

static void reader(const struct options *o)
{
    if (o->busy_loop && fcntl(STDIN_FILENO, F_SETFL, fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK) < 0)
        die("O_NONBLOCK");
    unsigned char *buf = NULL;
    int devnull = -1;
    if (o->splice) {
        devnull = open("/dev/null", O_WRONLY);
        if (devnull < 0)
            die("/dev/null");
    } else {
        buf = buffer(o->buffer_size, o);
    }
    unsigned int flags = SPLICE_F_MOVE | (o->busy_loop ? SPLICE_F_NONBLOCK : 0);
    /* timed from the first byte, so that starting the writer process is
     * left out, as memlab leaves out its fork */
    uint64_t received = 0, first = 0, start = 0;
    while (received < o->total_bytes) {
        size_t want = o->total_bytes - received < o->buffer_size ? o->total_bytes - received : o->buffer_size;
        ssize_t n = o->splice ? splice(STDIN_FILENO, NULL, devnull, NULL, want, flags)
                              : read(STDIN_FILENO, buf, want);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            die(o->splice ? "splice" : "read");
        }
        if (n == 0) {
            fprintf(stderr, "pipe_pair: early end of input after %llu bytes\n", (unsigned long long)received);
            exit(1);
        }
        if (received == 0) {
            start = now_ns();
            first = (uint64_t)n;
        }
        received += (uint64_t)n;
    }
    uint64_t ns = now_ns() - start;
    uint64_t timed = received - first;
    printf("bytes=%llu ns=%llu GiB_per_s=%.4f\n", (unsigned long long)timed, (unsigned long long)ns,
           (double)timed / (double)ns * 1e9 / (double)(1ULL << 30));
}

int main(int argc, char **argv)
{
    struct options o = {.touch = 1, .buffer_size = 1 << 18, .pipe_size = 1 << 18, .total_bytes = 1ULL << 30};
    if (argc < 2 || (strcmp(argv[1], "write") && strcmp(argv[1], "read"))) {
        fprintf(stderr, "usage: %s write|read [options]\n", argv[0]);
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--vmsplice"))
            o.vmsplice = 1;
        else if (!strcmp(a, "--splice"))
            o.splice = 1;
        else if (!strcmp(a, "--huge-pages"))
            o.huge_pages = 1;
        else if (!strcmp(a, "--busy-loop"))
            o.busy_loop = 1;
        else if (!strcmp(a, "--no-touch"))
            o.touch = 0;
        else if (i + 1 < argc && !strcmp(a, "--buffer-size"))
            o.buffer_size = strtoull(argv[++i], NULL, 10);
        else if (i + 1 < argc && !strcmp(a, "--pipe-size"))
            o.pipe_size = strtoull(argv[++i], NULL, 10);
        else if (i + 1 < argc && !strcmp(a, "--total-bytes"))
            o.total_bytes = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "pipe_pair: unknown option %s\n", a);
            return 2;
        }
    }
    if (argv[1][0] == 'w')
        writer(&o);
    else
        reader(&o);
    return 0;
}
