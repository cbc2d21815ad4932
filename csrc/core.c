/* Errors and measurement records shared by every kernel. */
#include <stdarg.h>
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
