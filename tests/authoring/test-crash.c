/* tests/authoring — a crash inside a model's callback is reported by
 * `ferry submit` with the callback, the faulting address and the module's
 * frames by name (static functions included), not only in the worker's
 * log. */
#include "e2e.h"

TestSuite(author_crash, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

Test(author_crash, a_null_store_in_loss_grad_is_named_with_its_frames)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("nullgrad.so"), "--epochs", "1",
              NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(
        e2e_has(r.err, "signal 11 (SIGSEGV) at address 0x10 in the model's loss_grad"),
        "%s", r.err);
    cr_assert(e2e_has(r.err, "frames: count_into+0x") &&
                  e2e_has(r.err, "(nullgrad.so), loss_grad+0x"),
              "%s", r.err);
    e2e_run_fini(&r);
}

Test(author_crash, a_write_past_the_workspace_is_caught_at_the_write_and_named)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("overrun.so"), "--epochs", "1",
              NULL);
    E2E_EXPECT(&r, 1);
    /* At the first float past the end, in the fill loss_grad asked for. */
    cr_assert(e2e_has(r.err, ", 0 bytes past the end of the model's workspace (") &&
                  e2e_has(r.err, " in the model's loss_grad; frames: ") &&
                  e2e_has(r.err, "loss_grad+0x") && e2e_has(r.err, "(overrun.so)"),
              "%s", r.err);
    cr_assert(e2e_has(r.err, "epoch 1 failed"), "%s", r.err);
    e2e_run_fini(&r);
}
