/* The chase's list: its memory (pages, NUMA node), the seeded shuffle that
 * links it (Python twin: memlab.twins.chase_successors), the family's
 * setup and teardown, and the check of a walked list (chase.h). */
#define _GNU_SOURCE
#include "chase.h"

#include <errno.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const chase_order_names[] = {"sequential", "random", "random_blocks", NULL};
const char *const chase_layout_names[] = {"packed", "page_per_element", NULL};
const char *const chase_op_names[] = {"follow", "inc", "addnext0", "addnextlast", "addpair", NULL};
const char *const chase_thread_lists_names[] = {"shared", "own", NULL};
const char *const chase_pages_names[] = {"4k", "thp", "hugetlb-2m", NULL};
const ml_page_kind chase_page_kinds[] = {ML_PAGES_4K, ML_PAGES_THP, ML_PAGES_HUGETLB_2M};

/* ---- the seeded shuffle (Python twin: memlab.twins.chase_successors) ---- */

/* Uniform in [0, bound) without modulo bias (Lemire's multiply-shift). */
static inline uint64_t chase_below(uint64_t *state, uint64_t bound)
{
    unsigned __int128 m = (unsigned __int128)ml_splitmix64(state) * bound;
    uint64_t low = (uint64_t)m;
    if (low < bound) {
        uint64_t threshold = (0 - bound) % bound;
        while (low < threshold) {
            m = (unsigned __int128)ml_splitmix64(state) * bound;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/* Sattolo's shuffle of the successor indices stored in elements
 * [lo, lo + count): afterwards they form one cycle through all of them.
 * The random swap targets are drawn CHASE_LOOKAHEAD swaps early and
 * prefetched, which keeps many cache misses in flight while building. */
static int chase_sattolo(chase_state *s, uint64_t lo, uint64_t count, uint64_t *rng,
                         ml_context *ctx, ml_error *err)
{
    uint64_t ahead[CHASE_LOOKAHEAD];
    uint64_t drawn = count; /* next i whose j is still to be drawn, counting down */
    if (count < 2)
        return 0;
    for (uint64_t i = count - 1; i >= 1; i--) {
        while (drawn > 1 && drawn - 1 + CHASE_LOOKAHEAD > i) {
            drawn--;
            uint64_t j = chase_below(rng, drawn);
            ahead[drawn % CHASE_LOOKAHEAD] = j;
            __builtin_prefetch(chase_element(s, lo + j), 1, 3);
        }
        uint64_t j = ahead[i % CHASE_LOOKAHEAD];
        chase_word *a = chase_element(s, lo + i), *b = chase_element(s, lo + j);
        uint64_t t = a[0];
        a[0] = b[0];
        b[0] = t;
        if ((i & (CHASE_BUILD_CHECK_EVERY - 1)) == 0)
            ML_CHECK_INTERRUPT(ctx, err);
    }
    return 0;
}

/* Turn the cycle of block [lo, lo + count) into a path that starts at lo and
 * continues with element `then`. */
static void chase_break_cycle(chase_state *s, uint64_t lo, uint64_t count, uint64_t then)
{
    for (uint64_t i = lo; i < lo + count; i++) {
        chase_word *e = chase_element(s, i);
        if (e[0] == lo) {
            e[0] = then;
            return;
        }
    }
}

static int chase_link_chain(chase_state *s, uint64_t lo, uint64_t *rng, ml_context *ctx,
                            ml_error *err)
{
    const uint64_t count = s->chain_elements;
    for (uint64_t i = 0; i < count; i++)
        chase_element(s, lo + i)[0] = s->cfg.order == ORDER_SEQUENTIAL ? lo + (i + 1) % count : lo + i;
    if (s->cfg.order == ORDER_SEQUENTIAL)
        return 0;
    if (s->cfg.order == ORDER_RANDOM || s->block_elements >= count)
        return chase_sattolo(s, lo, count, rng, ctx, err);
    for (uint64_t block = lo; block < lo + count; block += s->block_elements) {
        uint64_t size = lo + count - block < s->block_elements ? lo + count - block : s->block_elements;
        uint64_t next_block = block + size < lo + count ? block + size : lo;
        if (chase_sattolo(s, block, size, rng, ctx, err))
            return -1;
        chase_break_cycle(s, block, size, next_block);
    }
    return 0;
}

static int chase_build(chase_state *s, ml_context *ctx, ml_error *err)
{
    uint64_t rng = (uint64_t)s->cfg.seed;
    uint64_t started = ml_now_ns();
    const uint64_t words = (uint64_t)s->cfg.npad + 1;
    for (uint64_t i = 0; i < s->elements; i++) {
        chase_word *e = (chase_word *)chase_element_start(s, i);
        /* pad[0] and the last pad word start distinct so that inc, addnext0
         * and addnextlast are checkable (memlab.twins.chase_pad0) */
        for (uint64_t w = 0; w < words; w++)
            if (w != (uint64_t)s->cfg.pointer_word)
                e[w] = w == s->pad0_word || (w == words - 1 && words > 2) ? i + 1 : 0;
        if ((i & (CHASE_BUILD_CHECK_EVERY - 1)) == 0)
            ML_CHECK_INTERRUPT(ctx, err);
    }
    for (int c = 0; c < s->total_chains; c++)
        if (chase_link_chain(s, (uint64_t)c * s->chain_elements, &rng, ctx, err))
            return -1;
    for (uint64_t i = 0; i < s->elements; i++) {
        chase_word *e = chase_element(s, i);
        e[0] = (uint64_t)chase_element(s, e[0]);
        if ((i & (CHASE_BUILD_CHECK_EVERY - 1)) == 0)
            ML_CHECK_INTERRUPT(ctx, err);
    }
    s->build_ns = ml_now_ns() - started;
    return 0;
}

/* Where each thread starts: with a list each, at its own chains; on one
 * shared list, spread evenly along every chain (the walk starts from
 * there, so the threads do not march in step). */
static void chase_place_walkers(chase_state *s)
{
    for (int t = 0; t < s->threads; t++) {
        chase_walker *w = &s->walkers[t];
        for (int c = 0; c < s->k; c++) {
            chase_word *p;
            if (s->cfg.thread_lists == THREAD_LISTS_OWN) {
                p = chase_element(s, ((uint64_t)t * (uint64_t)s->k + (uint64_t)c) * s->chain_elements);
            } else {
                p = chase_element(s, (uint64_t)c * s->chain_elements);
                uint64_t skip = s->chain_elements * (uint64_t)t / (uint64_t)s->threads;
                for (uint64_t i = 0; i < skip; i++)
                    p = (chase_word *)p[0];
            }
            w->start[c] = p;
            w->walk.pos[c] = p;
            w->walk.ahead[c] = p;
            for (int64_t d = 0; d < s->cfg.prefetch_distance; d++)
                w->walk.ahead[c] = (chase_word *)w->walk.ahead[c][0];
        }
        w->walk.work_cycles = (uint64_t)s->cfg.work_cycles;
        w->walk.element_bytes = s->element_bytes;
        w->walk.last_word = (uint64_t)s->cfg.npad;
        w->walk.pair_word = (uint64_t)s->cfg.pair_word;
        w->walk.prefetch = s->cfg.prefetch_distance > 0;
        w->walk.helper = s->cfg.helper_thread;
        w->state = s;
        w->cpu = -1;
    }
}

/* ---- setup ---------------------------------------------------------- */

void chase_teardown(void *state)
{
    chase_state *s = state;
    if (!s)
        return;
    ml_team_free(&s->team);
    if (s->mapped)
        ml_region_unmap(&s->region);
    free(s->helper);
    free(s->walkers);
    free(s);
}

int chase_usable_cpus(cpu_set_t *allowed)
{
    CPU_ZERO(allowed);
    if (pthread_getaffinity_np(pthread_self(), sizeof *allowed, allowed))
        return 0;
    return CPU_COUNT(allowed);
}

/* The threads' CPUs, as memlab.placement chose them: one for the walking
 * thread, then one per other walker or for the helper, each distinct and
 * usable.  An absent list leaves a lone walking thread unpinned. */
static int chase_check_cpus(const chase_config *cfg, chase_state *s, ml_error *err)
{
    int needed = (int)cfg->threads + (cfg->helper_thread ? 1 : 0);
    if (cfg->cpus.bytes == 0) {
        if (needed > 1)
            return ml_fail(err, ML_ERR_VALUE, 0,
                           "threads=%lld%s need a CPU each: cpus lists them (memlab.placement chooses them)",
                           (long long)cfg->threads, cfg->helper_thread ? " and the helper thread" : "");
        s->cpus[0] = -1;
    } else if (ml_cpu_list_check(&cfg->cpus, "cpus", needed, needed == 1, s->cpus, err)) {
        return -1;
    }
    s->pinned = s->cpus[0] >= 0;
    return 0;
}

int chase_check_config(const chase_config *cfg, chase_state *s, ml_error *err)
{
    s->element_bytes = 8 * ((uint64_t)cfg->npad + 1);
    if ((uint64_t)cfg->working_set_bytes < s->element_bytes)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "working_set_bytes=%lld is smaller than one element of %llu bytes (npad=%lld)",
                       (long long)cfg->working_set_bytes, (unsigned long long)s->element_bytes,
                       (long long)cfg->npad);
    uint64_t fit = (uint64_t)cfg->working_set_bytes / s->element_bytes;
    if (fit < (uint64_t)cfg->chains)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "working_set_bytes=%lld holds %llu elements of %llu bytes, fewer than chains=%lld",
                       (long long)cfg->working_set_bytes, (unsigned long long)fit,
                       (unsigned long long)s->element_bytes, (long long)cfg->chains);
    if ((cfg->op == OP_INC || cfg->op == OP_ADDNEXT0 || cfg->op == OP_ADDNEXTLAST) && cfg->npad < 1)
        return ml_fail(err, ML_ERR_VALUE, 0, "op=%s needs npad >= 1 (it writes pad[0]); npad=%lld",
                       chase_op_names[cfg->op], (long long)cfg->npad);
    if (cfg->op == OP_ADDPAIR && (cfg->pair_word < 2 || cfg->pair_word > cfg->npad))
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "op=addpair adds pad[0] (word 1) and word pair_word=%lld, which must be in 2..%lld "
                       "for npad=%lld",
                       (long long)cfg->pair_word, (long long)cfg->npad, (long long)cfg->npad);
    if (cfg->pointer_word > cfg->npad)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "pointer_word=%lld is outside the element's words 0..%lld (npad=%lld)",
                       (long long)cfg->pointer_word, (long long)cfg->npad, (long long)cfg->npad);
    if (cfg->pointer_word > 0 && (cfg->op != OP_FOLLOW || cfg->prefetch_distance > 0 || cfg->helper_thread))
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "pointer_word=%lld needs op=follow without prefetch or helper thread "
                       "(they address the element from its first word)",
                       (long long)cfg->pointer_word);
    if (cfg->element_distance > 1 && cfg->layout != LAYOUT_PACKED)
        return ml_fail(err, ML_ERR_VALUE, 0, "element_distance=%lld needs layout=packed",
                       (long long)cfg->element_distance);
    if (cfg->threads > 1 && cfg->helper_thread)
        return ml_fail(err, ML_ERR_VALUE, 0, "helper_thread=1 needs threads=1 (threads=%lld)",
                       (long long)cfg->threads);
    s->threads = (int)cfg->threads;
    s->k = (int)cfg->chains;
    s->total_chains = cfg->thread_lists == THREAD_LISTS_OWN ? s->k * s->threads : s->k;
    s->chain_elements = fit / (uint64_t)s->k;
    s->elements = s->chain_elements * (uint64_t)s->total_chains;
    if (cfg->layout == LAYOUT_PAGE_PER_ELEMENT) {
        s->stride_bytes = (s->element_bytes + CHASE_PAGE_BYTES - 1) / CHASE_PAGE_BYTES * CHASE_PAGE_BYTES;
        s->color_slots = (s->stride_bytes - s->element_bytes) / CHASE_LINE_BYTES + 1;
    } else {
        s->stride_bytes = s->element_bytes;
        s->color_slots = 1;
    }
    s->misalign_bytes = (uint64_t)cfg->misalign_bytes;
    s->pointer_offset = 8 * (uint64_t)cfg->pointer_word;
    s->pad0_word = cfg->pointer_word == 1 ? 0 : 1;
    if (__builtin_mul_overflow(s->stride_bytes, (uint64_t)cfg->element_distance, &s->slot_bytes) ||
        __builtin_mul_overflow(s->elements, s->slot_bytes, &s->memory_bytes) ||
        __builtin_add_overflow(s->memory_bytes, s->misalign_bytes, &s->memory_bytes))
        return ml_fail(err, ML_ERR_MEMORY, 0,
                       "working_set_bytes=%lld with layout=%s, element_distance=%lld and threads=%lld "
                       "overflows the address space",
                       (long long)cfg->working_set_bytes, chase_layout_names[cfg->layout],
                       (long long)cfg->element_distance, (long long)cfg->threads);
    uint64_t lap_steps;
    if (__builtin_mul_overflow((uint64_t)cfg->laps, s->chain_elements, &lap_steps) || lap_steps > (1ull << 62))
        return ml_fail(err, ML_ERR_VALUE, 0, "laps=%lld of %llu elements is more steps than a sample can count",
                       (long long)cfg->laps, (unsigned long long)s->chain_elements);
    uint64_t block_bytes;
    if (__builtin_mul_overflow((uint64_t)cfg->block_pages, (uint64_t)CHASE_PAGE_BYTES, &block_bytes))
        block_bytes = UINT64_MAX;
    s->block_elements = block_bytes / s->stride_bytes;
    if (s->block_elements == 0)
        s->block_elements = 1;
    return 0;
}

