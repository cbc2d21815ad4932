/* Pointer chase: Drepper's list-walking experiments (seed 004, sections
 * 3.3.2, 6.3 and 7.5).
 *
 * A working set holds n elements `struct { next; uint64_t pad[npad]; }`
 * linked into one circular list per chain.  The timed loop does nothing but
 * follow `next` (plus the operation, work, prefetch or helper-thread
 * progress that the parameters ask for); one specialised loop exists for
 * every combination so that no flag is tested inside it.
 *
 * Two families live here: `chase` (the measurement) and `chase_trace`,
 * which builds the same list, walks it a fixed number of laps with the same
 * loops and copies the list (successor indices and pad[0]) into a buffer so
 * that Python can check it against its own reference. */
#define _GNU_SOURCE
#include "memlab.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(void *) == sizeof(uint64_t), "the chase stores pointers in 64-bit words");

#define CHASE_MAX_CHAINS 16
#define CHASE_PAGE_BYTES 4096u
#define CHASE_LINE_BYTES 64u
#define CHASE_HUGE_BYTES (2u << 20)
#define CHASE_LINE_WORDS (CHASE_LINE_BYTES / sizeof(uint64_t))
#define CHASE_CHUNK_NS 50000000.0 /* one timed stretch between interrupt checks */
#define CHASE_DEFAULT_TARGET_NS 100000000u
#define CHASE_PROBE_STEPS 1024u
#define CHASE_BUILD_CHECK_EVERY (1u << 20)
#ifndef CHASE_LOOKAHEAD
#define CHASE_LOOKAHEAD 256u
#endif /* Sattolo swaps whose targets are prefetched */
#define CHASE_HASH_MASK ((1ull << 52) - 1) /* exact in a double */

enum chase_order { ORDER_SEQUENTIAL, ORDER_RANDOM, ORDER_RANDOM_BLOCKS };
enum chase_layout { LAYOUT_PACKED, LAYOUT_PAGE_PER_ELEMENT };
enum chase_op { OP_FOLLOW, OP_INC, OP_ADDNEXT0, OP_COUNT };
enum chase_pages { PAGES_4K, PAGES_THP, PAGES_HUGETLB_2M };

/* Loop variants: the plain chase, the chase publishing its progress to the
 * helper thread, and the general loop for work and prefetch, whose steps are
 * long enough that testing two loop-invariant flags costs nothing. */
enum { VARIANT_PLAIN, VARIANT_HELPER, VARIANT_GENERAL, VARIANT_COUNT };

static const char *const chase_order_names[] = {"sequential", "random", "random_blocks", NULL};
static const char *const chase_layout_names[] = {"packed", "page_per_element", NULL};
static const char *const chase_op_names[] = {"follow", "inc", "addnext0", NULL};
static const char *const chase_pages_names[] = {"4k", "thp", "hugetlb-2m", NULL};
static const ml_page_kind chase_page_kinds[] = {ML_PAGES_4K, ML_PAGES_THP, ML_PAGES_HUGETLB_2M};

typedef struct chase_config {
    int64_t working_set_bytes;
    int64_t npad;
    int order;
    int64_t block_pages;
    int layout;
    int op;
    int64_t work_cycles;
    int64_t prefetch_distance;
    int helper_thread;
    int64_t helper_distance;
    int64_t helper_cpu;
    int pages;
    int strict_pages;
    int64_t chains;
    int64_t seed;
    int64_t laps;
    int check;
} chase_config;

typedef struct chase_trace_config {
    chase_config chase; /* first, so the chase parameter offsets apply */
    ml_buffer out;
} chase_trace_config;

/* ---- the walk loops ------------------------------------------------- */

typedef struct chase_walk {
    uint64_t *pos[CHASE_MAX_CHAINS];
    uint64_t *ahead[CHASE_MAX_CHAINS];
    uint64_t work_cycles;
    uint64_t element_bytes;
    int prefetch;
    int helper;
    _Atomic uint64_t *progress;
    uint64_t done;
} chase_walk;

typedef void (*chase_walk_fn)(chase_walk *w, uint64_t steps);

volatile uint64_t chase_sink;

/* `cycles` dependent one-cycle adds of a zero the CPU cannot see as zero.
 * Eight per loop turn keep the loop's own instructions far below the issue
 * width, so the chain runs at one add per cycle even when the core is
 * shared (an SMT sibling on the host). */
