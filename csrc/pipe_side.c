/* The two ends of a pipe measurement as processes: what each reports, its
 * buffer and usage (in the end's process, async-signal-safe only), and in
 * the parent, running the pair through children.c and turning how it ended
 * into an error, plus the checks and sums both pipe families share. */
#define _GNU_SOURCE
#include "pipe.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define PIPE_HUGE_BYTES ((size_t)2 << 20)

static const char *const pipe_step_names[PIPE_STEP_COUNT_] = {
    "no step", "mmap",  "madvise",  "fcntl(O_NONBLOCK)", "open /dev/null", "memfd_create",
    "write",   "vmsplice", "read",  "splice",            "the pipe",       "start",
};

/* ---- in an end's process ------------------------------------------------- */

void pipe_side_fail(pipe_side *r, int step, int errnum)
{
    r->failed = 1;
    r->step = step;
    r->errnum = errnum;
}

int pipe_buffer_map(pipe_buffer *b, size_t bytes, int huge, int touch, pipe_side *r)
{
    size_t page_bytes = (size_t)sysconf(_SC_PAGESIZE);
    memset(b, 0, sizeof *b);
    b->bytes = huge ? ml_round_up(bytes, PIPE_HUGE_BYTES) : ml_round_up(bytes, page_bytes);
    b->map_bytes = b->bytes + (huge ? PIPE_HUGE_BYTES : 0);
    void *p = mmap(NULL, b->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        pipe_side_fail(r, PIPE_STEP_MMAP, errno);
        return -1;
    }
    b->map_base = p;
    uintptr_t aligned = (uintptr_t)p;
    if (huge)
        aligned = ml_round_up(aligned, PIPE_HUGE_BYTES);
    b->base = (unsigned char *)aligned;
    if (madvise(b->base, b->bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0) {
        pipe_side_fail(r, PIPE_STEP_MADVISE, errno);
        return -1;
    }
    r->buffer_map_bytes = b->bytes;
    if (touch)
        memset(b->base, 0x5a, b->bytes);
    return 0;
}

int pipe_set_nonblocking(int fd, pipe_side *r)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        pipe_side_fail(r, PIPE_STEP_FCNTL, errno);
        return -1;
    }
    return 0;
}

static void usage_now(long usage[4])
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    usage[0] = u.ru_nvcsw;
    usage[1] = u.ru_nivcsw;
    usage[2] = u.ru_minflt;
    usage[3] = u.ru_majflt;
}

int pipe_side_start(pipe_side *r, const ml_child_io *io, const ml_context *ctx, pipe_side_watch *watch)
{
    ml_counting_open(&watch->counting, ctx, 0);
    if (ml_child_wait_start(io) != 0) {
        pipe_side_fail(r, PIPE_STEP_START, 0);
        return -1;
    }
    long usage[4];
    usage_now(usage);
    watch->voluntary_switches = usage[0];
    watch->involuntary_switches = usage[1];
    watch->minor_faults = usage[2];
    watch->major_faults = usage[3];
    ml_counting_begin(&watch->counting);
    r->start_ns = ml_now_ns();
    return 0;
}

void pipe_side_stop(pipe_side *r, pipe_side_watch *watch)
{
    r->end_ns = ml_now_ns();
    ml_counting_end(&watch->counting, &r->counters);
    long usage[4];
    usage_now(usage);
    r->voluntary_switches = usage[0] - watch->voluntary_switches;
    r->involuntary_switches = usage[1] - watch->involuntary_switches;
    r->minor_faults = usage[2] - watch->minor_faults;
    r->major_faults = usage[3] - watch->major_faults;
}

/* ---- the pair ---------------------------------------------------------------- */

static int side_error(const pipe_side *r, const char *name, uint64_t expected, ml_error *err)
{
    int e = r->errnum;
    if (r->step == PIPE_STEP_EARLY_EOF)
        return ml_fail(err, ML_ERR_OS, EPIPE,
                       "%s process saw the other end close the pipe after %llu of %llu bytes", name,
                       (unsigned long long)r->bytes, (unsigned long long)expected);
    const char *step = r->step > 0 && r->step < PIPE_STEP_COUNT_ ? pipe_step_names[r->step] : "?";
    return ml_fail(err, ML_ERR_OS, e ? e : EIO, "%s process: %s failed after %llu of %llu bytes: %s",
                   name, step, (unsigned long long)r->bytes, (unsigned long long)expected,
                   e ? strerror(e) : "no errno");
}

/* Turn how the ends ended into an error, if any.  The end that failed first
 * is the likelier cause: prefer one killed from outside, then a reported
 * error that is not a mere EOF or EPIPE. */
