/* The pipe families' shared parts, private to pipe*.c: the two ends of a
 * measurement as processes (pipe_side.c: what each end reports, its
 * buffer, running the pair through children.c and reading how it ended),
 * and the position-dependent byte pattern (pipe_pattern.c).  The families:
 * pipe (pipe.c) and pipe_latency (pipe_latency.c). */
#ifndef MEMLAB_PIPE_H
#define MEMLAB_PIPE_H

#include "memlab.h"

#define PIPE_MAX_ADAPT_RUNS 12
#define PIPE_DEFAULT_TARGET_NS 100000000ULL

/* ---- what one end reports (its slot in the shared memory) ------------- */

enum pipe_step {
    PIPE_STEP_NONE = 0,
    PIPE_STEP_MMAP,
    PIPE_STEP_MADVISE,
    PIPE_STEP_FCNTL,
    PIPE_STEP_OPEN_DEVNULL,
    PIPE_STEP_MEMFD,
    PIPE_STEP_WRITE,
    PIPE_STEP_VMSPLICE,
    PIPE_STEP_READ,
    PIPE_STEP_SPLICE,
    PIPE_STEP_EARLY_EOF,
    PIPE_STEP_START,
    PIPE_STEP_COUNT_
};

typedef struct pipe_side {
    int failed; /* 1: the end stopped on an error */
    int step;   /* enum pipe_step */
    int errnum;
    uint64_t start_ns, end_ns;
    uint64_t bytes;      /* moved by this end */
    uint64_t calls;      /* successful system calls moving data */
    uint64_t eagain;     /* spins on EAGAIN (busy loop) */
    uint64_t verify_bad; /* wrong bytes seen by the checking end */
    uint64_t first_bad;  /* stream offset of the first wrong byte */
    int64_t huge_bytes;  /* huge-page bytes of the end's buffer, -1 unknown */
    uint64_t buffer_map_bytes;
    long voluntary_switches, involuntary_switches, minor_faults, major_faults;
    ml_counter_values counters;
} pipe_side;

/* ---- in an end's process: async-signal-safe only ------------------------ */

void pipe_side_fail(pipe_side *r, int step, int errnum);

typedef struct pipe_buffer {
    unsigned char *base;
    size_t bytes; /* usable, rounded to pages or to 2 MiB */
    void *map_base;
    size_t map_bytes;
} pipe_buffer;

/* Plain mmap, no allocator: 2 MiB aligned with MADV_HUGEPAGE when huge,
 * MADV_NOHUGEPAGE otherwise; touch writes every byte. */
int pipe_buffer_map(pipe_buffer *b, size_t bytes, int huge, int touch, pipe_side *r);
int pipe_set_nonblocking(int fd, pipe_side *r);

/* What an end measures around its timed loop: the counters (if asked) and
 * getrusage (context switches, page faults). */
typedef struct pipe_side_watch {
    ml_counting counting;
    long voluntary_switches, involuntary_switches, minor_faults, major_faults;
} pipe_side_watch;

/* The last step before the timed loop: open the counters, say ready, wait
 * for the start, then start the watch and r->start_ns.  -1: the run was
 * called off (r says so). */
int pipe_side_start(pipe_side *r, const ml_child_io *io, const ml_context *ctx, pipe_side_watch *watch);
/* Right after the timed loop: r->end_ns, the counters and the usage deltas. */
void pipe_side_stop(pipe_side *r, pipe_side_watch *watch);

/* ---- the pair: two ends run by children.c ------------------------------ */

typedef struct pipe_pair pipe_pair;
typedef int (*pipe_side_main)(const pipe_pair *pair, const ml_child_io *io, pipe_side *r);

struct pipe_pair {
    const void *config;
    ml_context *ctx;
    uint64_t count;      /* bytes (transfer) or round trips (latency) per run */
    size_t pipe_bytes;   /* the data pipe's capacity */
    int fd[2][2];        /* the data descriptors each end keeps; -1: none */
    int parent_fds[4];   /* the parent's copies, closed once both are forked */
    int n_parent_fds;
    pipe_side_main main[2];
    const char *comm[2];      /* process names, as ps shows them */
    const char *name[2];      /* end names in messages: "writer" */
    const char *cpu_param[2]; /* "writer_cpu" */
    int cpu[2];
    uint64_t expected;   /* bytes, for messages */
    double timeout_s;
    const char *what;    /* "the pipe transfer" */
};

/* One run of the pair, its ends reporting in shared's two slots; any way
 * it failed is an error naming the end that failed first. */
int pipe_pair_run(pipe_pair *pair, ml_shared *shared, ml_error *err);

/* ---- in the parent ---------------------------------------------------- */

/* CPU numbers must exist; busy looping needs the two ends on two CPUs. */
int pipe_check_cpus(int64_t cpu_a, int64_t cpu_b, const char *name_a, const char *name_b,
                    int busy_loop, ml_error *err);
/* The next run's count when a run was shorter than the target. */
uint64_t pipe_grow_count(uint64_t count, uint64_t elapsed_ns, uint64_t target_ns, uint64_t multiple,
                         uint64_t maximum);
/* Both ends' counters added up; present only where both had the event. */
void pipe_merge_counters(ml_counter_values *out, const pipe_side *a, const pipe_side *b, int counting);
void pipe_add_side_metrics(ml_measurement *out, const pipe_side *r, const char *side);

/* ---- the stream pattern (pipe_pattern.c) ------------------------------- */

/* Byte p of the stream is byte (p mod 8) of the little-endian word
 * (p/8 + 1) * PIPE_PATTERN_STEP, so that a byte at the wrong position,
 * twice, or from a reused buffer half is caught.  Python twin:
 * memlab.twins.pipe_pattern. */
#define PIPE_PATTERN_STEP 0x9E3779B97F4A7C15ULL

void pipe_pattern_fill(unsigned char *buf, uint64_t offset, size_t len);
/* The number of wrong bytes of buf, which should hold the stream from
 * offset on; *first_bad gets the first one's stream offset unless it
 * already holds one (UINT64_MAX: none yet). */
uint64_t pipe_pattern_check(const unsigned char *buf, uint64_t offset, size_t len,
                            uint64_t *first_bad);

#endif
