/* UnixBench's system tests: process creation (spawn), execl and file copy
 * (fstime -c), each run by `copies` worker processes in parallel whose counts
 * are summed, as UnixBench's `-c` does.
 *
 * Workers are forked from the calling (Python) process and run only C, then
 * _exit.  spawn and execl workers immediately exec memlab_system_helper,
 * which runs the loop in a small process like UnixBench's own programs (see
 * the helper for why).  file_copy workers copy between two files opened in
 * setup; the files are unnamed (O_TMPFILE, or unlinked right after
 * creation), so they vanish with the last descriptor even when the run is
 * interrupted or killed.
 *
 * A sample lasts duration_s (the test's own duration, like UnixBench's -t),
 * or exactly `iterations` loops per copy when iterations > 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memlab.h"

#define SYSTEM_MAX_COPIES 256
#define SYSTEM_MAX_BUFFER (16 << 20)
#define SYSTEM_MAX_BLOCKS (16 << 20) /* KiB: 16 GiB per file */
#define SYSTEM_POLL_MS 50
#define SYSTEM_GRACE_NS (30ull * 1000000000ull)
#define SYSTEM_RECORD_MAX 160

enum { TEST_SPAWN, TEST_EXECL, TEST_FILE_COPY };
static const char *const system_test_names[] = {"spawn", "execl", "file_copy", NULL};

/* What a worker reports as failing (the STAGE field of its record). */
enum {
    STAGE_NONE = 0,
    STAGE_FORK = 1,
    STAGE_EXEC = 2,
    STAGE_WAIT = 3,
    STAGE_READ = 4,
    STAGE_WRITE = 5,
    STAGE_SEEK = 6,
    STAGE_START = 7,
    STAGE_USAGE = 9,
};

typedef struct system_config {
    int test;
    double duration_s;
    int64_t iterations;
    int64_t copies;
    int64_t buffer_size;
    int64_t max_blocks;
    ml_buffer directory;
    ml_buffer helper;
} system_config;

typedef struct system_record {
    int seen;
    int errnum;
    int stage;
    uint64_t count;
    uint64_t elapsed_ns;
    uint64_t reaped;          /* spawn: children reaped with status 0 */
    uint64_t verified_bytes;  /* file_copy: destination bytes checked */
    uint64_t mismatched_bytes;
    uint64_t cpu_ns;          /* user + system time of the loop, reaped children included */
} system_record;

typedef struct system_state {
    int test;
    uint64_t duration_ns;
    uint64_t iterations;
    int copies;
    size_t buffer_size;
    uint64_t file_bytes;
    char directory[PATH_MAX];
    char helper[PATH_MAX];
    int *fds;               /* file_copy: source, destination per copy */
    unsigned char *buffer;  /* file_copy: the copy buffer (workers get their own COW copy) */
    char (*argv_text)[5][24]; /* spawn/execl: per-copy argument strings, built before fork */
    pid_t *pids;
    system_record *records;
} system_state;

static const ml_param system_params[] = {
    {.name = "test", .kind = ML_PARAM_CHOICE, .offset = offsetof(system_config, test),
     .choices = system_test_names},
    {.name = "duration_s", .kind = ML_PARAM_DOUBLE, .offset = offsetof(system_config, duration_s),
     .min_double = 1e-3, .max_double = 86400.0},
    {.name = "iterations", .kind = ML_PARAM_INT, .offset = offsetof(system_config, iterations),
     .min = 0, .max = INT64_C(1) << 40},
    {.name = "copies", .kind = ML_PARAM_INT, .offset = offsetof(system_config, copies),
     .min = 1, .max = SYSTEM_MAX_COPIES},
    {.name = "buffer_bytes", .kind = ML_PARAM_INT, .offset = offsetof(system_config, buffer_size),
     .min = 1, .max = SYSTEM_MAX_BUFFER},
    {.name = "max_blocks", .kind = ML_PARAM_INT, .offset = offsetof(system_config, max_blocks),
     .min = 1, .max = SYSTEM_MAX_BLOCKS},
    {.name = "directory", .kind = ML_PARAM_BUFFER, .offset = offsetof(system_config, directory)},
    {.name = "helper", .kind = ML_PARAM_BUFFER, .offset = offsetof(system_config, helper)},
    {0},
};

/* ---- the file pattern ------------------------------------------------ */

/* A byte that depends on its offset, so a misplaced buffer is noticed. */
static inline unsigned char pattern_byte(uint64_t offset)
{
    return (unsigned char)((offset ^ (offset >> 8) ^ (offset >> 16) ^ (offset >> 24)) * 97u + 13u);
}

