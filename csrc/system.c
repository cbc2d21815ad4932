/* UnixBench's system tests: process creation (spawn), execl and file copy
 * (fstime -c), each run by `copies` worker processes in parallel whose counts
 * are summed, as UnixBench's `-c` does.
 *
 * Workers are forked by children.c from the calling (Python) process and
 * run only C, reporting in their slot of the shared memory
 * (system_report.h).  spawn and execl workers immediately exec
 * memlab_system_helper, which runs the loop in a small process like
 * UnixBench's own programs (see the helper for why).  file_copy workers copy
 * between two files opened in setup; the files are unnamed (O_TMPFILE, or
 * unlinked right after creation), so they vanish with the last descriptor
 * even when the run is interrupted or killed.
 *
 * A sample lasts duration_s (the test's own duration, like UnixBench's -t),
 * or exactly `iterations` loops per copy when iterations > 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memlab.h"
#include "system_report.h"

#define SYSTEM_MAX_COPIES 256
#define SYSTEM_MAX_BUFFER_BYTES (16 << 20)
#define SYSTEM_MAX_BLOCKS (16 << 20) /* KiB: 16 GiB per file */
#define SYSTEM_GRACE_S 30
#define SYSTEM_ARG_BYTES 24

enum { TEST_SPAWN, TEST_EXECL, TEST_FILE_COPY };
static const char *const system_test_names[] = {"spawn", "execl", "file_copy", NULL};
static const char *const system_worker_names[] = {"memlab-spawn", "memlab-execl", "memlab-copy"};

typedef struct system_config {
    int test;
    double duration_s;
    int64_t iterations;
    int64_t copies;
    int64_t buffer_bytes; /* parameter buffer_size */
    int64_t max_blocks;
    ml_buffer directory;
    ml_buffer helper;
} system_config;

typedef struct system_state {
    int test;
    uint64_t duration_ns;
    uint64_t iterations;
    int copies;
    size_t buffer_bytes;
    uint64_t file_bytes;
    char directory[PATH_MAX];
    char helper[PATH_MAX];
    int *fds;               /* file_copy: source, destination per copy */
    unsigned char *buffer;  /* file_copy: the copy buffer (workers get their own COW copy) */
    char (*argv_text)[4][SYSTEM_ARG_BYTES]; /* spawn/execl: per-copy arguments, built before fork */
    ml_child *children;     /* one per copy */
    ml_shared shared;       /* one system_report per copy */
} system_state;

static const ml_param system_params[] = {
    {.name = "test", .kind = ML_PARAM_CHOICE, .offset = offsetof(system_config, test),
     .choices = system_test_names, ML_DEFAULT_CHOICE("spawn")},
    {.name = "duration_s", .kind = ML_PARAM_DOUBLE, .offset = offsetof(system_config, duration_s),
     .min_double = 1e-3, .max_double = 86400.0, ML_DEFAULT_DOUBLE(1.0)},
    {.name = "iterations", .kind = ML_PARAM_INT, .offset = offsetof(system_config, iterations),
     .min = 0, .max = INT64_C(1) << 40, ML_DEFAULT(0)},
    {.name = "copies", .kind = ML_PARAM_INT, .offset = offsetof(system_config, copies),
     .min = 1, .max = SYSTEM_MAX_COPIES, ML_DEFAULT(1)},
    {.name = "buffer_bytes", .kind = ML_PARAM_INT, .offset = offsetof(system_config, buffer_bytes),
     .min = 1, .max = SYSTEM_MAX_BUFFER_BYTES, ML_DEFAULT(1024)},
    {.name = "max_blocks", .kind = ML_PARAM_INT, .offset = offsetof(system_config, max_blocks),
     .min = 1, .max = SYSTEM_MAX_BLOCKS, ML_DEFAULT(2000)},
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

static uint64_t self_cpu_ns(void)
{
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) < 0)
        return 0;
    return ((uint64_t)usage.ru_utime.tv_sec + (uint64_t)usage.ru_stime.tv_sec) * 1000000000u
           + ((uint64_t)usage.ru_utime.tv_usec + (uint64_t)usage.ru_stime.tv_usec) * 1000u;
}

static int report_failure(system_report *r, int errnum, int stage)
{
    r->errnum = errnum;
    r->stage = stage;
    r->done = 1;
    return -1;
}

/* fstime's copy loop: read a buffer, write it; at the end of the source
 * rewind both files.  Only whole buffers copied are counted. */
