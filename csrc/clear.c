/* User-space re-clearing of a faulted region (clear_order): the 4 KiB
 * subpages of each 2 MiB chunk cleared in the order the old kernel used,
 * sequentially, in reverse or at random, with one of four store methods;
 * optionally against a baseline plan in the same sample. */
#include "clear.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CLEAR_DIRTY_BYTE 0xA5

/* "none" first, then the orders: index - 1 is the order. */
static const char *const clear_baseline_names[] = {"none", "sequential", "kernel", "reverse", "random", NULL};

typedef struct clear_order_config {
    int64_t region_bytes;
    int pages;
    int order;
    int method;
    int64_t extent_bytes;
    int64_t target_subpage;
    int64_t seed;
    int check;
    int baseline_order;
    int64_t baseline_extent_bytes;
    int strict_pages;
} clear_order_config;

/* A pass's calls in order, each with its start in the region and its length: built once the
 * region is mapped, so that a pass only walks the list (clear_method_calls). */
typedef struct clear_pass_plan {
    clear_call *list;
    size_t calls;
    size_t extent_bytes;
} clear_pass_plan;

typedef struct clear_order_state {
    clear_order_config config;
    ml_region region;
    int mapped;
    clear_pass_plan plan, baseline;
    clear_calls_fn run_calls;
    int store_bytes;
    uint64_t pass_ns; /* the last pass's duration, to size the next sample */
    double *group_ns_per_byte; /* scratch: one entry per group of a pass */
    ml_counters counters;
    int counters_open;
} clear_order_state;

static const ml_param clear_order_params[] = {
    {.name = "region_bytes", .kind = ML_PARAM_INT, .offset = offsetof(clear_order_config, region_bytes),
     .min = CLEAR_MIN_REGION_BYTES, .max = CLEAR_MAX_REGION_BYTES, ML_DEFAULT(1 << 30)},
    {.name = "pages", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_order_config, pages),
     .choices = ml_page_kind_names, ML_DEFAULT_CHOICE("thp")},
    {.name = "order", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_order_config, order),
     .choices = clear_order_names, ML_DEFAULT_CHOICE("sequential")},
    {.name = "method", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_order_config, method),
     .choices = clear_method_names, ML_DEFAULT_CHOICE("memset")},
    {.name = "extent_bytes", .kind = ML_PARAM_INT, .offset = offsetof(clear_order_config, extent_bytes),
     .min = (int64_t)CLEAR_SUBPAGE_BYTES, .max = CLEAR_MAX_REGION_BYTES, ML_DEFAULT(4096)},
    {.name = "target_subpage", .kind = ML_PARAM_INT, .offset = offsetof(clear_order_config, target_subpage),
     .min = 0, .max = (int64_t)CLEAR_CHUNK_SUBPAGES - 1, ML_DEFAULT(0)},
    {.name = "seed", .kind = ML_PARAM_INT, .offset = offsetof(clear_order_config, seed), .min = 0,
     .max = INT64_MAX, ML_DEFAULT(1)},
    {.name = "check", .kind = ML_PARAM_BOOL, .offset = offsetof(clear_order_config, check), ML_DEFAULT(0)},
    {.name = "baseline_order", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_order_config, baseline_order),
     .choices = clear_baseline_names, ML_DEFAULT_CHOICE("none")},
    {.name = "baseline_extent_bytes", .kind = ML_PARAM_INT,
     .offset = offsetof(clear_order_config, baseline_extent_bytes), .min = 0, .max = CLEAR_MAX_REGION_BYTES, ML_DEFAULT(0)},
    {.name = "strict_pages", .kind = ML_PARAM_BOOL, .offset = offsetof(clear_order_config, strict_pages), ML_DEFAULT(0)},
    {0},
};

static void clear_order_teardown(void *state);

/* The plan's calls over the region at base (region_bytes long; the last call of a region that is
 * not a multiple of the extent is shorter).  The caller has checked the plan (clear_plan_check). */
