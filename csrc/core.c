/* Errors, measurement records, the counting bracket, pinned threads and the
 * family table: what every kernel shares. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "memlab.h"

int ml_fail(ml_error *err, ml_error_code code, int errnum, const char *fmt, ...)
{
    if (!err)
        return -1;
    err->code = code;
    err->errnum = errnum;
    va_list args;
    va_start(args, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, args);
    va_end(args);
    return -1;
}

static const char *const cpu_feature_names[ML_CPU_FEATURE_COUNT] = {"sse2", "avx2", "avx512f"};

static int cpu_feature_hidden(ml_cpu_feature feature)
{
    const char *hidden = getenv("MEMLAB_HIDE_CPU_FEATURES");
    if (!hidden)
        return 0;
    for (int narrower = 0; narrower <= (int)feature; narrower++) {
        size_t length = strlen(cpu_feature_names[narrower]);
        for (const char *at = hidden; (at = strstr(at, cpu_feature_names[narrower])); at += length) {
            int starts = at == hidden || at[-1] == ',' || at[-1] == ' ';
            int ends = at[length] == '\0' || at[length] == ',' || at[length] == ' ';
            if (starts && ends)
                return 1;
        }
    }
    return 0;
}

int ml_cpu_supports(ml_cpu_feature feature)
{
    if (feature < 0 || feature >= ML_CPU_FEATURE_COUNT || cpu_feature_hidden(feature))
        return 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    switch (feature) {
    case ML_CPU_SSE2:
        return __builtin_cpu_supports("sse2");
    case ML_CPU_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case ML_CPU_AVX512F:
        return __builtin_cpu_supports("avx512f");
    default:
        return 0;
    }
#else
    return 0;
#endif
}

int ml_thread_start_pinned(pthread_t *tid, int cpu, size_t stack_bytes, void *(*fn)(void *), void *arg,
                           ml_error *err, const char *what_fmt, ...)
{
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc == 0 && stack_bytes)
        rc = pthread_attr_setstacksize(&attr, stack_bytes);
    if (rc == 0 && cpu >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        if (cpu < CPU_SETSIZE)
            CPU_SET(cpu, &one);
        rc = cpu < CPU_SETSIZE ? pthread_attr_setaffinity_np(&attr, sizeof one, &one) : EINVAL;
    }
    if (rc == 0)
        rc = pthread_create(tid, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    if (rc == 0) {
        /* Named so that a test, top -H or a debugger tells memlab's own threads from the
         * process's others; a thread that already ended cannot be named, which is harmless. */
        (void)pthread_setname_np(*tid, ML_THREAD_NAME);
        return 0;
    }
    char what[160], where[32] = "(unpinned)";
    va_list args;
    va_start(args, what_fmt);
    vsnprintf(what, sizeof what, what_fmt, args);
    va_end(args);
    if (cpu >= 0)
        snprintf(where, sizeof where, "on CPU %d", cpu);
    if (rc == EINVAL && cpu >= 0)
        return ml_fail(err, ML_ERR_VALUE, rc,
                       "cannot start %s on CPU %d: not a CPU this process may use (affinity or cpuset)",
                       what, cpu);
    /* an OSError shows the errno itself; a MemoryError only says what the message says */
    if (rc == EAGAIN)
        return ml_fail(err, ML_ERR_MEMORY, rc, "cannot start %s %s: %s (errno %d: too many threads, or no "
                       "memory for a thread stack)", what, where, strerror(rc), rc);
    return ml_fail(err, ML_ERR_OS, rc, "cannot start %s %s: %s", what, where, strerror(rc));
}

int ml_metric_add(ml_measurement *m, const char *name, double value)
{
    if (m->n_metrics >= ML_MAX_METRICS)
        return -1;
    ml_metric *metric = &m->metrics[m->n_metrics++];
    snprintf(metric->name, sizeof(metric->name), "%s", name);
    metric->value = value;
    return 0;
}

int ml_fact_add(ml_measurement *m, const char *name, const char *value)
{
    for (int i = 0; i < m->n_facts; i++)
        if (strcmp(m->facts[i].name, name) == 0) {
            m->facts[i].value = value;
            return 0;
        }
    if (m->n_facts >= ML_MAX_FACTS)
        return -1;
    m->facts[m->n_facts++] = (ml_fact){name, value};
    return 0;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ml_median(double *values, size_t count)
{
    if (count == 0)
        return 0.0;
    qsort(values, count, sizeof(double), compare_doubles);
    return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

void ml_counting_open(ml_counting *counting, const ml_context *ctx, int inherit)
{
    counting->active = ctx && ctx->counters;
    if (counting->active)
        ml_counters_open(&counting->counters, 0, inherit);
}

void ml_counting_begin(ml_counting *counting)
{
    if (counting->active)
        ml_counters_start(&counting->counters);
}

void ml_counting_end(ml_counting *counting, ml_counter_values *values)
{
    if (!counting->active) {
        ml_counter_values_missing(values, 0);
        return;
    }
    ml_counters_stop(&counting->counters);
    ml_counters_read(&counting->counters, values);
    ml_counters_close(&counting->counters);
    counting->active = 0;
}

void ml_counting_start(ml_counting *counting, const ml_context *ctx)
{
    ml_counting_open(counting, ctx, 0);
    ml_counting_begin(counting);
}

void ml_counting_stop(ml_counting *counting, ml_measurement *out)
{
    ml_counting_end(counting, &out->counters);
}

/* The linker defines these around the section ML_FAMILY fills; weak, so
 * that a core without families links (and has an empty table). */
extern const ml_family *const __start_ml_families[] __attribute__((weak));
extern const ml_family *const __stop_ml_families[] __attribute__((weak));

const ml_family *const *ml_family_table(size_t *count)
{
    *count = __start_ml_families ? (size_t)(__stop_ml_families - __start_ml_families) : 0;
    return __start_ml_families;
}

int ml_check_buffer(const ml_buffer *buffer, const char *name, size_t items, size_t itemsize,
                    ml_error *err)
{
    if (buffer->itemsize != itemsize)
        return ml_fail(err, ML_ERR_VALUE, 0, "%s has items of %zu bytes; expected %zu", name,
                       buffer->itemsize, itemsize);
    if (buffer->bytes < items * itemsize)
        return ml_fail(err, ML_ERR_VALUE, 0, "%s holds %zu items; at least %zu are needed", name,
                       buffer->bytes / itemsize, items);
    return 0;
}

int ml_setup_copy_config(const void *config, size_t bytes, void **state, ml_error *err)
{
    void *copy = malloc(bytes ? bytes : 1);
    if (!copy)
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for a %zu-byte config", bytes);
    memcpy(copy, config, bytes);
    *state = copy;
    return 0;
}
