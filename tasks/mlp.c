/* mlp — a multilayer perceptron for Fashion-MNIST: 784-256-128-10 with ReLU
 * between the layers and softmax cross-entropy on top.
 *
 *     ferry submit build/tasks/mlp.so --epochs 5
 *
 * A list of layers (<ferry/nn.h>): the library derives the tensors
 * (fc1.weight, fc1.bias, ...), the workspace, the initialisation and the
 * backward pass. The last layer's width is the model's outputs. Its step is
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

FERRY_NN_MODEL(model, .dataset = "fashion-mnist", .input = {1, 28, 28}, .outputs = 10,
               .layers = layers);

FERRY_TASK(.name = "mlp", .model = &model);
