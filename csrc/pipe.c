/* Pipe transfer (seed 000, "Making Linux pipes fast"): a writer process and
 * a reader process joined by a pipe, and a ping-pong latency pair.
 *
 * Both ends are processes forked from here for every run and never touch
 * Python: after fork they only make system calls and call the
 * async-signal-safe helpers of this file, then _exit.  Results come back
 * through a MAP_SHARED anonymous page.  The parent waits in poll() on
 * pidfds, at most 100 ms at a time, checking for Ctrl-C and the timeout;
 * on any failure it kills and reaps both children and closes every
 * descriptor before returning. */
#define _GNU_SOURCE
#include "memlab.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define PIPE_HUGE_BYTES ((size_t)2 << 20)
#define PIPE_WAIT_SLICE_MS 100
#define PIPE_PATTERN_STEP 0x9E3779B97F4A7C15ULL
#define PIPE_FIRST_TOTAL ((uint64_t)16 << 20)
#define PIPE_MAX_TOTAL ((uint64_t)1 << 46)
#define PIPE_MAX_ADAPT_RUNS 12

static const char *const pipe_writer_names[] = {"write", "vmsplice", NULL};
static const char *const pipe_reader_names[] = {"read", "splice", NULL};
enum { WRITER_WRITE, WRITER_VMSPLICE };
enum { READER_READ, READER_SPLICE };

/* ---- the position-dependent pattern ------------------------------------
 * Byte p of the stream is byte (p mod 8) of the little-endian word
 * (p/8 + 1) * PIPE_PATTERN_STEP, so a byte that arrives at the wrong
 * position, twice, or from a reused buffer half is caught. */

static inline uint64_t pattern_word(uint64_t word_index)
{
    return (word_index + 1) * PIPE_PATTERN_STEP;
}

static inline unsigned char pattern_byte(uint64_t offset)
{
    return (unsigned char)(pattern_word(offset >> 3) >> (8 * (offset & 7)));
}

/* O3 vectorises the word loops (about 2x for the fill, 5x for the check
 * here), so that verify costs little more than touching the bytes.  clang
 * has no optimize attribute; it vectorises these loops at -O2 already. */
#if defined(__clang__)
#define PIPE_VECTORIZE
#else
#define PIPE_VECTORIZE __attribute__((optimize("O3")))
#endif

PIPE_VECTORIZE static void pattern_fill(unsigned char *buf, uint64_t offset, size_t len)
{
    size_t i = 0;
    for (; i < len && ((offset + i) & 7); i++)
        buf[i] = pattern_byte(offset + i);
    uint64_t word = pattern_word((offset + i) >> 3);
    for (; i + 8 <= len; i += 8) {
        memcpy(buf + i, &word, 8);
        word += PIPE_PATTERN_STEP;
    }
    for (; i < len; i++)
        buf[i] = pattern_byte(offset + i);
}

static uint64_t pattern_count_bad_bytes(const unsigned char *buf, uint64_t offset, size_t len)
{
    uint64_t bad = 0;
    for (size_t i = 0; i < len; i++)
        bad += buf[i] != pattern_byte(offset + i);
    return bad;
}

/* Returns the number of wrong bytes; *first_bad gets the first one's
 * stream offset.  The common path ORs word differences over 4 KiB blocks
 * and only counts byte by byte inside a block that differs. */
PIPE_VECTORIZE static uint64_t pattern_check(const unsigned char *buf, uint64_t offset, size_t len,
                                             uint64_t *first_bad)
{
    uint64_t bad = 0;
    size_t i = 0;
    size_t head = 0;
    while (head < len && ((offset + head) & 7))
        head++;
    if (head) {
        uint64_t n = pattern_count_bad_bytes(buf, offset, head);
        if (n && *first_bad == UINT64_MAX)
            for (size_t k = 0; k < head; k++)
                if (buf[k] != pattern_byte(offset + k)) {
                    *first_bad = offset + k;
                    break;
                }
        bad += n;
        i = head;
    }
    while (i + 8 <= len) {
        size_t block = len - i;
        if (block > 4096)
            block = 4096;
        block &= ~(size_t)7;
        uint64_t word = pattern_word((offset + i) >> 3);
        uint64_t diff = 0;
        for (size_t k = 0; k < block; k += 8) {
            uint64_t got;
            memcpy(&got, buf + i + k, 8);
            diff |= got ^ word;
            word += PIPE_PATTERN_STEP;
        }
        if (diff) {
            for (size_t k = 0; k < block; k++)
                if (buf[i + k] != pattern_byte(offset + i + k)) {
                    bad++;
                    if (*first_bad == UINT64_MAX)
                        *first_bad = offset + i + k;
                }
        }
        i += block;
    }
    for (; i < len; i++)
        if (buf[i] != pattern_byte(offset + i)) {
            bad++;
            if (*first_bad == UINT64_MAX)
                *first_bad = offset + i;
        }
    return bad;
}

/* ---- what a child reports ---------------------------------------------- */

enum child_step {
    STEP_NONE = 0,
    STEP_AFFINITY,
    STEP_MMAP,
    STEP_MADVISE,
    STEP_FCNTL,
    STEP_OPEN_DEVNULL,
    STEP_MEMFD,
    STEP_WRITE,
    STEP_VMSPLICE,
    STEP_READ,
    STEP_SPLICE,
    STEP_EARLY_EOF,
    STEP_START,
    STEP_COUNT_
};

static const char *const child_step_names[STEP_COUNT_] = {
    "no step",      "sched_setaffinity", "mmap",   "madvise", "fcntl(O_NONBLOCK)",
    "open /dev/null", "memfd_create",    "write",  "vmsplice", "read",
    "splice",       "the pipe",          "start",
};

typedef struct side_result {
    int failed;       /* 1: the child stopped on an error */
    int step;         /* enum child_step */
    int errnum;
    int cpu_requested;
    uint64_t start_ns, end_ns;
    uint64_t bytes;       /* moved by this side */
    uint64_t calls;       /* successful system calls moving data */
    uint64_t eagain;      /* spins on EAGAIN (busy loop) */
    uint64_t verify_bad;  /* wrong bytes seen by the checking side */
    uint64_t first_bad;   /* stream offset of the first wrong byte */
    int64_t huge_bytes;   /* AnonHugePages of the side's buffer, -1 unknown */
    uint64_t buffer_map_bytes;
    long voluntary_switches, involuntary_switches, minor_faults, major_faults;
    ml_counter_values counters;
} side_result;

typedef struct shared_page {
    side_result side[2];
} shared_page;

static void child_fail(side_result *r, int step, int errnum)
{
    r->failed = 1;
    r->step = step;
    r->errnum = errnum;
}

