/* What one worker of the system family reports: its slot in the memory the
 * parent shares with its children (children.c).  A forked worker writes it
 * in place; the spawn and execl loops run in memlab_system_helper
 * (tools/memlab_system_helper.c), which writes it with pwrite() to the
 * shared memory's descriptor at the slot's offset.  Shared by system.c and
 * the helper, which the same build compiles, so the layout always agrees. */
#ifndef MEMLAB_SYSTEM_REPORT_H
#define MEMLAB_SYSTEM_REPORT_H

#include <stdint.h>

/* What failed, when errnum is not 0. */
enum system_stage {
    SYSTEM_STAGE_NONE = 0,
    SYSTEM_STAGE_FORK = 1,
    SYSTEM_STAGE_EXEC = 2,
    SYSTEM_STAGE_WAIT = 3,
    SYSTEM_STAGE_READ = 4,
    SYSTEM_STAGE_WRITE = 5,
    SYSTEM_STAGE_SEEK = 6,
    SYSTEM_STAGE_START = 7,
    SYSTEM_STAGE_USAGE = 9,
};

typedef struct system_report {
    uint64_t count;            /* loops done */
    uint64_t elapsed_ns;
    uint64_t reaped;           /* spawn: children reaped with status 0 */
    uint64_t verified_bytes;   /* file_copy: destination bytes checked */
    uint64_t mismatched_bytes;
    uint64_t cpu_ns;           /* user + system time of the loop, reaped children included */
    int32_t errnum;
    int32_t stage;             /* enum system_stage */
    int32_t done;              /* 1 once the worker wrote its report */
} system_report;

#endif
