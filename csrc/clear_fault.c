/* The kernel zeroing pages on first touch: a fresh region per sample,
 * populated by touching, MAP_POPULATE or MADV_POPULATE_WRITE, timed with
 * the faults it took. */
#include "clear.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

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
    int strict_pages;
} clear_fault_config;

typedef struct clear_fault_state {
    clear_fault_config config;
    ml_counters counters;
    uint64_t last_unmap_ns;
} clear_fault_state;

static const ml_param clear_fault_params[] = {
    {.name = "region_bytes", .kind = ML_PARAM_INT, .offset = offsetof(clear_fault_config, region_bytes),
     .min = (int64_t)CLEAR_SUBPAGE_BYTES, .max = CLEAR_MAX_REGION_BYTES, ML_DEFAULT(256 << 20)},
    {.name = "pages", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_fault_config, pages),
     .choices = ml_page_kind_names, ML_DEFAULT_CHOICE("thp")},
    {.name = "populate", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_fault_config, populate),
     .choices = clear_fault_populate_names, ML_DEFAULT_CHOICE("touch")},
    {.name = "touch_offset", .kind = ML_PARAM_CHOICE, .offset = offsetof(clear_fault_config, touch_offset),
     .choices = clear_touch_offset_names, ML_DEFAULT_CHOICE("first")},
    {.name = "pause_s", .kind = ML_PARAM_DOUBLE, .offset = offsetof(clear_fault_config, pause_s),
     .min_double = 0.0, .max_double = 3600.0, ML_DEFAULT_DOUBLE(0.0)},
    {.name = "strict_pages", .kind = ML_PARAM_BOOL, .offset = offsetof(clear_fault_config, strict_pages), ML_DEFAULT(0)},
    {0},
};

static int clear_fault_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    const clear_fault_config *c = config;
    size_t page_bytes = ml_page_kind_bytes((ml_page_kind)c->pages);
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
    size_t page_bytes = region->page_bytes;
    size_t offset = 0;
    if (page_bytes > CLEAR_SUBPAGE_BYTES && touch_offset == TOUCH_MIDDLE)
        offset = page_bytes / 2;
    else if (page_bytes > CLEAR_SUBPAGE_BYTES && touch_offset == TOUCH_LAST)
        offset = page_bytes - CLEAR_SUBPAGE_BYTES;
    volatile char *base = region->base;
    for (size_t at = offset; at < region->bytes; at += page_bytes)
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
        cpu_start = ml_thread_cpu_ns();
        start = ml_now_ns();
        if (ml_region_map(&region, (size_t)c->region_bytes, (ml_page_kind)c->pages, 0, mode, !c->strict_pages,
                          err) < 0) {
            ml_counters_stop(&s->counters);
            return -1;
        }
        end = ml_now_ns();
    } else {
        if (ml_region_map(&region, (size_t)c->region_bytes, (ml_page_kind)c->pages, 0, ML_POPULATE_NONE,
                          !c->strict_pages, err) < 0)
            return -1;
        ml_counters_start(&s->counters);
        rusage_before = clear_rusage_minor_faults();
        cpu_start = ml_thread_cpu_ns();
        start = ml_now_ns();
        if (mode == ML_POPULATE_TOUCH) {
            clear_fault_touch(&region, c->touch_offset);
            region.populate_requested = region.populate_used = ML_POPULATE_TOUCH;
        } else if (ml_region_populate(&region, mode, err) < 0) {
            ml_counters_stop(&s->counters);
            ml_region_unmap(&region);
            return -1;
        }
        end = ml_now_ns();
    }
    cpu_end = ml_thread_cpu_ns();
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
    int64_t huge = ml_region_huge_bytes(&region);
    if (c->strict_pages && ml_region_require_requested(&region, huge, err) < 0) {
        ml_region_unmap(&region);
        return -1;
    }
    clear_add_huge_coverage(out, &region, huge);

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

ML_FAMILY(clear_fault) = {
    .name = "clear_fault",
    .description = "kernel zeroing on first touch: map a fresh region per sample and time its population",
    .config_size = sizeof(clear_fault_config),
    .params = clear_fault_params,
    .setup = clear_fault_setup,
    .measure = clear_fault_measure,
    .teardown = clear_fault_teardown,
};
