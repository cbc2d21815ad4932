/* The pointer chase's own header (csrc/chase*.c): its config, its list and
 * walkers, and what one part of the family asks of another.  Not for other
 * families: they drive the chase through its table (ml_family_chase). */
#ifndef MEMLAB_CHASE_H
#define MEMLAB_CHASE_H

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

extern const char *const chase_order_names[];
extern const char *const chase_layout_names[];
extern const char *const chase_op_names[];
extern const char *const chase_thread_lists_names[];
extern const char *const chase_pages_names[];
extern const ml_page_kind chase_page_kinds[];

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
    int64_t memory_node;      /* -1: the kernel's default policy */
    ml_buffer cpus;           /* int32: the walking thread's CPU, then the other walkers' or the
                               * helper's (memlab.placement chooses them); absent: unpinned */
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

extern volatile uint64_t chase_sink;
/* The loops, by chains, operation and variant (chase_walk.c). */
extern const chase_walk_fn chase_walks[CHASE_MAX_CHAINS][OP_COUNT][VARIANT_COUNT];

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
    int cpus[CHASE_MAX_THREADS]; /* the checked cpus: thread 0's, then walkers' or the helper's */
    int pinned;                 /* cpus[0] >= 0: every thread is pinned for each sample */
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

typedef struct chase_sample {
    uint64_t steps;   /* per chain, of the thread reported (the fastest) */
    uint64_t elapsed_ns;
    uint64_t thread_cpu_ns; /* on-CPU time of that thread, same chunks */
    int fastest;      /* the thread reported */
    int main_cpu;     /* -1: not pinned */
} chase_sample;

/* chase_list.c: the list, its memory and its check */
int chase_setup(const void *config, void **state_out, ml_context *ctx, ml_error *err);
void chase_teardown(void *state);
int chase_check_config(const chase_config *cfg, chase_state *s, ml_error *err);
int chase_usable_cpus(cpu_set_t *allowed);
int chase_verify(chase_state *s, ml_context *ctx, ml_measurement *out, ml_error *err);
/* chase_threads.c: one sample, walked by this thread and the team */
int chase_walk_sample(chase_state *s, uint64_t fixed_steps, uint64_t target_ns, ml_context *ctx,
                      ml_measurement *counted, chase_sample *out, ml_error *err);

#endif
