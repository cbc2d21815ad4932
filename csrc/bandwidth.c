/* Memory bandwidth: Drepper's read, write and copy loops (seed 004, sections
 * 3.5.1 and 3.5.3, figures 3.24-3.29 and 3.31), one or more threads.
 *
 * The kernels (bandwidth_kernels.c) and the team of worker threads
 * (bandwidth_team.c) are the API of bandwidth.h; two families use them,
 * here: "bandwidth" (the measurement: threads over shared or private
 * working sets, an optional background worker on its own set, a checking
 * mode) and "bandwidth_pass" (one kernel over buffers handed in from
 * Python, so that tests can check every byte against numpy). */
#define _GNU_SOURCE
#include "bandwidth.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* What the bandwidth family measures (add is a load mix: see ml_bw_op_traffic). */
static const char *const bw_family_op_names[] = {"read", "write", "copy", NULL};

/* ---- the "bandwidth" family --------------------------------------------- */

enum { WIDTH_AUTO = 0 }; /* config->width: 0 auto, else ml_bw_width + 1 */
static const char *const bw_width_choices[] = {"auto", "scalar", "sse2", "avx2", "avx512", NULL};
enum { BACKGROUND_NONE = 0 }; /* config->background_op: 0 none, else ml_bw_op + 1 */
static const char *const bw_background_choices[] = {"none", "read", "write", "copy", NULL};
static const char *const bw_pages_names[] = {"4k", "thp", "hugetlb-2m", NULL};
static const ml_page_kind bw_page_kinds[] = {ML_PAGES_4K, ML_PAGES_THP, ML_PAGES_HUGETLB_2M};

#define BW_MAX_THREADS 1024
#define BW_MAX_BYTES (1ll << 46)
#define BW_GUARD_BYTES 4096u /* before and after each working set, checked by check=1 */
#define BW_CHECK_PASSES 2u
/* Chunks of the check: not a divisor of any power of two, so that chunks
 * end inside passes and the next pass starts mid-chunk. */
#define BW_CHECK_CHUNK_BYTES (3u * 4096u + 5u * 64u)
#define BW_WRITE_VALUE 0xc3a55a3cc3a55a3cull
#define BW_PATTERN_STEP 0x9e3779b97f4a7c15ull
#define BW_GUARD_WORD 0x6b8b4567327b23c6ull
#define BW_LOW52 ((1ull << 52) - 1)

typedef struct bw_config {
    int64_t working_set_bytes;
    int op;
    int width;
    int stores;
    int64_t threads;
    ml_buffer cpus;
    int shared;
    int pages;
    int strict_pages;
    int background_op;
    int64_t background_working_set_bytes;
    int check;
} bw_config;

static const ml_param bw_params[] = {
    {.name = "working_set_bytes", .kind = ML_PARAM_INT, .offset = offsetof(bw_config, working_set_bytes),
     .min = ML_BW_LINE_BYTES, .max = BW_MAX_BYTES, ML_DEFAULT(1 << 20)},
    {.name = "op", .kind = ML_PARAM_CHOICE, .offset = offsetof(bw_config, op), .choices = bw_family_op_names, ML_DEFAULT_CHOICE("read")},
    {.name = "width", .kind = ML_PARAM_CHOICE, .offset = offsetof(bw_config, width),
     .choices = bw_width_choices, ML_DEFAULT_CHOICE("auto")},
    {.name = "stores", .kind = ML_PARAM_CHOICE, .offset = offsetof(bw_config, stores),
     .choices = ml_bw_stores_names, ML_DEFAULT_CHOICE("normal")},
    {.name = "threads", .kind = ML_PARAM_INT, .offset = offsetof(bw_config, threads), .min = 1,
     .max = BW_MAX_THREADS, ML_DEFAULT(1)},
    {.name = "cpus", .kind = ML_PARAM_BUFFER, .offset = offsetof(bw_config, cpus)},
    {.name = "shared", .kind = ML_PARAM_BOOL, .offset = offsetof(bw_config, shared), ML_DEFAULT(1)},
    {.name = "pages", .kind = ML_PARAM_CHOICE, .offset = offsetof(bw_config, pages), .choices = bw_pages_names, ML_DEFAULT_CHOICE("4k")},
    {.name = "strict_pages", .kind = ML_PARAM_BOOL, .offset = offsetof(bw_config, strict_pages), ML_DEFAULT(0)},
    {.name = "background_op", .kind = ML_PARAM_CHOICE, .offset = offsetof(bw_config, background_op),
     .choices = bw_background_choices, ML_DEFAULT_CHOICE("none")},
    {.name = "background_working_set_bytes", .kind = ML_PARAM_INT,
     .offset = offsetof(bw_config, background_working_set_bytes), .min = ML_BW_LINE_BYTES,
     .max = BW_MAX_BYTES, ML_DEFAULT(2 << 20)},
    {.name = "check", .kind = ML_PARAM_BOOL, .offset = offsetof(bw_config, check), ML_DEFAULT(0)},
    {0},
};

