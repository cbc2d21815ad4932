/* Page clearing: the kernel zeroing pages on first touch (clear_fault), and
 * user-space re-clearing of a faulted region in 4 KiB subpages of each 2 MiB
 * chunk, in the order the old kernel used or sequentially, with one of four
 * store methods (clear_order).  Two helper families expose the visiting
 * orders so that Python can check them (clear_kernel_order, clear_plan). */
#include "memlab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define CLEAR_SUBPAGE_BYTES ((size_t)4096)
#define CLEAR_CHUNK_BYTES ((size_t)2 << 20)
#define CLEAR_CHUNK_SUBPAGES (CLEAR_CHUNK_BYTES / CLEAR_SUBPAGE_BYTES)
#define CLEAR_MIN_REGION_BYTES ((int64_t)CLEAR_CHUNK_BYTES)
#define CLEAR_MAX_REGION_BYTES ((int64_t)1 << 40)
#define CLEAR_DIRTY_BYTE 0xA5

/* ---- visiting orders -------------------------------------------------- */

enum { ORDER_SEQUENTIAL, ORDER_KERNEL, ORDER_REVERSE, ORDER_RANDOM };
static const char *const clear_order_names[] = {"sequential", "kernel", "reverse", "random", NULL};

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

static uint64_t clear_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* n units visited in the given order; random draws from *rng. */
static void clear_unit_order(uint32_t *out, uint32_t n, int order, uint32_t target, uint64_t *rng)
{
    switch (order) {
    case ORDER_KERNEL:
        clear_kernel_order(out, n, target);
        return;
    case ORDER_REVERSE:
        for (uint32_t i = 0; i < n; i++)
            out[i] = n - 1 - i;
        return;
    case ORDER_RANDOM:
        for (uint32_t i = 0; i < n; i++)
            out[i] = i;
        for (uint32_t i = n; i > 1; i--) {
            uint32_t j = (uint32_t)(clear_splitmix64(rng) % i);
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

/* ---- store methods ----------------------------------------------------- */

enum { METHOD_MEMSET, METHOD_REP_STOSB, METHOD_VECTOR, METHOD_NONTEMPORAL };
static const char *const clear_method_names[] = {"memset", "rep_stosb", "vector", "nontemporal", NULL};

typedef void (*clear_fn)(void *dst, size_t bytes);

/* Every extent is a multiple of 4 KiB at a 4 KiB boundary, so the vector
 * loops below need neither a head nor a tail. */
#define CLEAR_LOOP_BYTES 256

static void clear_with_memset(void *dst, size_t bytes)
{
    memset(dst, 0, bytes);
}

#if defined(__x86_64__)
static void clear_with_rep_stosb(void *dst, size_t bytes)
{
    __asm__ volatile("rep stosb" : "+D"(dst), "+c"(bytes) : "a"(0) : "memory");
}

/* The zero vector is laundered through an empty asm so that GCC cannot
 * recognise the loop as a memset and call libc instead. */
__attribute__((target("avx512f"))) static void clear_with_avx512(void *dst, size_t bytes)
{
    __m512i zero = _mm512_setzero_si512();
    __asm__("" : "+v"(zero));
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES) {
        _mm512_store_si512((void *)p, zero);
        _mm512_store_si512((void *)(p + 64), zero);
        _mm512_store_si512((void *)(p + 128), zero);
        _mm512_store_si512((void *)(p + 192), zero);
    }
}

__attribute__((target("avx512f"))) static void clear_with_avx512_stream(void *dst, size_t bytes)
{
    __m512i zero = _mm512_setzero_si512();
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES) {
        _mm512_stream_si512((void *)p, zero);
        _mm512_stream_si512((void *)(p + 64), zero);
        _mm512_stream_si512((void *)(p + 128), zero);
        _mm512_stream_si512((void *)(p + 192), zero);
    }
    _mm_sfence();
}

__attribute__((target("avx2"))) static void clear_with_avx2(void *dst, size_t bytes)
{
    __m256i zero = _mm256_setzero_si256();
    __asm__("" : "+x"(zero));
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES) {
        for (int i = 0; i < CLEAR_LOOP_BYTES; i += 32)
            _mm256_store_si256((__m256i *)(p + i), zero);
    }
}

