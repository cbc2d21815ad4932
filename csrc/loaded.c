/* Loaded latency: the pointer chase's latency while other threads load the
 * memory system with a throttled bandwidth kernel (what Intel's Memory
 * Latency Checker calls loaded latency).
 *
 * Nothing here walks a list or moves bytes itself: the chaser is the chase
 * family (its list builder, walk and timing, driven through its ml_family
 * table with a config filled by parameter name), the load is a team of
 * bandwidth workers (csrc/bandwidth.h).  Each load worker runs its kernel
 * in chunks of LOADED_CHUNK_BYTES (LOADED_UNTHROTTLED_CHUNK_BYTES when
 * delay_ns is 0; load_chunk_bytes when given) and, between chunks, its hook
 *   - notes the worker's bytes and the time while the chaser's window is
 *     open (first and last note inside it), so that every load thread's rate
 *     is measured over the chaser's window;
 *   - busy-waits delay_ns: the knob, from 0 (unthrottled) up to idle.
 * The chaser runs in the calling thread, pinned to cpus[0] for the sample. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bandwidth.h"
#include "memlab.h"

extern const ml_family ml_family_chase;

#define LOADED_MAX_LOAD_THREADS 1023
#define LOADED_CHUNK_BYTES (64u << 10)
/* Unthrottled (delay_ns 0), a load thread needs no rest between chunks, and
 * each chunk boundary costs about one memory round trip (most likely the
 * clock reads around the kernel call waiting for its loads in flight):
 * 64 KiB chunks drew 0.943 of the bandwidth family's rate on a KVM guest,
 * 1 MiB ones 0.985 (docs/loaded.md). */
#define LOADED_UNTHROTTLED_CHUNK_BYTES (1u << 20)
#define LOADED_MAX_CHUNK_BYTES (INT64_C(1) << 30)
#define LOADED_MAX_DELAY_NS 10000000
#define LOADED_MAX_CPU_METRICS 4

/* The load mixes, indexed as ml_bw_op: reads only, writes only, 1:1 (copy), 2:1 (add). */
static const char *const loaded_ops[] = {"read", "write", "copy", "add", NULL};
static const char *const loaded_pages[] = {"4k", "thp", "hugetlb-2m", NULL};

typedef struct loaded_config {
    int64_t working_set_bytes;      /* the chaser's list */
    int pages;                      /* the chaser's pages */
    int64_t load_threads;
    int load_op;
    int64_t load_working_set_bytes; /* per load thread */
    int64_t delay_ns;               /* busy wait after each chunk of a load thread */
    int64_t load_chunk_bytes;       /* 0: LOADED_CHUNK_BYTES throttled, LOADED_UNTHROTTLED_CHUNK_BYTES not */
    ml_buffer cpus;                 /* int32: the chaser's CPU, then one per load thread; -1: anywhere */
} loaded_config;

static const ml_param loaded_params[] = {
    {.name = "working_set_bytes", .kind = ML_PARAM_INT, .offset = offsetof(loaded_config, working_set_bytes),
     .min = 1024, .max = INT64_C(1) << 46},
    {.name = "pages", .kind = ML_PARAM_CHOICE, .offset = offsetof(loaded_config, pages), .choices = loaded_pages, ML_DEFAULT_CHOICE("thp")},
    {.name = "load_threads", .kind = ML_PARAM_INT, .offset = offsetof(loaded_config, load_threads), .min = 0,
     .max = LOADED_MAX_LOAD_THREADS},
    {.name = "load_op", .kind = ML_PARAM_CHOICE, .offset = offsetof(loaded_config, load_op), .choices = loaded_ops, ML_DEFAULT_CHOICE("read")},
    {.name = "load_working_set_bytes", .kind = ML_PARAM_INT,
     .offset = offsetof(loaded_config, load_working_set_bytes), .min = 64 << 10, .max = INT64_C(1) << 46},
    {.name = "delay_ns", .kind = ML_PARAM_INT, .offset = offsetof(loaded_config, delay_ns), .min = 0,
     .max = LOADED_MAX_DELAY_NS, ML_DEFAULT(0)},
    {.name = "load_chunk_bytes", .kind = ML_PARAM_INT, .offset = offsetof(loaded_config, load_chunk_bytes),
     .min = 0, .max = LOADED_MAX_CHUNK_BYTES, ML_DEFAULT(0)},
    {.name = "cpus", .kind = ML_PARAM_BUFFER, .offset = offsetof(loaded_config, cpus)},
    {0},
};

