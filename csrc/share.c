/* Cache-line sharing (Drepper, "What every programmer should know about
 * memory", section 6.4.1 and the program of section 9.3): `threads` threads,
 * each pinned to the CPU Python chose for it (memlab.placement) or unpinned,
 * each add 1 to its own counter `increments` times; counter i lives `disp`
 * longs after counter i-1.  disp 0: one counter
 * shared by all; disp 1..7: distinct counters in one 64-byte line (false
 * sharing); disp >= 8: a line each.  Increments are atomic or plain
 * load-add-store; plain increments of a shared counter lose updates, which
 * are counted and reported, never hidden.
 *
 * An atomic increment is one of the forms of the source's figure 6.12
 * (`atomic_op`): add-and-fetch and fetch-and-add with the value they return
 * used (x86: lock xadd, plus an add for add-and-fetch), a compare-and-swap
 * loop, the legacy __sync builtins the source wrote them with, and the bare
 * lock-prefixed add (what a compiler emits when the value is not used).  The
 * returned values are summed and checked: on one shared counter every value
 * from 0 to threads x increments - 1 is returned exactly once.
 *
 * The workers are a team (memlab.h): the calling thread starts, releases
 * and waits for them, noticing Ctrl-C (also between thread creations);
 * workers run C only and look at the team's stop flag between chunks of
 * increments. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memlab.h"

#define SHARE_MAX_THREADS 1024
#define SHARE_MAX_DISP (1 << 20)
#define SHARE_CHUNK (UINT64_C(1) << 18) /* increments between looks at the stop flag */
#define SHARE_FIRST_INCREMENTS (UINT64_C(1) << 16)
#define SHARE_DEFAULT_TARGET_NS 100000000ull

/* The increment forms; "plain" is atomic=False. */
enum {
    SHARE_OP_LOCK_ADD,
    SHARE_OP_ADD_FETCH,
    SHARE_OP_FETCH_ADD,
    SHARE_OP_CAS,
    SHARE_OP_SYNC_ADD_AND_FETCH,
    SHARE_OP_SYNC_FETCH_AND_ADD,
    SHARE_OP_SYNC_CAS,
    SHARE_OP_PLAIN,
};
static const char *const share_op_names[] = {
    "lock_add", "add_fetch", "fetch_add", "cas", "sync_add_and_fetch", "sync_fetch_and_add", "sync_cas", "plain",
    NULL};

typedef struct share_config {
    int64_t threads;
    int64_t disp;
    int atomic;
    int atomic_op;
    int64_t increments;
    ml_buffer cpus; /* int32, one per thread: memlab.placement chose them; -1: unpinned */
} share_config;

typedef struct share_worker {
    struct share_state *state;
    long *counter;
    int cpu; /* -1: not pinned */
    uint64_t done;
    uint64_t returned_sum; /* of the values the atomic form returned, mod 2^64 */
    uint64_t cas_failures; /* compare-and-swap attempts that found the counter changed */
} share_worker;

typedef struct share_state {
    share_config cfg;
    long *memory;
    size_t memory_longs;
    int pinned; /* some thread has a CPU of its own */
    uint64_t increments; /* per thread, this sample */
    int adaptive;
    share_worker *workers;
    ml_team team;
} share_state;

static const ml_param share_params[] = {
    {.name = "threads", .kind = ML_PARAM_INT, .offset = offsetof(share_config, threads), .min = 1,
     .max = SHARE_MAX_THREADS},
    {.name = "disp_longs", .kind = ML_PARAM_INT, .offset = offsetof(share_config, disp), .min = 0,
     .max = SHARE_MAX_DISP, ML_DEFAULT(8)},
    {.name = "atomic", .kind = ML_PARAM_BOOL, .offset = offsetof(share_config, atomic), ML_DEFAULT(1)},
    {.name = "atomic_op", .kind = ML_PARAM_CHOICE, .offset = offsetof(share_config, atomic_op),
     .choices = share_op_names, ML_DEFAULT_CHOICE("lock_add")},
    {.name = "increments", .kind = ML_PARAM_INT, .offset = offsetof(share_config, increments), .min = 0,
     .max = INT64_C(1) << 40, ML_DEFAULT(0)},
    {.name = "cpus", .kind = ML_PARAM_BUFFER, .offset = offsetof(share_config, cpus)},
    {0},
};

