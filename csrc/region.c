/* Memory regions of a chosen page kind, aligned and populated as asked, and
 * what the kernel really gave (huge-page coverage from the PAGEMAP_SCAN ioctl
 * of /proc/self/pagemap, else /proc/self/smaps). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memlab.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif
#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB (30 << MAP_HUGE_SHIFT)
#endif

#define BASE_PAGE_BYTES 4096ul
#define HUGE_2M_BYTES (2ul << 20)
#define HUGE_1G_BYTES (1ul << 30)
/* Leave the rest of the machine this much when checking a request. */
#define MEMORY_MARGIN_BYTES (256ull << 20)

const char *const ml_page_kind_names[] = {"4k", "thp", "hugetlb-2m", "hugetlb-1g", NULL};
const char *const ml_populate_names[] = {"none", "touch", "map_populate",
                                         "madvise_populate_write", NULL};

size_t ml_page_kind_bytes(ml_page_kind kind)
{
    switch (kind) {
    case ML_PAGES_THP:
    case ML_PAGES_HUGETLB_2M:
        return HUGE_2M_BYTES;
    case ML_PAGES_HUGETLB_1G:
        return HUGE_1G_BYTES;
    default:
        return BASE_PAGE_BYTES;
    }
}

uint64_t ml_memory_available_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    uint64_t kib = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kib) == 1)
            break;
    fclose(f);
    return kib * 1024;
}

int ml_check_memory(size_t bytes, const char *what, ml_error *err)
{
    uint64_t available = ml_memory_available_bytes();
    if (available == 0)
        return 0;
    uint64_t usable = available > MEMORY_MARGIN_BYTES ? available - MEMORY_MARGIN_BYTES : 0;
    if ((uint64_t)bytes > usable)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM,
                       "%s needs %zu bytes (%.2f GiB) but only %.2f GiB of memory is available",
                       what, bytes, (double)bytes / (1 << 30), (double)usable / (1 << 30));
    return 0;
}

static void *map_hugetlb(size_t bytes, ml_page_kind kind, int populate)
{
    int size_flag = kind == ML_PAGES_HUGETLB_1G ? MAP_HUGE_1GB : MAP_HUGE_2MB;
    return mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | size_flag | (populate ? MAP_POPULATE : 0), -1, 0);
}

