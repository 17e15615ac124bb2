/* Optimizers over the flat parameter buffer: one fused device operation a
 * step, so the update costs a single pass over parameters, gradient and
 * state. The state lives on the device next to the parameters. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <ferry/error.h>

#include "optim.h"

struct rt_optim {
    ferry_device_t *dev;
    rt_optim_opts o;
    size_t n;
    float *m, *v; /* sgd: v = momentum buffer (m unused); adam: both moments */
    int t;        /* steps taken */
};

void rt_optim_defaults(rt_optim_opts *o)
{
    if (o->lr == 0)
        o->lr = o->kind == RT_OPT_ADAM ? 0.001f : 0.05f;
    if (o->beta1 == 0)
        o->beta1 = 0.9f;
    if (o->beta2 == 0)
        o->beta2 = 0.999f;
    if (o->eps == 0)
        o->eps = 1e-8f;
}

int rt_optim_parse(const char *name)
{
    if (!name)
        return 0;
    if (strcmp(name, "sgd") == 0)
        return RT_OPT_SGD;
    if (strcmp(name, "adam") == 0)
        return RT_OPT_ADAM;
    return 0;
}

const char *rt_optim_name(int kind)
{
    return kind == RT_OPT_ADAM ? "adam" : kind == RT_OPT_SGD ? "sgd" : "?";
}

static float *zeroed(ferry_device_t *dev, size_t n)
{
    float *p = dev->ops->alloc(dev, n * sizeof(float));
    if (p)
        dev->ops->fill(dev, p, 0.0f, n);
    return p;
}

int rt_optim_create(ferry_device_t *dev, const rt_optim_opts *o, size_t n, rt_optim **out)
{
    *out = NULL;
    if ((o->kind != RT_OPT_SGD && o->kind != RT_OPT_ADAM) || n == 0)
        return FERRY_EINVAL;
    rt_optim *opt = calloc(1, sizeof *opt);
    if (!opt)
        return FERRY_ENOMEM;
    opt->dev = dev;
    opt->o = *o;
    opt->n = n;
    bool need_v = o->kind == RT_OPT_ADAM || o->momentum != 0;
    if ((o->kind == RT_OPT_ADAM && !(opt->m = zeroed(dev, n))) ||
        (need_v && !(opt->v = zeroed(dev, n)))) {
        rt_optim_destroy(opt);
        return FERRY_ENOMEM;
    }
    *out = opt;
    return 0;
}

void rt_optim_set_lr(rt_optim *opt, float lr)
{
    opt->o.lr = lr;
}

float rt_optim_lr(const rt_optim *opt)
{
    return opt->o.lr;
}

void rt_optim_step(rt_optim *opt, float *params, const float *grad)
{
    const rt_optim_opts *o = &opt->o;
    const ferry_device_ops_t *ops = opt->dev->ops;
    opt->t++;
    if (o->kind == RT_OPT_ADAM)
        ops->adam_step(opt->dev, params, grad, opt->m, opt->v, opt->n, o->lr, o->beta1,
                       o->beta2, o->eps, o->weight_decay, opt->t);
    else
        ops->sgd_step(opt->dev, params, grad, opt->v, opt->n, o->lr, o->momentum,
                      o->weight_decay);
}

void rt_optim_destroy(rt_optim *opt)
{
    if (!opt)
        return;
    opt->dev->ops->free(opt->dev, opt->m);
    opt->dev->ops->free(opt->dev, opt->v);
    free(opt);
}

void rt_optim_state_of(rt_optim *opt, rt_optim_state *s)
{
    *s = (rt_optim_state){.m = opt->m, .v = opt->v, .n = opt->n, .t = opt->t};
}

void rt_optim_set_steps(rt_optim *opt, int t)
{
    opt->t = t;
}
