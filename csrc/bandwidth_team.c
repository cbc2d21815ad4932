/* The bandwidth worker loop and the team that runs it (bandwidth.h): an
 * ml_team whose workers repeat their kernel in chunks until told to stop. */
#define _GNU_SOURCE
#include "bandwidth.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BW_FIRST_CHUNK_BYTES (16u << 10)
#define BW_SLICE_BYTES 4096u /* chunks inside a pass are cut at page multiples */

/* ---- the team ----------------------------------------------------------- */

static void worker_loop(ml_bw_worker *w)
{
    const uint64_t chunk_ns = w->chunk_ns ? w->chunk_ns : ML_BW_DEFAULT_CHUNK_NS;
    const size_t bytes = w->bytes;
    char *dst = w->dst;
    const char *src = w->src;
    uint64_t done = 0, busy = 0, sum = 0, chunks = 0;
    for (;;) {
        /* Every worker moves at least one chunk: a worker the scheduler starts only after a
         * short sample's stop (a loaded machine, a 1 ns target) would otherwise report no
         * bytes, and the sample no rate at all. One chunk is bounded by chunk_ns. */
        if (chunks && w->team && ml_team_stopping(w->team))
            break;
        uint64_t want = w->chunk_bytes;
        if (!want)
            want = w->ns_per_byte > 0 ? (uint64_t)((double)chunk_ns / w->ns_per_byte)
                                      : BW_FIRST_CHUNK_BYTES;
        if (w->max_bytes) {
            if (done >= w->max_bytes)
                break;
            if (want > w->max_bytes - done)
                want = w->max_bytes - done;
        }
        want = want / ML_BW_LINE_BYTES * ML_BW_LINE_BYTES;
        if (want < ML_BW_LINE_BYTES)
            want = ML_BW_LINE_BYTES;
        uint64_t passes = 1;
        size_t length;
        if (w->offset == 0 && want >= bytes) {
            passes = want / bytes; /* whole passes in one call */
            length = bytes;
        } else {
            size_t left = bytes - w->offset;
            length = want < left ? (size_t)want : left;
            if (length > BW_SLICE_BYTES && length < left)
                length = length / BW_SLICE_BYTES * BW_SLICE_BYTES;
        }
        char *d = dst ? dst + w->offset : NULL;
        const char *s = src ? src + w->offset : NULL;
        uint64_t t0 = ml_now_ns();
        sum += w->kernel(d, s, length, passes, w->value);
        uint64_t t1 = ml_now_ns();
        uint64_t moved = (uint64_t)length * passes;
        busy += t1 - t0;
        done += moved;
        chunks++;
        if (passes == 1) {
            w->offset += length;
            if (w->offset >= bytes)
                w->offset = 0;
        }
        if (t1 > t0) {
            double estimate = (double)(t1 - t0) / (double)moved;
            w->ns_per_byte = w->ns_per_byte > 0 ? 0.5 * (w->ns_per_byte + estimate) : estimate;
        }
        if (w->hook) {
            w->bytes_done = done; /* the hook sees the progress so far */
            w->chunks = chunks;
            if (w->hook(w, w->hook_arg))
                break;
        }
    }
    w->bytes_done = done;
    w->busy_ns = busy;
    w->sum = sum;
    w->chunks = chunks;
}

void ml_bw_worker_run_here(ml_bw_worker *worker)
{
    worker->team = NULL;
    worker_loop(worker);
}

static void worker_body(void *arg, ml_team *team)
{
    ml_bw_worker *w = arg;
    w->team = team;
    worker_loop(w);
}

int ml_bw_team_init(ml_bw_team *team, int n, ml_error *err)
{
    memset(team, 0, sizeof *team);
    if (ml_team_init(&team->threads, n, "worker", 0, err))
        return -1;
    team->workers = calloc((size_t)n, sizeof *team->workers);
    if (!team->workers) {
        ml_team_free(&team->threads);
        return ml_fail(err, ML_ERR_MEMORY, ENOMEM, "no memory for a team of %d workers", n);
    }
    team->n = n;
    for (int i = 0; i < n; ++i)
        team->workers[i].cpu = -1;
    return 0;
}

void ml_bw_team_free(ml_bw_team *team)
{
    ml_team_free(&team->threads);
    free(team->workers);
    team->workers = NULL;
    team->n = 0;
}

void ml_bw_team_stop(ml_bw_team *team)
{
    ml_team_stop(&team->threads);
}

int ml_bw_team_start(ml_bw_team *team, ml_context *ctx, ml_error *err)
{
    ml_team_stop(&team->threads);
    for (int i = 0; i < team->n; ++i) {
        ml_bw_worker *w = &team->workers[i];
        if (!w->kernel || !w->bytes || w->bytes % ML_BW_LINE_BYTES)
            return ml_fail(err, ML_ERR_VALUE, 0,
                           "worker %d has no kernel or a size (%zu bytes) that is not a positive "
                           "multiple of %u",
                           i, w->bytes, ML_BW_LINE_BYTES);
        team->threads.workers[i] = (ml_team_worker){.body = worker_body, .arg = w, .cpu = w->cpu};
    }
    if (ml_team_start(&team->threads, ctx, err))
        return -1;
    return ml_team_release(&team->threads, ctx, err);
}

int ml_bw_team_run(ml_bw_team *team, uint64_t duration_ns, ml_context *ctx, ml_error *err)
{
    if (ml_bw_team_start(team, ctx, err))
        return -1;
    int rc = ml_team_wait(&team->threads, duration_ns, 0, NULL, NULL, ctx, err);
    ml_team_stop(&team->threads);
    return rc < 0 ? -1 : 0;
}