/* One mapping of a working set: a region with a guard page before and after its data. */
typedef struct bw_part {
    ml_region region;
    char *data;
    size_t bytes;
    int mapped;
} bw_part;

/* One working set.  Read and write use one mapping; copy reads its first half and writes its
 * second, each in a mapping of its own, as a program copies between two buffers: on a Zen 3
 * guest the halves of one region, a power of two apart, copied beyond the caches at 0.94-0.97
 * of two mappings in the same process (docs/bandwidth.md, "Where a copy's halves sit"). */
typedef struct bw_set {
    bw_part part[2]; /* [0]: the whole set, or copy's source half; [1]: copy's destination half */
    int parts;
    size_t bytes;       /* the working set: every part's bytes */
    uint64_t fill_ns;   /* the fill of every part */
    uint64_t settle_ns; /* the untimed read after the fill */
} bw_set;

typedef struct bw_state {
    bw_config cfg;
    ml_bw_op op, background;
    ml_bw_width width;
    ml_bw_kernel kernel, background_kernel;
    int threads, workers;
    int *cpus;
    bw_set *sets; /* measured: sets[0] if shared, else one per thread; then the background's */
    int n_sets;
    ml_bw_team team;
} bw_state;

static inline uint64_t pattern_word(size_t index)
{
    return (uint64_t)(index + 1) * BW_PATTERN_STEP;
}

static size_t op_pass_bytes(ml_bw_op op, size_t working_set)
{
    return op == ML_BW_COPY ? working_set / 2 : working_set;
}

static const void *set_src(const bw_set *set) { return set->part[0].data; }

static void *set_dst(const bw_set *set) { return set->part[set->parts - 1].data; }

static int check_working_set(const char *name, int64_t bytes, ml_bw_op op, ml_error *err)
{
    if (bytes % ML_BW_LINE_BYTES)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "%s=%lld must be a multiple of %u bytes (one cache line, the widest vector)",
                       name, (long long)bytes, ML_BW_LINE_BYTES);
    if (op == ML_BW_COPY && bytes % (2 * ML_BW_LINE_BYTES))
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "%s=%lld: copy reads one half of the working set and writes the other, so it "
                       "must be a multiple of %u bytes (two cache lines)",
                       name, (long long)bytes, 2 * ML_BW_LINE_BYTES);
    return 0;
}

static void bw_teardown(void *state_)
{
    bw_state *s = state_;
    if (!s)
        return;
    ml_bw_team_free(&s->team);
    for (int i = 0; s->sets && i < s->n_sets; ++i)
        for (int p = 0; p < 2; ++p)
            if (s->sets[i].part[p].mapped)
                ml_region_unmap(&s->sets[i].part[p].region);
    free(s->sets);
    free(s->cpus);
    free(s);
}

/* Fill a set: every word with the pattern, counted across its parts (the
 * source of a copy is its first half), the guards with their word.  Distinct
 * non-zero words: pages of zeros may be merged by the hypervisor, and the
 * first write to a merged page then pays for a copy.  Run on the CPU of the
 * first worker that uses the set, so that its pages are local there. */
static void fill_set(bw_set *set)
{
    size_t index = 0;
    for (int p = 0; p < set->parts; ++p) {
        const bw_part *part = &set->part[p];
        uint64_t *lead = (uint64_t *)(part->data - BW_GUARD_BYTES);
        uint64_t *trail = (uint64_t *)(part->data + part->bytes);
        for (size_t i = 0; i < BW_GUARD_BYTES / 8; ++i)
            lead[i] = trail[i] = BW_GUARD_WORD ^ i;
        uint64_t *words = (uint64_t *)part->data;
        for (size_t i = 0; i < part->bytes / 8; ++i)
            words[i] = pattern_word(index++);
    }
}

