/* A batch normalisation alone, its output the model's (a regressor under
 * mean squared error), so that a test reads the layer itself: of a map's
 * 3 channels of 2 x 2 (BatchNorm2d), or with VECTOR of 5 features
 * (BatchNorm1d). First in the list, nothing before it wants its dx. */
#include <ferry/nn.h>

static const ferry_nn_layer_t layers[] = {FERRY_NN_BATCHNORM("bn"), FERRY_NN_FLATTEN(),
                                          FERRY_NN_END()};

#ifdef VECTOR
FERRY_NN_MODEL(model, .input = {1, 1, 5}, .outputs = 5, .loss = FERRY_NN_MSE,
               .layers = layers);
#else
FERRY_NN_MODEL(model, .input = {3, 2, 2}, .outputs = 12, .loss = FERRY_NN_MSE,
               .layers = layers);
#endif

FERRY_TASK(.name = "bn_only", .model = &model);