static inline __attribute__((always_inline)) uint64_t chase_work(uint64_t x, uint64_t cycles,
                                                                 uint64_t zero)
{
    uint64_t left = cycles;
    for (; left >= 8; left -= 8) {
#if defined(__x86_64__)
        __asm__ volatile(".rept 8\n\tadd %1, %0\n\t.endr" : "+r"(x) : "r"(zero));
#elif defined(__aarch64__)
        __asm__ volatile(".rept 8\n\tadd %0, %0, %1\n\t.endr" : "+r"(x) : "r"(zero));
#else
        for (int i = 0; i < 8; i++) {
            __asm__ volatile("" : "+r"(x));
            x += zero;
        }
#endif
    }
    for (; left; left--) {
#if defined(__x86_64__)
        __asm__ volatile("add %1, %0" : "+r"(x) : "r"(zero));
#elif defined(__aarch64__)
        __asm__ volatile("add %0, %0, %1" : "+r"(x) : "r"(zero));
#else
        __asm__ volatile("" : "+r"(x));
        x += zero;
#endif
    }
    return x;
}

static inline __attribute__((always_inline)) void chase_prefetch_element(const uint64_t *e,
                                                                         uint64_t bytes)
{
    const char *c = (const char *)e;
    for (uint64_t off = 0; off < bytes; off += CHASE_LINE_BYTES)
        __builtin_prefetch(c + off, 0, 3);
}

/* One element of one chain: the operation, then the (optionally delayed)
 * move to the next element. */
static inline __attribute__((always_inline)) uint64_t *
chase_step(uint64_t *cur, const int op, const int variant, uint64_t work, uint64_t zero)
{
    uint64_t *next = (uint64_t *)cur[0];
    if (op == OP_INC)
        cur[1]++;
    else if (op == OP_ADDNEXT0)
        cur[1] += next[1];
    if (variant == VARIANT_GENERAL)
        next = (uint64_t *)chase_work((uint64_t)next, work, zero);
    return next;
}

static inline __attribute__((always_inline)) void
chase_walk_generic(chase_walk *w, uint64_t steps, const int k, const int op, const int variant)
{
    enum { UNROLL_STEPS = 8 };
    /* one chain is unrolled so that loop control hides behind the loads;
     * several chains already give the loop body several loads, and work or
     * prefetch make a step long enough that unrolling only grows the code */
    const int unroll = variant == VARIANT_GENERAL || k > 1 ? 1 : UNROLL_STEPS;
    const int prefetch = variant == VARIANT_GENERAL && w->prefetch;
    const int helper = variant == VARIANT_HELPER || (variant == VARIANT_GENERAL && w->helper);
    uint64_t *p[CHASE_MAX_CHAINS];
    uint64_t *q[CHASE_MAX_CHAINS];
    const uint64_t work = w->work_cycles;
    const uint64_t element_bytes = w->element_bytes;
    uint64_t zero = 0;
    __asm__("" : "+r"(zero)); /* a zero the compiler cannot see through */
    uint64_t done = w->done;
    _Atomic uint64_t *const progress = w->progress;

#pragma GCC unroll 16
    for (int c = 0; c < k; c++) {
        p[c] = w->pos[c];
        q[c] = w->ahead[c];
    }

#define CHASE_ONE_ROUND()                                                      \
    do {                                                                      \
        _Pragma("GCC unroll 16") for (int c = 0; c < k; c++)                  \
        {                                                                     \
            if (prefetch) {                                                   \
                q[c] = (uint64_t *)q[c][0];                                   \
                chase_prefetch_element(q[c], element_bytes);                  \
            }                                                                 \
            p[c] = chase_step(p[c], op, variant, work, zero);                 \
        }                                                                     \
    } while (0)

    for (uint64_t it = steps / (uint64_t)unroll; it; it--) {
        _Pragma("GCC unroll 8") for (int u = 0; u < unroll; u++) CHASE_ONE_ROUND();
        if (helper) {
            done += (uint64_t)unroll;
            atomic_store_explicit(progress, done, memory_order_relaxed);
        }
    }
    for (uint64_t t = steps % (uint64_t)unroll; t; t--)
        CHASE_ONE_ROUND();
#undef CHASE_ONE_ROUND

    if (helper) {
        done = w->done + steps;
        atomic_store_explicit(progress, done, memory_order_relaxed);
    }
    w->done = done;
#pragma GCC unroll 16
    for (int c = 0; c < k; c++) {
        w->pos[c] = p[c];
        w->ahead[c] = q[c];
    }
    chase_sink = (uint64_t)p[0];
}

#define CHASE_DEFINE_WALK(K, OP, V)                                           \
    static void chase_walk_##K##_##OP##_##V(chase_walk *w, uint64_t steps)    \
    {                                                                         \
        chase_walk_generic(w, steps, K, OP, V);                               \
    }