/* ---- async-signal-safe smaps reading (children only) ------------------- */

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static void smaps_line(const char *line, size_t len, uintptr_t lo, uintptr_t hi, int *inside,
                       int64_t *total)
{
    size_t i = 0;
    uintptr_t start = 0, end = 0;
    if (len && hex_value(line[0]) >= 0) {
        while (i < len && hex_value(line[i]) >= 0)
            start = start * 16 + (uintptr_t)hex_value(line[i++]);
        if (i < len && line[i] == '-') {
            i++;
            while (i < len && hex_value(line[i]) >= 0)
                end = end * 16 + (uintptr_t)hex_value(line[i++]);
            if (i < len && line[i] == ' ') {
                *inside = start < hi && end > lo;
                return;
            }
        }
    }
    static const char key[] = "AnonHugePages:";
    if (!*inside || len < sizeof key - 1 || memcmp(line, key, sizeof key - 1) != 0)
        return;
    int64_t kb = 0;
    for (i = sizeof key - 1; i < len; i++)
        if (line[i] >= '0' && line[i] <= '9')
            kb = kb * 10 + (line[i] - '0');
        else if (kb)
            break;
    *total += kb * 1024;
}

static int64_t smaps_huge_bytes(uintptr_t lo, size_t bytes)
{
    int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char chunk[8192];
    char line[512];
    size_t line_len = 0;
    int inside = 0;
    int64_t total = 0;
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0) {
        for (ssize_t k = 0; k < n; k++) {
            if (chunk[k] == '\n') {
                smaps_line(line, line_len, lo, lo + bytes, &inside, &total);
                line_len = 0;
            } else if (line_len < sizeof line) {
                line[line_len++] = chunk[k];
            }
        }
    }
    close(fd);
    if (n < 0)
        return -1;
    return total > (int64_t)bytes ? (int64_t)bytes : total;
}

/* ---- buffers (children only: plain mmap, no allocator) ------------------ */

typedef struct child_buffer {
    unsigned char *base;
    size_t bytes;       /* usable, rounded to pages or to 2 MiB */
    void *map_base;
    size_t map_bytes;
} child_buffer;

static size_t round_up(size_t x, size_t to)
{
    return (x + to - 1) / to * to;
}

static int buffer_map(child_buffer *b, size_t bytes, int huge, int touch, side_result *r)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    memset(b, 0, sizeof *b);
    b->bytes = huge ? round_up(bytes, PIPE_HUGE_BYTES) : round_up(bytes, page);
    b->map_bytes = b->bytes + (huge ? PIPE_HUGE_BYTES : 0);
    void *p = mmap(NULL, b->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        child_fail(r, STEP_MMAP, errno);
        return -1;
    }
    b->map_base = p;
    uintptr_t aligned = (uintptr_t)p;
    if (huge)
        aligned = round_up(aligned, PIPE_HUGE_BYTES);
    b->base = (unsigned char *)aligned;
    if (madvise(b->base, b->bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0) {
        child_fail(r, STEP_MADVISE, errno);
        return -1;
    }
    r->buffer_map_bytes = b->bytes;
    if (touch)
        memset(b->base, 0x5a, b->bytes);
    return 0;
}

/* ---- the transfer family ------------------------------------------------ */

typedef struct pipe_config {
    int writer;
    int reader;
    int64_t buffer_size;
    int64_t pipe_size;
    int64_t total_bytes;
    int huge_pages;
    int busy_loop;
    int touch_pages;
    int verify;
    int64_t vmsplice_sections; /* 0: the safe count; fewer only to show the hazard */
    int64_t writer_cpu;
    int64_t reader_cpu;
    double timeout_s;
} pipe_config;

typedef struct pair_run {
    pid_t pid[2];
    int pidfd[2];
    int status[2];
    int reaped[2];
    int killed[2]; /* by us while cleaning up: not the cause of a failure */
    int ready_fd; /* parent's read end: one byte per ready child */
    int go_fd;    /* parent's write end: closing it starts both children */
    int data_fd[4];
    int n_data;
} pair_run;

typedef struct child_args {
    const void *config;
    shared_page *shared;
    int side;
    int fd[2];      /* the data descriptors this side keeps */
    uint64_t count; /* bytes to move (transfer) or round trips (latency) */
    size_t pipe_bytes;
    int ready_fd, go_fd;
    ml_context *ctx;
} child_args;

typedef int (*child_main_fn)(child_args *a);

static void run_init(pair_run *run)
{
    memset(run, 0, sizeof *run);
    for (int s = 0; s < 2; s++) {
        run->pid[s] = -1;
        run->pidfd[s] = -1;
    }
    run->ready_fd = run->go_fd = -1;
    for (int k = 0; k < 4; k++)
        run->data_fd[k] = -1;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

static void run_reap(pair_run *run, int s, int block)
{
    if (run->pid[s] <= 0 || run->reaped[s])
        return;
    for (;;) {
        pid_t got = waitpid(run->pid[s], &run->status[s], block ? 0 : WNOHANG);
        if (got == run->pid[s]) {
            run->reaped[s] = 1;
            return;
        }
        if (got == 0)
            return;
        if (errno == EINTR)
            continue;
        run->reaped[s] = 1; /* ECHILD: someone else reaped it */
        run->status[s] = 0;
        return;
    }
}

/* Kill what still runs, reap it, close everything: the one exit path. */
static void run_finish(pair_run *run)
{
    for (int s = 0; s < 2; s++)
        if (run->pid[s] > 0 && !run->reaped[s]) {
            run_reap(run, s, 0);
            if (!run->reaped[s]) {
                kill(run->pid[s], SIGKILL);
                run->killed[s] = 1;
            }
        }
    for (int s = 0; s < 2; s++) {
        run_reap(run, s, 1);
        close_fd(&run->pidfd[s]);
    }
    close_fd(&run->ready_fd);
    close_fd(&run->go_fd);
    for (int k = 0; k < 4; k++)
        close_fd(&run->data_fd[k]);
}

/* Close every descriptor inherited from the parent but the ones kept, so a
 * child holds no end of another run's pipes or of the parent's files. */
static void child_close_others(const int *keep_in, int n_keep)
{
    int keep[8];
    int n = 0;
    for (int k = 0; k < n_keep && n < 8; k++) {
        if (keep_in[k] <= 2)
            continue;
        int at = n++;
        while (at > 0 && keep[at - 1] > keep_in[k]) {
            keep[at] = keep[at - 1];
            at--;
        }
        keep[at] = keep_in[k];
    }
    unsigned int next = 3;
    for (int k = 0; k < n; k++) {
        if ((unsigned int)keep[k] > next)
            close_range(next, (unsigned int)keep[k] - 1, 0);
        next = (unsigned int)keep[k] + 1;
    }
    close_range(next, ~0U, 0);
}

static void child_setup_process(const char *name, int cpu, side_result *r, pid_t parent)
{
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ignore, NULL);  /* Ctrl-C belongs to the parent */
    sigaction(SIGPIPE, &ignore, NULL); /* a dead reader is an EPIPE to report */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(3);
    prctl(PR_SET_NAME, name);
    r->cpu_requested = cpu;
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) {
            child_fail(r, STEP_AFFINITY, errno);
            _exit(1);
        }
    }
}

