/* A layer-list model as a user writes one: a file of fifteen lines built
 * with `cc` and what pkg-config says of ferry alone (this build's
 * ferry-uninstalled.pc: the public headers and libferry-nn.a), then
 * checked with `ferry check`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

static const char model_c[] =
    "/* net.c */\n"
    "#include <ferry/nn.h>\n"
    "\n"
    "static const ferry_nn_layer_t layers[] = {\n"
    "    FERRY_NN_CONV2D(\"conv1\", 4, 3, 1, 1), FERRY_NN_RELU(), FERRY_NN_MAXPOOL(2, "
    "2),\n"
    "    FERRY_NN_CONV2D(\"conv2\", 8, 3, 1, 1), FERRY_NN_RELU(), "
    "FERRY_NN_GLOBAL_AVGPOOL(),\n"
    "    FERRY_NN_FLATTEN(),\n"
    "    FERRY_NN_DENSE(\"fc1\", 16), FERRY_NN_GELU(), FERRY_NN_DROPOUT(0.1f),\n"
    "    FERRY_NN_DENSE(\"fc2\", 0),\n"
    "    FERRY_NN_END()};\n"
    "\n"
    "FERRY_NN_MODEL(model, .dataset = \"fashion-mnist\", .input = {1, 28, 28}, .outputs "
    "= 10,\n"
    "               .layers = layers);\n"
    "FERRY_TASK(.name = \"net\", .model = &model);\n";

static int sh(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(nn_sdk, a_fifteen_line_model_builds_with_pkg_config_and_passes_its_check)
{
    const char *pc = getenv("FERRY_TEST_PKGCONFIG"), *bin = getenv("FERRY_TEST_BIN");
    cr_assert(pc && bin, "FERRY_TEST_PKGCONFIG and FERRY_TEST_BIN must be set");
    char dir[] = "/tmp/ferry-nn-sdk-XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[512], cmd[4096];
    snprintf(path, sizeof path, "%s/net.c", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(model_c, f);
    fclose(f);
    int lines = 0;
    for (const char *p = model_c; *p; p++)
        lines += *p == '\n';
    cr_expect_leq(lines, 15, "the model is %d lines", lines);
    snprintf(
        cmd, sizeof cmd,
        "cd '%s' && PKG_CONFIG_PATH='%s' cc -Wall -Wextra -Werror -shared -fPIC "
        "-fvisibility=hidden -o net.so net.c $(PKG_CONFIG_PATH='%s' pkg-config --cflags "
        "--libs ferry) && '%s' check net.so --batch 2 --count 4 > check.txt 2>&1",
        dir, pc, pc, bin);
    int rc = sh(cmd);
    snprintf(cmd, sizeof cmd, "%s cat '%s/check.txt' >&2; rm -rf '%s'", rc ? "" : ": ||",
             dir, dir);
    sh(cmd);
    cr_expect_eq(rc, 0, "building or checking the model failed (its output above)");
}
