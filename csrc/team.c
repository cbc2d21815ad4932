/* The thread team (memlab.h, "thread teams"): N workers started pinned,
 * one ready barrier, one release, one interrupt-aware wait, a join on every
 * way out, and the metrics of threads that measured together. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memlab.h"

static void team_lock(ml_team *team)
{
    pthread_mutex_lock(&team->lock);
}

static void team_unlock(ml_team *team)
{
    pthread_mutex_unlock(&team->lock);
}

/* Sleep on the team for at most ns (woken early when a worker ends). */
static void team_nap(ml_team *team, uint64_t ns)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    uint64_t nsec = (uint64_t)until.tv_nsec + ns;
    until.tv_sec += (time_t)(nsec / 1000000000u);
    until.tv_nsec = (long)(nsec % 1000000000u);
    pthread_cond_timedwait(&team->changed, &team->lock, &until);
}

static void *team_thread(void *arg)
{
    ml_team_worker *w = arg;
    ml_team *team = w->team_of;
    team_lock(team);
    team->ready++;
    pthread_cond_broadcast(&team->changed);
    while (!team->go)
        pthread_cond_wait(&team->changed, &team->lock);
    int released = team->started, run = team->released;
    team_unlock(team);
    __atomic_fetch_add(&team->awake, 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&team->awake, __ATOMIC_ACQUIRE) < released && !ml_team_stopping(team))
        sched_yield();
    /* A released worker runs its body even when the run's end (the stop flag) came first: on a
     * loaded machine a worker can be preempted here for longer than a short sample, and one
     * skipped body was a sample of two threads with one thread's CPU -1 and no window (seen under
     * a two-process hog). The body sees the stop flag at once; only Ctrl-C or a failed start
     * (cancelled) skips it. */
    if (run && !__atomic_load_n(&team->cancelled, __ATOMIC_ACQUIRE)) {
        /* The CPU clock's reads inside the wall clock's: reading a thread's CPU clock is a
         * system call, and its cost outside the wall window made a short sample's CPU time
         * exceed its wall time (share: 2.26 threads on the CPU of two). */
        w->time.start_ns = ml_now_ns();
        uint64_t cpu_start = ml_thread_cpu_ns();
        w->body(w->arg, team);
        w->time.cpu_ns = ml_thread_cpu_ns() - cpu_start;
        w->time.end_ns = ml_now_ns();
        w->time.ran_on_cpu = sched_getcpu();
    }
    team_lock(team);
    team->finished++;
    pthread_cond_broadcast(&team->changed);
    team_unlock(team);
    return NULL;
}

int ml_team_init(ml_team *team, int n, const char *what, size_t stack_bytes, ml_error *err)
{
    memset(team, 0, sizeof *team);
    if (n < 1)
        return ml_fail(err, ML_ERR_VALUE, 0, "a team needs at least one worker (asked: %d)", n);
    team->workers = calloc((size_t)n, sizeof *team->workers);
    team->threads = calloc((size_t)n, sizeof *team->threads);
    if (!team->workers || !team->threads) {
        free(team->workers);
        free(team->threads);
        memset(team, 0, sizeof *team);
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for a team of %d threads", n);
    }
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&team->changed, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&team->lock, NULL);
    team->initialised = 1;
    team->n = n;
    team->what = what ? what : "worker";
    team->stack_bytes = stack_bytes;
    for (int i = 0; i < n; i++)
        team->workers[i].cpu = -1;
    return 0;
}

void ml_team_free(ml_team *team)
{
    if (!team->initialised)
        return;
    ml_team_stop(team);
    pthread_cond_destroy(&team->changed);
    pthread_mutex_destroy(&team->lock);
    free(team->workers);
    free(team->threads);
    memset(team, 0, sizeof *team);
}

void ml_team_stop(ml_team *team)
{
    if (!team->initialised || !team->started)
        return;
    __atomic_store_n(&team->stop, 1, __ATOMIC_RELEASE);
    team_lock(team);
    team->go = 1;
    pthread_cond_broadcast(&team->changed);
    team_unlock(team);
    for (int i = 0; i < team->started; i++)
        pthread_join(team->threads[i], NULL);
    team->started = 0;
}

static int team_interrupted(ml_team *team, ml_error *err)
{
    __atomic_store_n(&team->cancelled, 1, __ATOMIC_RELEASE);
    ml_team_stop(team);
    return ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
}

