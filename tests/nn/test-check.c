/* `ferry check` on a module of each layer kind, on the bundled models, and
 * on a custom layer whose backward is wrong: the command is run as a user
 * runs it, and its exit status and lines are read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

typedef struct run {
    int status; /* exit status, -1 when it did not exit */
    char out[8192];
} run;

static void check(const char *dir_env, const char *module, const char *args, run *r)
{
    const char *bin = getenv("FERRY_TEST_BIN"), *dir = getenv(dir_env);
    cr_assert(bin && dir, "FERRY_TEST_BIN and %s must be set", dir_env);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' check '%s/%s' %s 2>&1", bin, dir, module, args);
    FILE *p = popen(cmd, "r");
    cr_assert(p, "popen %s", cmd);
    size_t n = fread(r->out, 1, sizeof r->out - 1, p);
    r->out[n] = '\0';
    int st = pclose(p);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void passes(const char *dir_env, const char *module, const char *args)
{
    run r;
    check(dir_env, module, args, &r);
    cr_expect_eq(r.status, 0, "ferry check %s exited %d:\n%s", module, r.status, r.out);
    cr_expect(strstr(r.out, "every gradient within"), "%s", r.out);
}

Test(nn_check, a_convolution_with_stride_and_padding_pooling_and_flatten_pass)
{
    passes("FERRY_TEST_NN", "nn_conv.so", "--batch 3");
}

Test(nn_check, layers_without_tensors_first_and_unnamed_layers_pass)
{
    passes("FERRY_TEST_NN", "nn_pool.so", "--batch 3");
}

Test(nn_check, a_regressor_under_mean_squared_error_passes)
{
    passes("FERRY_TEST_NN", "nn_mse.so", "");
}

Test(nn_check, tanh_sigmoid_leaky_relu_and_gelu_pass)
{
    passes("FERRY_TEST_NN", "nn_act.so", "");
}

Test(nn_check, average_pooling_global_average_pooling_and_dropout_pass)
{
    passes("FERRY_TEST_NN", "nn_avg.so", "--batch 3");
}

Test(nn_check, binary_cross_entropy_with_logits_passes)
{
    passes("FERRY_TEST_NN", "nn_bce.so", "");
}

Test(nn_check, residual_blocks_from_the_batch_around_convolutions_and_dense_layers_pass)
{
    passes("FERRY_TEST_NN", "nn_res.so", "--batch 3");
}

Test(nn_check, layer_normalisation_of_a_map_and_of_a_vector_passes)
{
    passes("FERRY_TEST_NN", "nn_norm.so", "--batch 3");
}

Test(nn_check, a_custom_layer_with_its_backward_right_passes)
{
    passes("FERRY_TEST_NN", "nn_proj.so", "");
}

Test(nn_check, the_bundled_mlp_passes)
{
    passes("FERRY_TEST_TASKS", "mlp.so", "");
}

Test(nn_check, the_bundled_cnn_passes)
{
    passes("FERRY_TEST_TASKS", "cnn.so", "--batch 3 --count 6");
}

Test(nn_check, the_bundled_resnet_passes)
{
    passes("FERRY_TEST_TASKS", "resnet.so", "--batch 2 --count 4");
}

Test(nn_check, the_bundled_linreg_passes)
{
    passes("FERRY_TEST_TASKS", "linreg.so", "");
}

Test(nn_check, a_custom_layer_with_a_wrong_backward_is_caught_by_layer_and_tensor)
{
    run r;
    check("FERRY_TEST_NN", "nn_wrong.so", "", &r);
    cr_expect_eq(r.status, 1, "exited %d:\n%s", r.status, r.out);
    cr_expect(strstr(r.out, "layer proj, tensor proj.weight"), "%s", r.out);
    cr_expect(strstr(r.out, "1 tensor(s) above the tolerance"),
              "only proj.weight is wrong:\n%s", r.out);
}

Test(nn_check, a_list_that_cannot_be_built_is_refused_naming_the_layer)
{
    run r;
    check("FERRY_TEST_NN", "nn_broken.so", "", &r);
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out,
                     "parameter of the layer list (layer 0 (conv): its 9x9 filters do "
                     "not fit the 5x5 input) has an empty shape"),
              "%s", r.out);
}

Test(nn_check, a_module_without_a_model_and_bad_options_are_refused)
{
    run r;
    check("FERRY_TEST_TASKS", "hello.so", "", &r);
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out, "has no model to check"), "%s", r.out);
    check("FERRY_TEST_TASKS", "mlp.so", "--batch 0", &r);
    cr_expect_eq(r.status, 2, "%s", r.out);
    cr_expect(strstr(r.out, "usage: ferry check"), "%s", r.out);
    check("FERRY_TEST_TASKS", "no-such.so", "", &r);
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out, "no-such.so: No such file or directory"), "%s", r.out);
}

/* A module named as in the README, from the directory it is in: a name
 * without a slash, which dlopen alone would look for among the libraries. */
Test(nn_check, a_module_in_the_current_directory_is_found)
{
    const char *bin = getenv("FERRY_TEST_BIN"), *dir = getenv("FERRY_TEST_NN");
    cr_assert(bin && dir);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' check nn_mse.so >/dev/null 2>&1", dir,
             bin);
    int st = system(cmd);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
}