/* A hugetlb page bound to a node without a free one would be a SIGBUS on
 * the first touch: check the node's pool first. */
static int chase_check_node_hugetlb(const ml_region *r, int node, ml_error *err)
{
    char path[128];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/hugepages/hugepages-2048kB/free_hugepages", node);
    FILE *f = fopen(path, "r");
    long long free_pages = -1;
    if (f) {
        if (fscanf(f, "%lld", &free_pages) != 1)
            free_pages = -1;
        fclose(f);
    }
    long long needed = (long long)(ml_round_up(r->bytes, CHASE_HUGE_BYTES) / CHASE_HUGE_BYTES);
    if (free_pages >= 0 && free_pages < needed)
        return ml_fail(err, ML_ERR_OS, ENOMEM,
                       "memory_node=%d has %lld free 2 MiB hugetlb pages; the list needs %lld (see %s)", node,
                       free_pages, needed, path);
    return 0;
}

/* Map the list's memory; with memory_node, bind it to that node before a
 * page is touched, then note where the pages really are. */
static int chase_map(chase_state *s, ml_error *err)
{
    const chase_config *cfg = &s->cfg;
    ml_cpu_mask with_memory;
    s->numa_nodes = ml_nodes_with_memory(&with_memory);
    if (cfg->memory_node >= 0 && !ml_cpu_mask_has(&with_memory, (int)cfg->memory_node)) {
        char nodes[256] = "";
        size_t used = 0;
        for (int n = 0; n < ML_MAX_NODES && used + 8 < sizeof nodes; n++)
            if (ml_cpu_mask_has(&with_memory, n))
                used += (size_t)snprintf(nodes + used, sizeof nodes - used, used ? ",%d" : "%d", n);
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "memory_node=%lld is not a NUMA node with memory on this machine (nodes with memory: %s)",
                       (long long)cfg->memory_node, nodes);
    }
    /* Huge pages only back whole 2 MiB ranges: a THP list smaller than that
     * gets a full one, as a hugetlb list does. */
    uint64_t map_bytes = s->memory_bytes;
    if (cfg->pages == PAGES_THP)
        map_bytes = (map_bytes + CHASE_HUGE_BYTES - 1) / CHASE_HUGE_BYTES * CHASE_HUGE_BYTES;
    ml_populate populate = cfg->memory_node >= 0 ? ML_POPULATE_NONE : ML_POPULATE_TOUCH;
    if (ml_region_map(&s->region, map_bytes, chase_page_kinds[cfg->pages], 0, populate,
                      !cfg->strict_pages, err))
        return -1;
    s->mapped = 1;
    s->base = s->region.base;
    if (cfg->memory_node >= 0) {
        if (s->region.granted == ML_PAGES_HUGETLB_2M &&
            chase_check_node_hugetlb(&s->region, (int)cfg->memory_node, err))
            return -1;
        if (ml_region_bind_node(&s->region, (int)cfg->memory_node, err) ||
            ml_region_populate(&s->region, ML_POPULATE_TOUCH, err))
            return -1;
        s->census_node = (int)cfg->memory_node;
    } else {
        int cpu = sched_getcpu();
        s->census_node = cpu >= 0 ? ml_cpu_node(cpu) : -1;
        if (s->census_node < 0)
            s->census_node = 0;
    }
    ml_error ignored;
    if (ml_region_node_census(&s->region, s->census_node, CHASE_CENSUS_PAGES, &s->census, &ignored))
        memset(&s->census, 0, sizeof s->census);
    if (ml_region_policy(&s->region, &s->policy_mode, &s->policy_node, &ignored))
        s->policy_mode = s->policy_node = -1;
    return 0;
}

