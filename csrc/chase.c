/* Pointer chase: Drepper's list-walking experiments ("What every programmer
 * should know about memory", sections 3.3, 3.5.2, 5.4, 6.2, 6.3, 7.1, 7.5).
 *
 * A working set holds n elements `struct { next; uint64_t pad[npad]; }`
 * linked into one circular list per chain.  The timed loop does nothing but
 * follow `next` (plus the operation, work, prefetch or helper-thread
 * progress that the parameters ask for); one specialised loop exists for
 * every combination so that no flag is tested inside it.
 *
 * Layout knobs move the elements without changing the loop: the pointer may
 * sit in any word of its element (the critical word, fig. 3.30), elements
 * may start off their natural alignment (fig. 6.4) or sit a fixed number of
 * element slots apart (cache associativity, fig. 6.5), and the memory may
 * be bound to one NUMA node (figs. 5.3/5.4).  Several threads, each pinned
 * to its own CPU, may walk one list or a list each (figs. 3.19-3.22).
 *
 * Two families live here: `chase` (the measurement) and `chase_trace`,
 * which builds the same list, walks it a fixed number of laps with the same
 * loops and copies the list (successor indices and pad[0]) into a buffer so
 * that Python can check it against its own reference.
 *
 * The family is split by concern: chase_walk.c (the loops), chase_list.c
 * (the list, setup, the check), chase_threads.c (the threads and one
 * sample), this file (the metrics, the families' tables); chase.h is what
 * they share. */
#define _GNU_SOURCE
#include "chase.h"

#include <linux/mempolicy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void chase_add_layout_metrics(chase_state *s, ml_measurement *out)
{
    int64_t huge = ml_region_huge_bytes(&s->region);
    ml_metric_add(out, "elements", (double)s->elements);
    ml_metric_add(out, "element_bytes", (double)s->element_bytes);
    ml_metric_add(out, "stride_bytes", (double)s->slot_bytes);
    ml_metric_add(out, "working_set_bytes_used", (double)(s->elements * s->element_bytes));
    ml_metric_add(out, "memory_bytes", (double)s->memory_bytes);
    ml_metric_add(out, "build_ns", (double)s->build_ns);
    ml_metric_add(out, "populate_ns", (double)s->region.populate_ns);
    ml_metric_add(out, "pages_granted_hugetlb", s->region.granted == ML_PAGES_HUGETLB_2M ? 1.0 : 0.0);
    if (huge >= 0) {
        ml_metric_add(out, "huge_page_bytes", (double)huge);
        ml_metric_add(out, "huge_page_fraction",
                      s->region.bytes ? (double)huge / (double)s->region.bytes : 0.0);
    }
    ml_region_facts(out, &s->region, huge);
}

/* Where the memory is, and how far from the walking CPU (figs. 5.3/5.4). */
static void chase_add_numa_metrics(chase_state *s, ml_measurement *out, int main_cpu)
{
    int cpu = main_cpu >= 0 ? main_cpu : sched_getcpu();
    int walk_node = cpu >= 0 ? ml_cpu_node(cpu) : -1;
    if (walk_node < 0 && s->numa_nodes == 1)
        walk_node = 0;
    ml_metric_add(out, "numa_nodes", s->numa_nodes);
    ml_metric_add(out, "walk_node", walk_node);
    ml_metric_add(out, "memory_node_checked", s->census_node);
    if (s->census.queried)
        ml_metric_add(out, "pages_on_memory_node_fraction",
                      (double)s->census.on_node / (double)s->census.queried);
    int distance = walk_node >= 0 ? ml_node_distance(walk_node, s->census_node) : -1;
    if (distance > 0)
        ml_metric_add(out, "numa_distance", distance);
    if (s->cfg.memory_node >= 0)
        ml_metric_add(out, "memory_policy_bound",
                      s->policy_mode == MPOL_BIND && s->policy_node == s->cfg.memory_node);
}

