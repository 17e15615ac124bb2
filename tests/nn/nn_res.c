/* Residual blocks: a skip around a convolution pair whose ReLU would
 * otherwise work in place on the skip's source, a skip from the batch
 * itself, and one around dense layers. */
#include <ferry/nn.h>

static const ferry_nn_layer_t layers[] = {
    FERRY_NN_CONV2D(NULL, 3, 3, 1, 1),   FERRY_NN_RESIDUAL(1), /* from the batch */
    FERRY_NN_CONV2D("stem", 4, 3, 1, 1), FERRY_NN_RELU(),
    FERRY_NN_CONV2D("a", 4, 3, 1, 1),    FERRY_NN_RELU(),
    FERRY_NN_CONV2D("b", 4, 3, 1, 1),    FERRY_NN_RESIDUAL(3), FERRY_NN_RELU(),
    FERRY_NN_GLOBAL_AVGPOOL(),           FERRY_NN_FLATTEN(),
    FERRY_NN_DENSE("fc1", 4),            FERRY_NN_RELU(),
    FERRY_NN_DENSE("fc2", 4),            FERRY_NN_RESIDUAL(2),
    FERRY_NN_DENSE("out", 0),            FERRY_NN_END()};

FERRY_NN_MODEL(model, .input = {3, 6, 6}, .outputs = 3, .layers = layers);

FERRY_TASK(.name = "res", .model = &model);
