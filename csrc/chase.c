/* Pointer chase: Drepper's list-walking experiments ("What every programmer
 * should know about memory", sections 3.3, 3.5.2, 5.4, 6.2, 6.3, 7.1, 7.5).
 *
 * A working set holds n elements `struct { next; uint64_t pad[npad]; }`
 * linked into one circular list per chain.  The timed loop does nothing but
 * follow `next` (plus the operation, work, prefetch or helper-thread
 * progress that the parameters ask for); one specialised loop exists for
 * every combination so that no flag is tested inside it.
 *
 * Layout knobs move the elements without changing the loop: the pointer may
 * sit in any word of its element (the critical word, fig. 3.30), elements
 * may start off their natural alignment (fig. 6.4) or sit a fixed number of
 * element slots apart (cache associativity, fig. 6.5), and the memory may
 * be bound to one NUMA node (figs. 5.3/5.4).  Several threads, each pinned
 * to its own CPU, may walk one list or a list each (figs. 3.19-3.22).
 *
 * Two families live here: `chase` (the measurement) and `chase_trace`,
 * which builds the same list, walks it a fixed number of laps with the same
 * loops and copies the list (successor indices and pad[0]) into a buffer so
 * that Python can check it against its own reference. */
#define _GNU_SOURCE
#include "memlab.h"

#include <errno.h>
#include <linux/mempolicy.h>
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

/* Elements may be misaligned on purpose (fig. 6.4): every access goes
 * through a word type the compiler may not assume aligned.  On x86-64 and
 * AArch64 the loads and stores are the same instructions as for uint64_t. */
typedef uint64_t chase_word __attribute__((aligned(1)));

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
#define CHASE_MAX_THREADS 64
#define CHASE_WORKER_SLICE_NS 1000000.0 /* a worker's timed stretch between looks at the stop flag */
#define CHASE_CENSUS_PAGES (1u << 16)   /* pages asked where they live (move_pages) */
#define CHASE_THREAD_CPU_METRICS 4      /* thread_<t>_cpu reported for the first threads */

enum chase_order { ORDER_SEQUENTIAL, ORDER_RANDOM, ORDER_RANDOM_BLOCKS };
enum chase_layout { LAYOUT_PACKED, LAYOUT_PAGE_PER_ELEMENT };
enum chase_op { OP_FOLLOW, OP_INC, OP_ADDNEXT0, OP_ADDNEXTLAST, OP_ADDPAIR, OP_COUNT };
enum chase_thread_lists { THREAD_LISTS_SHARED, THREAD_LISTS_OWN };
enum chase_pages { PAGES_4K, PAGES_THP, PAGES_HUGETLB_2M };

/* Loop variants: the plain chase, the chase publishing its progress to the
 * helper thread, and the general loop for work and prefetch, whose steps are
 * long enough that testing two loop-invariant flags costs nothing. */
enum { VARIANT_PLAIN, VARIANT_HELPER, VARIANT_GENERAL, VARIANT_COUNT };

static const char *const chase_order_names[] = {"sequential", "random", "random_blocks", NULL};
static const char *const chase_layout_names[] = {"packed", "page_per_element", NULL};
static const char *const chase_op_names[] = {"follow", "inc", "addnext0", "addnextlast", "addpair", NULL};
static const char *const chase_thread_lists_names[] = {"shared", "own", NULL};
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
    int64_t pair_word;        /* addpair: word of the second value (pad[0] is word 1) */
    int64_t pointer_word;     /* the word of each element holding `next` */
    int64_t misalign_bytes;   /* every element this many bytes past its natural place */
    int64_t element_distance; /* element slots from one element to the next (1: packed) */
    int64_t threads;          /* walking threads, one per CPU */
    int thread_lists;         /* shared: all on one list; own: a list each */
    int64_t walk_cpu;         /* -1: wherever the caller runs */
    int64_t memory_node;      /* -1: the kernel's default policy */
} chase_config;

typedef struct chase_trace_config {
    chase_config chase; /* first, so the chase parameter offsets apply */
    ml_buffer out;
} chase_trace_config;

/* ---- the walk loops ------------------------------------------------- */

