/* Layers without tensors before the first with them (a max pooling, a
 * ReLU that cannot work in place behind it), two convolutions in a row and
 * unnamed layers, called by their index. */
#include <ferry/nn.h>

static const ferry_nn_layer_t layers[] = {FERRY_NN_MAXPOOL(2, 1),
                                          FERRY_NN_RELU(),
                                          FERRY_NN_CONV2D(NULL, 3, 3, 1, 0),
                                          FERRY_NN_CONV2D(NULL, 2, 1, 1, 0),
                                          FERRY_NN_MAXPOOL(2, 2),
                                          FERRY_NN_RELU(),
                                          FERRY_NN_DENSE(NULL, 3),
                                          FERRY_NN_END()};

FERRY_NN_MODEL(model, .input = {1, 8, 8}, .layers = layers);

FERRY_TASK(.name = "pool", .model = &model);
