/* resnet — a small residual network for Fashion-MNIST: a stem, two
 * residual blocks (the second after a strided convolution halves the map
 * twice), global average pooling and a dense layer on top.
 *
 *     ferry submit build/tasks/resnet.so --epochs 5
 *
 * The blocks have no batch normalisation: the layer list does not have it
 * yet. Each block is conv-ReLU-conv with its input added to its output
 * (FERRY_NN_RESIDUAL) before the last ReLU, as in He et al.'s basic block. */
#include <ferry/nn.h>

/* A row a block reads better than a layer a line. */
/* clang-format off */
static const ferry_nn_layer_t layers[] = {
    FERRY_NN_CONV2D("stem", 16, 3, 1, 1),     FERRY_NN_RELU(),
    FERRY_NN_CONV2D("b1.conv1", 16, 3, 1, 1), FERRY_NN_RELU(),
    FERRY_NN_CONV2D("b1.conv2", 16, 3, 1, 1), FERRY_NN_RESIDUAL(3), FERRY_NN_RELU(),
    FERRY_NN_CONV2D("down", 32, 3, 4, 1),     FERRY_NN_RELU(), /* 28 -> 7 */
    FERRY_NN_CONV2D("b2.conv1", 32, 3, 1, 1), FERRY_NN_RELU(),
    FERRY_NN_CONV2D("b2.conv2", 32, 3, 1, 1), FERRY_NN_RESIDUAL(3), FERRY_NN_RELU(),
    FERRY_NN_GLOBAL_AVGPOOL(),                FERRY_NN_FLATTEN(),
    FERRY_NN_DENSE("fc", 0),                  FERRY_NN_END(),
};
/* clang-format on */

FERRY_NN_MODEL(model, .dataset = "fashion-mnist", .input = {1, 28, 28}, .outputs = 10,
               .layers = layers);

FERRY_TASK(.name = "resnet", .model = &model);