/* Where the settling read's sum goes, so that the compiler keeps the loop. */
static volatile uint64_t bw_settle_sink;

/* Read a filled set once, untimed.  On a KVM guest the first read of memory
 * just written ran at a quarter of the later rate (a 1 GiB set: 2.9 GB/s over
 * its first 32 MiB, 11 GB/s over later parts and over the same 32 MiB read
 * again), and a short sample of a set larger than one sample reads saw only
 * that start: a quick run's 1 GiB read came out at 1 GB/s instead of 8. */
static void settle_set(bw_set *set)
{
    uint64_t sum = 0;
    for (int p = 0; p < set->parts; ++p) {
        const uint64_t *words = (const uint64_t *)set->part[p].data;
        for (size_t i = 0; i < set->part[p].bytes / 8; i += ML_BW_LINE_BYTES / 8)
            sum += words[i];
    }
    bw_settle_sink = sum;
}

/* A set of bytes for op: one mapping, or two halves for a copy. */
static int map_set(bw_set *set, size_t bytes, ml_bw_op op, const bw_config *cfg, int cpu, ml_error *err)
{
    set->parts = op == ML_BW_COPY ? 2 : 1;
    set->bytes = bytes;
    for (int p = 0; p < set->parts; ++p) {
        bw_part *part = &set->part[p];
        part->bytes = bytes / (size_t)set->parts;
        if (ml_region_map(&part->region, part->bytes + 2 * BW_GUARD_BYTES, bw_page_kinds[cfg->pages], 0,
                          ML_POPULATE_NONE, !cfg->strict_pages, err))
            return -1;
        part->mapped = 1;
        part->data = (char *)part->region.base + BW_GUARD_BYTES;
    }
    cpu_set_t saved, one;
    int moved = 0;
    if (cpu >= 0 && pthread_getaffinity_np(pthread_self(), sizeof saved, &saved) == 0) {
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        moved = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
    }
    uint64_t start = ml_now_ns();
    fill_set(set);
    set->fill_ns = ml_now_ns() - start;
    for (int p = 0; p < set->parts; ++p)
        set->part[p].region.populate_requested = set->part[p].region.populate_used = ML_POPULATE_TOUCH;
    start = ml_now_ns();
    settle_set(set);
    set->settle_ns = ml_now_ns() - start;
    if (moved)
        pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
    for (int p = 0; cfg->strict_pages && p < set->parts; ++p)
        if (ml_region_require_requested(&set->part[p].region, ml_region_huge_bytes(&set->part[p].region), err))
            return -1;
    return 0;
}

/* Huge-page bytes over every part of a set; -1 when any part's is unknown. */
static int64_t set_huge_bytes(const bw_set *set)
{
    int64_t huge = 0;
    for (int p = 0; p < set->parts; ++p) {
        int64_t part = ml_region_huge_bytes(&set->part[p].region);
        if (part < 0)
            return -1;
        huge += part;
    }
    return huge;
}

static int resolve_width(int choice, ml_bw_width *out, ml_error *err)
{
    ml_bw_width width = choice == WIDTH_AUTO ? ml_bw_widest() : (ml_bw_width)(choice - 1);
    const char *why;
    if (!ml_bw_width_supported(width, &why))
        return ml_fail(err, ML_ERR_VALUE, 0, "width=%s cannot run here: %s (widest: %s)",
                       ml_bw_width_names[width], why, ml_bw_width_names[ml_bw_widest()]);
    *out = width;
    return 0;
}