static void chase_add_thread_metrics(chase_state *s, ml_measurement *out, const chase_sample *sample)
{
    cpu_set_t allowed;
    ml_metric_add(out, "cpus_usable", chase_usable_cpus(&allowed));
    if (sample->main_cpu >= 0)
        ml_metric_add(out, "walk_cpu_used", sample->main_cpu);
    if (s->threads == 1)
        return;
    double slowest = 0.0, total = 0.0, throughput = 0.0;
    ml_team_time times[CHASE_MAX_THREADS];
    int walked = 0;
    ml_cpu_mask cores;
    ml_cpu_mask_clear(&cores);
    int distinct_cores = 0;
    for (int t = 0; t < s->threads; t++) {
        const chase_walker *w = &s->walkers[t];
        if (w->steps) {
            double ns = (double)w->elapsed_ns / ((double)w->steps * (double)s->k);
            slowest = ns > slowest ? ns : slowest;
            total += ns;
            walked++;
        }
        if (w->elapsed_ns)
            throughput += (double)w->steps * (double)s->k / (double)w->elapsed_ns * 1e9;
        times[t] = t == 0 ? s->main_time : s->team.workers[t - 1].time;
        if (!ml_cpu_mask_has(&cores, w->cpu)) {
            ml_cpu_mask siblings;
            ml_cpu_smt_siblings(w->cpu, &siblings);
            for (int i = 0; i < ML_MAX_CPUS / 64; i++)
                cores.bits[i] |= siblings.bits[i];
            distinct_cores++;
        }
        if (t < CHASE_THREAD_CPU_METRICS) {
            char name[ML_METRIC_NAME_MAX];
            snprintf(name, sizeof name, "thread_%d_cpu", t);
            ml_metric_add(out, name, w->cpu);
        }
    }
    ml_metric_add(out, "fastest_thread", sample->fastest);
    ml_metric_add(out, "slowest_thread_ns_per_element", slowest);
    ml_metric_add(out, "mean_thread_ns_per_element", walked ? total / walked : 0.0);
    ml_metric_add(out, "threads_walked", walked);
    ml_metric_add(out, "all_threads_elements_per_s", throughput);
    ml_metric_add(out, "thread_cores", distinct_cores);
    /* overlap_fraction: the least share of the sample in which every thread
     * was on its CPU at once.  1 on a quiet machine; near 0 when the threads
     * took turns with other work, and then they neither contend nor share. */
    ml_team_metrics(times, s->threads, "", out);
}

static int chase_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    chase_state *s = state;
    chase_sample sample;
    uint64_t target = ctx && ctx->target_ns ? ctx->target_ns : CHASE_DEFAULT_TARGET_NS;
    uint64_t fixed = s->cfg.laps > 0 ? (uint64_t)s->cfg.laps * s->chain_elements : 0;
    if (chase_walk_sample(s, fixed, target, ctx, out, &sample, err))
        return -1;
    s->samples++;
    out->elapsed_ns = sample.elapsed_ns;
    out->units = (double)sample.steps * (double)s->k;
    out->bytes = 0;
    chase_add_layout_metrics(s, out);
    ml_metric_add(out, "steps_per_chain", (double)sample.steps);
    ml_metric_add(out, "laps", (double)sample.steps / (double)s->chain_elements);
    ml_metric_add(out, "thread_cpu_ns", (double)sample.thread_cpu_ns);
    if (sample.steps % s->chain_elements == 0) {
        /* every thread that walked whole laps is back where it started */
        int at_start = 1;
        for (int t = 0; t < s->threads; t++)
            for (int c = 0; c < s->k && s->walkers[t].steps % s->chain_elements == 0; c++)
                at_start &= s->walkers[t].walk.pos[c] == s->walkers[t].start[c];
        ml_metric_add(out, "end_at_start", at_start);
    }
    if (s->cfg.helper_thread) {
        ml_metric_add(out, "helper_cpu", s->helper->cpu);
        ml_metric_add(out, "helper_on_smt_sibling", s->helper->smt_sibling);
        ml_metric_add(out, "smt_sibling_available", s->helper->sibling_existed);
    }
    chase_add_thread_metrics(s, out, &sample);
    chase_add_numa_metrics(s, out, sample.main_cpu);
    if (s->cfg.check)
        return chase_verify(s, ctx, out, err);
    return 0;
}

/* ---- the trace family: the list and pad[0] after a fixed walk -------- */

