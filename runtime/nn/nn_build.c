/* The plan of a layer list: every layer's shape, its tensors and their
 * names, and which activation buffer each output lies in. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nn_int.h"

static int fail(ferry_nn_t *nn, int i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(ferry_nn_t *nn, int i, const char *fmt, ...)
{
    char what[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *name = nn->layers[i].name;
    if (name)
        snprintf(nn->plan.err, sizeof nn->plan.err, "layer %d (%s): %s", i, name, what);
    else
        snprintf(nn->plan.err, sizeof nn->plan.err, "layer %d: %s", i, what);
    return FERRY_EINVAL;
}

/* Appends tensor `suffix` of layer i with `shape` to the parameters, or
 * to the buffers. */
static int add_tensor(ferry_nn_t *nn, int i, const char *suffix, const int shape[4],
                      bool buffer)
{
    ferry_nn_plan_t *pl = &nn->plan;
    int *count = buffer ? &pl->nbuffers : &pl->nparams;
    int max = buffer ? FERRY_NN_MAX_BUFFERS : FERRY_NN_MAX_PARAMS;
    if (*count == max)
        return fail(nn, i, "more than %d %s tensors", max,
                    buffer ? "buffer" : "parameter");
    char *name = buffer ? pl->buffer_names[*count] : pl->names[*count];
    int len = nn->layers[i].name
                  ? snprintf(name, FERRY_NN_NAME_MAX, "%s.%s", nn->layers[i].name, suffix)
                  : snprintf(name, FERRY_NN_NAME_MAX, "%d.%s", i, suffix);
    if (len < 0 || len >= FERRY_NN_NAME_MAX)
        return fail(nn, i, "tensor name longer than %d characters",
                    FERRY_NN_NAME_MAX - 1);
    ferry_param_t *p = buffer ? &pl->buffers[(*count)++] : &pl->params[(*count)++];
    p->name = name;
    memcpy(p->shape, shape, sizeof p->shape);
    for (int d = 0; d < 4 && shape[d]; d++)
        if (shape[d] < 0)
            return fail(nn, i, "tensor %s has a negative dimension", name);
    return 0;
}

static int add_param(ferry_nn_t *nn, int i, const char *suffix, const int shape[4])
{
    return add_tensor(nn, i, suffix, shape, false);
}

/* A batch normalisation's tensors and buffers, a channel each. */
static int batchnorm_shape(ferry_nn_t *nn, int i, const ferry_nn_step_t *st)
{
    int ch, hw;
    nn_bn_shape(st, &ch, &hw);
    const int per[4] = {ch}, scalar[4] = {0};
    return add_param(nn, i, "weight", per) || add_param(nn, i, "bias", per) ||
           add_tensor(nn, i, "running_mean", per, true) ||
           add_tensor(nn, i, "running_var", per, true) ||
           add_tensor(nn, i, "num_batches_tracked", scalar, true);
}

static int custom_shape(ferry_nn_t *nn, int i, ferry_nn_step_t *st)
{
    const ferry_nn_custom_t *cu = nn->layers[i].custom;
    if (!cu || !cu->shape || !cu->forward || !cu->backward)
        return fail(nn, i, "a custom layer needs shape, forward and backward");
    ferry_param_t ps[FERRY_NN_CUSTOM_PARAMS];
    memset(ps, 0, sizeof ps);
    int np = cu->shape(st->in, st->out, ps);
    if (np < 0 || np > FERRY_NN_CUSTOM_PARAMS)
        return fail(nn, i, "its shape callback refused input %dx%dx%d", st->in[0],
                    st->in[1], st->in[2]);
    for (int k = 0; k < np; k++) {
        if (!ps[k].name)
            return fail(nn, i, "its tensor %d has no name", k);
        int rc = add_param(nn, i, ps[k].name, ps[k].shape);
        if (rc)
            return rc;
    }
    return 0;
}

