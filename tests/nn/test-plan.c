/* What runtime/nn derives from a layer list before anything runs: tensor
 * names and shapes, the model's outputs, the workspace, and the reasons it
 * refuses a list. */
#include <string.h>

#include <criterion/criterion.h>

#include <ferry/nn.h>

static const ferry_nn_layer_t mlp[] = {FERRY_NN_DENSE("fc1", 256), FERRY_NN_RELU(),
                                       FERRY_NN_DENSE("fc2", 128), FERRY_NN_RELU(),
                                       FERRY_NN_DENSE("fc3", 0),   FERRY_NN_END()};

static void expect_param(const ferry_model_t *m, int i, const char *name, int d0, int d1,
                         int d2, int d3)
{
    const ferry_param_t *p = &m->params[i];
    cr_assert(p->name, "tensor %d missing", i);
    cr_expect_str_eq(p->name, name);
    int want[4] = {d0, d1, d2, d3};
    for (int d = 0; d < 4; d++)
        cr_expect_eq(p->shape[d], want[d], "%s shape[%d] = %d, want %d", name, d,
                     p->shape[d], want[d]);
}

Test(nn_plan, dense_layers_get_named_tensors_and_the_last_takes_the_outputs)
{
    static ferry_nn_t nn = {.input = {1, 28, 28}, .outputs = 10, .layers = mlp};
    ferry_model_t m = {0};
    cr_assert_eq(ferry_nn_build(&nn, &m), 0, "%s", nn.plan.err);
    expect_param(&m, 0, "fc1.weight", 784, 256, 0, 0);
    expect_param(&m, 1, "fc1.bias", 256, 0, 0, 0);
    expect_param(&m, 4, "fc3.weight", 128, 10, 0, 0);
    expect_param(&m, 5, "fc3.bias", 10, 0, 0, 0);
    cr_expect_null(m.params[6].name);
    cr_expect_eq(m.kind, FERRY_MODEL_CLASSIFIER);
    cr_expect_eq(m.outputs, 10);
    cr_expect_eq(m.input[2], 28);
    /* The layout is the runtime's: every tensor on a 16-float boundary. */
    size_t off[6];
    ferry_model_layout(&m, off);
    for (int i = 0; i < 6; i++)
        cr_expect_eq(off[i], nn.plan.offset[i]);
    /* Fused ReLUs: the dense layers write them, and they share its buffer. */
    cr_expect(nn.plan.step[0].fused && nn.plan.step[2].fused && !nn.plan.step[4].fused);
    cr_expect_eq(nn.plan.step[1].buf, nn.plan.step[0].buf);
    cr_expect(!nn.plan.step[0].need_dx && nn.plan.step[2].need_dx);
}

Test(nn_plan, unnamed_layers_are_called_by_their_index_and_outputs_come_from_the_list)
{
    static const ferry_nn_layer_t layers[] = {FERRY_NN_CONV2D(NULL, 8, 3, 2, 1),
                                              FERRY_NN_RELU(),
                                              FERRY_NN_MAXPOOL(2, 2),
                                              FERRY_NN_FLATTEN(),
                                              FERRY_NN_DENSE(NULL, 7),
                                              FERRY_NN_END()};
    static ferry_nn_t nn = {.input = {3, 28, 28}, .loss = FERRY_NN_MSE, .layers = layers};
    ferry_model_t m = {0};
    cr_assert_eq(ferry_nn_build(&nn, &m), 0, "%s", nn.plan.err);
    /* 28 + 2 - 3 = 27, / 2 + 1 = 14; pooled 7: 8 x 7 x 7 = 392 inputs. */
    expect_param(&m, 0, "0.weight", 8, 3, 3, 3);
    expect_param(&m, 1, "0.bias", 8, 0, 0, 0);
    expect_param(&m, 2, "4.weight", 392, 7, 0, 0);
    cr_expect_eq(nn.plan.step[0].out[1], 14);
    cr_expect_eq(nn.plan.step[2].out[2], 7);
    cr_expect_eq(m.outputs, 7);
    cr_expect_eq(m.kind, FERRY_MODEL_REGRESSOR);
}