int chase_setup(const void *config, void **state_out, ml_context *ctx, ml_error *err)
{
    const chase_config *cfg = config;
    /* aligned: the start flags sit on their own cache line */
    chase_state *s = aligned_alloc(_Alignof(chase_state), (sizeof *s + 63) / 64 * 64);
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the chase state");
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    if (chase_check_config(cfg, s, err))
        goto fail;
    if (chase_check_cpus(cfg, s, err))
        goto fail;
    char what[200];
    snprintf(what, sizeof what,
             "the chase list (working_set_bytes=%lld, npad=%lld, layout=%s, element_distance=%lld, threads=%lld)",
             (long long)cfg->working_set_bytes, (long long)cfg->npad, chase_layout_names[cfg->layout],
             (long long)cfg->element_distance, (long long)cfg->threads);
    if (ml_check_memory(s->memory_bytes, what, err))
        goto fail;
    s->walkers = aligned_alloc(64, sizeof(chase_walker) * (size_t)s->threads);
    if (!s->walkers) {
        ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the walking threads' state");
        goto fail;
    }
    memset(s->walkers, 0, sizeof(chase_walker) * (size_t)s->threads);
    if (chase_map(s, err) || chase_build(s, ctx, err))
        goto fail;
    /* strict_pages: huge pages asked for and not obtained (THP served with 4 KiB) refuse */
    if (s->cfg.strict_pages && ml_region_require_requested(&s->region, ml_region_huge_bytes(&s->region), err))
        goto fail;
    chase_place_walkers(s);
    int variant = cfg->work_cycles > 0 || cfg->prefetch_distance > 0 ? VARIANT_GENERAL
                  : cfg->helper_thread                               ? VARIANT_HELPER
                                                                     : VARIANT_PLAIN;
    s->walk_fn = chase_walks[s->k - 1][cfg->op][variant];
    if (cfg->helper_thread) {
        s->helper = aligned_alloc(64, (sizeof(chase_helper) + 63) / 64 * 64);
        if (!s->helper) {
            ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the helper thread's state");
            goto fail;
        }
        memset(s->helper, 0, sizeof *s->helper);
    }
    if ((s->threads > 1 || cfg->helper_thread) &&
        ml_team_init(&s->team, s->threads > 1 ? s->threads - 1 : 1,
                     cfg->helper_thread ? "the helper thread" : "walking thread", CHASE_THREAD_STACK_BYTES, err))
        goto fail;
    *state_out = s;
    return 0;
fail:
    chase_teardown(s);
    return -1;
}

