/* tests/rpc — gRPC status codes <-> ferry error codes. */
#include "harness.h"

#include <grpc/status.h>
#include <unistd.h>

#include "rpc/rpc_int.h"

TestSuite(rpc_status, .fini = h_teardown);

H_TEST(rpc_status, ok_maps_to_zero_both_ways)
{
    cr_assert(rpc_status_to_err(GRPC_STATUS_OK) == 0);
    cr_assert(rpc_err_to_status(0) == GRPC_STATUS_OK);
}

H_TEST(rpc_status, transport_statuses_map_to_their_ferry_codes)
{
    cr_assert(rpc_status_to_err(GRPC_STATUS_DEADLINE_EXCEEDED) == FERRY_ETIMEDOUT);
    cr_assert(rpc_status_to_err(GRPC_STATUS_UNAVAILABLE) == FERRY_EUNAVAIL);
    cr_assert(rpc_status_to_err(GRPC_STATUS_UNIMPLEMENTED) == FERRY_ENOTSUP);
    cr_assert(rpc_status_to_err(GRPC_STATUS_CANCELLED) == FERRY_ECANCELED);
    cr_assert(rpc_status_to_err(GRPC_STATUS_NOT_FOUND) == FERRY_ENOENT);
    cr_assert(rpc_status_to_err(GRPC_STATUS_INVALID_ARGUMENT) == FERRY_EINVAL);
}

H_TEST(rpc_status, ferry_codes_a_handler_uses_survive_the_round_trip)
{
    const int errs[] = {FERRY_ENOENT,  FERRY_EINVAL,   FERRY_ETIMEDOUT, FERRY_ECANCELED,
                        FERRY_ENOTSUP, FERRY_EUNAVAIL, FERRY_EMSGSIZE};
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        int st = rpc_err_to_status(errs[i]);
        cr_assert(st != GRPC_STATUS_OK, "%s maps to OK", ferry_err_name(errs[i]));
        cr_assert(rpc_status_to_err(st) == errs[i], "%s -> status %d -> %s",
                  ferry_err_name(errs[i]), st, ferry_err_name(rpc_status_to_err(st)));
    }
}

H_TEST(rpc_status, every_failure_maps_to_a_failure)
{
    for (int st = 1; st <= 16; st++)
        cr_assert(rpc_status_to_err(st) < 0, "status %d maps to %d", st,
                  rpc_status_to_err(st));
    cr_assert(rpc_status_to_err(1000) < 0, "an unknown status maps to success");
    cr_assert(rpc_err_to_status(FERRY_EUNKNOWN) != GRPC_STATUS_OK);
    cr_assert(rpc_err_to_status(-123456) != GRPC_STATUS_OK);
}

/* gRPC's DEADLINE_EXCEEDED is best effort: a reset stream the server's own
 * timer sent may reach the client first and end the call as CANCELLED,
 * INTERNAL or UNKNOWN (seen once: a 10 ms deadline came back UNKNOWN). */
H_TEST(rpc_status, a_reset_after_the_deadline_is_a_timeout_unless_ferry_cancelled)
{
    gpr_timespec past = rpc_deadline(1), future = rpc_deadline(60000),
                 none = rpc_deadline(0);
    usleep(5000);
    const grpc_status_code resets[] = {GRPC_STATUS_CANCELLED, GRPC_STATUS_INTERNAL,
                                       GRPC_STATUS_UNKNOWN};
    for (size_t i = 0; i < sizeof resets / sizeof resets[0]; i++) {
        cr_assert(rpc_status_by_deadline(resets[i], past, false), "%s after the deadline",
                  rpc_status_name(resets[i]));
        cr_assert(!rpc_status_by_deadline(resets[i], past, true),
                  "%s of a call ferry cancelled", rpc_status_name(resets[i]));
        cr_assert(!rpc_status_by_deadline(resets[i], future, false),
                  "%s before the deadline", rpc_status_name(resets[i]));
        cr_assert(!rpc_status_by_deadline(resets[i], none, false),
                  "%s without a deadline", rpc_status_name(resets[i]));
    }
    /* What the server said on purpose stays what it said. */
    cr_assert(!rpc_status_by_deadline(GRPC_STATUS_UNAVAILABLE, past, false));
    cr_assert(!rpc_status_by_deadline(GRPC_STATUS_NOT_FOUND, past, false));
    cr_assert(!rpc_status_by_deadline(GRPC_STATUS_OK, past, false));
}
