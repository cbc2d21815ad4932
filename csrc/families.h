/* The one place a C family is registered: add X(name) for a file that
 * defines `const ml_family ml_family_name`.  Keep one per line. */
#ifndef MEMLAB_FAMILIES_H
#define MEMLAB_FAMILIES_H

#define ML_FAMILIES(X) \
    X(calibrate)       \
    X(region)          \
    X(clear_fault)     \
    X(clear_order)     \
    X(clear_kernel_order) \
    X(clear_plan)      \
    X(matrix)          \
    X(matrix_init)     \
    X(system)          \
    X(share)           \
    X(chase)           \
    X(chase_trace)     \
    X(pipe)            \
    X(pipe_latency)    \
    X(bandwidth)       \
    X(bandwidth_pass)  \
    /* end */

#endif