int ml_region_map(ml_region *r, size_t bytes, ml_page_kind kind, size_t alignment,
                  ml_populate populate, int allow_fallback, ml_error *err)
{
    memset(r, 0, sizeof(*r));
    if (bytes == 0)
        return ml_fail(err, ML_ERR_VALUE, EINVAL, "region_bytes=0 must be positive");
    if (alignment & (alignment - 1))
        return ml_fail(err, ML_ERR_VALUE, EINVAL, "alignment=%zu is not a power of two", alignment);
    /* MAP_POPULATE faults the range in inside mmap(), before madvise(MADV_HUGEPAGE)
     * can ask for huge pages: with THP "madvise" it cannot give THP pages. */
    if (kind == ML_PAGES_THP && populate == ML_POPULATE_MAP_POPULATE && !allow_fallback)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "populate=map_populate cannot populate THP pages (mmap populates before "
                       "madvise(MADV_HUGEPAGE) takes effect); without strict pages it is replaced by "
                       "madvise_populate_write, and populate_used says so");
    if (ml_check_memory(bytes, "the region", err) < 0)
        return -1;
    r->kind = kind;
    r->granted = kind;
    r->bytes = bytes;
    r->page_bytes = ml_page_kind_bytes(kind);
    r->populate_requested = populate;
    r->populate_used = populate;
    if (alignment < r->page_bytes)
        alignment = r->page_bytes;

    if (kind == ML_PAGES_HUGETLB_2M || kind == ML_PAGES_HUGETLB_1G) {
        r->map_bytes = ml_round_up(bytes, r->page_bytes) + (alignment - r->page_bytes);
        uint64_t start = ml_now_ns();
        r->map_base = map_hugetlb(r->map_bytes, kind, populate == ML_POPULATE_MAP_POPULATE);
        if (r->map_base == MAP_FAILED) {
            int e = errno;
            r->map_base = NULL;
            if (!allow_fallback)
                return ml_fail(err, ML_ERR_OS, e,
                               "%s pages refused for %zu bytes: %s (are pages reserved? see "
                               "/sys/kernel/mm/hugepages)",
                               ml_page_kind_names[kind], bytes, strerror(e));
            r->granted = ML_PAGES_4K;
            r->page_bytes = BASE_PAGE_BYTES;
            alignment = BASE_PAGE_BYTES;
        } else if (populate == ML_POPULATE_MAP_POPULATE) {
            r->populate_ns = ml_now_ns() - start;
        }
    }
    if (!r->map_base) {
        int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
        r->map_bytes = ml_round_up(bytes, BASE_PAGE_BYTES) + (alignment - BASE_PAGE_BYTES);
        if (populate == ML_POPULATE_MAP_POPULATE && r->granted == ML_PAGES_4K)
            flags |= MAP_POPULATE;
        uint64_t start = ml_now_ns();
        r->map_base = mmap(NULL, r->map_bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
        if (r->map_base == MAP_FAILED) {
            int e = errno;
            r->map_base = NULL;
            return ml_fail(err, e == ENOMEM ? ML_ERR_MEMORY : ML_ERR_OS, e,
                           "mmap of %zu bytes failed: %s", r->map_bytes, strerror(e));
        }
        if (flags & MAP_POPULATE)
            r->populate_ns = ml_now_ns() - start;
    }
    uintptr_t aligned = ml_round_up((uintptr_t)r->map_base, alignment);
    r->base = (void *)aligned;
    size_t advise_bytes = ml_round_up(bytes, BASE_PAGE_BYTES);
    if (r->granted == ML_PAGES_THP) {
        if (madvise(r->base, advise_bytes, MADV_HUGEPAGE) < 0) {
            int e = errno;
            if (!allow_fallback) {
                ml_region_unmap(r);
                return ml_fail(err, ML_ERR_OS, e, "madvise(MADV_HUGEPAGE) refused: %s",
                               strerror(e));
            }
            r->granted = ML_PAGES_4K;
            r->page_bytes = BASE_PAGE_BYTES;
        }
    } else if (r->granted == ML_PAGES_4K) {
        /* Keep 4 KiB regions 4 KiB even where THP is "always". */
        madvise(r->base, advise_bytes, MADV_NOHUGEPAGE);
    }
    if (populate == ML_POPULATE_MAP_POPULATE && kind == ML_PAGES_THP) {
        /* MAP_POPULATE would come too early for THP (refused above when strict);
         * also when MADV_HUGEPAGE was refused, since mmap did not populate. */
        int rc = ml_region_populate(r, ML_POPULATE_MADVISE_WRITE, err);
        if (rc < 0 && err->code == ML_ERR_OS && err->errnum == EINVAL)
            rc = ml_region_populate(r, ML_POPULATE_TOUCH, err); /* before Linux 5.14 */
        r->populate_requested = ML_POPULATE_MAP_POPULATE;
        if (rc < 0) {
            ml_region_unmap(r);
            return -1;
        }
    } else if (populate != ML_POPULATE_MAP_POPULATE && ml_region_populate(r, populate, err) < 0) {
        ml_region_unmap(r);
        return -1;
    }
    return 0;
}

int ml_region_populate(ml_region *r, ml_populate populate, ml_error *err)
{
    uint64_t start = ml_now_ns();
    r->populate_requested = r->populate_used = populate;
    switch (populate) {
    case ML_POPULATE_NONE:
        return 0;
    case ML_POPULATE_TOUCH:
    case ML_POPULATE_MAP_POPULATE: {
        volatile char *p = r->base;
        for (size_t offset = 0; offset < r->bytes; offset += BASE_PAGE_BYTES)
            p[offset] = 1;
        r->populate_used = ML_POPULATE_TOUCH;
        break;
    }
    case ML_POPULATE_MADVISE_WRITE:
        if (madvise(r->base, ml_round_up(r->bytes, BASE_PAGE_BYTES), MADV_POPULATE_WRITE) < 0) {
            int e = errno;
            return ml_fail(err, ML_ERR_OS, e,
                           "madvise(MADV_POPULATE_WRITE) failed: %s (needs Linux 5.14+)",
                           strerror(e));
        }
        break;
    }
    r->populate_ns = ml_now_ns() - start;
    return 0;
}

const char *ml_pages_by_coverage(int64_t huge_bytes, size_t bytes)
{
    if (huge_bytes < 0 || bytes == 0)
        return "unknown";
    return (uint64_t)huge_bytes * 2 >= (uint64_t)bytes ? "thp" : "4k";
}

const char *ml_region_pages_obtained(const ml_region *r, int64_t huge_bytes)
{
    if (r->granted == ML_PAGES_HUGETLB_2M || r->granted == ML_PAGES_HUGETLB_1G)
        return ml_page_kind_names[r->granted];
    if (r->populate_used == ML_POPULATE_NONE)
        return "none";
    return ml_pages_by_coverage(huge_bytes, r->bytes);
}

void ml_region_facts(ml_measurement *out, const ml_region *r, int64_t huge_bytes)
{
    ml_fact_add(out, "pages_requested", ml_page_kind_names[r->kind]);
    ml_fact_add(out, "pages_obtained", ml_region_pages_obtained(r, huge_bytes));
    ml_fact_add(out, "populate_requested", ml_populate_names[r->populate_requested]);
    ml_fact_add(out, "populate_used", ml_populate_names[r->populate_used]);
}

