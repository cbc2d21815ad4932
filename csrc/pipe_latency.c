/* Pipe latency: round trips of a small message between two processes over
 * a pair of pipes, as lmbench's lat_pipe measures it.  The ping end stamps
 * each message with its number and checks the echo.  round_trips=0 grows
 * the count until a run lasts the sample time. */
#define _GNU_SOURCE
#include "pipe.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    ml_shared shared; /* ping's and pong's reports */
    uint64_t next_round_trips;
} latency_state;

static int move_all(int fd, unsigned char *buf, size_t len, int writing, pipe_side *r)
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
            pipe_side_fail(r, writing ? PIPE_STEP_WRITE : PIPE_STEP_READ, errno);
            return -1;
        }
        if (n == 0) {
            pipe_side_fail(r, PIPE_STEP_EARLY_EOF, 0);
            return -1;
        }
        r->calls++;
        done += (size_t)n;
    }
    return 0;
}

static int latency_side(const pipe_pair *pair, const ml_child_io *io, pipe_side *r)
{
    const latency_config *c = pair->config;
    int ping = io->index == 0;
    int out_fd = pair->fd[io->index][0], in_fd = pair->fd[io->index][1];
    size_t message_bytes = (size_t)c->message_bytes;
    pipe_buffer b;
    pipe_side_watch watch;
    r->first_bad = UINT64_MAX;
    if (pipe_buffer_map(&b, message_bytes, 0, 1, r) != 0)
        return -1;
    if (c->busy_loop && (pipe_set_nonblocking(out_fd, r) != 0 || pipe_set_nonblocking(in_fd, r) != 0))
        return -1;
    if (pipe_side_start(r, io, pair->ctx, &watch) != 0)
        return -1;
    size_t stamp_bytes = message_bytes < 8 ? message_bytes : 8;
    for (uint64_t i = 0; i < pair->count; i++) {
        if (ping) {
            memcpy(b.base, &i, stamp_bytes);
            if (move_all(out_fd, b.base, message_bytes, 1, r) != 0 ||
                move_all(in_fd, b.base, message_bytes, 0, r) != 0)
                return -1;
            uint64_t echoed = 0;
            memcpy(&echoed, b.base, stamp_bytes);
            uint64_t expected = 0;
            memcpy(&expected, &i, stamp_bytes);
            if (echoed != expected) {
                r->verify_bad++;
                if (r->first_bad == UINT64_MAX)
                    r->first_bad = i;
            }
        } else if (move_all(in_fd, b.base, message_bytes, 0, r) != 0 ||
                   move_all(out_fd, b.base, message_bytes, 1, r) != 0) {
            return -1;
        }
        r->bytes = (i + 1) * message_bytes;
    }
    pipe_side_stop(r, &watch);
    return 0;
}

static int latency_setup(const void *config, void **state_out, ml_context *ctx, ml_error *err)
{
    (void)ctx;
    const latency_config *c = config;
    if (pipe_check_cpus(c->ping_cpu, c->pong_cpu, "ping_cpu", "pong_cpu", c->busy_loop, err) != 0)
        return -1;
    latency_state *s = calloc(1, sizeof *s);
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "pipe latency state");
    s->config = *c;
    if (ml_shared_map(&s->shared, 2, sizeof(pipe_side), err) != 0) {
        free(s);
        return -1;
    }
    s->next_round_trips = 1000;
    *state_out = s;
    return 0;
}

static void latency_teardown(void *state)
{
    latency_state *s = state;
    if (!s)
        return;
    ml_shared_unmap(&s->shared);
    free(s);
}

