/* Where threads and memory run: SMT siblings and NUMA nodes read from sysfs,
 * memory bound to a node with mbind(2) and checked with get_mempolicy(2) and
 * move_pages(2).  The syscalls are called directly (no libnuma); a kernel
 * without NUMA support answers ENOSYS, which callers report. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/mempolicy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "memlab.h"

#define PLACEMENT_PAGE_BYTES 4096u
#define PLACEMENT_MASK_WORDS (ML_MAX_CPUS / 64)
/* The kernel reads maxnode - 1 bits of a node mask. */
#define PLACEMENT_MAXNODE (ML_MAX_NODES + 1)

void ml_cpu_mask_clear(ml_cpu_mask *mask)
{
    memset(mask, 0, sizeof(*mask));
}

void ml_cpu_mask_set(ml_cpu_mask *mask, int cpu)
{
    if (cpu >= 0 && cpu < ML_MAX_CPUS)
        mask->bits[cpu / 64] |= UINT64_C(1) << (cpu % 64);
}

int ml_cpu_mask_has(const ml_cpu_mask *mask, int cpu)
{
    return cpu >= 0 && cpu < ML_MAX_CPUS && (mask->bits[cpu / 64] >> (cpu % 64)) & 1;
}

int ml_cpu_mask_count(const ml_cpu_mask *mask)
{
    int count = 0;
    for (int i = 0; i < PLACEMENT_MASK_WORDS; i++)
        count += __builtin_popcountll(mask->bits[i]);
    return count;
}

int ml_cpu_list_parse(const char *text, ml_cpu_mask *out)
{
    ml_cpu_mask_clear(out);
    const char *p = text;
    while (*p && *p != '\n') {
        char *end;
        long first = strtol(p, &end, 10);
        if (end == p || first < 0)
            return -1;
        long last = first;
        p = end;
        if (*p == '-') {
            last = strtol(p + 1, &end, 10);
            if (end == p + 1 || last < first)
                return -1;
            p = end;
        }
        for (long c = first; c <= last && c < ML_MAX_CPUS; c++)
            ml_cpu_mask_set(out, (int)c);
        if (*p == ',')
            p++;
        else if (*p && *p != '\n')
            return -1;
    }
    return 0;
}

static int read_line(const char *path, char *line, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fgets(line, (int)size, f) != NULL;
    fclose(f);
    return ok ? 0 : -1;
}

int ml_cpu_smt_siblings(int cpu, ml_cpu_mask *out)
{
    char path[128], line[512];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu);
    if (read_line(path, line, sizeof line) || ml_cpu_list_parse(line, out)) {
        ml_cpu_mask_clear(out);
        ml_cpu_mask_set(out, cpu);
        return -1;
    }
    return 0;
}

int ml_cpu_node(int cpu)
{
    for (int node = 0; node < ML_MAX_NODES; node++) {
        char path[128], line[4096];
        ml_cpu_mask cpus;
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
        if (read_line(path, line, sizeof line))
            continue;
        if (ml_cpu_list_parse(line, &cpus) == 0 && ml_cpu_mask_has(&cpus, cpu))
            return node;
    }
    return -1;
}

int ml_nodes_with_memory(ml_cpu_mask *out)
{
    char line[4096];
    if (read_line("/sys/devices/system/node/has_memory", line, sizeof line) ||
        ml_cpu_list_parse(line, out)) {
        /* no NUMA in this kernel: all memory is node 0 */
        ml_cpu_mask_clear(out);
        ml_cpu_mask_set(out, 0);
        return 1;
    }
    return ml_cpu_mask_count(out);
}

int ml_node_distance(int from, int to)
{
    char path[128], line[4096];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/distance", from);
    if (read_line(path, line, sizeof line))
        return from == to ? 10 : -1;
    char *p = line;
    for (int i = 0;; i++) {
        char *end;
        long value = strtol(p, &end, 10);
        if (end == p)
            return -1;
        if (i == to)
            return (int)value;
        p = end;
    }
}