int ml_team_start(ml_team *team, ml_context *ctx, ml_error *err)
{
    ml_team_stop(team);
    team->ready = team->go = team->finished = team->released = 0;
    __atomic_store_n(&team->awake, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&team->stop, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&team->cancelled, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < team->n; i++) {
        if (ml_interrupted(ctx))
            return team_interrupted(team, err);
        ml_team_worker *w = &team->workers[i];
        w->time = (ml_team_time){.ran_on_cpu = -1};
        w->team_of = team;
        int failed = w->what ? ml_thread_start_pinned(&team->threads[i], w->cpu, team->stack_bytes, team_thread,
                                                      w, err, "%s", w->what)
                             : ml_thread_start_pinned(&team->threads[i], w->cpu, team->stack_bytes, team_thread,
                                                      w, err, "%s %d of %d", team->what, i, team->n);
        if (failed) {
            ml_team_stop(team);
            return -1;
        }
        team->started++;
    }
    team_lock(team);
    while (team->ready < team->started) {
        team_nap(team, ML_TEAM_POLL_NS);
        if (team->ready < team->started) {
            team_unlock(team);
            if (ml_interrupted(ctx))
                return team_interrupted(team, err);
            team_lock(team);
        }
    }
    team_unlock(team);
    return 0;
}

int ml_team_release(ml_team *team, ml_context *ctx, ml_error *err)
{
    team_lock(team);
    team->go = team->released = 1;
    pthread_cond_broadcast(&team->changed);
    team_unlock(team);
    team->released_ns = ml_now_ns();
    uint64_t next_check = team->released_ns + ML_TEAM_POLL_NS;
    while (__atomic_load_n(&team->awake, __ATOMIC_ACQUIRE) < team->started) {
        sched_yield(); /* the workers may share this CPU */
        if (ml_now_ns() >= next_check) {
            if (ml_interrupted(ctx))
                return team_interrupted(team, err);
            next_check = ml_now_ns() + ML_TEAM_POLL_NS;
        }
    }
    return 0;
}

int ml_team_finished(ml_team *team)
{
    team_lock(team);
    int finished = team->finished;
    team_unlock(team);
    return finished;
}

int ml_team_wait(ml_team *team, uint64_t run_ns, uint64_t deadline_ns, int (*enough)(void *arg), void *arg,
                 ml_context *ctx, ml_error *err)
{
    for (;;) {
        team_lock(team);
        int all_ended = team->finished >= team->started;
        uint64_t elapsed = ml_now_ns() - team->released_ns;
        if (all_ended || (elapsed >= run_ns && (run_ns || enough) && (!enough || enough(arg)))) {
            team_unlock(team);
            return 0;
        }
        if (deadline_ns && elapsed >= deadline_ns) {
            team_unlock(team);
            return 1;
        }
        uint64_t nap = ML_TEAM_POLL_NS;
        if (elapsed < run_ns && run_ns - elapsed < nap)
            nap = run_ns - elapsed;
        if (deadline_ns && deadline_ns - elapsed < nap)
            nap = deadline_ns - elapsed;
        team_nap(team, nap);
        team_unlock(team);
        if (ml_interrupted(ctx))
            return team_interrupted(team, err);
    }
}

double ml_team_cpu_fraction(const ml_team_time *time)
{
    if (time->end_ns <= time->start_ns)
        return 0.0;
    return (double)time->cpu_ns / (double)(time->end_ns - time->start_ns);
}

void ml_team_metrics(const ml_team_time *times, int n, const char *prefix, ml_measurement *out)
{
    if (n < 1)
        return;
    double sum = 0, lowest = 0;
    uint64_t first_start = UINT64_MAX, last_end = 0;
    for (int i = 0; i < n; i++) {
        double fraction = ml_team_cpu_fraction(&times[i]);
        sum += fraction;
        lowest = i == 0 || fraction < lowest ? fraction : lowest;
        first_start = times[i].start_ns < first_start ? times[i].start_ns : first_start;
        last_end = times[i].end_ns > last_end ? times[i].end_ns : last_end;
    }
    double away = 0;
    double span = last_end > first_start ? (double)(last_end - first_start) : 0.0;
    for (int i = 0; i < n; i++) {
        double on = span > 0 ? (double)times[i].cpu_ns / span : 0.0;
        away += 1.0 - (on < 1.0 ? on : 1.0);
    }
    char name[ML_METRIC_NAME_MAX];
    snprintf(name, sizeof name, "%scpu_fraction", prefix);
    ml_metric_add(out, name, sum / n);
    snprintf(name, sizeof name, "%slowest_cpu_fraction", prefix);
    ml_metric_add(out, name, lowest);
    snprintf(name, sizeof name, "%soverlap_fraction", prefix);
    ml_metric_add(out, name, away < 1.0 ? 1.0 - away : 0.0);
}