static int check_cpus(bw_state *s, const bw_config *cfg, ml_error *err)
{
    const ml_buffer *b = &cfg->cpus;
    if (b->itemsize != sizeof(int32_t))
        return ml_fail(err, ML_ERR_VALUE, 0, "cpus has items of %zu bytes; int32 (4) is required",
                       b->itemsize);
    if (b->bytes != (size_t)s->workers * sizeof(int32_t))
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "cpus holds %zu CPUs; threads=%d%s needs %d (one per worker, -1: unpinned)",
                       b->bytes / sizeof(int32_t), s->threads,
                       s->workers > s->threads ? " and a background worker" : "", s->workers);
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed))
        return ml_fail(err, ML_ERR_OS, errno, "sched_getaffinity: %s", strerror(errno));
    int n_allowed = CPU_COUNT(&allowed);
    if (s->workers > n_allowed)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "threads=%d%s is more than the %d CPUs this process may use", s->threads,
                       s->workers > s->threads ? " plus a background worker" : "", n_allowed);
    s->cpus = malloc((size_t)s->workers * sizeof *s->cpus);
    if (!s->cpus)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for the CPU list");
    const int32_t *cpus = b->data;
    for (int i = 0; i < s->workers; ++i) {
        int cpu = cpus[i];
        if (cpu < -1 || cpu >= CPU_SETSIZE || (cpu >= 0 && !CPU_ISSET(cpu, &allowed)))
            return ml_fail(err, ML_ERR_VALUE, 0,
                           "cpus[%d]=%d is not a CPU this process may use (-1 leaves it unpinned)",
                           i, cpu);
        for (int j = 0; j < i; ++j)
            if (cpu >= 0 && s->cpus[j] == cpu)
                return ml_fail(err, ML_ERR_VALUE, 0,
                               "cpus[%d]=%d is also cpus[%d]: two workers on one CPU take turns "
                               "instead of running together",
                               i, cpu, j);
        s->cpus[i] = cpu;
    }
    return 0;
}

static int bw_setup(const void *config, void **state_out, ml_context *ctx, ml_error *err)
{
    (void)ctx;
    const bw_config *cfg = config;
    bw_state *s = calloc(1, sizeof *s);
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for the bandwidth state");
    s->cfg = *cfg;
    s->op = (ml_bw_op)cfg->op;
    s->threads = (int)cfg->threads;
    s->workers = s->threads + (cfg->background_op != BACKGROUND_NONE);
    const char *why;
    if (check_working_set("working_set_bytes", cfg->working_set_bytes, s->op, err) ||
        resolve_width(cfg->width, &s->width, err))
        goto fail;
    s->kernel = ml_bw_kernel_for(s->op, s->width, (ml_bw_stores)cfg->stores, &why);
    if (!s->kernel) {
        ml_fail(err, ML_ERR_VALUE, 0, "op=%s with stores=%s and width=%s: %s", ml_bw_op_names[s->op],
                ml_bw_stores_names[cfg->stores], ml_bw_width_names[s->width], why);
        goto fail;
    }
    if (cfg->background_op != BACKGROUND_NONE) {
        s->background = (ml_bw_op)(cfg->background_op - 1);
        if (check_working_set("background_working_set_bytes", cfg->background_working_set_bytes,
                              s->background, err))
            goto fail;
        s->background_kernel = ml_bw_kernel_for(s->background, s->width, ML_BW_STORES_NORMAL, &why);
    }
    if (check_cpus(s, cfg, err))
        goto fail;
    int measured_sets = cfg->shared ? 1 : s->threads;
    int n_sets = measured_sets + (cfg->background_op != BACKGROUND_NONE);
    size_t page = ml_page_kind_bytes(bw_page_kinds[cfg->pages]);
    size_t each = ml_round_up((uint64_t)cfg->working_set_bytes + 4 * BW_GUARD_BYTES, page) + page;
    size_t total = each * (size_t)measured_sets;
    if (cfg->background_op != BACKGROUND_NONE)
        total += (size_t)cfg->background_working_set_bytes + 2 * BW_GUARD_BYTES;
    char what[128];
    snprintf(what, sizeof what, "%d working set%s of %lld bytes", measured_sets,
             measured_sets > 1 ? "s" : "", (long long)cfg->working_set_bytes);
    if (ml_check_memory(total, what, err))
        goto fail;
    s->sets = calloc((size_t)n_sets, sizeof *s->sets);
    if (!s->sets) {
        ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for %d working sets", n_sets);
        goto fail;
    }
    s->n_sets = n_sets;
    for (int i = 0; i < measured_sets; ++i)
        if (map_set(&s->sets[i], (size_t)cfg->working_set_bytes, s->op, cfg, s->cpus[i], err))
            goto fail;
    if (cfg->background_op != BACKGROUND_NONE &&
        map_set(&s->sets[measured_sets], (size_t)cfg->background_working_set_bytes, s->background, cfg,
                s->cpus[s->threads], err))
        goto fail;
    if (ml_bw_team_init(&s->team, s->workers, err))
        goto fail;
    for (int i = 0; i < s->workers; ++i) {
        int background = i >= s->threads;
        bw_set *set = &s->sets[background ? measured_sets : cfg->shared ? 0 : i];
        ml_bw_op op = background ? s->background : s->op;
        ml_bw_worker *w = &s->team.workers[i];
        w->kernel = background ? s->background_kernel : s->kernel;
        w->src = set_src(set);
        w->dst = set_dst(set);
        w->bytes = op_pass_bytes(op, set->bytes);
        w->value = BW_WRITE_VALUE;
        w->cpu = s->cpus[i];
    }
    *state_out = s;
    return 0;
fail:
    bw_teardown(s);
    return -1;
}