#define CHASE_TABLE_ENTRY(K, OP, V) [K - 1][OP][V] = chase_walk_##K##_##OP##_##V,

#define CHASE_FOR_VARIANTS(M, K, OP) M(K, OP, 0) M(K, OP, 1) M(K, OP, 2)
#define CHASE_FOR_OPS(M, K) CHASE_FOR_VARIANTS(M, K, 0) CHASE_FOR_VARIANTS(M, K, 1) CHASE_FOR_VARIANTS(M, K, 2)
#define CHASE_FOR_CHAINS(M)                                                   \
    CHASE_FOR_OPS(M, 1) CHASE_FOR_OPS(M, 2) CHASE_FOR_OPS(M, 3) CHASE_FOR_OPS(M, 4)     \
    CHASE_FOR_OPS(M, 5) CHASE_FOR_OPS(M, 6) CHASE_FOR_OPS(M, 7) CHASE_FOR_OPS(M, 8)     \
    CHASE_FOR_OPS(M, 9) CHASE_FOR_OPS(M, 10) CHASE_FOR_OPS(M, 11) CHASE_FOR_OPS(M, 12)  \
    CHASE_FOR_OPS(M, 13) CHASE_FOR_OPS(M, 14) CHASE_FOR_OPS(M, 15) CHASE_FOR_OPS(M, 16)

CHASE_FOR_CHAINS(CHASE_DEFINE_WALK)

static const chase_walk_fn chase_walks[CHASE_MAX_CHAINS][OP_COUNT][VARIANT_COUNT] = {
    CHASE_FOR_CHAINS(CHASE_TABLE_ENTRY)};

/* ---- the helper thread (fig. 6.8) ----------------------------------- */

typedef struct chase_helper {
    _Atomic uint64_t progress __attribute__((aligned(64))); /* main's steps */
    _Atomic int go __attribute__((aligned(64)));
    _Atomic int stop;
    pthread_t thread;
    int running;
    int cpu;
    int k;
    uint64_t distance;
    uint64_t element_bytes;
    uint64_t *pos[CHASE_MAX_CHAINS];
    uint64_t sum;
} chase_helper;

static inline void chase_spin_pause(void)
{
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Walk ahead of the main thread, at most `distance` elements, reading every
 * cache line of each element. */
static void *chase_helper_main(void *arg)
{
    chase_helper *h = arg;
    uint64_t steps = 0, sum = 0;
    while (!atomic_load_explicit(&h->go, memory_order_acquire)) {
        if (atomic_load_explicit(&h->stop, memory_order_relaxed))
            return NULL;
        chase_spin_pause();
    }
    while (!atomic_load_explicit(&h->stop, memory_order_relaxed)) {
        uint64_t limit = atomic_load_explicit(&h->progress, memory_order_relaxed) + h->distance;
        if (steps >= limit) {
            chase_spin_pause();
            continue;
        }
        uint64_t batch = limit - steps < 64 ? limit - steps : 64;
        for (uint64_t i = 0; i < batch; i++) {
            for (int c = 0; c < h->k; c++) {
                const volatile uint64_t *e = h->pos[c];
                for (uint64_t off = CHASE_LINE_WORDS; off * sizeof(uint64_t) < h->element_bytes;
                     off += CHASE_LINE_WORDS)
                    sum += e[off];
                h->pos[c] = (uint64_t *)e[0];
            }
        }
        steps += batch;
    }
    h->sum = sum;
    return NULL;
}

/* ---- state ---------------------------------------------------------- */

typedef struct chase_state {
    chase_config cfg;
    ml_region region;
    int mapped;
    char *base;
    uint64_t elements;          /* n: elements in all chains */
    uint64_t chain_elements;    /* elements per chain */
    uint64_t element_bytes;
    uint64_t stride_bytes;      /* distance between element slots */
    uint64_t color_slots;       /* page_per_element: line offsets used in a page */
    uint64_t memory_bytes;
    uint64_t block_elements;
    int k;
    uint64_t *start[CHASE_MAX_CHAINS];
    chase_walk walk;            /* positions carried from sample to sample */
    chase_walk_fn walk_fn;
    double ns_per_step;         /* per step of every chain; 0 until measured */
    uint64_t build_ns;
    uint64_t samples;
    chase_helper *helper;
} chase_state;

static inline uint64_t *chase_element(const chase_state *s, uint64_t i)
{
    uint64_t offset = i * s->stride_bytes;
    if (s->color_slots > 1)
        offset += (i % s->color_slots) * CHASE_LINE_BYTES;
    return (uint64_t *)(s->base + offset);
}

static inline uint64_t chase_index(const chase_state *s, const uint64_t *e)
{
    return (uint64_t)((const char *)e - s->base) / s->stride_bytes;
}

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
        uint64_t *a = chase_element(s, lo + i), *b = chase_element(s, lo + j);
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
        uint64_t *e = chase_element(s, i);
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
    for (uint64_t i = 0; i < s->elements; i++) {
        uint64_t *e = chase_element(s, i);
        /* pad[0] starts distinct so that inc and addnext0 are checkable */
        for (uint64_t w = 1; w <= (uint64_t)s->cfg.npad; w++)
            e[w] = w == 1 ? i + 1 : 0;
        if ((i & (CHASE_BUILD_CHECK_EVERY - 1)) == 0)
            ML_CHECK_INTERRUPT(ctx, err);
    }
    for (int c = 0; c < s->k; c++)
        if (chase_link_chain(s, (uint64_t)c * s->chain_elements, &rng, ctx, err))
            return -1;
    for (uint64_t i = 0; i < s->elements; i++) {
        uint64_t *e = chase_element(s, i);
        e[0] = (uint64_t)chase_element(s, e[0]);
        if ((i & (CHASE_BUILD_CHECK_EVERY - 1)) == 0)
            ML_CHECK_INTERRUPT(ctx, err);
    }
    s->build_ns = ml_now_ns() - started;
    return 0;
}