__attribute__((target("avx2"))) static void clear_with_avx2_stream(void *dst, size_t bytes)
{
    __m256i zero = _mm256_setzero_si256();
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES) {
        for (int i = 0; i < CLEAR_LOOP_BYTES; i += 32)
            _mm256_stream_si256((__m256i *)(p + i), zero);
    }
    _mm_sfence();
}

static void clear_with_sse2(void *dst, size_t bytes)
{
    __m128i zero = _mm_setzero_si128();
    __asm__("" : "+x"(zero));
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES) {
        for (int i = 0; i < CLEAR_LOOP_BYTES; i += 16)
            _mm_store_si128((__m128i *)(p + i), zero);
    }
}

static void clear_with_sse2_stream(void *dst, size_t bytes)
{
    __m128i zero = _mm_setzero_si128();
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES) {
        for (int i = 0; i < CLEAR_LOOP_BYTES; i += 16)
            _mm_stream_si128((__m128i *)(p + i), zero);
    }
    _mm_sfence();
}
#endif

/* The function for a method on this CPU and the width of its stores in
 * bytes; NULL when the CPU has no such instructions. */
static clear_fn clear_method_function(int method, int *store_bytes)
{
    *store_bytes = 0;
    if (method == METHOD_MEMSET)
        return clear_with_memset;
#if defined(__x86_64__)
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f");
    int avx2 = __builtin_cpu_supports("avx2");
    switch (method) {
    case METHOD_REP_STOSB:
        *store_bytes = 1;
        return clear_with_rep_stosb;
    case METHOD_VECTOR:
        *store_bytes = avx512 ? 64 : avx2 ? 32 : 16;
        return avx512 ? clear_with_avx512 : avx2 ? clear_with_avx2 : clear_with_sse2;
    case METHOD_NONTEMPORAL:
        *store_bytes = avx512 ? 64 : avx2 ? 32 : 16;
        return avx512 ? clear_with_avx512_stream : avx2 ? clear_with_avx2_stream : clear_with_sse2_stream;
    }
#endif
    return NULL;
}

/* ---- shared helpers ----------------------------------------------------- */

static int clear_check_multiple(const char *name, int64_t value, int64_t unit, const char *unit_name,
                                ml_error *err)
{
    if (value % unit != 0)
        return ml_fail(err, ML_ERR_VALUE, 0, "%s=%lld is not a multiple of %s (%lld bytes)", name,
                       (long long)value, unit_name, (long long)unit);
    return 0;
}

static size_t clear_page_bytes(int kind)
{
    switch (kind) {
    case ML_PAGES_THP:
    case ML_PAGES_HUGETLB_2M:
        return (size_t)2 << 20;
    case ML_PAGES_HUGETLB_1G:
        return (size_t)1 << 30;
    default:
        return CLEAR_SUBPAGE_BYTES;
    }
}

static double clear_rusage_minor_faults(void)
{
    struct rusage usage;
#ifdef RUSAGE_THREAD
    if (getrusage(RUSAGE_THREAD, &usage) != 0)
#else
    if (getrusage(RUSAGE_SELF, &usage) != 0)
#endif
        return -1.0;
    return (double)usage.ru_minflt;
}

static double clear_counter(const ml_counter_values *values, ml_counter_id id)
{
    return values->present[id] ? values->value[id] : -1.0;
}

static void clear_add_huge_coverage(ml_measurement *out, const ml_region *region)
{
    int64_t huge = ml_region_huge_bytes(region);
    ml_metric_add(out, "huge_bytes", (double)huge);
    ml_metric_add(out, "huge_fraction", huge < 0 ? -1.0 : (double)huge / (double)region->bytes);
    ml_metric_add(out, "granted_page_bytes", (double)region->page_bytes);
}

static uint64_t clear_thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleep for seconds, waking every 50 ms to honour Ctrl-C. */
static int clear_pause(double seconds, ml_context *ctx, ml_error *err)
{
    uint64_t end = ml_now_ns() + (uint64_t)(seconds * 1e9);
    for (;;) {
        uint64_t now = ml_now_ns();
        if (now >= end)
            return 0;
        uint64_t step = end - now < 50000000u ? end - now : 50000000u;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)step};
        nanosleep(&ts, NULL);
        ML_CHECK_INTERRUPT(ctx, err);
    }
}

