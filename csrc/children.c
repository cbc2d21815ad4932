/* The one N-process runner (memlab.h says its policy): fork the children,
 * let each set itself up, release them together, wait for every one in
 * poll() on pidfds at most CHILDREN_POLL_MS at a time, checking for Ctrl-C
 * and the timeout, and on every way out kill, reap and close. */
#define _GNU_SOURCE
#include "memlab.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define CHILDREN_POLL_MS 50
#define CHILDREN_POLL_WITHOUT_PIDFD_MS 10
#define CHILDREN_SLOT_ALIGN 64
#define CHILD_KEEP_ALL (ML_CHILD_KEEP_MAX + 3)

/* How far a child got in setting itself up; the runner's own record, after
 * the family's slots in the shared memory. */
enum { FATE_NONE = 0, FATE_AFFINITY };

typedef struct child_fate {
    int step;
    int errnum;
} child_fate;

/* ---- the shared reports -------------------------------------------------- */

static child_fate *shared_fates(const ml_shared *shared)
{
    return (child_fate *)(shared->base + (size_t)shared->slots * shared->slot_bytes);
}

int ml_shared_map(ml_shared *shared, int slots, size_t slot_bytes, ml_error *err)
{
    memset(shared, 0, sizeof *shared);
    shared->fd = -1;
    shared->slots = slots;
    shared->slot_bytes = ml_round_up(slot_bytes ? slot_bytes : 1, CHILDREN_SLOT_ALIGN);
    size_t page_bytes = (size_t)sysconf(_SC_PAGESIZE);
    shared->map_bytes =
        ml_round_up((size_t)slots * (shared->slot_bytes + sizeof(child_fate)), page_bytes);
    int fd = memfd_create("memlab-children", MFD_CLOEXEC);
    if (fd < 0)
        return ml_fail(err, ML_ERR_OS, errno, "memfd_create for the children's reports: %s",
                       strerror(errno));
    if (ftruncate(fd, (off_t)shared->map_bytes) != 0) {
        int e = errno;
        close(fd);
        return ml_fail(err, ML_ERR_OS, e, "ftruncate of the children's reports: %s", strerror(e));
    }
    void *p = mmap(NULL, shared->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return ml_fail(err, ML_ERR_OS, e, "mmap of the children's reports: %s", strerror(e));
    }
    shared->base = p;
    shared->fd = fd;
    return 0;
}

void ml_shared_unmap(ml_shared *shared)
{
    if (shared->base)
        munmap(shared->base, shared->map_bytes);
    if (shared->fd >= 0)
        close(shared->fd);
    shared->base = NULL;
    shared->fd = -1;
}

/* ---- in the child: async-signal-safe only ---------------------------------- */

static void close_between(unsigned int first, unsigned int last)
{
    if (syscall(SYS_close_range, first, last, 0) == 0)
        return;
    /* no close_range (before Linux 5.9): one by one, up to the limit */
    struct rlimit limit;
    unsigned int top = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < 65536
                           ? (unsigned int)limit.rlim_cur
                           : 65536;
    for (unsigned int fd = first; fd <= last && fd < top; fd++)
        close((int)fd);
}

/* Close every descriptor above stdio but the ones in keep_in. */
static void close_all_but(const int *keep_in, int n_keep)
{
    int keep[CHILD_KEEP_ALL];
    int n = 0;
    for (int k = 0; k < n_keep; k++) {
        if (keep_in[k] <= 2)
            continue;
        int at = n++;
        while (at > 0 && keep[at - 1] > keep_in[k]) {
            keep[at] = keep[at - 1];
            at--;
        }
        keep[at] = keep_in[k];
    }
    unsigned int next = 3;
    for (int k = 0; k < n; k++) {
        unsigned int fd = (unsigned int)keep[k];
        if (fd < next)
            continue; /* listed twice */
        if (fd > next)
            close_between(next, fd - 1);
        next = fd + 1;
    }
    close_between(next, ~0U);
}

static void ignore_signal(int signal_number)
{
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    sigaction(signal_number, &ignore, NULL);
}

