/* memlab._core: the only file that speaks CPython.  It knows no family:
 * configs are converted by walking each family's parameter table. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "memlab.h"
#include "userkernel.h"

#ifndef ML_BUILD_CFLAGS
#define ML_BUILD_CFLAGS "unknown"
#endif
#ifndef ML_BUILD_CC
#define ML_BUILD_CC "cc"
#endif

#define MAX_BUFFERS 8
/* Between two signal checks; PyErr_CheckSignals is cheap, taking the GIL
 * back is not free when another thread holds it. */
#define INTERRUPT_CHECK_NS 10000000ull

typedef struct {
    PyTypeObject *kernel_type;
} module_state;

static inline module_state *get_module_state(PyObject *module)
{
    return (module_state *)PyModule_GetState(module);
}

typedef struct {
    PyObject_HEAD
    const ml_family *family;
    void *config;
    void *state;
    Py_buffer views[MAX_BUFFERS];
    int n_views;
    int busy;
} KernelObject;

typedef struct {
    PyThreadState *thread_state;
    uint64_t last_check_ns;
    uint64_t deadline_ns; /* absolute ml_now_ns(); 0: none */
    int interrupted;
    int past_deadline;
} binding_data;

/* ---- pure C helpers ---------------------------------------------------- */

static const ml_family *find_family(const char *name)
{
    size_t count;
    const ml_family *const *table = ml_family_table(&count);
    for (size_t i = 0; i < count; i++)
        if (strcmp(table[i]->name, name) == 0)
            return table[i];
    return ml_user_kernel_find(name);
}

static int compare_family_names(const void *a, const void *b)
{
    return strcmp((*(const ml_family *const *)a)->name, (*(const ml_family *const *)b)->name);
}

/* The families sorted by name (the table is in link order), or NULL with an
 * exception set.  Two families of one name are a build error. */
static const ml_family **sorted_families(size_t *count)
{
    const ml_family *const *table = ml_family_table(count);
    const ml_family **sorted = PyMem_Malloc((*count ? *count : 1) * sizeof *sorted);
    if (!sorted) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(sorted, table, *count * sizeof *sorted);
    qsort(sorted, *count, sizeof *sorted, compare_family_names);
    for (size_t i = 1; i < *count; i++)
        if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0) {
            PyErr_Format(PyExc_ImportError, "two C families are named %s", sorted[i]->name);
            PyMem_Free(sorted);
            return NULL;
        }
    return sorted;
}

static const ml_param *find_param(const ml_family *family, const char *name)
{
    for (const ml_param *p = family->params; p->name; p++)
        if (strcmp(p->name, name) == 0)
            return p;
    return NULL;
}

static int check_interrupt(ml_context *ctx)
{
    binding_data *data = ctx->binding;
    if (data->interrupted)
        return 1;
    uint64_t now = ml_now_ns();
    if (data->deadline_ns && now >= data->deadline_ns) {
        data->past_deadline = 1;
        return data->interrupted = 1;
    }
    if (now - data->last_check_ns < INTERRUPT_CHECK_NS)
        return 0;
    data->last_check_ns = now;
    PyEval_RestoreThread(data->thread_state);
    data->interrupted = PyErr_CheckSignals() != 0;
    data->thread_state = PyEval_SaveThread();
    return data->interrupted;
}

/* ---- errors -------------------------------------------------------------- */

static void raise_ml_error(const ml_error *err)
{
    switch (err->code) {
    case ML_ERR_VALUE:
        PyErr_SetString(PyExc_ValueError, err->message);
        break;
    case ML_ERR_MEMORY:
        PyErr_SetString(PyExc_MemoryError, err->message);
        break;
    case ML_ERR_TIMEOUT:
        PyErr_SetString(PyExc_TimeoutError, err->message);
        break;
    case ML_ERR_INTERRUPTED:
        if (!PyErr_Occurred())
            PyErr_SetNone(PyExc_KeyboardInterrupt);
        break;
    case ML_ERR_OS: {
        PyObject *args = Py_BuildValue("(is)", err->errnum, err->message);
        if (args) {
            PyErr_SetObject(PyExc_OSError, args);
            Py_DECREF(args);
        }
        break;
    }
    default:
        PyErr_Format(PyExc_RuntimeError, "memlab kernel failed without a reason (code %d)",
                     (int)err->code);
    }
}