static void fill_pattern(unsigned char *buf, size_t n, uint64_t offset)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern_byte(offset + i);
}

/* ---- worker side: async-signal-safe only (we forked a threaded process) -- */

static char *append_u64(char *p, uint64_t value)
{
    char digits[24];
    int n = 0;
    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    while (n)
        *p++ = digits[--n];
    return p;
}

static void write_record(int fd, int copy, int errnum, int stage, uint64_t count, uint64_t elapsed_ns,
                         uint64_t verified, uint64_t mismatched, uint64_t used_cpu_ns)
{
    char line[SYSTEM_RECORD_MAX];
    char *p = line;
    const uint64_t fields[] = {(uint64_t)copy, (uint64_t)errnum, (uint64_t)stage, count, elapsed_ns, 0,
                               verified, mismatched, used_cpu_ns};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        p = append_u64(p, fields[i]);
        *p++ = i + 1 < sizeof fields / sizeof fields[0] ? ' ' : '\n';
    }
    ssize_t ignored = write(fd, line, (size_t)(p - line));
    (void)ignored;
}

static uint64_t self_cpu_ns(void)
{
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) < 0)
        return 0;
    return ((uint64_t)usage.ru_utime.tv_sec + (uint64_t)usage.ru_stime.tv_sec) * 1000000000u
           + ((uint64_t)usage.ru_utime.tv_usec + (uint64_t)usage.ru_stime.tv_usec) * 1000u;
}

/* fstime's copy loop: read a buffer, write it; at the end of the source
 * rewind both files.  Only whole buffers copied are counted. */
static void file_copy_worker(const system_state *s, int copy, int result_fd)
{
    int src = s->fds[2 * copy], dst = s->fds[2 * copy + 1];
    unsigned char *buf = s->buffer;
    size_t bs = s->buffer_size;
    uint64_t count = 0;
    int errnum = 0, stage = STAGE_NONE;

    memset(buf, 0, bs); /* take the copy-on-write faults before the clock starts */
    if (lseek(src, 0, SEEK_SET) < 0 || lseek(dst, 0, SEEK_SET) < 0) {
        write_record(result_fd, copy, errno, STAGE_SEEK, 0, 0, 0, 0, 0);
        return;
    }
    uint64_t start_cpu = self_cpu_ns();
    uint64_t start = ml_now_ns(), now = start;
    for (;;) {
        if (s->iterations) {
            if (count >= s->iterations)
                break;
        } else if ((count & 15) == 0 && (now = ml_now_ns()) - start >= s->duration_ns) {
            break;
        }
        ssize_t got = read(src, buf, bs);
        if (got != (ssize_t)bs) {
            if (got < 0 && errno != EINTR) {
                errnum = errno, stage = STAGE_READ;
                break;
            }
            if (lseek(src, 0, SEEK_SET) < 0 || lseek(dst, 0, SEEK_SET) < 0) {
                errnum = errno, stage = STAGE_SEEK;
                break;
            }
            continue;
        }
        ssize_t put = write(dst, buf, bs);
        if (put != (ssize_t)bs) {
            errnum = put < 0 ? errno : ENOSPC, stage = STAGE_WRITE;
            break;
        }
        count++;
    }
    uint64_t elapsed = ml_now_ns() - start;
    uint64_t used_cpu = self_cpu_ns() - start_cpu;

    /* Untimed: the destination must hold the source's bytes. */
    uint64_t copied = count * bs, verified = 0, mismatched = 0;
    uint64_t check = copied < s->file_bytes ? copied : s->file_bytes;
    while (errnum == 0 && verified < check) {
        size_t want = check - verified < bs ? (size_t)(check - verified) : bs;
        ssize_t got = pread(dst, buf, want, (off_t)verified);
        if (got <= 0) {
            errnum = got < 0 ? errno : EIO, stage = STAGE_READ;
            break;
        }
        for (ssize_t i = 0; i < got; i++)
            mismatched += buf[i] != pattern_byte(verified + (uint64_t)i);
        verified += (uint64_t)got;
    }
    write_record(result_fd, copy, errnum, stage, count, elapsed, verified, mismatched, used_cpu);
}

