/* Batch normalisation of a convolution's channels (BatchNorm2d) and of a
 * dense layer's features (BatchNorm1d), each before an activation. */
#include <ferry/nn.h>

static const ferry_nn_layer_t layers[] = {
    FERRY_NN_CONV2D("conv", 3, 3, 1, 1), FERRY_NN_BATCHNORM("bn1"), FERRY_NN_RELU(),
    FERRY_NN_FLATTEN(),                  FERRY_NN_DENSE("fc", 8),   FERRY_NN_BATCHNORM("bn2"),
    FERRY_NN_TANH(),                     FERRY_NN_DENSE("out", 0),  FERRY_NN_END()};

FERRY_NN_MODEL(model, .input = {2, 5, 5}, .outputs = 3, .layers = layers);

FERRY_TASK(.name = "bn", .model = &model);