/* ---- clear_fault: the kernel zeroing pages on first touch ---------------- */

static const char *const clear_fault_populate_names[] = {"touch", "map_populate", "madvise_populate_write",
                                                         NULL};
static const ml_populate clear_fault_populate_modes[] = {ML_POPULATE_TOUCH, ML_POPULATE_MAP_POPULATE,
                                                         ML_POPULATE_MADVISE_WRITE};

enum { TOUCH_FIRST, TOUCH_MIDDLE, TOUCH_LAST };
static const char *const clear_touch_offset_names[] = {"first", "middle", "last", NULL};

typedef struct clear_fault_config {
    int64_t region_bytes;
    int pages;
    int populate;
    int touch_offset;
    double pause_s;
    int strict;
} clear_fault_config;

typedef struct clear_fault_state {
    clear_fault_config config;
    ml_counters counters;
    uint64_t last_unmap_ns;
} clear_fault_state;

static const ml_param clear_fault_params[] = {
    {.name = "region_bytes", .kind = ML_PARAM_INT, .offset = offsetof(clear_fault_config, region_bytes),
     .min = (int64_t)CLEAR_SUBPAGE_BYTES, .max = CLEAR_MAX_REGION_BYTES},
    {.name = "pages", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_fault_config, pages),
     .choices = ml_page_kind_names},
    {.name = "populate", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_fault_config, populate),
     .choices = clear_fault_populate_names},
    {.name = "touch_offset", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_fault_config, touch_offset),
     .choices = clear_touch_offset_names},
    {.name = "pause_s", .kind = ML_PARAM_DOUBLE, .offset = offsetof(clear_fault_config, pause_s),
     .min_double = 0.0, .max_double = 3600.0},
    {.name = "strict", .kind = ML_PARAM_BOOL, .offset = offsetof(clear_fault_config, strict)},
    {0},
};

static int clear_fault_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    const clear_fault_config *c = config;
    size_t page_bytes = clear_page_bytes(c->pages);
    (void)ctx;

    if (clear_check_multiple("region_bytes", c->region_bytes, (int64_t)page_bytes,
                             c->pages == ML_PAGES_4K ? "the 4 KiB page size"
                             : c->pages == ML_PAGES_HUGETLB_1G ? "the 1 GiB page size"
                                                               : "the 2 MiB page size",
                             err) < 0)
        return -1;
    if (ml_check_memory((size_t)c->region_bytes, "region_bytes", err) < 0)
        return -1;
    clear_fault_state *s = calloc(1, sizeof(*s));
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the clear_fault state");
    s->config = *c;
    ml_counters_open(&s->counters, 0, 0);
    s->last_unmap_ns = ml_now_ns();
    *state = s;
    return 0;
}

/* Bytes of the region resident in memory (mincore), -1 if unknown: a THP
 * touch that got no huge page makes only 4 KiB of its 2 MiB usable. */
static int64_t clear_resident_bytes(const ml_region *region)
{
    size_t pages = (region->bytes + CLEAR_SUBPAGE_BYTES - 1) / CLEAR_SUBPAGE_BYTES;
    unsigned char *resident = malloc(pages);
    if (!resident)
        return -1;
    int64_t total = -1;
    if (mincore(region->base, region->bytes, resident) == 0) {
        total = 0;
        for (size_t i = 0; i < pages; i++)
            total += resident[i] & 1;
        total *= (int64_t)CLEAR_SUBPAGE_BYTES;
    }
    free(resident);
    return total;
}

/* One write per page of the granted size, at the chosen subpage of each. */
static void clear_fault_touch(const ml_region *region, int touch_offset)
{
    size_t page = region->page_bytes;
    size_t offset = 0;
    if (page > CLEAR_SUBPAGE_BYTES && touch_offset == TOUCH_MIDDLE)
        offset = page / 2;
    else if (page > CLEAR_SUBPAGE_BYTES && touch_offset == TOUCH_LAST)
        offset = page - CLEAR_SUBPAGE_BYTES;
    volatile char *base = region->base;
    for (size_t at = offset; at < region->bytes; at += page)
        base[at] = 1;
}