/* Layer i's output shape and tensors, from its input shape in st->in. */
static int shape_layer(ferry_nn_t *nn, int i, ferry_nn_step_t *st)
{
    const ferry_nn_layer_t *l = &nn->layers[i];
    const int *in = st->in;
    int units = l->units ? l->units : nn->outputs;
    bool pool = l->kind == FERRY_NN_LAYER_MAXPOOL || l->kind == FERRY_NN_LAYER_AVGPOOL;
    int stride = l->stride > 0 ? l->stride : (pool ? l->size : 1);
    memcpy(st->out, in, sizeof st->out);
    switch (l->kind) {
    case FERRY_NN_LAYER_DENSE:
        if (units <= 0)
            return fail(nn, i, "width 0 and the model has no outputs to take");
        st->out[0] = st->out[1] = 1;
        st->out[2] = units;
        return add_param(nn, i, "weight", (int[4]){(int)st->in_n, units}) ||
               add_param(nn, i, "bias", (int[4]){units});
    case FERRY_NN_LAYER_CONV2D: {
        if (units <= 0 || l->size <= 0 || l->pad < 0)
            return fail(nn, i, "a convolution needs filters and a positive size");
        ferry_conv_t s = {.n = 1,
                          .c = in[0],
                          .h = in[1],
                          .w = in[2],
                          .k = units,
                          .r = l->size,
                          .s = l->size,
                          .pad = l->pad,
                          .stride = stride};
        if (!ferry_conv_shape(&s))
            return fail(nn, i, "its %dx%d filters do not fit the %dx%d input", l->size,
                        l->size, in[1], in[2]);
        st->out[0] = units, st->out[1] = s.oh, st->out[2] = s.ow;
        return add_param(nn, i, "weight", (int[4]){units, in[0], l->size, l->size}) ||
               add_param(nn, i, "bias", (int[4]){units});
    }
    case FERRY_NN_LAYER_GLOBAL_AVGPOOL:
        if (in[1] != in[2])
            return fail(nn, i, "global average pooling needs a square map, not %dx%d",
                        in[1], in[2]);
        st->out[1] = st->out[2] = 1;
        return 0;
    case FERRY_NN_LAYER_MAXPOOL:
    case FERRY_NN_LAYER_AVGPOOL: {
        ferry_pool_t p = {.n = 1,
                          .c = in[0],
                          .h = in[1],
                          .w = in[2],
                          .size = l->size,
                          .stride = stride};
        if (!ferry_pool_shape(&p))
            return fail(nn, i, "its %dx%d window does not fit the %dx%d input", l->size,
                        l->size, in[1], in[2]);
        st->out[1] = p.oh, st->out[2] = p.ow;
        return 0;
    }
    case FERRY_NN_LAYER_FLATTEN:
        st->out[0] = st->out[1] = 1;
        st->out[2] = (int)st->in_n;
        return 0;
    case FERRY_NN_LAYER_RESIDUAL: {
        const ferry_nn_plan_t *pl = &nn->plan;
        if (l->size < 1 || l->size > i)
            return fail(nn, i, "a skip over %d layers, %d before it", l->size, i);
        st->skip = i - l->size - 1;
        const int *from = st->skip >= 0 ? pl->step[st->skip].out : nn->input;
        if (memcmp(from, in, sizeof st->in) != 0)
            return fail(nn, i, "adds a %dx%dx%d input to a %dx%dx%d output", from[0],
                        from[1], from[2], in[0], in[1], in[2]);
        return 0;
    }
    case FERRY_NN_LAYER_LAYERNORM: {
        int n = (int)st->in_n;
        bool flat = in[0] == 1 && in[1] == 1;
        int shape[4] = {flat ? n : in[0], flat ? 0 : in[1], flat ? 0 : in[2], 0};
        return add_param(nn, i, "weight", shape) || add_param(nn, i, "bias", shape);
    }
    case FERRY_NN_LAYER_BATCHNORM:
        return batchnorm_shape(nn, i, st);
    case FERRY_NN_LAYER_DROPOUT:
        if (!(l->alpha >= 0.0f && l->alpha < 1.0f))
            return fail(nn, i, "dropout's p %g is not in [0, 1)", (double)l->alpha);
        return 0;
    case FERRY_NN_LAYER_RELU:
    case FERRY_NN_LAYER_TANH:
    case FERRY_NN_LAYER_SIGMOID:
    case FERRY_NN_LAYER_LEAKY_RELU:
    case FERRY_NN_LAYER_GELU:
        return 0;
    case FERRY_NN_LAYER_CUSTOM:
        return custom_shape(nn, i, st);
    default:
        return fail(nn, i, "unknown layer kind %d", l->kind);
    }
}

