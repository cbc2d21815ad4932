/* perf_event_open counters, one fd per event.  Each event is optional: one
 * the kernel refuses stays closed and is reported missing with its errno,
 * never as zero.  Counts are scaled by enabled/running time when the PMU
 * multiplexed them. */
#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "memlab.h"

/* errno stand-in for a counter that opened but never ran on the PMU. */
#define ML_NEVER_SCHEDULED (-1)

const char *const ml_counter_names[ML_COUNTER_COUNT] = {
    [ML_COUNTER_PAGE_FAULTS] = "page_faults",
    [ML_COUNTER_MINOR_FAULTS] = "minor_faults",
    [ML_COUNTER_MAJOR_FAULTS] = "major_faults",
    [ML_COUNTER_CONTEXT_SWITCHES] = "context_switches",
    [ML_COUNTER_CPU_MIGRATIONS] = "cpu_migrations",
    [ML_COUNTER_TASK_CLOCK_NS] = "task_clock_ns",
    [ML_COUNTER_CYCLES] = "cycles",
    [ML_COUNTER_INSTRUCTIONS] = "instructions",
    [ML_COUNTER_CACHE_REFERENCES] = "cache_references",
    [ML_COUNTER_CACHE_MISSES] = "cache_misses",
    [ML_COUNTER_LLC_LOAD_MISSES] = "llc_load_misses",
    [ML_COUNTER_DTLB_LOAD_MISSES] = "dtlb_load_misses",
    [ML_COUNTER_L1D_LOAD_MISSES] = "l1d_load_misses",
};

#define CACHE_EVENT(cache, op, result) \
    ((cache) | ((op) << 8) | ((result) << 16))