/* ---- setup ---------------------------------------------------------- */

static void chase_teardown(void *state)
{
    chase_state *s = state;
    if (!s)
        return;
    if (s->mapped)
        ml_region_unmap(&s->region);
    free(s->helper);
    free(s);
}

static int chase_check_config(const chase_config *cfg, chase_state *s, ml_error *err)
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
    if (cfg->op != OP_FOLLOW && cfg->npad < 1)
        return ml_fail(err, ML_ERR_VALUE, 0, "op=%s needs npad >= 1 (it writes pad[0]); npad=%lld",
                       chase_op_names[cfg->op], (long long)cfg->npad);
    s->k = (int)cfg->chains;
    s->chain_elements = fit / (uint64_t)s->k;
    s->elements = s->chain_elements * (uint64_t)s->k;
    if (cfg->layout == LAYOUT_PAGE_PER_ELEMENT) {
        s->stride_bytes = (s->element_bytes + CHASE_PAGE_BYTES - 1) / CHASE_PAGE_BYTES * CHASE_PAGE_BYTES;
        s->color_slots = (s->stride_bytes - s->element_bytes) / CHASE_LINE_BYTES + 1;
    } else {
        s->stride_bytes = s->element_bytes;
        s->color_slots = 1;
    }
    if (__builtin_mul_overflow(s->elements, s->stride_bytes, &s->memory_bytes))
        return ml_fail(err, ML_ERR_MEMORY, 0, "working_set_bytes=%lld with layout=%s overflows the address space",
                       (long long)cfg->working_set_bytes, chase_layout_names[cfg->layout]);
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

static int chase_setup(const void *config, void **state_out, ml_context *ctx, ml_error *err)
{
    const chase_config *cfg = config;
    chase_state *s = calloc(1, sizeof *s);
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the chase state");
    s->cfg = *cfg;
    if (chase_check_config(cfg, s, err))
        goto fail;
    char what[160];
    snprintf(what, sizeof what, "the chase list (working_set_bytes=%lld, npad=%lld, layout=%s)",
             (long long)cfg->working_set_bytes, (long long)cfg->npad, chase_layout_names[cfg->layout]);
    if (ml_check_memory(s->memory_bytes, what, err))
        goto fail;
    /* Huge pages only back whole 2 MiB ranges: a THP list smaller than that
     * gets a full one, as a hugetlb list does. */
    uint64_t map_bytes = s->memory_bytes;
    if (cfg->pages == PAGES_THP)
        map_bytes = (map_bytes + CHASE_HUGE_BYTES - 1) / CHASE_HUGE_BYTES * CHASE_HUGE_BYTES;
    if (ml_region_map(&s->region, map_bytes, chase_page_kinds[cfg->pages], 0,
                      ML_POPULATE_TOUCH, !cfg->strict_pages, err))
        goto fail;
    s->mapped = 1;
    s->base = s->region.base;
    if (chase_build(s, ctx, err))
        goto fail;
    for (int c = 0; c < s->k; c++) {
        s->start[c] = chase_element(s, (uint64_t)c * s->chain_elements);
        s->walk.pos[c] = s->start[c];
        s->walk.ahead[c] = s->start[c];
        for (int64_t d = 0; d < cfg->prefetch_distance; d++)
            s->walk.ahead[c] = (uint64_t *)s->walk.ahead[c][0];
    }
    s->walk.work_cycles = (uint64_t)cfg->work_cycles;
    s->walk.element_bytes = s->element_bytes;
    s->walk.prefetch = cfg->prefetch_distance > 0;
    s->walk.helper = cfg->helper_thread;
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
    *state_out = s;
    return 0;
fail:
    chase_teardown(s);
    return -1;
}

