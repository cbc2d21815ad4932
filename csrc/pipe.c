/* Pipe transfer (Mazzoli, "Making Linux pipes fast", 2022): a writer
 * process (write or vmsplice) and a reader process (read or splice) joined
 * by one pipe, forked for every run by children.c and reporting through
 * shared memory (pipe_side.c); with verify=True the writer sends the
 * position-dependent pattern of pipe_pattern.c and the reader checks every
 * byte.  total_bytes=0 grows the transfer until a run lasts the sample
 * time. */
#define _GNU_SOURCE
#include "pipe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#define PIPE_FIRST_TOTAL ((uint64_t)16 << 20)
#define PIPE_MAX_TOTAL ((uint64_t)1 << 46)

static const char *const pipe_writer_names[] = {"write", "vmsplice", NULL};
static const char *const pipe_reader_names[] = {"read", "splice", NULL};
enum { WRITER_WRITE, WRITER_VMSPLICE };
enum { READER_READ, READER_SPLICE };

typedef struct pipe_config {
    int writer;
    int reader;
    int64_t buffer_bytes;         /* parameter buffer_size */
    int64_t requested_pipe_bytes; /* parameter pipe_size; 0: the kernel's default */
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

typedef struct pipe_state {
    pipe_config config;
    ml_shared shared; /* the writer's and the reader's reports */
    uint64_t next_total_bytes; /* adapted bytes per sample (total_bytes == 0) */
} pipe_state;

/* With vmsplice the pipe holds references to the writer's pages, so a
 * section of the buffer may be rewritten only when the pipe can no longer
 * hold it: after n-1 later sections were fully spliced, with
 * (n-1) * pages(section) >= pipe slots.  buffer_size == pipe_size gives the
 * source's scheme: a buffer twice the pipe size, alternate halves. */
static size_t vmsplice_sections(const pipe_config *c, size_t pipe_bytes)
{
    if (c->writer != WRITER_VMSPLICE)
        return 1;
    if (c->vmsplice_sections > 0)
        return (size_t)c->vmsplice_sections;
    size_t page_bytes = (size_t)sysconf(_SC_PAGESIZE);
    size_t section_pages = ml_round_up((size_t)c->buffer_bytes, page_bytes) / page_bytes;
    size_t slots = pipe_bytes / page_bytes;
    return 1 + (slots + section_pages - 1) / section_pages;
}

/* ---- the two ends (in their own processes) --------------------------------- */

static int transfer_writer(const pipe_pair *pair, const ml_child_io *io, pipe_side *r)
{
    const pipe_config *c = pair->config;
    size_t page_bytes = (size_t)sysconf(_SC_PAGESIZE);
    size_t chunk_bytes = (size_t)c->buffer_bytes;
    size_t stride_bytes = ml_round_up(chunk_bytes, page_bytes);
    size_t sections = vmsplice_sections(c, pair->pipe_bytes);
    int fd = pair->fd[io->index][0];
    pipe_buffer b;
    pipe_side_watch watch;
    if (pipe_buffer_map(&b, stride_bytes * sections, c->huge_pages, c->touch_pages, r) != 0)
        return -1;
    if (c->busy_loop && pipe_set_nonblocking(fd, r) != 0)
        return -1;
    unsigned int flags = c->busy_loop ? SPLICE_F_NONBLOCK : 0;
    uint64_t total_bytes = pair->count, sent = 0;
    size_t section = 0;
    if (pipe_side_start(r, io, pair->ctx, &watch) != 0)
        return -1;
    while (sent < total_bytes) {
        size_t len = total_bytes - sent < chunk_bytes ? (size_t)(total_bytes - sent) : chunk_bytes;
        unsigned char *p = b.base + section * stride_bytes;
        if (c->verify)
            pipe_pattern_fill(p, sent, len);
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
                pipe_side_fail(r, c->writer == WRITER_VMSPLICE ? PIPE_STEP_VMSPLICE : PIPE_STEP_WRITE,
                               errno);
                return -1;
            }
            r->calls++;
            done += (size_t)n;
        }
        sent += len;
        r->bytes = sent;
        section = section + 1 == sections ? 0 : section + 1;
    }
    pipe_side_stop(r, &watch);
    r->bytes = sent;
    close(fd); /* end of file for the reader before the slow smaps read */
    r->huge_bytes = ml_huge_bytes(b.base, b.bytes);
    return 0;
}