/* Tell the parent we are ready, then block until it closes the go pipe. */
static int child_wait_go(child_args *a)
{
    char byte = 1;
    while (write(a->ready_fd, &byte, 1) < 0 && errno == EINTR)
        ;
    close(a->ready_fd);
    ssize_t n;
    while ((n = read(a->go_fd, &byte, 1)) < 0 && errno == EINTR)
        ;
    close(a->go_fd);
    return n == 0 ? 0 : -1;
}

static void child_usage(long out[4])
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    out[0] = u.ru_nvcsw;
    out[1] = u.ru_nivcsw;
    out[2] = u.ru_minflt;
    out[3] = u.ru_majflt;
}

static void child_usage_delta(side_result *r, const long before[4])
{
    long after[4];
    child_usage(after);
    r->voluntary_switches = after[0] - before[0];
    r->involuntary_switches = after[1] - before[1];
    r->minor_faults = after[2] - before[2];
    r->major_faults = after[3] - before[3];
}

/* Fork both children.  Each closes the data descriptors it does not keep. */
typedef struct pair_spec {
    child_main_fn main[2];
    const char *comm[2];  /* process names, as ps shows them */
    const char *name[2];  /* side names in messages */
    int cpu[2];
    uint64_t expected;    /* bytes (or round trips) for messages */
    double timeout_s;
    const char *what;
} pair_spec;

static int run_start(pair_run *run, const pair_spec *spec, child_args proto[2], ml_error *err)
{
    int ready[2], go[2];
    if (pipe2(ready, O_CLOEXEC) != 0)
        return ml_fail(err, ML_ERR_OS, errno, "pipe2 for the start signal failed: %s", strerror(errno));
    run->ready_fd = ready[0];
    if (pipe2(go, O_CLOEXEC) != 0) {
        close(ready[1]);
        return ml_fail(err, ML_ERR_OS, errno, "pipe2 for the start signal failed: %s", strerror(errno));
    }
    run->go_fd = go[1];
    pid_t parent = getpid();
    for (int s = 0; s < 2; s++) {
        pid_t pid = fork();
        if (pid < 0) {
            int e = errno;
            close(ready[1]);
            close(go[0]);
            return ml_fail(err, ML_ERR_OS, e, "fork of the %s process failed: %s", spec->name[s],
                           strerror(e));
        }
        if (pid == 0) {
            child_args *a = &proto[s];
            side_result *r = &a->shared->side[s];
            close(run->ready_fd);
            close(run->go_fd);
            for (int k = 0; k < run->n_data; k++)
                if (run->data_fd[k] != a->fd[0] && run->data_fd[k] != a->fd[1])
                    close(run->data_fd[k]);
            for (int k = 0; k < 2; k++)
                if (run->pidfd[k] >= 0)
                    close(run->pidfd[k]);
            a->ready_fd = ready[1];
            a->go_fd = go[0];
            const int keep[4] = {a->fd[0], a->fd[1], a->ready_fd, a->go_fd};
            child_close_others(keep, 4);
            child_setup_process(spec->comm[s], spec->cpu[s], r, parent);
            _exit(spec->main[s](a) == 0 ? 0 : 1);
        }
        run->pid[s] = pid;
        run->pidfd[s] = (int)syscall(SYS_pidfd_open, pid, 0);
    }
    close(ready[1]);
    close(go[0]);
    return 0;
}

static int child_error(const side_result *r, const char *name, uint64_t expected, ml_error *err)
{
    int e = r->errnum;
    if (r->step == STEP_AFFINITY)
        return ml_fail(err, ML_ERR_VALUE, e, "%s_cpu=%d cannot be used: sched_setaffinity: %s", name,
                       r->cpu_requested, strerror(e));
    if (r->step == STEP_EARLY_EOF)
        return ml_fail(err, ML_ERR_OS, EPIPE,
                       "%s process saw the other end close the pipe after %llu of %llu bytes", name,
                       (unsigned long long)r->bytes, (unsigned long long)expected);
    const char *step = r->step > 0 && r->step < STEP_COUNT_ ? child_step_names[r->step] : "?";
    return ml_fail(err, ML_ERR_OS, e ? e : EIO, "%s process: %s failed after %llu of %llu bytes: %s",
                   name, step, (unsigned long long)r->bytes, (unsigned long long)expected,
                   e ? strerror(e) : "no errno");
}

