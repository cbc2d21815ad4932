/* An array walk against a linked-list walk over the same memory: the
 * example of docs/own-kernel.md and notebooks/own_kernel.ipynb.
 *   memlab run examples/kernels/walk.c size_bytes=1MiB layout=list */
#include <stdlib.h>

#include "memlab_kernel.h"

typedef struct {
    int64_t size_bytes;
    int layout; /* an index into layouts */
} walk_config;

static const char *const layouts[] = {"array", "list", NULL};

static const mlk_param walk_params[] = {
    MLK_INT(walk_config, size_bytes, 4096, 1ll << 32, 1 << 20, "bytes", "memory walked"),
    MLK_CHOICE(walk_config, layout, layouts, "array", "array: in address order; list: a random cycle"),
    {0},
};

typedef struct node {
    struct node *next;
    char pad[56]; /* one node per 64-byte line */
} node;

typedef struct {
    node *nodes;
    size_t count;
    int layout;
} walk_state;

static int walk_setup(const void *config, void **state, mlk_host *host)
{
    const walk_config *c = config;
    walk_state *s = calloc(1, sizeof *s);
    size_t count = (size_t)c->size_bytes / sizeof(node);
    if (!s || !(s->nodes = calloc(count, sizeof(node)))) {
        free(s);
        return mlk_fail(host, MLK_ERR_MEMORY, "no memory for size_bytes=%lld", (long long)c->size_bytes);
    }
    size_t *order = malloc(count * sizeof *order);
    if (!order) {
        free(s->nodes);
        free(s);
        return mlk_fail(host, MLK_ERR_MEMORY, "no memory for the list's order");
    }
    uint64_t seed = 42;
    for (size_t i = 0; i < count; i++)
        order[i] = i;
    for (size_t i = count - 1; c->layout == 1 && i > 0; i--) { /* a random cycle (Fisher-Yates) */
        size_t j = mlk_splitmix64(&seed) % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < count; i++)
        s->nodes[order[i]].next = &s->nodes[order[(i + 1) % count]];
    free(order);
    s->count = count;
    s->layout = c->layout;
    *state = s;
    return 0;
}

static int walk_measure(void *state, uint64_t iterations, mlk_sample *sample, mlk_host *host)
{
    (void)host;
    walk_state *s = state;
    uintptr_t sum = 0;
    for (uint64_t i = 0; i < iterations; i++) {
        if (s->layout == 0) {
            for (size_t k = 0; k < s->count; k++) /* independent loads */
                sum += (uintptr_t)s->nodes[k].next;
        } else {
            node *p = s->nodes;
            for (size_t k = 0; k < s->count; k++) /* each load waits for the one before */
                p = p->next;
            sum += (uintptr_t)p;
        }
    }
    mlk_keep(sum);
    sample->units = (double)iterations * (double)s->count;
    sample->bytes = sample->units * sizeof(node);
    return 0;
}

static void walk_teardown(void *state)
{
    walk_state *s = state;
    free(s->nodes);
    free(s);
}

MEMLAB_KERNEL = {
    .name = "walk",
    .description = "an array walk against a linked-list walk over the same memory",
    .config_size = sizeof(walk_config),
    .params = walk_params,
    .unit = "element",
    .setup = walk_setup,
    .measure = walk_measure,
    .teardown = walk_teardown,
};
