/* The chase's threads: the helper (fig. 6.8), the CPUs of the other
 * walkers and the helper, and one sample walked by this thread beside the
 * team (figs. 3.19-3.22) (chase.h). */
#define _GNU_SOURCE
#include "chase.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Walk ahead of the main thread, at most `distance` elements, reading every
 * cache line of each element (the team's one worker). */
static void chase_helper_body(void *arg, ml_team *team)
{
    chase_helper *h = arg;
    uint64_t steps = 0, sum = 0;
    while (!ml_team_stopping(team)) {
        uint64_t limit = atomic_load_explicit(&h->progress, memory_order_relaxed) + h->distance;
        if (steps >= limit) {
            chase_spin_pause();
            continue;
        }
        uint64_t batch = limit - steps < 64 ? limit - steps : 64;
        for (uint64_t i = 0; i < batch; i++) {
            for (int c = 0; c < h->k; c++) {
                const volatile chase_word *e = h->pos[c];
                for (uint64_t off = CHASE_LINE_WORDS; off * sizeof(uint64_t) < h->element_bytes;
                     off += CHASE_LINE_WORDS)
                    sum += e[off];
                h->pos[c] = (chase_word *)e[0];
            }
        }
        steps += batch;
    }
    h->sum = sum;
}

/* ---- the helper's facts ------------------------------------------------ */

/* Whether the helper's CPU (memlab.placement chose it) shares the walking
 * CPU's core, and whether the walking CPU has an SMT sibling this thread
 * may use at all: the row records both. */
static void chase_helper_facts(chase_helper *h, const cpu_set_t *allowed, int main_cpu)
{
    ml_cpu_mask siblings;
    ml_cpu_smt_siblings(main_cpu, &siblings);
    h->sibling_existed = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (c != main_cpu && CPU_ISSET(c, allowed) && ml_cpu_mask_has(&siblings, c))
            h->sibling_existed = 1;
    h->smt_sibling = ml_cpu_mask_has(&siblings, h->cpu);
}

static int chase_pin_self(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}


static int chase_helper_start(chase_state *s, const cpu_set_t *allowed, int main_cpu, ml_context *ctx,
                              ml_error *err)
{
    chase_helper *h = s->helper;
    chase_walk *walk = &s->walkers[0].walk;
    memset(h, 0, sizeof *h);
    int cpu = s->cpus[1];
    h->cpu = cpu;
    chase_helper_facts(h, allowed, main_cpu);
    h->k = s->k;
    h->distance = (uint64_t)s->cfg.helper_distance;
    h->element_bytes = s->element_bytes;
    for (int c = 0; c < s->k; c++)
        h->pos[c] = walk->pos[c];
    s->team.workers[0] = (ml_team_worker){.body = chase_helper_body, .arg = h, .cpu = cpu};
    if (ml_team_start(&s->team, ctx, err))
        return -1;
    walk->progress = &h->progress;
    return 0;
}

/* ---- the other walking threads (figs. 3.19-3.22) ---------------------- */

/* Walk in ~1 ms timed slices until the team stops (or until fixed_steps),
 * summing only the time spent walking. */
static void chase_worker_body(void *arg, ml_team *team)
{
    chase_walker *w = arg;
    chase_state *s = w->state;
    double estimate = w->ns_per_step;
    uint64_t done = 0, elapsed = 0, on_cpu = 0;
    while (!ml_team_stopping(team)) {
        uint64_t n = estimate > 0 ? (uint64_t)(CHASE_WORKER_SLICE_NS / estimate) : CHASE_PROBE_STEPS;
        if (n < 1)
            n = 1;
        if (w->fixed_steps) {
            if (done >= w->fixed_steps)
                break;
            if (n > w->fixed_steps - done)
                n = w->fixed_steps - done;
        }
        uint64_t c0 = ml_thread_cpu_ns();
        uint64_t t0 = ml_now_ns();
        s->walk_fn(&w->walk, n);
        uint64_t t1 = ml_now_ns();
        on_cpu += ml_thread_cpu_ns() - c0;
        elapsed += t1 - t0;
        done += n;
        estimate = (double)(t1 - t0) / (double)n;
        if (estimate < 0.01)
            estimate = 0.01;
    }
    w->ns_per_step = estimate;
    w->steps = done;
    w->elapsed_ns = elapsed;
    w->cpu_ns = on_cpu;
}

static int chase_workers_start(chase_state *s, uint64_t fixed_steps, ml_context *ctx, ml_error *err)
{
    for (int t = 1; t < s->threads; t++) {
        chase_walker *w = &s->walkers[t];
        w->fixed_steps = fixed_steps;
        w->steps = w->elapsed_ns = w->cpu_ns = 0;
        snprintf(w->what, sizeof w->what, "walking thread %d of threads=%d", t, s->threads);
        s->team.workers[t - 1] = (ml_team_worker){.body = chase_worker_body, .arg = w, .cpu = w->cpu, .what = w->what};
    }
    return ml_team_start(&s->team, ctx, err);
}

/* ---- one sample ----------------------------------------------------- */



/* Pin the walking thread to cpus[0] (and start the helper or the other
 * walkers on theirs) for the sample; `saved` gets the affinity to restore. */
static int chase_sample_begin(chase_state *s, uint64_t fixed_steps, cpu_set_t *saved, int *main_cpu,
                              ml_context *ctx, ml_error *err)
{
    *main_cpu = -1;
    int rc = pthread_getaffinity_np(pthread_self(), sizeof *saved, saved);
    if (rc)
        return ml_fail(err, ML_ERR_OS, rc, "pthread_getaffinity_np failed");
    if (!s->pinned)
        return 0;
    int cpu = s->cpus[0];
    for (int t = 1; t < s->threads; t++)
        s->walkers[t].cpu = s->cpus[t];
    if (s->cfg.helper_thread && chase_helper_start(s, saved, cpu, ctx, err))
        return -1;
    if (s->threads > 1 && chase_workers_start(s, fixed_steps, ctx, err))
        return -1;
    rc = chase_pin_self(cpu);
    if (rc)
        return ml_fail(err, rc == EINVAL ? ML_ERR_VALUE : ML_ERR_OS, rc,
                       "cannot pin the walking thread to cpus[0]=%d: %s", cpu, strerror(rc));
    s->walkers[0].cpu = cpu;
    *main_cpu = cpu;
    return 0;
}

static void chase_sample_end(chase_state *s, const cpu_set_t *saved, int main_cpu)
{
    int helped = s->cfg.helper_thread && s->team.started;
    ml_team_stop(&s->team);
    if (helped)
        chase_sink = s->helper->sum;
    if (main_cpu >= 0)
        pthread_setaffinity_np(pthread_self(), sizeof *saved, saved);
}

/* Walk `fixed_steps` steps per chain, or (0) whole laps / steps until
 * target_ns is reached, in timed chunks with interrupt checks between.
 * With threads > 1 the others walk at the same time, from the release to
 * the end of this thread's walk (or their own fixed_steps). */
int chase_walk_sample(chase_state *s, uint64_t fixed_steps, uint64_t target_ns, ml_context *ctx,
                             ml_measurement *counted, chase_sample *out, ml_error *err)
{
    cpu_set_t saved;
    ml_counting counting = {.active = 0};
    uint64_t done = 0, elapsed = 0, on_cpu = 0;
    double estimate = s->ns_per_step;
    const uint64_t lap = s->chain_elements;
    chase_walker *me = &s->walkers[0];
    me->walk.done = 0;
    if (chase_sample_begin(s, fixed_steps, &saved, &out->main_cpu, ctx, err)) {
        chase_sample_end(s, &saved, out->main_cpu);
        return -1;
    }
    if (counted)
        ml_counting_start(&counting, ctx);
    /* the timed walk starts once every other thread is awake too (a loaded
     * machine may take a while to schedule them) */
    if (s->team.started && ml_team_release(&s->team, ctx, err)) {
        if (counted)
            ml_counting_stop(&counting, counted);
        chase_sample_end(s, &saved, out->main_cpu);
        return -1;
    }
    uint64_t main_cpu_start = ml_thread_cpu_ns();
    s->main_time = (ml_team_time){.start_ns = ml_now_ns(), .ran_on_cpu = -1};
    for (;;) {
        uint64_t wanted;
        if (fixed_steps) {
            wanted = fixed_steps;
        } else if (estimate <= 0) {
            wanted = done + CHASE_PROBE_STEPS;
        } else {
            double remaining_ns = target_ns > elapsed ? (double)(target_ns - elapsed) : 0.0;
            wanted = done + (uint64_t)(remaining_ns / estimate);
            if (wanted >= lap)
                wanted = (wanted + lap - 1) / lap * lap;
        }
        if (wanted <= done)
            break;
        uint64_t chunk = wanted - done;
        uint64_t chunk_limit = estimate > 0 ? (uint64_t)(CHASE_CHUNK_NS / estimate) : CHASE_PROBE_STEPS;
        if (chunk_limit < 1)
            chunk_limit = 1;
        if (chunk > chunk_limit)
            chunk = chunk_limit;
        uint64_t c0 = ml_thread_cpu_ns();
        uint64_t t0 = ml_now_ns();
        s->walk_fn(&me->walk, chunk);
        uint64_t t1 = ml_now_ns();
        on_cpu += ml_thread_cpu_ns() - c0;
        elapsed += t1 - t0;
        done += chunk;
        estimate = (double)(t1 - t0) / (double)chunk;
        if (estimate < 0.01)
            estimate = 0.01;
        if (ml_interrupted(ctx)) {
            if (counted)
                ml_counting_stop(&counting, counted);
            chase_sample_end(s, &saved, out->main_cpu);
            return ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
        }
    }
    s->main_time.end_ns = ml_now_ns();
    s->main_time.cpu_ns = ml_thread_cpu_ns() - main_cpu_start;
    s->main_time.ran_on_cpu = sched_getcpu();
    /* every thread walks its fixed laps to the end: wait, checking Ctrl-C */
    if (s->threads > 1 && fixed_steps && ml_team_wait(&s->team, 0, 0, NULL, NULL, ctx, err) < 0) {
        if (counted)
            ml_counting_stop(&counting, counted);
        chase_sample_end(s, &saved, out->main_cpu);
        return -1;
    }
    if (counted)
        ml_counting_stop(&counting, counted);
    chase_sample_end(s, &saved, out->main_cpu);
    if (done)
        s->ns_per_step = (double)elapsed / (double)done;
    me->steps = done;
    me->elapsed_ns = elapsed;
    me->cpu_ns = on_cpu;
    out->fastest = 0;
    for (int t = 1; t < s->threads; t++) {
        const chase_walker *w = &s->walkers[t], *best = &s->walkers[out->fastest];
        if (w->steps && (double)w->elapsed_ns * (double)best->steps < (double)best->elapsed_ns * (double)w->steps)
            out->fastest = t;
    }
    const chase_walker *fastest = &s->walkers[out->fastest];
    out->steps = fastest->steps;
    out->elapsed_ns = fastest->elapsed_ns;
    out->thread_cpu_ns = fastest->cpu_ns;
    return 0;
}
