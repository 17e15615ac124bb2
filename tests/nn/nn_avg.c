/* Average pooling, global average pooling and dropout: a small convolutional
 * net of the ResNet kind's tail. */
#include <ferry/nn.h>

static const ferry_nn_layer_t layers[] = {
    FERRY_NN_CONV2D("conv1", 4, 3, 1, 1), FERRY_NN_GELU(), FERRY_NN_AVGPOOL(2, 2),
    FERRY_NN_CONV2D("conv2", 5, 3, 1, 1), FERRY_NN_RELU(), FERRY_NN_GLOBAL_AVGPOOL(),
    FERRY_NN_FLATTEN(), FERRY_NN_DROPOUT(0.3f), FERRY_NN_DENSE("fc", 0), FERRY_NN_END()};

FERRY_NN_MODEL(model, .input = {2, 8, 8}, .outputs = 3, .layers = layers);

FERRY_TASK(.name = "avg", .model = &model);