typedef struct chase_trace_state {
    chase_state *chase;
    ml_buffer out;
} chase_trace_state;

static void chase_trace_teardown(void *state)
{
    chase_trace_state *t = state;
    if (!t)
        return;
    chase_teardown(t->chase);
    free(t);
}

static int chase_trace_setup(const void *config, void **state_out, ml_context *ctx, ml_error *err)
{
    const chase_trace_config *cfg = config;
    if (cfg->out.itemsize != sizeof(uint64_t))
        return ml_fail(err, ML_ERR_VALUE, 0, "out has items of %zu bytes; it must hold uint64 (8 bytes)",
                       cfg->out.itemsize);
    chase_state probe;
    memset(&probe, 0, sizeof probe);
    if (chase_check_config(&cfg->chase, &probe, err))
        return -1;
    uint64_t needed = 3 * probe.elements * sizeof(uint64_t);
    if (cfg->out.bytes < needed)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "out holds %zu bytes; this list of %llu elements needs %llu (3 uint64 per element)",
                       cfg->out.bytes, (unsigned long long)probe.elements, (unsigned long long)needed);
    chase_trace_state *t = calloc(1, sizeof *t);
    if (!t)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the trace state");
    t->out = cfg->out;
    if (chase_setup(&cfg->chase, (void **)&t->chase, ctx, err)) {
        free(t);
        return -1;
    }
    *state_out = t;
    return 0;
}

/* Walk `laps` laps with the measured loops (every thread), then write each
 * element's successor index to out[0:n], its pad[0] (0 when npad=0) to
 * out[n:2n] and the byte offset of its start from the region's (aligned)
 * base to out[2n:3n]. */
static int chase_trace_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    chase_trace_state *t = state;
    chase_state *s = t->chase;
    chase_sample sample = {0, 0, 0, 0, -1};
    uint64_t *words = t->out.data;
    if (s->cfg.laps > 0 &&
        chase_walk_sample(s, (uint64_t)s->cfg.laps * s->chain_elements, 0, ctx, NULL, &sample, err))
        return -1;
    for (uint64_t i = 0; i < s->elements; i++) {
        const chase_word *e = chase_element(s, i);
        const char *start = chase_element_start(s, i);
        words[i] = chase_index(s, (const chase_word *)e[0]);
        words[s->elements + i] = s->cfg.npad >= 1 ? ((const chase_word *)start)[s->pad0_word] : 0;
        words[2 * s->elements + i] = (uint64_t)(start - s->base);
    }
    ml_counter_values_missing(&out->counters, 0);
    out->elapsed_ns = sample.elapsed_ns;
    out->units = (double)sample.steps * (double)s->k;
    out->bytes = 0;
    ml_metric_add(out, "elements", (double)s->elements);
    ml_metric_add(out, "chain_elements", (double)s->chain_elements);
    ml_metric_add(out, "chains_total", (double)s->total_chains);
    ml_metric_add(out, "steps_per_chain", (double)sample.steps);
    ml_metric_add(out, "base_line_offset", (double)((uintptr_t)s->base % CHASE_LINE_BYTES));
    for (int th = 0; th < s->threads; th++) {
        for (int c = 0; c < s->k; c++) {
            char name[ML_METRIC_NAME_MAX];
            snprintf(name, sizeof name, "position_%d", th * s->k + c);
            ml_metric_add(out, name, (double)chase_index(s, s->walkers[th].walk.pos[c]));
            snprintf(name, sizeof name, "start_%d", th * s->k + c);
            ml_metric_add(out, name, (double)chase_index(s, s->walkers[th].start[c]));
        }
    }
    return 0;
}

/* The chase's parameters, their ranges and their defaults (ChaseParams' own:
 * tests/test_param_defaults.py), shared by chase and chase_trace. */