typedef struct chase_walk {
    chase_word *pos[CHASE_MAX_CHAINS];
    chase_word *ahead[CHASE_MAX_CHAINS];
    uint64_t work_cycles;
    uint64_t element_bytes;
    uint64_t last_word; /* addnextlast: pad[npad - 1] is word npad */
    uint64_t pair_word; /* addpair: the second value */
    uint64_t sum;       /* addpair: what the values added up to */
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

static inline __attribute__((always_inline)) void chase_prefetch_element(const chase_word *e,
                                                                         uint64_t bytes)
{
    const char *c = (const char *)e;
    for (uint64_t off = 0; off < bytes; off += CHASE_LINE_BYTES)
        __builtin_prefetch(c + off, 0, 3);
}

/* One element of one chain: the operation, then the (optionally delayed)
 * move to the next element. */
static inline __attribute__((always_inline)) chase_word *
chase_step(chase_word *cur, const int op, const int variant, uint64_t work, uint64_t zero,
           uint64_t last, uint64_t pair, uint64_t *sum)
{
    chase_word *next = (chase_word *)cur[0];
    if (op == OP_INC)
        cur[1]++;
    else if (op == OP_ADDNEXT0)
        cur[1] += next[1];
    else if (op == OP_ADDNEXTLAST)
        cur[1] += next[last];
    else if (op == OP_ADDPAIR)
        *sum += cur[1] + cur[pair];
    if (variant == VARIANT_GENERAL)
        next = (chase_word *)chase_work((uint64_t)next, work, zero);
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
    chase_word *p[CHASE_MAX_CHAINS];
    chase_word *q[CHASE_MAX_CHAINS];
    const uint64_t work = w->work_cycles;
    const uint64_t element_bytes = w->element_bytes;
    const uint64_t last = w->last_word, pair = w->pair_word;
    uint64_t sum = w->sum;
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
                q[c] = (chase_word *)q[c][0];                                 \
                chase_prefetch_element(q[c], element_bytes);                  \
            }                                                                 \
            p[c] = chase_step(p[c], op, variant, work, zero, last, pair, &sum); \
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
    w->sum = sum;
    chase_sink = (uint64_t)p[0];
}

#define CHASE_DEFINE_WALK(K, OP, V)                                           \
    static void chase_walk_##K##_##OP##_##V(chase_walk *w, uint64_t steps)    \
    {                                                                         \
        chase_walk_generic(w, steps, K, OP, V);                               \
    }
#define CHASE_TABLE_ENTRY(K, OP, V) [K - 1][OP][V] = chase_walk_##K##_##OP##_##V,