static void worker_main(const system_state *s, int copy, int go_fd, int result_fd)
{
    char release;
    ssize_t got;
    /* Die with the parent: an interrupted or killed run leaves no workers.
     * Ctrl-C at a terminal reaches the whole process group: a worker must
     * not run the interpreter's handler, only stop (the parent reports it). */
    struct sigaction default_action = {.sa_handler = SIG_DFL};
    sigaction(SIGINT, &default_action, NULL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    do
        got = read(go_fd, &release, 1);
    while (got < 0 && errno == EINTR);
    if (got != 0) { /* the parent closes the pipe to start; anything else aborts */
        write_record(result_fd, copy, got < 0 ? errno : ECANCELED, STAGE_START, 0, 0, 0, 0, 0);
        _exit(1);
    }
    if (s->test == TEST_FILE_COPY) {
        file_copy_worker(s, copy, result_fd);
        _exit(0);
    }
    int flags = fcntl(result_fd, F_GETFD);
    if (flags < 0 || fcntl(result_fd, F_SETFD, flags & ~FD_CLOEXEC) < 0) {
        write_record(result_fd, copy, errno, STAGE_EXEC, 0, 0, 0, 0, 0);
        _exit(1);
    }
    char *argv[7] = {(char *)s->helper, (char *)(s->test == TEST_SPAWN ? "spawn" : "execl"),
                     s->argv_text[copy][0], s->argv_text[copy][1], s->argv_text[copy][2],
                     s->argv_text[copy][3], NULL};
    execv(s->helper, argv);
    write_record(result_fd, copy, errno, STAGE_EXEC, 0, 0, 0, 0, 0);
    _exit(127);
}

/* ---- parent side -------------------------------------------------------- */

static int copy_path(char *dst, const ml_buffer *b, const char *what, int required, ml_error *err)
{
    const char *text = b->data;
    if (b->bytes == 0 || text[b->bytes - 1] != '\0' || memchr(text, '\0', b->bytes) != text + b->bytes - 1)
        return ml_fail(err, ML_ERR_VALUE, 0, "%s must be a path encoded as bytes ending in one NUL byte", what);
    if (b->bytes > PATH_MAX)
        return ml_fail(err, ML_ERR_VALUE, 0, "%s is %zu bytes long, above the maximum %d", what, b->bytes - 1,
                       PATH_MAX - 1);
    if (required && b->bytes == 1)
        return ml_fail(err, ML_ERR_VALUE, 0, "%s must not be empty for this test", what);
    memcpy(dst, text, b->bytes);
    return 0;
}

/* An unnamed file in dir: O_TMPFILE, or a unique name unlinked at once
 * where the file system does not support O_TMPFILE. */
static int open_unnamed(const char *dir, ml_error *err)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0)
        return fd;
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
        return ml_fail(err, ML_ERR_OS, errno, "file_copy: cannot create a file in directory=%s: %s", dir,
                       strerror(errno));
    char name[PATH_MAX];
    if (snprintf(name, sizeof name, "%s/.memlab-file-copy-%ld-XXXXXX", dir, (long)getpid()) >= (int)sizeof name)
        return ml_fail(err, ML_ERR_VALUE, 0, "directory=%s is too long for a file name", dir);
    fd = mkostemp(name, O_CLOEXEC);
    if (fd < 0)
        return ml_fail(err, ML_ERR_OS, errno, "file_copy: cannot create a file in directory=%s: %s", dir,
                       strerror(errno));
    if (unlink(name) < 0) {
        int saved = errno;
        close(fd);
        return ml_fail(err, ML_ERR_OS, saved, "file_copy: cannot unlink %s: %s", name, strerror(saved));
    }
    return fd;
}

static int write_source(system_state *s, int fd, ml_context *ctx, ml_error *err)
{
    enum { CHUNK = 1 << 16 };
    unsigned char *chunk = malloc(CHUNK);
    if (!chunk)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "file_copy: no memory for a %d byte buffer", CHUNK);
    uint64_t done = 0;
    int rc = 0;
    while (done < s->file_bytes) {
        if (ml_interrupted(ctx)) {
            rc = ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
            break;
        }
        size_t n = s->file_bytes - done < CHUNK ? (size_t)(s->file_bytes - done) : CHUNK;
        fill_pattern(chunk, n, done);
        ssize_t put = pwrite(fd, chunk, n, (off_t)done);
        if (put <= 0) {
            int e = put < 0 ? errno : ENOSPC;
            rc = ml_fail(err, ML_ERR_OS, e,
                         "file_copy: writing the %" PRIu64 " KiB source file in directory=%s failed after %"
                         PRIu64 " bytes: %s (a run needs 2 x max_blocks KiB x copies = %" PRIu64 " KiB there)",
                         s->file_bytes / 1024, s->directory, done, strerror(e),
                         2 * s->file_bytes / 1024 * (uint64_t)s->copies);
            break;
        }
        done += (uint64_t)put;
    }
    free(chunk);
    return rc;
}