static int clear_pass_plan_build(clear_pass_plan *pass, const clear_plan_config *plan, char *base,
                                 ml_context *ctx, ml_error *err)
{
    pass->extent_bytes = (size_t)plan->extent_bytes;
    pass->calls = clear_plan_calls(plan);
    uint64_t *offsets = malloc(pass->calls * sizeof(*offsets));
    pass->list = malloc(pass->calls * sizeof(*pass->list));
    if (!offsets || !pass->list) {
        free(offsets);
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate a plan of %zu clear calls", pass->calls);
    }
    if (clear_plan_build(plan, offsets, ctx, err) < 0) {
        free(offsets);
        return -1;
    }
    size_t region_bytes = (size_t)plan->region_bytes;
    for (size_t i = 0; i < pass->calls; i++) {
        size_t offset = (size_t)offsets[i];
        pass->list[i].start = base + offset;
        pass->list[i].bytes = region_bytes - offset < pass->extent_bytes ? region_bytes - offset : pass->extent_bytes;
    }
    free(offsets);
    return 0;
}

/* Calls are timed in groups covering at least one 2 MiB chunk each. */
static size_t clear_group_calls(const clear_pass_plan *pass)
{
    return pass->extent_bytes >= CLEAR_CHUNK_BYTES ? 1 : CLEAR_CHUNK_BYTES / pass->extent_bytes;
}

static size_t clear_groups(const clear_pass_plan *pass)
{
    size_t per_group = clear_group_calls(pass);
    return (pass->calls + per_group - 1) / per_group;
}

/* The times of one pass: wall clock; the thread's CPU time (which leaves
 * out the time the thread was descheduled); and the median over the groups
 * of calls, in ns per byte, which also leaves out the groups during which
 * another process took the memory bus - as happens on a shared machine. */
typedef struct clear_pass_times {
    uint64_t wall_ns;
    uint64_t cpu_ns;
    double median_ns_per_byte;
} clear_pass_times;

static clear_pass_times clear_order_pass(const clear_order_state *s, const clear_pass_plan *pass)
{
    size_t per_group = clear_group_calls(pass), groups = 0;
    const clear_call *call = pass->list, *end = pass->list + pass->calls;
    clear_calls_fn run_calls = s->run_calls;
    clear_pass_times times;
    uint64_t cpu_start = ml_thread_cpu_ns();
    uint64_t start = ml_now_ns(), group_start = start;
    while (call < end) {
        const clear_call *group_end = (size_t)(end - call) > per_group ? call + per_group : end;
        size_t group_bytes = run_calls(call, group_end);
        uint64_t now = ml_now_ns();
        s->group_ns_per_byte[groups++] = (double)(now - group_start) / (double)group_bytes;
        group_start = now;
        call = group_end;
    }
    times.wall_ns = ml_now_ns() - start;
    times.cpu_ns = ml_thread_cpu_ns() - cpu_start;
    times.median_ns_per_byte = ml_median(s->group_ns_per_byte, groups);
    return times;
}