#define CHASE_FOR_VARIANTS(M, K, OP) M(K, OP, 0) M(K, OP, 1) M(K, OP, 2)
#define CHASE_FOR_OPS(M, K)                                                   \
    CHASE_FOR_VARIANTS(M, K, 0) CHASE_FOR_VARIANTS(M, K, 1) CHASE_FOR_VARIANTS(M, K, 2) \
    CHASE_FOR_VARIANTS(M, K, 3) CHASE_FOR_VARIANTS(M, K, 4)
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
    int cpu;
    int smt_sibling;      /* 1: cpu shares the walking thread's core */
    int sibling_existed;  /* 1: the walking CPU has an SMT sibling this process may use */
    int k;
    uint64_t distance;
    uint64_t element_bytes;
    chase_word *pos[CHASE_MAX_CHAINS];
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
 * cache line of each element (the team's one worker). */
static void chase_helper_body(void *arg, ml_team *team)
{
    chase_helper *h = arg;
    uint64_t steps = 0, sum = 0;
    while (!ml_team_stopping(team)) {
        uint64_t limit = atomic_load_explicit(&h->progress, memory_order_relaxed) + h->distance;
        if (steps >= limit) {
            chase_spin_pause();
            continue;
        }
        uint64_t batch = limit - steps < 64 ? limit - steps : 64;
        for (uint64_t i = 0; i < batch; i++) {
            for (int c = 0; c < h->k; c++) {
                const volatile chase_word *e = h->pos[c];
                for (uint64_t off = CHASE_LINE_WORDS; off * sizeof(uint64_t) < h->element_bytes;
                     off += CHASE_LINE_WORDS)
                    sum += e[off];
                h->pos[c] = (chase_word *)e[0];
            }
        }
        steps += batch;
    }
    h->sum = sum;
}

/* ---- state ---------------------------------------------------------- */

/* The helper and the other walking threads need little stack. */
#define CHASE_THREAD_STACK_BYTES (1u << 16)

struct chase_state;

/* One walking thread: thread 0 is the caller, the others a team started
 * for each sample, each pinned to its own CPU. */
typedef struct chase_walker {
    chase_walk walk; /* positions carried from sample to sample */
    chase_word *start[CHASE_MAX_CHAINS];
    struct chase_state *state;
    int cpu;
    char what[48];        /* "walking thread 1 of threads=2", for messages */
    double ns_per_step;   /* this thread's speed in its previous slice */
    uint64_t fixed_steps; /* this sample: 0 walks until told to stop */
    uint64_t steps, elapsed_ns, cpu_ns; /* this sample */
} __attribute__((aligned(64))) chase_walker;

typedef struct chase_state {
    chase_config cfg;
    ml_region region;
    int mapped;
    char *base;
    uint64_t elements;          /* n: elements in all chains */
    uint64_t chain_elements;    /* elements per chain */
    uint64_t element_bytes;
    uint64_t stride_bytes;      /* one element slot (packed: the element; page_per_element: pages) */
    uint64_t slot_bytes;        /* from one element to the next: element_distance slots */
    uint64_t color_slots;       /* page_per_element: line offsets used in a page */
    uint64_t misalign_bytes;
    uint64_t pointer_offset;    /* bytes from an element's start to its `next` */
    uint64_t pad0_word;         /* the first word that is not `next` */
    uint64_t memory_bytes;
    uint64_t block_elements;
    int k;                      /* chains walked by each thread */
    int total_chains;           /* chains in memory: k, or k per thread with own lists */
    int threads;
    chase_walker *walkers;      /* [threads] */
    chase_walk_fn walk_fn;
    double ns_per_step;         /* per step of every chain; 0 until measured */
    uint64_t build_ns;
    uint64_t samples;
    chase_helper *helper;
    ml_team team;               /* walkers 1 .. threads - 1, or the helper */
    ml_team_time main_time;     /* thread 0's walk, this sample */
    int numa_nodes;             /* nodes with memory */
    int census_node;            /* the node the pages were counted against */
    ml_node_census census;
    int policy_mode, policy_node;
} chase_state;

/* The start of element i. */
static inline char *chase_element_start(const chase_state *s, uint64_t i)
{
    uint64_t offset = s->misalign_bytes + i * s->slot_bytes;
    if (s->color_slots > 1)
        offset += (i % s->color_slots) * CHASE_LINE_BYTES;
    return s->base + offset;
}

/* Element i as the list sees it: the address of its `next` word. */
static inline chase_word *chase_element(const chase_state *s, uint64_t i)
{
    return (chase_word *)(chase_element_start(s, i) + s->pointer_offset);
}

static inline uint64_t chase_index(const chase_state *s, const chase_word *e)
{
    return (uint64_t)((const char *)e - s->base - s->misalign_bytes) / s->slot_bytes;
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

static void chase_teardown(void *state)
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

static int chase_usable_cpus(cpu_set_t *allowed)
{
    CPU_ZERO(allowed);
    if (pthread_getaffinity_np(pthread_self(), sizeof *allowed, allowed))
        return 0;
    return CPU_COUNT(allowed);
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

static void chase_format_cpus(const cpu_set_t *set, char *out, size_t size)
{
    size_t used = 0;
    out[0] = 0;
    for (int c = 0; c < CPU_SETSIZE && used + 8 < size; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int last = c;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
            last++;
        used += (size_t)snprintf(out + used, size - used, used ? ",%d" : "%d", c);
        if (last > c)
            used += (size_t)snprintf(out + used, size - used, "-%d", last);
        c = last;
    }
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

static int chase_setup(const void *config, void **state_out, ml_context *ctx, ml_error *err)
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
    cpu_set_t allowed;
    int usable = chase_usable_cpus(&allowed);
    if (cfg->threads > usable) {
        char cpus[256];
        chase_format_cpus(&allowed, cpus, sizeof cpus);
        ml_fail(err, ML_ERR_VALUE, 0, "threads=%lld needs as many CPUs; this process may use %d (%s)",
                (long long)cfg->threads, usable, cpus);
        goto fail;
    }
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

/* ---- CPUs for the walking threads and the helper ---------------------- */

/* The helper's CPU: helper_cpu if given; else the walking CPU's SMT sibling
 * (the source's placement: the two share the core's caches), else any
 * other CPU this process may use. */
static int chase_pick_helper_cpu(chase_state *s, const cpu_set_t *allowed, int main_cpu, ml_error *err)
{
    chase_helper *h = s->helper;
    long configured = sysconf(_SC_NPROCESSORS_CONF);
    int limit = configured > 0 && configured < CPU_SETSIZE ? (int)configured : CPU_SETSIZE;
    ml_cpu_mask siblings;
    ml_cpu_smt_siblings(main_cpu, &siblings);
    h->sibling_existed = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (c != main_cpu && CPU_ISSET(c, allowed) && ml_cpu_mask_has(&siblings, c))
            h->sibling_existed = 1;
    int cpu = -1;
    if (s->cfg.helper_cpu >= 0) {
        if (s->cfg.helper_cpu == main_cpu)
            return ml_fail(err, ML_ERR_VALUE, 0,
                           "helper_cpu=%lld is the CPU of the walking thread; choose another one",
                           (long long)s->cfg.helper_cpu);
        if (s->cfg.helper_cpu >= limit)
            return ml_fail(err, ML_ERR_VALUE, 0, "helper_cpu=%lld is not a CPU of this machine (0..%d)",
                           (long long)s->cfg.helper_cpu, limit - 1);
        cpu = (int)s->cfg.helper_cpu;
    }
    for (int pass = 0; cpu < 0 && pass < 2; pass++)
        for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
            if (c != main_cpu && CPU_ISSET(c, allowed) && (pass == 1 || ml_cpu_mask_has(&siblings, c)))
                cpu = c;
    for (int c = 0; c < limit && cpu < 0; c++)
        if (c != main_cpu)
            cpu = c;
    if (cpu < 0)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "helper_thread=1 needs a second CPU; this machine has %d", limit);
    h->smt_sibling = ml_cpu_mask_has(&siblings, cpu);
    return cpu;
}

/* The walking threads' CPUs: thread 0 on main_cpu, then one CPU per core
 * not yet used (as the source's four threads on four cores), then SMT
 * siblings of the used cores. */
static int chase_pick_thread_cpus(chase_state *s, const cpu_set_t *allowed, int main_cpu, ml_error *err)
{
    ml_cpu_mask used_cores;
    ml_cpu_mask_clear(&used_cores);
    int picked = 0;
    s->walkers[picked++].cpu = main_cpu;
    ml_cpu_mask siblings;
    ml_cpu_smt_siblings(main_cpu, &siblings);
    for (int i = 0; i < ML_MAX_CPUS / 64; i++)
        used_cores.bits[i] |= siblings.bits[i];
    for (int pass = 0; pass < 2 && picked < s->threads; pass++) {
        for (int c = 0; c < CPU_SETSIZE && picked < s->threads; c++) {
            if (!CPU_ISSET(c, allowed) || c == main_cpu)
                continue;
            int taken = 0;
            for (int t = 0; t < picked; t++)
                taken |= s->walkers[t].cpu == c;
            if (taken || (pass == 0 && ml_cpu_mask_has(&used_cores, c)))
                continue;
            s->walkers[picked++].cpu = c;
            ml_cpu_smt_siblings(c, &siblings);
            for (int i = 0; i < ML_MAX_CPUS / 64; i++)
                used_cores.bits[i] |= siblings.bits[i];
        }
    }
    if (picked < s->threads) {
        char cpus[256];
        chase_format_cpus(allowed, cpus, sizeof cpus);
        return ml_fail(err, ML_ERR_VALUE, 0, "threads=%d needs as many CPUs; this process may use %d (%s)",
                       s->threads, CPU_COUNT(allowed), cpus);
    }
    return 0;
}

static int chase_pin_self(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}


static int chase_helper_start(chase_state *s, const cpu_set_t *allowed, int main_cpu, ml_context *ctx,
                              ml_error *err)
{
    chase_helper *h = s->helper;
    chase_walk *walk = &s->walkers[0].walk;
    memset(h, 0, sizeof *h);
    int cpu = chase_pick_helper_cpu(s, allowed, main_cpu, err);
    if (cpu < 0)
        return -1;
    h->cpu = cpu;
    h->k = s->k;
    h->distance = (uint64_t)s->cfg.helper_distance;
    h->element_bytes = s->element_bytes;
    for (int c = 0; c < s->k; c++)
        h->pos[c] = walk->pos[c];
    s->team.workers[0] = (ml_team_worker){.body = chase_helper_body, .arg = h, .cpu = cpu};
    if (ml_team_start(&s->team, ctx, err))
        return -1;
    walk->progress = &h->progress;
    return 0;
}

/* ---- the other walking threads (figs. 3.19-3.22) ---------------------- */

/* Walk in ~1 ms timed slices until the team stops (or until fixed_steps),
 * summing only the time spent walking. */
static void chase_worker_body(void *arg, ml_team *team)
{
    chase_walker *w = arg;
    chase_state *s = w->state;
    double estimate = w->ns_per_step;
    uint64_t done = 0, elapsed = 0, on_cpu = 0;
    while (!ml_team_stopping(team)) {
        uint64_t n = estimate > 0 ? (uint64_t)(CHASE_WORKER_SLICE_NS / estimate) : CHASE_PROBE_STEPS;
        if (n < 1)
            n = 1;
        if (w->fixed_steps) {
            if (done >= w->fixed_steps)
                break;
            if (n > w->fixed_steps - done)
                n = w->fixed_steps - done;
        }
        uint64_t c0 = ml_thread_cpu_ns();
        uint64_t t0 = ml_now_ns();
        s->walk_fn(&w->walk, n);
        uint64_t t1 = ml_now_ns();
        on_cpu += ml_thread_cpu_ns() - c0;
        elapsed += t1 - t0;
        done += n;
        estimate = (double)(t1 - t0) / (double)n;
        if (estimate < 0.01)
            estimate = 0.01;
    }
    w->ns_per_step = estimate;
    w->steps = done;
    w->elapsed_ns = elapsed;
    w->cpu_ns = on_cpu;
}

static int chase_workers_start(chase_state *s, uint64_t fixed_steps, ml_context *ctx, ml_error *err)
{
    for (int t = 1; t < s->threads; t++) {
        chase_walker *w = &s->walkers[t];
        w->fixed_steps = fixed_steps;
        w->steps = w->elapsed_ns = w->cpu_ns = 0;
        snprintf(w->what, sizeof w->what, "walking thread %d of threads=%d", t, s->threads);
        s->team.workers[t - 1] = (ml_team_worker){.body = chase_worker_body, .arg = w, .cpu = w->cpu, .what = w->what};
    }
    return ml_team_start(&s->team, ctx, err);
}

/* ---- one sample ----------------------------------------------------- */

typedef struct chase_sample {
    uint64_t steps;   /* per chain, of the thread reported (the fastest) */
    uint64_t elapsed_ns;
    uint64_t thread_cpu_ns; /* on-CPU time of that thread, same chunks */
    int fastest;      /* the thread reported */
    int main_cpu;     /* -1: not pinned */
} chase_sample;

/* Pin the walking thread (and place helper or other walkers) for the
 * sample; `saved` gets the affinity to restore. */
static int chase_sample_begin(chase_state *s, uint64_t fixed_steps, cpu_set_t *saved, int *main_cpu,
                              ml_context *ctx, ml_error *err)
{
    *main_cpu = -1;
    int rc = pthread_getaffinity_np(pthread_self(), sizeof *saved, saved);
    if (rc)
        return ml_fail(err, ML_ERR_OS, rc, "pthread_getaffinity_np failed");
    if (s->cfg.walk_cpu < 0 && !s->cfg.helper_thread && s->threads == 1)
        return 0;
    int cpu = (int)s->cfg.walk_cpu;
    if (cpu >= 0 && (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, saved))) {
        char cpus[256];
        chase_format_cpus(saved, cpus, sizeof cpus);
        return ml_fail(err, ML_ERR_VALUE, 0, "walk_cpu=%d is not a CPU this process may use (%s)", cpu,
                       cpus);
    }
    if (cpu < 0)
        cpu = sched_getcpu();
    if (cpu < 0)
        return ml_fail(err, ML_ERR_OS, errno, "sched_getcpu failed");
    if (s->threads > 1 && chase_pick_thread_cpus(s, saved, cpu, err))
        return -1;
    if (s->cfg.helper_thread && chase_helper_start(s, saved, cpu, ctx, err))
        return -1;
    if (s->threads > 1 && chase_workers_start(s, fixed_steps, ctx, err))
        return -1;
    chase_pin_self(cpu);
    s->walkers[0].cpu = cpu;
    *main_cpu = cpu;
    return 0;
}

static void chase_sample_end(chase_state *s, const cpu_set_t *saved, int main_cpu)
{
    int helped = s->cfg.helper_thread && s->team.started;
    ml_team_stop(&s->team);
    if (helped)
        chase_sink = s->helper->sum;
    if (main_cpu >= 0)
        pthread_setaffinity_np(pthread_self(), sizeof *saved, saved);
}

/* Walk `fixed_steps` steps per chain, or (0) whole laps / steps until
 * target_ns is reached, in timed chunks with interrupt checks between.
 * With threads > 1 the others walk at the same time, from the release to
 * the end of this thread's walk (or their own fixed_steps). */
static int chase_walk_sample(chase_state *s, uint64_t fixed_steps, uint64_t target_ns, ml_context *ctx,
                             ml_measurement *counted, chase_sample *out, ml_error *err)
{
    cpu_set_t saved;
    ml_counting counting = {.active = 0};
    uint64_t done = 0, elapsed = 0, on_cpu = 0;
    double estimate = s->ns_per_step;
    const uint64_t lap = s->chain_elements;
    chase_walker *me = &s->walkers[0];
    me->walk.done = 0;
    if (chase_sample_begin(s, fixed_steps, &saved, &out->main_cpu, ctx, err)) {
        chase_sample_end(s, &saved, out->main_cpu);
        return -1;
    }
    if (counted)
        ml_counting_start(&counting, ctx);
    /* the timed walk starts once every other thread is awake too (a loaded
     * machine may take a while to schedule them) */
    if (s->team.started && ml_team_release(&s->team, ctx, err)) {
        if (counted)
            ml_counting_stop(&counting, counted);
        chase_sample_end(s, &saved, out->main_cpu);
        return -1;
    }
    uint64_t main_cpu_start = ml_thread_cpu_ns();
    s->main_time = (ml_team_time){.start_ns = ml_now_ns(), .ran_on_cpu = -1};
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
        s->walk_fn(&me->walk, chunk);
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
            chase_sample_end(s, &saved, out->main_cpu);
            return ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
        }
    }
    s->main_time.end_ns = ml_now_ns();
    s->main_time.cpu_ns = ml_thread_cpu_ns() - main_cpu_start;
    s->main_time.ran_on_cpu = sched_getcpu();
    /* every thread walks its fixed laps to the end: wait, checking Ctrl-C */
    if (s->threads > 1 && fixed_steps && ml_team_wait(&s->team, 0, 0, NULL, NULL, ctx, err) < 0) {
        if (counted)
            ml_counting_stop(&counting, counted);
        chase_sample_end(s, &saved, out->main_cpu);
        return -1;
    }
    if (counted)
        ml_counting_stop(&counting, counted);
    chase_sample_end(s, &saved, out->main_cpu);
    if (done)
        s->ns_per_step = (double)elapsed / (double)done;
    me->steps = done;
    me->elapsed_ns = elapsed;
    me->cpu_ns = on_cpu;
    out->fastest = 0;
    for (int t = 1; t < s->threads; t++) {
        const chase_walker *w = &s->walkers[t], *best = &s->walkers[out->fastest];
        if (w->steps && (double)w->elapsed_ns * (double)best->steps < (double)best->elapsed_ns * (double)w->steps)
            out->fastest = t;
    }
    const chase_walker *fastest = &s->walkers[out->fastest];
    out->steps = fastest->steps;
    out->elapsed_ns = fastest->elapsed_ns;
    out->thread_cpu_ns = fastest->cpu_ns;
    return 0;
}