/* Two pipes: ping writes "there" and reads "back", pong the other way. */
static int latency_once(latency_state *s, uint64_t round_trips, ml_context *ctx, ml_error *err)
{
    const latency_config *c = &s->config;
    int there[2], back[2];
    if (pipe2(there, O_CLOEXEC) != 0)
        return ml_fail(err, ML_ERR_OS, errno, "pipe2: %s", strerror(errno));
    if (pipe2(back, O_CLOEXEC) != 0) {
        int e = errno;
        close(there[0]);
        close(there[1]);
        return ml_fail(err, ML_ERR_OS, e, "pipe2: %s", strerror(e));
    }
    pipe_pair pair = {
        .config = c,
        .ctx = ctx,
        .count = round_trips,
        .fd = {{there[1], back[0]}, {back[1], there[0]}},
        .parent_fds = {there[0], there[1], back[0], back[1]},
        .n_parent_fds = 4,
        .main = {latency_side, latency_side},
        .comm = {"memlab-ping", "memlab-pong"},
        .name = {"ping", "pong"},
        .cpu_param = {"ping_cpu", "pong_cpu"},
        .cpu = {(int)c->ping_cpu, (int)c->pong_cpu},
        .expected = round_trips * (uint64_t)c->message_bytes,
        .timeout_s = c->timeout_s,
        .what = "the pipe ping-pong",
    };
    return pipe_pair_run(&pair, &s->shared, err);
}

static int latency_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    latency_state *s = state;
    const latency_config *c = &s->config;
    const pipe_side *ping = ml_shared_slot(&s->shared, 0), *pong = ml_shared_slot(&s->shared, 1);
    uint64_t target_ns = ctx && ctx->target_ns ? ctx->target_ns : PIPE_DEFAULT_TARGET_NS;
    uint64_t count = c->round_trips ? (uint64_t)c->round_trips : s->next_round_trips;
    int runs = 0;
    for (;;) {
        if (latency_once(s, count, ctx, err) != 0)
            return -1;
        runs++;
        uint64_t elapsed = ping->end_ns - ping->start_ns;
        if (c->round_trips || elapsed >= target_ns || runs >= PIPE_MAX_ADAPT_RUNS)
            break;
        count = pipe_grow_count(count, elapsed, target_ns, 1, (uint64_t)1 << 40);
        ML_CHECK_INTERRUPT(ctx, err);
    }
    if (!c->round_trips)
        s->next_round_trips = count;
    out->elapsed_ns = ping->end_ns - ping->start_ns;
    out->units = (double)count;
    out->bytes = 0;
    pipe_merge_counters(&out->counters, ping, pong, ctx && ctx->counters);
    ml_metric_add(out, "round_trips", (double)count);
    ml_metric_add(out, "adapt_runs", (double)runs);
    ml_metric_add(out, "echo_errors", (double)ping->verify_bad);
    pipe_add_side_metrics(out, ping, "ping");
    pipe_add_side_metrics(out, pong, "pong");
    return 0;
}

static const ml_param latency_params[] = {
    {.name = "message_bytes", .kind = ML_PARAM_INT, .offset = offsetof(latency_config, message_bytes),
     .min = 1, .max = (int64_t)1 << 20, ML_DEFAULT(1)},
    {.name = "round_trips", .kind = ML_PARAM_INT, .offset = offsetof(latency_config, round_trips),
     .min = 0, .max = (int64_t)1 << 40, ML_DEFAULT(0)},
    {.name = "busy_loop", .kind = ML_PARAM_BOOL, .offset = offsetof(latency_config, busy_loop), ML_DEFAULT(0)},
    {.name = "ping_cpu", .kind = ML_PARAM_INT, .offset = offsetof(latency_config, ping_cpu),
     .min = -1, .max = CPU_SETSIZE - 1, ML_DEFAULT(-1)},
    {.name = "pong_cpu", .kind = ML_PARAM_INT, .offset = offsetof(latency_config, pong_cpu),
     .min = -1, .max = CPU_SETSIZE - 1, ML_DEFAULT(-1)},
    {.name = "timeout_s", .kind = ML_PARAM_DOUBLE, .offset = offsetof(latency_config, timeout_s),
     .min_double = 0.001, .max_double = 86400.0, ML_DEFAULT_DOUBLE(60.0)},
    {0},
};

ML_FAMILY(pipe_latency) = {
    .name = "pipe_latency",
    .description = "round trips of a small message between two processes over a pair of pipes "
                   "(lmbench lat_pipe); round_trips=0 adapts to the sample time",
    .config_size = sizeof(latency_config),
    .params = latency_params,
    .setup = latency_setup,
    .measure = latency_measure,
    .teardown = latency_teardown,
};
