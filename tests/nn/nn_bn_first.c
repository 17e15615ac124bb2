/* A classifier whose first layer is a batch normalisation of the sample's
 * features: its running statistics follow the data alone, whatever the
 * parameters do, so that a test can say what they must be. */
#include <ferry/nn.h>

static const ferry_nn_layer_t layers[] = {FERRY_NN_BATCHNORM("bn"), FERRY_NN_DENSE("fc", 0),
                                          FERRY_NN_END()};

FERRY_NN_MODEL(model, .input = {1, 1, 8}, .outputs = 4, .layers = layers);

FERRY_TASK(.name = "bn_first", .model = &model);