static uint64_t chase_mix(uint64_t hash, uint64_t value)
{
    hash ^= value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
    return hash * 0xff51afd7ed558ccdull;
}

/* Untimed proof of the list: from every thread's start on each of its
 * chains, walk two laps counting visits of every element (the counts start
 * again for each thread), then hash the memory. */
static int chase_verify(chase_state *s, ml_context *ctx, ml_measurement *out, ml_error *err)
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

static void chase_add_layout_metrics(chase_state *s, ml_measurement *out)
{
    int64_t huge = ml_region_huge_bytes(&s->region);
    ml_metric_add(out, "elements", (double)s->elements);
    ml_metric_add(out, "element_bytes", (double)s->element_bytes);
    ml_metric_add(out, "stride_bytes", (double)s->slot_bytes);
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
    ml_region_facts(out, &s->region, huge);
}

/* Where the memory is, and how far from the walking CPU (figs. 5.3/5.4). */
static void chase_add_numa_metrics(chase_state *s, ml_measurement *out, int main_cpu)
{
    int cpu = main_cpu >= 0 ? main_cpu : sched_getcpu();
    int walk_node = cpu >= 0 ? ml_cpu_node(cpu) : -1;
    if (walk_node < 0 && s->numa_nodes == 1)
        walk_node = 0;
    ml_metric_add(out, "numa_nodes", s->numa_nodes);
    ml_metric_add(out, "walk_node", walk_node);
    ml_metric_add(out, "memory_node_checked", s->census_node);
    if (s->census.queried)
        ml_metric_add(out, "pages_on_memory_node_fraction",
                      (double)s->census.on_node / (double)s->census.queried);
    int distance = walk_node >= 0 ? ml_node_distance(walk_node, s->census_node) : -1;
    if (distance > 0)
        ml_metric_add(out, "numa_distance", distance);
    if (s->cfg.memory_node >= 0)
        ml_metric_add(out, "memory_policy_bound",
                      s->policy_mode == MPOL_BIND && s->policy_node == s->cfg.memory_node);
}

