/* Core-to-core latency: the round trip of one cache line bounced between two
 * threads pinned to two CPUs (the method of multichase's `pingpong` and of
 * the public core-to-core latency tools).
 *
 * The line holds a counter.  Thread A (on cpu_a) turns an even value 2k into
 * 2k + 1, thread B (on cpu_b) turns 2k + 1 into 2k + 2: every step needs the
 * line in the writer's cache in exclusive state, so one round trip is two
 * transfers of the line, A -> B -> A.  Two ways to take a step:
 *   cas:   a locked compare-and-swap retried until it succeeds (each attempt
 *          asks for the line exclusively);
 *   store: spin reading the line until it holds the expected value, then a
 *          plain store (the reads share the line; the store takes it).
 *
 * A times chunks of CHUNK_ROUND_TRIPS round trips; the metric is the median
 * over chunks, so that a chunk in which the scheduler took either CPU away
 * (two loaded CPUs) does not set the result.
 *
 * The chunks take turns over `lines` lines, each on a page of its own at its
 * own offset (chunk c bounces line c % lines, whose counter goes on from
 * where that line's last chunk left it).  A line's round trip depends on its
 * address: on a mesh of cache slices, the slice that is the line's home sits
 * nearer one pair of cores than another.  On the development guest single
 * lines gave from 127 to 142 ns, each steady for as long as it was measured,
 * so one line per run drew its result from that spread; the median over
 * lines is a property of the pair of CPUs.  The two threads are a team
 * (memlab.h): the calling thread starts and releases them, waits checking
 * for Ctrl-C and stops them at the sample's target time; every way out
 * joins both threads. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memlab.h"

#define C2C_MAX_CPU 4095
#define C2C_CHUNK_ROUND_TRIPS 200u
#define C2C_MAX_CHUNKS 65536u
#define C2C_SPINS_PER_STOP_CHECK 1024u
#define C2C_DEFAULT_TARGET_NS 100000000ull
#define C2C_MIN_CHUNKS 5u
#define C2C_MIN_DEADLINE_NS 2000000000ull
#define C2C_MAX_LINES 1024
#define C2C_PAGE_BYTES 4096u
#define C2C_LINE_SLOTS 32u /* 128-byte slots in a page: line i sits in slot i * 5 % 32 of page i */

static const char *const c2c_methods[] = {"cas", "store", NULL};
enum { C2C_CAS = 0, C2C_STORE = 1 };

typedef struct c2c_config {
    int64_t cpu_a;
    int64_t cpu_b;
    int method;
    int64_t lines;
} c2c_config;

static const ml_param c2c_params[] = {
    {.name = "cpu_a", .kind = ML_PARAM_INT, .offset = offsetof(c2c_config, cpu_a), .min = 0,
     .max = C2C_MAX_CPU, ML_DEFAULT(0)},
    {.name = "cpu_b", .kind = ML_PARAM_INT, .offset = offsetof(c2c_config, cpu_b), .min = 0,
     .max = C2C_MAX_CPU, ML_DEFAULT(1)},
    {.name = "method", .kind = ML_PARAM_CHOICE, .offset = offsetof(c2c_config, method),
     .choices = c2c_methods, ML_DEFAULT_CHOICE("cas")},
    {.name = "lines", .kind = ML_PARAM_INT, .offset = offsetof(c2c_config, lines), .min = 1,
     .max = C2C_MAX_LINES, ML_DEFAULT(256)},
    {0},
};

/* The stop flag A raises for B when it has stopped; the bounced lines are
 * on pages of their own (c2c_state.pages), each alone in its 128 bytes
 * (the adjacent-line prefetcher pairs lines). */
typedef struct c2c_shared {
    _Alignas(128) atomic_int stop;
} c2c_shared;

/* Each side alone in its 128 bytes: A and B update their own counts after
 * every chunk, and must not hand a line to and fro doing it. */
typedef struct c2c_side {
    _Alignas(128) struct c2c_state *state;
    int starts; /* 1: A (turns even into odd), 0: B */
    uint64_t round_trips;
} c2c_side;

