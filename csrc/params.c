/* Parameter defaults (memlab.h, ml_param): the one table of a family's
 * parameters holds their defaults too; module.c fills an absent key from
 * it, and a family that drives another through its table (loaded, the
 * chase) starts from them and sets only what differs. */
#include <string.h>

#include "memlab.h"

static const ml_param *param_named(const ml_family *family, const char *name)
{
    for (const ml_param *p = family->params; p->name; p++)
        if (strcmp(p->name, name) == 0)
            return p;
    return NULL;
}

static int set_int(const ml_param *p, void *config, int64_t value, const char *family, ml_error *err)
{
    char *field = (char *)config + p->offset;
    if (p->kind == ML_PARAM_INT) {
        if (value < p->min || value > p->max)
            return ml_fail(err, ML_ERR_VALUE, 0, "%s: %s=%lld is outside [%lld, %lld]", family, p->name,
                           (long long)value, (long long)p->min, (long long)p->max);
        memcpy(field, &value, sizeof value);
        return 0;
    }
    if (p->kind == ML_PARAM_BOOL && (value == 0 || value == 1)) {
        int v = (int)value;
        memcpy(field, &v, sizeof v);
        return 0;
    }
    return ml_fail(err, ML_ERR_VALUE, 0, "%s: %s=%lld is not an integer or boolean value it takes", family,
                   p->name, (long long)value);
}

static int set_choice(const ml_param *p, void *config, const char *text, const char *family, ml_error *err)
{
    if (p->kind == ML_PARAM_CHOICE && text)
        for (int i = 0; p->choices[i]; i++)
            if (strcmp(p->choices[i], text) == 0) {
                memcpy((char *)config + p->offset, &i, sizeof i);
                return 0;
            }
    return ml_fail(err, ML_ERR_VALUE, 0, "%s: %s=%s is not one of its choices", family, p->name,
                   text ? text : "(none)");
}

int ml_param_set_default(const ml_param *p, void *config, ml_error *err)
{
    if (!p->has_default)
        return ml_fail(err, ML_ERR_VALUE, 0, "parameter %s has no default", p->name);
    switch (p->kind) {
    case ML_PARAM_INT:
    case ML_PARAM_BOOL:
        return set_int(p, config, p->default_int, "a default", err);
    case ML_PARAM_DOUBLE:
        if (!(p->default_double >= p->min_double && p->default_double <= p->max_double))
            return ml_fail(err, ML_ERR_VALUE, 0, "the default %s=%g is outside [%g, %g]", p->name,
                           p->default_double, p->min_double, p->max_double);
        memcpy((char *)config + p->offset, &p->default_double, sizeof p->default_double);
        return 0;
    case ML_PARAM_CHOICE:
        return set_choice(p, config, p->default_choice, "a default", err);
    case ML_PARAM_BUFFER:
        break;
    }
    return ml_fail(err, ML_ERR_VALUE, 0, "buffer parameter %s cannot have a default", p->name);
}

int ml_config_defaults(const ml_family *family, void *config, ml_error *err)
{
    memset(config, 0, family->config_size);
    for (const ml_param *p = family->params; p->name; p++)
        if (p->has_default && ml_param_set_default(p, config, err))
            return -1;
    return 0;
}

int ml_config_set_int(const ml_family *family, void *config, const char *name, int64_t value, ml_error *err)
{
    const ml_param *p = param_named(family, name);
    if (!p)
        return ml_fail(err, ML_ERR_VALUE, 0, "the %s family has no parameter %s", family->name, name);
    return set_int(p, config, value, family->name, err);
}

int ml_config_set_choice(const ml_family *family, void *config, const char *name, const char *text,
                         ml_error *err)
{
    const ml_param *p = param_named(family, name);
    if (!p)
        return ml_fail(err, ML_ERR_VALUE, 0, "the %s family has no parameter %s", family->name, name);
    return set_choice(p, config, text, family->name, err);
}