static int clear_fault_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    clear_fault_state *s = state;
    const clear_fault_config *c = &s->config;
    ml_populate mode = clear_fault_populate_modes[c->populate];
    ml_region region;
    ml_counter_values counts;
    uint64_t start, end, cpu_start, cpu_end;
    double rusage_before, rusage_after;

    if (clear_pause(c->pause_s, ctx, err) < 0)
        return -1;
    double pause_before_s = (double)(ml_now_ns() - s->last_unmap_ns) / 1e9;

    if (mode == ML_POPULATE_MAP_POPULATE) {
        /* The population happens inside mmap(), so the mapping is timed. */
        ml_counters_start(&s->counters);
        rusage_before = clear_rusage_minor_faults();
        cpu_start = clear_thread_cpu_ns();
        start = ml_now_ns();
        if (ml_region_map(&region, (size_t)c->region_bytes, (ml_page_kind)c->pages, 0, mode, !c->strict,
                          err) < 0) {
            ml_counters_stop(&s->counters);
            return -1;
        }
        end = ml_now_ns();
    } else {
        if (ml_region_map(&region, (size_t)c->region_bytes, (ml_page_kind)c->pages, 0, ML_POPULATE_NONE,
                          !c->strict, err) < 0)
            return -1;
        ml_counters_start(&s->counters);
        rusage_before = clear_rusage_minor_faults();
        cpu_start = clear_thread_cpu_ns();
        start = ml_now_ns();
        if (mode == ML_POPULATE_TOUCH) {
            clear_fault_touch(&region, c->touch_offset);
        } else if (ml_region_populate(&region, mode, err) < 0) {
            ml_counters_stop(&s->counters);
            ml_region_unmap(&region);
            return -1;
        }
        end = ml_now_ns();
    }
    cpu_end = clear_thread_cpu_ns();
    rusage_after = clear_rusage_minor_faults();
    ml_counters_stop(&s->counters);
    ml_counters_read(&s->counters, &counts);

    double trap_faults = clear_counter(&counts, ML_COUNTER_PAGE_FAULTS);
    double handled = rusage_before < 0 || rusage_after < 0 ? -1.0 : rusage_after - rusage_before;
    int64_t resident = clear_resident_bytes(&region);
    out->elapsed_ns = end - start;
    out->bytes = resident >= 0 ? (double)resident : (double)c->region_bytes;
    out->units = handled > 0 ? handled : 0.0;
    if (ctx->counters)
        out->counters = counts;
    else
        ml_counter_values_missing(&out->counters, 0);
    ml_metric_add(out, "page_faults", trap_faults);
    ml_metric_add(out, "faults_handled", handled);
    ml_metric_add(out, "pause_before_s", pause_before_s);
    ml_metric_add(out, "cpu_GB_per_s", cpu_end > cpu_start ? out->bytes / (double)(cpu_end - cpu_start) : -1.0);
    ml_metric_add(out, "resident_fraction", resident >= 0 ? (double)resident / (double)c->region_bytes : -1.0);
    ml_metric_add(out, "region_populate_ns", (double)region.populate_ns);
    clear_add_huge_coverage(out, &region);

    ml_region_unmap(&region);
    s->last_unmap_ns = ml_now_ns();
    return 0;
}

static void clear_fault_teardown(void *state)
{
    clear_fault_state *s = state;
    if (!s)
        return;
    ml_counters_close(&s->counters);
    free(s);
}

const ml_family ml_family_clear_fault = {
    .name = "clear_fault",
    .description = "kernel zeroing on first touch: map a fresh region per sample and time its population",
    .config_size = sizeof(clear_fault_config),
    .params = clear_fault_params,
    .setup = clear_fault_setup,
    .measure = clear_fault_measure,
    .teardown = clear_fault_teardown,
};

/* ---- the plan: which bytes each clear call covers, in order ------------- */