static int clear_order_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    const clear_order_config *c = config;
    clear_plan_config plan = {c->region_bytes, c->order, c->extent_bytes, c->target_subpage, c->seed};
    clear_plan_config baseline = plan;
    int store_bytes;
    clear_calls_fn run_calls = clear_method_calls(c->method, &store_bytes);

    if (!run_calls)
        return ml_fail(err, ML_ERR_VALUE, 0, "method=%s is not available on this CPU (x86-64 only)",
                       clear_method_names[c->method]);
    if (clear_plan_check(&plan, err) < 0)
        return -1;
    if (c->baseline_order == 0 && c->baseline_extent_bytes != 0)
        return ml_fail(err, ML_ERR_VALUE, 0, "baseline_extent_bytes=%lld needs a baseline_order",
                       (long long)c->baseline_extent_bytes);
    if (clear_check_multiple("region_bytes", c->region_bytes, (int64_t)ml_page_kind_bytes((ml_page_kind)c->pages),
                             c->pages == ML_PAGES_HUGETLB_1G ? "the 1 GiB page size" : "the page size", err) < 0)
        return -1;
    if (ml_check_memory((size_t)c->region_bytes, "region_bytes", err) < 0)
        return -1;

    clear_order_state *s = calloc(1, sizeof(*s));
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the clear_order state");
    s->config = *c;
    s->run_calls = run_calls;
    s->store_bytes = store_bytes;
    /* Both plans are checked before the region is mapped; their call lists need its address. */
    if (c->baseline_order > 0) {
        baseline.order = c->baseline_order - 1;
        if (c->baseline_extent_bytes > 0)
            baseline.extent_bytes = c->baseline_extent_bytes;
        if (clear_plan_check(&baseline, err) < 0) {
            if (err->code == ML_ERR_VALUE && strncmp(err->message, "extent_bytes", 12) == 0) {
                char message[ML_MESSAGE_MAX];
                memcpy(message, err->message, sizeof(message));
                ml_fail(err, ML_ERR_VALUE, 0, "baseline_%s", message);
            }
            goto error;
        }
    }
    if (ml_region_map(&s->region, (size_t)c->region_bytes, (ml_page_kind)c->pages, CLEAR_CHUNK_BYTES,
                      ML_POPULATE_TOUCH, !c->strict_pages, err) < 0)
        goto error;
    s->mapped = 1;
    if (clear_pass_plan_build(&s->plan, &plan, s->region.base, ctx, err) < 0)
        goto error;
    if (c->baseline_order > 0 && clear_pass_plan_build(&s->baseline, &baseline, s->region.base, ctx, err) < 0)
        goto error;
    size_t groups = clear_groups(&s->plan);
    if (s->baseline.list && clear_groups(&s->baseline) > groups)
        groups = clear_groups(&s->baseline);
    s->group_ns_per_byte = malloc(groups * sizeof(double));
    if (!s->group_ns_per_byte) {
        ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the timings of %zu groups", groups);
        goto error;
    }
    if (c->strict_pages && ml_region_require_requested(&s->region, ml_region_huge_bytes(&s->region), err) < 0)
        goto error;
    if (ml_interrupted(ctx))
        goto interrupted;
    memset(s->region.base, CLEAR_DIRTY_BYTE, s->region.bytes);
    if (ml_interrupted(ctx))
        goto interrupted;
    /* One untimed pass sizes the samples and leaves the caches as a pass does. */
    s->pass_ns = clear_order_pass(s, &s->plan).wall_ns;
    ml_counters_open(&s->counters, 0, 0);
    s->counters_open = 1;
    *state = s;
    return 0;

interrupted:
    ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
error:
    clear_order_teardown(s);
    return -1;
}

static size_t clear_count_nonzero_bytes(const char *base, size_t bytes)
{
    size_t nonzero = 0;
    const uint64_t *words = (const uint64_t *)base;
    for (size_t i = 0; i < bytes / 8; i++) {
        if (words[i] == 0)
            continue;
        for (int b = 0; b < 8; b++)
            nonzero += base[i * 8 + (size_t)b] != 0;
    }
    return nonzero;
}

/* Add one interval's counts to a running total. */
static void clear_counters_accumulate(ml_counter_values *total, const ml_counter_values *part, int first)
{
    if (first) {
        *total = *part;
        return;
    }
    for (int i = 0; i < ML_COUNTER_COUNT; i++) {
        total->value[i] += part->value[i];
        if (part->running_fraction[i] < total->running_fraction[i])
            total->running_fraction[i] = part->running_fraction[i];
    }
}

/* A sample: as many passes of the plan as fill the target time; with a
 * baseline, each pass is followed by a pass of the baseline plan, so that
 * both see the same machine within a fraction of a second and their ratio
 * stays steady while other work comes and goes.  The sample's counters cover
 * the plan's passes; the baseline's passes are counted apart and their cache
 * references and misses reported as baseline_cache_references and
 * baseline_cache_misses (where the PMU gives them), so that the LLC miss
 * ratio of both orders comes from one run. */
