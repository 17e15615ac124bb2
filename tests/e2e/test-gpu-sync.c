/* Sync mode on a GPU: two workers sharing one GPU train the MLP together
 * (gradients staged through host memory for the gRPC ring) and match a cpu
 * run of the same job within half a point of accuracy. With no GPU visible
 * the test says why and skips. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e.h"
#include "tcommon.h"

TestSuite(e2e_gpu_sync, .init = e2e_setup, .fini = e2e_teardown, .timeout = 500);

static double accuracy(const char *json)
{
    const char *at = strstr(json, "\"test_accuracy\":");
    return at ? strtod(at + strlen("\"test_accuracy\":"), NULL) : -1;
}

/* Trains on a fresh 2-worker cluster on `device`; returns the accuracy. */
static double train_on(const char *device)
{
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "2", "--base-port", "0", "--device", device, NULL);
    if (r.status != 0) {
        /* Only cuda may be missing, and only for want of a GPU; the cpu
         * must start. */
        cr_assert_str_neq(device, "cpu", "%s", r.err);
        cr_assert(r.status == 1 && e2e_no_gpu(r.err),
                  "ferry start --device cuda failed (status %d), not for want of a GPU: %s",
                  r.status, r.err);
        char why[512];
        snprintf(why, sizeof why, "no GPU for 2 workers: %.400s", r.err);
        e2e_run_fini(&r);
        cr_skip_test("%s", why);
    }
    e2e_run_fini(&r);
    e2e_ferry(&r, 300000, "submit", e2e_task("mlp"), "--mode", "sync", "--epochs", "2",
              "--json", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "\"workers\":2") && e2e_has(r.out, "\"mode\":\"sync\""),
              "%s", r.out);
    cr_assert(e2e_has(r.out, "\"params_identical\":true"), "%s", r.out);
    double acc = accuracy(r.out);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "shutdown", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    return acc;
}

Test(e2e_gpu_sync, two_workers_on_one_gpu_match_the_cpu_run)
{
    double gpu = train_on("cuda");
    double cpu = train_on("cpu");
    cr_log_info("sync mlp, 2 epochs: cuda %.4f, cpu %.4f", gpu, cpu);
    cr_assert(gpu > 0.80 && cpu > 0.80, "cuda %.4f cpu %.4f", gpu, cpu);
    cr_assert(gpu - cpu < 0.005 && cpu - gpu < 0.005,
              "cuda %.4f and cpu %.4f differ by more than 0.5 points", gpu, cpu);
}