/* The interrupt checks start now; deadline_ns > 0 also stops the work that long from now. */
static void start_deadline(binding_data *data, unsigned long long deadline_ns)
{
    data->last_check_ns = ml_now_ns();
    /* a deadline the clock cannot reach is no deadline */
    if (deadline_ns && deadline_ns < UINT64_MAX - data->last_check_ns)
        data->deadline_ns = data->last_check_ns + deadline_ns;
}

/* A family's failure as a Python exception: TimeoutError when it stopped because the
 * deadline passed, the family's own error otherwise. */
static void raise_stopped(const ml_error *err, const binding_data *data, const char *family,
                          const char *what, unsigned long long deadline_ns)
{
    if (err->code == ML_ERR_INTERRUPTED && data->past_deadline && !PyErr_Occurred()) {
        char message[256];
        snprintf(message, sizeof message, "the %s %s was stopped at its deadline of %.3f s "
                 "(deadline_ns=%llu) before it ended", family, what, deadline_ns / 1e9, deadline_ns);
        PyErr_SetString(PyExc_TimeoutError, message);
    } else
        raise_ml_error(err);
}

/* ---- config conversion ---------------------------------------------------- */

static int convert_int(const ml_param *p, PyObject *value, void *field)
{
    if (!PyLong_Check(value) || PyBool_Check(value)) {
        PyErr_Format(PyExc_ValueError, "%s=%R must be an integer", p->name, value);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow < 0 || (!overflow && v < p->min)) {
        PyErr_Format(PyExc_ValueError, "%s=%R is below the minimum %lld", p->name, value,
                     (long long)p->min);
        return -1;
    }
    if (overflow > 0 || v > p->max) {
        PyErr_Format(PyExc_ValueError, "%s=%R is above the maximum %lld", p->name, value,
                     (long long)p->max);
        return -1;
    }
    *(int64_t *)field = (int64_t)v;
    return 0;
}

static int convert_double(const ml_param *p, PyObject *value, void *field)
{
    if ((!PyFloat_Check(value) && !PyLong_Check(value)) || PyBool_Check(value)) {
        PyErr_Format(PyExc_ValueError, "%s=%R must be a number", p->name, value);
        return -1;
    }
    double v = PyFloat_AsDouble(value);
    if (v == -1.0 && PyErr_Occurred())
        return -1;
    if (isnan(v) || v < p->min_double || v > p->max_double) {
        PyErr_Format(PyExc_ValueError, "%s=%R is outside [%g, %g]", p->name, value,
                     p->min_double, p->max_double);
        return -1;
    }
    *(double *)field = v;
    return 0;
}

static int convert_bool(const ml_param *p, PyObject *value, void *field)
{
    if (value == Py_True || value == Py_False) {
        *(int *)field = value == Py_True;
        return 0;
    }
    if (PyLong_Check(value)) {
        long v = PyLong_AsLong(value);
        if (v == 0 || v == 1) {
            *(int *)field = (int)v;
            return 0;
        }
    }
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "%s=%R must be True or False", p->name, value);
    return -1;
}

static int convert_choice(const ml_param *p, PyObject *value, void *field)
{
    if (PyUnicode_Check(value)) {
        const char *text = PyUnicode_AsUTF8(value);
        if (!text)
            return -1;
        for (int i = 0; p->choices[i]; i++) {
            if (strcmp(p->choices[i], text) == 0) {
                *(int *)field = i;
                return 0;
            }
        }
    }
    PyObject *names = PyList_New(0);
    if (!names)
        return -1;
    for (int i = 0; p->choices[i]; i++) {
        PyObject *name = PyUnicode_FromString(p->choices[i]);
        if (!name || PyList_Append(names, name) < 0) {
            Py_XDECREF(name);
            Py_DECREF(names);
            return -1;
        }
        Py_DECREF(name);
    }
    PyErr_Format(PyExc_ValueError, "%s=%R is not one of %R", p->name, value, names);
    Py_DECREF(names);
    return -1;
}