Test(nn_plan, the_workspace_holds_each_activation_and_two_gradients)
{
    static ferry_nn_t nn = {.input = {1, 28, 28}, .outputs = 10, .layers = mlp};
    ferry_model_t m = {0};
    cr_assert_eq(ferry_nn_build(&nn, &m), 0);
    /* fc1 (+relu), fc2 (+relu), fc3: three buffers, and two gradients of
     * the widest output (the data's needs none); each on a 16-float
     * boundary. */
    cr_expect_eq(nn.plan.nbufs, 3);
    cr_expect_eq(ferry_nn_workspace(&nn, 128),
                 (size_t)128 * (256 + 128 + 10) + 2 * (size_t)128 * 256);
    cr_expect_eq(ferry_nn_workspace(&nn, 1), (size_t)256 + 128 + 16 + 2 * 256);
}

static void refused(ferry_nn_t *nn, const char *why)
{
    ferry_model_t m = {0};
    cr_expect_eq(ferry_nn_build(nn, &m), FERRY_EINVAL, "accepted; wanted: %s", why);
    /* The runtime refuses a tensor of no shape, naming it: the reason. */
    cr_assert(m.params && m.params[0].name);
    cr_expect_eq(m.params[0].shape[0], 0);
    cr_expect_null(m.params[1].name);
    cr_expect(strstr(m.params[0].name, why), "'%s'", m.params[0].name);
    cr_expect(strstr(nn->plan.err, why), "'%s' does not say '%s'", nn->plan.err, why);
}

Test(nn_plan, lists_that_cannot_be_built_are_refused_naming_the_layer)
{
    static const ferry_nn_layer_t big_filter[] = {FERRY_NN_CONV2D("conv", 4, 9, 1, 0),
                                                  FERRY_NN_END()};
    static ferry_nn_t a = {.input = {1, 5, 5}, .layers = big_filter};
    refused(&a, "layer 0 (conv): its 9x9 filters do not fit the 5x5 input");


    static const ferry_nn_layer_t five[] = {FERRY_NN_DENSE("fc", 5), FERRY_NN_END()};
    static ferry_nn_t c = {.input = {1, 1, 4}, .outputs = 3, .layers = five};
    refused(&c, "the last layer gives 5 outputs, the model says 3");

    static ferry_nn_t d = {.input = {1, 0, 4}, .outputs = 3, .layers = five};
    refused(&d, "input 1x0x4 is not positive");

    static const ferry_nn_layer_t none[] = {FERRY_NN_RELU(), FERRY_NN_END()};
    static ferry_nn_t e = {.input = {1, 1, 4}, .layers = none};
    refused(&e, "no parameter tensors");

    static const ferry_nn_layer_t window[] = {FERRY_NN_MAXPOOL(3, 1),
                                              FERRY_NN_DENSE("f", 2), FERRY_NN_END()};
    static ferry_nn_t f = {.input = {1, 2, 2}, .layers = window};
    refused(&f, "layer 0: its 3x3 window does not fit the 2x2 input");

    static const ferry_nn_layer_t odd[] = {{.kind = 99}, FERRY_NN_END()};
    static ferry_nn_t g = {.input = {1, 2, 2}, .layers = odd};
    refused(&g, "unknown layer kind 99");
}

