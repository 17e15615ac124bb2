/* Named tensors in and out of the trainer's flat buffers: matched by name,
 * so that a file written by another tool in another order still loads, and
 * checked shape for shape, so that a file of another model is refused
 * before a single value is used. A model's buffers (batch normalisation's
 * running statistics) travel beside its parameters, by their names. */
#include "tensors.h"

#include "trainer_int.h"

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

/* Whether `name` is one of `list`'s (NULL: none). */
static bool listed(const ferry_param_t *list, const char *name)
{
    for (int j = 0; list && list[j].name; j++)
        if (strcmp(list[j].name, name) == 0)
            return true;
    return false;
}

/* Every tensor of `in` is one of the model's, parameter or buffer. */
static int none_extra(const ferry_model_t *m, const rt_tensors *in, char *err,
                      size_t errlen)
{
    for (size_t i = 0; i < in->n; i++) {
        if (!listed(m->params, in->names[i]) &&
            !listed(ferry_model_buffer_list(m), in->names[i])) {
            snprintf(err, errlen, "tensor '%.128s' is not one of the model's",
                     in->names[i]);
            return FERRY_EINVAL;
        }
    }
    return 0;
}

static size_t list_len(const ferry_param_t *list)
{
    size_t n = 0;
    while (list && list[n].name)
        n++;
    return n;
}

size_t rt_tensors_state_len(const ferry_model_t *m)
{
    return ferry_model_layout(m, NULL) + ferry_model_buffers_layout(m, NULL);
}

/* The tensors of `list` out of `in` into `buf`, laid out as the list is:
 * each by name, with its shape. */
static int take(const ferry_param_t *list, const rt_tensors *in, const size_t *at,
                float *buf, char *err, size_t errlen)
{
    size_t n = list_len(list);
    size_t *off = calloc(n + 1, sizeof *off);
    if (!off)
        return FERRY_ENOMEM;
    ferry_tensors_layout(list, off);
    int rc = 0;
    for (size_t j = 0; rc == 0 && j < n; j++) {
        const ferry_param_t *p = &list[j];
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
    free(off);
    return rc;
}

int rt_tensors_to_flat(const ferry_model_t *m, const rt_tensors *in, float **flat,
                       char *err, size_t errlen)
{
    *flat = NULL;
    size_t *at = calloc(in->n + 1, sizeof *at), plen = ferry_model_layout(m, NULL);
    float *buf = NULL;
    int rc = at ? 0 : FERRY_ENOMEM;
    if (rc == 0)
        rc = starts(in, at, err, errlen);
    if (rc == 0 && !(buf = calloc(rt_tensors_state_len(m) + 1, sizeof *buf)))
        rc = FERRY_ENOMEM;
    if (rc == 0)
        rc = take(m->params, in, at, buf, err, errlen);
    if (rc == 0)
        rc = take(ferry_model_buffer_list(m), in, at, buf + plen, err, errlen);
    if (rc == 0) /* the model's tensors first: what is missing says more */
        rc = none_extra(m, in, err, errlen);
    free(at);
    if (rc)
        free(buf);
    else
        *flat = buf;
    return rc;
}

/* The tensors of `list` (laid out in `flat`) one after another from
 * out->n and out->floats on. */
static void put(const ferry_param_t *list, const float *flat, rt_tensors *out,
                const char **names, uint32_t *shapes, float *values, const size_t *off)
{
    for (size_t j = 0; list && list[j].name; j++) {
        size_t k = out->n++;
        names[k] = list[j].name;
        model_shape(&list[j], shapes + 4 * k);
        size_t c = count(shapes + 4 * k);
        memcpy(values + out->floats, flat + off[j], c * sizeof *values);
        out->floats += c;
    }
}

static size_t list_count(const ferry_param_t *list)
{
    size_t n = 0;
    for (size_t j = 0; list && list[j].name; j++)
        n += ferry_param_count(&list[j]);
    return n;
}

int rt_tensors_from_flat(const ferry_model_t *m, const float *flat, rt_tensors *out)
{
    memset(out, 0, sizeof *out);
    const ferry_param_t *bl = ferry_model_buffer_list(m);
    size_t np = list_len(m->params), nb = list_len(bl), n = np + nb;
    size_t *off = calloc((np > nb ? np : nb) + 1, sizeof *off);
    const char **names = calloc(n + 1, sizeof *names);
    uint32_t *shapes = calloc(4 * n + 1, sizeof *shapes);
    float *values = malloc((list_count(m->params) + list_count(bl) + 1) * sizeof *values);
    if (!off || !names || !shapes || !values) {
        free(off);
        free(names);
        free(shapes);
        free(values);
        return FERRY_ENOMEM;
    }
    out->names = names;
    out->shapes = shapes;
    out->values = values;
    size_t plen = ferry_model_layout(m, off);
    put(m->params, flat, out, names, shapes, values, off);
    ferry_tensors_layout(bl, off);
    put(bl, flat + plen, out, names, shapes, values, off);
    free(off);
    return 0;
}

int rt_trainer_tensors(rt_trainer *t, const float *params, rt_tensors *out)
{
    size_t plen = t->plen;
    float *state = malloc((plen + t->mc.blen + 1) * sizeof *state);
    if (!state)
        return FERRY_ENOMEM;
    memcpy(state, params, plen * sizeof *state);
    int rc = rt_model_ctx_get_buffers(&t->mc, state + plen);
    if (rc == 0)
        rc = rt_tensors_from_flat(t->m, state, out);
    free(state);
    return rc;
}

void rt_tensors_free(rt_tensors *t)
{
    free((void *)t->names);
    free((void *)t->shapes);
    free((void *)t->values);
    memset(t, 0, sizeof *t);
}