static int transfer_reader(const pipe_pair *pair, const ml_child_io *io, pipe_side *r)
{
    const pipe_config *c = pair->config;
    size_t chunk_bytes = (size_t)c->buffer_bytes;
    int fd = pair->fd[io->index][0];
    int sink = -1;
    unsigned char *view = NULL; /* where the checked bytes land */
    pipe_buffer b;
    pipe_side_watch watch;
    r->huge_bytes = -1;
    r->first_bad = UINT64_MAX;
    if (c->reader == READER_READ) {
        if (pipe_buffer_map(&b, chunk_bytes, c->huge_pages, 1, r) != 0)
            return -1;
        view = b.base;
    } else if (c->verify) {
        /* splice into a memory file and check its pages: the reader still
         * empties the pipe with splice, and every byte is looked at */
        sink = memfd_create("memlab-pipe-check", MFD_CLOEXEC);
        if (sink < 0 || ftruncate(sink, (off_t)chunk_bytes) != 0) {
            pipe_side_fail(r, PIPE_STEP_MEMFD, errno);
            return -1;
        }
        void *p = mmap(NULL, chunk_bytes, PROT_READ, MAP_SHARED, sink, 0);
        if (p == MAP_FAILED) {
            pipe_side_fail(r, PIPE_STEP_MMAP, errno);
            return -1;
        }
        view = p;
    } else {
        sink = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (sink < 0) {
            pipe_side_fail(r, PIPE_STEP_OPEN_DEVNULL, errno);
            return -1;
        }
    }
    if (c->busy_loop && pipe_set_nonblocking(fd, r) != 0)
        return -1;
    unsigned int flags = SPLICE_F_MOVE | (c->busy_loop ? SPLICE_F_NONBLOCK : 0);
    uint64_t total_bytes = pair->count, received = 0;
    if (pipe_side_start(r, io, pair->ctx, &watch) != 0)
        return -1;
    while (received < total_bytes) {
        size_t want = total_bytes - received < chunk_bytes ? (size_t)(total_bytes - received) : chunk_bytes;
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
            pipe_side_fail(r, c->reader == READER_READ ? PIPE_STEP_READ : PIPE_STEP_SPLICE, errno);
            return -1;
        }
        if (n == 0) {
            r->bytes = received;
            pipe_side_fail(r, PIPE_STEP_EARLY_EOF, 0);
            return -1;
        }
        if (c->verify)
            r->verify_bad += pipe_pattern_check(view, received, (size_t)n, &r->first_bad);
        r->calls++;
        received += (uint64_t)n;
        r->bytes = received;
    }
    pipe_side_stop(r, &watch);
    r->bytes = received;
    if (c->reader == READER_READ)
        r->huge_bytes = ml_huge_bytes(b.base, b.bytes);
    return 0;
}

/* ---- setup and measure (in the parent) ---------------------------------------- */

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

static int pipe_setup(const void *config, void **state_out, ml_context *ctx, ml_error *err)
{
    (void)ctx;
    const pipe_config *c = config;
    long page_bytes = sysconf(_SC_PAGESIZE);
    long pipe_max = read_long_file("/proc/sys/fs/pipe-max-size");
    if (c->requested_pipe_bytes != 0) {
        if (c->requested_pipe_bytes % page_bytes != 0)
            return ml_fail(err, ML_ERR_VALUE, 0, "pipe_size_bytes=%lld is not a multiple of the page size %ld",
                           (long long)c->requested_pipe_bytes, page_bytes);
        if (pipe_max > 0 && c->requested_pipe_bytes > pipe_max)
            return ml_fail(err, ML_ERR_VALUE, 0,
                           "pipe_size_bytes=%lld is above the maximum %ld (/proc/sys/fs/pipe-max-size)",
                           (long long)c->requested_pipe_bytes, pipe_max);
    }
    if (pipe_check_cpus(c->writer_cpu, c->reader_cpu, "writer_cpu", "reader_cpu", c->busy_loop, err) != 0)
        return -1;
    if (!(c->timeout_s > 0))
        return ml_fail(err, ML_ERR_VALUE, 0, "timeout_s=%g must be above 0", c->timeout_s);
    /* F_SETPIPE_SZ rounds up to a power of two pages: at most twice the request */
    size_t pipe_bound_bytes = c->requested_pipe_bytes ? 2 * (size_t)c->requested_pipe_bytes : ((size_t)1 << 20);
    size_t stride_bytes = ml_round_up((size_t)c->buffer_bytes, (size_t)page_bytes);
    size_t sections = c->vmsplice_sections > 0 ? (size_t)c->vmsplice_sections
                                               : 2 + pipe_bound_bytes / stride_bytes;
    size_t buffers_bytes = stride_bytes * (c->writer == WRITER_VMSPLICE ? sections + 1 : 2);
    if (ml_check_memory(buffers_bytes, "pipe buffers", err) != 0)
        return -1;
    pipe_state *s = calloc(1, sizeof *s);
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "pipe state");
    s->config = *c;
    if (ml_shared_map(&s->shared, 2, sizeof(pipe_side), err) != 0) {
        free(s);
        return -1;
    }
    uint64_t first_total_bytes = PIPE_FIRST_TOTAL;
    if (first_total_bytes < (uint64_t)c->buffer_bytes * 4)
        first_total_bytes = (uint64_t)c->buffer_bytes * 4;
    s->next_total_bytes = first_total_bytes;
    *state_out = s;
    return 0;
}

