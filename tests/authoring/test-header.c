/* tests/authoring — a model without FERRY_MODEL_HEADER is refused when it is
 * inspected, before anything is shipped, with the macro named. */
#include "e2e.h"

#include "runtime/runtime.h"

TestSuite(author_header, .init = e2e_setup, .fini = e2e_teardown, .timeout = 60);

Test(author_header, a_model_without_the_header_is_refused_on_loading)
{
    rt_module m;
    char err[512] = "";
    int rc =
        rt_module_open(&m, e2e_local_module("nohead.so"), "nohead.so", err, sizeof err);
    cr_assert(rc == FERRY_EINVAL, "rc %d: %s", rc, err);
    cr_assert(e2e_has(err, "nohead.so: ") && e2e_has(err, "FERRY_MODEL_HEADER"), "%s",
              err);
}

Test(author_header, submit_refuses_it_before_looking_for_a_cluster)
{
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("nohead.so"), NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "nohead.so") && e2e_has(r.err, "FERRY_MODEL_HEADER"), "%s",
              r.err);
    cr_assert(!e2e_has(r.err, "ABI version 0,"), "%s", r.err);
    e2e_run_fini(&r);
}