/* One load worker's notes, written only by its thread. */
typedef struct loaded_note {
    struct loaded_state *state;
    uint64_t first_ns, first_bytes, last_ns, last_bytes;
    int notes;
} loaded_note;

typedef struct loaded_state {
    loaded_config cfg;
    int *cpus;
    void *chase_config;
    void *chase;          /* the chase family's state */
    ml_region *sources, *destinations;
    ml_bw_team team;
    loaded_note *notes;
    atomic_int window;    /* 0 before the chaser's window, 1 inside, 2 after */
} loaded_state;

static void loaded_teardown(void *state);

/* Set a parameter of another family's config by name (ints, bools, choices). */
/* The chase config: the chase family's defaults (one element per line,
 * random order, one chain: ChaseParams'), with this family's working set and
 * pages. */
static int loaded_chase_config(loaded_state *s, ml_error *err)
{
    const ml_family *chase = &ml_family_chase;
    s->chase_config = calloc(1, chase->config_size);
    if (!s->chase_config)
        return ml_fail(err, ML_ERR_MEMORY, 0, "no memory for the chaser's config");
    if (ml_config_defaults(chase, s->chase_config, err) ||
        ml_config_set_int(chase, s->chase_config, "working_set_bytes", s->cfg.working_set_bytes, err) ||
        ml_config_set_choice(chase, s->chase_config, "pages", loaded_pages[s->cfg.pages], err))
        return -1;
    return 0;
}

static int loaded_check_cpus(loaded_state *s, ml_error *err)
{
    const ml_buffer *b = &s->cfg.cpus;
    size_t want = (size_t)s->cfg.load_threads + 1;
    if (ml_check_buffer(b, "cpus", want, sizeof(int32_t), err))
        return -1;
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return ml_fail(err, ML_ERR_OS, errno, "sched_getaffinity failed");
    s->cpus = malloc(want * sizeof *s->cpus);
    if (!s->cpus)
        return ml_fail(err, ML_ERR_MEMORY, 0, "no memory for the CPU list");
    const int32_t *cpus = b->data;
    for (size_t i = 0; i < want; i++) {
        int cpu = cpus[i];
        if (cpu < -1 || (cpu >= 0 && (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed))))
            return ml_fail(err, ML_ERR_VALUE, 0,
                           "cpus[%zu]=%d is not a CPU this process may use (-1 leaves it unpinned)", i, cpu);
        for (size_t j = 0; j < i; j++)
            if (cpu >= 0 && s->cpus[j] == cpu)
                return ml_fail(err, ML_ERR_VALUE, 0,
                               "cpus[%zu]=%d is also cpus[%zu]: the chaser and the load threads need a "
                               "CPU each (two on one CPU take turns)", i, cpu, j);
        s->cpus[i] = cpu;
    }
    return 0;
}

static int loaded_hook(ml_bw_worker *worker, void *arg)
{
    loaded_note *note = arg;
    loaded_state *s = note->state;
    uint64_t now = ml_now_ns();
    if (atomic_load_explicit(&s->window, memory_order_acquire) == 1) {
        if (note->notes == 0) {
            note->first_ns = now;
            note->first_bytes = worker->bytes_done;
        }
        note->last_ns = now;
        note->last_bytes = worker->bytes_done;
        note->notes++;
    }
    if (s->cfg.delay_ns > 0) {
        uint64_t until = now + (uint64_t)s->cfg.delay_ns;
        while (ml_now_ns() < until && !ml_team_stopping(worker->team)) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    }
    return 0;
}