static int file_copy_worker(const system_state *s, int copy, system_report *r)
{
    int src = s->fds[2 * copy], dst = s->fds[2 * copy + 1];
    unsigned char *buf = s->buffer;
    size_t buffer_bytes = s->buffer_bytes;
    uint64_t count = 0;
    int errnum = 0, stage = SYSTEM_STAGE_NONE;

    memset(buf, 0, buffer_bytes); /* take the copy-on-write faults before the clock starts */
    if (lseek(src, 0, SEEK_SET) < 0 || lseek(dst, 0, SEEK_SET) < 0)
        return report_failure(r, errno, SYSTEM_STAGE_SEEK);
    uint64_t start_cpu = self_cpu_ns();
    uint64_t start = ml_now_ns(), now = start;
    for (;;) {
        if (s->iterations) {
            if (count >= s->iterations)
                break;
        } else if ((count & 15) == 0 && (now = ml_now_ns()) - start >= s->duration_ns) {
            break;
        }
        ssize_t got = read(src, buf, buffer_bytes);
        if (got != (ssize_t)buffer_bytes) {
            if (got < 0 && errno != EINTR) {
                errnum = errno, stage = SYSTEM_STAGE_READ;
                break;
            }
            if (lseek(src, 0, SEEK_SET) < 0 || lseek(dst, 0, SEEK_SET) < 0) {
                errnum = errno, stage = SYSTEM_STAGE_SEEK;
                break;
            }
            continue;
        }
        ssize_t put = write(dst, buf, buffer_bytes);
        if (put != (ssize_t)buffer_bytes) {
            errnum = put < 0 ? errno : ENOSPC, stage = SYSTEM_STAGE_WRITE;
            break;
        }
        count++;
    }
    r->elapsed_ns = ml_now_ns() - start;
    r->cpu_ns = self_cpu_ns() - start_cpu;
    r->count = count;

    /* Untimed: the destination must hold the source's bytes. */
    uint64_t copied_bytes = count * buffer_bytes, verified = 0, mismatched = 0;
    uint64_t check_bytes = copied_bytes < s->file_bytes ? copied_bytes : s->file_bytes;
    while (errnum == 0 && verified < check_bytes) {
        size_t want = check_bytes - verified < buffer_bytes ? (size_t)(check_bytes - verified) : buffer_bytes;
        ssize_t got = pread(dst, buf, want, (off_t)verified);
        if (got <= 0) {
            errnum = got < 0 ? errno : EIO, stage = SYSTEM_STAGE_READ;
            break;
        }
        for (ssize_t i = 0; i < got; i++)
            mismatched += buf[i] != pattern_byte(verified + (uint64_t)i);
        verified += (uint64_t)got;
    }
    r->verified_bytes = verified;
    r->mismatched_bytes = mismatched;
    r->errnum = errnum;
    r->stage = stage;
    r->done = 1;
    return errnum ? -1 : 0;
}

static int worker_main(void *arg, const ml_child_io *io)
{
    const system_state *s = arg;
    system_report *r = io->slot;
    if (ml_child_wait_start(io) != 0)
        return report_failure(r, ECANCELED, SYSTEM_STAGE_START);
    if (s->test == TEST_FILE_COPY)
        return file_copy_worker(s, io->index, r);
    /* the helper fills the slot through the shared memory's descriptor */
    int flags = fcntl(io->report_fd, F_GETFD);
    if (flags < 0 || fcntl(io->report_fd, F_SETFD, flags & ~FD_CLOEXEC) < 0)
        return report_failure(r, errno, SYSTEM_STAGE_EXEC);
    char(*text)[SYSTEM_ARG_BYTES] = s->argv_text[io->index];
    char *argv[7] = {(char *)s->helper, (char *)system_test_names[s->test], text[0], text[1],
                     text[2], text[3], NULL};
    execv(s->helper, argv);
    report_failure(r, errno, SYSTEM_STAGE_EXEC);
    return 127;
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
    enum { CHUNK_BYTES = 1 << 16 };
    unsigned char *chunk = malloc(CHUNK_BYTES);
    if (!chunk)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "file_copy: no memory for a %d byte buffer", CHUNK_BYTES);
    uint64_t done = 0;
    int rc = 0;
    while (done < s->file_bytes) {
        if (ml_interrupted(ctx)) {
            rc = ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
            break;
        }
        size_t n = s->file_bytes - done < CHUNK_BYTES ? (size_t)(s->file_bytes - done) : CHUNK_BYTES;
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
    free(s->children);
    ml_shared_unmap(&s->shared);
    free(s);
}

