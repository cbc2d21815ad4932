/* Errors and measurement records shared by every kernel. */
#include <errno.h>
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

int ml_metric_add(ml_measurement *m, const char *name, double value)
{
    if (m->n_metrics >= ML_MAX_METRICS)
        return -1;
    ml_metric *metric = &m->metrics[m->n_metrics++];
    snprintf(metric->name, sizeof(metric->name), "%s", name);
    metric->value = value;
    return 0;
}

void ml_counting_start(ml_counting *counting, const ml_context *ctx)
{
    counting->active = ctx && ctx->counters;
    if (!counting->active)
        return;
    ml_counters_open(&counting->counters, 0, 0);
    ml_counters_start(&counting->counters);
}

void ml_counting_stop(ml_counting *counting, ml_measurement *out)
{
    if (!counting->active) {
        ml_counter_values_missing(&out->counters, 0);
        return;
    }
    ml_counters_stop(&counting->counters);
    ml_counters_read(&counting->counters, &out->counters);
    ml_counters_close(&counting->counters);
    counting->active = 0;
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
