/* cnn — a small convolutional network for Fashion-MNIST:
 *
 *     conv 5x5 (1 -> 16, pad 2) relu maxpool 2      28x28 -> 14x14
 *     conv 5x5 (16 -> 32, pad 2) relu maxpool 2     14x14 -> 7x7
 *     dense 1568 -> 128 relu, dense 128 -> 10, softmax cross-entropy
 *
 *     ferry submit build/tasks/cnn.so --epochs 5
 *
 * The convolutions and pooling are the device's (cuDNN on a GPU, im2col and
 * a matrix product on the cpu): the model is the same on both. The sizes are
 * the smallest that pass 0.90 test accuracy within a few epochs while an
 * epoch stays affordable on two cpu cores. */
#include <ferry/nn.h>

/* A row a block reads better than a layer a line. */
/* clang-format off */
static const ferry_nn_layer_t layers[] = {
    FERRY_NN_CONV2D("conv1", 16, 5, 1, 2), FERRY_NN_RELU(), FERRY_NN_MAXPOOL(2, 2),
    FERRY_NN_CONV2D("conv2", 32, 5, 1, 2), FERRY_NN_RELU(), FERRY_NN_MAXPOOL(2, 2),
    FERRY_NN_FLATTEN(),
    FERRY_NN_DENSE("fc1", 128),            FERRY_NN_RELU(),
    FERRY_NN_DENSE("fc2", 0),              FERRY_NN_END(),
};
/* clang-format on */

FERRY_NN_MODEL(model, .dataset = "fashion-mnist", .input = {1, 28, 28}, .outputs = 10,
               .layers = layers);

FERRY_TASK(.name = "cnn", .model = &model);
