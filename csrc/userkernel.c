/* User kernels: a shared object built from a file against memlab_kernel.h,
 * loaded and entered as a family for the life of the process.  The kernel
 * links no symbol of the core's: it gets the clock, errors, metrics,
 * interrupt checks and the thread team through an mlk_host.  The harness
 * (the measure below) times the kernel's calls, grows their iteration count
 * to about MLK_CALL_NS each, and checks for Ctrl-C between calls. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memlab.h"
#include "memlab_kernel.h"
#include "userkernel.h"

#define USER_DEFAULT_TARGET_NS 100000000ull
#define USER_MAX_ITERATIONS (1ull << 40)

typedef struct user_family {
    ml_family family; /* first: the core sees an ml_family */
    const mlk_kernel *kernel;
    ml_param *params;
    char *path;
    void *handle;
} user_family;

/* Loaded kernels, never freed: a Kernel object may still point at one that
 * a newer build of the same name has replaced.  Only touched with the GIL. */
static user_family **loaded;
static size_t n_loaded;

typedef struct user_state {
    const mlk_kernel *kernel;
    void *state;
    uint64_t iterations;
} user_state;

/* What a host call reaches: the run's context, error and sample. */
typedef struct host_binding {
    ml_context *ctx;
    ml_error *err;
    ml_measurement *out;
} host_binding;

/* ---- the host ------------------------------------------------------------ */

static int host_fail(mlk_host *host, int code, const char *fmt, ...)
{
    host_binding *binding = host->binding;
    ml_error *err = binding->err;
    int errnum = code == MLK_ERR_OS ? errno : 0;
    err->code = code == 0                ? ML_ERR_INTERRUPTED
                : code == MLK_ERR_MEMORY ? ML_ERR_MEMORY
                : code == MLK_ERR_OS     ? ML_ERR_OS
                                         : ML_ERR_VALUE;
    err->errnum = errnum;
    va_list args;
    va_start(args, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, args);
    va_end(args);
    return -1;
}

static int host_metric(mlk_host *host, const char *name, double value)
{
    ml_measurement *out = ((host_binding *)host->binding)->out;
    if (!out || !name)
        return -1;
    for (int i = 0; i < out->n_metrics; i++)
        if (strcmp(out->metrics[i].name, name) == 0) {
            out->metrics[i].value = value;
            return 0;
        }
    return ml_metric_add(out, name, value);
}

static int host_interrupted(mlk_host *host)
{
    return ml_interrupted(((host_binding *)host->binding)->ctx);
}

typedef struct team_slot {
    void (*body)(void *arg, int index, mlk_team *team);
    void *arg;
    int index;
    mlk_team team;
} team_slot;

static void team_body(void *arg, ml_team *team)
{
    (void)team;
    team_slot *slot = arg;
    slot->body(slot->arg, slot->index, &slot->team);
}

static int host_team_run(mlk_host *host, int threads, const int *cpus,
                         void (*body)(void *arg, int index, mlk_team *team), void *arg, uint64_t run_ns,
                         uint64_t *elapsed_ns)
{
    host_binding *binding = host->binding;
    ml_error *err = binding->err;
    if (!body)
        return ml_fail(err, ML_ERR_VALUE, 0, "team_run: body is NULL");
    ml_team team = {0};
    team_slot *slots = NULL;
    ml_team_time *times = NULL;
    int rc = -1;
    if (ml_team_init(&team, threads, "kernel thread", 0, err) < 0)
        return -1;
    slots = calloc((size_t)threads, sizeof *slots);
    times = calloc((size_t)threads, sizeof *times);
    if (!slots || !times) {
        ml_fail(err, ML_ERR_MEMORY, 0, "team_run: no memory for %d threads", threads);
        goto done;
    }
    for (int i = 0; i < threads; i++) {
        slots[i] = (team_slot){.body = body, .arg = arg, .index = i, .team = {.stop = &team.stop}};
        team.workers[i] = (ml_team_worker){.body = team_body, .arg = &slots[i], .cpu = cpus ? cpus[i] : -1};
    }
    if (ml_team_start(&team, binding->ctx, err) < 0 || ml_team_release(&team, binding->ctx, err) < 0)
        goto done;
    if (ml_team_wait(&team, run_ns, 0, NULL, NULL, binding->ctx, err) < 0)
        goto done;
    ml_team_stop(&team);
    uint64_t last_end = team.released_ns;
    for (int i = 0; i < threads; i++) {
        times[i] = team.workers[i].time;
        if (times[i].end_ns > last_end)
            last_end = times[i].end_ns;
    }
    if (elapsed_ns)
        *elapsed_ns = last_end - team.released_ns;
    if (binding->out)
        ml_team_metrics(times, threads, "", binding->out);
    rc = 0;
done:
    ml_team_free(&team);
    free(slots);
    free(times);
    return rc;
}

