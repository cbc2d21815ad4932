/* The calibrate family: the core clock (clock.c's add-chain calibration) as a
 * measurement of its own, so that a run or a sweep can record it. */
#include <stddef.h>
#include <stdlib.h>

#include "memlab.h"

typedef struct {
    int64_t budget_ns;
} calibrate_config;

static const ml_param calibrate_params[] = {
    {.name = "budget_ns", .kind = ML_PARAM_INT, .offset = offsetof(calibrate_config, budget_ns),
     .min = 1000000, .max = 60000000000, ML_DEFAULT(100000000)},
    {0},
};

static int calibrate_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    (void)ctx;
    return ml_setup_copy_config(config, sizeof(calibrate_config), state, err);
}

static int calibrate_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    const calibrate_config *config = state;
    ml_frequency frequency;
    ml_counting counting;
    ml_counting_start(&counting, ctx);
    uint64_t start = ml_now_ns();
    int rc = ml_calibrate_frequency(&frequency, (uint64_t)config->budget_ns, ctx, err);
    out->elapsed_ns = ml_now_ns() - start;
    ml_counting_stop(&counting, out);
    if (rc < 0)
        return rc;
    out->units = frequency.samples;
    ml_metric_add(out, "core_GHz", frequency.ghz);
    ml_metric_add(out, "core_GHz_lowest", frequency.ghz_min);
    ml_metric_add(out, "core_GHz_highest", frequency.ghz_max);
    ml_metric_add(out, "imul_GHz", frequency.imul_ghz);
    ml_metric_add(out, "calibration_timings", frequency.samples);
    return 0;
}

static void calibrate_teardown(void *state)
{
    free(state);
}

ML_FAMILY(calibrate) = {
    .name = "calibrate",
    .description = "core clock from a dependent add chain (GHz)",
    .config_size = sizeof(calibrate_config),
    .params = calibrate_params,
    .setup = calibrate_setup,
    .measure = calibrate_measure,
    .teardown = calibrate_teardown,
};