/* ---- team_metrics: ml_team_metrics on times handed in, for its twin ---- */

typedef struct team_metrics_config {
    ml_buffer times; /* uint64: start_ns, end_ns, cpu_ns of each thread */
} team_metrics_config;

static const ml_param team_metrics_params[] = {
    {.name = "times", .kind = ML_PARAM_BUFFER, .offset = offsetof(team_metrics_config, times)},
    {0},
};

static int team_metrics_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    const team_metrics_config *c = config;
    (void)ctx;
    if (ml_check_buffer(&c->times, "times", 3, sizeof(uint64_t), err) < 0)
        return -1;
    if (c->times.bytes % (3 * sizeof(uint64_t)))
        return ml_fail(err, ML_ERR_VALUE, 0, "times holds %zu numbers: three (start, end, CPU ns) per thread",
                       c->times.bytes / sizeof(uint64_t));
    return ml_setup_copy_config(c, sizeof(*c), state, err);
}

static int team_metrics_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    const team_metrics_config *c = state;
    (void)ctx;
    size_t n = c->times.bytes / (3 * sizeof(uint64_t));
    ml_team_time *times = calloc(n, sizeof *times);
    if (!times)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for %zu threads' times", n);
    const uint64_t *words = c->times.data;
    for (size_t i = 0; i < n; i++)
        times[i] = (ml_team_time){.start_ns = words[3 * i], .end_ns = words[3 * i + 1], .cpu_ns = words[3 * i + 2]};
    ml_team_metrics(times, (int)n, "", out);
    free(times);
    ml_counter_values_missing(&out->counters, 0);
    out->units = (double)n;
    return 0;
}

static void team_metrics_teardown(void *state)
{
    free(state);
}

ML_FAMILY(team_metrics) = {
    .name = "team_metrics",
    .description = "cpu_fraction, lowest_cpu_fraction and overlap_fraction of threads' start, end and CPU "
                   "times handed in (the definition every team reports under; twin: memlab.twins.team_metrics)",
    .config_size = sizeof(team_metrics_config),
    .params = team_metrics_params,
    .setup = team_metrics_setup,
    .measure = team_metrics_measure,
    .teardown = team_metrics_teardown,
};

/* ---- CPU lists from Python ---------------------------------------------- */

int ml_cpu_list_check(const ml_buffer *list, const char *name, int count, int unpinned_ok, int *out,
                      ml_error *err)
{
    if (list->itemsize != sizeof(int32_t))
        return ml_fail(err, ML_ERR_VALUE, 0, "%s has items of %zu bytes; int32 (4) is required", name,
                       list->itemsize);
    if (list->bytes != (size_t)count * sizeof(int32_t))
        return ml_fail(err, ML_ERR_VALUE, 0, "%s holds %zu CPUs; %d are needed (memlab.placement chooses them)",
                       name, list->bytes / sizeof(int32_t), count);
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed))
        return ml_fail(err, ML_ERR_OS, errno, "sched_getaffinity: %s", strerror(errno));
    const int32_t *cpus = list->data;
    for (int i = 0; i < count; i++) {
        int cpu = cpus[i];
        if (cpu == -1 && unpinned_ok) {
            out[i] = cpu;
            continue;
        }
        if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed))
            return ml_fail(err, ML_ERR_VALUE, 0, "%s[%d]=%d is not a CPU this process may use%s", name, i, cpu,
                           unpinned_ok ? " (-1 leaves it unpinned)" : "");
        for (int j = 0; j < i; j++)
            if (out[j] == cpu)
                return ml_fail(err, ML_ERR_VALUE, 0,
                               "%s[%d]=%d is also %s[%d]: two threads on one CPU take turns instead of "
                               "running together",
                               name, i, cpu, name, j);
        out[i] = cpu;
    }
    return 0;
}