/* The increment loops, kept out of line so that each is the same whichever
 * caller.  Each returns the sum of the values its form returned, so that the
 * compiler must produce the form that returns one (lock xadd rather than
 * lock add) and the caller can check them. */
__attribute__((noinline)) static void lock_add_increments(long *counter, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
#if defined(__x86_64__)
        __asm__ volatile("lock addq $1, %0" : "+m"(*counter) : : "memory", "cc");
#else
        __atomic_fetch_add(counter, 1, __ATOMIC_SEQ_CST); /* the value unused: a bare atomic add */
#endif
    }
}

__attribute__((noinline)) static uint64_t add_fetch_increments(long *counter, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (uint64_t)__atomic_add_fetch(counter, 1, __ATOMIC_SEQ_CST);
    return sum;
}

__attribute__((noinline)) static uint64_t fetch_add_increments(long *counter, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (uint64_t)__atomic_fetch_add(counter, 1, __ATOMIC_SEQ_CST);
    return sum;
}

/* The source's loop: read the counter, compute the new value, try to swap;
 * a failed swap (another thread changed the counter in between) retries. */
__attribute__((noinline)) static uint64_t cas_increments(long *counter, uint64_t n, uint64_t *failures)
{
    uint64_t sum = 0, failed = 0;
    for (uint64_t i = 0; i < n; i++) {
        long v, next;
        for (;;) {
            v = __atomic_load_n(counter, __ATOMIC_RELAXED);
            next = v + 1;
            if (__atomic_compare_exchange_n(counter, &v, next, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
                break;
            failed++;
        }
        sum += (uint64_t)v;
    }
    *failures += failed;
    return sum;
}

__attribute__((noinline)) static uint64_t sync_add_and_fetch_increments(long *counter, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (uint64_t)__sync_add_and_fetch(counter, 1);
    return sum;
}

__attribute__((noinline)) static uint64_t sync_fetch_and_add_increments(long *counter, uint64_t n)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (uint64_t)__sync_fetch_and_add(counter, 1);
    return sum;
}

__attribute__((noinline)) static uint64_t sync_cas_increments(long *counter, uint64_t n, uint64_t *failures)
{
    uint64_t sum = 0, failed = 0;
    for (uint64_t i = 0; i < n; i++) {
        long v, next;
        for (;;) {
            v = __atomic_load_n(counter, __ATOMIC_RELAXED);
            next = v + 1;
            if (__sync_bool_compare_and_swap(counter, v, next))
                break;
            failed++;
        }
        sum += (uint64_t)v;
    }
    *failures += failed;
    return sum;
}

/* volatile: every increment loads and stores memory, as the source's asm does. */
__attribute__((noinline)) static void plain_increments(volatile long *counter, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        *counter += 1;
}

static void increments(share_worker *w, int op, uint64_t n)
{
    switch (op) {
    case SHARE_OP_LOCK_ADD:
        lock_add_increments(w->counter, n);
        break;
    case SHARE_OP_ADD_FETCH:
        w->returned_sum += add_fetch_increments(w->counter, n);
        break;
    case SHARE_OP_FETCH_ADD:
        w->returned_sum += fetch_add_increments(w->counter, n);
        break;
    case SHARE_OP_CAS:
        w->returned_sum += cas_increments(w->counter, n, &w->cas_failures);
        break;
    case SHARE_OP_SYNC_ADD_AND_FETCH:
        w->returned_sum += sync_add_and_fetch_increments(w->counter, n);
        break;
    case SHARE_OP_SYNC_FETCH_AND_ADD:
        w->returned_sum += sync_fetch_and_add_increments(w->counter, n);
        break;
    case SHARE_OP_SYNC_CAS:
        w->returned_sum += sync_cas_increments(w->counter, n, &w->cas_failures);
        break;
    default:
        plain_increments(w->counter, n);
        break;
    }
}

/* Whether a form returns the counter's value before the increment (1), after
 * it (2), or nothing (0). */
static int op_returns(int op)
{
    switch (op) {
    case SHARE_OP_FETCH_ADD:
    case SHARE_OP_CAS:
    case SHARE_OP_SYNC_FETCH_AND_ADD:
    case SHARE_OP_SYNC_CAS:
        return 1;
    case SHARE_OP_ADD_FETCH:
    case SHARE_OP_SYNC_ADD_AND_FETCH:
        return 2;
    default:
        return 0;
    }
}

/* The sum, mod 2^64, of first, first + 1, ..., first + count - 1. */
static uint64_t sum_of_run(uint64_t first, uint64_t count)
{
    if (count == 0)
        return 0;
    /* count * (2 first + count - 1) / 2, halving whichever factor is even */
    uint64_t a = count, b = 2 * first + count - 1;
    if (a % 2 == 0)
        a /= 2;
    else
        b /= 2;
    return a * b;
}

static void share_body(void *arg, ml_team *team)
{
    share_worker *w = arg;
    share_state *s = w->state;
    uint64_t left = s->increments;
    while (left && !ml_team_stopping(team)) {
        uint64_t n = left < SHARE_CHUNK ? left : SHARE_CHUNK;
        increments(w, s->cfg.atomic ? s->cfg.atomic_op : SHARE_OP_PLAIN, n);
        left -= n;
        w->done += n;
    }
}

static void share_teardown(void *state)
{
    share_state *s = state;
    if (!s)
        return;
    ml_team_free(&s->team);
    free(s->memory);
    free(s->workers);
    free(s);
}

static int share_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    (void)ctx;
    const share_config *c = config;
    *state = NULL;
    if (c->atomic && c->atomic_op == SHARE_OP_PLAIN)
        return ml_fail(err, ML_ERR_VALUE, 0, "atomic_op=plain needs atomic=False");
    if (!c->atomic && c->atomic_op != SHARE_OP_PLAIN)
        return ml_fail(err, ML_ERR_VALUE, 0, "atomic_op=%s needs atomic=True (plain increments: atomic_op=plain)",
                       share_op_names[c->atomic_op]);
    share_state *s = calloc(1, sizeof *s);
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for the share state");
    s->cfg = *c;
    s->adaptive = c->increments == 0;
    s->increments = s->adaptive ? SHARE_FIRST_INCREMENTS : (uint64_t)c->increments;
    size_t longs = (size_t)(c->threads - 1) * (size_t)c->disp + 1;
    size_t bytes = (longs * sizeof(long) + 4095) & ~(size_t)4095;
    s->memory_longs = longs;
    if (ml_check_memory(bytes, "the counters (threads - 1) x disp longs apart", err) < 0) {
        share_teardown(s);
        return -1;
    }
    if (ml_team_init(&s->team, (int)c->threads, "thread", 0, err)) {
        share_teardown(s);
        return -1;
    }
    s->workers = calloc((size_t)c->threads, sizeof *s->workers);
    void *memory = NULL;
    /* page-aligned: counter 0 starts a cache line (and a page) */
    if (!s->workers || posix_memalign(&memory, 4096, bytes)) {
        share_teardown(s);
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for %lld threads with disp=%lld",
                       (long long)c->threads, (long long)c->disp);
    }
    s->memory = memory;
    memset(s->memory, 0, bytes);
    int *cpus = malloc((size_t)c->threads * sizeof *cpus);
    if (!cpus || ml_cpu_list_check(&c->cpus, "cpus", (int)c->threads, 1, cpus, err)) {
        if (!cpus)
            ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for %lld threads' CPUs", (long long)c->threads);
        free(cpus);
        share_teardown(s);
        return -1;
    }
    for (int i = 0; i < c->threads; i++) {
        s->workers[i].state = s;
        s->workers[i].counter = &s->memory[(size_t)i * (size_t)c->disp];
        s->workers[i].cpu = cpus[i];
        s->pinned |= cpus[i] >= 0;
        s->team.workers[i] = (ml_team_worker){.body = share_body, .arg = &s->workers[i], .cpu = s->workers[i].cpu};
    }
    free(cpus);
    *state = s;
    return 0;
}