/* The reference of the check: the words of [0, bytes) summed by the
 * plainest loop. */
ML_BW_KERNEL static uint64_t reference_sum(const uint64_t *words, size_t bytes)
{
    uint64_t sum = 0;
    ML_BW_PLAIN_LOOP
    for (size_t i = 0; i < bytes / 8; ++i)
        sum += words[i];
    return sum;
}

typedef struct bw_check_result {
    uint64_t wrong_words, guard_damage, sum_mismatches, bytes;
    uint64_t first_sum; /* read: what set 0's check passes summed to */
} bw_check_result;

static void check_guards(const bw_set *set, bw_check_result *r)
{
    for (int p = 0; p < set->parts; ++p) {
        const uint64_t *lead = (const uint64_t *)(set->part[p].data - BW_GUARD_BYTES);
        const uint64_t *trail = (const uint64_t *)(set->part[p].data + set->part[p].bytes);
        for (size_t i = 0; i < BW_GUARD_BYTES / 8; ++i)
            r->guard_damage += (lead[i] != (BW_GUARD_WORD ^ i)) + (trail[i] != (BW_GUARD_WORD ^ i));
    }
}

/* Run a measured worker's loop for BW_CHECK_PASSES passes in odd chunks,
 * here, and look at every word of its set and the guards around it. */
static void check_set(bw_state *s, int worker, bw_check_result *r)
{
    ml_bw_worker w = s->team.workers[worker];
    const bw_set *set = &s->sets[s->cfg.shared ? 0 : worker];
    size_t words = w.bytes / 8;
    uint64_t *dst = w.dst;
    const uint64_t *src = w.src;
    if (s->op != ML_BW_READ)
        for (size_t i = 0; i < words; ++i)
            dst[i] = ~BW_WRITE_VALUE ^ i; /* neither the value written nor a source word */
    if (s->op == ML_BW_READ)
        w.kernel = ml_bw_sum_kernel(s->width); /* the read's walk, adding up what it loads */
    w.max_bytes = (uint64_t)w.bytes * BW_CHECK_PASSES;
    w.chunk_bytes = BW_CHECK_CHUNK_BYTES;
    w.offset = 0;
    w.hook = NULL;
    ml_bw_worker_run_here(&w);
    r->bytes += w.bytes_done;
    if (s->op == ML_BW_READ) {
        uint64_t expected = reference_sum(src, w.bytes) * BW_CHECK_PASSES;
        r->sum_mismatches += w.sum != expected;
        if (worker == 0)
            r->first_sum = w.sum;
    } else {
        for (size_t i = 0; i < words; ++i)
            r->wrong_words += dst[i] != (s->op == ML_BW_WRITE ? BW_WRITE_VALUE : src[i]);
    }
    if (s->op == ML_BW_COPY) /* the source half must be as it was filled */
        for (size_t i = 0; i < words; ++i)
            r->wrong_words += src[i] != pattern_word(i);
    if (s->op == ML_BW_READ)
        for (size_t i = 0; i < words; ++i)
            r->wrong_words += src[i] != pattern_word(i);
    check_guards(set, r);
}

