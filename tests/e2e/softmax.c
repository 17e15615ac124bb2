/* softmax — a task for tests/e2e: softmax regression, one dense layer
 * whose input and classes come from the data. The cheapest model that
 * trains on a large set: its steps leave the run's time to the data. */
#include <ferry/nn.h>

/* clang-format off */
static const ferry_nn_layer_t layers[] = {
    FERRY_NN_DENSE("fc", 0), FERRY_NN_END(),
};
/* clang-format on */

FERRY_NN_MODEL(model, .dataset = "fashion-mnist", .layers = layers);

FERRY_TASK(.name = "softmax", .model = &model);