int ml_region_require_requested(const ml_region *r, int64_t huge_bytes, ml_error *err)
{
    const char *obtained = ml_region_pages_obtained(r, huge_bytes);
    const char *requested = ml_page_kind_names[r->kind];
    if (strcmp(obtained, requested) == 0 || strcmp(obtained, "none") == 0)
        return 0;
    return ml_fail(err, ML_ERR_OS, ENOMEM,
                   "pages=%s asked, but the kernel gave %s pages (huge pages back %.0f%% of %zu bytes; "
                   "strict pages refuse the fallback)",
                   requested, obtained, huge_bytes < 0 ? 0.0 : 100.0 * (double)huge_bytes / (double)r->bytes,
                   r->bytes);
}

void ml_region_unmap(ml_region *r)
{
    if (r->map_base)
        munmap(r->map_base, r->map_bytes);
    r->map_base = NULL;
    r->base = NULL;
}

/* ---- huge-page coverage from /proc/self/smaps ------------------------ */

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* "start-end " of a mapping's header line; 0 for any other line. */
static int smaps_header(const char *line, size_t len, uintptr_t *start, uintptr_t *end)
{
    size_t i = 0;
    uintptr_t value[2] = {0, 0};
    for (int part = 0; part < 2; part++) {
        size_t first = i;
        while (i < len && hex_digit(line[i]) >= 0)
            value[part] = value[part] * 16 + (uintptr_t)hex_digit(line[i++]);
        if (i == first || i == len || line[i] != (part == 0 ? '-' : ' '))
            return 0;
        i++;
    }
    *start = value[0];
    *end = value[1];
    return 1;
}

/* The kB figure of "Key: 1234 kB" when the line has one of the keys. */
static int64_t smaps_huge_kib(const char *line, size_t len)
{
    static const char *const keys[] = {"AnonHugePages:", "Private_Hugetlb:", "Shared_Hugetlb:"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        size_t key_len = strlen(keys[k]);
        if (len < key_len || memcmp(line, keys[k], key_len) != 0)
            continue;
        int64_t kib = 0;
        size_t i = key_len;
        while (i < len && line[i] == ' ')
            i++;
        while (i < len && line[i] >= '0' && line[i] <= '9')
            kib = kib * 10 + (line[i++] - '0');
        return kib;
    }
    return 0;
}

static int64_t huge_bytes_from_smaps(const void *start, size_t bytes)
{
    int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    uintptr_t lo = (uintptr_t)start, hi = lo + bytes;
    char chunk[8192];
    char line[512]; /* longer lines are cut: the figures come first */
    size_t line_len = 0;
    int inside = 0;
    int64_t total = 0;
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0 || (n < 0 && errno == EINTR)) {
        for (ssize_t k = 0; k < n; k++) {
            if (chunk[k] != '\n') {
                if (line_len < sizeof line)
                    line[line_len++] = chunk[k];
                continue;
            }
            uintptr_t map_start, map_end;
            if (smaps_header(line, line_len, &map_start, &map_end))
                inside = map_start < hi && map_end > lo;
            else if (inside)
                total += smaps_huge_kib(line, line_len) * 1024;
            line_len = 0;
        }
    }
    close(fd);
    if (n < 0)
        return -1;
    return total > (int64_t)bytes ? (int64_t)bytes : total;
}

/* PAGEMAP_SCAN (Linux 6.7, include/uapi/linux/fs.h), spelled out for older
 * headers: the kernel's ABI, fixed since. */
typedef struct pagemap_run {
    uint64_t start, end, categories;
} pagemap_run;

typedef struct pagemap_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
} pagemap_scan_arg;

#define PAGEMAP_SCAN_REQUEST _IOWR('f', 16, pagemap_scan_arg)
#define PAGE_CATEGORY_PRESENT (1u << 3)
#define PAGE_CATEGORY_PFNZERO (1u << 5)
#define PAGE_CATEGORY_HUGE (1u << 6)
#define PAGEMAP_RUNS 64

/* The present huge pages (PMD-mapped THP or hugetlb; not the shared huge
 * zero page) of [lo, hi), from the page tables of that range alone; -2 where
 * the kernel has no PAGEMAP_SCAN (before 6.7), -1 on another failure. */