static int bw_measure(void *state_, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    bw_state *s = state_;
    uint64_t target = ctx && ctx->target_ns ? ctx->target_ns : 100000000ull;
    ml_counting counting;
    ml_counting_open(&counting, ctx, 1); /* inherit: the worker threads are counted */
    ml_counting_begin(&counting);
    int rc = ml_bw_team_run(&s->team, target, ctx, err);
    ml_counting_end(&counting, &out->counters);
    if (rc)
        return rc;

    double bytes_sum = 0, window_sum = 0, rate_total = 0, on_cpu_rate_sum = 0;
    double rate_min = 0, rate_max = 0;
    uint64_t first_start = UINT64_MAX, last_start = 0, first_end = UINT64_MAX, last_end = 0;
    ml_team_time times[BW_MAX_THREADS];
    for (int i = 0; i < s->threads; ++i) {
        const ml_bw_worker *w = &s->team.workers[i];
        const ml_team_time *t = ml_bw_team_time(&s->team, i);
        times[i] = *t;
        uint64_t window = t->end_ns > t->start_ns ? t->end_ns - t->start_ns : 1;
        double rate = (double)w->bytes_done / (double)window; /* GB/s */
        bytes_sum += (double)w->bytes_done;
        window_sum += (double)window;
        rate_total += rate;
        on_cpu_rate_sum += t->cpu_ns ? (double)w->bytes_done / (double)t->cpu_ns : 0.0;
        rate_min = i == 0 || rate < rate_min ? rate : rate_min;
        rate_max = i == 0 || rate > rate_max ? rate : rate_max;
        first_start = t->start_ns < first_start ? t->start_ns : first_start;
        last_start = t->start_ns > last_start ? t->start_ns : last_start;
        first_end = t->end_ns < first_end ? t->end_ns : first_end;
        last_end = t->end_ns > last_end ? t->end_ns : last_end;
    }
    double n = (double)s->threads;
    /* Per measured thread: the average thread's bytes in the average thread's window. */
    out->elapsed_ns = (uint64_t)(window_sum / n + 0.5);
    out->bytes = bytes_sum / n;
    out->units = out->bytes;
    double common = first_end > last_start ? (double)(first_end - last_start) : 0.0;
    double pass_bytes = (double)s->team.workers[0].bytes;
    ml_metric_add(out, "threads", n);
    ml_metric_add(out, "GB_per_s_total", rate_total);
    ml_metric_add(out, "GB_per_s_slowest_thread", rate_min);
    ml_metric_add(out, "GB_per_s_fastest_thread", rate_max);
    ml_metric_add(out, "on_cpu_GB_per_s", on_cpu_rate_sum / n);
    ml_team_metrics(times, s->threads, "", out);
    /* the time all threads' runs had in common over the time any ran
     * (overlap_fraction before the team's one definition) */
    ml_metric_add(out, "window_overlap_fraction", last_end > first_start ? common / (double)(last_end - first_start) : 0.0);
    ml_metric_add(out, "passes", bytes_sum / n / pass_bytes);
    ml_metric_add(out, "bytes_per_pass", pass_bytes);
    ml_metric_add(out, "vector_bytes", (double)ml_bw_vector_bytes(s->width));
    ml_metric_add(out, "nontemporal", s->cfg.stores == ML_BW_STORES_NONTEMPORAL);
    ml_metric_add(out, "working_sets", s->cfg.shared ? 1.0 : n);
    double mapped = 0;
    for (int i = 0; i < s->n_sets; ++i)
        for (int p = 0; p < s->sets[i].parts; ++p)
            mapped += (double)s->sets[i].part[p].region.map_bytes;
    ml_metric_add(out, "memory_bytes", mapped);
    const bw_set *first = &s->sets[0];
    ml_metric_add(out, "fill_ns", (double)first->fill_ns);
    ml_metric_add(out, "settle_ns", (double)first->settle_ns);
    /* set 0's facts over all its mappings: the one that got the lesser pages speaks for it */
    ml_region whole = first->part[0].region;
    whole.bytes = 0;
    for (int p = 0; p < first->parts; ++p) {
        whole.bytes += first->part[p].region.bytes;
        if (first->part[p].region.granted != whole.granted)
            whole.granted = ML_PAGES_4K;
    }
    int64_t huge = set_huge_bytes(first);
    if (huge >= 0)
        ml_metric_add(out, "huge_page_fraction", (double)huge / (double)whole.bytes);
    ml_metric_add(out, "pages_granted_hugetlb", whole.granted == ML_PAGES_HUGETLB_2M);
    ml_metric_add(out, "mappings_per_set", first->parts);
    ml_region_facts(out, &whole, huge);
    for (int i = 0; i < s->workers && i < 4; ++i) {
        char name[ML_METRIC_NAME_MAX];
        snprintf(name, sizeof name, "ran_on_cpu_%d", i);
        ml_metric_add(out, name, ml_bw_team_time(&s->team, i)->ran_on_cpu);
    }
    if (s->workers > s->threads) {
        const ml_bw_worker *b = &s->team.workers[s->threads];
        const ml_team_time *t = ml_bw_team_time(&s->team, s->threads);
        uint64_t window = t->end_ns > t->start_ns ? t->end_ns - t->start_ns : 1;
        ml_metric_add(out, "background_GB_per_s", (double)b->bytes_done / (double)window);
        ml_metric_add(out, "background_cpu_fraction", ml_team_cpu_fraction(t));
    }
    if (s->cfg.check) {
        bw_check_result r = {0};
        int sets = s->cfg.shared ? 1 : s->threads;
        for (int i = 0; i < sets; ++i) {
            check_set(s, i, &r);
            ML_CHECK_INTERRUPT(ctx, err);
        }
        ml_metric_add(out, "check_errors", (double)(r.wrong_words + r.guard_damage + r.sum_mismatches));
        ml_metric_add(out, "check_wrong_words", (double)r.wrong_words);
        ml_metric_add(out, "check_guard_damage", (double)r.guard_damage);
        ml_metric_add(out, "check_sum_mismatches", (double)r.sum_mismatches);
        ml_metric_add(out, "check_bytes", (double)r.bytes);
        ml_metric_add(out, "check_passes", BW_CHECK_PASSES);
        if (s->op == ML_BW_READ)
            ml_metric_add(out, "check_sum_low52", (double)(r.first_sum & BW_LOW52));
    }
    return 0;
}