static const struct {
    uint32_t type;
    uint64_t config;
} events[ML_COUNTER_COUNT] = {
    [ML_COUNTER_PAGE_FAULTS] = {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    [ML_COUNTER_MINOR_FAULTS] = {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN},
    [ML_COUNTER_MAJOR_FAULTS] = {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ},
    [ML_COUNTER_CONTEXT_SWITCHES] = {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    [ML_COUNTER_CPU_MIGRATIONS] = {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    [ML_COUNTER_TASK_CLOCK_NS] = {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    [ML_COUNTER_CYCLES] = {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    [ML_COUNTER_INSTRUCTIONS] = {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    [ML_COUNTER_CACHE_REFERENCES] = {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES},
    [ML_COUNTER_CACHE_MISSES] = {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    [ML_COUNTER_LLC_LOAD_MISSES] = {PERF_TYPE_HW_CACHE,
                                    CACHE_EVENT(PERF_COUNT_HW_CACHE_LL, PERF_COUNT_HW_CACHE_OP_READ,
                                                PERF_COUNT_HW_CACHE_RESULT_MISS)},
    [ML_COUNTER_DTLB_LOAD_MISSES] = {PERF_TYPE_HW_CACHE,
                                     CACHE_EVENT(PERF_COUNT_HW_CACHE_DTLB,
                                                 PERF_COUNT_HW_CACHE_OP_READ,
                                                 PERF_COUNT_HW_CACHE_RESULT_MISS)},
    [ML_COUNTER_L1D_LOAD_MISSES] = {PERF_TYPE_HW_CACHE,
                                    CACHE_EVENT(PERF_COUNT_HW_CACHE_L1D, PERF_COUNT_HW_CACHE_OP_READ,
                                                PERF_COUNT_HW_CACHE_RESULT_MISS)},
};

static int open_event(int id, pid_t pid, int inherit, int exclude_kernel)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = events[id].type;
    attr.config = events[id].config;
    attr.disabled = 1;
    attr.inherit = inherit ? 1 : 0;
    attr.exclude_kernel = exclude_kernel ? 1 : 0;
    attr.exclude_hv = 1;
    attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    return (int)syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

void ml_counters_open(ml_counters *c, pid_t pid, int inherit)
{
    /* Kernel-inclusive counting needs privilege (perf_event_paranoid); try it
     * on the first event and keep whichever scope worked for all. */
    int exclude_kernel = 0;
    int fd = open_event(ML_COUNTER_PAGE_FAULTS, pid, inherit, 0);
    if (fd < 0 && (errno == EACCES || errno == EPERM)) {
        exclude_kernel = 1;
        fd = open_event(ML_COUNTER_PAGE_FAULTS, pid, inherit, 1);
    }
    c->kernel_included = !exclude_kernel;
    c->fd[ML_COUNTER_PAGE_FAULTS] = fd;
    c->open_errno[ML_COUNTER_PAGE_FAULTS] = fd < 0 ? errno : 0;
    for (int i = 0; i < ML_COUNTER_COUNT; i++) {
        if (i == ML_COUNTER_PAGE_FAULTS)
            continue;
        c->fd[i] = open_event(i, pid, inherit, exclude_kernel);
        c->open_errno[i] = c->fd[i] < 0 ? errno : 0;
    }
}

void ml_counters_start(ml_counters *c)
{
    for (int i = 0; i < ML_COUNTER_COUNT; i++)
        if (c->fd[i] >= 0)
            ioctl(c->fd[i], PERF_EVENT_IOC_RESET, 0);
    for (int i = 0; i < ML_COUNTER_COUNT; i++)
        if (c->fd[i] >= 0)
            ioctl(c->fd[i], PERF_EVENT_IOC_ENABLE, 0);
}

void ml_counters_stop(ml_counters *c)
{
    for (int i = 0; i < ML_COUNTER_COUNT; i++)
        if (c->fd[i] >= 0)
            ioctl(c->fd[i], PERF_EVENT_IOC_DISABLE, 0);
}

void ml_counters_read(const ml_counters *c, ml_counter_values *out)
{
    out->kernel_included = c->kernel_included;
    for (int i = 0; i < ML_COUNTER_COUNT; i++) {
        uint64_t data[3] = {0, 0, 0}; /* value, time enabled, time running */
        out->present[i] = 0;
        out->value[i] = 0.0;
        out->running_fraction[i] = 0.0;
        out->missing_errno[i] = c->open_errno[i];
        if (c->fd[i] < 0)
            continue;
        if (read(c->fd[i], data, sizeof(data)) != (ssize_t)sizeof(data)) {
            out->missing_errno[i] = errno ? errno : EIO;
            continue;
        }
        if (data[2] == 0) {
            /* Software events can be enabled for less than a tick and show
             * zero running time with a zero count: that is a real zero. */
            if (events[i].type == PERF_TYPE_SOFTWARE && data[0] == 0) {
                out->present[i] = 1;
                out->running_fraction[i] = 1.0;
                continue;
            }
            out->missing_errno[i] = ML_NEVER_SCHEDULED;
            continue;
        }
        double fraction = (double)data[2] / (double)(data[1] ? data[1] : data[2]);
        out->present[i] = 1;
        out->running_fraction[i] = fraction;
        out->value[i] = (double)data[0] / fraction;
        out->missing_errno[i] = 0;
    }
}

void ml_counters_close(ml_counters *c)
{
    for (int i = 0; i < ML_COUNTER_COUNT; i++) {
        if (c->fd[i] >= 0)
            close(c->fd[i]);
        c->fd[i] = -1;
    }
}

void ml_counter_values_missing(ml_counter_values *out, int errnum)
{
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < ML_COUNTER_COUNT; i++)
        out->missing_errno[i] = errnum;
}

const char *ml_counter_reason(int errnum)
{
    switch (errnum) {
    case 0:
        return "not requested";
    case ML_NEVER_SCHEDULED:
        return "opened but never scheduled on the PMU (multiplexed out)";
    case ENOENT:
        return "event not supported by this CPU or hypervisor (ENOENT)";
    case EOPNOTSUPP:
        return "not supported by this PMU (EOPNOTSUPP)";
    case ENODEV:
        return "no such PMU (ENODEV)";
    case EACCES:
    case EPERM:
        return "not permitted: see /proc/sys/kernel/perf_event_paranoid (EACCES/EPERM)";
    case ENOSYS:
        return "perf_event_open is not available (ENOSYS)";
    case EINVAL:
        return "the kernel rejected the event (EINVAL)";
    case EMFILE:
        return "too many open files (EMFILE)";
    default:
        return strerror(errnum);
    }
}