static int64_t huge_bytes_from_pagemap(uintptr_t lo, uintptr_t hi)
{
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -2;
    pagemap_run runs[PAGEMAP_RUNS];
    int64_t total = 0;
    uintptr_t at = lo;
    while (at < hi) {
        pagemap_scan_arg arg = {
            .size = sizeof arg,
            .start = at,
            .end = hi,
            .vec = (uint64_t)(uintptr_t)runs,
            .vec_len = PAGEMAP_RUNS,
            .category_inverted = PAGE_CATEGORY_PFNZERO,
            .category_mask = PAGE_CATEGORY_HUGE | PAGE_CATEGORY_PRESENT | PAGE_CATEGORY_PFNZERO,
            .return_mask = PAGE_CATEGORY_HUGE,
        };
        int n = ioctl(fd, PAGEMAP_SCAN_REQUEST, &arg);
        if (n < 0) {
            int unknown = errno == ENOTTY || errno == EINVAL || errno == EOPNOTSUPP;
            close(fd);
            return unknown && at == lo ? -2 : -1;
        }
        for (int k = 0; k < n; k++)
            total += (int64_t)(runs[k].end - runs[k].start);
        if (arg.walk_end <= at) /* no progress: never seen, but never loop */
            break;
        at = (uintptr_t)arg.walk_end;
    }
    close(fd);
    return total;
}

int64_t ml_huge_bytes(const void *start, size_t bytes)
{
    uintptr_t lo = (uintptr_t)start & ~(uintptr_t)(BASE_PAGE_BYTES - 1);
    uintptr_t hi = ((uintptr_t)start + bytes + BASE_PAGE_BYTES - 1) & ~(uintptr_t)(BASE_PAGE_BYTES - 1);
    /* smaps walks every page of every mapping of the process: 8-20 ms in a
     * Python process, long enough to leave the caches cold for the next
     * timed pass (a 4 MiB clear read 25 GB/s a pass after it, 79 without) */
    int64_t huge = huge_bytes_from_pagemap(lo, hi);
    if (huge == -2)
        return huge_bytes_from_smaps(start, bytes);
    return huge > (int64_t)bytes ? (int64_t)bytes : huge;
}

int64_t ml_region_huge_bytes(const ml_region *r)
{
    return ml_huge_bytes(r->base, r->bytes);
}

/* ---- the region family: map, populate and report what the kernel gave ---- */

typedef struct {
    int64_t region_bytes;
    int pages;
    int populate;
    int strict_pages;
} region_config;

static const ml_param region_params[] = {
    {.name = "region_bytes", .kind = ML_PARAM_INT, .offset = offsetof(region_config, region_bytes),
     .min = 4096, .max = INT64_MAX, ML_DEFAULT(64 << 20)},
    {.name = "pages", .kind = ML_PARAM_CHOICE, .offset = offsetof(region_config, pages),
     .choices = ml_page_kind_names, ML_DEFAULT_CHOICE("4k")},
    {.name = "populate", .kind = ML_PARAM_CHOICE, .offset = offsetof(region_config, populate),
     .choices = ml_populate_names, ML_DEFAULT_CHOICE("touch")},
    {.name = "strict_pages", .kind = ML_PARAM_BOOL, .offset = offsetof(region_config, strict_pages), ML_DEFAULT(0)},
    {0},
};

static int region_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    (void)ctx;
    const region_config *c = config;
    if (ml_check_memory((size_t)c->region_bytes, "region_bytes", err) < 0)
        return -1;
    return ml_setup_copy_config(c, sizeof(*c), state, err);
}

static int region_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    const region_config *c = state;
    ml_region region;
    ml_counting counting;
    ml_counting_start(&counting, ctx);
    uint64_t start = ml_now_ns();
    int rc = ml_region_map(&region, (size_t)c->region_bytes, (ml_page_kind)c->pages, 0,
                           (ml_populate)c->populate, !c->strict_pages, err);
    uint64_t elapsed = ml_now_ns() - start;
    ml_counting_stop(&counting, out);
    if (rc < 0)
        return rc;
    int64_t huge = ml_region_huge_bytes(&region);
    if (c->strict_pages && ml_region_require_requested(&region, huge, err) < 0) {
        ml_region_unmap(&region);
        return -1;
    }
    ml_region_facts(out, &region, huge);
    out->elapsed_ns = elapsed;
    out->bytes = (double)c->region_bytes;
    out->units = (double)ml_round_up((size_t)c->region_bytes, region.page_bytes) / (double)region.page_bytes;
    ml_metric_add(out, "populate_ns", (double)region.populate_ns);
    ml_metric_add(out, "granted_page_bytes", (double)region.page_bytes);
    ml_metric_add(out, "fell_back", region.granted != region.kind);
    ml_metric_add(out, "huge_bytes", (double)huge);
    ml_metric_add(out, "huge_fraction", huge < 0 ? -1.0 : (double)huge / (double)c->region_bytes);
    ml_region_unmap(&region);
    return 0;
}

static void region_teardown(void *state)
{
    free(state);
}

ML_FAMILY(region) = {
    .name = "region",
    .description = "map and populate a region; report the pages the kernel gave",
    .config_size = sizeof(region_config),
    .params = region_params,
    .setup = region_setup,
    .measure = region_measure,
    .teardown = region_teardown,
};