static int loaded_setup(const void *config, void **state_out, ml_context *ctx, ml_error *err)
{
    const loaded_config *cfg = config; /* checked before the state exists: nothing to free */
    if (cfg->load_working_set_bytes % ML_BW_LINE_BYTES)
        return ml_fail(err, ML_ERR_VALUE, 0, "load_working_set_bytes=%lld is not a multiple of %u",
                       (long long)cfg->load_working_set_bytes, ML_BW_LINE_BYTES);
    if (cfg->load_chunk_bytes % ML_BW_LINE_BYTES)
        return ml_fail(err, ML_ERR_VALUE, 0, "load_chunk_bytes=%lld is not a multiple of %u",
                       (long long)cfg->load_chunk_bytes, ML_BW_LINE_BYTES);
    loaded_state *s = calloc(1, sizeof *s);
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, 0, "no memory for the loaded state");
    s->cfg = *cfg;
    int n = (int)s->cfg.load_threads;
    uint64_t chunk = s->cfg.load_chunk_bytes ? (uint64_t)s->cfg.load_chunk_bytes
                     : s->cfg.delay_ns       ? LOADED_CHUNK_BYTES
                                             : LOADED_UNTHROTTLED_CHUNK_BYTES;
    if (loaded_check_cpus(s, err) || loaded_chase_config(s, err)) {
        loaded_teardown(s);
        return -1;
    }
    size_t load_bytes = (size_t)s->cfg.load_working_set_bytes;
    int copies = (s->cfg.load_op != ML_BW_WRITE) + (s->cfg.load_op != ML_BW_READ); /* src and/or dst */
    if (n > 0 && ml_check_memory(load_bytes * (size_t)n * (size_t)copies, "the load threads' working sets", err)) {
        loaded_teardown(s);
        return -1;
    }
    if (ml_family_chase.setup(s->chase_config, &s->chase, ctx, err)) {
        s->chase = NULL;
        loaded_teardown(s);
        return -1;
    }
    s->sources = calloc((size_t)n + 1, sizeof *s->sources);
    s->destinations = calloc((size_t)n + 1, sizeof *s->destinations);
    s->notes = calloc((size_t)n + 1, sizeof *s->notes);
    if (!s->sources || !s->destinations || !s->notes) {
        loaded_teardown(s);
        return ml_fail(err, ML_ERR_MEMORY, 0, "no memory for the load workers");
    }
    const char *why = NULL;
    ml_bw_kernel kernel = ml_bw_kernel_for((ml_bw_op)s->cfg.load_op, ml_bw_widest(), ML_BW_STORES_NORMAL, &why);
    if (!kernel) {
        loaded_teardown(s); /* cfg is the caller's: still there */
        return ml_fail(err, ML_ERR_VALUE, 0, "load_op=%s: %s", loaded_ops[cfg->load_op], why ? why : "no kernel");
    }
    if (n > 0 && ml_bw_team_init(&s->team, n, err)) {
        loaded_teardown(s);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int reads = s->cfg.load_op != ML_BW_WRITE, writes = s->cfg.load_op != ML_BW_READ;
        if ((reads && ml_region_map(&s->sources[i], load_bytes, ML_PAGES_THP, 0, ML_POPULATE_TOUCH, 1, err)) ||
            (writes && ml_region_map(&s->destinations[i], load_bytes, ML_PAGES_THP, 0, ML_POPULATE_TOUCH, 1, err))) {
            loaded_teardown(s);
            return -1;
        }
        if (reads) /* not the zero page: a word pattern */
            for (size_t w = 0; w < load_bytes / sizeof(uint64_t); w++)
                ((uint64_t *)s->sources[i].base)[w] = (w + 1) * 0x9e3779b97f4a7c15ull;
        s->notes[i].state = s;
        s->team.workers[i] = (ml_bw_worker){
            .kernel = kernel, .src = reads ? s->sources[i].base : NULL,
            .dst = writes ? s->destinations[i].base : NULL, .bytes = load_bytes, .value = 1,
            .cpu = s->cpus[i + 1],
            .chunk_bytes = chunk, .hook = loaded_hook,
            .hook_arg = &s->notes[i]};
        if (ml_interrupted(ctx)) {
            loaded_teardown(s);
            return ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
        }
    }
    *state_out = s;
    return 0;
}

static void loaded_teardown(void *state)
{
    loaded_state *s = state;
    if (!s)
        return;
    ml_bw_team_stop(&s->team);
    ml_bw_team_free(&s->team);
    if (s->chase)
        ml_family_chase.teardown(s->chase);
    for (int i = 0; s->sources && i < (int)s->cfg.load_threads; i++) {
        if (s->sources[i].map_base)
            ml_region_unmap(&s->sources[i]);
        if (s->destinations && s->destinations[i].map_base)
            ml_region_unmap(&s->destinations[i]);
    }
    free(s->sources);
    free(s->destinations);
    free(s->notes);
    free(s->chase_config);
    free(s->cpus);
    free(s);
}

