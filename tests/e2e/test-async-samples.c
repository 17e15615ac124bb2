/* An asynchronous epoch ends on the samples the shards count. One that
 * ends with no sample computed on any worker (the count had reached its
 * end before the epoch began) is reported and fails the submit, never
 * "done" with 0 samples an epoch. Driven honestly: linreg's 8192 samples,
 * a global batch of all of them and 4 batches a push, so that the first
 * push of each of the 2 workers carries two epochs' worth, and epoch 2
 * has nothing left to compute. */
#include <stdlib.h>

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