/* Where each layer's output lies: in its input's buffer for the layers
 * that work in place, a buffer of its own otherwise (-1: the batch). */
static void place(ferry_nn_t *nn, int i, ferry_nn_step_t *st)
{
    ferry_nn_plan_t *pl = &nn->plan;
    int prev = i ? pl->step[i - 1].buf : -1;
    st->aux = -1;
    if (nn_in_place(nn, i) || (nn->layers[i].kind == FERRY_NN_LAYER_FLATTEN)) {
        st->buf = prev;
        if (i && nn->layers[i].kind == FERRY_NN_LAYER_RELU &&
            nn->layers[i - 1].kind == FERRY_NN_LAYER_DENSE)
            pl->step[i - 1].fused = true;
        return;
    }
    st->buf = pl->nbufs;
    pl->buf_n[pl->nbufs++] = st->out_n;
    int kind = nn->layers[i].kind;
    if (kind == FERRY_NN_LAYER_DROPOUT || kind == FERRY_NN_LAYER_RESIDUAL ||
        kind == FERRY_NN_LAYER_LAYERNORM || kind == FERRY_NN_LAYER_BATCHNORM) {
        st->aux = pl->nbufs;
        pl->buf_n[pl->nbufs++] = kind == FERRY_NN_LAYER_LAYERNORM   ? 2
                                 : kind == FERRY_NN_LAYER_BATCHNORM ? nn_bn_aux(st)
                                                                    : st->out_n;
    }
}

static size_t volume(const int s[3])
{
    return (size_t)s[0] * (size_t)s[1] * (size_t)s[2];
}

static int plan(ferry_nn_t *nn)
{
    ferry_nn_plan_t *pl = &nn->plan;
    if (!nn->layers || nn->layers[0].kind == FERRY_NN_LAYER_END) {
        snprintf(pl->err, sizeof pl->err, "the model has no layers");
        return FERRY_EINVAL;
    }
    for (int d = 0; d < 3; d++)
        if (nn->input[d] <= 0) {
            snprintf(pl->err, sizeof pl->err,
                     "the model's input %dx%dx%d is not positive", nn->input[0],
                     nn->input[1], nn->input[2]);
            return FERRY_EINVAL;
        }
    bool params_before = false;
    for (int i = 0; nn->layers[i].kind != FERRY_NN_LAYER_END; i++) {
        /* A layer takes at most two buffers (dropout: its mask). */
        if (i == FERRY_NN_MAX_LAYERS / 2)
            return fail(nn, i - 1, "more than %d layers", FERRY_NN_MAX_LAYERS / 2);
        ferry_nn_step_t *st = &pl->step[i];
        st->skip = -1;
        memcpy(st->in, i ? pl->step[i - 1].out : nn->input, sizeof st->in);
        st->in_n = volume(st->in);
        st->param0 = pl->nparams;
        st->buffer0 = pl->nbuffers;
        int rc = shape_layer(nn, i, st);
        if (rc)
            return FERRY_EINVAL; /* fail() said why */
        st->nparams = pl->nparams - st->param0;
        st->nbuffers = pl->nbuffers - st->buffer0;
        st->out_n = volume(st->out);
        if (st->out_n == 0)
            return fail(nn, i, "its output is empty");
        st->need_dx = params_before;
        params_before = params_before || st->nparams > 0;
        place(nn, i, st);
        pl->grad_n = st->out_n > pl->grad_n ? st->out_n : pl->grad_n;
        pl->nlayers = i + 1;
    }
    if (!pl->nparams) {
        snprintf(pl->err, sizeof pl->err, "the model has no parameter tensors");
        return FERRY_EINVAL;
    }
    return 0;
}

/* A descriptor the runtime refuses with the reason: one tensor, of no
 * shape, named after it. */
static void refuse(ferry_nn_t *nn, ferry_model_t *m)
{
    ferry_nn_plan_t *pl = &nn->plan;
    fprintf(stderr, "ferry nn: %s\n", pl->err);
    snprintf(pl->refusal, sizeof pl->refusal, "of the layer list (%s)", pl->err);
    memset(pl->params, 0, 2 * sizeof pl->params[0]);
    pl->params[0].name = pl->refusal;
    m->outputs = nn->outputs > 0 ? nn->outputs : 1;
    m->params = pl->params;
    m->buffers = NULL;
}