typedef struct clear_plan_config {
    int64_t region_bytes;
    int order;
    int64_t extent_bytes;
    int64_t target_subpage;
    int64_t seed;
} clear_plan_config;

static int clear_plan_check(const clear_plan_config *c, ml_error *err)
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

static size_t clear_plan_calls(const clear_plan_config *c)
{
    size_t extent = (size_t)c->extent_bytes, region = (size_t)c->region_bytes;
    return (region + extent - 1) / extent;
}

/* Offsets of the clear calls.  Extents below 2 MiB split each chunk into
 * units visited in the chosen order (the target is the unit holding the
 * target subpage); chunks follow each other in address order, as the
 * kernel faults one huge page at a time.  Extents of 2 MiB and more cover
 * whole chunks, so there is nothing left to order: they go in address
 * order, the last call clearing what remains. */
static int clear_plan_build(const clear_plan_config *c, uint64_t *offsets, ml_context *ctx, ml_error *err)
{
    size_t extent = (size_t)c->extent_bytes, region = (size_t)c->region_bytes;
    size_t calls = clear_plan_calls(c);

    if (extent >= CLEAR_CHUNK_BYTES) {
        for (size_t i = 0; i < calls; i++)
            offsets[i] = (uint64_t)(i * extent);
        return 0;
    }
    uint32_t units = (uint32_t)(CLEAR_CHUNK_BYTES / extent);
    uint32_t target = (uint32_t)((size_t)c->target_subpage * CLEAR_SUBPAGE_BYTES / extent);
    uint32_t *order = malloc(units * sizeof(*order));
    if (!order)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the visiting order");
    uint64_t rng = (uint64_t)c->seed;
    size_t k = 0;
    for (size_t chunk = 0; chunk < region; chunk += CLEAR_CHUNK_BYTES) {
        if ((chunk & ((64u << 20) - 1)) == 0 && ml_interrupted(ctx)) {
            free(order);
            return ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
        }
        clear_unit_order(order, units, c->order, target, &rng);
        for (uint32_t i = 0; i < units; i++)
            offsets[k++] = (uint64_t)(chunk + (size_t)order[i] * extent);
    }
    free(order);
    return 0;
}

/* ---- clear_order: user-space re-clearing of a faulted region ------------ */

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
} clear_order_config;

typedef struct clear_pass_plan {
    uint64_t *offsets;
    size_t calls;
    size_t extent;
} clear_pass_plan;

typedef struct clear_order_state {
    clear_order_config config;
    ml_region region;
    int mapped;
    clear_pass_plan plan, baseline;
    clear_fn clear;
    int store_bytes;
    uint64_t pass_ns; /* the last pass's duration, to size the next sample */
    double *group_ns_per_byte; /* scratch: one entry per group of a pass */
    ml_counters counters;
    int counters_open;
} clear_order_state;

static const ml_param clear_order_params[] = {
    {.name = "region_bytes", .kind = ML_PARAM_INT, .offset = offsetof(clear_order_config, region_bytes),
     .min = CLEAR_MIN_REGION_BYTES, .max = CLEAR_MAX_REGION_BYTES},
    {.name = "pages", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_order_config, pages),
     .choices = ml_page_kind_names},
    {.name = "order", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_order_config, order),
     .choices = clear_order_names},
    {.name = "method", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_order_config, method),
     .choices = clear_method_names},
    {.name = "extent_bytes", .kind = ML_PARAM_INT, .offset = offsetof(clear_order_config, extent_bytes),
     .min = (int64_t)CLEAR_SUBPAGE_BYTES, .max = CLEAR_MAX_REGION_BYTES},
    {.name = "target_subpage", .kind = ML_PARAM_INT, .offset = offsetof(clear_order_config, target_subpage),
     .min = 0, .max = (int64_t)CLEAR_CHUNK_SUBPAGES - 1},
    {.name = "seed", .kind = ML_PARAM_INT, .offset = offsetof(clear_order_config, seed), .min = 0,
     .max = INT64_MAX},
    {.name = "check", .kind = ML_PARAM_BOOL, .offset = offsetof(clear_order_config, check)},
    {.name = "baseline_order", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_order_config, baseline_order),
     .choices = clear_baseline_names},
    {.name = "baseline_extent_bytes", .kind = ML_PARAM_INT,
     .offset = offsetof(clear_order_config, baseline_extent_bytes), .min = 0, .max = CLEAR_MAX_REGION_BYTES},
    {0},
};