static void system_teardown(void *state)
{
    system_state *s = state;
    if (!s)
        return;
    if (s->fds)
        for (int i = 0; i < 2 * s->copies; i++)
            if (s->fds[i] >= 0)
                close(s->fds[i]);
    free(s->fds);
    free(s->buffer);
    free(s->argv_text);
    free(s->pids);
    free(s->records);
    free(s);
}

static int setup_state(system_state *s, const system_config *c, ml_context *ctx, ml_error *err)
{
    s->test = c->test;
    s->duration_ns = (uint64_t)(c->duration_s * 1e9);
    s->iterations = (uint64_t)c->iterations;
    s->copies = (int)c->copies;
    s->buffer_size = (size_t)c->buffer_size;
    s->file_bytes = (uint64_t)c->max_blocks * 1024;
    s->pids = calloc((size_t)s->copies, sizeof *s->pids);
    s->records = calloc((size_t)s->copies, sizeof *s->records);
    if (!s->pids || !s->records)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for %d copies", s->copies);
    if (copy_path(s->helper, &c->helper, "helper", c->test != TEST_FILE_COPY, err)
        || copy_path(s->directory, &c->directory, "directory", c->test == TEST_FILE_COPY, err))
        return -1;

    if (c->test != TEST_FILE_COPY) {
        if (s->helper[0] != '/')
            return ml_fail(err, ML_ERR_VALUE, 0, "helper=%s must be an absolute path", s->helper);
        if (access(s->helper, X_OK) < 0)
            return ml_fail(err, ML_ERR_OS, errno, "helper=%s is not an executable file: %s", s->helper,
                           strerror(errno));
        s->argv_text = calloc((size_t)s->copies, sizeof *s->argv_text);
        if (!s->argv_text)
            return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for %d copies", s->copies);
        return 0;
    }

    if (s->buffer_size > s->file_bytes)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "buffer_bytes=%zu is above the file size max_blocks x 1024 = %" PRIu64 " bytes",
                       s->buffer_size, s->file_bytes);
    struct stat st;
    if (stat(s->directory, &st) < 0)
        return ml_fail(err, ML_ERR_OS, errno, "file_copy: directory=%s: %s", s->directory, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return ml_fail(err, ML_ERR_OS, ENOTDIR, "file_copy: directory=%s is not a directory", s->directory);
    s->fds = malloc(2 * (size_t)s->copies * sizeof *s->fds);
    if (!s->fds)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for %d copies", s->copies);
    for (int i = 0; i < 2 * s->copies; i++)
        s->fds[i] = -1;
    /* page-aligned, so that the copy's alignment does not depend on the heap */
    void *buffer = NULL;
    if (posix_memalign(&buffer, 4096, s->buffer_size) == 0)
        s->buffer = buffer;
    if (!s->buffer)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for a %zu byte buffer", s->buffer_size);
    for (int i = 0; i < 2 * s->copies; i++) {
        s->fds[i] = open_unnamed(s->directory, err);
        if (s->fds[i] < 0)
            return -1;
        if (i % 2 == 0 && write_source(s, s->fds[i], ctx, err))
            return -1;
    }
    return 0;
}

static int system_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    system_state *s = calloc(1, sizeof *s);
    *state = NULL;
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for the system state");
    if (setup_state(s, config, ctx, err)) {
        system_teardown(s); /* closes the files made so far: nothing stays behind */
        return -1;
    }
    *state = s;
    return 0;
}

static void kill_workers(system_state *s, int started)
{
    for (int i = 0; i < started; i++)
        if (s->pids[i] > 0)
            kill(s->pids[i], SIGKILL);
    for (int i = 0; i < started; i++)
        if (s->pids[i] > 0) {
            while (waitpid(s->pids[i], NULL, 0) < 0 && errno == EINTR)
                ;
            s->pids[i] = 0;
        }
}

