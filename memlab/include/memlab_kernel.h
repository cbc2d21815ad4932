/* memlab_kernel.h: the public API of a user kernel, one C file that becomes
 * a memlab family (docs/own-kernel.md).
 *
 * A kernel file declares its parameters (a config struct and a table of
 * MLK_INT / MLK_FLOAT / MLK_BOOL / MLK_CHOICE entries), defines setup,
 * measure and teardown, and ends with one MEMLAB_KERNEL definition.
 * memlab compiles it with the flags it was built with, loads it, and does
 * the rest as for its own families: parameters checked (a ValueError naming
 * the parameter and its range), warm-up and repeats, pinning, counters
 * around the timed calls, interrupt checks between them, the GIL released.
 *
 * measure(state, iterations, sample, host) does `iterations` repetitions of
 * the work and returns 0.  The harness times each call (or the kernel sets
 * sample->elapsed_ns to time its own region), doubles `iterations` until one
 * call lasts about MLK_CALL_NS, and calls again until the sample's target
 * duration is reached; sample->units (default: the iterations) is the work
 * the call did, so that ns_per_<unit> is elapsed / units.
 *
 * The kernel talks to memlab only through `host` (no symbol of memlab's is
 * linked): errors, metrics, the clock, interrupt checks and memlab's thread
 * team.  The API is versioned: a kernel compiled against another
 * ML_KERNEL_API_VERSION is refused when it is loaded. */
#ifndef MEMLAB_KERNEL_H
#define MEMLAB_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#define ML_KERNEL_API_VERSION 1

/* A call of measure() the harness aims at (it grows `iterations` to it). */
#define MLK_CALL_NS 1000000ull

typedef enum mlk_kind {
    MLK_KIND_INT,    /* int64_t field, inclusive [min, max] */
    MLK_KIND_FLOAT,  /* double field, inclusive [min_float, max_float] */
    MLK_KIND_BOOL,   /* int field, 0 or 1 */
    MLK_KIND_CHOICE, /* int field: the index of the choice in `choices` */
} mlk_kind;

typedef struct mlk_param {
    const char *name; /* carries its unit, memlab's habit: size_bytes, delay_ns */
    mlk_kind kind;
    size_t offset;    /* offsetof(config struct, field) */
    int64_t min, max, default_int;
    double min_float, max_float, default_float;
    const char *const *choices; /* NULL-terminated */
    const char *default_choice;
    const char *unit; /* for --help: "bytes", "ns", "" */
    const char *help; /* one line */
} mlk_param;

/* Entries of the parameter table, which ends with {0}. */
#define MLK_INT(type, field, lo, hi, dflt, unit_, help_)                                      \
    {.name = #field, .kind = MLK_KIND_INT, .offset = offsetof(type, field), .min = (lo),          \
     .max = (hi), .default_int = (dflt), .unit = (unit_), .help = (help_)}
#define MLK_FLOAT(type, field, lo, hi, dflt, unit_, help_)                                    \
    {.name = #field, .kind = MLK_KIND_FLOAT, .offset = offsetof(type, field),                    \
     .min_float = (lo), .max_float = (hi), .default_float = (dflt), .unit = (unit_), .help = (help_)}
#define MLK_BOOL(type, field, dflt, help_)                                                     \
    {.name = #field, .kind = MLK_KIND_BOOL, .offset = offsetof(type, field), .min = 0, .max = 1,  \
     .default_int = (dflt), .unit = "", .help = (help_)}
#define MLK_CHOICE(type, field, choices_, dflt, help_)                                          \
    {.name = #field, .kind = MLK_KIND_CHOICE, .offset = offsetof(type, field),                   \
     .choices = (choices_), .default_choice = (dflt), .unit = "", .help = (help_)}

/* What one call of measure() did; the harness zeroes it before each call. */
typedef struct mlk_sample {
    double units;        /* work done (0: `iterations` units) */
    double bytes;        /* bytes moved, for GB_per_s (0: none) */
    uint64_t elapsed_ns; /* 0: the harness's time of the call; else the kernel's own region */
} mlk_sample;