typedef struct c2c_state {
    c2c_config cfg;
    c2c_shared *shared;
    char *pages;                  /* lines pages, one bounced line in each */
    _Atomic uint64_t **line;      /* the bounced lines, line[i] in page i */
    double *chunk_ns; /* ns per round trip of each chunk, A's (chunk i bounced line i % lines) */
    double *scratch;  /* one line's chunks, for its median */
    size_t chunks;
    c2c_side side[2];
    ml_team team; /* A and B */
} c2c_state;

static inline void c2c_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Whether to stop: A is done (s->stop), or the team stops (A may have left
 * before its first step, and B must not wait for it). */
static inline int c2c_stopping(c2c_shared *s, ml_team *team)
{
    return atomic_load_explicit(&s->stop, memory_order_relaxed) || ml_team_stopping(team);
}

/* Move the counter in `line` from `from` to from + 1; 0 when done, -1 when asked to stop. */
static inline int c2c_step(c2c_shared *s, ml_team *team, _Atomic uint64_t *line, int method, uint64_t from)
{
    unsigned spins = 0;
    if (method == C2C_CAS) {
        for (;;) {
            uint64_t expected = from;
            if (atomic_compare_exchange_strong_explicit(line, &expected, from + 1,
                                                        memory_order_acq_rel, memory_order_acquire))
                return 0;
            if (++spins == C2C_SPINS_PER_STOP_CHECK) {
                spins = 0;
                if (c2c_stopping(s, team))
                    return -1;
            }
        }
    }
    while (atomic_load_explicit(line, memory_order_acquire) != from) {
        c2c_relax();
        if (++spins == C2C_SPINS_PER_STOP_CHECK) {
            spins = 0;
            if (c2c_stopping(s, team))
                return -1;
        }
    }
    atomic_store_explicit(line, from + 1, memory_order_release);
    return 0;
}

/* One chunk's steps on `line`, the first from `first` (each side's values
 * go up by 2): how many were taken, fewer than CHUNK_ROUND_TRIPS when asked
 * to stop. */
static inline unsigned c2c_chunk(c2c_shared *s, ml_team *team, _Atomic uint64_t *line, int method,
                                 uint64_t first)
{
    unsigned done = 0;
    for (uint64_t value = first; done < C2C_CHUNK_ROUND_TRIPS; done++, value += 2)
        if (c2c_step(s, team, line, method, value) < 0)
            break;
    return done;
}

/* A's or B's body: the team released both and times them. */
static void c2c_body(void *arg, ml_team *team)
{
    c2c_side *side = arg;
    c2c_state *st = side->state;
    c2c_shared *s = st->shared;
    int method = st->cfg.method;
    const uint64_t lines = (uint64_t)st->cfg.lines;
    _Atomic uint64_t *const *const line_at = st->line; /* read once: A writes st->chunks nearby */
    /* A moves a line's counter 2k -> 2k+1, B 2k+1 -> 2k+2; chunk c bounces
     * line c % lines, whose counter stands at 2 * CHUNK_ROUND_TRIPS * (c / lines) */
    const uint64_t odd = side->starts ? 0 : 1;
    if (side->starts) {
        for (uint64_t c = 0; !ml_team_stopping(team); c++) {
            _Atomic uint64_t *line = line_at[c % lines];
            uint64_t first = 2 * C2C_CHUNK_ROUND_TRIPS * (c / lines) + odd;
            uint64_t t0 = ml_now_ns();
            unsigned done = c2c_chunk(s, team, line, method, first);
            uint64_t t1 = ml_now_ns();
            side->round_trips += done;
            /* From before A's first step to after its last: n steps of A,
             * each but the first waiting for B's answer to the one before,
             * which is n round trips to within half of one. */
            if (done < C2C_CHUNK_ROUND_TRIPS)
                break;
            if (st->chunks < C2C_MAX_CHUNKS) {
                st->chunk_ns[st->chunks] = (double)(t1 - t0) / done;
                __atomic_store_n(&st->chunks, st->chunks + 1, __ATOMIC_RELAXED);
            }
        }
        atomic_store_explicit(&s->stop, 1, memory_order_relaxed);
    } else {
        for (uint64_t c = 0;; c++) {
            unsigned done = c2c_chunk(s, team, line_at[c % lines], method, 2 * C2C_CHUNK_ROUND_TRIPS * (c / lines) + odd);
            side->round_trips += done;
            if (done < C2C_CHUNK_ROUND_TRIPS)
                break;
        }
    }
}