/* Fork's other side: set the child up by the policy, run main, _exit. */
static void child_enter(const ml_children *run, int index, int ready_fd, int go_fd, pid_t parent)
{
    const ml_child *child = &run->child[index];
    child_fate *fate = &shared_fates(run->shared)[index];
    int keep[CHILD_KEEP_ALL];
    int n_keep = 0;
    for (int k = 0; k < ML_CHILD_KEEP_MAX; k++)
        if (child->keep_fd[k] >= 0)
            keep[n_keep++] = child->keep_fd[k];
    keep[n_keep++] = ready_fd;
    keep[n_keep++] = go_fd;
    keep[n_keep++] = run->shared->fd;
    close_all_but(keep, n_keep);

    ignore_signal(SIGINT);  /* Ctrl-C belongs to the parent */
    ignore_signal(SIGPIPE); /* a closed pipe is an EPIPE to report */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* the parent died before the line above */
        _exit(1);
    prctl(PR_SET_NAME, child->comm);
    if (child->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(child->cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) {
            fate->errnum = errno;
            fate->step = FATE_AFFINITY;
            _exit(1);
        }
    }
    ml_child_io io = {
        .index = index,
        .slot = ml_shared_slot(run->shared, index),
        .report_fd = run->shared->fd,
        .report_offset = (uint64_t)index * run->shared->slot_bytes,
        .ready_fd = ready_fd,
        .go_fd = go_fd,
    };
    _exit(run->main(run->arg, &io) == 0 ? 0 : 1);
}

int ml_child_wait_start(const ml_child_io *io)
{
    char byte = 1;
    while (write(io->ready_fd, &byte, 1) < 0 && errno == EINTR)
        ;
    close(io->ready_fd);
    ssize_t n;
    while ((n = read(io->go_fd, &byte, 1)) < 0 && errno == EINTR)
        ;
    close(io->go_fd);
    return n == 0 ? 0 : -1; /* the parent releases by closing the pipe */
}

/* ---- in the parent ---------------------------------------------------------- */

typedef struct runner {
    ml_children *run;
    int *pidfd;
    struct pollfd *fds;
    int ready_fd, go_fd;             /* the parent's ends */
    int child_ready_fd, child_go_fd; /* the children's ends */
    int forked;
    int have_all_pidfds;
} runner;

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

static void close_parent_fds(ml_children *run)
{
    for (int k = 0; k < run->n_parent_fds; k++)
        close_fd(&run->parent_fds[k]);
}

static void reap(ml_child *child, int block)
{
    if (child->pid <= 0 || child->reaped)
        return;
    for (;;) {
        pid_t got = waitpid(child->pid, &child->status, block ? 0 : WNOHANG);
        if (got == child->pid) {
            child->reaped = 1;
            return;
        }
        if (got == 0)
            return;
        if (errno == EINTR)
            continue;
        child->reaped = 1; /* ECHILD: reaped elsewhere */
        child->status = 0;
        return;
    }
}

/* The one way out: kill what still runs, reap everything, close everything. */
static void finish(runner *r)
{
    ml_children *run = r->run;
    for (int i = 0; i < r->forked; i++) {
        reap(&run->child[i], 0);
        if (!run->child[i].reaped) {
            kill(run->child[i].pid, SIGKILL);
            run->child[i].killed = 1;
        }
    }
    for (int i = 0; i < r->forked; i++)
        reap(&run->child[i], 1);
    for (int i = 0; r->pidfd && i < run->count; i++)
        close_fd(&r->pidfd[i]);
    close_fd(&r->ready_fd);
    close_fd(&r->go_fd);
    close_fd(&r->child_ready_fd);
    close_fd(&r->child_go_fd);
    close_parent_fds(run);
    free(r->pidfd);
    free(r->fds);
    r->pidfd = NULL;
    r->fds = NULL;
}

static const char *killed_text(int count)
{
    return count == 1 ? "its process was" : count == 2 ? "both processes were" : "every process was";
}

static int start_children(runner *r, ml_error *err)
{
    ml_children *run = r->run;
    int ready[2], go[2];
    if (pipe2(ready, O_CLOEXEC) != 0)
        return ml_fail(err, ML_ERR_OS, errno, "pipe2 for the start signal: %s", strerror(errno));
    r->ready_fd = ready[0];
    r->child_ready_fd = ready[1];
    if (pipe2(go, O_CLOEXEC) != 0)
        return ml_fail(err, ML_ERR_OS, errno, "pipe2 for the start signal: %s", strerror(errno));
    r->child_go_fd = go[0];
    r->go_fd = go[1];
    pid_t parent = getpid();
    r->have_all_pidfds = 1;
    for (int i = 0; i < run->count; i++) {
        pid_t pid = fork();
        if (pid < 0)
            return ml_fail(err, ML_ERR_OS, errno, "fork of %s (process %d of %d for %s) failed: %s",
                           run->child[i].comm, i + 1, run->count, run->what, strerror(errno));
        if (pid == 0)
            child_enter(run, i, r->child_ready_fd, r->child_go_fd, parent);
        run->child[i].pid = pid;
        r->forked = i + 1;
        r->pidfd[i] = (int)syscall(SYS_pidfd_open, pid, 0);
        if (r->pidfd[i] < 0)
            r->have_all_pidfds = 0;
    }
    close_fd(&r->child_ready_fd);
    close_fd(&r->child_go_fd);
    close_parent_fds(run);
    return 0;
}

