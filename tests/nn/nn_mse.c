/* A regressor: two dense layers under mean squared error. */
#include <ferry/nn.h>

static const ferry_nn_layer_t layers[] = {FERRY_NN_DENSE("hidden", 8), FERRY_NN_RELU(),
                                          FERRY_NN_DENSE("out", 3), FERRY_NN_END()};

FERRY_NN_MODEL(model, .input = {1, 1, 5}, .loss = FERRY_NN_MSE, .layers = layers);

FERRY_TASK(.name = "mse", .model = &model);