static int convert_buffer(const ml_param *p, PyObject *value, void *field, KernelObject *self)
{
    if (self->n_views >= MAX_BUFFERS) {
        PyErr_Format(PyExc_ValueError, "too many buffer parameters (at most %d)", MAX_BUFFERS);
        return -1;
    }
    Py_buffer *view = &self->views[self->n_views];
    int flags = PyBUF_C_CONTIGUOUS | (p->writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(value, view, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be a C-contiguous%s buffer (got %.100s)",
                     p->name, p->writable ? ", writable" : "", Py_TYPE(value)->tp_name);
        return -1;
    }
    self->n_views++;
    ml_buffer *buffer = field;
    buffer->data = view->buf;
    buffer->bytes = (size_t)view->len;
    buffer->itemsize = (size_t)view->itemsize;
    buffer->writable = !view->readonly;
    return 0;
}

static int convert_config(KernelObject *self, PyObject *config)
{
    const ml_family *family = self->family;
    if (!PyDict_Check(config)) {
        PyErr_Format(PyExc_ValueError, "config for %s must be a dict, not %.100s", family->name,
                     Py_TYPE(config)->tp_name);
        return -1;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(config, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (!name || !find_param(family, name)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "unknown parameter %R for %s", key, family->name);
            return -1;
        }
    }
    for (const ml_param *p = family->params; p->name; p++) {
        value = PyDict_GetItemString(config, p->name);
        void *field = (char *)self->config + p->offset;
        if (!value && p->has_default) {
            ml_error err = {0};
            if (ml_param_set_default(p, self->config, &err) < 0) {
                PyErr_Format(PyExc_ValueError, "%s: %s", family->name, err.message);
                return -1;
            }
            continue;
        }
        if (!value && p->kind == ML_PARAM_BUFFER && p->optional) {
            memset(field, 0, sizeof(ml_buffer)); /* absent: empty */
            continue;
        }
        if (!value) {
            PyErr_Format(PyExc_ValueError, "missing parameter '%s' for %s", p->name, family->name);
            return -1;
        }
        int rc = -1;
        switch (p->kind) {
        case ML_PARAM_INT:
            rc = convert_int(p, value, field);
            break;
        case ML_PARAM_DOUBLE:
            rc = convert_double(p, value, field);
            break;
        case ML_PARAM_BOOL:
            rc = convert_bool(p, value, field);
            break;
        case ML_PARAM_CHOICE:
            rc = convert_choice(p, value, field);
            break;
        case ML_PARAM_BUFFER:
            rc = convert_buffer(p, value, field, self);
            break;
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* ---- results --------------------------------------------------------------- */

static int set_item(PyObject *dict, const char *key, PyObject *value)
{
    if (!value)
        return -1;
    int rc = PyDict_SetItemString(dict, key, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *counters_to_dicts(const ml_counter_values *values, PyObject *result)
{
    PyObject *present = PyDict_New();
    PyObject *missing = PyDict_New();
    if (!present || !missing)
        goto error;
    for (int i = 0; i < ML_COUNTER_COUNT; i++) {
        if (values->present[i]) {
            if (set_item(present, ml_counter_names[i], PyFloat_FromDouble(values->value[i])) < 0)
                goto error;
        } else if (set_item(missing, ml_counter_names[i],
                            PyUnicode_FromString(ml_counter_reason(values->missing_errno[i]))) < 0) {
            goto error;
        }
    }
    if (set_item(result, "counters", present) < 0) {
        present = NULL;
        goto error;
    }
    if (set_item(result, "counters_missing", missing) < 0)
        return NULL;
    return result;
error:
    Py_XDECREF(present);
    Py_XDECREF(missing);
    return NULL;
}

static PyObject *measurement_to_dict(const ml_measurement *m, int counters)
{
    PyObject *result = PyDict_New();
    PyObject *metrics = PyDict_New();
    if (!result || !metrics)
        goto error;
    if (set_item(result, "elapsed_ns", PyLong_FromUnsignedLongLong(m->elapsed_ns)) < 0 ||
        set_item(result, "units", PyFloat_FromDouble(m->units)) < 0 ||
        set_item(result, "bytes", PyFloat_FromDouble(m->bytes)) < 0)
        goto error;
    for (int i = 0; i < m->n_metrics; i++)
        if (set_item(metrics, m->metrics[i].name, PyFloat_FromDouble(m->metrics[i].value)) < 0)
            goto error;
    PyObject *facts = PyDict_New();
    if (!facts)
        goto error;
    for (int i = 0; i < m->n_facts; i++)
        if (set_item(facts, m->facts[i].name, PyUnicode_FromString(m->facts[i].value)) < 0) {
            Py_DECREF(facts);
            goto error;
        }
    if (set_item(result, "facts", facts) < 0)
        goto error;
    if (!counters_to_dicts(&m->counters, result))
        goto error;
    const char *scope = !counters ? "none" : m->counters.kernel_included ? "user+kernel" : "user";
    if (set_item(result, "counters_scope", PyUnicode_FromString(scope)) < 0)
        goto error;
    if (set_item(result, "metrics", metrics) < 0) {
        metrics = NULL;
        goto error;
    }
    return result;
error:
    Py_XDECREF(metrics);
    Py_XDECREF(result);
    return NULL;
}

/* ---- the Kernel type ---------------------------------------------------------- */

static void kernel_release(KernelObject *self)
{
    if (self->state && self->family) {
        void *state = self->state;
        self->state = NULL;
        Py_BEGIN_ALLOW_THREADS
        self->family->teardown(state);
        Py_END_ALLOW_THREADS
    }
    for (int i = 0; i < self->n_views; i++)
        PyBuffer_Release(&self->views[i]);
    self->n_views = 0;
    free(self->config);
    self->config = NULL;
}

static PyObject *Kernel_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"family", "config", "deadline_ns", NULL};
    const char *name;
    PyObject *config;
    unsigned long long deadline_ns = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sO!|K:Kernel", keywords, &name, &PyDict_Type,
                                     &config, &deadline_ns))
        return NULL;
    const ml_family *family = find_family(name);
    if (!family) {
        PyErr_Format(PyExc_ValueError, "family='%s' is not a family of this memlab build", name);
        return NULL;
    }
    KernelObject *self = (KernelObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->family = family;
    self->config = calloc(1, family->config_size ? family->config_size : 1);
    if (!self->config) {
        PyErr_NoMemory();
        goto error;
    }
    if (convert_config(self, config) < 0)
        goto error;

    ml_error err = {0};
    binding_data data = {0};
    ml_context ctx = {.check_interrupt = check_interrupt, .binding = &data, .family = family};
    int rc;
    start_deadline(&data, deadline_ns);
    data.thread_state = PyEval_SaveThread();
    rc = family->setup(self->config, &self->state, &ctx, &err);
    PyEval_RestoreThread(data.thread_state);
    if (rc < 0) {
        self->state = NULL;
        raise_stopped(&err, &data, family->name, "setup", deadline_ns);
        goto error;
    }
    return (PyObject *)self;
error:
    Py_DECREF(self);
    return NULL;
}

static void Kernel_dealloc(KernelObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    kernel_release(self);
    type->tp_free(self);
    Py_DECREF(type);
}

static PyObject *Kernel_measure(KernelObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"target_ns", "counters", "deadline_ns", NULL};
    unsigned long long target_ns = 0, deadline_ns = 0;
    int counters = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|KpK:measure", keywords, &target_ns,
                                     &counters, &deadline_ns))
        return NULL;
    if (!self->state) {
        PyErr_SetString(PyExc_ValueError, "the kernel is closed");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the kernel is measuring in another thread");
        return NULL;
    }
    ml_measurement *m = calloc(1, sizeof(*m));
    if (!m)
        return PyErr_NoMemory();
    ml_error err = {0};
    binding_data data = {0};
    ml_context ctx = {.target_ns = target_ns, .counters = counters,
                      .check_interrupt = check_interrupt, .binding = &data, .family = self->family};
    ml_counter_values_missing(&m->counters, 0);
    int rc;
    self->busy = 1;
    start_deadline(&data, deadline_ns);
    data.thread_state = PyEval_SaveThread();
    rc = self->family->measure(self->state, &ctx, m, &err);
    PyEval_RestoreThread(data.thread_state);
    self->busy = 0;
    PyObject *result = NULL;
    if (rc < 0)
        raise_stopped(&err, &data, self->family->name, "sample", deadline_ns);
    else
        result = measurement_to_dict(m, counters);
    free(m);
    return result;
}