static int pair_outcome(const ml_child child[2], const pipe_side *side[2], const char *const name[2],
                        uint64_t expected, ml_error *err)
{
    for (int s = 0; s < 2; s++) {
        int status = child[s].status;
        if (WIFSIGNALED(status) && !child[s].killed)
            return ml_fail(err, ML_ERR_OS, ECHILD,
                           "the %s process (pid %d) was killed by signal %d (%s) after moving %llu of "
                           "%llu bytes",
                           name[s], (int)child[s].pid, WTERMSIG(status), strsignal(WTERMSIG(status)),
                           (unsigned long long)side[s]->bytes, (unsigned long long)expected);
    }
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < 2; s++) {
            int secondary = side[s]->step == PIPE_STEP_EARLY_EOF || side[s]->errnum == EPIPE;
            if (side[s]->failed && (pass == 1 || !secondary))
                return side_error(side[s], name[s], expected, err);
        }
    for (int s = 0; s < 2; s++) {
        int status = child[s].status;
        if (child[s].killed)
            continue;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return ml_fail(err, ML_ERR_OS, ECHILD, "the %s process exited with status %d", name[s],
                           WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    return 0;
}

static int pair_child_main(void *arg, const ml_child_io *io)
{
    const pipe_pair *pair = arg;
    return pair->main[io->index](pair, io, io->slot);
}

int pipe_pair_run(pipe_pair *pair, ml_shared *shared, ml_error *err)
{
    ml_child child[2];
    for (int s = 0; s < 2; s++)
        child[s] = (ml_child){
            .comm = pair->comm[s],
            .cpu = pair->cpu[s],
            .cpu_param = pair->cpu_param[s],
            .keep_fd = {pair->fd[s][0], pair->fd[s][1], -1, -1},
        };
    char timeout_text[48];
    snprintf(timeout_text, sizeof timeout_text, "timeout_s=%g", pair->timeout_s);
    ml_children run = {
        .child = child,
        .count = 2,
        .main = pair_child_main,
        .arg = pair,
        .shared = shared,
        .parent_fds = pair->parent_fds,
        .n_parent_fds = pair->n_parent_fds,
        .timeout_ns = (uint64_t)(pair->timeout_s * 1e9),
        .what = pair->what,
        .timeout_text = timeout_text,
    };
    int rc = ml_children_run(&run, pair->ctx, err);
    if (rc < 0)
        return -1;
    const pipe_side *side[2] = {ml_shared_slot(shared, 0), ml_shared_slot(shared, 1)};
    if (pair_outcome(child, side, pair->name, pair->expected, err) != 0)
        return -1;
    if (rc == 1)
        return ml_fail(err, ML_ERR_OS, ECHILD, "a process of %s ended before the start", pair->what);
    return 0;
}

/* ---- checks and sums in the parent ------------------------------------------- */

int pipe_check_cpus(int64_t cpu_a, int64_t cpu_b, const char *name_a, const char *name_b,
                    int busy_loop, ml_error *err)
{
    long configured = sysconf(_SC_NPROCESSORS_CONF);
    const int64_t cpus[2] = {cpu_a, cpu_b};
    const char *names[2] = {name_a, name_b};
    for (int s = 0; s < 2; s++)
        if (cpus[s] >= configured || cpus[s] >= CPU_SETSIZE)
            return ml_fail(err, ML_ERR_VALUE, 0, "%s=%lld is above the highest CPU number %ld",
                           names[s], (long long)cpus[s], configured - 1);
    if (!busy_loop)
        return 0;
    cpu_set_t allowed, both;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return ml_fail(err, ML_ERR_OS, errno, "sched_getaffinity: %s", strerror(errno));
    CPU_ZERO(&both);
    for (int s = 0; s < 2; s++) {
        if (cpus[s] >= 0)
            CPU_SET((int)cpus[s], &both);
        else
            CPU_OR(&both, &both, &allowed);
    }
    if (CPU_COUNT(&both) < 2)
        return ml_fail(err, ML_ERR_VALUE, 0,
                       "busy_loop=True needs the two ends on two different CPUs, but %s=%lld and "
                       "%s=%lld leave them on one CPU (this process may run on %d CPU(s)): each end "
                       "would spin through its whole time slice waiting for the other, which cannot "
                       "run meanwhile (seen moving 0.04 GiB/s for minutes)",
                       name_a, (long long)cpu_a, name_b, (long long)cpu_b, CPU_COUNT(&allowed));
    return 0;
}

uint64_t pipe_grow_count(uint64_t count, uint64_t elapsed_ns, uint64_t target_ns, uint64_t multiple,
                         uint64_t maximum)
{
    double factor = 1.15 * (double)target_ns / (double)(elapsed_ns ? elapsed_ns : 1);
    if (factor < 1.25)
        factor = 1.25;
    if (factor > 64)
        factor = 64;
    double next = (double)count * factor;
    if (next > (double)maximum)
        next = (double)maximum;
    uint64_t n = ml_round_up((uint64_t)next, multiple);
    return n > count ? n : count + multiple;
}

void pipe_merge_counters(ml_counter_values *out, const pipe_side *a, const pipe_side *b, int counting)
{
    if (!counting) {
        ml_counter_values_missing(out, 0);
        return;
    }
    memset(out, 0, sizeof *out);
    out->kernel_included = a->counters.kernel_included && b->counters.kernel_included;
    for (int k = 0; k < ML_COUNTER_COUNT; k++) {
        if (a->counters.present[k] && b->counters.present[k]) {
            out->present[k] = 1;
            out->value[k] = a->counters.value[k] + b->counters.value[k];
            double fa = a->counters.running_fraction[k], fb = b->counters.running_fraction[k];
            out->running_fraction[k] = fa < fb ? fa : fb;
        } else {
            out->missing_errno[k] =
                a->counters.present[k] ? b->counters.missing_errno[k] : a->counters.missing_errno[k];
            if (out->missing_errno[k] == 0)
                out->missing_errno[k] = ENOENT;
        }
    }
}

void pipe_add_side_metrics(ml_measurement *out, const pipe_side *r, const char *side)
{
    char name[ML_METRIC_NAME_MAX];
    snprintf(name, sizeof name, "%s_context_switches", side);
    ml_metric_add(out, name, (double)(r->voluntary_switches + r->involuntary_switches));
    snprintf(name, sizeof name, "%s_involuntary_switches", side);
    ml_metric_add(out, name, (double)r->involuntary_switches);
    snprintf(name, sizeof name, "%s_page_faults", side);
    ml_metric_add(out, name, (double)(r->minor_faults + r->major_faults));
    snprintf(name, sizeof name, "%s_calls", side);
    ml_metric_add(out, name, (double)r->calls);
    snprintf(name, sizeof name, "%s_eagain_spins", side);
    ml_metric_add(out, name, (double)r->eagain);
}
