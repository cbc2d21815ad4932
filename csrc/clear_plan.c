/* Which bytes each clear_order call covers, in order: the old kernel's
 * process_huge_page() order and the sequential, reverse and random orders
 * within each 2 MiB chunk.  Two helper families expose them so that
 * memlab.twins can check them: clear_kernel_order and clear_plan. */
#include "clear.h"

#include <errno.h>
#include <stdlib.h>

const char *const clear_order_names[] = {"sequential", "kernel", "reverse", "random", NULL};

/* ---- visiting orders -------------------------------------------------- */

/* The order of the kernel's process_huge_page() (before clear_contig_highpages
 * replaced it): the far end first, then left/right pairs converging on the
 * target subpage, which comes last so that its cache lines stay hot. */
static void clear_kernel_order(uint32_t *out, uint32_t n, uint32_t target)
{
    uint32_t k = 0, base, pairs;

    if (2 * (uint64_t)target <= n) {
        base = 0;
        pairs = target;
        for (uint32_t i = n; i-- > 2 * target;)
            out[k++] = i;
    } else {
        pairs = n - target;
        base = n - 2 * pairs;
        for (uint32_t i = 0; i < base; i++)
            out[k++] = i;
    }
    for (uint32_t i = 0; i < pairs; i++) {
        out[k++] = base + i;
        out[k++] = base + 2 * pairs - 1 - i;
    }
}

/* n units visited in the given order; random draws from *rng. */
static void clear_unit_order(uint32_t *out, uint32_t n, int order, uint32_t target, uint64_t *rng)
{
    switch (order) {
    case CLEAR_ORDER_KERNEL:
        clear_kernel_order(out, n, target);
        return;
    case CLEAR_ORDER_REVERSE:
        for (uint32_t i = 0; i < n; i++)
            out[i] = n - 1 - i;
        return;
    case CLEAR_ORDER_RANDOM:
        for (uint32_t i = 0; i < n; i++)
            out[i] = i;
        for (uint32_t i = n; i > 1; i--) {
            uint32_t j = (uint32_t)(ml_splitmix64(rng) % i);
            uint32_t swap = out[i - 1];
            out[i - 1] = out[j];
            out[j] = swap;
        }
        return;
    default:
        for (uint32_t i = 0; i < n; i++)
            out[i] = i;
        return;
    }
}

/* ---- the plan ------------------------------------------------------------- */

int clear_plan_check(const clear_plan_config *c, ml_error *err)
{
    if (c->region_bytes < CLEAR_MIN_REGION_BYTES)
        return ml_fail(err, ML_ERR_VALUE, 0, "region_bytes=%lld is below the minimum %lld",
                       (long long)c->region_bytes, (long long)CLEAR_MIN_REGION_BYTES);
    if (clear_check_multiple("region_bytes", c->region_bytes, (int64_t)CLEAR_CHUNK_BYTES,
                             "the 2 MiB chunk", err) < 0)
        return -1;
    if (clear_check_multiple("extent_bytes", c->extent_bytes, (int64_t)CLEAR_SUBPAGE_BYTES,
                             "the 4 KiB subpage", err) < 0)
        return -1;
    if (c->extent_bytes > c->region_bytes)
        return ml_fail(err, ML_ERR_VALUE, 0, "extent_bytes=%lld is larger than region_bytes=%lld",
                       (long long)c->extent_bytes, (long long)c->region_bytes);
    if (c->extent_bytes < (int64_t)CLEAR_CHUNK_BYTES && CLEAR_CHUNK_BYTES % (size_t)c->extent_bytes != 0)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "extent_bytes=%lld must divide the 2 MiB chunk (a power of two from 4096 to 2097152) "
                       "or be at least 2 MiB",
                       (long long)c->extent_bytes);
    if (c->target_subpage < 0 || c->target_subpage >= (int64_t)CLEAR_CHUNK_SUBPAGES)
        return ml_fail(err, ML_ERR_VALUE, 0, "target_subpage=%lld is outside the huge page [0, %zu]",
                       (long long)c->target_subpage, CLEAR_CHUNK_SUBPAGES - 1);
    return 0;
}

size_t clear_plan_calls(const clear_plan_config *c)
{
    size_t extent_bytes = (size_t)c->extent_bytes, region_bytes = (size_t)c->region_bytes;
    return (region_bytes + extent_bytes - 1) / extent_bytes;
}

/* Offsets of the clear calls.  Extents below 2 MiB split each chunk into
 * units visited in the chosen order (the target is the unit holding the
 * target subpage); chunks follow each other in address order, as the
 * kernel faults one huge page at a time.  Extents of 2 MiB and more cover
 * whole chunks, so there is nothing left to order: they go in address
 * order, the last call clearing what remains. */
int clear_plan_build(const clear_plan_config *c, uint64_t *offsets, ml_context *ctx, ml_error *err)
{
    size_t extent_bytes = (size_t)c->extent_bytes, region_bytes = (size_t)c->region_bytes;
    size_t calls = clear_plan_calls(c);

    if (extent_bytes >= CLEAR_CHUNK_BYTES) {
        for (size_t i = 0; i < calls; i++)
            offsets[i] = (uint64_t)(i * extent_bytes);
        return 0;
    }
    uint32_t units = (uint32_t)(CLEAR_CHUNK_BYTES / extent_bytes);
    uint32_t target = (uint32_t)((size_t)c->target_subpage * CLEAR_SUBPAGE_BYTES / extent_bytes);
    uint32_t *order = malloc(units * sizeof(*order));
    if (!order)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the visiting order");
    uint64_t rng = (uint64_t)c->seed;
    size_t k = 0;
    for (size_t chunk = 0; chunk < region_bytes; chunk += CLEAR_CHUNK_BYTES) {
        if ((chunk & ((64u << 20) - 1)) == 0 && ml_interrupted(ctx)) {
            free(order);
            return ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
        }
        clear_unit_order(order, units, c->order, target, &rng);
        for (uint32_t i = 0; i < units; i++)
            offsets[k++] = (uint64_t)(chunk + (size_t)order[i] * extent_bytes);
    }
    free(order);
    return 0;
}

