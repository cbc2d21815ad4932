/* The position-dependent byte pattern of the pipe family's verify=True
 * (pipe.h says what it is), and the pipe_pattern helper family that fills
 * or checks a buffer with it, so that memlab.twins can check the C against
 * its Python twin. */
#include "pipe.h"

#include <stdlib.h>
#include <string.h>

static inline uint64_t pattern_word(uint64_t word_index)
{
    return (word_index + 1) * PIPE_PATTERN_STEP;
}

static inline unsigned char pattern_byte(uint64_t offset)
{
    return (unsigned char)(pattern_word(offset >> 3) >> (8 * (offset & 7)));
}

/* GCC's O3 vectorises the word loops (about 2x for the fill, 5x for the
 * check here), so that verify costs little more than touching the bytes;
 * clang vectorises them at O2 and has no such attribute. */
#if defined(__clang__)
#define PIPE_VECTORIZE
#else
#define PIPE_VECTORIZE __attribute__((optimize("O3")))
#endif

PIPE_VECTORIZE void pipe_pattern_fill(unsigned char *buf, uint64_t offset, size_t len)
{
    size_t i = 0;
    for (; i < len && ((offset + i) & 7); i++)
        buf[i] = pattern_byte(offset + i);
    uint64_t word = pattern_word((offset + i) >> 3);
    for (; i + 8 <= len; i += 8) {
        memcpy(buf + i, &word, 8);
        word += PIPE_PATTERN_STEP;
    }
    for (; i < len; i++)
        buf[i] = pattern_byte(offset + i);
}

static uint64_t pattern_count_bad_bytes(const unsigned char *buf, uint64_t offset, size_t len)
{
    uint64_t bad = 0;
    for (size_t i = 0; i < len; i++)
        bad += buf[i] != pattern_byte(offset + i);
    return bad;
}

/* The common path ORs word differences over 4 KiB blocks and only counts
 * byte by byte inside a block that differs. */
PIPE_VECTORIZE uint64_t pipe_pattern_check(const unsigned char *buf, uint64_t offset, size_t len,
                                           uint64_t *first_bad)
{
    uint64_t bad = 0;
    size_t i = 0;
    size_t head = 0;
    while (head < len && ((offset + head) & 7))
        head++;
    if (head) {
        uint64_t n = pattern_count_bad_bytes(buf, offset, head);
        if (n && *first_bad == UINT64_MAX)
            for (size_t k = 0; k < head; k++)
                if (buf[k] != pattern_byte(offset + k)) {
                    *first_bad = offset + k;
                    break;
                }
        bad += n;
        i = head;
    }
    while (i + 8 <= len) {
        size_t block = len - i;
        if (block > 4096)
            block = 4096;
        block &= ~(size_t)7;
        uint64_t word = pattern_word((offset + i) >> 3);
        uint64_t diff = 0;
        for (size_t k = 0; k < block; k += 8) {
            uint64_t got;
            memcpy(&got, buf + i + k, 8);
            diff |= got ^ word;
            word += PIPE_PATTERN_STEP;
        }
        if (diff) {
            for (size_t k = 0; k < block; k++)
                if (buf[i + k] != pattern_byte(offset + i + k)) {
                    bad++;
                    if (*first_bad == UINT64_MAX)
                        *first_bad = offset + i + k;
                }
        }
        i += block;
    }
    for (; i < len; i++)
        if (buf[i] != pattern_byte(offset + i)) {
            bad++;
            if (*first_bad == UINT64_MAX)
                *first_bad = offset + i;
        }
    return bad;
}

/* ---- the helper family: fill or check a buffer -------------------------- */

enum { PATTERN_FILL, PATTERN_CHECK };
static const char *const pipe_pattern_action_names[] = {"fill", "check", NULL};

typedef struct pipe_pattern_config {
    int action;
    int64_t stream_offset;
    ml_buffer data; /* bytes: filled, or checked against the stream from stream_offset */
} pipe_pattern_config;

static const ml_param pipe_pattern_params[] = {
    {.name = "action", .kind = ML_PARAM_CHOICE, .offset = offsetof(pipe_pattern_config, action),
     .choices = pipe_pattern_action_names},
    {.name = "stream_offset", .kind = ML_PARAM_INT,
     .offset = offsetof(pipe_pattern_config, stream_offset), .min = 0, .max = INT64_MAX},
    {.name = "data", .kind = ML_PARAM_BUFFER, .offset = offsetof(pipe_pattern_config, data)},
    {0},
};

static int pipe_pattern_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    const pipe_pattern_config *c = config;
    (void)ctx;
    if (ml_check_buffer(&c->data, "data", 0, 1, err) < 0)
        return -1;
    if (c->action == PATTERN_FILL && !c->data.writable)
        return ml_fail(err, ML_ERR_VALUE, 0, "action=fill needs a writable data buffer");
    return ml_setup_copy_config(c, sizeof(*c), state, err);
}

static int pipe_pattern_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    const pipe_pattern_config *c = state;
    (void)ctx;
    (void)err;
    uint64_t start = ml_now_ns();
    if (c->action == PATTERN_FILL) {
        pipe_pattern_fill(c->data.data, (uint64_t)c->stream_offset, c->data.bytes);
    } else {
        uint64_t first_bad = UINT64_MAX;
        uint64_t bad = pipe_pattern_check(c->data.data, (uint64_t)c->stream_offset, c->data.bytes,
                                          &first_bad);
        ml_metric_add(out, "verify_errors", (double)bad);
        ml_metric_add(out, "first_bad_offset", first_bad == UINT64_MAX ? -1.0 : (double)first_bad);
    }
    out->elapsed_ns = ml_now_ns() - start;
    out->bytes = (double)c->data.bytes;
    out->units = (double)c->data.bytes;
    ml_counter_values_missing(&out->counters, 0);
    return 0;
}

static void pipe_pattern_teardown(void *state)
{
    free(state);
}

ML_FAMILY(pipe_pattern) = {
    .name = "pipe_pattern",
    .description = "fill data with the pipe check's byte pattern from stream_offset on, or count "
                   "the bytes of data that differ from it",
    .config_size = sizeof(pipe_pattern_config),
    .params = pipe_pattern_params,
    .setup = pipe_pattern_setup,
    .measure = pipe_pattern_measure,
    .teardown = pipe_pattern_teardown,
};
