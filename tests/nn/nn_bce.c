/* Binary cross-entropy with logits: two outputs, each its own logit. */
#include <ferry/nn.h>

static const ferry_nn_layer_t layers[] = {
    FERRY_NN_DENSE("hidden", 8), FERRY_NN_TANH(), FERRY_NN_DENSE("out", 2), FERRY_NN_END()};

FERRY_NN_MODEL(model, .input = {1, 1, 5}, .loss = FERRY_NN_BCE_LOGITS, .layers = layers);

FERRY_TASK(.name = "bce", .model = &model);
