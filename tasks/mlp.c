/* mlp — a multilayer perceptron: 256 and 128 units with ReLU between the
 * layers and softmax cross-entropy on top, its input and its classes taken
 * from the data (784-256-128-10 on Fashion-MNIST, the default).
 *
 *     ferry submit build/tasks/mlp.so --epochs 5
 *     ferry submit build/tasks/mlp.so --data table.csv
 *
 * A list of layers (<ferry/nn.h>): the library derives the tensors
 * (fc1.weight, fc1.bias, ...), the workspace, the initialisation and the
 * backward pass. The last layer's width is the data's classes. Its step is
 * the eight matrix products of the hand-written model in bench/mlp_hand.c,
 * with the bias and ReLU fused in the same places. */
#include <ferry/nn.h>

/* A row a block reads better than a layer a line. */
/* clang-format off */
static const ferry_nn_layer_t layers[] = {
    FERRY_NN_DENSE("fc1", 256), FERRY_NN_RELU(),
    FERRY_NN_DENSE("fc2", 128), FERRY_NN_RELU(),
    FERRY_NN_DENSE("fc3", 0),   FERRY_NN_END(),
};
/* clang-format on */

FERRY_NN_MODEL(model, .dataset = "fashion-mnist", .layers = layers);

FERRY_TASK(.name = "mlp", .model = &model);