/* Turn how the children ended into an error, if any. */
static int run_outcome(pair_run *run, const shared_page *shared, const char *const names[2],
                       uint64_t expected, ml_error *err)
{
    /* The side that failed first is the likelier cause: prefer a killed
     * child, then a reported error that is not a mere EOF/EPIPE. */
    for (int s = 0; s < 2; s++) {
        int st = run->status[s];
        if (WIFSIGNALED(st) && !run->killed[s])
            return ml_fail(err, ML_ERR_OS, ECHILD,
                           "the %s process (pid %d) was killed by signal %d (%s) after moving %llu of "
                           "%llu bytes",
                           names[s], (int)run->pid[s], WTERMSIG(st), strsignal(WTERMSIG(st)),
                           (unsigned long long)shared->side[s].bytes, (unsigned long long)expected);
    }
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < 2; s++) {
            const side_result *r = &shared->side[s];
            int secondary = r->step == STEP_EARLY_EOF || r->errnum == EPIPE;
            if (r->failed && (pass == 1 || !secondary))
                return child_error(r, names[s], expected, err);
        }
    for (int s = 0; s < 2; s++) {
        int st = run->status[s];
        if (run->killed[s])
            continue;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return ml_fail(err, ML_ERR_OS, ECHILD, "the %s process exited with status %d", names[s],
                           WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    return 0;
}

/* Wait until `ready` bytes arrived on the ready pipe (want_ready) or until
 * both children exited.  Polls at most PIPE_WAIT_SLICE_MS at a time. */
static int run_wait(pair_run *run, int want_ready, uint64_t deadline_ns, double timeout_s,
                    const char *what, ml_context *ctx, ml_error *err)
{
    int ready_count = 0;
    for (;;) {
        for (int s = 0; s < 2; s++)
            run_reap(run, s, 0);
        if (want_ready && (run->reaped[0] || run->reaped[1]))
            return 1; /* a child died while preparing: caller reports */
        if (!want_ready && run->reaped[0] && run->reaped[1])
            return 0;
        uint64_t now = ml_now_ns();
        if (now >= deadline_ns)
            return ml_fail(err, ML_ERR_TIMEOUT, ETIMEDOUT,
                           "%s did not finish within timeout_s=%g; both processes were killed", what,
                           timeout_s);
        if (ml_interrupted(ctx))
            return ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
        struct pollfd fds[3];
        int n = 0;
        if (want_ready)
            fds[n++] = (struct pollfd){.fd = run->ready_fd, .events = POLLIN};
        for (int s = 0; s < 2; s++)
            if (run->pidfd[s] >= 0 && !run->reaped[s])
                fds[n++] = (struct pollfd){.fd = run->pidfd[s], .events = POLLIN};
        uint64_t left_ms = (deadline_ns - now) / 1000000 + 1;
        int slice = PIPE_WAIT_SLICE_MS;
        if (run->pidfd[0] < 0 || run->pidfd[1] < 0)
            slice = 10; /* no pidfd: poll waitpid more often */
        if (left_ms < (uint64_t)slice)
            slice = (int)left_ms;
        int got = poll(fds, (nfds_t)n, slice);
        if (got < 0 && errno != EINTR)
            return ml_fail(err, ML_ERR_OS, errno, "poll while waiting for %s: %s", what, strerror(errno));
        if (want_ready && got > 0 && (fds[0].revents & POLLIN)) {
            char bytes[2];
            ssize_t r = read(run->ready_fd, bytes, (size_t)(2 - ready_count));
            if (r > 0)
                ready_count += (int)r;
            if (ready_count >= 2)
                return 0;
        }
    }
}

/* One complete run: fork, wait until ready, release, wait for both exits. */
static int run_pair(pair_run *run, const pair_spec *spec, child_args proto[2], ml_context *ctx,
                    ml_error *err)
{
    const char *const *names = spec->name;
    uint64_t expected = spec->expected;
    double timeout_s = spec->timeout_s;
    const char *what = spec->what;
    uint64_t deadline = ml_now_ns() + (uint64_t)(timeout_s * 1e9);
    memset(proto[0].shared, 0, sizeof *proto[0].shared);
    int rc = run_start(run, spec, proto, err);
    if (rc == 0) {
        for (int k = 0; k < run->n_data; k++)
            close_fd(&run->data_fd[k]);
        rc = run_wait(run, 1, deadline, timeout_s, what, ctx, err);
        if (rc == 1) { /* a child ended before the start: kill the other */
            run_finish(run);
            rc = run_outcome(run, proto[0].shared, names, expected, err);
            if (rc == 0)
                rc = ml_fail(err, ML_ERR_OS, ECHILD, "a %s process ended before the start", what);
            return rc;
        }
    }
    if (rc == 0) {
        close_fd(&run->go_fd);
        rc = run_wait(run, 0, deadline, timeout_s, what, ctx, err);
    }
    run_finish(run);
    if (rc == 0)
        rc = run_outcome(run, proto[0].shared, names, expected, err);
    return rc;
}

/* ---- transfer: the two children ---------------------------------------- */

static int set_nonblocking(int fd, side_result *r)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        child_fail(r, STEP_FCNTL, errno);
        return -1;
    }
    return 0;
}

/* With vmsplice the pipe holds references to the writer's pages, so a
 * section of the buffer may be rewritten only when the pipe can no longer
 * hold it: after n-1 later sections were fully spliced, with
 * (n-1) * pages(section) >= pipe slots.  buffer_size == pipe_size gives the
 * seed's scheme: a buffer twice the pipe size, alternate halves. */
static size_t vmsplice_sections(const pipe_config *c, size_t pipe_bytes)
{
    if (c->writer != WRITER_VMSPLICE)
        return 1;
    if (c->vmsplice_sections > 0)
        return (size_t)c->vmsplice_sections;
    size_t buffer_size = (size_t)c->buffer_size;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t section_pages = round_up(buffer_size, page) / page;
    size_t slots = pipe_bytes / page;
    return 1 + (slots + section_pages - 1) / section_pages;
}

static int transfer_writer(child_args *a)
{
    const pipe_config *c = a->config;
    side_result *r = &a->shared->side[0];
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t chunk = (size_t)c->buffer_size;
    size_t stride = round_up(chunk, page);
    size_t sections = vmsplice_sections(c, a->pipe_bytes);
    int fd = a->fd[0];
    child_buffer b;
    ml_counters counters;
    long usage[4];
    if (buffer_map(&b, stride * sections, c->huge_pages, c->touch_pages, r) != 0)
        return -1;
    if (c->busy_loop && set_nonblocking(fd, r) != 0)
        return -1;
    if (a->ctx->counters)
        ml_counters_open(&counters, 0, 0);
    if (child_wait_go(a) != 0) {
        child_fail(r, STEP_START, 0);
        return -1;
    }
    unsigned int flags = c->busy_loop ? SPLICE_F_NONBLOCK : 0;
    uint64_t total = a->count, sent = 0;
    size_t section = 0;
    child_usage(usage);
    if (a->ctx->counters)
        ml_counters_start(&counters);
    r->start_ns = ml_now_ns();
    while (sent < total) {
        size_t len = total - sent < chunk ? (size_t)(total - sent) : chunk;
        unsigned char *p = b.base + section * stride;
        if (c->verify)
            pattern_fill(p, sent, len);
        size_t done = 0;
        while (done < len) {
            ssize_t n;
            if (c->writer == WRITER_VMSPLICE) {
                struct iovec iov = {.iov_base = p + done, .iov_len = len - done};
                n = vmsplice(fd, &iov, 1, flags);
            } else {
                n = write(fd, p + done, len - done);
            }
            if (n < 0) {
                if (errno == EAGAIN) {
                    r->eagain++;
                    continue;
                }
                if (errno == EINTR)
                    continue;
                r->bytes = sent + done;
                child_fail(r, c->writer == WRITER_VMSPLICE ? STEP_VMSPLICE : STEP_WRITE, errno);
                return -1;
            }
            r->calls++;
            done += (size_t)n;
        }
        sent += len;
        r->bytes = sent;
        section = section + 1 == sections ? 0 : section + 1;
    }
    r->end_ns = ml_now_ns();
    if (a->ctx->counters) {
        ml_counters_stop(&counters);
        ml_counters_read(&counters, &r->counters);
        ml_counters_close(&counters);
    }
    child_usage_delta(r, usage);
    r->bytes = sent;
    close(fd); /* EOF for the reader before the slow smaps read */
    r->huge_bytes = smaps_huge_bytes((uintptr_t)b.base, b.bytes);
    return 0;
}