ML_FAMILY(bandwidth) = {
    .name = "bandwidth",
    .description = "read / write / copy loops over a working set at a chosen vector width, one "
                   "or more pinned threads (Drepper 3.5.1, 3.5.3)",
    .config_size = sizeof(bw_config),
    .params = bw_params,
    .setup = bw_setup,
    .measure = bw_measure,
    .teardown = bw_teardown,
};

/* ---- the "bandwidth_pass" family: one kernel over Python's buffers ------ */

typedef struct pass_config {
    int op;
    int width;
    int stores;
    ml_buffer src;
    ml_buffer dst;
    int64_t value;
    int64_t passes;
    int64_t chunk_bytes;
} pass_config;

/* The four ops, and "sum": the read's checking twin (ml_bw_sum_kernel). */
enum { PASS_SUM = ML_BW_OP_COUNT };
static const char *const pass_op_names[] = {"read", "write", "copy", "add", "sum", NULL};

static const ml_param pass_params[] = {
    {.name = "op", .kind = ML_PARAM_CHOICE, .offset = offsetof(pass_config, op), .choices = pass_op_names},
    {.name = "width", .kind = ML_PARAM_CHOICE, .offset = offsetof(pass_config, width),
     .choices = bw_width_choices},
    {.name = "stores", .kind = ML_PARAM_CHOICE, .offset = offsetof(pass_config, stores),
     .choices = ml_bw_stores_names},
    {.name = "src", .kind = ML_PARAM_BUFFER, .offset = offsetof(pass_config, src)},
    {.name = "dst", .kind = ML_PARAM_BUFFER, .offset = offsetof(pass_config, dst), .writable = 1},
    {.name = "value", .kind = ML_PARAM_INT, .offset = offsetof(pass_config, value), .min = INT64_MIN,
     .max = INT64_MAX},
    {.name = "passes", .kind = ML_PARAM_INT, .offset = offsetof(pass_config, passes), .min = 1,
     .max = 1ll << 40},
    {.name = "chunk_bytes", .kind = ML_PARAM_INT, .offset = offsetof(pass_config, chunk_bytes), .min = 0,
     .max = BW_MAX_BYTES},
    {0},
};

static int check_pass_buffer(const ml_buffer *b, const char *name, size_t expected, ml_error *err)
{
    if (b->bytes == 0 || b->bytes % ML_BW_LINE_BYTES)
        return ml_fail(err, ML_ERR_VALUE, 0, "%s holds %zu bytes; a positive multiple of %u is needed",
                       name, b->bytes, ML_BW_LINE_BYTES);
    if ((uintptr_t)b->data % ML_BW_LINE_BYTES)
        return ml_fail(err, ML_ERR_VALUE, 0, "%s must start on a %u-byte boundary (it starts at %p)",
                       name, ML_BW_LINE_BYTES, b->data);
    if (expected && b->bytes != expected)
        return ml_fail(err, ML_ERR_VALUE, 0, "%s holds %zu bytes; it must match src (%zu bytes)", name,
                       b->bytes, expected);
    return 0;
}