/* Whether the list's last layer with a width leaves it 0 (the model's
 * outputs). */
static bool last_width_open(const ferry_nn_t *nn)
{
    bool open = false;
    for (int i = 0; nn->layers && nn->layers[i].kind != FERRY_NN_LAYER_END; i++)
        if (nn->layers[i].kind == FERRY_NN_LAYER_DENSE ||
            nn->layers[i].kind == FERRY_NN_LAYER_CONV2D)
            open = nn->layers[i].units == 0;
    return open;
}

/* What the data decides, as the module declared it: remembered once,
 * before a reshape fills the fields in. */
static void declare(ferry_nn_t *nn)
{
    if (nn->declared)
        return;
    nn->declared = true;
    nn->input_from_data = nn->input[0] <= 0 && nn->input[1] <= 0 && nn->input[2] <= 0;
    nn->outputs_from_data = nn->outputs <= 0 && last_width_open(nn);
}

/* A model that waits for the data's shape: no plan yet, and nothing to
 * say about it. The runtime calls reshape before it reads the tensors. */
static int wait_for_data(ferry_nn_t *nn, ferry_model_t *m)
{
    ferry_nn_plan_t *pl = &nn->plan;
    snprintf(pl->refusal, sizeof pl->refusal,
             "of the layer list (its shape comes from the data)");
    memset(pl->params, 0, 2 * sizeof pl->params[0]);
    pl->params[0].name = pl->refusal;
    memset(m->input, 0, sizeof m->input);
    m->outputs = 0;
    m->params = pl->params;
    m->buffers = NULL;
    return 0;
}

static int build(ferry_nn_t *nn, ferry_model_t *m, bool may_wait);

int ferry_nn_reshape(ferry_nn_t *nn, ferry_model_t *m, const int input[3], int outputs)
{
    declare(nn);
    int want_in[3], want_out = nn->outputs_from_data ? outputs : nn->outputs;
    memcpy(want_in, nn->input_from_data ? input : nn->input, sizeof want_in);
    /* The plan it has already: left alone, for the ranks or calls that may
     * be running it (the tests' ranks share one module in one process). */
    if (nn->plan.nlayers && memcmp(want_in, nn->input, sizeof want_in) == 0 &&
        want_out == nn->outputs)
        return 0;
    memcpy(nn->input, want_in, sizeof nn->input);
    nn->outputs = want_out;
    return build(nn, m, false);
}

int ferry_nn_build(ferry_nn_t *nn, ferry_model_t *m)
{
    return build(nn, m, true);
}

/* The plan and the descriptor; `may_wait`: a list that leaves its shape to
 * the data waits for it rather than fail. */
static int build(ferry_nn_t *nn, ferry_model_t *m, bool may_wait)
{
    ferry_nn_plan_t *pl = &nn->plan;
    memset(pl, 0, sizeof *pl);
    declare(nn);
    m->kind = nn->loss == FERRY_NN_SOFTMAX_XENT ? FERRY_MODEL_CLASSIFIER
                                                : FERRY_MODEL_REGRESSOR;
    m->dataset = nn->dataset;
    if (may_wait && ((nn->input_from_data && nn->input[0] <= 0) ||
                     (nn->outputs_from_data && nn->outputs <= 0)))
        return wait_for_data(nn, m);
    memcpy(m->input, nn->input, sizeof m->input);
    int rc = plan(nn);
    if (!rc) {
        const ferry_nn_step_t *last = &pl->step[pl->nlayers - 1];
        if (nn->outputs && (size_t)nn->outputs != last->out_n) {
            snprintf(pl->err, sizeof pl->err,
                     "the last layer gives %zu outputs, the model says %d", last->out_n,
                     nn->outputs);
            rc = FERRY_EINVAL;
        }
    }
    if (rc) {
        refuse(nn, m);
        return rc;
    }
    size_t at = 0;
    for (int k = 0; k < pl->nparams; k++) {
        pl->offset[k] = at;
        at += (ferry_param_count(&pl->params[k]) + 15) / 16 * 16;
    }
    ferry_tensors_layout(pl->buffers, pl->buffer_offset);
    const ferry_nn_step_t *last = &pl->step[pl->nlayers - 1];
    m->outputs = (int)last->out_n;
    m->params = pl->params;
    m->buffers = pl->nbuffers ? pl->buffers : NULL;
    return 0;
}
