/* Training through the CLI: `ferry submit MODEL.so` trains on worker 0,
 * prints a line an epoch and, with --json, one object; bad options and a
 * device that is not there are clear errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"
#include "e2e_train.h"
#include "tcommon.h"

TestSuite(e2e_train, .init = e2e_setup, .fini = e2e_teardown, .timeout = 400);

/* The number after "\"key\":" in a JSON text; NAN if absent. */
static double json_number(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *at = strstr(json, pat);
    return at ? strtod(at + strlen(pat), NULL) : NAN;
}

/* The string after "\"key\":\"" (static buffer). */
static const char *json_string(const char *json, const char *key)
{
    static char buf[256];
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *at = strstr(json, pat);
    if (!at)
        return "";
    at += strlen(pat);
    size_t n = strcspn(at, "\"");
    snprintf(buf, sizeof buf, "%.*s", (int)n, at);
    return buf;
}

Test(e2e_train, submit_trains_the_mlp_on_fashion_mnist_and_reports_json)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, 300000, "submit", e2e_task("mlp"), "--epochs", "1", "--json", NULL);
    E2E_EXPECT(&r, 0);
    /* stdout is the one JSON object; the progress lines went to stderr. */
    cr_assert(r.out[0] == '{' && strchr(r.out, '\n') == r.out + strlen(r.out) - 1,
              "stdout is not one JSON line:\n%s", r.out);
    cr_assert(e2e_has(r.err, "epoch 1/1") && e2e_has(r.err, "test_accuracy"), "%s",
              r.err);
    double acc = json_number(r.out, "test_accuracy");
    cr_assert(acc > 0.80 && acc <= 1.0, "test accuracy %g after one epoch:\n%s", acc,
              r.out);
    cr_assert_eq(json_number(r.out, "epochs"), 1);
    cr_assert(json_number(r.out, "samples_per_s") > 0);
    cr_assert(json_number(r.out, "wall_s") > 0);
    cr_assert(e2e_has(json_string(r.out, "device"), "cpu"), "%s", r.out);
    cr_assert_eq(strlen(json_string(r.out, "params_sha256")), 64, "%s", r.out);
    e2e_run_fini(&r);
}

Test(e2e_train, the_same_seed_trains_the_same_model_twice)
{
    e2e_start(1);
    char sha[2][256];
    for (int i = 0; i < 2; i++) {
        e2e_run r;
        e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", "3", "--seed",
                  "9", "--json", NULL);
        E2E_EXPECT(&r, 0);
        snprintf(sha[i], sizeof sha[i], "%s", json_string(r.out, "params_sha256"));
        cr_assert(json_number(r.out, "test_loss") < 0.05, "%s", r.out);
        e2e_run_fini(&r);
    }
    cr_assert_str_eq(sha[0], sha[1]);
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", "3", "--seed", "10",
              "--json", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert_str_neq(json_string(r.out, "params_sha256"), sha[0]);
    e2e_run_fini(&r);
}

Test(e2e_train, progress_lines_name_each_epoch_and_the_device)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", "2", "--optimizer",
              "adam", "--lr", "0.05", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "training linreg on worker 0") &&
                  e2e_has(r.out, "adam lr 0.05"),
              "%s", r.out);
    cr_assert(e2e_has(r.out, "epoch 1/2") && e2e_has(r.out, "epoch 2/2") &&
                  e2e_has(r.out, "samples/s") && e2e_has(r.out, "done:"),
              "%s", r.out);
    e2e_run_fini(&r);
}

Test(e2e_train, bad_training_options_are_usage_errors)
{
    e2e_start(1);
    static const char *const bad[][3] = {
        {"--epochs", "0", "--epochs: expected a number of epochs"},
        {"--batch", "x", "--batch: expected a batch size"},
        {"--optimizer", "lbfgs", "expected sgd or adam"},
        {"--lr", "-1", "expected a positive learning rate"},
        {"--momentum", "1.5", "a momentum in [0, 1)"},
    };
    e2e_expect_option_errors(bad, sizeof bad / sizeof bad[0]);
    /* Training options on a module that has its own driver. */
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("hello"), "--epochs", "2", NULL);
    E2E_EXPECT(&r, 2);
    cr_assert(e2e_has(r.err, "has its own driver"), "%s", r.err);
    e2e_run_fini(&r);
}

Test(e2e_train, a_missing_dataset_fails_with_the_worker_named_and_the_fix)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, 60000, "submit", e2e_task("mlp"), "--epochs", "1", "--data",
              "/nonexistent/fmnist", NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "worker 0") && e2e_has(r.err, "/nonexistent/fmnist"), "%s",
              r.err);
    /* The fix: what to install. */
    cr_assert(e2e_has(r.err, "apt-get install dataset-fashion-mnist"), "%s", r.err);
    e2e_run_fini(&r);
    /* The worker is fine afterwards: the next run trains. */
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", "1", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}

Test(e2e_train, asking_for_a_gpu_where_none_is_visible_is_a_clear_error)
{
    if (access("/dev/nvidiactl", F_OK) == 0)
        cr_skip_test("a GPU driver is present: --device cuda may work here");
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "1", "--base-port", "0", "--device", "cuda", NULL);
    cr_assert_neq(r.status, 0, "started with --device cuda and no GPU:\n%s", r.out);
    cr_assert(r.status < 128, "crashed: exit %d\n%s", r.status, r.err);
    cr_assert(e2e_has(r.err, "cuda"), "%s", r.err);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "start", "1", "--device", "tpu", NULL);
    E2E_EXPECT(&r, 2);
    cr_assert(e2e_has(r.err, "--device: expected cpu, cuda, cuda:N or auto"), "%s",
              r.err);
    e2e_run_fini(&r);
}
