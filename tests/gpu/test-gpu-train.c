/* Training on a GPU through the real `ferry` command: the accuracy targets
 * of the MLP and the CNN after 5 epochs at batch 128 in fp32, tf32 and
 * bf16, and the same seed giving bit-identical parameters on one GPU (with
 * the data set held on the device and batches gathered there). With no GPU
 * visible, each GPU test says why and skips; tests/gpu/run.sh runs them on a
 * GPU machine. The cpu's refusal of tf32 and bf16 runs everywhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"

TestSuite(gpu_train, .init = e2e_setup, .fini = e2e_teardown, .timeout = 900);

/* `ferry start 1 --device cuda`, or skip with ferry's own reason when that
 * reason is that no GPU is there; any other failure fails the test. */
static void start_on_gpu(void)
{
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "1", "--base-port", "0", "--device", "cuda", NULL);
    if (r.status != 0) {
        cr_assert(r.status == 1 && e2e_no_gpu(r.err),
                  "ferry start --device cuda failed (status %d), not for want of a GPU: %s",
                  r.status, r.err);
        char why[512];
        snprintf(why, sizeof why, "no GPU: %.400s", r.err);
        e2e_run_fini(&r);
        fprintf(stderr, "skipped: %s\n", why);
        cr_skip_test("%s", why);
    }
    e2e_run_fini(&r);
}

/* A number or a string field of submit's --json object, as text. */
static void field(const char *json, const char *name, char *out, size_t len)
{
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *at = strstr(json, key);
    cr_assert_not_null(at, "no %s in %s", name, json);
    at += strlen(key);
    size_t n = strcspn(at, ",}");
    n = n < len - 1 ? n : len - 1;
    memcpy(out, at, n);
    out[n] = '\0';
}

/* Trains `task` with the extra options (NULL-terminated, at most 4) and
 * returns submit's --json object (free it). FERRY_TEST_DATA, when set, is
 * where the worker finds Fashion-MNIST (run.sh's bundles carry it). */
static char *train(const char *task, const char *epochs, const char *const *extra)
{
    const char *a[7] = {NULL};
    int n = 0;
    const char *data = getenv("FERRY_TEST_DATA");
    if (data && data[0]) {
        a[n++] = "--data";
        a[n++] = data;
    }
    for (int i = 0; extra && extra[i] && i < 4; i++)
        a[n++] = extra[i];
    e2e_run r;
    e2e_ferry(&r, 600000, "submit", e2e_task(task), "--epochs", epochs, "--json", a[0],
              a[1], a[2], a[3], a[4], a[5], a[6], NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "\"device\":\"cuda"), "not trained on a GPU: %s", r.out);
    char *out = strdup(r.out);
    cr_log_info("%s", r.out);
    fprintf(stderr, "%s", r.out);
    e2e_run_fini(&r);
    return out;
}

static void reaches(const char *task, double want, const char *const *extra)
{
    char *json = train(task, "5", extra);
    char acc[32];
    field(json, "test_accuracy", acc, sizeof acc);
    cr_assert(strtod(acc, NULL) >= want, "%s: test accuracy %s after 5 epochs, want %.2f",
              task, acc, want);
    free(json);
}

Test(gpu_train, the_mlp_reaches_088_and_the_cnn_090_in_5_epochs)
{
    start_on_gpu();
    reaches("mlp", 0.88, NULL);
    reaches("cnn", 0.90, NULL);
}

Test(gpu_train, with_tf32_the_mlp_reaches_088_and_the_cnn_090_in_5_epochs)
{
    start_on_gpu();
    const char *tf32[] = {"--precision", "tf32", NULL};
    reaches("mlp", 0.88, tf32);
    reaches("cnn", 0.90, tf32);
}

Test(gpu_train, with_bf16_the_mlp_reaches_088_and_the_cnn_090_in_5_epochs)
{
    start_on_gpu();
    const char *bf16[] = {"--precision", "bf16", NULL};
    reaches("mlp", 0.88, bf16);
    reaches("cnn", 0.90, bf16);
}

Test(gpu_train, the_same_seed_gives_bit_identical_parameters)
{
    start_on_gpu();
    const char *seed[] = {"--seed", "7", NULL};
    for (int m = 0; m < 2; m++) {
        const char *task = m ? "cnn" : "mlp";
        char *a = train(task, "1", seed), *b = train(task, "1", seed);
        char ha[80], hb[80];
        field(a, "params_sha256", ha, sizeof ha);
        field(b, "params_sha256", hb, sizeof hb);
        cr_assert_str_eq(ha, hb, "%s: two runs with seed 7 differ", task);
        free(a);
        free(b);
    }
}

/* Runs everywhere: the cpu takes fp32 only, and says so. */
Test(gpu_train, a_cpu_worker_refuses_tf32_and_bf16_with_a_clear_error)
{
    e2e_start(1);
    const char *precisions[] = {"tf32", "bf16"};
    for (int i = 0; i < 2; i++) {
        e2e_run r;
        e2e_ferry(&r, 60000, "submit", e2e_task("mlp"), "--epochs", "1", "--precision",
                  precisions[i], NULL);
        cr_assert_neq(r.status, 0, "--precision %s trained on the cpu:\n%s",
                      precisions[i], r.out);
        cr_assert(e2e_has(r.err, "float32 only") && e2e_has(r.err, precisions[i]),
                  "not a clear error: %s", r.err);
        e2e_run_fini(&r);
    }
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("mlp"), "--precision", "fp16", NULL);
    cr_assert_eq(r.status, 2, "--precision fp16: exit %d\n%s", r.status, r.err);
    cr_assert(e2e_has(r.err, "fp32, tf32 or bf16"), "%s", r.err);
    e2e_run_fini(&r);
}
