/* Named tensors in and out of the trainer's flat buffer: matched by name,
 * so that a file written by another tool in another order still loads, and
 * checked shape for shape, so that a file of another model is refused
 * before a single value is used. */
#include "tensors.h"

#include "train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rt_tensors_shape_str(const uint32_t shape[4], char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int d = 0; d < 4 && shape[d] && at < len; d++)
        at += (size_t)snprintf(buf + at, len - at, "%s%u", d ? "x" : "", shape[d]);
    if (!buf[0])
        snprintf(buf, len, "scalar");
}

static void model_shape(const ferry_param_t *p, uint32_t out[4])
{
    for (int d = 0; d < 4; d++)
        out[d] = p->shape[d] > 0 ? (uint32_t)p->shape[d] : 0;
}

static size_t count(const uint32_t shape[4])
{
    size_t n = 1;
    for (int d = 0; d < 4 && shape[d]; d++)
        n *= shape[d];
    return n;
}

/* Where each of `in`'s tensors starts among its values; FERRY_EINVAL when
 * they add up to more or fewer than it has. */
static int starts(const rt_tensors *in, size_t *at, char *err, size_t errlen)
{
    size_t sum = 0;
    for (size_t i = 0; i < in->n; i++) {
        at[i] = sum;
        size_t c = count(in->shapes + 4 * i);
        if (c > in->floats - sum || sum > in->floats) {
            snprintf(err, errlen,
                     "the tensors' shapes ask for more than the %zu values given",
                     in->floats);
            return FERRY_EINVAL;
        }
        sum += c;
    }
    if (sum != in->floats) {
        snprintf(err, errlen, "%zu values given for tensors of %zu", in->floats, sum);
        return FERRY_EINVAL;
    }
    return 0;
}

static size_t find(const rt_tensors *in, const char *name)
{
    for (size_t i = 0; i < in->n; i++)
        if (strcmp(in->names[i], name) == 0)
            return i;
    return SIZE_MAX;
}

/* Every tensor of `in` is one of the model's. */
static int none_extra(const ferry_model_t *m, const rt_tensors *in, char *err,
                      size_t errlen)
{
    for (size_t i = 0; i < in->n; i++) {
        int j = 0;
        while (m->params[j].name && strcmp(m->params[j].name, in->names[i]) != 0)
            j++;
        if (!m->params[j].name) {
            snprintf(err, errlen, "tensor '%.128s' is not one of the model's",
                     in->names[i]);
            return FERRY_EINVAL;
        }
    }
    return 0;
}

int rt_tensors_to_flat(const ferry_model_t *m, const rt_tensors *in, float **flat,
                       char *err, size_t errlen)
{
    *flat = NULL;
    size_t n_params = 0;
    while (m->params[n_params].name)
        n_params++;
    size_t *off = calloc(n_params + 1, sizeof *off), *at = calloc(in->n + 1, sizeof *at);
    float *buf = NULL;
    int rc = off && at ? 0 : FERRY_ENOMEM;
    if (rc == 0)
        rc = starts(in, at, err, errlen);
    if (rc == 0 && !(buf = calloc(ferry_model_layout(m, off) + 1, sizeof *buf)))
        rc = FERRY_ENOMEM;
    for (size_t j = 0; rc == 0 && j < n_params; j++) {
        const ferry_param_t *p = &m->params[j];
        uint32_t want[4];
        model_shape(p, want);
        char ws[64], gs[64];
        rt_tensors_shape_str(want, ws, sizeof ws);
        size_t i = find(in, p->name);
        if (i == SIZE_MAX) {
            snprintf(err, errlen, "they have no tensor '%s' (the model's is %s)", p->name,
                     ws);
            rc = FERRY_EINVAL;
        } else if (memcmp(in->shapes + 4 * i, want, sizeof want) != 0) {
            rt_tensors_shape_str(in->shapes + 4 * i, gs, sizeof gs);
            snprintf(err, errlen, "tensor '%s' is %s there and %s in the model", p->name,
                     gs, ws);
            rc = FERRY_EINVAL;
        } else {
            memcpy(buf + off[j], in->values + at[i], count(want) * sizeof *buf);
        }
    }
    if (rc == 0) /* the model's tensors first: what is missing says more */
        rc = none_extra(m, in, err, errlen);
    free(off);
    free(at);
    if (rc)
        free(buf);
    else
        *flat = buf;
    return rc;
}

int rt_tensors_from_flat(const ferry_model_t *m, const float *flat, rt_tensors *out)
{
    memset(out, 0, sizeof *out);
    size_t n = 0;
    while (m->params[n].name)
        n++;
    size_t *off = calloc(n + 1, sizeof *off);
    const char **names = calloc(n + 1, sizeof *names);
    uint32_t *shapes = calloc(4 * n + 1, sizeof *shapes);
    size_t floats = rt_model_param_count(m);
    float *values = malloc((floats + 1) * sizeof *values);
    if (!off || !names || !shapes || !values) {
        free(off);
        free(names);
        free(shapes);
        free(values);
        return FERRY_ENOMEM;
    }
    ferry_model_layout(m, off);
    size_t at = 0;
    for (size_t j = 0; j < n; j++) {
        names[j] = m->params[j].name;
        model_shape(&m->params[j], shapes + 4 * j);
        size_t c = count(shapes + 4 * j);
        memcpy(values + at, flat + off[j], c * sizeof *values);
        at += c;
    }
    free(off);
    *out = (rt_tensors){
        .n = n, .names = names, .shapes = shapes, .values = values, .floats = floats};
    return 0;
}

void rt_tensors_free(rt_tensors *t)
{
    free((void *)t->names);
    free((void *)t->shapes);
    free((void *)t->values);
    memset(t, 0, sizeof *t);
}