/* ---- one sample ----------------------------------------------------- */

static int chase_pick_helper_cpu(chase_state *s, const cpu_set_t *allowed, int main_cpu, ml_error *err)
{
    long configured = sysconf(_SC_NPROCESSORS_CONF);
    int limit = configured > 0 && configured < CPU_SETSIZE ? (int)configured : CPU_SETSIZE;
    if (s->cfg.helper_cpu >= 0) {
        if (s->cfg.helper_cpu == main_cpu)
            return ml_fail(err, ML_ERR_VALUE, 0,
                           "helper_cpu=%lld is the CPU of the walking thread; choose another one",
                           (long long)s->cfg.helper_cpu);
        if (s->cfg.helper_cpu >= limit)
            return ml_fail(err, ML_ERR_VALUE, 0, "helper_cpu=%lld is not a CPU of this machine (0..%d)",
                           (long long)s->cfg.helper_cpu, limit - 1);
        return (int)s->cfg.helper_cpu;
    }
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (c != main_cpu && CPU_ISSET(c, allowed))
            return c;
    for (int c = 0; c < limit; c++)
        if (c != main_cpu)
            return c;
    return ml_fail(err, ML_ERR_VALUE, 0,
                   "helper_thread=1 needs a second CPU; this machine has %d", limit);
}