static void pipe_teardown(void *state)
{
    pipe_state *s = state;
    if (!s)
        return;
    ml_shared_unmap(&s->shared);
    free(s);
}

static void close_pair(int fds[2])
{
    int e = errno;
    close(fds[0]);
    close(fds[1]);
    errno = e;
}

/* The data pipe, sized as asked; its capacity goes to *pipe_bytes. */
static int make_data_pipe(int fds[2], const pipe_config *c, size_t *pipe_bytes, ml_error *err)
{
    if (pipe2(fds, O_CLOEXEC) != 0)
        return ml_fail(err, ML_ERR_OS, errno, "pipe2: %s", strerror(errno));
    if (c->requested_pipe_bytes && fcntl(fds[1], F_SETPIPE_SZ, (int)c->requested_pipe_bytes) < 0) {
        close_pair(fds);
        return ml_fail(err, errno == EPERM ? ML_ERR_VALUE : ML_ERR_OS, errno,
                       "pipe_size_bytes=%lld: F_SETPIPE_SZ failed: %s", (long long)c->requested_pipe_bytes,
                       strerror(errno));
    }
    int capacity = fcntl(fds[1], F_GETPIPE_SZ);
    if (capacity < 0) {
        close_pair(fds);
        return ml_fail(err, ML_ERR_OS, errno, "F_GETPIPE_SZ: %s", strerror(errno));
    }
    *pipe_bytes = (size_t)capacity;
    return 0;
}

static int transfer_once(pipe_state *s, uint64_t total, size_t *pipe_bytes, ml_context *ctx,
                         ml_error *err)
{
    const pipe_config *c = &s->config;
    int data[2];
    if (make_data_pipe(data, c, pipe_bytes, err) != 0)
        return -1;
    pipe_pair pair = {
        .config = c,
        .ctx = ctx,
        .count = total,
        .pipe_bytes = *pipe_bytes,
        .fd = {{data[1], -1}, {data[0], -1}},
        .parent_fds = {data[0], data[1]},
        .n_parent_fds = 2,
        .main = {transfer_writer, transfer_reader},
        .comm = {"memlab-writer", "memlab-reader"},
        .name = {"writer", "reader"},
        .cpu_param = {"writer_cpu", "reader_cpu"},
        .cpu = {(int)c->writer_cpu, (int)c->reader_cpu},
        .expected = total,
        .timeout_s = c->timeout_s,
        .what = "the pipe transfer",
    };
    return pipe_pair_run(&pair, &s->shared, err);
}

static uint64_t pair_elapsed_ns(const pipe_side *writer, const pipe_side *reader)
{
    uint64_t start = writer->start_ns < reader->start_ns ? writer->start_ns : reader->start_ns;
    return reader->end_ns > start ? reader->end_ns - start : 1;
}

