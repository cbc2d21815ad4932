/* Cache-line sharing (Drepper, "What every programmer should know about
 * memory", section 6.4.1 and the program of section 9.3): `threads` threads,
 * optionally pinned one per CPU, each add 1 to its own counter `increments`
 * times; counter i lives `disp` longs after counter i-1.  disp 0: one counter
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
 * The calling thread only starts, waits for and checks the workers, so that
 * it can notice Ctrl-C (also between thread creations); workers run C only
 * and look at a stop flag between chunks of increments.  Workers wait for
 * the start asleep on a condition variable (a thousand spinning threads on
 * two CPUs would take seconds to get going), then line up yielding the CPU
 * until every one is awake, so that they start within microseconds. */
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
#define SHARE_WAIT_NS 20000000L

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
    int pin;
} share_config;

typedef struct share_worker {
    struct share_state *state;
    long *counter;
    int cpu; /* -1: not pinned */
    uint64_t start_ns, end_ns;
    uint64_t cpu_ns; /* on-CPU time of the thread's loop */
    uint64_t done;
    uint64_t returned_sum; /* of the values the atomic form returned, mod 2^64 */
    uint64_t cas_failures; /* compare-and-swap attempts that found the counter changed */
} share_worker;

typedef struct share_state {
    share_config cfg;
    long *memory;
    size_t memory_longs;
    uint64_t increments; /* per thread, this sample */
    int adaptive;
    share_worker *workers;
    pthread_t *tids;
    pthread_mutex_t lock; /* guards ready, go and released */
    pthread_cond_t changed;
    int ready;    /* workers waiting for the start */
    int go;       /* the start (or, with stop, the end before any work) */
    int released; /* how many workers were started */
    atomic_int awake;
    atomic_int stop;
    atomic_int finished;
} share_state;

static const ml_param share_params[] = {
    {.name = "threads", .kind = ML_PARAM_INT, .offset = offsetof(share_config, threads), .min = 1,
     .max = SHARE_MAX_THREADS},
    {.name = "disp_longs", .kind = ML_PARAM_INT, .offset = offsetof(share_config, disp), .min = 0,
     .max = SHARE_MAX_DISP},
    {.name = "atomic", .kind = ML_PARAM_BOOL, .offset = offsetof(share_config, atomic)},
    {.name = "atomic_op", .kind = ML_PARAM_CHOICE, .offset = offsetof(share_config, atomic_op),
     .choices = share_op_names},
    {.name = "increments", .kind = ML_PARAM_INT, .offset = offsetof(share_config, increments), .min = 0,
     .max = INT64_C(1) << 40},
    {.name = "pin", .kind = ML_PARAM_BOOL, .offset = offsetof(share_config, pin)},
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

static void *share_thread(void *arg)
{
    share_worker *w = arg;
    share_state *s = w->state;
    pthread_mutex_lock(&s->lock);
    s->ready++;
    pthread_cond_broadcast(&s->changed);
    while (!s->go)
        pthread_cond_wait(&s->changed, &s->lock);
    int released = s->released;
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_add(&s->awake, 1);
    while (atomic_load(&s->awake) < released && !atomic_load_explicit(&s->stop, memory_order_relaxed))
        sched_yield();
    uint64_t cpu_start = ml_thread_cpu_ns();
    w->start_ns = ml_now_ns();
    uint64_t left = s->increments;
    while (left && !atomic_load_explicit(&s->stop, memory_order_relaxed)) {
        uint64_t n = left < SHARE_CHUNK ? left : SHARE_CHUNK;
        increments(w, s->cfg.atomic ? s->cfg.atomic_op : SHARE_OP_PLAIN, n);
        left -= n;
        w->done += n;
    }
    w->end_ns = ml_now_ns();
    w->cpu_ns = ml_thread_cpu_ns() - cpu_start;
    atomic_fetch_add(&s->finished, 1);
    return NULL;
}

static void share_teardown(void *state)
{
    share_state *s = state;
    if (!s)
        return;
    pthread_cond_destroy(&s->changed);
    pthread_mutex_destroy(&s->lock);
    free(s->memory);
    free(s->workers);
    free(s->tids);
    free(s);
}

/* The i-th CPU this process may run on, or -1. */
static int nth_allowed_cpu(const cpu_set_t *allowed, int index)
{
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, allowed) && index-- == 0)
            return cpu;
    return -1;
}