int ml_region_bind_node(ml_region *r, int node, ml_error *err)
{
    unsigned long mask[PLACEMENT_MAXNODE / (8 * sizeof(unsigned long)) + 1];
    memset(mask, 0, sizeof mask);
    if (node < 0 || node >= ML_MAX_NODES)
        return ml_fail(err, ML_ERR_VALUE, EINVAL, "memory_node=%d is outside 0..%d", node, ML_MAX_NODES - 1);
    mask[node / (8 * sizeof(unsigned long))] = 1ul << (node % (8 * sizeof(unsigned long)));
    uint64_t page = r->granted == ML_PAGES_4K || r->granted == ML_PAGES_THP ? PLACEMENT_PAGE_BYTES : r->page_bytes;
    size_t bytes = (size_t)ml_round_up(r->bytes, page);
    if (syscall(SYS_mbind, r->base, bytes, MPOL_BIND, mask, (unsigned long)PLACEMENT_MAXNODE,
                MPOL_MF_STRICT | MPOL_MF_MOVE) != 0) {
        int e = errno;
        if (e == ENOSYS)
            return ml_fail(err, ML_ERR_OS, e, "mbind: this kernel has no NUMA support (ENOSYS)");
        return ml_fail(err, e == EINVAL ? ML_ERR_VALUE : ML_ERR_OS, e,
                       "mbind of %zu bytes to memory_node=%d refused: %s", bytes, node, strerror(e));
    }
    return 0;
}

int ml_region_policy(const ml_region *r, int *mode, int *only_node, ml_error *err)
{
    unsigned long mask[PLACEMENT_MAXNODE / (8 * sizeof(unsigned long)) + 1];
    memset(mask, 0, sizeof mask);
    int got = -1;
    if (syscall(SYS_get_mempolicy, &got, mask, (unsigned long)PLACEMENT_MAXNODE, r->base,
                MPOL_F_ADDR) != 0) {
        int e = errno;
        return ml_fail(err, ML_ERR_OS, e, "get_mempolicy(MPOL_F_ADDR) failed: %s", strerror(e));
    }
    *mode = got;
    *only_node = -1;
    int seen = 0;
    for (int node = 0; node < ML_MAX_NODES; node++) {
        if (mask[node / (8 * sizeof(unsigned long))] >> (node % (8 * sizeof(unsigned long))) & 1) {
            *only_node = seen ? -2 : node;
            seen = 1;
        }
    }
    return 0;
}

int ml_region_node_census(const ml_region *r, int node, size_t max_pages, ml_node_census *out,
                          ml_error *err)
{
    size_t pages = (size_t)(ml_round_up(r->bytes, PLACEMENT_PAGE_BYTES) / PLACEMENT_PAGE_BYTES);
    size_t count = pages < max_pages ? pages : max_pages;
    memset(out, 0, sizeof(*out));
    if (count == 0)
        return 0;
    void **addresses = malloc(count * sizeof *addresses);
    int *status = malloc(count * sizeof *status);
    if (!addresses || !status) {
        free(addresses);
        free(status);
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the move_pages query of %zu pages",
                       count);
    }
    for (size_t i = 0; i < count; i++) {
        size_t page = count == pages ? i : i * (pages / count);
        addresses[i] = (char *)r->base + page * PLACEMENT_PAGE_BYTES;
    }
    /* nodes == NULL: move nothing, report where each page is */
    long rc = syscall(SYS_move_pages, 0, (unsigned long)count, addresses, NULL, status, 0);
    int e = errno;
    free(addresses);
    if (rc != 0) {
        free(status);
        return ml_fail(err, ML_ERR_OS, e, "move_pages (query) failed: %s", strerror(e));
    }
    for (size_t i = 0; i < count; i++) {
        if (status[i] < 0)
            out->not_present++;
        else if (status[i] == node)
            out->on_node++;
        else
            out->elsewhere++;
    }
    out->queried = count;
    free(status);
    return 0;
}