/* Wait until every child is ready (want_ready) or has ended.  1: a child
 * ended while the others were getting ready. */
static int wait_children(runner *r, int want_ready, uint64_t deadline_ns, ml_context *ctx,
                         ml_error *err)
{
    ml_children *run = r->run;
    int ready_count = 0;
    for (;;) {
        int running = 0;
        for (int i = 0; i < run->count; i++) {
            reap(&run->child[i], 0);
            running += !run->child[i].reaped;
        }
        if (want_ready && running < run->count)
            return 1;
        if (!want_ready && running == 0)
            return 0;
        uint64_t now = ml_now_ns();
        if (now >= deadline_ns)
            return ml_fail(err, ML_ERR_TIMEOUT, ETIMEDOUT, "%s did not finish within %s; %s killed",
                           run->what, run->timeout_text ? run->timeout_text : "its time limit",
                           killed_text(run->count));
        if (ml_interrupted(ctx))
            return ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
        int n = 0;
        if (want_ready)
            r->fds[n++] = (struct pollfd){.fd = r->ready_fd, .events = POLLIN};
        for (int i = 0; i < run->count; i++)
            if (r->pidfd[i] >= 0 && !run->child[i].reaped)
                r->fds[n++] = (struct pollfd){.fd = r->pidfd[i], .events = POLLIN};
        int slice_ms = r->have_all_pidfds ? CHILDREN_POLL_MS : CHILDREN_POLL_WITHOUT_PIDFD_MS;
        uint64_t left_ms = (deadline_ns - now) / 1000000 + 1;
        if (left_ms < (uint64_t)slice_ms)
            slice_ms = (int)left_ms;
        int got = poll(r->fds, (nfds_t)n, slice_ms);
        if (got < 0 && errno != EINTR)
            return ml_fail(err, ML_ERR_OS, errno, "poll while waiting for %s: %s", run->what,
                           strerror(errno));
        if (want_ready && got > 0 && (r->fds[0].revents & POLLIN)) {
            char bytes[256];
            size_t want = (size_t)(run->count - ready_count);
            ssize_t k = read(r->ready_fd, bytes, want < sizeof bytes ? want : sizeof bytes);
            if (k > 0)
                ready_count += (int)k;
            if (ready_count >= run->count)
                return 0;
        }
    }
}

/* A child that could not set itself up is the run's error. */
static int setup_failure(const ml_children *run, ml_error *err)
{
    const child_fate *fates = shared_fates(run->shared);
    for (int i = 0; i < run->count; i++)
        if (fates[i].step == FATE_AFFINITY)
            return ml_fail(err, ML_ERR_VALUE, fates[i].errnum, "%s=%d cannot be used: sched_setaffinity: %s",
                           run->child[i].cpu_param ? run->child[i].cpu_param : "cpu", run->child[i].cpu,
                           strerror(fates[i].errnum));
    return 0;
}

int ml_children_run(ml_children *run, ml_context *ctx, ml_error *err)
{
    runner r = {.run = run, .ready_fd = -1, .go_fd = -1, .child_ready_fd = -1, .child_go_fd = -1};
    if (run->count < 1 || run->count > run->shared->slots) {
        close_parent_fds(run);
        return ml_fail(err, ML_ERR_VALUE, EINVAL, "%s: %d processes for %d report slots", run->what,
                       run->count, run->shared->slots);
    }
    memset(run->shared->base, 0, run->shared->map_bytes);
    for (int i = 0; i < run->count; i++) {
        run->child[i].pid = -1;
        run->child[i].status = 0;
        run->child[i].reaped = 0;
        run->child[i].killed = 0;
    }
    uint64_t deadline = run->timeout_ns ? ml_now_ns() + run->timeout_ns : UINT64_MAX;
    r.pidfd = malloc((size_t)run->count * sizeof *r.pidfd);
    r.fds = malloc(((size_t)run->count + 1) * sizeof *r.fds);
    if (!r.pidfd || !r.fds) {
        finish(&r);
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory to run %d processes", run->count);
    }
    for (int i = 0; i < run->count; i++)
        r.pidfd[i] = -1;
    int rc = start_children(&r, err);
    if (rc == 0)
        rc = wait_children(&r, 1, deadline, ctx, err);
    if (rc == 0) {
        close_fd(&r.go_fd); /* end of file on the go pipe releases every child */
        rc = wait_children(&r, 0, deadline, ctx, err);
    }
    finish(&r);
    if (rc == 1 && setup_failure(run, err) != 0)
        return -1;
    return rc;
}