static int share_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    (void)ctx;
    const share_config *c = config;
    *state = NULL;
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) < 0)
        return ml_fail(err, ML_ERR_OS, errno, "sched_getaffinity: %s", strerror(errno));
    int n_allowed = CPU_COUNT(&allowed);
    if (c->atomic && c->atomic_op == SHARE_OP_PLAIN)
        return ml_fail(err, ML_ERR_VALUE, 0, "atomic_op=plain needs atomic=False");
    if (!c->atomic && c->atomic_op != SHARE_OP_PLAIN)
        return ml_fail(err, ML_ERR_VALUE, 0, "atomic_op=%s needs atomic=True (plain increments: atomic_op=plain)",
                       share_op_names[c->atomic_op]);
    if (c->pin && c->threads > n_allowed)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "threads=%lld is above the %d CPUs this process may run on (pin=True pins one thread per CPU)",
                       (long long)c->threads, n_allowed);
    share_state *s = calloc(1, sizeof *s);
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for the share state");
    s->cfg = *c;
    s->adaptive = c->increments == 0;
    s->increments = s->adaptive ? SHARE_FIRST_INCREMENTS : (uint64_t)c->increments;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    size_t longs = (size_t)(c->threads - 1) * (size_t)c->disp + 1;
    size_t bytes = (longs * sizeof(long) + 4095) & ~(size_t)4095;
    s->memory_longs = longs;
    if (ml_check_memory(bytes, "the counters (threads - 1) x disp longs apart", err) < 0) {
        share_teardown(s);
        return -1;
    }
    s->workers = calloc((size_t)c->threads, sizeof *s->workers);
    s->tids = calloc((size_t)c->threads, sizeof *s->tids);
    void *memory = NULL;
    /* page-aligned: counter 0 starts a cache line (and a page) */
    if (!s->workers || !s->tids || posix_memalign(&memory, 4096, bytes)) {
        share_teardown(s);
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for %lld threads with disp=%lld",
                       (long long)c->threads, (long long)c->disp);
    }
    s->memory = memory;
    memset(s->memory, 0, bytes);
    for (int i = 0; i < c->threads; i++) {
        s->workers[i].state = s;
        s->workers[i].counter = &s->memory[(size_t)i * (size_t)c->disp];
        s->workers[i].cpu = c->pin ? nth_allowed_cpu(&allowed, i) : -1;
    }
    *state = s;
    return 0;
}

static void short_sleep(void)
{
    struct timespec ts = {0, SHARE_WAIT_NS};
    nanosleep(&ts, NULL);
}

/* Start the threads, release them together, wait (watching for Ctrl-C). */
static int run_threads(share_state *s, ml_context *ctx, ml_error *err)
{
    int threads = (int)s->cfg.threads, started = 0, rc = 0;
    s->ready = s->go = s->released = 0;
    atomic_store(&s->awake, 0);
    atomic_store(&s->stop, 0);
    atomic_store(&s->finished, 0);
    memset(s->memory, 0, s->memory_longs * sizeof(long));
    for (int i = 0; i < threads; i++) {
        if (ml_interrupted(ctx)) {
            rc = ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
            break;
        }
        share_worker *w = &s->workers[i];
        w->done = 0;
        w->returned_sum = 0;
        w->cas_failures = 0;
        w->start_ns = w->end_ns = 0;
        rc = ml_thread_start_pinned(&s->tids[i], w->cpu, 0, share_thread, w, err, "thread %d of %d", i,
                                    threads);
        if (rc)
            break;
        started++;
    }
    /* wait asleep for every started worker to be ready, looking at Ctrl-C */
    pthread_mutex_lock(&s->lock);
    while (rc == 0 && s->ready < started) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += SHARE_WAIT_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->changed, &s->lock, &until);
        if (s->ready < started) {
            pthread_mutex_unlock(&s->lock);
            if (ml_interrupted(ctx))
                rc = ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
            pthread_mutex_lock(&s->lock);
        }
    }
    if (rc)
        atomic_store(&s->stop, 1); /* released workers leave before any increment */
    s->released = started;
    s->go = 1;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
    while (rc == 0 && atomic_load(&s->finished) < threads) {
        short_sleep();
        if (ml_interrupted(ctx)) {
            atomic_store(&s->stop, 1);
            rc = ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
        }
    }
    for (int i = 0; i < started; i++)
        pthread_join(s->tids[i], NULL);
    return rc;
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
            first = s->workers[i].start_ns < first ? s->workers[i].start_ns : first;
            last = s->workers[i].end_ns > last ? s->workers[i].end_ns : last;
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
    for (int i = 0; i < threads; i++)
        cpu_ns += (double)s->workers[i].cpu_ns;
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
    ml_metric_add(out, "expected_count", expected);
    ml_metric_add(out, "final_count", final_count);
    ml_metric_add(out, "lost_updates", expected - final_count);
    ml_metric_add(out, "pinned", s->cfg.pin ? 1.0 : 0.0);
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