static int chase_helper_start(chase_state *s, cpu_set_t *saved, ml_error *err)
{
    chase_helper *h = s->helper;
    int main_cpu = sched_getcpu();
    if (main_cpu < 0)
        return ml_fail(err, ML_ERR_OS, errno, "sched_getcpu failed");
    int rc = pthread_getaffinity_np(pthread_self(), sizeof *saved, saved);
    if (rc)
        return ml_fail(err, ML_ERR_OS, rc, "pthread_getaffinity_np failed");
    int cpu = chase_pick_helper_cpu(s, saved, main_cpu, err);
    if (cpu < 0)
        return -1;
    memset(h, 0, sizeof *h);
    h->cpu = cpu;
    h->k = s->k;
    h->distance = (uint64_t)s->cfg.helper_distance;
    h->element_bytes = s->element_bytes;
    for (int c = 0; c < s->k; c++)
        h->pos[c] = s->walk.pos[c];
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(main_cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_attr_setaffinity_np(&attr, sizeof one, &one);
    rc = pthread_create(&h->thread, &attr, chase_helper_main, h);
    pthread_attr_destroy(&attr);
    if (rc) {
        pthread_setaffinity_np(pthread_self(), sizeof *saved, saved);
        if (rc == EINVAL)
            return ml_fail(err, ML_ERR_VALUE, rc,
                           "helper_cpu=%d cannot be used by this process (affinity or cpuset)", cpu);
        return ml_fail(err, ML_ERR_OS, rc, "cannot start the helper thread on CPU %d", cpu);
    }
    h->running = 1;
    s->walk.progress = &h->progress;
    return 0;
}

static void chase_helper_stop(chase_state *s, const cpu_set_t *saved)
{
    chase_helper *h = s->helper;
    if (!h || !h->running)
        return;
    atomic_store_explicit(&h->stop, 1, memory_order_relaxed);
    pthread_join(h->thread, NULL);
    h->running = 0;
    chase_sink = h->sum;
    pthread_setaffinity_np(pthread_self(), sizeof *saved, saved);
}

typedef struct chase_sample {
    uint64_t steps;   /* per chain */
    uint64_t elapsed_ns;
    uint64_t thread_cpu_ns; /* on-CPU time of the walking thread, same chunks */
} chase_sample;

/* Walk `fixed_steps` steps per chain, or (0) whole laps / steps until
 * target_ns is reached, in timed chunks with interrupt checks between. */
static int chase_walk_sample(chase_state *s, uint64_t fixed_steps, uint64_t target_ns, ml_context *ctx,
                             ml_measurement *counted, chase_sample *out, ml_error *err)
{
    cpu_set_t saved;
    ml_counting counting = {.active = 0};
    uint64_t done = 0, elapsed = 0, on_cpu = 0;
    double estimate = s->ns_per_step;
    const uint64_t lap = s->chain_elements;
    s->walk.done = 0;
    if (s->cfg.helper_thread && chase_helper_start(s, &saved, err))
        return -1;
    if (counted)
        ml_counting_start(&counting, ctx);
    if (s->cfg.helper_thread)
        atomic_store_explicit(&s->helper->go, 1, memory_order_release);
    for (;;) {
        uint64_t wanted;
        if (fixed_steps) {
            wanted = fixed_steps;
        } else if (estimate <= 0) {
            wanted = done + CHASE_PROBE_STEPS;
        } else {
            double remaining_ns = target_ns > elapsed ? (double)(target_ns - elapsed) : 0.0;
            wanted = done + (uint64_t)(remaining_ns / estimate);
            if (wanted >= lap)
                wanted = (wanted + lap - 1) / lap * lap;
        }
        if (wanted <= done)
            break;
        uint64_t chunk = wanted - done;
        uint64_t chunk_limit = estimate > 0 ? (uint64_t)(CHASE_CHUNK_NS / estimate) : CHASE_PROBE_STEPS;
        if (chunk_limit < 1)
            chunk_limit = 1;
        if (chunk > chunk_limit)
            chunk = chunk_limit;
        uint64_t c0 = ml_thread_cpu_ns();
        uint64_t t0 = ml_now_ns();
        s->walk_fn(&s->walk, chunk);
        uint64_t t1 = ml_now_ns();
        on_cpu += ml_thread_cpu_ns() - c0;
        elapsed += t1 - t0;
        done += chunk;
        estimate = (double)(t1 - t0) / (double)chunk;
        if (estimate < 0.01)
            estimate = 0.01;
        if (ml_interrupted(ctx)) {
            if (counted)
                ml_counting_stop(&counting, counted);
            if (s->cfg.helper_thread)
                chase_helper_stop(s, &saved);
            return ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
        }
    }
    if (counted)
        ml_counting_stop(&counting, counted);
    if (s->cfg.helper_thread)
        chase_helper_stop(s, &saved);
    if (done)
        s->ns_per_step = (double)elapsed / (double)done;
    out->steps = done;
    out->elapsed_ns = elapsed;
    out->thread_cpu_ns = on_cpu;
    return 0;
}

static uint64_t chase_mix(uint64_t hash, uint64_t value)
{
    hash ^= value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
    return hash * 0xff51afd7ed558ccdull;
}

/* Untimed proof of the list: from each chain's start, walk two laps
 * counting visits of every element, then hash the memory. */
static int chase_verify(chase_state *s, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    enum { CHECK_LAPS = 2 };
    char what[96];
    snprintf(what, sizeof what, "the visit counters of check=1 (%llu elements)",
             (unsigned long long)s->elements);
    if (ml_check_memory(s->elements * sizeof(uint32_t), what, err))
        return -1;
    uint32_t *visits = calloc(s->elements, sizeof *visits);
    if (!visits)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate %s", what);
    uint64_t order_hash = 0, bad_pointers = 0, outside_chain = 0, back_at_start = 1;
    const char *end = s->base + s->memory_bytes;
    for (int c = 0; c < s->k && !bad_pointers; c++) {
        uint64_t lo = (uint64_t)c * s->chain_elements, hi = lo + s->chain_elements;
        uint64_t *p = s->start[c];
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
                if (lap == 0)
                    order_hash = chase_mix(order_hash, index);
                p = (uint64_t *)p[0];
                if ((i & (CHASE_BUILD_CHECK_EVERY - 1)) == 0 && ml_interrupted(ctx)) {
                    free(visits);
                    return ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
                }
            }
            if (p != s->start[c])
                back_at_start = 0;
        }
    }
    uint64_t minimum = UINT64_MAX, maximum = 0, visited = 0;
    uint64_t checksum = 0;
    for (uint64_t i = 0; i < s->elements; i++) {
        minimum = visits[i] < minimum ? visits[i] : minimum;
        maximum = visits[i] > maximum ? visits[i] : maximum;
        visited += visits[i] > 0;
        const uint64_t *e = chase_element(s, i);
        checksum = chase_mix(checksum, chase_index(s, (const uint64_t *)e[0]));
        if (s->cfg.npad >= 1)
            checksum = chase_mix(checksum, e[1]);
    }
    for (int c = 0; c < s->k; c++)
        checksum = chase_mix(checksum, chase_index(s, s->walk.pos[c]));
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