Test(nn_plan, a_skip_connection_must_add_what_fits_and_keeps_its_source_intact)
{
    static const ferry_nn_layer_t widen[] = {FERRY_NN_DENSE("a", 4),
                                             FERRY_NN_DENSE("b", 5), FERRY_NN_RESIDUAL(1),
                                             FERRY_NN_END()};
    static ferry_nn_t a = {.input = {1, 1, 3}, .layers = widen};
    refused(&a, "layer 2: adds a 1x1x4 input to a 1x1x5 output");

    static const ferry_nn_layer_t far[] = {FERRY_NN_DENSE("a", 4), FERRY_NN_RESIDUAL(2),
                                           FERRY_NN_END()};
    static ferry_nn_t b = {.input = {1, 1, 4}, .layers = far};
    refused(&b, "layer 1: a skip over 2 layers, 1 before it");

    /* The ReLU after "a" would overwrite what the skip adds: not in place. */
    static const ferry_nn_layer_t block[] = {FERRY_NN_DENSE("a", 4), FERRY_NN_RELU(),
                                             FERRY_NN_DENSE("b", 4), FERRY_NN_RELU(),
                                             FERRY_NN_DENSE("c", 4), FERRY_NN_RESIDUAL(3),
                                             FERRY_NN_END()};
    static ferry_nn_t c = {.input = {1, 1, 4}, .layers = block};
    ferry_model_t m = {0};
    cr_assert_eq(ferry_nn_build(&c, &m), 0, "%s", c.plan.err);
    cr_expect_eq(c.plan.step[1].buf, c.plan.step[0].buf, "a's ReLU is the skip's source");
    cr_expect_eq(c.plan.step[5].skip, 1);
    cr_expect_eq(c.plan.step[3].buf, c.plan.step[2].buf, "b's ReLU works in place");
    cr_expect(c.plan.step[0].fused && c.plan.step[2].fused);
}

Test(nn_plan, a_tensor_name_too_long_and_a_custom_layer_without_passes_are_refused)
{
    static const ferry_nn_layer_t longname[] = {
        FERRY_NN_DENSE("a_layer_name_much_too_long_to_take_a_suffix_after", 2),
        FERRY_NN_END()};
    static ferry_nn_t a = {.input = {1, 1, 4}, .layers = longname};
    refused(&a, "tensor name longer than 47 characters");

    static const ferry_nn_custom_t empty = {0};
    static const ferry_nn_layer_t custom[] = {FERRY_NN_CUSTOM("mine", &empty),
                                              FERRY_NN_END()};
    static ferry_nn_t b = {.input = {1, 1, 4}, .layers = custom};
    refused(&b, "layer 0 (mine): a custom layer needs shape, forward and backward");
}

Test(nn_plan, a_list_that_leaves_its_shape_to_the_data_waits_for_it)
{
    /* Width and outputs left open: no plan, and no complaint, until the
     * data's shape comes; then the one it gives, or a refusal. */
    static ferry_nn_t nn = {.layers = mlp};
    ferry_model_t m = {FERRY_MODEL_HEADER};
    cr_assert_eq(ferry_nn_build(&nn, &m), 0);
    cr_expect_eq(m.input[0], 0);
    cr_expect_eq(m.outputs, 0);
    cr_expect(strstr(m.params[0].name, "its shape comes from the data"), "%s",
              m.params[0].name);
    cr_assert_eq(ferry_nn_reshape(&nn, &m, (const int[]){1, 1, 2}, 0), FERRY_EINVAL);
    cr_expect(strstr(nn.plan.err, "layer 4 (fc3): width 0 and the model has no outputs"),
              "%s", nn.plan.err);
    cr_assert_eq(ferry_nn_reshape(&nn, &m, (const int[]){1, 1, 2}, 3), 0, "%s",
                 nn.plan.err);
    cr_expect_eq(m.input[2], 2);
    cr_expect_eq(m.outputs, 3);
    cr_expect_eq(m.params[0].shape[0], 2, "fc1.weight is [in][out]");
    cr_expect_eq(m.params[5].shape[0], 3, "fc3.bias has a class each");
    cr_assert_eq(ferry_nn_reshape(&nn, &m, (const int[]){3, 8, 8}, 10), 0);
    cr_expect_eq(m.params[0].shape[0], 192, "another data set, another shape");
}
