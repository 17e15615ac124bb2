/* tests/rpc — gRPC status codes <-> ferry error codes. */
#include "harness.h"

#include <grpc/status.h>

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