static void chase_add_layout_metrics(chase_state *s, ml_measurement *out)
{
    int64_t huge = ml_region_huge_bytes(&s->region);
    ml_metric_add(out, "elements", (double)s->elements);
    ml_metric_add(out, "element_bytes", (double)s->element_bytes);
    ml_metric_add(out, "stride_bytes", (double)s->stride_bytes);
    ml_metric_add(out, "working_set_bytes_used", (double)(s->elements * s->element_bytes));
    ml_metric_add(out, "memory_bytes", (double)s->memory_bytes);
    ml_metric_add(out, "build_ns", (double)s->build_ns);
    ml_metric_add(out, "populate_ns", (double)s->region.populate_ns);
    ml_metric_add(out, "pages_granted_hugetlb", s->region.granted == ML_PAGES_HUGETLB_2M ? 1.0 : 0.0);
    if (huge >= 0) {
        ml_metric_add(out, "huge_page_bytes", (double)huge);
        ml_metric_add(out, "huge_page_fraction",
                      s->region.bytes ? (double)huge / (double)s->region.bytes : 0.0);
    }
}

static int chase_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    chase_state *s = state;
    chase_sample sample;
    uint64_t target = ctx && ctx->target_ns ? ctx->target_ns : CHASE_DEFAULT_TARGET_NS;
    uint64_t fixed = s->cfg.laps > 0 ? (uint64_t)s->cfg.laps * s->chain_elements : 0;
    if (chase_walk_sample(s, fixed, target, ctx, out, &sample, err))
        return -1;
    s->samples++;
    out->elapsed_ns = sample.elapsed_ns;
    out->units = (double)sample.steps * (double)s->k;
    out->bytes = 0;
    chase_add_layout_metrics(s, out);
    ml_metric_add(out, "steps_per_chain", (double)sample.steps);
    ml_metric_add(out, "laps", (double)sample.steps / (double)s->chain_elements);
    ml_metric_add(out, "thread_cpu_ns", (double)sample.thread_cpu_ns);
    if (sample.steps % s->chain_elements == 0) {
        int at_start = 1;
        for (int c = 0; c < s->k; c++)
            at_start &= s->walk.pos[c] == s->start[c];
        ml_metric_add(out, "end_at_start", at_start);
    }
    if (s->cfg.helper_thread)
        ml_metric_add(out, "helper_cpu", s->helper->cpu);
    if (s->cfg.check)
        return chase_verify(s, ctx, out, err);
    return 0;
}

/* ---- the trace family: the list and pad[0] after a fixed walk -------- */

typedef struct chase_trace_state {
    chase_state *chase;
    ml_buffer out;
} chase_trace_state;

static void chase_trace_teardown(void *state)
{
    chase_trace_state *t = state;
    if (!t)
        return;
    chase_teardown(t->chase);
    free(t);
}

static int chase_trace_setup(const void *config, void **state_out, ml_context *ctx, ml_error *err)
{
    const chase_trace_config *cfg = config;
    if (cfg->out.itemsize != sizeof(uint64_t))
        return ml_fail(err, ML_ERR_VALUE, 0, "out has items of %zu bytes; it must hold uint64 (8 bytes)",
                       cfg->out.itemsize);
    chase_state probe;
    memset(&probe, 0, sizeof probe);
    if (chase_check_config(&cfg->chase, &probe, err))
        return -1;
    uint64_t needed = 2 * probe.elements * sizeof(uint64_t);
    if (cfg->out.bytes < needed)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "out holds %zu bytes; this list of %llu elements needs %llu (2 uint64 per element)",
                       cfg->out.bytes, (unsigned long long)probe.elements, (unsigned long long)needed);
    chase_trace_state *t = calloc(1, sizeof *t);
    if (!t)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "cannot allocate the trace state");
    t->out = cfg->out;
    if (chase_setup(&cfg->chase, (void **)&t->chase, ctx, err)) {
        free(t);
        return -1;
    }
    *state_out = t;
    return 0;
}

/* Walk `laps` laps with the measured loops, then write each element's
 * successor index to out[0:n] and its pad[0] (0 when npad=0) to out[n:2n]. */