static void chase_add_thread_metrics(chase_state *s, ml_measurement *out, const chase_sample *sample)
{
    cpu_set_t allowed;
    ml_metric_add(out, "cpus_usable", chase_usable_cpus(&allowed));
    if (sample->main_cpu >= 0)
        ml_metric_add(out, "walk_cpu_used", sample->main_cpu);
    if (s->threads == 1)
        return;
    double slowest = 0.0, total = 0.0, throughput = 0.0;
    ml_team_time times[CHASE_MAX_THREADS];
    int walked = 0;
    ml_cpu_mask cores;
    ml_cpu_mask_clear(&cores);
    int distinct_cores = 0;
    for (int t = 0; t < s->threads; t++) {
        const chase_walker *w = &s->walkers[t];
        if (w->steps) {
            double ns = (double)w->elapsed_ns / ((double)w->steps * (double)s->k);
            slowest = ns > slowest ? ns : slowest;
            total += ns;
            walked++;
        }
        if (w->elapsed_ns)
            throughput += (double)w->steps * (double)s->k / (double)w->elapsed_ns * 1e9;
        times[t] = t == 0 ? s->main_time : s->team.workers[t - 1].time;
        if (!ml_cpu_mask_has(&cores, w->cpu)) {
            ml_cpu_mask siblings;
            ml_cpu_smt_siblings(w->cpu, &siblings);
            for (int i = 0; i < ML_MAX_CPUS / 64; i++)
                cores.bits[i] |= siblings.bits[i];
            distinct_cores++;
        }
        if (t < CHASE_THREAD_CPU_METRICS) {
            char name[ML_METRIC_NAME_MAX];
            snprintf(name, sizeof name, "thread_%d_cpu", t);
            ml_metric_add(out, name, w->cpu);
        }
    }
    ml_metric_add(out, "fastest_thread", sample->fastest);
    ml_metric_add(out, "slowest_thread_ns_per_element", slowest);
    ml_metric_add(out, "mean_thread_ns_per_element", walked ? total / walked : 0.0);
    ml_metric_add(out, "threads_walked", walked);
    ml_metric_add(out, "all_threads_elements_per_s", throughput);
    ml_metric_add(out, "thread_cores", distinct_cores);
    /* overlap_fraction: the least share of the sample in which every thread
     * was on its CPU at once.  1 on a quiet machine; near 0 when the threads
     * took turns with other work, and then they neither contend nor share. */
    ml_team_metrics(times, s->threads, "", out);
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
        /* every thread that walked whole laps is back where it started */
        int at_start = 1;
        for (int t = 0; t < s->threads; t++)
            for (int c = 0; c < s->k && s->walkers[t].steps % s->chain_elements == 0; c++)
                at_start &= s->walkers[t].walk.pos[c] == s->walkers[t].start[c];
        ml_metric_add(out, "end_at_start", at_start);
    }
    if (s->cfg.helper_thread) {
        ml_metric_add(out, "helper_cpu", s->helper->cpu);
        ml_metric_add(out, "helper_on_smt_sibling", s->helper->smt_sibling);
        ml_metric_add(out, "smt_sibling_available", s->helper->sibling_existed);
    }
    chase_add_thread_metrics(s, out, &sample);
    chase_add_numa_metrics(s, out, sample.main_cpu);
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
    uint64_t needed = 3 * probe.elements * sizeof(uint64_t);
    if (cfg->out.bytes < needed)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "out holds %zu bytes; this list of %llu elements needs %llu (3 uint64 per element)",
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

