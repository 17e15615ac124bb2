/* gRPC status codes <-> ferry error codes, and small helpers the other rpc
 * files share. */
#include <limits.h>

#include "rpc_int.h"

int rpc_status_to_err(int grpc_status)
{
    switch ((grpc_status_code)grpc_status) {
    case GRPC_STATUS_OK:
        return 0;
    case GRPC_STATUS_CANCELLED:
        return FERRY_ECANCELED;
    case GRPC_STATUS_INVALID_ARGUMENT:
    case GRPC_STATUS_OUT_OF_RANGE:
        return FERRY_EINVAL;
    case GRPC_STATUS_DEADLINE_EXCEEDED:
        return FERRY_ETIMEDOUT;
    case GRPC_STATUS_NOT_FOUND:
        return FERRY_ENOENT;
    case GRPC_STATUS_ALREADY_EXISTS:
        return FERRY_EEXIST;
    case GRPC_STATUS_PERMISSION_DENIED:
        return FERRY_EACCES;
    case GRPC_STATUS_UNAUTHENTICATED:
        return FERRY_EUNAUTH;
    case GRPC_STATUS_RESOURCE_EXHAUSTED:
        return FERRY_EMSGSIZE;
    case GRPC_STATUS_FAILED_PRECONDITION:
        return FERRY_EBUSY;
    case GRPC_STATUS_ABORTED:
        return FERRY_ECONNRESET;
    case GRPC_STATUS_UNIMPLEMENTED:
        return FERRY_ENOTSUP;
    case GRPC_STATUS_INTERNAL:
        return FERRY_EINTERNAL;
    case GRPC_STATUS_UNAVAILABLE:
        return FERRY_EUNAVAIL;
    case GRPC_STATUS_DATA_LOSS:
        return FERRY_ECORRUPT;
    case GRPC_STATUS_UNKNOWN:
    default:
        return FERRY_EREMOTE;
    }
}

int rpc_err_to_status(int err)
{
    switch (err) {
    case 0:
        return GRPC_STATUS_OK;
    case FERRY_ECANCELED:
        return GRPC_STATUS_CANCELLED;
    case FERRY_EINVAL:
    case FERRY_E2BIG:
    case FERRY_ERANGE:
        return GRPC_STATUS_INVALID_ARGUMENT;
    case FERRY_ETIMEDOUT:
        return GRPC_STATUS_DEADLINE_EXCEEDED;
    case FERRY_ENOENT:
        return GRPC_STATUS_NOT_FOUND;
    case FERRY_EEXIST:
        return GRPC_STATUS_ALREADY_EXISTS;
    case FERRY_EPERM:
    case FERRY_EACCES:
        return GRPC_STATUS_PERMISSION_DENIED;
    case FERRY_EUNAUTH:
        return GRPC_STATUS_UNAUTHENTICATED;
    case FERRY_EMSGSIZE:
    case FERRY_EAGAIN:
    case FERRY_ENOMEM:
    case FERRY_ENOSPC:
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    case FERRY_EBUSY:
        return GRPC_STATUS_FAILED_PRECONDITION;
    case FERRY_ECONNRESET:
        return GRPC_STATUS_ABORTED;
    case FERRY_ENOTSUP:
    case FERRY_ENOSYS:
        return GRPC_STATUS_UNIMPLEMENTED;
    case FERRY_EINTERNAL:
        return GRPC_STATUS_INTERNAL;
    case FERRY_EUNAVAIL:
    case FERRY_ESHUTDOWN:
        return GRPC_STATUS_UNAVAILABLE;
    case FERRY_ECORRUPT:
        return GRPC_STATUS_DATA_LOSS;
    default:
        return GRPC_STATUS_UNKNOWN;
    }
}

const char *rpc_status_name(int code)
{
    static const char *const names[] = {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    };
    if ((unsigned)code < sizeof names / sizeof names[0])
        return names[code];
    return "UNKNOWN";
}

gpr_timespec rpc_deadline(int64_t timeout_ms)
{
    if (timeout_ms <= 0)
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                        gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
}

bool rpc_status_by_deadline(grpc_status_code status, gpr_timespec deadline,
                            bool cancelled)
{
    if (cancelled || (status != GRPC_STATUS_CANCELLED && status != GRPC_STATUS_INTERNAL &&
                      status != GRPC_STATUS_UNKNOWN))
        return false;
    return gpr_time_cmp(gpr_now(GPR_CLOCK_MONOTONIC), deadline) >= 0;
}

void rpc_grpc_size_args(grpc_arg args[2], size_t max_payload)
{
    /* gRPC's limit covers the whole message: payload, head and framing. */
    size_t slack = (size_t)1 << 20;
    int limit = max_payload + slack > INT_MAX ? INT_MAX : (int)(max_payload + slack);
    args[0] = (grpc_arg){.type = GRPC_ARG_INTEGER,
                         .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                         .value.integer = limit};
    args[1] = (grpc_arg){.type = GRPC_ARG_INTEGER,
                         .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
                         .value.integer = limit};
}