static int chase_trace_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    chase_trace_state *t = state;
    chase_state *s = t->chase;
    chase_sample sample = {0, 0, 0};
    uint64_t *words = t->out.data;
    if (s->cfg.laps > 0 &&
        chase_walk_sample(s, (uint64_t)s->cfg.laps * s->chain_elements, 0, ctx, NULL, &sample, err))
        return -1;
    for (uint64_t i = 0; i < s->elements; i++) {
        const uint64_t *e = chase_element(s, i);
        words[i] = chase_index(s, (const uint64_t *)e[0]);
        words[s->elements + i] = s->cfg.npad >= 1 ? e[1] : 0;
    }
    ml_counter_values_missing(&out->counters, 0);
    out->elapsed_ns = sample.elapsed_ns;
    out->units = (double)sample.steps * (double)s->k;
    out->bytes = 0;
    ml_metric_add(out, "elements", (double)s->elements);
    ml_metric_add(out, "chain_elements", (double)s->chain_elements);
    ml_metric_add(out, "steps_per_chain", (double)sample.steps);
    for (int c = 0; c < s->k; c++) {
        char name[ML_METRIC_NAME_MAX];
        snprintf(name, sizeof name, "position_%d", c);
        ml_metric_add(out, name, (double)chase_index(s, s->walk.pos[c]));
    }
    return 0;
}

#define CHASE_PARAMS()                                                                      \
    {"working_set_bytes", ML_PARAM_INT, offsetof(chase_config, working_set_bytes), 1024, 1ll << 46, 0, 0, NULL, 0}, \
    {"npad", ML_PARAM_INT, offsetof(chase_config, npad), 0, 65535, 0, 0, NULL, 0},                     \
    {"order", ML_PARAM_CHOICE, offsetof(chase_config, order), 0, 0, 0, 0, chase_order_names, 0},       \
    {"block_pages", ML_PARAM_INT, offsetof(chase_config, block_pages), 1, 1ll << 40, 0, 0, NULL, 0},    \
    {"layout", ML_PARAM_CHOICE, offsetof(chase_config, layout), 0, 0, 0, 0, chase_layout_names, 0},    \
    {"op", ML_PARAM_CHOICE, offsetof(chase_config, op), 0, 0, 0, 0, chase_op_names, 0},                \
    {"work_cycles", ML_PARAM_INT, offsetof(chase_config, work_cycles), 0, 1000000, 0, 0, NULL, 0},     \
    {"prefetch_distance", ML_PARAM_INT, offsetof(chase_config, prefetch_distance), 0, 1 << 20, 0, 0, NULL, 0}, \
    {"helper_thread", ML_PARAM_BOOL, offsetof(chase_config, helper_thread), 0, 1, 0, 0, NULL, 0},      \
    {"helper_distance", ML_PARAM_INT, offsetof(chase_config, helper_distance), 1, 1 << 24, 0, 0, NULL, 0}, \
    {"helper_cpu", ML_PARAM_INT, offsetof(chase_config, helper_cpu), -1, CPU_SETSIZE - 1, 0, 0, NULL, 0}, \
    {"pages", ML_PARAM_CHOICE, offsetof(chase_config, pages), 0, 0, 0, 0, chase_pages_names, 0},       \
    {"strict_pages", ML_PARAM_BOOL, offsetof(chase_config, strict_pages), 0, 1, 0, 0, NULL, 0},        \
    {"chains", ML_PARAM_INT, offsetof(chase_config, chains), 1, CHASE_MAX_CHAINS, 0, 0, NULL, 0},      \
    {"seed", ML_PARAM_INT, offsetof(chase_config, seed), 0, INT64_MAX, 0, 0, NULL, 0},                 \
    {"laps", ML_PARAM_INT, offsetof(chase_config, laps), 0, 1ll << 40, 0, 0, NULL, 0},                 \
    {"check", ML_PARAM_BOOL, offsetof(chase_config, check), 0, 1, 0, 0, NULL, 0}

static const ml_param chase_params[] = {
    CHASE_PARAMS(),
    {0},
};

ML_FAMILY(chase) = {
    .name = "chase",
    .description = "pointer chase through a circular list of struct { next; pad[npad]; }",
    .config_size = sizeof(chase_config),
    .params = chase_params,
    .setup = chase_setup,
    .measure = chase_measure,
    .teardown = chase_teardown,
};

static const ml_param chase_trace_params[] = {
    CHASE_PARAMS(),
    {"out", ML_PARAM_BUFFER, offsetof(chase_trace_config, out), 0, 0, 0, 0, NULL, 1},
    {0},
};

ML_FAMILY(chase_trace) = {
    .name = "chase_trace",
    .description = "the chase list as successor indices and pad[0] after a fixed number of laps",
    .config_size = sizeof(chase_trace_config),
    .params = chase_trace_params,
    .setup = chase_trace_setup,
    .measure = chase_trace_measure,
    .teardown = chase_trace_teardown,
};
