/* Every activation between dense layers: tanh, sigmoid, leaky ReLU, GELU. */
#include <ferry/nn.h>

static const ferry_nn_layer_t layers[] = {
    FERRY_NN_DENSE("fc1", 9), FERRY_NN_TANH(),
    FERRY_NN_DENSE("fc2", 8), FERRY_NN_SIGMOID(),
    FERRY_NN_DENSE("fc3", 7), FERRY_NN_LEAKY_RELU(0.1f),
    FERRY_NN_DENSE("fc4", 6), FERRY_NN_GELU(),
    FERRY_NN_DENSE("out", 0), FERRY_NN_END()};

FERRY_NN_MODEL(model, .input = {1, 1, 10}, .outputs = 4, .layers = layers);

FERRY_TASK(.name = "act", .model = &model);