static void host_init(mlk_host *host, host_binding *binding)
{
    *host = (mlk_host){.api_version = ML_KERNEL_API_VERSION, .fail = host_fail, .metric = host_metric,
                       .now_ns = ml_now_ns, .interrupted = host_interrupted, .team_run = host_team_run,
                       .binding = binding};
}

/* ---- the family's functions ------------------------------------------------ */

static int user_setup(const void *config, void **state, ml_context *ctx, ml_error *err)
{
    const ml_family *family = ctx->family;
    const mlk_kernel *kernel = ((const user_family *)family)->kernel;
    user_state *s = calloc(1, sizeof *s);
    if (!s)
        return ml_fail(err, ML_ERR_MEMORY, 0, "no memory for the %s kernel's state", kernel->name);
    s->kernel = kernel;
    s->iterations = 1;
    host_binding binding = {.ctx = ctx, .err = err};
    mlk_host host;
    host_init(&host, &binding);
    int rc;
    if (kernel->setup) {
        rc = kernel->setup(config, &s->state, &host);
    } else {
        rc = ml_setup_copy_config(config, family->config_size, &s->state, err);
    }
    if (rc < 0) {
        if (!err->code)
            ml_fail(err, ML_ERR_VALUE, 0, "the %s kernel's setup failed without saying why (use mlk_fail)",
                    kernel->name);
        free(s);
        return -1;
    }
    *state = s;
    return 0;
}

static int user_measure(void *state, ml_context *ctx, ml_measurement *out, ml_error *err)
{
    user_state *s = state;
    const mlk_kernel *kernel = s->kernel;
    uint64_t target_ns = ctx->target_ns ? ctx->target_ns : USER_DEFAULT_TARGET_NS;
    host_binding binding = {.ctx = ctx, .err = err, .out = out};
    mlk_host host;
    host_init(&host, &binding);
    uint64_t elapsed_ns = 0, calls = 0;
    double units = 0, bytes = 0;
    ml_counting counting;
    ml_counting_start(&counting, ctx);
    while (elapsed_ns < target_ns) {
        mlk_sample sample = {0};
        uint64_t start = ml_now_ns();
        int rc = kernel->measure(s->state, s->iterations, &sample, &host);
        uint64_t call_ns = ml_now_ns() - start;
        if (rc < 0) {
            ml_counting_stop(&counting, out);
            if (!err->code)
                ml_fail(err, ML_ERR_VALUE, 0, "the %s kernel's measure failed without saying why (use mlk_fail)",
                        kernel->name);
            return -1;
        }
        elapsed_ns += sample.elapsed_ns ? sample.elapsed_ns : call_ns;
        units += sample.units > 0 ? sample.units : (double)s->iterations;
        bytes += sample.bytes;
        calls++;
        if (call_ns < MLK_CALL_NS && s->iterations < USER_MAX_ITERATIONS)
            s->iterations *= 2;
        if (ml_interrupted(ctx)) {
            ml_counting_stop(&counting, out);
            return ml_fail(err, ML_ERR_INTERRUPTED, 0, "interrupted");
        }
    }
    ml_counting_stop(&counting, out);
    out->elapsed_ns = elapsed_ns;
    out->units = units;
    out->bytes = bytes;
    host_metric(&host, "calls_per_sample", (double)calls);
    return 0;
}

static void user_teardown(void *state)
{
    user_state *s = state;
    if (s->kernel->teardown)
        s->kernel->teardown(s->state);
    else if (!s->kernel->setup)
        free(s->state);
    free(s);
}

/* ---- loading ----------------------------------------------------------------- */

static int valid_name(const char *name)
{
    if (!name || !(*name >= 'a' && *name <= 'z'))
        return 0;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return 0;
    return strlen(name) < 64;
}

static size_t field_bytes(mlk_kind kind)
{
    return kind == MLK_KIND_INT ? sizeof(int64_t) : kind == MLK_KIND_FLOAT ? sizeof(double) : sizeof(int);
}