static int c2c_cpu_allowed(int64_t cpu, const char *name, ml_error *err)
{
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return ml_fail(err, ML_ERR_OS, errno, "sched_getaffinity failed");
    if (cpu < CPU_SETSIZE && CPU_ISSET((int)cpu, &allowed))
        return 0;
    char list[256] = "";
    size_t used = 0;
    for (int c = 0; c < CPU_SETSIZE && used + 8 < sizeof list; c++)
        if (CPU_ISSET(c, &allowed))
            used += (size_t)snprintf(list + used, sizeof list - used, used ? ",%d" : "%d", c);
    return ml_fail(err, ML_ERR_VALUE, 0,
                   "%s=%lld is not a CPU this process may use (allowed: %s)", name,
                   (long long)cpu, list);
}

static void c2c_teardown(void *state)
{
    c2c_state *st = state;
    if (!st)
        return;
    ml_team_free(&st->team);
    free(st->shared);
    free(st->pages);
    free(st->line);
    free(st->chunk_ns);
    free(st->scratch);
    free(st);
}

static int c2c_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    (void)ctx;
    const c2c_config *cfg = config;
    if (cfg->cpu_a == cfg->cpu_b)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "cpu_a=%lld and cpu_b=%lld are one CPU: bouncing a line needs two CPUs "
                       "(two threads sharing one CPU would measure the scheduler's switches)",
                       (long long)cfg->cpu_a, (long long)cfg->cpu_b);
    if (c2c_cpu_allowed(cfg->cpu_a, "cpu_a", err) || c2c_cpu_allowed(cfg->cpu_b, "cpu_b", err))
        return -1;
    c2c_state *st; /* aligned as its sides are */
    if (posix_memalign((void **)&st, _Alignof(c2c_state), sizeof *st) != 0)
        return ml_fail(err, ML_ERR_MEMORY, 0, "no memory for the core_to_core state");
    memset(st, 0, sizeof *st);
    st->cfg = *cfg;
    st->chunk_ns = malloc(C2C_MAX_CHUNKS * sizeof *st->chunk_ns);
    st->scratch = malloc(C2C_MAX_CHUNKS * sizeof *st->scratch);
    size_t lines = (size_t)cfg->lines;
    st->line = calloc(lines, sizeof *st->line);
    if (posix_memalign((void **)&st->shared, 4096, sizeof *st->shared) != 0)
        st->shared = NULL;
    if (posix_memalign((void **)&st->pages, C2C_PAGE_BYTES, lines * C2C_PAGE_BYTES) != 0)
        st->pages = NULL;
    if (!st->chunk_ns || !st->scratch || !st->line || !st->shared || !st->pages) {
        c2c_teardown(st);
        return ml_fail(err, ML_ERR_MEMORY, 0, "no memory for %zu bounced lines", lines);
    }
    for (size_t i = 0; i < lines; i++)
        st->line[i] = (_Atomic uint64_t *)(st->pages + i * C2C_PAGE_BYTES + (i * 5 % C2C_LINE_SLOTS) * 128);
    if (ml_team_init(&st->team, 2, "thread", 0, err)) {
        c2c_teardown(st);
        return -1;
    }
    *state = st;
    return 0;
}

/* Enough chunks to take a median of (the wait's condition past the target). */
static int c2c_enough(void *arg)
{
    c2c_state *st = arg;
    return __atomic_load_n(&st->chunks, __ATOMIC_RELAXED) >= C2C_MIN_CHUNKS;
}

/* The median of each line's chunks (chunk i bounced line i % lines); the
 * fastest and the slowest of those, over the lines that finished a chunk. */
static void c2c_line_medians(c2c_state *st, size_t chunks, double *fastest, double *slowest)
{
    size_t lines = (size_t)st->cfg.lines;
    *fastest = *slowest = 0;
    for (size_t line = 0; line < lines && line < chunks; line++) {
        size_t n = 0;
        for (size_t i = line; i < chunks; i += lines)
            st->scratch[n++] = st->chunk_ns[i];
        double m = ml_median(st->scratch, n);
        if (line == 0 || m < *fastest)
            *fastest = m;
        if (line == 0 || m > *slowest)
            *slowest = m;
    }
}