static int pipe_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    pipe_state *s = state;
    const pipe_config *c = &s->config;
    const pipe_side *w = ml_shared_slot(&s->shared, 0), *r = ml_shared_slot(&s->shared, 1);
    uint64_t target_ns = ctx && ctx->target_ns ? ctx->target_ns : PIPE_DEFAULT_TARGET_NS;
    uint64_t total = c->total_bytes ? (uint64_t)c->total_bytes : s->next_total_bytes;
    size_t pipe_bytes = 0;
    int runs = 0;
    for (;;) {
        if (transfer_once(s, total, &pipe_bytes, ctx, err) != 0)
            return -1;
        runs++;
        uint64_t elapsed = pair_elapsed_ns(w, r);
        if (c->total_bytes || elapsed >= target_ns || runs >= PIPE_MAX_ADAPT_RUNS || total >= PIPE_MAX_TOTAL)
            break;
        total = pipe_grow_count(total, elapsed, target_ns, (uint64_t)c->buffer_bytes, PIPE_MAX_TOTAL);
        ML_CHECK_INTERRUPT(ctx, err);
    }
    if (!c->total_bytes)
        s->next_total_bytes = total;
    out->elapsed_ns = pair_elapsed_ns(w, r);
    out->bytes = (double)r->bytes;
    out->units = (double)((total + (uint64_t)c->buffer_bytes - 1) / (uint64_t)c->buffer_bytes);
    pipe_merge_counters(&out->counters, w, r, ctx && ctx->counters);
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
    /* What the buffers asked for and got (at the end of the run, from smaps). */
    const char *obtained = ml_pages_by_coverage(w->huge_bytes, w->buffer_map_bytes);
    if (c->reader == READER_READ && strcmp(obtained, ml_pages_by_coverage(r->huge_bytes, r->buffer_map_bytes)) != 0)
        obtained = "mixed";
    ml_fact_add(out, "pages_requested", c->huge_pages ? "thp" : "4k");
    ml_fact_add(out, "pages_obtained", obtained);
    ml_fact_add(out, "populate_requested", c->touch_pages ? "touch" : "none");
    ml_fact_add(out, "populate_used", c->touch_pages ? "touch" : "none");
    if (c->verify) {
        ml_metric_add(out, "verify_errors", (double)r->verify_bad);
        ml_metric_add(out, "first_bad_offset",
                      r->first_bad == UINT64_MAX ? -1.0 : (double)r->first_bad);
    }
    pipe_add_side_metrics(out, w, "writer");
    pipe_add_side_metrics(out, r, "reader");
    return 0;
}

static const ml_param pipe_params[] = {
    {.name = "writer", .kind = ML_PARAM_CHOICE, .offset = offsetof(pipe_config, writer),
     .choices = pipe_writer_names, ML_DEFAULT_CHOICE("write")},
    {.name = "reader", .kind = ML_PARAM_CHOICE, .offset = offsetof(pipe_config, reader),
     .choices = pipe_reader_names, ML_DEFAULT_CHOICE("read")},
    {.name = "buffer_bytes", .kind = ML_PARAM_INT, .offset = offsetof(pipe_config, buffer_bytes),
     .min = 1, .max = (int64_t)1 << 30, ML_DEFAULT(256 << 10)},
    {.name = "pipe_size_bytes", .kind = ML_PARAM_INT, .offset = offsetof(pipe_config, requested_pipe_bytes),
     .min = 0, .max = INT_MAX, ML_DEFAULT(256 << 10)},
    {.name = "total_bytes", .kind = ML_PARAM_INT, .offset = offsetof(pipe_config, total_bytes),
     .min = 0, .max = (int64_t)PIPE_MAX_TOTAL, ML_DEFAULT(0)},
    {.name = "huge_pages", .kind = ML_PARAM_BOOL, .offset = offsetof(pipe_config, huge_pages), ML_DEFAULT(0)},
    {.name = "busy_loop", .kind = ML_PARAM_BOOL, .offset = offsetof(pipe_config, busy_loop), ML_DEFAULT(0)},
    {.name = "touch_pages", .kind = ML_PARAM_BOOL, .offset = offsetof(pipe_config, touch_pages), ML_DEFAULT(1)},
    {.name = "verify", .kind = ML_PARAM_BOOL, .offset = offsetof(pipe_config, verify), ML_DEFAULT(0)},
    {.name = "vmsplice_sections", .kind = ML_PARAM_INT,
     .offset = offsetof(pipe_config, vmsplice_sections), .min = 0, .max = 1024, ML_DEFAULT(0)},
    {.name = "writer_cpu", .kind = ML_PARAM_INT, .offset = offsetof(pipe_config, writer_cpu),
     .min = -1, .max = CPU_SETSIZE - 1, ML_DEFAULT(-1)},
    {.name = "reader_cpu", .kind = ML_PARAM_INT, .offset = offsetof(pipe_config, reader_cpu),
     .min = -1, .max = CPU_SETSIZE - 1, ML_DEFAULT(-1)},
    {.name = "timeout_s", .kind = ML_PARAM_DOUBLE, .offset = offsetof(pipe_config, timeout_s),
     .min_double = 0.001, .max_double = 86400.0, ML_DEFAULT_DOUBLE(60.0)},
    {0},
};

ML_FAMILY(pipe) = {
    .name = "pipe",
    .description = "a writer and a reader process joined by a pipe (write|vmsplice -> read|splice); "
                   "total_bytes=0 adapts the transfer to the sample time",
    .config_size = sizeof(pipe_config),
    .params = pipe_params,
    .setup = pipe_setup,
    .measure = pipe_measure,
    .teardown = pipe_teardown,
};