static uint64_t chase_mix(uint64_t hash, uint64_t value)
{
    hash ^= value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
    return hash * 0xff51afd7ed558ccdull;
}

/* Untimed proof of the list: from every thread's start on each of its
 * chains, walk two laps counting visits of every element (the counts start
 * again for each thread), then hash the memory. */
int chase_verify(chase_state *s, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    enum { CHECK_LAPS = 2 };
    char what[96];
    snprintf(what, sizeof what, "the visit counters of check=1 (%llu elements)",
             (unsigned long long)s->elements);
    if (ml_check_memory(s->elements * sizeof(uint32_t), what, err))
        return -1;
    uint32_t *visits = malloc(s->elements * sizeof *visits);
    if (!visits)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate %s", what);
    uint64_t order_hash = 0, bad_pointers = 0, outside_chain = 0, back_at_start = 1;
    uint64_t minimum = UINT64_MAX, maximum = 0, visited = UINT64_MAX;
    const char *end = s->base + s->memory_bytes;
    for (int t = 0; t < s->threads && !bad_pointers; t++) {
        const chase_walker *w = &s->walkers[t];
        int first_chain = s->cfg.thread_lists == THREAD_LISTS_OWN ? t * s->k : 0;
        uint64_t lo_all = (uint64_t)first_chain * s->chain_elements;
        uint64_t hi_all = lo_all + (uint64_t)s->k * s->chain_elements;
        memset(visits, 0, s->elements * sizeof *visits);
        for (int c = 0; c < s->k && !bad_pointers; c++) {
            uint64_t lo = (uint64_t)(first_chain + c) * s->chain_elements, hi = lo + s->chain_elements;
            chase_word *p = w->start[c];
            for (int lap = 0; lap < CHECK_LAPS && !bad_pointers; lap++) {
                for (uint64_t i = 0; i < s->chain_elements; i++) {
                    if ((const char *)p < s->base || (const char *)p >= end ||
                        p != chase_element(s, chase_index(s, p))) {
                        bad_pointers++;
                        break;
                    }
                    uint64_t index = chase_index(s, p);
                    if (index < lo || index >= hi)
                        outside_chain++;
                    visits[index]++;
                    if (lap == 0 && t == 0)
                        order_hash = chase_mix(order_hash, index);
                    p = (chase_word *)p[0];
                    if ((i & (CHASE_BUILD_CHECK_EVERY - 1)) == 0 && ml_interrupted(ctx)) {
                        free(visits);
                        return ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
                    }
                }
                if (p != w->start[c])
                    back_at_start = 0;
            }
        }
        uint64_t seen = 0;
        for (uint64_t i = lo_all; i < hi_all; i++) {
            minimum = visits[i] < minimum ? visits[i] : minimum;
            maximum = visits[i] > maximum ? visits[i] : maximum;
            seen += visits[i] > 0;
        }
        for (uint64_t i = 0; i < s->elements; i++)
            if ((i < lo_all || i >= hi_all) && visits[i])
                outside_chain++;
        visited = seen < visited ? seen : visited;
    }
    uint64_t checksum = 0;
    for (uint64_t i = 0; i < s->elements; i++) {
        const chase_word *e = chase_element(s, i);
        const chase_word *start = (const chase_word *)chase_element_start(s, i);
        checksum = chase_mix(checksum, chase_index(s, (const chase_word *)e[0]));
        if (s->cfg.npad >= 1)
            checksum = chase_mix(checksum, start[s->pad0_word]);
    }
    for (int t = 0; t < s->threads; t++)
        for (int c = 0; c < s->k; c++)
            checksum = chase_mix(checksum, chase_index(s, s->walkers[t].walk.pos[c]));
    free(visits);
    ml_metric_add(out, "check_laps", CHECK_LAPS);
    ml_metric_add(out, "check_visits_fewest", (double)minimum);
    ml_metric_add(out, "check_visits_most", (double)maximum);
    ml_metric_add(out, "check_elements_visited", (double)visited);
    ml_metric_add(out, "check_back_at_start", bad_pointers ? 0.0 : (double)back_at_start);
    ml_metric_add(out, "check_bad_pointers", (double)bad_pointers);
    ml_metric_add(out, "check_outside_chain", (double)outside_chain);
    ml_metric_add(out, "check_order_hash", (double)(order_hash & CHASE_HASH_MASK));
    ml_metric_add(out, "checksum", (double)(checksum & CHASE_HASH_MASK));
    return 0;
}