static int transfer_reader(child_args *a)
{
    const pipe_config *c = a->config;
    side_result *r = &a->shared->side[1];
    size_t chunk = (size_t)c->buffer_size;
    int fd = a->fd[0];
    int sink = -1;
    unsigned char *view = NULL; /* where the checked bytes land */
    child_buffer b;
    ml_counters counters;
    long usage[4];
    r->huge_bytes = -1;
    r->first_bad = UINT64_MAX;
    if (c->reader == READER_READ) {
        if (buffer_map(&b, chunk, c->huge_pages, 1, r) != 0)
            return -1;
        view = b.base;
    } else if (c->verify) {
        /* splice into a memory file and check its pages: the reader still
         * empties the pipe with splice, and every byte is looked at */
        sink = memfd_create("memlab-pipe-check", MFD_CLOEXEC);
        if (sink < 0 || ftruncate(sink, (off_t)chunk) != 0) {
            child_fail(r, STEP_MEMFD, errno);
            return -1;
        }
        void *p = mmap(NULL, chunk, PROT_READ, MAP_SHARED, sink, 0);
        if (p == MAP_FAILED) {
            child_fail(r, STEP_MMAP, errno);
            return -1;
        }
        view = p;
    } else {
        sink = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (sink < 0) {
            child_fail(r, STEP_OPEN_DEVNULL, errno);
            return -1;
        }
    }
    if (c->busy_loop && set_nonblocking(fd, r) != 0)
        return -1;
    if (a->ctx->counters)
        ml_counters_open(&counters, 0, 0);
    if (child_wait_go(a) != 0) {
        child_fail(r, STEP_START, 0);
        return -1;
    }
    unsigned int flags = SPLICE_F_MOVE | (c->busy_loop ? SPLICE_F_NONBLOCK : 0);
    uint64_t total = a->count, received = 0;
    child_usage(usage);
    if (a->ctx->counters)
        ml_counters_start(&counters);
    r->start_ns = ml_now_ns();
    while (received < total) {
        size_t want = total - received < chunk ? (size_t)(total - received) : chunk;
        ssize_t n;
        if (c->reader == READER_READ) {
            n = read(fd, view, want);
        } else {
            loff_t zero = 0;
            n = splice(fd, NULL, sink, c->verify ? &zero : NULL, want, flags);
        }
        if (n < 0) {
            if (errno == EAGAIN) {
                r->eagain++;
                continue;
            }
            if (errno == EINTR)
                continue;
            r->bytes = received;
            child_fail(r, c->reader == READER_READ ? STEP_READ : STEP_SPLICE, errno);
            return -1;
        }
        if (n == 0) {
            r->bytes = received;
            child_fail(r, STEP_EARLY_EOF, 0);
            return -1;
        }
        if (c->verify)
            r->verify_bad += pattern_check(view, received, (size_t)n, &r->first_bad);
        r->calls++;
        received += (uint64_t)n;
        r->bytes = received;
    }
    r->end_ns = ml_now_ns();
    if (a->ctx->counters) {
        ml_counters_stop(&counters);
        ml_counters_read(&counters, &r->counters);
        ml_counters_close(&counters);
    }
    child_usage_delta(r, usage);
    r->bytes = received;
    if (c->reader == READER_READ)
        r->huge_bytes = smaps_huge_bytes((uintptr_t)b.base, b.bytes);
    return 0;
}

/* ---- transfer: setup and measure ----------------------------------------- */

typedef struct pipe_state {
    pipe_config config;
    shared_page *shared;
    size_t pipe_max_bytes;
    uint64_t next_total; /* adapted bytes per sample (total_bytes == 0) */
} pipe_state;

static long read_long_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char text[64];
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = 0;
    return strtol(text, NULL, 10);
}

/* CPU numbers must exist; busy looping needs the two ends on two CPUs. */
static int check_cpus(int64_t cpu_a, int64_t cpu_b, const char *name_a, const char *name_b,
                      int busy_loop, ml_error *err)
{
    long configured = sysconf(_SC_NPROCESSORS_CONF);
    const int64_t cpus[2] = {cpu_a, cpu_b};
    const char *names[2] = {name_a, name_b};
    for (int s = 0; s < 2; s++)
        if (cpus[s] >= configured || cpus[s] >= CPU_SETSIZE)
            return ml_fail(err, ML_ERR_VALUE, 0, "%s=%lld is above the highest CPU number %ld",
                           names[s], (long long)cpus[s], configured - 1);
    if (!busy_loop)
        return 0;
    cpu_set_t allowed, both;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return ml_fail(err, ML_ERR_OS, errno, "sched_getaffinity: %s", strerror(errno));
    CPU_ZERO(&both);
    for (int s = 0; s < 2; s++) {
        if (cpus[s] >= 0)
            CPU_SET((int)cpus[s], &both);
        else
            CPU_OR(&both, &both, &allowed);
    }
    if (CPU_COUNT(&both) < 2)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "busy_loop=True needs the two ends on two different CPUs, but %s=%lld and "
                       "%s=%lld leave them on one CPU (this process may run on %d CPU(s)): each end "
                       "would spin through its whole time slice waiting for the other, which cannot "
                       "run meanwhile (seen moving 0.04 GiB/s for minutes)",
                       name_a, (long long)cpu_a, name_b, (long long)cpu_b, CPU_COUNT(&allowed));
    return 0;
}

static int pipe_setup(const void *config, void **state_out, ml_context *ctx, ml_error *err)
{
    (void)ctx;
    const pipe_config *c = config;
    long page = sysconf(_SC_PAGESIZE);
    long pipe_max = read_long_file("/proc/sys/fs/pipe-max-size");
    if (c->pipe_size != 0) {
        if (c->pipe_size % page != 0)
            return ml_fail(err, ML_ERR_VALUE, 0, "pipe_size=%lld is not a multiple of the page size %ld",
                           (long long)c->pipe_size, page);
        if (pipe_max > 0 && c->pipe_size > pipe_max)
            return ml_fail(err, ML_ERR_VALUE, 0,
                           "pipe_size=%lld is above the maximum %ld (/proc/sys/fs/pipe-max-size)",
                           (long long)c->pipe_size, pipe_max);
    }
    if (check_cpus(c->writer_cpu, c->reader_cpu, "writer_cpu", "reader_cpu", c->busy_loop, err) != 0)
        return -1;
    if (!(c->timeout_s > 0))
        return ml_fail(err, ML_ERR_VALUE, 0, "timeout_s=%g must be above 0", c->timeout_s);
    /* F_SETPIPE_SZ rounds up to a power of two pages: at most twice the request */
    size_t pipe_bound = c->pipe_size ? 2 * (size_t)c->pipe_size : ((size_t)1 << 20);
    size_t stride = round_up((size_t)c->buffer_size, (size_t)page);
    size_t sections = c->vmsplice_sections > 0 ? (size_t)c->vmsplice_sections
                                               : 2 + pipe_bound / stride;
    size_t buffers = stride * (c->writer == WRITER_VMSPLICE ? sections + 1 : 2);
    if (ml_check_memory(buffers, "pipe buffers", err) != 0)
        return -1;
    pipe_state *s = calloc(1, sizeof *s);
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "pipe state");
    s->config = *c;
    s->pipe_max_bytes = pipe_max > 0 ? (size_t)pipe_max : 0;
    void *p = mmap(NULL, sizeof(shared_page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        free(s);
        return ml_fail(err, ML_ERR_OS, errno, "mmap of the shared result page: %s", strerror(errno));
    }
    s->shared = p;
    uint64_t first = PIPE_FIRST_TOTAL;
    if (first < (uint64_t)c->buffer_size * 4)
        first = (uint64_t)c->buffer_size * 4;
    s->next_total = first;
    *state_out = s;
    return 0;
}

