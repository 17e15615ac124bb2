/* runtime/optim — the optimizers over a flat parameter buffer, for the
 * trainer (runtime/train) and the parameter server's shards (runtime/ps)
 * alike: SGD (momentum, weight decay) and Adam, one fused device operation
 * a step. */
#ifndef FERRY_RUNTIME_OPTIM_H
#define FERRY_RUNTIME_OPTIM_H

#include <stddef.h>

#include <ferry/device.h>

enum { RT_OPT_SGD = 1, RT_OPT_ADAM = 2 };

typedef struct rt_optim_opts {
    int kind; /* RT_OPT_SGD or RT_OPT_ADAM */
    float lr;
    float momentum; /* sgd */
    float weight_decay;
    float beta1, beta2, eps; /* adam */
} rt_optim_opts;

/* Fills in the defaults for o->kind where a field is 0: lr 0.05 (sgd) or
 * 0.001 (adam), beta1 0.9, beta2 0.999, eps 1e-8. Momentum and weight decay
 * stay as given (0 is meaningful). */
void rt_optim_defaults(rt_optim_opts *o);
/* "sgd" / "adam" -> RT_OPT_*, 0 for anything else. */
int rt_optim_parse(const char *name);
const char *rt_optim_name(int kind);

typedef struct rt_optim rt_optim;
/* State for `n` floats on `dev` (zeroed). */
int rt_optim_create(ferry_device_t *dev, const rt_optim_opts *o, size_t n,
                    rt_optim **out);
/* Sets the learning rate of the steps that follow (a schedule's). */
void rt_optim_set_lr(rt_optim *opt, float lr);
/* The learning rate of the next step. */
float rt_optim_lr(const rt_optim *opt);
/* One step of params from grad. */
void rt_optim_step(rt_optim *opt, float *params, const float *grad);
void rt_optim_destroy(rt_optim *opt);

/* What a checkpoint keeps of an optimizer: its moments (on its device,
 * NULL when it keeps none: m for sgd, v for sgd without momentum), their
 * length, and its steps (Adam's bias correction). */
typedef struct rt_optim_state {
    float *m, *v;
    size_t n;
    int t;
} rt_optim_state;
void rt_optim_state_of(rt_optim *opt, rt_optim_state *s);
/* Sets the steps taken, for a run continued from a checkpoint. */
void rt_optim_set_steps(rt_optim *opt, int t);

#endif