static int loaded_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    loaded_state *s = state;
    int n = (int)s->cfg.load_threads;
    for (int i = 0; i < n; i++)
        s->notes[i] = (loaded_note){.state = s};
    atomic_store(&s->window, 0);
    cpu_set_t saved;
    int pinned = 0;
    if (s->cpus[0] >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(s->cpus[0], &one);
        if (sched_getaffinity(0, sizeof saved, &saved) != 0 || sched_setaffinity(0, sizeof one, &one) != 0)
            return ml_fail(err, ML_ERR_OS, errno, "cannot pin the chaser to cpus[0]=%d", s->cpus[0]);
        pinned = 1;
    }
    int rc = n > 0 ? ml_bw_team_start(&s->team, ctx, err) : 0;
    uint64_t t0 = 0, t1 = 0;
    int chaser_cpu = -1;
    if (rc == 0) {
        /* the load runs for one chunk and its delay before the window opens */
        uint64_t settle = ml_now_ns() + 2000000u;
        while (n > 0 && ml_now_ns() < settle)
            ;
        atomic_store_explicit(&s->window, 1, memory_order_release);
        t0 = ml_now_ns();
        rc = ml_family_chase.measure(s->chase, ctx, out, err);
        t1 = ml_now_ns();
        atomic_store_explicit(&s->window, 2, memory_order_release);
        chaser_cpu = sched_getcpu();
    }
    ml_bw_team_stop(&s->team);
    if (pinned)
        sched_setaffinity(0, sizeof saved, &saved);
    if (rc)
        return rc;

    double rate_sum = 0, window_bytes = 0, chunks = 0;
    int unmeasured = 0;
    ml_team_time times[LOADED_MAX_LOAD_THREADS];
    for (int i = 0; i < n; i++) {
        const loaded_note *note = &s->notes[i];
        times[i] = *ml_bw_team_time(&s->team, i);
        if (note->notes >= 2 && note->last_ns > note->first_ns) {
            rate_sum += (double)(note->last_bytes - note->first_bytes) / (double)(note->last_ns - note->first_ns);
            window_bytes += (double)(note->last_bytes - note->first_bytes);
            chunks += note->notes - 1;
        } else
            unmeasured++;
    }
    /* bytes passed over, and read and written, counted as the bandwidth family counts its kernels */
    unsigned reads, writes;
    ml_bw_op_traffic((ml_bw_op)s->cfg.load_op, &reads, &writes);
    ml_metric_add(out, "load_GB_per_s", rate_sum);
    ml_metric_add(out, "load_read_GB_per_s", rate_sum * reads);
    ml_metric_add(out, "load_write_GB_per_s", rate_sum * writes);
    ml_metric_add(out, "load_traffic_GB_per_s", rate_sum * (reads + writes));
    ml_metric_add(out, "load_bytes", window_bytes);
    ml_metric_add(out, "load_traffic_bytes", window_bytes * (reads + writes));
    ml_metric_add(out, "load_bytes_per_chunk", chunks > 0 ? window_bytes / chunks : 0.0);
    ml_metric_add(out, "load_threads_unmeasured", unmeasured);
    if (n > 0) /* load_cpu_fraction, load_lowest_cpu_fraction, load_overlap_fraction */
        ml_team_metrics(times, n, "load_", out);
    else
        ml_metric_add(out, "load_cpu_fraction", 0.0);
    ml_metric_add(out, "window_ns", (double)(t1 - t0));
    ml_metric_add(out, "ran_on_cpu_chaser", chaser_cpu);
    for (int i = 0; i < n && i < LOADED_MAX_CPU_METRICS; i++) {
        char name[ML_METRIC_NAME_MAX];
        snprintf(name, sizeof name, "ran_on_cpu_load_%d", i);
        ml_metric_add(out, name, ml_bw_team_time(&s->team, i)->ran_on_cpu);
    }
    return 0;
}

ML_FAMILY(loaded) = {
    .name = "loaded",
    .description = "pointer-chase latency while other threads load memory with a throttled bandwidth kernel",
    .config_size = sizeof(loaded_config),
    .params = loaded_params,
    .setup = loaded_setup,
    .measure = loaded_measure,
    .teardown = loaded_teardown,
};