typedef enum mlk_error_code {
    MLK_ERR_VALUE = 1, /* a bad parameter: ValueError */
    MLK_ERR_MEMORY,    /* MemoryError */
    MLK_ERR_OS,        /* OSError (with errno) */
} mlk_error_code;

typedef struct mlk_host mlk_host;

/* One thread of a team (host->team_run). */
typedef struct mlk_team {
    int *stop; /* memlab's flag: read it with mlk_team_stopping() */
} mlk_team;

static inline int mlk_team_stopping(const mlk_team *team)
{
    return __atomic_load_n(team->stop, __ATOMIC_RELAXED);
}

/* What memlab gives the kernel (every pointer is set). */
struct mlk_host {
    int api_version;
    /* Fill the error and return -1: `return mlk_fail(host, MLK_ERR_VALUE, "...", ...);` */
    int (*fail)(mlk_host *host, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
    /* A named metric of this sample (the last call's value); -1 when the table is full. */
    int (*metric)(mlk_host *host, const char *name, double value);
    uint64_t (*now_ns)(void); /* CLOCK_MONOTONIC */
    /* Nonzero when the work must stop (Ctrl-C, a deadline): check it between
     * chunks of a long setup and return mlk_stop(host).  Only from the
     * thread that called setup or measure. */
    int (*interrupted)(mlk_host *host);
    /* memlab's thread team: run body(arg, index, team) on `threads` threads,
     * pinned to cpus[i] (NULL: unpinned), released together, for run_ns (each
     * body polls mlk_team_stopping(team) between chunks and returns when it
     * says so), then joined; Ctrl-C stops and joins them.  *elapsed_ns (may
     * be NULL) gets the span from the release to the last thread's end, for
     * sample->elapsed_ns.  Adds the team's cpu_fraction, lowest_cpu_fraction
     * and overlap_fraction metrics (docs/dataset.md). */
    int (*team_run)(mlk_host *host, int threads, const int *cpus,
                    void (*body)(void *arg, int index, mlk_team *team), void *arg, uint64_t run_ns,
                    uint64_t *elapsed_ns);
    void *binding; /* memlab's */
};

#define mlk_fail(host, code, ...) ((host)->fail((host), (code), __VA_ARGS__))
/* The return of a setup or measure that saw host->interrupted(). */
#define mlk_stop(host) ((host)->fail((host), 0, "interrupted"))

typedef struct mlk_kernel {
    const char *name;           /* the family's name: [a-z][a-z0-9_]* */
    const char *description;    /* one line */
    size_t config_size;         /* sizeof(the config struct) */
    const mlk_param *params;    /* ends with {0} */
    const char *unit;           /* the work's unit: "element" gives ns_per_element (NULL: "iteration") */
    const char *primary_metric; /* NULL: ns_per_<unit> */
    /* Once, before the samples: check across fields, allocate, build. */
    int (*setup)(const void *config, void **state, mlk_host *host);
    /* One timed call: `iterations` repetitions of the work. */
    int (*measure)(void *state, uint64_t iterations, mlk_sample *sample, mlk_host *host);
    void (*teardown)(void *state);
} mlk_kernel;

/* Ends the kernel file:  MEMLAB_KERNEL = {.name = "walk", ...};
 * It also records the API version this file was compiled against. */
#define MEMLAB_KERNEL                                                                          \
    __attribute__((visibility("default"))) const int memlab_kernel_api_version =              \
        ML_KERNEL_API_VERSION;                                                                 \
    __attribute__((visibility("default"))) const mlk_kernel memlab_kernel

/* splitmix64, the generator of memlab's seeded orders (memlab.twins.splitmix64). */
static inline uint64_t mlk_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Keeps the compiler from removing work whose result is otherwise unused. */
#define mlk_keep(value) __asm__ volatile("" : : "r"(value) : "memory")

#endif