static PyObject *Kernel_close(KernelObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the kernel is measuring in another thread");
        return NULL;
    }
    kernel_release(self);
    Py_RETURN_NONE;
}

static PyObject *Kernel_enter(KernelObject *self, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(self);
}

static PyObject *Kernel_exit(KernelObject *self, PyObject *Py_UNUSED(args))
{
    return Kernel_close(self, NULL);
}

static PyObject *Kernel_get_family(KernelObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(self->family->name);
}

static PyObject *Kernel_get_closed(KernelObject *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->state == NULL);
}

static PyMethodDef Kernel_methods[] = {
    {"measure", (PyCFunction)(void (*)(void))Kernel_measure, METH_VARARGS | METH_KEYWORDS,
     "measure(target_ns=0, counters=True, deadline_ns=0) -> dict\n\nOne sample of the family's timed "
     "region.  deadline_ns > 0 stops the sample that many nanoseconds after the call, at the "
     "family's next interrupt check, with TimeoutError (0: no deadline)."},
    {"close", (PyCFunction)Kernel_close, METH_NOARGS, "Free the kernel's memory now."},
    {"__enter__", (PyCFunction)Kernel_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Kernel_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Kernel_getset[] = {
    {"family", (getter)Kernel_get_family, NULL, "the family's name", NULL},
    {"closed", (getter)Kernel_get_closed, NULL, "True once closed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Kernel_slots[] = {
    {Py_tp_new, Kernel_new},
    {Py_tp_dealloc, Kernel_dealloc},
    {Py_tp_methods, Kernel_methods},
    {Py_tp_getset, Kernel_getset},
    {Py_tp_doc, "Kernel(family, config, deadline_ns=0)\n\nA family's kernel set up with a config dict; "
                "deadline_ns > 0 stops a setup (a list build) still running that long after the call "
                "with TimeoutError."},
    {0, NULL},
};

static PyType_Spec Kernel_spec = {
    .name = "memlab._core.Kernel",
    .basicsize = sizeof(KernelObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = Kernel_slots,
};

/* ---- module functions ----------------------------------------------------------- */

static PyObject *param_to_dict(const ml_param *p)
{
    static const char *const kinds[] = {"int", "float", "bool", "choice", "buffer"};
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    if (set_item(d, "name", PyUnicode_FromString(p->name)) < 0 ||
        set_item(d, "kind", PyUnicode_FromString(kinds[p->kind])) < 0)
        goto error;
    if (p->kind == ML_PARAM_BUFFER && p->optional && set_item(d, "optional", Py_NewRef(Py_True)) < 0)
        goto error;
    if (p->kind == ML_PARAM_INT &&
        (set_item(d, "min", PyLong_FromLongLong(p->min)) < 0 ||
         set_item(d, "max", PyLong_FromLongLong(p->max)) < 0))
        goto error;
    if (p->kind == ML_PARAM_DOUBLE &&
        (set_item(d, "min", PyFloat_FromDouble(p->min_double)) < 0 ||
         set_item(d, "max", PyFloat_FromDouble(p->max_double)) < 0))
        goto error;
    if (p->has_default) {
        PyObject *value = p->kind == ML_PARAM_DOUBLE   ? PyFloat_FromDouble(p->default_double)
                          : p->kind == ML_PARAM_BOOL   ? PyBool_FromLong((long)p->default_int)
                          : p->kind == ML_PARAM_CHOICE ? PyUnicode_FromString(p->default_choice ? p->default_choice : "")
                                                       : PyLong_FromLongLong(p->default_int);
        if (set_item(d, "default", value) < 0)
            goto error;
    }
    if (p->kind == ML_PARAM_CHOICE) {
        PyObject *choices = PyList_New(0);
        if (set_item(d, "choices", choices ? Py_NewRef(choices) : NULL) < 0) {
            Py_XDECREF(choices);
            goto error;
        }
        for (int i = 0; p->choices[i]; i++) {
            PyObject *name = PyUnicode_FromString(p->choices[i]);
            int rc = name ? PyList_Append(choices, name) : -1;
            Py_XDECREF(name);
            if (rc < 0) {
                Py_DECREF(choices);
                goto error;
            }
        }
        Py_DECREF(choices);
    }
    return d;
error:
    Py_DECREF(d);
    return NULL;
}

static PyObject *family_to_dict(const ml_family *family)
{
    PyObject *entry = PyDict_New();
    PyObject *params = PyList_New(0);
    if (!entry || !params ||
        set_item(entry, "description", PyUnicode_FromString(family->description)) < 0 ||
        set_item(entry, "params", Py_NewRef(params)) < 0)
        goto error;
    for (const ml_param *p = family->params; p->name; p++) {
        PyObject *item = param_to_dict(p);
        int rc = item ? PyList_Append(params, item) : -1;
        Py_XDECREF(item);
        if (rc < 0)
            goto error;
    }
    Py_DECREF(params);
    return entry;
error:
    Py_XDECREF(entry);
    Py_XDECREF(params);
    return NULL;
}

static PyObject *core_families(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored))
{
    size_t count;
    const ml_family **families = sorted_families(&count);
    if (!families)
        return NULL;
    PyObject *result = PyDict_New();
    for (size_t i = 0; result && i < count; i++)
        if (set_item(result, families[i]->name, family_to_dict(families[i])) < 0)
            Py_CLEAR(result);
    PyMem_Free(families);
    return result;
}

static PyObject *user_param_to_dict(const ml_param *p, const mlk_param *declared)
{
    PyObject *d = param_to_dict(p);
    if (d && (set_item(d, "unit", PyUnicode_FromString(declared->unit ? declared->unit : "")) < 0 ||
              set_item(d, "help", PyUnicode_FromString(declared->help ? declared->help : "")) < 0))
        Py_CLEAR(d);
    return d;
}

static PyObject *core_load_kernel(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *path_object;
    if (!PyArg_ParseTuple(args, "O&:load_kernel", PyUnicode_FSConverter, &path_object))
        return NULL;
    ml_error err = {0};
    const mlk_kernel *kernel = NULL;
    const ml_family *family = ml_user_kernel_load(PyBytes_AS_STRING(path_object), &kernel, &err);
    Py_DECREF(path_object);
    if (!family) {
        raise_ml_error(&err);
        return NULL;
    }
    PyObject *entry = family_to_dict(family);
    PyObject *params = PyList_New(0);
    if (!entry || !params)
        goto error;
    size_t i = 0;
    for (const ml_param *p = family->params; p->name; p++, i++) {
        PyObject *item = user_param_to_dict(p, ml_user_kernel_param(family, i));
        int rc = item ? PyList_Append(params, item) : -1;
        Py_XDECREF(item);
        if (rc < 0)
            goto error;
    }
    if (PyDict_SetItemString(entry, "params", params) < 0 ||
        set_item(entry, "name", PyUnicode_FromString(family->name)) < 0 ||
        set_item(entry, "unit", PyUnicode_FromString(kernel->unit ? kernel->unit : "iteration")) < 0 ||
        set_item(entry, "primary_metric", kernel->primary_metric ? PyUnicode_FromString(kernel->primary_metric)
                                                                 : Py_NewRef(Py_None)) < 0 ||
        set_item(entry, "api_version", PyLong_FromLong(ML_KERNEL_API_VERSION)) < 0)
        goto error;
    Py_DECREF(params);
    return entry;
error:
    Py_XDECREF(entry);
    Py_XDECREF(params);
    return NULL;
}

static PyObject *core_counters_probe(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored))
{
    ml_counters counters;
    ml_counter_values values;
    ml_counters_open(&counters, 0, 0);
    ml_counters_start(&counters);
    ml_counters_stop(&counters);
    ml_counters_read(&counters, &values);
    ml_counters_close(&counters);
    PyObject *result = PyDict_New();
    if (!result)
        return NULL;
    for (int i = 0; i < ML_COUNTER_COUNT; i++) {
        int available = counters.open_errno[i] == 0;
        PyObject *entry = Py_BuildValue(
            "{s:O,s:s,s:s}", "available", available ? Py_True : Py_False, "reason",
            available ? "" : ml_counter_reason(counters.open_errno[i]), "scope",
            !available ? "" : counters.kernel_included ? "user+kernel" : "user");
        if (set_item(result, ml_counter_names[i], entry) < 0) {
            Py_DECREF(result);
            return NULL;
        }
    }
    return result;
}

#if defined(__clang__)
#define ML_COMPILER_FAMILY "clang"
#elif defined(__GNUC__)
#define ML_COMPILER_FAMILY "gcc"
#else
#define ML_COMPILER_FAMILY "other"
#endif

static PyObject *core_build_info(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("{s:s,s:s,s:s,s:s}", "cflags", ML_BUILD_CFLAGS, "cc", ML_BUILD_CC, "compiler",
#ifdef __VERSION__
                         "gcc-compatible " __VERSION__,
#else
                         "unknown",
#endif
                         "compiler_family", ML_COMPILER_FAMILY);
}

static PyObject *core_now_ns(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromUnsignedLongLong(ml_now_ns());
}

static PyObject *core_cpu_features(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("{s:O,s:O,s:O}", "sse2", ml_cpu_supports(ML_CPU_SSE2) ? Py_True : Py_False,
                         "avx2", ml_cpu_supports(ML_CPU_AVX2) ? Py_True : Py_False, "avx512f",
                         ml_cpu_supports(ML_CPU_AVX512F) ? Py_True : Py_False);
}

static PyMethodDef core_methods[] = {
    {"families", core_families, METH_NOARGS, "families() -> {name: {description, params}}"},
    {"counters_probe", core_counters_probe, METH_NOARGS,
     "counters_probe() -> {counter: {available, reason, scope}}"},
    {"build_info", core_build_info, METH_NOARGS, "build_info() -> {cflags, compiler, compiler_family}"},
    {"cpu_features", core_cpu_features, METH_NOARGS,
     "cpu_features() -> {sse2, avx2, avx512f: bool} as the kernels choose them "
     "(less what MEMLAB_HIDE_CPU_FEATURES hides)"},
    {"now_ns", core_now_ns, METH_NOARGS, "now_ns() -> CLOCK_MONOTONIC in ns"},
    {"load_kernel", core_load_kernel, METH_VARARGS,
     "load_kernel(path) -> {name, description, params, unit, primary_metric, api_version}\n\nLoad a "
     "user kernel (a shared object built against memlab_kernel.h) and enter it as a family for the "
     "life of the process; ValueError naming what is wrong with it."},
    {NULL, NULL, 0, NULL},
};

/* ---- module lifecycle --------------------------------------------------------------- */

static int core_exec(PyObject *module)
{
    size_t count;
    const ml_family **families = sorted_families(&count); /* checks the names */
    if (!families)
        return -1;
    PyMem_Free(families);
    module_state *state = get_module_state(module);
    state->kernel_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &Kernel_spec, NULL);
    if (!state->kernel_type)
        return -1;
    if (PyModule_AddType(module, state->kernel_type) < 0)
        return -1;
    /* the name every thread the core starts carries (ml_thread_start_pinned) */
    if (PyModule_AddStringConstant(module, "THREAD_NAME", ML_THREAD_NAME) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "KERNEL_API_VERSION", ML_KERNEL_API_VERSION) < 0)
        return -1;
    return 0;
}

static int core_traverse(PyObject *module, visitproc visit, void *arg)
{
    Py_VISIT(get_module_state(module)->kernel_type);
    return 0;
}

static int core_clear(PyObject *module)
{
    Py_CLEAR(get_module_state(module)->kernel_type);
    return 0;
}

static void core_free(void *module)
{
    core_clear((PyObject *)module);
}

static PyModuleDef_Slot core_slots[] = {
    {Py_mod_exec, core_exec},
    {0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "memlab._core",
    .m_doc = "memlab's C core: timed kernels run with the GIL released.",
    .m_size = sizeof(module_state),
    .m_methods = core_methods,
    .m_slots = core_slots,
    .m_traverse = core_traverse,
    .m_clear = core_clear,
    .m_free = core_free,
};

PyMODINIT_FUNC PyInit__core(void)
{
    return PyModuleDef_Init(&core_module);
}
