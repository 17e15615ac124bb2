/* A custom layer, on the device's operations: a projection without bias,
 * y = x W, W [in][units]. Built twice: as nn_proj.so with its backward
 * right, and with -DWRONG_BACKWARD as nn_wrong.so, whose weight gradient is
 * half what it should be, for `ferry check` to catch. */
#include <ferry/nn.h>

#ifndef WRONG_BACKWARD
#define WRONG_BACKWARD 0
#endif

enum { UNITS = 6 };

static int proj_shape(const int in[3], int out[3], ferry_param_t *params)
{
    out[0] = out[1] = 1;
    out[2] = UNITS;
    params[0] = (ferry_param_t){"weight", {in[0] * in[1] * in[2], UNITS}};
    return 1;
}

static int proj_init(ferry_model_ctx_t *mc, const int in[3], float *const *p)
{
    mc->ops->uniform(mc, p[0], (size_t)in[0] * in[1] * in[2] * UNITS, 0.3f);
    return 0;
}

static int proj_forward(const ferry_nn_io_t *io)
{
    int in = io->in[0] * io->in[1] * io->in[2];
    io->dev->ops->gemm(io->dev, false, false, io->n, UNITS, in, 1.0f, io->x, io->p[0],
                       0.0f, io->out_y);
    return 0;
}

static int proj_backward(const ferry_nn_io_t *io)
{
    int in = io->in[0] * io->in[1] * io->in[2];
    float alpha = WRONG_BACKWARD ? 0.5f : 1.0f;
    io->dev->ops->gemm(io->dev, true, false, in, UNITS, io->n, alpha, io->x, io->dy, 0.0f,
                       io->dp[0]);
    if (io->dx)
        io->dev->ops->gemm(io->dev, false, true, io->n, in, UNITS, 1.0f, io->dy, io->p[0],
                           0.0f, io->dx);
    return 0;
}

static const ferry_nn_custom_t proj = {.shape = proj_shape,
                                       .init = proj_init,
                                       .forward = proj_forward,
                                       .backward = proj_backward};

static const ferry_nn_layer_t layers[] = {FERRY_NN_DENSE("fc1", 12),      FERRY_NN_RELU(),
                                          FERRY_NN_CUSTOM("proj", &proj), FERRY_NN_RELU(),
                                          FERRY_NN_DENSE("out", 0),       FERRY_NN_END()};

FERRY_NN_MODEL(model, .input = {1, 1, 10}, .outputs = 4, .layers = layers);

FERRY_TASK(.name = "proj", .model = &model);