static void pipe_teardown(void *state)
{
    pipe_state *s = state;
    if (!s)
        return;
    munmap(s->shared, sizeof(shared_page));
    free(s);
}

static int make_data_pipe(pair_run *run, const pipe_config *c, size_t *pipe_bytes, ml_error *err)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return ml_fail(err, ML_ERR_OS, errno, "pipe2: %s", strerror(errno));
    run->data_fd[0] = fds[0];
    run->data_fd[1] = fds[1];
    run->n_data = 2;
    if (c->pipe_size && fcntl(fds[1], F_SETPIPE_SZ, (int)c->pipe_size) < 0)
        return ml_fail(err, errno == EPERM ? ML_ERR_VALUE : ML_ERR_OS, errno,
                       "pipe_size=%lld: F_SETPIPE_SZ failed: %s", (long long)c->pipe_size,
                       strerror(errno));
    int got = fcntl(fds[1], F_GETPIPE_SZ);
    if (got < 0)
        return ml_fail(err, ML_ERR_OS, errno, "F_GETPIPE_SZ: %s", strerror(errno));
    *pipe_bytes = (size_t)got;
    return 0;
}

static void add_side_metrics(ml_measurement *out, const side_result *r, const char *side)
{
    char name[ML_METRIC_NAME_MAX];
    snprintf(name, sizeof name, "%s_context_switches", side);
    ml_metric_add(out, name, (double)(r->voluntary_switches + r->involuntary_switches));
    snprintf(name, sizeof name, "%s_involuntary_switches", side);
    ml_metric_add(out, name, (double)r->involuntary_switches);
    snprintf(name, sizeof name, "%s_page_faults", side);
    ml_metric_add(out, name, (double)(r->minor_faults + r->major_faults));
    snprintf(name, sizeof name, "%s_calls", side);
    ml_metric_add(out, name, (double)r->calls);
    snprintf(name, sizeof name, "%s_eagain_spins", side);
    ml_metric_add(out, name, (double)r->eagain);
}

/* Both sides' counters added up; present only where both had the event. */
static void merge_counters(ml_counter_values *out, const side_result *w, const side_result *r,
                           int counting)
{
    if (!counting) {
        ml_counter_values_missing(out, 0);
        return;
    }
    memset(out, 0, sizeof *out);
    out->kernel_included = w->counters.kernel_included && r->counters.kernel_included;
    for (int k = 0; k < ML_COUNTER_COUNT; k++) {
        if (w->counters.present[k] && r->counters.present[k]) {
            out->present[k] = 1;
            out->value[k] = w->counters.value[k] + r->counters.value[k];
            double fw = w->counters.running_fraction[k], fr = r->counters.running_fraction[k];
            out->running_fraction[k] = fw < fr ? fw : fr;
        } else {
            out->missing_errno[k] =
                w->counters.present[k] ? r->counters.missing_errno[k] : w->counters.missing_errno[k];
            if (out->missing_errno[k] == 0)
                out->missing_errno[k] = ENOENT;
        }
    }
}

static int transfer_once(pipe_state *s, uint64_t total, size_t *pipe_bytes, ml_context *ctx,
                         ml_error *err)
{
    const pipe_config *c = &s->config;
    pair_run run;
    run_init(&run);
    if (make_data_pipe(&run, c, pipe_bytes, err) != 0) {
        run_finish(&run);
        return -1;
    }
    child_args proto[2];
    memset(proto, 0, sizeof proto);
    for (int k = 0; k < 2; k++) {
        proto[k].config = c;
        proto[k].shared = s->shared;
        proto[k].side = k;
        proto[k].count = total;
        proto[k].pipe_bytes = *pipe_bytes;
        proto[k].ctx = ctx;
        proto[k].fd[1] = -1;
    }
    proto[0].fd[0] = run.data_fd[1];
    proto[1].fd[0] = run.data_fd[0];
    const pair_spec spec = {
        .main = {transfer_writer, transfer_reader},
        .comm = {"memlab-writer", "memlab-reader"},
        .name = {"writer", "reader"},
        .cpu = {(int)c->writer_cpu, (int)c->reader_cpu},
        .expected = total,
        .timeout_s = c->timeout_s,
        .what = "the pipe transfer",
    };
    return run_pair(&run, &spec, proto, ctx, err);
}

static uint64_t side_elapsed(const shared_page *sh)
{
    uint64_t start = sh->side[0].start_ns < sh->side[1].start_ns ? sh->side[0].start_ns
                                                                 : sh->side[1].start_ns;
    return sh->side[1].end_ns > start ? sh->side[1].end_ns - start : 1;
}

/* Next transfer size when a run was shorter than the target. */
static uint64_t grow_count(uint64_t count, uint64_t elapsed_ns, uint64_t target_ns, uint64_t multiple,
                           uint64_t maximum)
{
    double factor = 1.15 * (double)target_ns / (double)(elapsed_ns ? elapsed_ns : 1);
    if (factor < 1.25)
        factor = 1.25;
    if (factor > 64)
        factor = 64;
    double next = (double)count * factor;
    if (next > (double)maximum)
        next = (double)maximum;
    uint64_t n = (uint64_t)next;
    n = (n + multiple - 1) / multiple * multiple;
    return n > count ? n : count + multiple;
}