#define CHASE_PARAMS() \
    {.name = "working_set_bytes", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, working_set_bytes), .min = 8, .max = 1ll << 46, ML_DEFAULT(1 << 20)},\
    {.name = "npad", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, npad), .min = 0, .max = 65535, ML_DEFAULT(7)},\
    {.name = "order", .kind = ML_PARAM_CHOICE, .offset = offsetof(chase_config, order), .choices = chase_order_names, ML_DEFAULT_CHOICE("random")},\
    {.name = "block_pages", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, block_pages), .min = 1, .max = 1ll << 40, ML_DEFAULT(1)},\
    {.name = "layout", .kind = ML_PARAM_CHOICE, .offset = offsetof(chase_config, layout), .choices = chase_layout_names, ML_DEFAULT_CHOICE("packed")},\
    {.name = "op", .kind = ML_PARAM_CHOICE, .offset = offsetof(chase_config, op), .choices = chase_op_names, ML_DEFAULT_CHOICE("follow")},\
    {.name = "work_cycles", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, work_cycles), .min = 0, .max = 1000000, ML_DEFAULT(0)},\
    {.name = "prefetch_distance", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, prefetch_distance), .min = 0, .max = 1 << 20, ML_DEFAULT(0)},\
    {.name = "helper_thread", .kind = ML_PARAM_BOOL, .offset = offsetof(chase_config, helper_thread), ML_DEFAULT(0)},\
    {.name = "helper_distance", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, helper_distance), .min = 1, .max = 1 << 24, ML_DEFAULT(100)},\
    {.name = "pages", .kind = ML_PARAM_CHOICE, .offset = offsetof(chase_config, pages), .choices = chase_pages_names, ML_DEFAULT_CHOICE("4k")},\
    {.name = "strict_pages", .kind = ML_PARAM_BOOL, .offset = offsetof(chase_config, strict_pages), ML_DEFAULT(0)},\
    {.name = "chains", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, chains), .min = 1, .max = CHASE_MAX_CHAINS, ML_DEFAULT(1)},\
    {.name = "seed", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, seed), .min = 0, .max = INT64_MAX, ML_DEFAULT(1)},\
    {.name = "laps", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, laps), .min = 0, .max = 1ll << 40, ML_DEFAULT(0)},\
    {.name = "check", .kind = ML_PARAM_BOOL, .offset = offsetof(chase_config, check), ML_DEFAULT(0)},\
    {.name = "pair_word", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, pair_word), .min = 2, .max = 65535, ML_DEFAULT(2)},\
    {.name = "pointer_word", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, pointer_word), .min = 0, .max = 65535, ML_DEFAULT(0)},\
    {.name = "misalign_bytes", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, misalign_bytes), .min = 0, .max = CHASE_LINE_BYTES - 1, ML_DEFAULT(0)},\
    {.name = "element_distance", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, element_distance), .min = 1, .max = 1 << 16, ML_DEFAULT(1)},\
    {.name = "threads", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, threads), .min = 1, .max = CHASE_MAX_THREADS, ML_DEFAULT(1)},\
    {.name = "thread_lists", .kind = ML_PARAM_CHOICE, .offset = offsetof(chase_config, thread_lists), .choices = chase_thread_lists_names, ML_DEFAULT_CHOICE("shared")},\
    {.name = "memory_node", .kind = ML_PARAM_INT, .offset = offsetof(chase_config, memory_node), .min = -1, .max = ML_MAX_NODES - 1, ML_DEFAULT(-1)},\
    {.name = "cpus", .kind = ML_PARAM_BUFFER, .offset = offsetof(chase_config, cpus), .optional = 1}

static const ml_param chase_params[] = {
    CHASE_PARAMS(),
    {0},
};

ML_FAMILY(chase) = {
    .name = "chase",
    .description = "pointer chase through a circular list of struct { next; pad[npad]; }",
    .config_size = sizeof(chase_config),
    .params = chase_params,
    .setup = chase_setup,
    .measure = chase_measure,
    .teardown = chase_teardown,
};

static const ml_param chase_trace_params[] = {
    CHASE_PARAMS(),
    {.name = "out", .kind = ML_PARAM_BUFFER, .offset = offsetof(chase_trace_config, out), .writable = 1},
    {0},
};

ML_FAMILY(chase_trace) = {
    .name = "chase_trace",
    .description = "the chase list as successor indices, pad[0] and element offsets after a fixed walk",
    .config_size = sizeof(chase_trace_config),
    .params = chase_trace_params,
    .setup = chase_trace_setup,
    .measure = chase_trace_measure,
    .teardown = chase_trace_teardown,
};
