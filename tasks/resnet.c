/* resnet — a small residual network for Fashion-MNIST: a stem, two basic
 * blocks (He et al.: conv-BN-ReLU-conv-BN, the block's input added, then
 * ReLU), the second after a strided convolution that takes the map from
 * 28 x 28 to 7 x 7, global average pooling and a dense layer on top.
 *
 *     ferry submit build/tasks/resnet.so --epochs 5
 *
 * Batch normalisation keeps running statistics (the model's buffers),
 * saved with --save beside the parameters under PyTorch's names. */
#include <ferry/nn.h>

/* A row a block reads better than a layer a line. */
/* clang-format off */
#define BLOCK(b, ch)                                                                \
    FERRY_NN_CONV2D(b ".conv1", ch, 3, 1, 1), FERRY_NN_BATCHNORM(b ".bn1"),         \
    FERRY_NN_RELU(),                                                                \
    FERRY_NN_CONV2D(b ".conv2", ch, 3, 1, 1), FERRY_NN_BATCHNORM(b ".bn2"),         \
    FERRY_NN_RESIDUAL(5), FERRY_NN_RELU()

static const ferry_nn_layer_t layers[] = {
    FERRY_NN_CONV2D("stem", 16, 3, 1, 1), FERRY_NN_BATCHNORM("stem_bn"), FERRY_NN_RELU(),
    BLOCK("b1", 16),
    FERRY_NN_CONV2D("down", 32, 3, 4, 1), FERRY_NN_BATCHNORM("down_bn"), FERRY_NN_RELU(),
    BLOCK("b2", 32),
    FERRY_NN_GLOBAL_AVGPOOL(), FERRY_NN_FLATTEN(),
    FERRY_NN_DENSE("fc", 0),   FERRY_NN_END(),
};
/* clang-format on */

FERRY_NN_MODEL(model, .dataset = "fashion-mnist", .input = {1, 28, 28}, .outputs = 10,
               .layers = layers);

FERRY_TASK(.name = "resnet", .model = &model);
