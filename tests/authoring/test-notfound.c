/* tests/authoring — a worker's NOT_FOUND reaches `ferry submit`'s user in
 * the worker's own words, with no generic "no such file or directory"
 * before them; a result of the driver's own is said as one. */
#include "e2e.h"

TestSuite(author_notfound, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

Test(author_notfound, a_workers_not_found_is_said_in_its_own_words)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("notfound.so"), NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "notfound.so: worker 0 (") &&
                  e2e_has(r.err, "has no function 'nosuch' (it has: echo)"),
              "%s", r.err);
    cr_assert(!e2e_has(r.err, "no such file or directory") &&
                  !e2e_has(r.err, "the driver failed"),
              "%s", r.err);
    e2e_run_fini(&r);
}

Test(author_notfound, a_drivers_own_result_is_said_with_the_call_it_saw_fail)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("notfound.so"), "--", "own",
              NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "notfound.so: the driver returned EINVAL (") &&
                  e2e_has(r.err, "its last failed call: worker 0 ("),
              "%s", r.err);
    e2e_run_fini(&r);
}