/* One parameter of the kernel's table into the core's form; -1 with err. */
static int convert_param(const mlk_kernel *kernel, const mlk_param *p, ml_param *out, const char *path,
                         ml_error *err)
{
    if (!valid_name(p->name))
        return ml_fail(err, ML_ERR_VALUE, 0, "%s: kernel %s: parameter name '%s' is not a lower-case identifier",
                       path, kernel->name, p->name ? p->name : "(null)");
    if (p->kind < MLK_KIND_INT || p->kind > MLK_KIND_CHOICE)
        return ml_fail(err, ML_ERR_VALUE, 0, "%s: kernel %s: parameter %s has no kind (use MLK_INT, MLK_FLOAT, "
                       "MLK_BOOL or MLK_CHOICE)", path, kernel->name, p->name);
    if (p->offset + field_bytes(p->kind) > kernel->config_size)
        return ml_fail(err, ML_ERR_VALUE, 0, "%s: kernel %s: parameter %s lies outside the config "
                       "(offset %zu, config_size %zu: set .config_size = sizeof(your config))",
                       path, kernel->name, p->name, p->offset, kernel->config_size);
    *out = (ml_param){.name = p->name, .offset = p->offset, .has_default = 1};
    switch (p->kind) {
    case MLK_KIND_INT:
        if (p->min > p->max || p->default_int < p->min || p->default_int > p->max)
            return ml_fail(err, ML_ERR_VALUE, 0, "%s: kernel %s: parameter %s: its default %lld is not in its "
                           "range [%lld, %lld]", path, kernel->name, p->name, (long long)p->default_int,
                           (long long)p->min, (long long)p->max);
        out->kind = ML_PARAM_INT;
        out->min = p->min;
        out->max = p->max;
        out->default_int = p->default_int;
        break;
    case MLK_KIND_FLOAT:
        if (!(p->min_float <= p->default_float && p->default_float <= p->max_float))
            return ml_fail(err, ML_ERR_VALUE, 0, "%s: kernel %s: parameter %s: its default %g is not in its "
                           "range [%g, %g]", path, kernel->name, p->name, p->default_float, p->min_float,
                           p->max_float);
        out->kind = ML_PARAM_DOUBLE;
        out->min_double = p->min_float;
        out->max_double = p->max_float;
        out->default_double = p->default_float;
        break;
    case MLK_KIND_BOOL:
        if (p->default_int != 0 && p->default_int != 1)
            return ml_fail(err, ML_ERR_VALUE, 0, "%s: kernel %s: parameter %s: its default %lld is not 0 or 1",
                           path, kernel->name, p->name, (long long)p->default_int);
        out->kind = ML_PARAM_BOOL;
        out->default_int = p->default_int;
        break;
    case MLK_KIND_CHOICE: {
        int found = 0;
        for (int i = 0; p->choices && p->choices[i]; i++)
            found |= p->default_choice && strcmp(p->choices[i], p->default_choice) == 0;
        if (!p->choices || !p->choices[0] || !found)
            return ml_fail(err, ML_ERR_VALUE, 0, "%s: kernel %s: parameter %s: its default '%s' is not one of "
                           "its choices", path, kernel->name, p->name,
                           p->default_choice ? p->default_choice : "(null)");
        out->kind = ML_PARAM_CHOICE;
        out->choices = p->choices;
        out->default_choice = p->default_choice;
        break;
    }
    }
    return 0;
}

static const ml_family *builtin_family(const char *name)
{
    size_t count;
    const ml_family *const *table = ml_family_table(&count);
    for (size_t i = 0; i < count; i++)
        if (strcmp(table[i]->name, name) == 0)
            return table[i];
    return NULL;
}

