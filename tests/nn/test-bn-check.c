/* `ferry check` on batch normalisation: of a map (BatchNorm2d) and of a
 * vector (BatchNorm1d), alone and between layers, in training mode (the
 * batch's statistics), while each call moves the running ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

/* `ferry check` on the module: its exit status, its output in `out`. */
static int check(const char *module, const char *args, char *out, size_t len)
{
    const char *bin = getenv("FERRY_TEST_BIN"), *dir = getenv("FERRY_TEST_NN");
    cr_assert(bin && dir, "FERRY_TEST_BIN and FERRY_TEST_NN must be set");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' check '%s/%s' %s 2>&1", bin, dir, module, args);
    FILE *p = popen(cmd, "r");
    cr_assert(p, "popen %s", cmd);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void passes(const char *module, const char *args)
{
    char out[8192];
    int st = check(module, args, out, sizeof out);
    cr_expect_eq(st, 0, "ferry check %s: status %d\n%s", module, st, out);
    cr_expect(strstr(out, "every gradient within"), "%s", out);
    cr_expect(strstr(out, ".weight") && strstr(out, ".bias"), "%s", out);
}

Test(nn_bn_check, batch_normalisation_of_a_map_and_of_a_vector_between_layers_passes)
{
    passes("nn_bn.so", "--batch 3");
}

Test(nn_bn_check, batchnorm2d_alone_passes)
{
    passes("nn_bn2d.so", "--batch 3");
}

Test(nn_bn_check, batchnorm1d_alone_passes)
{
    passes("nn_bn1d.so", "--batch 4");
}

Test(nn_bn_check, a_buffer_table_naming_a_tensor_outside_the_module_is_refused)
{
    char out[8192];
    int st = check("nn_badbuf.so", "", out, sizeof out);
    cr_expect_eq(st, 1, "status %d\n%s", st, out);
    cr_expect(strstr(out, "the model's buffer 0: its name is not a string in the module"),
              "%s", out);
}