/* Parse complete lines of "COPY ERRNO STAGE COUNT ELAPSED REAPED VERIFIED MISMATCHED CPU". */
static int take_records(system_state *s, char *pending, size_t *used, int *reported, ml_error *err)
{
    char *line = pending, *newline;
    while ((newline = memchr(line, '\n', *used - (size_t)(line - pending))) != NULL) {
        *newline = '\0';
        unsigned long long v[9];
        if (sscanf(line, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                   &v[5], &v[6], &v[7], &v[8]) != 9 || v[0] >= (unsigned long long)s->copies || s->records[v[0]].seen)
            return ml_fail(err, ML_ERR_OS, EPROTO, "a %s worker sent a malformed result: %.80s",
                           system_test_names[s->test], line);
        system_record *r = &s->records[v[0]];
        *r = (system_record){.seen = 1, .errnum = (int)v[1], .stage = (int)v[2], .count = v[3],
                             .elapsed_ns = v[4], .reaped = v[5], .verified_bytes = v[6],
                             .mismatched_bytes = v[7], .cpu_ns = v[8]};
        (*reported)++;
        line = newline + 1;
    }
    *used -= (size_t)(line - pending);
    memmove(pending, line, *used);
    return 0;
}

static const char *stage_text(int stage)
{
    switch (stage) {
    case STAGE_FORK: return "fork";
    case STAGE_EXEC: return "exec of the helper";
    case STAGE_WAIT: return "waitpid";
    case STAGE_READ: return "read";
    case STAGE_WRITE: return "write";
    case STAGE_SEEK: return "lseek";
    case STAGE_START: return "start";
    case STAGE_USAGE: return "the helper's arguments";
    default: return "?";
    }
}