static int pipe_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    pipe_state *s = state;
    const pipe_config *c = &s->config;
    const shared_page *sh = s->shared;
    uint64_t target = ctx && ctx->target_ns ? ctx->target_ns : 100000000ULL;
    uint64_t total = c->total_bytes ? (uint64_t)c->total_bytes : s->next_total;
    size_t pipe_bytes = 0;
    int runs = 0;
    for (;;) {
        if (transfer_once(s, total, &pipe_bytes, ctx, err) != 0)
            return -1;
        runs++;
        uint64_t elapsed = side_elapsed(sh);
        if (c->total_bytes || elapsed >= target || runs >= PIPE_MAX_ADAPT_RUNS || total >= PIPE_MAX_TOTAL)
            break;
        total = grow_count(total, elapsed, target, (uint64_t)c->buffer_size, PIPE_MAX_TOTAL);
        ML_CHECK_INTERRUPT(ctx, err);
    }
    if (!c->total_bytes)
        s->next_total = total;
    const side_result *w = &sh->side[0], *r = &sh->side[1];
    out->elapsed_ns = side_elapsed(sh);
    out->bytes = (double)r->bytes;
    out->units = (double)((total + (uint64_t)c->buffer_size - 1) / (uint64_t)c->buffer_size);
    merge_counters(&out->counters, w, r, ctx && ctx->counters);
    ml_metric_add(out, "total_bytes", (double)total);
    ml_metric_add(out, "bytes_received", (double)r->bytes);
    ml_metric_add(out, "pipe_bytes", (double)pipe_bytes);
    ml_metric_add(out, "adapt_runs", (double)runs);
    ml_metric_add(out, "writer_elapsed_ns", (double)(w->end_ns - w->start_ns));
    ml_metric_add(out, "writer_sections", (double)vmsplice_sections(c, pipe_bytes));
    ml_metric_add(out, "writer_buffer_bytes", (double)w->buffer_map_bytes);
    ml_metric_add(out, "writer_huge_bytes", (double)w->huge_bytes);
    if (w->huge_bytes >= 0 && w->buffer_map_bytes)
        ml_metric_add(out, "writer_huge_fraction", (double)w->huge_bytes / (double)w->buffer_map_bytes);
    if (c->reader == READER_READ) {
        ml_metric_add(out, "reader_huge_bytes", (double)r->huge_bytes);
        if (r->huge_bytes >= 0 && r->buffer_map_bytes)
            ml_metric_add(out, "reader_huge_fraction", (double)r->huge_bytes / (double)r->buffer_map_bytes);
    }
    if (c->verify) {
        ml_metric_add(out, "verify_errors", (double)r->verify_bad);
        ml_metric_add(out, "first_bad_offset",
                      r->first_bad == UINT64_MAX ? -1.0 : (double)r->first_bad);
    }
    add_side_metrics(out, w, "writer");
    add_side_metrics(out, r, "reader");
    return 0;
}

static const ml_param pipe_params[] = {
    {.name = "writer", .kind = ML_PARAM_CHOICE, .offset = offsetof(pipe_config, writer),
     .choices = pipe_writer_names},
    {.name = "reader", .kind = ML_PARAM_CHOICE, .offset = offsetof(pipe_config, reader),
     .choices = pipe_reader_names},
    {.name = "buffer_size", .kind = ML_PARAM_INT, .offset = offsetof(pipe_config, buffer_size),
     .min = 1, .max = (int64_t)1 << 30},
    {.name = "pipe_size", .kind = ML_PARAM_INT, .offset = offsetof(pipe_config, pipe_size),
     .min = 0, .max = INT_MAX},
    {.name = "total_bytes", .kind = ML_PARAM_INT, .offset = offsetof(pipe_config, total_bytes),
     .min = 0, .max = (int64_t)PIPE_MAX_TOTAL},
    {.name = "huge_pages", .kind = ML_PARAM_BOOL, .offset = offsetof(pipe_config, huge_pages)},
    {.name = "busy_loop", .kind = ML_PARAM_BOOL, .offset = offsetof(pipe_config, busy_loop)},
    {.name = "touch_pages", .kind = ML_PARAM_BOOL, .offset = offsetof(pipe_config, touch_pages)},
    {.name = "verify", .kind = ML_PARAM_BOOL, .offset = offsetof(pipe_config, verify)},
    {.name = "vmsplice_sections", .kind = ML_PARAM_INT,
     .offset = offsetof(pipe_config, vmsplice_sections), .min = 0, .max = 1024},
    {.name = "writer_cpu", .kind = ML_PARAM_INT, .offset = offsetof(pipe_config, writer_cpu),
     .min = -1, .max = CPU_SETSIZE - 1},
    {.name = "reader_cpu", .kind = ML_PARAM_INT, .offset = offsetof(pipe_config, reader_cpu),
     .min = -1, .max = CPU_SETSIZE - 1},
    {.name = "timeout_s", .kind = ML_PARAM_DOUBLE, .offset = offsetof(pipe_config, timeout_s),
     .min_double = 0.001, .max_double = 86400.0},
    {0},
};

const ml_family ml_family_pipe = {
    .name = "pipe",
    .description = "a writer and a reader process joined by a pipe (write|vmsplice -> read|splice); "
                   "total_bytes=0 adapts the transfer to the sample time",
    .config_size = sizeof(pipe_config),
    .params = pipe_params,
    .setup = pipe_setup,
    .measure = pipe_measure,
    .teardown = pipe_teardown,
};

/* ---- ping-pong latency over two pipes (lmbench's lat_pipe) --------------- */

typedef struct latency_config {
    int64_t message_bytes;
    int64_t round_trips;
    int busy_loop;
    int64_t ping_cpu;
    int64_t pong_cpu;
    double timeout_s;
} latency_config;

typedef struct latency_state {
    latency_config config;
    shared_page *shared;
    uint64_t next_round_trips;
} latency_state;

static int move_all(int fd, unsigned char *buf, size_t len, int writing, side_result *r)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = writing ? write(fd, buf + done, len - done) : read(fd, buf + done, len - done);
        if (n < 0) {
            if (errno == EAGAIN) {
                r->eagain++;
                continue;
            }
            if (errno == EINTR)
                continue;
            child_fail(r, writing ? STEP_WRITE : STEP_READ, errno);
            return -1;
        }
        if (n == 0) {
            child_fail(r, STEP_EARLY_EOF, 0);
            return -1;
        }
        r->calls++;
        done += (size_t)n;
    }
    return 0;
}