static void clear_order_teardown(void *state);

static int clear_pass_plan_build(clear_pass_plan *pass, const clear_plan_config *plan, ml_context *ctx,
                                 ml_error *err)
{
    if (clear_plan_check(plan, err) < 0)
        return -1;
    pass->extent = (size_t)plan->extent_bytes;
    pass->calls = clear_plan_calls(plan);
    pass->offsets = malloc(pass->calls * sizeof(*pass->offsets));
    if (!pass->offsets)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate a plan of %zu clear calls", pass->calls);
    return clear_plan_build(plan, pass->offsets, ctx, err);
}

/* Calls are timed in groups covering at least one 2 MiB chunk each. */
static size_t clear_group_calls(const clear_pass_plan *pass)
{
    return pass->extent >= CLEAR_CHUNK_BYTES ? 1 : CLEAR_CHUNK_BYTES / pass->extent;
}

static size_t clear_groups(const clear_pass_plan *pass)
{
    size_t per_group = clear_group_calls(pass);
    return (pass->calls + per_group - 1) / per_group;
}

static int clear_compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
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
    char *base = s->region.base;
    size_t extent = pass->extent, region = s->region.bytes, per_group = clear_group_calls(pass);
    size_t groups = 0;
    clear_fn clear = s->clear;
    clear_pass_times times;
    uint64_t cpu_start = clear_thread_cpu_ns();
    uint64_t start = ml_now_ns(), group_start = start;
    size_t group_bytes = 0;
    for (size_t i = 0; i < pass->calls; i++) {
        size_t offset = (size_t)pass->offsets[i];
        size_t bytes = region - offset < extent ? region - offset : extent;
        clear(base + offset, bytes);
        group_bytes += bytes;
        if ((i + 1) % per_group == 0 || i + 1 == pass->calls) {
            uint64_t now = ml_now_ns();
            s->group_ns_per_byte[groups++] = (double)(now - group_start) / (double)group_bytes;
            group_start = now;
            group_bytes = 0;
        }
    }
    times.wall_ns = ml_now_ns() - start;
    times.cpu_ns = clear_thread_cpu_ns() - cpu_start;
    qsort(s->group_ns_per_byte, groups, sizeof(double), clear_compare_doubles);
    times.median_ns_per_byte = groups % 2 ? s->group_ns_per_byte[groups / 2]
                                          : (s->group_ns_per_byte[groups / 2 - 1] + s->group_ns_per_byte[groups / 2]) / 2;
    return times;
}