static int clear_order_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    clear_order_state *s = state;
    const clear_order_config *c = &s->config;
    uint64_t passes = 1, elapsed = 0, baseline_elapsed = 0, cpu = 0, baseline_cpu = 0;
    size_t nonzero = 0, baseline_nonzero = 0;
    double median_sum = 0, baseline_median_sum = 0;
    clear_pass_times times;
    ml_counter_values part, baseline_counters;
    memset(&baseline_counters, 0, sizeof baseline_counters);

    if (!c->check && ctx->target_ns > s->pass_ns && s->pass_ns > 0)
        passes = (ctx->target_ns + s->pass_ns / 2) / s->pass_ns;
    for (uint64_t i = 0; i < passes; i++) {
        if (c->check)
            memset(s->region.base, CLEAR_DIRTY_BYTE, s->region.bytes);
        if (ctx->counters)
            ml_counters_start(&s->counters);
        times = clear_order_pass(s, &s->plan);
        elapsed += times.wall_ns;
        cpu += times.cpu_ns;
        median_sum += times.median_ns_per_byte;
        if (ctx->counters) {
            ml_counters_stop(&s->counters);
            ml_counters_read(&s->counters, &part);
            clear_counters_accumulate(&out->counters, &part, i == 0);
        }
        if (c->check)
            nonzero += clear_count_nonzero_bytes(s->region.base, s->region.bytes);
        if (!s->baseline.list)
            continue;
        if (c->check)
            memset(s->region.base, CLEAR_DIRTY_BYTE, s->region.bytes);
        if (ctx->counters)
            ml_counters_start(&s->counters);
        times = clear_order_pass(s, &s->baseline);
        if (ctx->counters) {
            ml_counters_stop(&s->counters);
            ml_counters_read(&s->counters, &part);
            clear_counters_accumulate(&baseline_counters, &part, i == 0);
        }
        baseline_elapsed += times.wall_ns;
        baseline_cpu += times.cpu_ns;
        baseline_median_sum += times.median_ns_per_byte;
        if (c->check)
            baseline_nonzero += clear_count_nonzero_bytes(s->region.base, s->region.bytes);
    }
    if (!ctx->counters)
        ml_counter_values_missing(&out->counters, 0);
    s->pass_ns = elapsed / passes;

    out->elapsed_ns = elapsed;
    out->bytes = (double)passes * (double)s->region.bytes;
    out->units = out->bytes / (double)CLEAR_SUBPAGE_BYTES;
    ml_metric_add(out, "passes", (double)passes);
    ml_metric_add(out, "calls_per_pass", (double)s->plan.calls);
    ml_metric_add(out, "store_bytes", (double)s->store_bytes);
    double median_rate = (double)passes / median_sum;
    double cpu_rate = cpu ? out->bytes / (double)cpu : -1.0;
    ml_metric_add(out, "median_chunk_GB_per_s", median_rate);
    ml_metric_add(out, "cpu_GB_per_s", cpu_rate);
    if (c->check)
        ml_metric_add(out, "nonzero_bytes", (double)nonzero);
    if (s->baseline.list) {
        double rate = out->bytes / (double)elapsed;
        double baseline_rate = out->bytes / (double)baseline_elapsed;
        ml_metric_add(out, "baseline_GB_per_s", baseline_rate);
        ml_metric_add(out, "ratio_to_baseline", rate / baseline_rate);
        double baseline_median_rate = (double)passes / baseline_median_sum;
        ml_metric_add(out, "baseline_median_chunk_GB_per_s", baseline_median_rate);
        ml_metric_add(out, "median_chunk_ratio_to_baseline", median_rate / baseline_median_rate);
        double baseline_cpu_rate = baseline_cpu ? out->bytes / (double)baseline_cpu : -1.0;
        ml_metric_add(out, "baseline_cpu_GB_per_s", baseline_cpu_rate);
        ml_metric_add(out, "cpu_ratio_to_baseline", cpu && baseline_cpu ? cpu_rate / baseline_cpu_rate : -1.0);
        if (c->check)
            ml_metric_add(out, "baseline_nonzero_bytes", (double)baseline_nonzero);
        if (ctx->counters && baseline_counters.present[ML_COUNTER_CACHE_REFERENCES] &&
            baseline_counters.present[ML_COUNTER_CACHE_MISSES]) {
            ml_metric_add(out, "baseline_cache_references", baseline_counters.value[ML_COUNTER_CACHE_REFERENCES]);
            ml_metric_add(out, "baseline_cache_misses", baseline_counters.value[ML_COUNTER_CACHE_MISSES]);
        }
    }
    clear_add_huge_coverage(out, &s->region, ml_region_huge_bytes(&s->region));
    ML_CHECK_INTERRUPT(ctx, err);
    return 0;
}

static void clear_order_teardown(void *state)
{
    clear_order_state *s = state;
    if (!s)
        return;
    if (s->counters_open)
        ml_counters_close(&s->counters);
    if (s->mapped)
        ml_region_unmap(&s->region);
    free(s->plan.list);
    free(s->baseline.list);
    free(s->group_ns_per_byte);
    free(s);
}

ML_FAMILY(clear_order) = {
    .name = "clear_order",
    .description = "user-space re-clearing of a faulted region, subpage by subpage in a chosen order",
    .config_size = sizeof(clear_order_config),
    .params = clear_order_params,
    .setup = clear_order_setup,
    .measure = clear_order_measure,
    .teardown = clear_order_teardown,
};