static int latency_side(child_args *a)
{
    const latency_config *c = a->config;
    side_result *r = &a->shared->side[a->side];
    int ping = a->side == 0;
    size_t len = (size_t)c->message_bytes;
    child_buffer b;
    ml_counters counters;
    long usage[4];
    r->first_bad = UINT64_MAX;
    if (buffer_map(&b, len, 0, 1, r) != 0)
        return -1;
    if (c->busy_loop && (set_nonblocking(a->fd[0], r) != 0 || set_nonblocking(a->fd[1], r) != 0))
        return -1;
    if (a->ctx->counters)
        ml_counters_open(&counters, 0, 0);
    if (child_wait_go(a) != 0) {
        child_fail(r, STEP_START, 0);
        return -1;
    }
    child_usage(usage);
    if (a->ctx->counters)
        ml_counters_start(&counters);
    r->start_ns = ml_now_ns();
    size_t stamp = len < 8 ? len : 8;
    for (uint64_t i = 0; i < a->count; i++) {
        if (ping) {
            memcpy(b.base, &i, stamp);
            if (move_all(a->fd[0], b.base, len, 1, r) != 0 || move_all(a->fd[1], b.base, len, 0, r) != 0)
                return -1;
            uint64_t echoed = 0;
            memcpy(&echoed, b.base, stamp);
            uint64_t expected = 0;
            memcpy(&expected, &i, stamp);
            if (echoed != expected) {
                r->verify_bad++;
                if (r->first_bad == UINT64_MAX)
                    r->first_bad = i;
            }
        } else if (move_all(a->fd[0], b.base, len, 0, r) != 0 || move_all(a->fd[1], b.base, len, 1, r) != 0) {
            return -1;
        }
        r->bytes = (i + 1) * len;
    }
    r->end_ns = ml_now_ns();
    if (a->ctx->counters) {
        ml_counters_stop(&counters);
        ml_counters_read(&counters, &r->counters);
        ml_counters_close(&counters);
    }
    child_usage_delta(r, usage);
    return 0;
}

static int latency_setup(const void *config, void **state_out, ml_context *ctx, ml_error *err)
{
    (void)ctx;
    const latency_config *c = config;
    if (check_cpus(c->ping_cpu, c->pong_cpu, "ping_cpu", "pong_cpu", c->busy_loop, err) != 0)
        return -1;
    latency_state *s = calloc(1, sizeof *s);
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "pipe latency state");
    s->config = *c;
    void *p = mmap(NULL, sizeof(shared_page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        free(s);
        return ml_fail(err, ML_ERR_OS, errno, "mmap of the shared result page: %s", strerror(errno));
    }
    s->shared = p;
    s->next_round_trips = 1000;
    *state_out = s;
    return 0;
}

static void latency_teardown(void *state)
{
    latency_state *s = state;
    if (!s)
        return;
    munmap(s->shared, sizeof(shared_page));
    free(s);
}

static int latency_once(latency_state *s, uint64_t round_trips, ml_context *ctx, ml_error *err)
{
    const latency_config *c = &s->config;
    pair_run run;
    run_init(&run);
    int there[2], back[2];
    if (pipe2(there, O_CLOEXEC) != 0) {
        run_finish(&run);
        return ml_fail(err, ML_ERR_OS, errno, "pipe2: %s", strerror(errno));
    }
    run.data_fd[0] = there[0];
    run.data_fd[1] = there[1];
    run.n_data = 2;
    if (pipe2(back, O_CLOEXEC) != 0) {
        int e = errno;
        run_finish(&run);
        return ml_fail(err, ML_ERR_OS, e, "pipe2: %s", strerror(e));
    }
    run.data_fd[2] = back[0];
    run.data_fd[3] = back[1];
    run.n_data = 4;
    child_args proto[2];
    memset(proto, 0, sizeof proto);
    for (int k = 0; k < 2; k++) {
        proto[k].config = c;
        proto[k].shared = s->shared;
        proto[k].side = k;
        proto[k].count = round_trips;
        proto[k].ctx = ctx;
    }
    proto[0].fd[0] = there[1];
    proto[0].fd[1] = back[0];
    proto[1].fd[0] = there[0];
    proto[1].fd[1] = back[1];
    const pair_spec spec = {
        .main = {latency_side, latency_side},
        .comm = {"memlab-ping", "memlab-pong"},
        .name = {"ping", "pong"},
        .cpu = {(int)c->ping_cpu, (int)c->pong_cpu},
        .expected = round_trips * (uint64_t)c->message_bytes,
        .timeout_s = c->timeout_s,
        .what = "the pipe ping-pong",
    };
    return run_pair(&run, &spec, proto, ctx, err);
}

static int latency_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    latency_state *s = state;
    const latency_config *c = &s->config;
    const side_result *ping = &s->shared->side[0], *pong = &s->shared->side[1];
    uint64_t target = ctx && ctx->target_ns ? ctx->target_ns : 100000000ULL;
    uint64_t count = c->round_trips ? (uint64_t)c->round_trips : s->next_round_trips;
    int runs = 0;
    for (;;) {
        if (latency_once(s, count, ctx, err) != 0)
            return -1;
        runs++;
        uint64_t elapsed = ping->end_ns - ping->start_ns;
        if (c->round_trips || elapsed >= target || runs >= PIPE_MAX_ADAPT_RUNS)
            break;
        count = grow_count(count, elapsed, target, 1, (uint64_t)1 << 40);
        ML_CHECK_INTERRUPT(ctx, err);
    }
    if (!c->round_trips)
        s->next_round_trips = count;
    out->elapsed_ns = ping->end_ns - ping->start_ns;
    out->units = (double)count;
    out->bytes = 0;
    merge_counters(&out->counters, ping, pong, ctx && ctx->counters);
    ml_metric_add(out, "round_trips", (double)count);
    ml_metric_add(out, "adapt_runs", (double)runs);
    ml_metric_add(out, "echo_errors", (double)ping->verify_bad);
    add_side_metrics(out, ping, "ping");
    add_side_metrics(out, pong, "pong");
    return 0;
}

static const ml_param latency_params[] = {
    {.name = "message_bytes", .kind = ML_PARAM_INT, .offset = offsetof(latency_config, message_bytes),
     .min = 1, .max = (int64_t)1 << 20},
    {.name = "round_trips", .kind = ML_PARAM_INT, .offset = offsetof(latency_config, round_trips),
     .min = 0, .max = (int64_t)1 << 40},
    {.name = "busy_loop", .kind = ML_PARAM_BOOL, .offset = offsetof(latency_config, busy_loop)},
    {.name = "ping_cpu", .kind = ML_PARAM_INT, .offset = offsetof(latency_config, ping_cpu),
     .min = -1, .max = CPU_SETSIZE - 1},
    {.name = "pong_cpu", .kind = ML_PARAM_INT, .offset = offsetof(latency_config, pong_cpu),
     .min = -1, .max = CPU_SETSIZE - 1},
    {.name = "timeout_s", .kind = ML_PARAM_DOUBLE, .offset = offsetof(latency_config, timeout_s),
     .min_double = 0.001, .max_double = 86400.0},
    {0},
};

const ml_family ml_family_pipe_latency = {
    .name = "pipe_latency",
    .description = "round trips of a small message between two processes over a pair of pipes "
                   "(lmbench lat_pipe); round_trips=0 adapts to the sample time",
    .config_size = sizeof(latency_config),
    .params = latency_params,
    .setup = latency_setup,
    .measure = latency_measure,
    .teardown = latency_teardown,
};