/* The kernel's declaration, checked; NULL with err naming what is missing. */
static const mlk_kernel *checked_kernel(void *handle, const char *path, ml_error *err)
{
    const int *version = dlsym(handle, "memlab_kernel_api_version");
    const mlk_kernel *kernel = dlsym(handle, "memlab_kernel");
    if (!version && !kernel) {
        ml_fail(err, ML_ERR_VALUE, 0, "%s defines no memlab kernel: end the file with "
                "MEMLAB_KERNEL = {.name = ..., .params = ..., .measure = ...}; (memlab_kernel.h)", path);
        return NULL;
    }
    if (!version || !kernel) {
        ml_fail(err, ML_ERR_VALUE, 0, "%s defines %s without %s: declare the kernel with the MEMLAB_KERNEL "
                "macro of memlab_kernel.h", path, version ? "memlab_kernel_api_version" : "memlab_kernel",
                version ? "memlab_kernel" : "memlab_kernel_api_version");
        return NULL;
    }
    if (*version != ML_KERNEL_API_VERSION) {
        ml_fail(err, ML_ERR_VALUE, 0, "%s was compiled against memlab kernel API version %d; this memlab "
                "takes version %d: rebuild it against this memlab's memlab_kernel.h (memlab --include)",
                path, *version, ML_KERNEL_API_VERSION);
        return NULL;
    }
    if (!valid_name(kernel->name)) {
        ml_fail(err, ML_ERR_VALUE, 0, "%s: the kernel's .name '%s' is not a lower-case identifier "
                "([a-z][a-z0-9_]*, under 64 characters)", path, kernel->name ? kernel->name : "(null)");
        return NULL;
    }
    if (!kernel->measure) {
        ml_fail(err, ML_ERR_VALUE, 0, "%s: kernel %s has no measure function (.measure = ...)", path,
                kernel->name);
        return NULL;
    }
    if (!kernel->params) {
        ml_fail(err, ML_ERR_VALUE, 0, "%s: kernel %s has no parameter table (.params = ..., a table ending "
                "with {0}; an empty table is {{0}})", path, kernel->name);
        return NULL;
    }
    if (kernel->teardown && !kernel->setup) {
        ml_fail(err, ML_ERR_VALUE, 0, "%s: kernel %s has a teardown but no setup (the state teardown "
                "frees is what setup makes)", path, kernel->name);
        return NULL;
    }
    if (builtin_family(kernel->name)) {
        ml_fail(err, ML_ERR_VALUE, 0, "%s: kernel %s has the name of one of memlab's own families: "
                "rename it (.name)", path, kernel->name);
        return NULL;
    }
    return kernel;
}

const ml_family *ml_user_kernel_load(const char *path, const mlk_kernel **kernel_out, ml_error *err)
{
    user_family *entry = NULL;
    user_family **grown = NULL;
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        ml_fail(err, ML_ERR_VALUE, 0, "cannot load %s: %s", path, why ? why : "dlopen failed");
        return NULL;
    }
    const mlk_kernel *kernel = checked_kernel(handle, path, err);
    if (!kernel)
        goto error;
    size_t n_params = 0;
    while (kernel->params[n_params].name)
        n_params++;
    entry = calloc(1, sizeof *entry);
    if (entry) {
        entry->params = calloc(n_params + 1, sizeof *entry->params);
        entry->path = strdup(path);
    }
    if (!entry || !entry->params || !entry->path) {
        ml_fail(err, ML_ERR_MEMORY, 0, "no memory to load %s", path);
        goto error;
    }
    for (size_t i = 0; i < n_params; i++) {
        for (size_t j = 0; j < i; j++)
            if (strcmp(kernel->params[i].name, kernel->params[j].name) == 0) {
                ml_fail(err, ML_ERR_VALUE, 0, "%s: kernel %s declares parameter %s twice", path, kernel->name,
                        kernel->params[i].name);
                goto error;
            }
        if (convert_param(kernel, &kernel->params[i], &entry->params[i], path, err) < 0)
            goto error;
    }
    grown = realloc(loaded, (n_loaded + 1) * sizeof *loaded);
    if (!grown) {
        ml_fail(err, ML_ERR_MEMORY, 0, "no memory to load %s", path);
        goto error;
    }
    loaded = grown;
    entry->kernel = kernel;
    entry->handle = handle;
    entry->family = (ml_family){
        .name = kernel->name,
        .description = kernel->description ? kernel->description : "",
        .config_size = kernel->config_size,
        .params = entry->params,
        .setup = user_setup,
        .measure = user_measure,
        .teardown = user_teardown,
    };
    loaded[n_loaded++] = entry;
    if (kernel_out)
        *kernel_out = kernel;
    return &entry->family;
error:
    if (entry) {
        free(entry->params);
        free(entry->path);
        free(entry);
    }
    dlclose(handle);
    return NULL;
}

const ml_family *ml_user_kernel_find(const char *name)
{
    for (size_t i = n_loaded; i-- > 0;)
        if (strcmp(loaded[i]->family.name, name) == 0)
            return &loaded[i]->family;
    return NULL;
}

const mlk_kernel *ml_user_kernel_of(const ml_family *family)
{
    for (size_t i = 0; i < n_loaded; i++)
        if (&loaded[i]->family == family)
            return loaded[i]->kernel;
    return NULL;
}

const mlk_param *ml_user_kernel_param(const ml_family *family, size_t index)
{
    const mlk_kernel *kernel = ml_user_kernel_of(family);
    return kernel ? &kernel->params[index] : NULL;
}