typedef struct pass_state {
    pass_config cfg;
    ml_bw_kernel kernel;
    ml_bw_width width;
} pass_state;

static int pass_setup(const void *config, void **state_out, ml_context *ctx, ml_error *err)
{
    (void)ctx;
    const pass_config *cfg = config;
    ml_bw_op op = cfg->op == PASS_SUM ? ML_BW_READ : (ml_bw_op)cfg->op;
    if (op != ML_BW_WRITE && check_pass_buffer(&cfg->src, "src", 0, err))
        return -1;
    if (op != ML_BW_READ &&
        check_pass_buffer(&cfg->dst, "dst", op == ML_BW_COPY || op == ML_BW_ADD ? cfg->src.bytes : 0, err))
        return -1;
    if (cfg->chunk_bytes % ML_BW_LINE_BYTES)
        return ml_fail(err, ML_ERR_VALUE, 0, "chunk_bytes=%lld must be a multiple of %u",
                       (long long)cfg->chunk_bytes, ML_BW_LINE_BYTES);
    pass_state *s = calloc(1, sizeof *s);
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for the pass state");
    s->cfg = *cfg;
    const char *why;
    if (resolve_width(cfg->width, &s->width, err)) {
        free(s);
        return -1;
    }
    s->kernel = ml_bw_kernel_for(op, s->width, (ml_bw_stores)cfg->stores, &why);
    if (s->kernel && cfg->op == PASS_SUM)
        s->kernel = ml_bw_sum_kernel(s->width);
    if (!s->kernel) {
        ml_fail(err, ML_ERR_VALUE, 0, "op=%s with stores=%s and width=%s: %s", pass_op_names[cfg->op],
                ml_bw_stores_names[cfg->stores], ml_bw_width_names[s->width], why);
        free(s);
        return -1;
    }
    *state_out = s;
    return 0;
}

static int pass_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    (void)ctx, (void)err;
    pass_state *s = state;
    const pass_config *cfg = &s->cfg;
    ml_bw_op op = cfg->op == PASS_SUM ? ML_BW_READ : (ml_bw_op)cfg->op;
    ml_bw_worker w = {
        .kernel = s->kernel,
        .src = op == ML_BW_WRITE ? NULL : cfg->src.data,
        .dst = op == ML_BW_READ ? NULL : cfg->dst.data,
        .bytes = op == ML_BW_WRITE ? cfg->dst.bytes : cfg->src.bytes,
        .value = (uint64_t)cfg->value,
        .cpu = -1,
    };
    w.max_bytes = (uint64_t)w.bytes * (uint64_t)cfg->passes;
    w.chunk_bytes = cfg->chunk_bytes ? (uint64_t)cfg->chunk_bytes : w.max_bytes;
    uint64_t start = ml_now_ns();
    ml_bw_worker_run_here(&w);
    out->elapsed_ns = ml_now_ns() - start;
    ml_counter_values_missing(&out->counters, 0);
    out->bytes = (double)w.bytes_done;
    out->units = (double)w.bytes_done;
    ml_metric_add(out, "sum_low32", (double)(w.sum & 0xffffffffu));
    ml_metric_add(out, "sum_high32", (double)(w.sum >> 32));
    ml_metric_add(out, "bytes_done", (double)w.bytes_done);
    ml_metric_add(out, "chunks", (double)w.chunks);
    ml_metric_add(out, "vector_bytes", (double)ml_bw_vector_bytes(s->width));
    return 0;
}

static void pass_teardown(void *state) { free(state); }

ML_FAMILY(bandwidth_pass) = {
    .name = "bandwidth_pass",
    .description = "one bandwidth kernel (op x width x stores, or the read's summing twin) over "
                   "buffers given by the caller",
    .config_size = sizeof(pass_config),
    .params = pass_params,
    .setup = pass_setup,
    .measure = pass_measure,
    .teardown = pass_teardown,
};
