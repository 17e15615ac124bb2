/* An asynchronous epoch ends on the samples the shards count. One that
 * ends with no sample computed on any worker (the count had reached its
 * end before the epoch began) is reported and fails the submit, never
 * "done" with 0 samples an epoch. Driven honestly: linreg's 8192 samples,
 * a global batch of all of them and 4 batches a push, so that the first
 * push of each of the 2 workers carries two epochs' worth, and epoch 2
 * has nothing left to compute. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "e2e.h"

static void samples_setup(void)
{
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    e2e_setup();
}

TestSuite(e2e_async_samples, .init = samples_setup, .fini = e2e_teardown, .timeout = 300);

Test(e2e_async_samples, an_epoch_with_no_sample_computed_fails_the_submit)
{
    e2e_start(2);
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--mode", "async", "--batch",
              "8192", "--push-every", "4", "--epochs", "3", NULL);
    cr_assert(r.status != 0, "exit 0 for a run with an empty epoch:\n%s\n%s", r.out,
              r.err);
    cr_assert(
        e2e_has(r.err, "epoch 2 ended (async mode) with no training sample computed"),
        "%s", r.err);
    cr_assert(!e2e_has(r.out, "done"), "%s", r.out);
    e2e_run_fini(&r);

    /* The same cluster trains an honest run afterwards. */
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--mode", "async", "--epochs",
              "2", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}

/* A checkpoint written as the shards' count reached the end of an epoch
 * (every 64 global steps: linreg's 8192 samples in batches of 128) but
 * before the epoch's end was seen: the continued run's first epoch has
 * nothing left, which is the checkpoint's doing, not a failure. */
Test(e2e_async_samples, a_continued_run_whose_checkpoint_ended_its_epoch_goes_on)
{
    e2e_start(2);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ended", e2e_home);
    cr_assert_eq(mkdir(dir, 0700), 0);
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--mode", "async", "--epochs", "1",
              "--checkpoint-every", "64", "--checkpoint-dir", dir, NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);

    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--mode", "async", "--epochs", "2",
              "--resume", dir, NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.err, "0 epochs and 64 steps done"), "%s", r.err);
    cr_assert(e2e_has(r.out, "epoch 1/2  trained before the checkpoint") &&
                  e2e_has(r.out, "epoch 2/2  loss ") && e2e_has(r.out, "done"),
              "%s\n%s", r.out, r.err);
    e2e_run_fini(&r);
}
