/* A small CNN with batch normalisation of a map (BatchNorm2d) and of a
 * vector (BatchNorm1d), whose saved file tests/params/bn_test.py loads
 * into the same model in PyTorch with load_state_dict. */
#include <ferry/nn.h>

static const ferry_nn_layer_t layers[] = {
    FERRY_NN_CONV2D("conv", 8, 3, 1, 1), FERRY_NN_BATCHNORM("bn1"), FERRY_NN_RELU(),
    FERRY_NN_MAXPOOL(2, 2),              FERRY_NN_FLATTEN(),
    FERRY_NN_DENSE("fc1", 32),           FERRY_NN_BATCHNORM("bn2"), FERRY_NN_RELU(),
    FERRY_NN_DENSE("fc2", 0),            FERRY_NN_END()};

FERRY_NN_MODEL(model, .dataset = "fashion-mnist", .input = {1, 28, 28}, .outputs = 10,
               .layers = layers);

FERRY_TASK(.name = "bn_cnn", .model = &model);
