/* memlab's C core: the types every kernel file shares.  No Python.h here:
 * module.c is the only file that knows about CPython. */
#ifndef MEMLAB_H
#define MEMLAB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- errors --------------------------------------------------------- */

typedef enum ml_error_code {
    ML_OK = 0,
    ML_ERR_VALUE,       /* bad parameter: ValueError */
    ML_ERR_MEMORY,      /* allocation refused or too large: MemoryError */
    ML_ERR_OS,          /* a syscall failed: OSError(errnum) */
    ML_ERR_INTERRUPTED, /* a signal handler raised (Ctrl-C): exception already set */
    ML_ERR_TIMEOUT,     /* the run exceeded its time limit: TimeoutError */
} ml_error_code;

#define ML_MESSAGE_MAX 512

typedef struct ml_error {
    ml_error_code code;
    int errnum;
    char message[ML_MESSAGE_MAX];
} ml_error;

/* Fill err and return -1, so that `return ml_fail(...)` reads naturally. */
int ml_fail(ml_error *err, ml_error_code code, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- small helpers ----------------------------------------------------- */

/* value rounded up to a multiple of `multiple` (> 0). */
static inline uint64_t ml_round_up(uint64_t value, uint64_t multiple)
{
    return (value + multiple - 1) / multiple * multiple;
}

/* splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
 * generators", 2014): the generator behind every seeded order in the core.
 * Python twin: memlab.twins.splitmix64. */
static inline uint64_t ml_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Sorts values in place (ascending) and returns their median; 0 when empty. */
double ml_median(double *values, size_t count);

/* ---- CPU features (core.c) ------------------------------------------ */

/* Instruction-set features a kernel may choose at run time, widest last. */
typedef enum {
    ML_CPU_SSE2,
    ML_CPU_AVX2, /* with FMA */
    ML_CPU_AVX512F,
    ML_CPU_FEATURE_COUNT
} ml_cpu_feature;

/* Whether the CPU runs the feature, less what MEMLAB_HIDE_CPU_FEATURES hides:
 * a comma-separated list (sse2, avx2, avx512f) that makes this process behave
 * as on a CPU without them, so an AVX-512 host can test the AVX2 paths and
 * the refusal of a missing ISA.  Hiding a feature hides every wider one. */
int ml_cpu_supports(ml_cpu_feature feature);

/* ---- threads (core.c) ----------------------------------------------- */

/* Start fn(arg) on a new thread pinned to `cpu` from its first instruction
 * (the affinity is set in the attributes before the thread exists, so it
 * never runs elsewhere); cpu < 0 leaves it where the scheduler puts it.
 * stack_bytes 0 keeps the default stack.  On failure nothing was started
 * and err names the thread (`what_fmt`, printf-style: "worker 1 of 2"),
 * the CPU and the error: a CPU this process may not use (EINVAL) is
 * ML_ERR_VALUE, too many threads or no memory for a stack (EAGAIN)
 * ML_ERR_MEMORY, anything else ML_ERR_OS.  The caller joins what started.
 * Every thread it starts is named ML_THREAD_NAME (its comm in
 * /proc/self/task/TID/comm): the one way to tell memlab's threads apart. */
#define ML_THREAD_NAME "memlab"
int ml_thread_start_pinned(pthread_t *tid, int cpu, size_t stack_bytes, void *(*fn)(void *), void *arg,
                           ml_error *err, const char *what_fmt, ...)
    __attribute__((format(printf, 7, 8)));

/* ---- thread teams (team.c) -------------------------------------------
 * The one way the core runs N threads that measure together (bandwidth,
 * loaded, chase, share, core_to_core keep only their worker bodies).  One
 * policy for every family:
 * - every worker is started, pinned and named through ml_thread_start_pinned
 *   (the CPU list is the caller's: a CPU of -1 leaves one unpinned);
 * - one ready barrier: ml_team_start returns once every worker waits for the
 *   start, asleep (a thousand workers on two CPUs would spin for seconds);
 *   it checks ctx between thread creations and while it waits;
 * - one release: ml_team_release wakes them all, and each worker then yields
 *   until every one is awake, so that they begin within microseconds;
 * - one wait: ml_team_wait sleeps on the team (woken when a worker ends),
 *   checking ctx every ML_TEAM_POLL_NS, until the run's time (and the
 *   caller's `enough`), every worker's end, or the deadline;
 * - a join on every way out: a failed start, Ctrl-C in either wait and
 *   ml_team_stop raise the stop flag, release whoever waits and join every
 *   thread started; ml_team_free stops first;
 * - the team times each worker's body (start, end, CPU time, the CPU it
 *   ended on) and ml_team_metrics turns times into the three metrics every
 *   family reports under one definition (docs/dataset.md).
 *
 *     ml_team team;
 *     if (ml_team_init(&team, 2, "worker", stack_bytes, err)) return -1;
 *     team.workers[i] = (ml_team_worker){.body = my_loop, .arg = &mine[i], .cpu = cpus[i]};
 *     if (ml_team_start(&team, ctx, err) || ml_team_release(&team, ctx, err)) return -1;
 *     int rc = ml_team_wait(&team, 100000000, 0, NULL, NULL, ctx, err);
 *     ml_team_stop(&team);
 *     ml_team_metrics(times, n, "", out);
 *     ml_team_free(&team);
 * A body polls ml_team_stopping(team) between chunks of its work. */

#define ML_TEAM_POLL_NS 10000000ull /* Ctrl-C lands within 10 ms of a wait */

typedef struct ml_team ml_team;
typedef struct ml_context ml_context;
typedef struct ml_measurement ml_measurement;

/* A worker's run: CLOCK_MONOTONIC around its body, its CPU time over it,
 * sched_getcpu() at its end (-1: unknown).  A thread that measures without
 * a team (the chase's calling thread) fills one itself. */
typedef struct ml_team_time {
    uint64_t start_ns, end_ns, cpu_ns;
    int ran_on_cpu;
} ml_team_time;

typedef struct ml_team_worker {
    /* set by the caller */
    void (*body)(void *arg, ml_team *team);
    void *arg;
    int cpu;           /* pin to this CPU; -1: unpinned */
    const char *what;  /* this worker, for messages ("the cpu_a thread"); NULL: the team's "what i of n" */
    /* the last run */
    ml_team_time time;
    ml_team *team_of;  /* set by ml_team_start */
} ml_team_worker;

struct ml_team {
    int n;
    ml_team_worker *workers;
    pthread_t *threads;
    const char *what;    /* a worker, for messages: "load thread" -> "load thread 1 of 3" */
    size_t stack_bytes;  /* 0: the default */
    int started;         /* threads created and not yet joined */
    uint64_t released_ns;
    pthread_mutex_t lock; /* guards ready, go, finished */
    pthread_cond_t changed;
    int ready, go, finished;
    int initialised;
    int released;        /* set by ml_team_release, under the lock: the workers run their body */
    int awake, stop;     /* __atomic_* only */
    int cancelled;       /* __atomic_*: Ctrl-C or a failed start; a worker not yet in its body skips it */
};

/* n workers (zeroed, unpinned); -1 with err for n < 1 or no memory. */
int ml_team_init(ml_team *team, int n, const char *what, size_t stack_bytes, ml_error *err);
/* Stop, join and release everything; safe on a zeroed or freed team. */
void ml_team_free(ml_team *team);
/* Start every worker's thread, return once each waits for the release.
 * -1 (every thread started already joined): a thread that could not start
 * (ml_thread_start_pinned's error) or Ctrl-C. */
int ml_team_start(ml_team *team, ml_context *ctx, ml_error *err);
/* Release the workers together; return once every one is awake.  -1 on
 * Ctrl-C (the team stopped and joined). */
int ml_team_release(ml_team *team, ml_context *ctx, ml_error *err);
/* From the release, wait until run_ns have passed and `enough(arg)` says so
 * (either may be absent: 0, NULL), or every worker ended.  0: so; 1: the
 * deadline (from the release, 0: none) came first; -1: Ctrl-C, the team
 * stopped and joined. */
int ml_team_wait(ml_team *team, uint64_t run_ns, uint64_t deadline_ns, int (*enough)(void *arg), void *arg,
                 ml_context *ctx, ml_error *err);
/* Ask every worker to stop, release those still waiting, join them all
 * (nothing to do when none runs). */
void ml_team_stop(ml_team *team);
/* Workers that ended their body since the release. */
int ml_team_finished(ml_team *team);

static inline int ml_team_stopping(ml_team *team)
{
    return __atomic_load_n(&team->stop, __ATOMIC_RELAXED);
}

/* A run's CPU time over its wall time (0 for an empty run). */
double ml_team_cpu_fraction(const ml_team_time *time);
/* The metrics of n threads that measured together, named prefix + name:
 *   cpu_fraction         the mean over threads of ml_team_cpu_fraction
 *   lowest_cpu_fraction  the lowest thread's
 *   overlap_fraction     the least share of the span (first start to last
 *                        end) in which every thread was on its CPU at once:
 *                        thread i was away from its CPU for (span - cpu_i)
 *                        of the span (before its start, after its end, or
 *                        descheduled), and at worst those absences do not
 *                        overlap: 1 - sum_i (1 - cpu_i / span), at least 0.
 * One thread: its cpu_fraction is all three. */
void ml_team_metrics(const ml_team_time *times, int n, const char *prefix, ml_measurement *out);

/* ---- clock (clock.c) ------------------------------------------------ */

uint64_t ml_now_ns(void); /* CLOCK_MONOTONIC */
/* CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID): the part of a
 * wall-clock interval the kernel really ran it; 0 if unreadable. */
uint64_t ml_thread_cpu_ns(void);

typedef struct ml_frequency {
    double ghz;          /* median estimate of the core clock */
    double ghz_min, ghz_max;
    double imul_ghz;     /* cross-check from a 3-cycle imul chain */
    int samples;
    const char *method;
} ml_frequency;

typedef struct ml_context ml_context;

/* Time long chains of dependent register-register adds (one cycle each on
 * every x86-64 and AArch64 core) for about budget_ns; ctx (may be NULL) is
 * checked for interrupts between samples. */
int ml_calibrate_frequency(ml_frequency *out, uint64_t budget_ns, ml_context *ctx,
                           ml_error *err);

/* n dependent one-cycle operations on x; the result must be used. */
static inline uint64_t ml_dependent_work(uint64_t x, uint64_t n)
{
    uint64_t one = 1;
    for (uint64_t i = 0; i < n; i++) {
#if defined(__x86_64__)
        __asm__ volatile("add %1, %0" : "+r"(x) : "r"(one));
#elif defined(__aarch64__)
        __asm__ volatile("add %0, %0, %1" : "+r"(x) : "r"(one));
#else
        __asm__ volatile("" : "+r"(x));
        x += one;
#endif
    }
    return x;
}

/* ---- counters (counters.c) ------------------------------------------ */

typedef enum ml_counter_id {
    ML_COUNTER_PAGE_FAULTS,
    ML_COUNTER_MINOR_FAULTS,
    ML_COUNTER_MAJOR_FAULTS,
    ML_COUNTER_CONTEXT_SWITCHES,
    ML_COUNTER_CPU_MIGRATIONS,
    ML_COUNTER_TASK_CLOCK_NS,
    ML_COUNTER_CYCLES,
    ML_COUNTER_INSTRUCTIONS,
    ML_COUNTER_CACHE_REFERENCES,
    ML_COUNTER_CACHE_MISSES,
    ML_COUNTER_LLC_LOAD_MISSES,
    ML_COUNTER_DTLB_LOAD_MISSES,
    ML_COUNTER_L1D_LOAD_MISSES,
    ML_COUNTER_COUNT
} ml_counter_id;

extern const char *const ml_counter_names[ML_COUNTER_COUNT];

typedef struct ml_counters {
    int fd[ML_COUNTER_COUNT];         /* -1 where the event did not open */
    int open_errno[ML_COUNTER_COUNT]; /* why it did not open */
    int kernel_included;              /* 1: counts include kernel mode */
} ml_counters;

typedef struct ml_counter_values {
    int present[ML_COUNTER_COUNT];
    double value[ML_COUNTER_COUNT];        /* scaled by enabled/running */
    double running_fraction[ML_COUNTER_COUNT];
    int missing_errno[ML_COUNTER_COUNT];   /* 0 when present */
    int kernel_included;
} ml_counter_values;

/* Open every event for pid (0 = calling thread; inherit = 1 also counts
 * threads and processes it creates afterwards).  Never fails as a whole: an
 * event the kernel refuses is kept closed with its errno. */
void ml_counters_open(ml_counters *c, pid_t pid, int inherit);
void ml_counters_start(ml_counters *c); /* reset + enable */
void ml_counters_stop(ml_counters *c);  /* disable */
void ml_counters_read(const ml_counters *c, ml_counter_values *out);
void ml_counters_close(ml_counters *c);
/* Mark every counter missing with errnum (used when counting is off). */
void ml_counter_values_missing(ml_counter_values *out, int errnum);
/* Why a counter is missing, for people: "not requested" for errnum 0. */
const char *ml_counter_reason(int errnum);

typedef struct ml_measurement ml_measurement;

/* ---- memory regions (region.c) --------------------------------------- */

typedef enum ml_page_kind {
    ML_PAGES_4K = 0,
    ML_PAGES_THP,
    ML_PAGES_HUGETLB_2M,
    ML_PAGES_HUGETLB_1G,
} ml_page_kind;

typedef enum ml_populate {
    ML_POPULATE_NONE = 0,
    ML_POPULATE_TOUCH,          /* write one byte per base page */
    ML_POPULATE_MAP_POPULATE,   /* mmap(MAP_POPULATE) */
    ML_POPULATE_MADVISE_WRITE,  /* madvise(MADV_POPULATE_WRITE) */
} ml_populate;

/* NULL-terminated names, indexed by the enums above (the Python spelling). */
/* The page size of a kind: 4 KiB, 2 MiB or 1 GiB. */
size_t ml_page_kind_bytes(ml_page_kind kind);
extern const char *const ml_page_kind_names[];
extern const char *const ml_populate_names[];

typedef struct ml_region {
    void *base;               /* aligned start handed to the caller */
    size_t bytes;             /* usable size requested */
    void *map_base;           /* what mmap returned (for munmap) */
    size_t map_bytes;
    ml_page_kind kind;        /* what was asked */
    ml_page_kind granted;     /* what was used (THP/hugetlb may fall back) */
    size_t page_bytes;        /* page size of the granted kind */
    uint64_t populate_ns;     /* time the populate step took */
    ml_populate populate_requested; /* the populate call asked for */
    ml_populate populate_used;      /* the one made (THP with MAP_POPULATE: MADV_POPULATE_WRITE) */
} ml_region;

/* Map bytes of anonymous memory of the given kind, aligned to `alignment`
 * (0: the page size of the kind), and populate it.  With allow_fallback a
 * refused hugetlb request falls back to 4 KiB pages (granted says so), and
 * MAP_POPULATE asked of THP (which would populate before MADV_HUGEPAGE can
 * take effect) becomes MADV_POPULATE_WRITE (or touching, before Linux 5.14;
 * populate_used says so); without it either is an error.  Requests larger
 * than the memory available (MemAvailable) fail with ML_ERR_MEMORY before
 * anything is mapped. */
int ml_region_map(ml_region *r, size_t bytes, ml_page_kind kind, size_t alignment,
                  ml_populate populate, int allow_fallback, ml_error *err);
void ml_region_unmap(ml_region *r);
/* Populate (or re-populate) an existing region with the given mode (recorded
 * as the region's populate_requested and populate_used). */
int ml_region_populate(ml_region *r, ml_populate populate, ml_error *err);
/* The page kind that backs the region, given huge_bytes = ml_region_huge_bytes
 * (or -1): the hugetlb kind it was mapped with; else "thp" when huge pages
 * back at least half of it, "4k" when less; "none" when nothing was
 * populated; "unknown" when the coverage could not be read. */
const char *ml_region_pages_obtained(const ml_region *r, int64_t huge_bytes);
/* The same rule for memory not mapped by ml_region_map (pipe buffers): "thp"
 * when huge pages back at least half of bytes, else "4k"; "unknown" when
 * huge_bytes < 0. */
const char *ml_pages_by_coverage(int64_t huge_bytes, size_t bytes);
/* The facts of what a region asked for and got: pages_requested,
 * pages_obtained, populate_requested, populate_used (docs/dataset.md). */
void ml_region_facts(ml_measurement *out, const ml_region *r, int64_t huge_bytes);
/* For strict requests: fail (ML_ERR_OS, ENOMEM) unless the region got the
 * page kind it asked for (a THP request the kernel served with 4 KiB pages). */
int ml_region_require_requested(const ml_region *r, int64_t huge_bytes, ml_error *err);
/* Bytes of [start, start + bytes) backed by present huge pages (PMD-mapped
 * THP or hugetlb), from the PAGEMAP_SCAN ioctl of /proc/self/pagemap over
 * that range (Linux 6.7+); on older kernels AnonHugePages plus
 * Private_Hugetlb and Shared_Hugetlb of every mapping that overlaps the range,
 * read from /proc/self/smaps and capped at `bytes`; -1 if unreadable.
 * Async-signal-safe (open, ioctl, read and close; no stdio, no allocation),
 * so a child forked from a threaded process may call it. */
int64_t ml_huge_bytes(const void *start, size_t bytes);
/* ml_huge_bytes of the region's usable bytes. */
int64_t ml_region_huge_bytes(const ml_region *r);
/* MemAvailable from /proc/meminfo, in bytes; 0 if unknown. */
uint64_t ml_memory_available_bytes(void);
/* Check a request against MemAvailable (minus a safety margin). */
int ml_check_memory(size_t bytes, const char *what, ml_error *err);

/* ---- placement: SMT siblings, NUMA nodes, memory binding (placement.c) */

#define ML_MAX_CPUS 1024
#define ML_MAX_NODES 1024

typedef struct ml_cpu_mask {
    uint64_t bits[ML_MAX_CPUS / 64];
} ml_cpu_mask;

void ml_cpu_mask_clear(ml_cpu_mask *mask);
void ml_cpu_mask_set(ml_cpu_mask *mask, int cpu);
int ml_cpu_mask_has(const ml_cpu_mask *mask, int cpu);
int ml_cpu_mask_count(const ml_cpu_mask *mask);
/* Parse a sysfs CPU (or node) list such as "0-3,8,10-11"; -1 if malformed. */
int ml_cpu_list_parse(const char *text, ml_cpu_mask *out);
/* The hardware threads sharing cpu's core (cpu itself included); -1 (and
 * just cpu) when sysfs does not say. */
int ml_cpu_smt_siblings(int cpu, ml_cpu_mask *out);
/* The NUMA node of a CPU, -1 if sysfs does not say. */
int ml_cpu_node(int cpu);
/* Nodes with memory (node 0 alone on a kernel without NUMA); their count. */
int ml_nodes_with_memory(ml_cpu_mask *out);
/* The ACPI SLIT distance between two nodes (10 = local), -1 if unknown. */
int ml_node_distance(int from, int to);

/* Bind a region's pages to one node (mbind MPOL_BIND, pages already there
 * are moved); call it before populating. */
int ml_region_bind_node(ml_region *r, int node, ml_error *err);
/* The policy of the region (get_mempolicy MPOL_F_ADDR): its mode (MPOL_*)
 * and its node when the mask holds exactly one (-1: empty, -2: several). */
int ml_region_policy(const ml_region *r, int *mode, int *only_node, ml_error *err);

typedef struct ml_node_census {
    uint64_t queried, on_node, elsewhere, not_present;
} ml_node_census;
/* Where the region's 4 KiB pages are (move_pages with no target nodes):
 * at most max_pages pages, evenly spaced, counted against `node`. */
int ml_region_node_census(const ml_region *r, int node, size_t max_pages, ml_node_census *out,
                          ml_error *err);

/* ---- measurements --------------------------------------------------- */

#define ML_METRIC_NAME_MAX 48
#define ML_MAX_METRICS 64
#define ML_MAX_FACTS 8

typedef struct ml_metric {
    char name[ML_METRIC_NAME_MAX];
    double value;
} ml_metric;

/* A fact of one sample in words (which pages a region got): name and value
 * are strings that outlive the sample (literals, the choices tables). */
typedef struct ml_fact {
    const char *name;
    const char *value;
} ml_fact;

/* One sample: what one call of a family's measure() produced. */
struct ml_measurement {
    uint64_t elapsed_ns;   /* the timed region only */
    double units;          /* units of work done in elapsed_ns (elements, loops ...) */
    double bytes;          /* bytes moved/cleared in elapsed_ns; 0 if not meaningful */
    ml_counter_values counters; /* around the timed region */
    int n_metrics;
    ml_metric metrics[ML_MAX_METRICS]; /* the family's own named outputs */
    int n_facts;
    ml_fact facts[ML_MAX_FACTS];       /* facts in words (Python: sample["facts"]) */
};

/* Counters around one timed region, opened only when ctx->counters says so:
 *     ml_counting counting;
 *     ml_counting_start(&counting, ctx);
 *     ... timed work ...
 *     ml_counting_stop(&counting, out);   fills out->counters either way
 * The steps, where opening must come before the timed region starts (a
 * forked child opens, waits for the start, then begins):
 *     ml_counting_open(&counting, ctx, inherit);  inherit: also count the
 *                                   threads and processes started later
 *     ml_counting_begin(&counting);               reset + enable
 *     ml_counting_end(&counting, &values);        stop, read, close; values
 *                                   are marked missing when counting is off */
typedef struct ml_counting {
    ml_counters counters;
    int active;
} ml_counting;
void ml_counting_open(ml_counting *counting, const ml_context *ctx, int inherit);
void ml_counting_begin(ml_counting *counting);
void ml_counting_end(ml_counting *counting, ml_counter_values *values);
void ml_counting_start(ml_counting *counting, const ml_context *ctx);
void ml_counting_stop(ml_counting *counting, ml_measurement *out);

/* A family whose state is just a copy of its config uses this as setup. */
int ml_setup_copy_config(const void *config, size_t bytes, void **state, ml_error *err);

/* Append a named metric; returns -1 (and drops it) when the table is full. */
int ml_metric_add(ml_measurement *m, const char *name, double value);
/* Set a fact (replacing one of the same name); -1 when the table is full. */
int ml_fact_add(ml_measurement *m, const char *name, const char *value);

/* ---- the run context -------------------------------------------------- */

struct ml_context {
    uint64_t target_ns;  /* how long one sample should last; 0: the family's default */
    int counters;        /* 1: attach counters to the sample */
    /* Returns nonzero when the run must stop (Ctrl-C).  Call it between
     * chunks of work, never inside a timed region, and only from the thread
     * that called setup/measure. */
    int (*check_interrupt)(ml_context *ctx);
    void *binding; /* module.c's private data */
    const struct ml_family *family; /* the family being run (a user kernel's setup finds itself) */
};

static inline int ml_interrupted(ml_context *ctx)
{
    return ctx && ctx->check_interrupt ? ctx->check_interrupt(ctx) : 0;
}

/* Convenience for kernels: stop with ML_ERR_INTERRUPTED when asked. */
#define ML_CHECK_INTERRUPT(ctx, err)                                          \
    do {                                                                     \
        if (ml_interrupted(ctx))                                             \
            return ml_fail((err), ML_ERR_INTERRUPTED, 0, "interrupted");     \
    } while (0)

/* ---- child processes (children.c) ------------------------------------
 * The one way the core runs work in other processes (pipe, system).  Each
 * child runs only C: async-signal-safe calls (the parent may have other
 * threads, whose locks a child must not take), then _exit.  One policy for
 * every family:
 * - Ctrl-C is the parent's: a child ignores SIGINT (and SIGPIPE, so that a
 *   closed pipe is an EPIPE to report); the parent checks ctx at least
 *   every 50 ms, and kills every child when the run must stop.
 * - A child dies with the parent (PR_SET_PDEATHSIG, SIGKILL); one whose
 *   parent died before that took effect exits at once.
 * - A child holds no descriptor of the parent's but stdio, its keep_fd and
 *   the shared reports' memfd.
 * - Every exit path kills what still runs, reaps every child and closes
 *   every descriptor the run opened or was handed.
 * Children start together: each calls ml_child_wait_start once ready, and
 * the parent releases them all when every one is. */

#define ML_CHILD_KEEP_MAX 4

/* Memory the parent shares with its children: one report slot per child,
 * zeroed before each run.  A memfd backs it, so that a child that execs
 * another program can still fill its slot (pwrite at its offset). */
typedef struct ml_shared {
    unsigned char *base;
    size_t map_bytes;
    size_t slot_bytes; /* rounded up to a cache line */
    int slots;
    int fd;
} ml_shared;

int ml_shared_map(ml_shared *shared, int slots, size_t slot_bytes, ml_error *err);
void ml_shared_unmap(ml_shared *shared);
static inline void *ml_shared_slot(const ml_shared *shared, int index)
{
    return shared->base + (size_t)index * shared->slot_bytes;
}

typedef struct ml_child {
    const char *comm;      /* process name, as ps shows it (15 bytes at most) */
    int cpu;               /* pin the child to this CPU; -1: wherever the parent may run */
    const char *cpu_param; /* the parameter that chose cpu, for messages */
    int keep_fd[ML_CHILD_KEEP_MAX]; /* descriptors the child keeps; -1: unused */
    /* how it ended, filled by ml_children_run */
    pid_t pid;
    int status; /* from waitpid */
    int reaped;
    int killed; /* by the runner while cleaning up: not the cause of a failure */
} ml_child;

/* What a child's main is handed. */
typedef struct ml_child_io {
    int index;          /* into ml_children.child */
    void *slot;         /* this child's report slot */
    int report_fd;      /* the memfd behind the slots (clear FD_CLOEXEC to pass it on) */
    uint64_t report_offset; /* of this slot in report_fd */
    int ready_fd, go_fd; /* for ml_child_wait_start */
} ml_child_io;

typedef struct ml_children {
    ml_child *child;
    int count;
    /* The child's work, after fork; its return value 0 is exit status 0. */
    int (*main)(void *arg, const ml_child_io *io);
    void *arg;
    ml_shared *shared;   /* at least `count` slots */
    /* The parent's copies of descriptors the children keep: closed once
     * every child is forked, and on every error. */
    int *parent_fds;
    int n_parent_fds;
    uint64_t timeout_ns; /* from the first fork; 0: none */
    const char *what;    /* "the pipe transfer", for messages */
    const char *timeout_text; /* "timeout_s=0.3", for messages */
} ml_children;

/* Fork, wait until every child is ready, release them, wait until every
 * one has ended.  0: every child ran and ended (see child[i].status and
 * the slots); 1: a child ended before every child was ready, the others
 * were killed (the caller says why from the slots and statuses); -1: err
 * says why (fork, a CPU that cannot be used, the timeout, Ctrl-C ...). */
int ml_children_run(ml_children *run, ml_context *ctx, ml_error *err);

/* In a child: tell the parent this child is ready, then wait until it
 * releases every child.  -1: the run was called off. */
int ml_child_wait_start(const ml_child_io *io);

/* ---- families --------------------------------------------------------- */

typedef enum ml_param_kind {
    ML_PARAM_INT,    /* int64_t field, inclusive [min, max] */
    ML_PARAM_DOUBLE, /* double field, inclusive [min_double, max_double] */
    ML_PARAM_BOOL,   /* int field, 0 or 1 */
    ML_PARAM_CHOICE, /* int field: index into a NULL-terminated choices list */
    ML_PARAM_BUFFER, /* ml_buffer field: a C-contiguous Python buffer */
} ml_param_kind;

typedef struct ml_buffer {
    void *data;
    size_t bytes;
    size_t itemsize;
    int writable;
} ml_buffer;

/* A buffer parameter must have items of itemsize bytes and hold at least
 * `items` of them; name is the parameter's, for the message. */
int ml_check_buffer(const ml_buffer *buffer, const char *name, size_t items, size_t itemsize,
                    ml_error *err);

/* A CPU list handed in by Python (memlab.placement chose it; the C core only
 * pins threads to it and checks it): `list` must hold `count` int32 CPUs,
 * each one this process may use or, with `unpinned_ok`, -1 (unpinned), and
 * none twice (two threads on one CPU take turns instead of running
 * together).  `name` is the parameter's, for messages.  Copies them into
 * out[count]; -1 with err (ML_ERR_VALUE, ML_ERR_OS) otherwise. */
int ml_cpu_list_check(const ml_buffer *list, const char *name, int count, int unpinned_ok, int *out,
                      ml_error *err);

typedef struct ml_param {
    const char *name;
    ml_param_kind kind;
    size_t offset;              /* offsetof(config struct, field) */
    int64_t min, max;           /* ML_PARAM_INT */
    double min_double, max_double; /* ML_PARAM_DOUBLE */
    const char *const *choices; /* ML_PARAM_CHOICE */
    int writable;               /* ML_PARAM_BUFFER: must be writable */
    int optional;               /* ML_PARAM_BUFFER: may be absent (then empty: data NULL, 0 bytes) */
    /* The value an absent key takes (module.c, ml_config_defaults); without
     * one the key is required.  Set with the macros below. */
    int has_default;
    int64_t default_int;        /* ML_PARAM_INT, ML_PARAM_BOOL */
    double default_double;      /* ML_PARAM_DOUBLE */
    const char *default_choice; /* ML_PARAM_CHOICE: the choice's name */
} ml_param;

/* In a parameter's designated initialiser: {.name = "npad", ..., ML_DEFAULT(7)}. */
#define ML_DEFAULT(value) .has_default = 1, .default_int = (value)
#define ML_DEFAULT_DOUBLE(value) .has_default = 1, .default_double = (value)
#define ML_DEFAULT_CHOICE(text) .has_default = 1, .default_choice = (text)


typedef struct ml_family {
    const char *name;
    const char *description;
    size_t config_size;
    const ml_param *params; /* terminated by an entry with name == NULL */
    /* Cross-field checks and allocation.  Runs without the GIL; may take
     * long (building a list), so it checks ctx for interrupts. */
    int (*setup)(const void *config, void **state, ml_context *ctx, ml_error *err);
    /* One sample.  Runs without the GIL. */
    int (*measure)(void *state, ml_context *ctx, ml_measurement *out, ml_error *err);
    void (*teardown)(void *state);
} ml_family;

/* Write p's default into its field of config; -1 (err) when it has none or
 * its default is not a value it accepts (a table's own mistake). */
int ml_param_set_default(const ml_param *p, void *config, ml_error *err);
/* Every parameter's default into config (zeroed first; a parameter without
 * one stays zero): what a family driving another through its table starts
 * from, before it sets what differs. */
int ml_config_defaults(const ml_family *family, void *config, ml_error *err);
/* Set an int or bool parameter of family's config by name, range-checked. */
int ml_config_set_int(const ml_family *family, void *config, const char *name, int64_t value, ml_error *err);
/* Set a choice parameter of family's config by name to the choice `text`. */
int ml_config_set_choice(const ml_family *family, void *config, const char *name, const char *text,
                         ml_error *err);

/* Define a family and enter it in the core's table; no central list names
 * it.  In the family's file:
 *     ML_FAMILY(pipe) = {.name = "pipe", ...};
 * The pointer goes to the linker section `ml_families` (a C identifier, so
 * GNU ld, gold and lld define __start_ml_families and __stop_ml_families
 * around it); ml_family_table() reads it back. */
#if defined(__has_attribute)
#if __has_attribute(retain)
#define ML_RETAIN __attribute__((retain))
#endif
#endif
#ifndef ML_RETAIN
#define ML_RETAIN
#endif
#define ML_FAMILY(id)                                                                 \
    extern const ml_family ml_family_##id;                                            \
    static const ml_family *const ml_family_entry_##id                                \
        __attribute__((used, section("ml_families"), aligned(sizeof(void *)))) ML_RETAIN \
        = &ml_family_##id;                                                            \
    const ml_family ml_family_##id

/* Every family linked into the core (core.c), in link order; *count gets
 * how many. */
const ml_family *const *ml_family_table(size_t *count);

#endif