/* Walk `laps` laps with the measured loops (every thread), then write each
 * element's successor index to out[0:n], its pad[0] (0 when npad=0) to
 * out[n:2n] and the byte offset of its start from the region's (aligned)
 * base to out[2n:3n]. */
static int chase_trace_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    chase_trace_state *t = state;
    chase_state *s = t->chase;
    chase_sample sample = {0, 0, 0, 0, -1};
    uint64_t *words = t->out.data;
    if (s->cfg.laps > 0 &&
        chase_walk_sample(s, (uint64_t)s->cfg.laps * s->chain_elements, 0, ctx, NULL, &sample, err))
        return -1;
    for (uint64_t i = 0; i < s->elements; i++) {
        const chase_word *e = chase_element(s, i);
        const char *start = chase_element_start(s, i);
        words[i] = chase_index(s, (const chase_word *)e[0]);
        words[s->elements + i] = s->cfg.npad >= 1 ? ((const chase_word *)start)[s->pad0_word] : 0;
        words[2 * s->elements + i] = (uint64_t)(start - s->base);
    }
    ml_counter_values_missing(&out->counters, 0);
    out->elapsed_ns = sample.elapsed_ns;
    out->units = (double)sample.steps * (double)s->k;
    out->bytes = 0;
    ml_metric_add(out, "elements", (double)s->elements);
    ml_metric_add(out, "chain_elements", (double)s->chain_elements);
    ml_metric_add(out, "chains_total", (double)s->total_chains);
    ml_metric_add(out, "steps_per_chain", (double)sample.steps);
    ml_metric_add(out, "base_line_offset", (double)((uintptr_t)s->base % CHASE_LINE_BYTES));
    for (int th = 0; th < s->threads; th++) {
        for (int c = 0; c < s->k; c++) {
            char name[ML_METRIC_NAME_MAX];
            snprintf(name, sizeof name, "position_%d", th * s->k + c);
            ml_metric_add(out, name, (double)chase_index(s, s->walkers[th].walk.pos[c]));
            snprintf(name, sizeof name, "start_%d", th * s->k + c);
            ml_metric_add(out, name, (double)chase_index(s, s->walkers[th].start[c]));
        }
    }
    return 0;
}

