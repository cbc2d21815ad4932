/* Memory bandwidth kernels and the thread team that runs them
 * (csrc/bandwidth.c).  The bandwidth family is built on this header, and so
 * can any family that needs a stream of memory traffic (a load generator
 * beside a latency measurement, say): use these kernels and this runner,
 * do not copy them.
 *
 * A kernel makes `passes` passes over `bytes` bytes with one operation at
 * one vector width:
 *
 *     const char *why;
 *     ml_bw_kernel read = ml_bw_kernel_for(ML_BW_READ, ML_BW_AVX2, ML_BW_STORES_NORMAL, &why);
 *     uint64_t sum = read(NULL, buffer, 1 << 20, 10, 0);
 *
 * A team runs one worker per thread, each pinned to a CPU (or not), each
 * repeating its kernel over its buffer in chunks until told to stop; between
 * chunks it looks at the stop flag and calls the worker's hook (a throttle,
 * say), outside the timed stretch:
 *
 *     ml_bw_team team;
 *     if (ml_bw_team_init(&team, 2, err)) return -1;
 *     team.workers[0] = (ml_bw_worker){.kernel = read, .src = a, .bytes = n, .cpu = 0};
 *     team.workers[1] = (ml_bw_worker){.kernel = read, .src = b, .bytes = n, .cpu = 1};
 *     int rc = ml_bw_team_run(&team, 100000000, ctx, err);   // 100 ms, Ctrl-C aware
 *     ... team.workers[i].bytes_done, ml_bw_team_time(&team, i)->cpu_ns ...
 *     ml_bw_team_free(&team);
 *
 * or, to keep traffic going while the calling thread measures something
 * else: ml_bw_team_start(), the measurement, ml_bw_team_stop(). */
#ifndef MEMLAB_BANDWIDTH_H
#define MEMLAB_BANDWIDTH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "memlab.h"

/* ---- writing a kernel ------------------------------------------------ */

/* Kernels are loops the compiler must leave as written: not turned into
 * memset/memcpy calls, and the scalar ones not vectorised behind our back.
 * The vector kernels use intrinsics and are unrolled by hand. */
#if defined(__clang__)
#define ML_BW_KERNEL __attribute__((noinline, no_builtin("memcpy", "memset", "memmove")))
#define ML_BW_PLAIN_LOOP _Pragma("clang loop vectorize(disable) interleave(disable) unroll(disable)")
#else
#define ML_BW_KERNEL                                                                          \
    __attribute__((noinline, optimize("no-tree-vectorize", "no-tree-loop-vectorize",        \
                                      "no-tree-slp-vectorize",                             \
                                      "no-tree-loop-distribute-patterns")))
#define ML_BW_PLAIN_LOOP
#endif

/* ---- kernels ---------------------------------------------------------- */

typedef enum ml_bw_op { ML_BW_READ = 0, ML_BW_WRITE, ML_BW_COPY, ML_BW_ADD, ML_BW_OP_COUNT } ml_bw_op;

/* Vector widths, narrowest first: 8-byte general registers, 16-byte SSE2,
 * 32-byte AVX2, 64-byte AVX-512. */
typedef enum ml_bw_width {
    ML_BW_SCALAR = 0,
    ML_BW_SSE2,
    ML_BW_AVX2,
    ML_BW_AVX512,
    ML_BW_WIDTH_COUNT
} ml_bw_width;

typedef enum ml_bw_stores {
    ML_BW_STORES_NORMAL = 0,
    ML_BW_STORES_NONTEMPORAL, /* streaming stores around the caches, then sfence */
    ML_BW_STORES_COUNT
} ml_bw_stores;

/* NULL-terminated names indexed by the enums (the Python spelling). */
extern const char *const ml_bw_op_names[];
extern const char *const ml_bw_width_names[];
extern const char *const ml_bw_stores_names[];

/* Every kernel works on whole lines: `bytes` is a positive multiple of this
 * (which every vector width divides), buffers are aligned to it. */
#define ML_BW_LINE_BYTES 64u
/* Vectors per turn of a kernel's main loop: the loop's own instructions
 * (one add, one compare-and-branch) stay far below the memory operations. */
#define ML_BW_UNROLL 8u

/* `passes` passes over [0, bytes) of src and/or dst.
 *   read:  loads every vector of src into a register and does nothing with
 *          it (Drepper's read test: only the loads); returns 0
 *   write: stores `value` into every 64-bit word of dst; returns 0
 *   copy:  copies src into dst; returns 0
 *   add:   adds src into dst, 64-bit word by word (wrapping): two loads and
 *          one store per vector, the 2:1 read/write mix; returns 0
 * Non-temporal kernels end with an sfence. */
typedef uint64_t (*ml_bw_kernel)(void *dst, const void *src, size_t bytes, uint64_t passes,
                                 uint64_t value);

/* Bytes read and bytes written per byte a kernel passes over (what
 * ml_bw_worker.bytes_done counts): read 1 and 0, write 0 and 1, copy 1 and 1,
 * add 2 and 1 (the instructions' bytes; a normal store's read of its line
 * before the write, which copy and write cause, is not counted). */
