/* The chase's timed loops: one specialised loop per number of chains,
 * operation and variant, so that no flag is tested inside one (chase.h). */
#define _GNU_SOURCE
#include "chase.h"

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

const chase_walk_fn chase_walks[CHASE_MAX_CHAINS][OP_COUNT][VARIANT_COUNT] = {
    CHASE_FOR_CHAINS(CHASE_TABLE_ENTRY)};