/* ---- helper families: the orders, for Python to check ------------------- */

typedef struct clear_kernel_order_config {
    int64_t n_subpages;
    int64_t target;
    ml_buffer out; /* uint32 items, at least n_subpages of them */
} clear_kernel_order_config;

static const ml_param clear_kernel_order_params[] = {
    {.name = "n_subpages", .kind = ML_PARAM_INT, .offset = offsetof(clear_kernel_order_config, n_subpages),
     .min = 1, .max = (int64_t)1 << 30},
    {.name = "target", .kind = ML_PARAM_INT, .offset = offsetof(clear_kernel_order_config, target), .min = 0,
     .max = ((int64_t)1 << 30) - 1},
    {.name = "out", .kind = ML_PARAM_BUFFER, .offset = offsetof(clear_kernel_order_config, out), .writable = 1},
    {0},
};

static int clear_kernel_order_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    const clear_kernel_order_config *c = config;
    (void)ctx;
    if (c->target >= c->n_subpages)
        return ml_fail(err, ML_ERR_VALUE, 0, "target=%lld is outside the huge page [0, %lld]",
                       (long long)c->target, (long long)c->n_subpages - 1);
    if (ml_check_buffer(&c->out, "out", (size_t)c->n_subpages, sizeof(uint32_t), err) < 0)
        return -1;
    return ml_setup_copy_config(c, sizeof(*c), state, err);
}

static int clear_kernel_order_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    const clear_kernel_order_config *c = state;
    (void)ctx;
    (void)err;
    uint64_t start = ml_now_ns();
    clear_kernel_order(c->out.data, (uint32_t)c->n_subpages, (uint32_t)c->target);
    out->elapsed_ns = ml_now_ns() - start;
    out->units = (double)c->n_subpages;
    ml_counter_values_missing(&out->counters, 0);
    return 0;
}

static void clear_free_state(void *state)
{
    free(state);
}

ML_FAMILY(clear_kernel_order) = {
    .name = "clear_kernel_order",
    .description = "fill out with the old process_huge_page() subpage order for a target subpage",
    .config_size = sizeof(clear_kernel_order_config),
    .params = clear_kernel_order_params,
    .setup = clear_kernel_order_setup,
    .measure = clear_kernel_order_measure,
    .teardown = clear_free_state,
};

typedef struct clear_plan_family_config {
    clear_plan_config plan;
    ml_buffer out; /* uint64 items: the byte offset of every clear call */
} clear_plan_family_config;

static const ml_param clear_plan_params[] = {
    {.name = "region_bytes", .kind = ML_PARAM_INT,
     .offset = offsetof(clear_plan_family_config, plan.region_bytes), .min = CLEAR_MIN_REGION_BYTES,
     .max = CLEAR_MAX_REGION_BYTES},
    {.name = "order", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_plan_family_config, plan.order),
     .choices = clear_order_names},
    {.name = "extent_bytes", .kind = ML_PARAM_INT,
     .offset = offsetof(clear_plan_family_config, plan.extent_bytes), .min = (int64_t)CLEAR_SUBPAGE_BYTES,
     .max = CLEAR_MAX_REGION_BYTES},
    {.name = "target_subpage", .kind = ML_PARAM_INT,
     .offset = offsetof(clear_plan_family_config, plan.target_subpage), .min = 0,
     .max = (int64_t)CLEAR_CHUNK_SUBPAGES - 1},
    {.name = "seed", .kind = ML_PARAM_INT, .offset = offsetof(clear_plan_family_config, plan.seed), .min = 0,
     .max = INT64_MAX},
    {.name = "out", .kind = ML_PARAM_BUFFER, .offset = offsetof(clear_plan_family_config, out), .writable = 1},
    {0},
};

static int clear_plan_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    const clear_plan_family_config *c = config;
    (void)ctx;
    if (clear_plan_check(&c->plan, err) < 0)
        return -1;
    if (ml_check_buffer(&c->out, "out", clear_plan_calls(&c->plan), sizeof(uint64_t), err) < 0)
        return -1;
    return ml_setup_copy_config(c, sizeof(*c), state, err);
}

static int clear_plan_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    const clear_plan_family_config *c = state;
    uint64_t start = ml_now_ns();
    if (clear_plan_build(&c->plan, c->out.data, ctx, err) < 0)
        return -1;
    out->elapsed_ns = ml_now_ns() - start;
    out->units = (double)clear_plan_calls(&c->plan);
    ml_counter_values_missing(&out->counters, 0);
    ml_metric_add(out, "calls", (double)clear_plan_calls(&c->plan));
    return 0;
}

ML_FAMILY(clear_plan) = {
    .name = "clear_plan",
    .description = "fill out with the byte offset of every clear call clear_order makes, in order",
    .config_size = sizeof(clear_plan_family_config),
    .params = clear_plan_params,
    .setup = clear_plan_setup,
    .measure = clear_plan_measure,
    .teardown = clear_free_state,
};
