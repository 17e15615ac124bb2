/* A list that cannot be built: filters larger than their input. */
#include <ferry/nn.h>

static const ferry_nn_layer_t layers[] = {
    FERRY_NN_CONV2D("conv", 4, 9, 1, 0), FERRY_NN_FLATTEN(), FERRY_NN_DENSE("fc", 2),
    FERRY_NN_END()};

FERRY_NN_MODEL(model, .input = {1, 5, 5}, .layers = layers);

FERRY_TASK(.name = "broken", .model = &model);