/* Run the workers and collect one record from each. */
static int run_workers(system_state *s, ml_context *ctx, ml_error *err)
{
    int go[2], result[2];
    if (pipe2(go, O_CLOEXEC) < 0)
        return ml_fail(err, ML_ERR_OS, errno, "pipe: %s", strerror(errno));
    if (pipe2(result, O_CLOEXEC) < 0) {
        int e = errno;
        close(go[0]), close(go[1]);
        return ml_fail(err, ML_ERR_OS, e, "pipe: %s", strerror(e));
    }
    memset(s->records, 0, (size_t)s->copies * sizeof *s->records);
    memset(s->pids, 0, (size_t)s->copies * sizeof *s->pids);
    if (s->argv_text)
        for (int i = 0; i < s->copies; i++) {
            snprintf(s->argv_text[i][0], 24, "%d", i);
            snprintf(s->argv_text[i][1], 24, "%d", result[1]);
            snprintf(s->argv_text[i][2], 24, "%" PRIu64, s->duration_ns);
            snprintf(s->argv_text[i][3], 24, "%" PRIu64, s->iterations);
        }

    int rc = 0, started = 0;
    for (; started < s->copies; started++) {
        pid_t pid = fork();
        if (pid == 0) {
            close(go[1]);
            close(result[0]);
            worker_main(s, started, go[0], result[1]);
            _exit(1);
        }
        if (pid < 0) {
            rc = ml_fail(err, ML_ERR_OS, errno, "fork of worker %d of copies=%d failed: %s", started, s->copies,
                         strerror(errno));
            break;
        }
        s->pids[started] = pid;
    }
    close(go[0]);
    close(result[1]);
    if (rc) {
        close(go[1]); /* unblocks nobody useful: the workers are killed next */
        kill_workers(s, started);
        close(result[0]);
        return rc;
    }
    uint64_t released = ml_now_ns();
    close(go[1]); /* end of file on the go pipe starts every worker at once */

    char pending[SYSTEM_RECORD_MAX * 4];
    size_t used = 0;
    int reported = 0, eof = 0;
    while (!eof && reported < s->copies) {
        struct pollfd p = {.fd = result[0], .events = POLLIN};
        int ready = poll(&p, 1, SYSTEM_POLL_MS);
        if (ready < 0 && errno != EINTR) {
            rc = ml_fail(err, ML_ERR_OS, errno, "poll: %s", strerror(errno));
            break;
        }
        if (ready > 0) {
            ssize_t got = read(result[0], pending + used, sizeof pending - used);
            if (got < 0 && errno != EINTR && errno != EAGAIN) {
                rc = ml_fail(err, ML_ERR_OS, errno, "read of worker results: %s", strerror(errno));
                break;
            }
            if (got == 0)
                eof = 1;
            if (got > 0) {
                used += (size_t)got;
                if ((rc = take_records(s, pending, &used, &reported, err)))
                    break;
                if (used == sizeof pending) {
                    rc = ml_fail(err, ML_ERR_OS, EPROTO, "worker results overflow the buffer");
                    break;
                }
            }
        }
        if (ml_interrupted(ctx)) {
            rc = ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
            break;
        }
        if (!s->iterations && ml_now_ns() - released > s->duration_ns + SYSTEM_GRACE_NS) {
            rc = ml_fail(err, ML_ERR_TIMEOUT, 0, "%s workers did not finish within duration_s + %llu s",
                         system_test_names[s->test], SYSTEM_GRACE_NS / 1000000000ull);
            break;
        }
    }
    close(result[0]);
    if (rc) {
        kill_workers(s, started);
        return rc;
    }
    for (int i = 0; i < s->copies; i++) {
        int status = 0;
        while (waitpid(s->pids[i], &status, 0) < 0 && errno == EINTR)
            ;
        s->pids[i] = 0;
        const system_record *r = &s->records[i];
        if (!r->seen)
            return ml_fail(err, ML_ERR_OS, ECHILD, "%s worker %d ended without a result (%s %d)",
                           system_test_names[s->test], i, WIFSIGNALED(status) ? "signal" : "exit status",
                           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
    for (int i = 0; i < s->copies; i++) {
        const system_record *r = &s->records[i];
        if (r->errnum == 0)
            continue;
        if (s->test == TEST_FILE_COPY)
            return ml_fail(err, ML_ERR_OS, r->errnum,
                           "file_copy: %s in directory=%s failed in copy %d after %" PRIu64 " buffers: %s",
                           stage_text(r->stage), s->directory, i, r->count, strerror(r->errnum));
        return ml_fail(err, ML_ERR_OS, r->errnum, "%s: %s failed in copy %d after %" PRIu64 " loops (helper %s): %s",
                       system_test_names[s->test], stage_text(r->stage), i, r->count, s->helper,
                       strerror(r->errnum));
    }
    return 0;
}

static int system_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    system_state *s = state;
    ml_counters counters;
    if (ctx->counters) {
        ml_counters_open(&counters, 0, 1); /* inherit: the workers' and their children's events */
        ml_counters_start(&counters);
    }
    int rc = run_workers(s, ctx, err);
    if (ctx->counters) {
        ml_counters_stop(&counters);
        if (rc == 0)
            ml_counters_read(&counters, &out->counters);
        ml_counters_close(&counters);
    } else {
        ml_counter_values_missing(&out->counters, 0);
    }
    if (rc)
        return rc;

    double total = 0, elapsed_sum = 0, rate_min = 0, rate_max = 0;
    double reaped = 0, verified = 0, mismatched = 0, cpu_s = 0;
    for (int i = 0; i < s->copies; i++) {
        const system_record *r = &s->records[i];
        double rate = r->elapsed_ns ? (double)r->count / (double)r->elapsed_ns * 1e9 : 0.0;
        if (i == 0 || rate < rate_min)
            rate_min = rate;
        if (i == 0 || rate > rate_max)
            rate_max = rate;
        total += (double)r->count;
        elapsed_sum += (double)r->elapsed_ns;
        reaped += (double)r->reaped;
        verified += (double)r->verified_bytes;
        mismatched += (double)r->mismatched_bytes;
        cpu_s += (double)r->cpu_ns * 1e-9;
    }
    /* UnixBench sums the copies' counts over their mean elapsed time. */
    out->elapsed_ns = (uint64_t)(elapsed_sum / s->copies + 0.5);
    out->units = total;
    out->bytes = s->test == TEST_FILE_COPY ? total * (double)s->buffer_size : 0.0;
    ml_metric_add(out, "loops", total);
    /* CPU time used, all copies: on a busy machine loops per CPU second vary
     * far less than loops per wall second. */
    ml_metric_add(out, "cpu_s", cpu_s);
    if (cpu_s > 0)
        ml_metric_add(out, "loops_per_cpu_s", total / cpu_s);
    ml_metric_add(out, "copy_rate_min_per_s", rate_min);
    ml_metric_add(out, "copy_rate_max_per_s", rate_max);
    if (s->test == TEST_SPAWN)
        ml_metric_add(out, "children_reaped", reaped);
    if (s->test == TEST_FILE_COPY) {
        ml_metric_add(out, "verified_bytes", verified);
        ml_metric_add(out, "mismatched_bytes", mismatched);
    }
    return 0;
}

const ml_family ml_family_system = {
    .name = "system",
    .description = "UnixBench's spawn, execl and file copy, run by parallel copies",
    .config_size = sizeof(system_config),
    .params = system_params,
    .setup = system_setup,
    .measure = system_measure,
    .teardown = system_teardown,
};
