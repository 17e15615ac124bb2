/* Every layer kind around a convolution of stride 2 and padding 1: its
 * ReLU in place, a max pooling, flatten, and a dense layer taking the
 * model's outputs. */
#include <ferry/nn.h>

static const ferry_nn_layer_t layers[] = {FERRY_NN_CONV2D("conv", 4, 3, 2, 1),
                                          FERRY_NN_RELU(),
                                          FERRY_NN_MAXPOOL(2, 2),
                                          FERRY_NN_FLATTEN(),
                                          FERRY_NN_DENSE("fc", 0),
                                          FERRY_NN_END()};

FERRY_NN_MODEL(model, .input = {2, 9, 9}, .outputs = 5, .layers = layers);

FERRY_TASK(.name = "conv", .model = &model);
