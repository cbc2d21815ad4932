/* Page clearing's shared parts, private to clear*.c: sizes, the visiting
 * orders and the plan of clear calls (clear_plan.c), the store methods
 * (clear_store.c) and two small checks.  The families: clear_fault
 * (clear_fault.c), clear_order (clear.c), and clear_kernel_order and
 * clear_plan (clear_plan.c), which expose the orders to Python's twins. */
#ifndef MEMLAB_CLEAR_H
#define MEMLAB_CLEAR_H

#include "memlab.h"

#define CLEAR_SUBPAGE_BYTES ((size_t)4096)
#define CLEAR_CHUNK_BYTES ((size_t)2 << 20)
#define CLEAR_CHUNK_SUBPAGES (CLEAR_CHUNK_BYTES / CLEAR_SUBPAGE_BYTES)
#define CLEAR_MIN_REGION_BYTES ((int64_t)CLEAR_CHUNK_BYTES)
#define CLEAR_MAX_REGION_BYTES ((int64_t)1 << 40)

/* ---- visiting orders and the plan (clear_plan.c) ----------------------- */

enum { CLEAR_ORDER_SEQUENTIAL, CLEAR_ORDER_KERNEL, CLEAR_ORDER_REVERSE, CLEAR_ORDER_RANDOM };
extern const char *const clear_order_names[];

typedef struct clear_plan_config {
    int64_t region_bytes;
    int order;
    int64_t extent_bytes;
    int64_t target_subpage;
    int64_t seed;
} clear_plan_config;

int clear_plan_check(const clear_plan_config *c, ml_error *err);
/* How many clear calls the plan makes. */
size_t clear_plan_calls(const clear_plan_config *c);
/* The byte offset of every clear call, in order (clear_plan_calls of them). */
int clear_plan_build(const clear_plan_config *c, uint64_t *offsets, ml_context *ctx, ml_error *err);

/* ---- store methods (clear_store.c) ------------------------------------- */

enum { CLEAR_METHOD_MEMSET, CLEAR_METHOD_REP_STOSB, CLEAR_METHOD_VECTOR, CLEAR_METHOD_NONTEMPORAL };
extern const char *const clear_method_names[];

/* One clear call of a pass: where it starts and how many bytes it clears. */
typedef struct clear_call {
    char *start;
    size_t bytes;
} clear_call;

/* Clears with one method call by call, [call, end), and returns the bytes cleared. */
typedef size_t (*clear_calls_fn)(const clear_call *call, const clear_call *end);

/* The call loop for a method on this CPU and the width of its stores in
 * bytes; NULL when the CPU has no such instructions.  Every call it is
 * given is a multiple of 4 KiB at a 4 KiB boundary. */
clear_calls_fn clear_method_calls(int method, int *store_bytes);

/* ---- small checks ------------------------------------------------------- */

static inline int clear_check_multiple(const char *name, int64_t value, int64_t unit,
                                       const char *unit_name, ml_error *err)
{
    if (value % unit != 0)
        return ml_fail(err, ML_ERR_VALUE, 0, "%s=%lld is not a multiple of %s (%lld bytes)", name,
                       (long long)value, unit_name, (long long)unit);
    return 0;
}

/* The region's huge-page coverage (huge_bytes: ml_region_huge_bytes) as
 * metrics, and what it asked for and got as facts. */
static inline void clear_add_huge_coverage(ml_measurement *out, const ml_region *region, int64_t huge)
{
    ml_metric_add(out, "huge_bytes", (double)huge);
    ml_metric_add(out, "huge_fraction", huge < 0 ? -1.0 : (double)huge / (double)region->bytes);
    ml_metric_add(out, "granted_page_bytes", (double)region->page_bytes);
    ml_region_facts(out, region, huge);
}

#endif