static int setup_state(system_state *s, const system_config *c, ml_context *ctx, ml_error *err)
{
    s->test = c->test;
    s->duration_ns = (uint64_t)(c->duration_s * 1e9);
    s->iterations = (uint64_t)c->iterations;
    s->copies = (int)c->copies;
    s->buffer_bytes = (size_t)c->buffer_bytes;
    s->file_bytes = (uint64_t)c->max_blocks * 1024;
    s->children = calloc((size_t)s->copies, sizeof *s->children);
    if (!s->children)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for %d copies", s->copies);
    if (ml_shared_map(&s->shared, s->copies, sizeof(system_report), err) != 0)
        return -1;
    for (int i = 0; i < s->copies; i++) {
        ml_child *child = &s->children[i];
        child->comm = system_worker_names[c->test];
        child->cpu = -1;
        for (int k = 0; k < ML_CHILD_KEEP_MAX; k++)
            child->keep_fd[k] = -1;
    }
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
        for (int i = 0; i < s->copies; i++) {
            snprintf(s->argv_text[i][0], SYSTEM_ARG_BYTES, "%d", s->shared.fd);
            snprintf(s->argv_text[i][1], SYSTEM_ARG_BYTES, "%zu", (size_t)i * s->shared.slot_bytes);
            snprintf(s->argv_text[i][2], SYSTEM_ARG_BYTES, "%" PRIu64, s->duration_ns);
            snprintf(s->argv_text[i][3], SYSTEM_ARG_BYTES, "%" PRIu64, s->iterations);
        }
        return 0;
    }

    if (s->buffer_bytes > s->file_bytes)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "buffer_bytes=%zu is above the file size max_blocks x 1024 = %" PRIu64 " bytes",
                       s->buffer_bytes, s->file_bytes);
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
    if (posix_memalign(&buffer, 4096, s->buffer_bytes) == 0)
        s->buffer = buffer;
    if (!s->buffer)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for a %zu byte buffer", s->buffer_bytes);
    for (int i = 0; i < 2 * s->copies; i++) {
        s->fds[i] = open_unnamed(s->directory, err);
        if (s->fds[i] < 0)
            return -1;
        s->children[i / 2].keep_fd[i % 2] = s->fds[i];
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

static const char *stage_text(int stage)
{
    switch (stage) {
    case SYSTEM_STAGE_FORK: return "fork";
    case SYSTEM_STAGE_EXEC: return "exec of the helper";
    case SYSTEM_STAGE_WAIT: return "waitpid";
    case SYSTEM_STAGE_READ: return "read";
    case SYSTEM_STAGE_WRITE: return "write";
    case SYSTEM_STAGE_SEEK: return "lseek";
    case SYSTEM_STAGE_START: return "start";
    case SYSTEM_STAGE_USAGE: return "the helper's arguments";
    default: return "?";
    }
}

/* Run the workers; every one must leave a report without an error. */
static int run_workers(system_state *s, ml_context *ctx, ml_error *err)
{
    const char *test = system_test_names[s->test];
    char what[48], timeout_text[48];
    snprintf(what, sizeof what, "the %s workers", test);
    snprintf(timeout_text, sizeof timeout_text, "duration_s + %d s", SYSTEM_GRACE_S);
    ml_children run = {
        .child = s->children,
        .count = s->copies,
        .main = worker_main,
        .arg = s,
        .shared = &s->shared,
        .timeout_ns = s->iterations ? 0 : s->duration_ns + (uint64_t)SYSTEM_GRACE_S * 1000000000u,
        .what = what,
        .timeout_text = timeout_text,
    };
    if (ml_children_run(&run, ctx, err) < 0)
        return -1;
    for (int i = 0; i < s->copies; i++) {
        const system_report *r = ml_shared_slot(&s->shared, i);
        int status = s->children[i].status;
        if (!r->done)
            return ml_fail(err, ML_ERR_OS, ECHILD, "%s worker %d ended without a result (%s %d)", test, i,
                           WIFSIGNALED(status) ? "signal" : "exit status",
                           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
    for (int i = 0; i < s->copies; i++) {
        const system_report *r = ml_shared_slot(&s->shared, i);
        if (r->errnum == 0)
            continue;
        if (s->test == TEST_FILE_COPY)
            return ml_fail(err, ML_ERR_OS, r->errnum,
                           "file_copy: %s in directory=%s failed in copy %d after %" PRIu64 " buffers: %s",
                           stage_text(r->stage), s->directory, i, r->count, strerror(r->errnum));
        return ml_fail(err, ML_ERR_OS, r->errnum, "%s: %s failed in copy %d after %" PRIu64 " loops (helper %s): %s",
                       test, stage_text(r->stage), i, r->count, s->helper, strerror(r->errnum));
    }
    return 0;
}

static int system_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    system_state *s = state;
    ml_counting counting;
    ml_counting_open(&counting, ctx, 1); /* inherit: the workers' and their children's events */
    ml_counting_begin(&counting);
    int rc = run_workers(s, ctx, err);
    ml_counting_end(&counting, &out->counters);
    if (rc)
        return rc;

    double total = 0, elapsed_sum = 0, rate_min = 0, rate_max = 0;
    double reaped = 0, verified = 0, mismatched = 0, cpu_s = 0;
    for (int i = 0; i < s->copies; i++) {
        const system_report *r = ml_shared_slot(&s->shared, i);
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
    out->bytes = s->test == TEST_FILE_COPY ? total * (double)s->buffer_bytes : 0.0;
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

ML_FAMILY(system) = {
    .name = "system",
    .description = "UnixBench's spawn, execl and file copy, run by parallel copies",
    .config_size = sizeof(system_config),
    .params = system_params,
    .setup = system_setup,
    .measure = system_measure,
    .teardown = system_teardown,
};