static int c2c_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    c2c_state *st = state;
    c2c_shared *s = st->shared;
    memset(s, 0, sizeof *s);
    for (int64_t i = 0; i < st->cfg.lines; i++)
        atomic_store(st->line[i], 0);
    st->chunks = 0;
    int cpus[2] = {(int)st->cfg.cpu_a, (int)st->cfg.cpu_b};
    /* worker 0 is B, 1 is A (B starts first: it waits for A's first step) */
    for (int i = 0; i < 2; i++) {
        st->side[i] = (c2c_side){.state = st, .starts = i == 0};
        st->team.workers[1 - i] = (ml_team_worker){.body = c2c_body, .arg = &st->side[i], .cpu = cpus[i],
                                                   .what = i ? "the cpu_b thread" : "the cpu_a thread"};
    }
    uint64_t target = ctx && ctx->target_ns ? ctx->target_ns : C2C_DEFAULT_TARGET_NS;
    /* Past the target, wait for C2C_MIN_CHUNKS chunks (on loaded CPUs the
     * two threads run together only now and then), up to the deadline. */
    uint64_t deadline = target * 20 > C2C_MIN_DEADLINE_NS ? target * 20 : C2C_MIN_DEADLINE_NS;
    if (ml_team_start(&st->team, ctx, err))
        return -1;
    ml_counting counting;
    ml_counting_start(&counting, ctx);
    int rc = ml_team_release(&st->team, ctx, err);
    if (rc == 0)
        rc = ml_team_wait(&st->team, target, deadline, c2c_enough, st, ctx, err);
    ml_team_stop(&st->team);
    ml_counting_stop(&counting, out);
    if (rc < 0)
        return -1;

    c2c_side *a = &st->side[0], *b = &st->side[1];
    if (st->chunks < C2C_MIN_CHUNKS)
        return ml_fail(err, ML_ERR_TIMEOUT, 0,
                       "only %zu chunks of %u round trips between cpu_a=%d and cpu_b=%d finished "
                       "in %.3g s (%u needed): the two CPUs hardly ran the threads at the same time",
                       st->chunks, C2C_CHUNK_ROUND_TRIPS, cpus[0], cpus[1], deadline / 1e9,
                       C2C_MIN_CHUNKS);
    const ml_team_time *ta = &st->team.workers[1].time, *tb = &st->team.workers[0].time;
    ml_team_time times[2] = {*ta, *tb};
    uint64_t window = ta->end_ns > ta->start_ns ? ta->end_ns - ta->start_ns : 1;
    out->elapsed_ns = window;
    out->units = (double)a->round_trips;
    out->bytes = 0;
    double fastest = st->chunk_ns[0];
    for (size_t i = 1; i < st->chunks; i++)
        if (st->chunk_ns[i] < fastest)
            fastest = st->chunk_ns[i];
    size_t chunks = st->chunks;
    double line_fastest, line_slowest; /* before the median sorts the chunks */
    c2c_line_medians(st, chunks, &line_fastest, &line_slowest);
    double median = ml_median(st->chunk_ns, chunks);
    ml_metric_add(out, "round_trip_ns", median);
    ml_metric_add(out, "one_way_ns", median / 2);
    ml_metric_add(out, "fastest_chunk_round_trip_ns", fastest);
    ml_metric_add(out, "fastest_line_round_trip_ns", line_fastest);
    ml_metric_add(out, "slowest_line_round_trip_ns", line_slowest);
    ml_metric_add(out, "chunks", (double)chunks);
    ml_metric_add(out, "round_trips_per_chunk", C2C_CHUNK_ROUND_TRIPS);
    ml_metric_add(out, "cpu_fraction_a", ml_team_cpu_fraction(ta));
    ml_metric_add(out, "cpu_fraction_b", ml_team_cpu_fraction(tb));
    ml_team_metrics(times, 2, "", out);
    ml_metric_add(out, "ran_on_cpu_a", ta->ran_on_cpu);
    ml_metric_add(out, "ran_on_cpu_b", tb->ran_on_cpu);
    ml_metric_add(out, "answered_round_trips", (double)b->round_trips);
    return 0;
}


ML_FAMILY(core_to_core) = {
    .name = "core_to_core",
    .description = "round trip of one cache line bounced between two pinned threads (ns)",
    .config_size = sizeof(c2c_config),
    .params = c2c_params,
    .setup = c2c_setup,
    .measure = c2c_measure,
    .teardown = c2c_teardown,
};