void ml_bw_op_traffic(ml_bw_op op, unsigned *reads, unsigned *writes);
/* Bytes of one load or store of the width: 8, 16, 32 or 64. */
size_t ml_bw_vector_bytes(ml_bw_width width);
/* 1 if this build and this CPU (and its OS) can run the width; otherwise 0
 * and *why (if not NULL) says what is missing. */
int ml_bw_width_supported(ml_bw_width width, const char **why);
/* The widest width ml_bw_width_supported accepts. */
ml_bw_width ml_bw_widest(void);
/* The kernel, or NULL with the reason in *why: a width the CPU lacks, or
 * non-temporal stores for a read (which stores nothing) or on a machine
 * without them. */
ml_bw_kernel ml_bw_kernel_for(ml_bw_op op, ml_bw_width width, ml_bw_stores stores, const char **why);
/* The read's twin for checking: the same walk over src, adding every 64-bit
 * word into accumulators; returns their sum over all passes (mod 2^64).
 * NULL for a width this CPU lacks.  (The adds cost: on some cores it reads
 * slower than the read kernel, so it is not what is measured.) */
ml_bw_kernel ml_bw_sum_kernel(ml_bw_width width);

/* ---- the team: one worker per thread ----------------------------------
 * A bandwidth team is an ml_team (memlab.h) whose workers run the loop
 * below; the team starts, releases, waits, joins and times them. */

typedef struct ml_bw_worker ml_bw_worker;

/* Called by a worker between two chunks, outside the timed stretches (to
 * throttle it, count, or check something); nonzero stops this worker.
 * worker->bytes_done and ->chunks hold the progress so far when it runs. */
typedef int (*ml_bw_hook)(ml_bw_worker *worker, void *arg);

struct ml_bw_worker {
    /* set by the caller */
    ml_bw_kernel kernel;
    void *dst;            /* written by write, copy and add (add reads it too) */
    const void *src;      /* read by read, copy and add */
    size_t bytes;         /* per pass: multiple of ML_BW_LINE_BYTES */
    uint64_t value;       /* what write stores */
    int cpu;              /* pin to this CPU; -1: leave the affinity alone */
    uint64_t chunk_bytes; /* work per chunk; 0: sized so that a chunk lasts about chunk_ns */
    uint64_t chunk_ns;    /* 0: ML_BW_DEFAULT_CHUNK_NS */
    uint64_t max_bytes;   /* stop after exactly this much work; 0: run until stopped */
    ml_bw_hook hook;      /* may be NULL */
    void *hook_arg;
    /* results of the last run (its start, end, CPU time and CPU: the team's
     * ml_bw_team_time) */
    uint64_t bytes_done;  /* bytes passed over (copy: bytes copied; add: bytes of dst updated) */
    uint64_t chunks;
    uint64_t sum;         /* what the kernel calls returned, added up (the sum kernel's sum) */
    uint64_t busy_ns;     /* inside the kernel only */
    /* kept between runs: the speed seen last, to size the next chunks */
    double ns_per_byte;
    size_t offset;        /* where the next chunk starts, within a pass */
    ml_team *team;        /* while it runs in a team: ml_team_stopping(worker->team) */
};

#define ML_BW_DEFAULT_CHUNK_NS 200000u /* 0.2 ms: the stop flag is seen that fast */

typedef struct ml_bw_team {
    int n;
    ml_bw_worker *workers;
    ml_team threads;
} ml_bw_team;

/* Allocate n workers (zeroed, cpu -1); ml_bw_team_free releases them. */
int ml_bw_team_init(ml_bw_team *team, int n, ml_error *err);
void ml_bw_team_free(ml_bw_team *team);
/* Start every worker's thread (pinned to its cpu), wait until all are
 * ready and release them together.  On a failure or Ctrl-C the threads
 * already started are stopped and joined before it returns -1. */
int ml_bw_team_start(ml_bw_team *team, ml_context *ctx, ml_error *err);
/* Ask every worker to stop after its current chunk and join them all (safe
 * to call when nothing runs). */
void ml_bw_team_stop(ml_bw_team *team);
/* Start, let the workers run for duration_ns (or, with 0, until every
 * worker has reached its max_bytes or its hook stopped it), stop, join.
 * Ctrl-C stops the workers before this returns -1 with ML_ERR_INTERRUPTED. */
int ml_bw_team_run(ml_bw_team *team, uint64_t duration_ns, ml_context *ctx, ml_error *err);
/* Worker i's last run: start, end, CPU time, the CPU it ended on. */
static inline const ml_team_time *ml_bw_team_time(const ml_bw_team *team, int i)
{
    return &team->threads.workers[i].time;
}
/* One worker's loop in the calling thread (no pinning, no flags): what a
 * team thread runs between go and stop.  Needs max_bytes > 0. */
void ml_bw_worker_run_here(ml_bw_worker *worker);

#endif