/* Start the threads, release them together, wait until all are done. */
static int run_threads(share_state *s, ml_context *ctx, ml_error *err)
{
    memset(s->memory, 0, s->memory_longs * sizeof(long));
    for (int i = 0; i < s->cfg.threads; i++) {
        share_worker *w = &s->workers[i];
        w->done = 0;
        w->returned_sum = 0;
        w->cas_failures = 0;
    }
    if (ml_team_start(&s->team, ctx, err) || ml_team_release(&s->team, ctx, err))
        return -1;
    int rc = ml_team_wait(&s->team, 0, 0, NULL, NULL, ctx, err);
    ml_team_stop(&s->team);
    return rc < 0 ? -1 : 0;
}

static int share_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    share_state *s = state;
    uint64_t target_ns = ctx->target_ns ? ctx->target_ns : SHARE_DEFAULT_TARGET_NS;
    int threads = (int)s->cfg.threads;
    uint64_t elapsed = 0;
    for (;;) {
        ml_counting counting;
        ml_counting_open(&counting, ctx, 1); /* inherit: counts the worker threads */
        ml_counting_begin(&counting);
        int rc = run_threads(s, ctx, err);
        ml_counting_end(&counting, &out->counters);
        if (rc)
            return rc;
        uint64_t first = UINT64_MAX, last = 0;
        for (int i = 0; i < threads; i++) {
            const ml_team_time *t = &s->team.workers[i].time;
            first = t->start_ns < first ? t->start_ns : first;
            last = t->end_ns > last ? t->end_ns : last;
        }
        elapsed = last > first ? last - first : 1;
        if (!s->adaptive || elapsed >= target_ns / 4)
            break;
        /* Too short to trust: scale the count towards the target and rerun. */
        double scale = (double)target_ns / (double)elapsed;
        s->increments = (uint64_t)((double)s->increments * (scale > 100 ? 100 : scale)) + 1;
        ML_CHECK_INTERRUPT(ctx, err);
    }

    uint64_t n = s->increments;
    double expected = (double)threads * (double)n, final_count = 0, cpu_ns = 0;
    ml_team_time *times = malloc((size_t)threads * sizeof *times);
    if (!times)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for %d threads' times", threads);
    for (int i = 0; i < threads; i++) {
        times[i] = s->team.workers[i].time;
        cpu_ns += (double)times[i].cpu_ns;
    }
    if (s->cfg.disp == 0)
        final_count = (double)s->memory[0];
    else
        for (int i = 0; i < threads; i++)
            final_count += (double)*s->workers[i].counter;
    out->elapsed_ns = elapsed;
    out->units = expected;
    out->bytes = 0;
    ml_metric_add(out, "increments_per_thread", (double)n);
    ml_metric_add(out, "ns_per_increment_per_thread", (double)elapsed / (double)n);
    /* Time on a CPU only: time preempted by other processes left out. */
    ml_metric_add(out, "cpu_ns_per_increment", cpu_ns / expected);
    /* How many threads ran at once on average: below `threads` when other
     * processes took the CPUs, and false sharing costs only while they overlap. */
    ml_metric_add(out, "mean_threads_on_cpu", cpu_ns / (double)elapsed);
    ml_team_metrics(times, threads, "", out);
    free(times);
    ml_metric_add(out, "expected_count", expected);
    ml_metric_add(out, "final_count", final_count);
    ml_metric_add(out, "lost_updates", expected - final_count);
    ml_metric_add(out, "pinned", s->pinned ? 1.0 : 0.0);
    int op = s->cfg.atomic ? s->cfg.atomic_op : SHARE_OP_PLAIN;
    if (op == SHARE_OP_CAS || op == SHARE_OP_SYNC_CAS) {
        double failures = 0;
        for (int i = 0; i < threads; i++)
            failures += (double)s->workers[i].cas_failures;
        ml_metric_add(out, "cas_failures_per_increment", failures / expected);
    }
    if (op_returns(op)) {
        /* One shared counter: together the threads were handed every value
         * from 0 (or 1) on exactly once; a counter each: each thread was. */
        uint64_t returned = 0, wanted;
        uint64_t first = op_returns(op) == 2 ? 1 : 0;
        for (int i = 0; i < threads; i++)
            returned += s->workers[i].returned_sum;
        if (s->cfg.disp == 0)
            wanted = sum_of_run(first, (uint64_t)threads * n);
        else
            wanted = (uint64_t)threads * sum_of_run(first, n);
        ml_metric_add(out, "returned_values_exact", returned == wanted ? 1.0 : 0.0);
    }
    if (s->adaptive) /* keep the next sample near the target */
        s->increments = (uint64_t)((double)n * (double)target_ns / (double)elapsed) + 1;
    return 0;
}

ML_FAMILY(share) = {
    .name = "share",
    .description = "threads incrementing counters disp longs apart: false sharing and atomics",
    .config_size = sizeof(share_config),
    .params = share_params,
    .setup = share_setup,
    .measure = share_measure,
    .teardown = share_teardown,
};