#define CHASE_PARAMS()                                                                      \
    {"working_set_bytes", ML_PARAM_INT, offsetof(chase_config, working_set_bytes), 8, 1ll << 46, 0, 0, NULL, 0}, \
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
    {"check", ML_PARAM_BOOL, offsetof(chase_config, check), 0, 1, 0, 0, NULL, 0},                      \
    {"pair_word", ML_PARAM_INT, offsetof(chase_config, pair_word), 2, 65535, 0, 0, NULL, 0},           \
    {"pointer_word", ML_PARAM_INT, offsetof(chase_config, pointer_word), 0, 65535, 0, 0, NULL, 0},     \
    {"misalign_bytes", ML_PARAM_INT, offsetof(chase_config, misalign_bytes), 0, CHASE_LINE_BYTES - 1, 0, 0, NULL, 0}, \
    {"element_distance", ML_PARAM_INT, offsetof(chase_config, element_distance), 1, 1 << 16, 0, 0, NULL, 0}, \
    {"threads", ML_PARAM_INT, offsetof(chase_config, threads), 1, CHASE_MAX_THREADS, 0, 0, NULL, 0},   \
    {"thread_lists", ML_PARAM_CHOICE, offsetof(chase_config, thread_lists), 0, 0, 0, 0, chase_thread_lists_names, 0}, \
    {"walk_cpu", ML_PARAM_INT, offsetof(chase_config, walk_cpu), -1, CPU_SETSIZE - 1, 0, 0, NULL, 0},  \
    {"memory_node", ML_PARAM_INT, offsetof(chase_config, memory_node), -1, ML_MAX_NODES - 1, 0, 0, NULL, 0}

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
    .description = "the chase list as successor indices, pad[0] and element offsets after a fixed walk",
    .config_size = sizeof(chase_trace_config),
    .params = chase_trace_params,
    .setup = chase_trace_setup,
    .measure = chase_trace_measure,
    .teardown = chase_trace_teardown,
};