static int clear_order_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    const clear_order_config *c = config;
    clear_plan_config plan = {c->region_bytes, c->order, c->extent_bytes, c->target_subpage, c->seed};
    int store_bytes;
    clear_fn clear = clear_method_function(c->method, &store_bytes);

    if (!clear)
        return ml_fail(err, ML_ERR_VALUE, 0, "method=%s is not available on this CPU (x86-64 only)",
                       clear_method_names[c->method]);
    if (clear_plan_check(&plan, err) < 0)
        return -1;
    if (c->baseline_order == 0 && c->baseline_extent_bytes != 0)
        return ml_fail(err, ML_ERR_VALUE, 0, "baseline_extent_bytes=%lld needs a baseline_order",
                       (long long)c->baseline_extent_bytes);
    if (clear_check_multiple("region_bytes", c->region_bytes, (int64_t)clear_page_bytes(c->pages),
                             c->pages == ML_PAGES_HUGETLB_1G ? "the 1 GiB page size" : "the page size", err) < 0)
        return -1;
    if (ml_check_memory((size_t)c->region_bytes, "region_bytes", err) < 0)
        return -1;

    clear_order_state *s = calloc(1, sizeof(*s));
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the clear_order state");
    s->config = *c;
    s->clear = clear;
    s->store_bytes = store_bytes;
    if (clear_pass_plan_build(&s->plan, &plan, ctx, err) < 0)
        goto error;
    if (c->baseline_order > 0) {
        clear_plan_config baseline = plan;
        baseline.order = c->baseline_order - 1;
        if (c->baseline_extent_bytes > 0)
            baseline.extent_bytes = c->baseline_extent_bytes;
        if (clear_pass_plan_build(&s->baseline, &baseline, ctx, err) < 0) {
            if (err->code == ML_ERR_VALUE && strncmp(err->message, "extent_bytes", 12) == 0) {
                char message[ML_MESSAGE_MAX];
                memcpy(message, err->message, sizeof(message));
                ml_fail(err, ML_ERR_VALUE, 0, "baseline_%s", message);
            }
            goto error;
        }
    }
    size_t groups = clear_groups(&s->plan);
    if (s->baseline.offsets && clear_groups(&s->baseline) > groups)
        groups = clear_groups(&s->baseline);
    s->group_ns_per_byte = malloc(groups * sizeof(double));
    if (!s->group_ns_per_byte) {
        ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the timings of %zu groups", groups);
        goto error;
    }
    if (ml_region_map(&s->region, (size_t)c->region_bytes, (ml_page_kind)c->pages, CLEAR_CHUNK_BYTES,
                      ML_POPULATE_TOUCH, 1, err) < 0)
        goto error;
    s->mapped = 1;
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
 * stays steady while other work comes and goes.  Counters cover the plan's
 * passes only. */
static int clear_order_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    clear_order_state *s = state;
    const clear_order_config *c = &s->config;
    uint64_t passes = 1, elapsed = 0, baseline_elapsed = 0, cpu = 0, baseline_cpu = 0;
    size_t nonzero = 0, baseline_nonzero = 0;
    double median_sum = 0, baseline_median_sum = 0;
    clear_pass_times times;
    ml_counter_values part;

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
        if (!s->baseline.offsets)
            continue;
        if (c->check)
            memset(s->region.base, CLEAR_DIRTY_BYTE, s->region.bytes);
        times = clear_order_pass(s, &s->baseline);
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
    if (s->baseline.offsets) {
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
    }
    clear_add_huge_coverage(out, &s->region);
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
    free(s->plan.offsets);
    free(s->baseline.offsets);
    free(s->group_ns_per_byte);
    free(s);
}

const ml_family ml_family_clear_order = {
    .name = "clear_order",
    .description = "user-space re-clearing of a faulted region, subpage by subpage in a chosen order",
    .config_size = sizeof(clear_order_config),
    .params = clear_order_params,
    .setup = clear_order_setup,
    .measure = clear_order_measure,
    .teardown = clear_order_teardown,
};

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

static int clear_check_out_buffer(const ml_buffer *out, size_t items, size_t itemsize, ml_error *err)
{
    if (out->itemsize != itemsize)
        return ml_fail(err, ML_ERR_VALUE, 0, "out has items of %zu bytes; expected %zu", out->itemsize,
                       itemsize);
    if (out->bytes < items * itemsize)
        return ml_fail(err, ML_ERR_VALUE, 0, "out holds %zu items; at least %zu are needed",
                       out->bytes / itemsize, items);
    return 0;
}

static int clear_kernel_order_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    const clear_kernel_order_config *c = config;
    (void)ctx;
    if (c->target >= c->n_subpages)
        return ml_fail(err, ML_ERR_VALUE, 0, "target=%lld is outside the huge page [0, %lld]",
                       (long long)c->target, (long long)c->n_subpages - 1);
    if (clear_check_out_buffer(&c->out, (size_t)c->n_subpages, sizeof(uint32_t), err) < 0)
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

const ml_family ml_family_clear_kernel_order = {
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
    if (clear_check_out_buffer(&c->out, clear_plan_calls(&c->plan), sizeof(uint64_t), err) < 0)
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

const ml_family ml_family_clear_plan = {
    .name = "clear_plan",
    .description = "fill out with the byte offset of every clear call clear_order makes, in order",
    .config_size = sizeof(clear_plan_family_config),
    .params = clear_plan_params,
    .setup = clear_plan_setup,
    .measure = clear_plan_measure,
    .teardown = clear_free_state,
};
