/* ferry — error codes.
 *
 * Every int-returning ferry call returns 0 on success or a negative FERRY_E*
 * code. Codes that have a POSIX meaning equal -errno on Linux (as libuv's
 * UV_E* do); ferry's own codes live below -3000. */
#ifndef FERRY_ERROR_H
#define FERRY_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message). The POSIX values are Linux's; error.c checks them
 * against <errno.h> at compile time. */
#define FERRY_POSIX_ERRNO_MAP(X)                                                         \
    X(EPERM, -1, "operation not permitted")                                              \
    X(ENOENT, -2, "no such file or directory")                                           \
    X(EIO, -5, "i/o error")                                                              \
    X(E2BIG, -7, "argument list too long")                                               \
    X(EBADF, -9, "bad file descriptor")                                                  \
    X(EAGAIN, -11, "resource temporarily unavailable")                                   \
    X(ENOMEM, -12, "not enough memory")                                                  \
    X(EACCES, -13, "permission denied")                                                  \
    X(EBUSY, -16, "resource busy or locked")                                             \
    X(EEXIST, -17, "already exists")                                                     \
    X(ENODEV, -19, "no such device")                                                     \
    X(EINVAL, -22, "invalid argument")                                                   \
    X(ENOSPC, -28, "no space left on device")                                            \
    X(EPIPE, -32, "broken pipe")                                                         \
    X(ERANGE, -34, "result out of range")                                                \
    X(EDEADLK, -35, "would deadlock")                                                    \
    X(ENOSYS, -38, "function not implemented")                                           \
    X(EPROTO, -71, "protocol error")                                                     \
    X(EMSGSIZE, -90, "message too long")                                                 \
    X(ENOTSUP, -95, "operation not supported")                                           \
    X(EADDRINUSE, -98, "address already in use")                                         \
    X(ECONNRESET, -104, "connection reset by peer")                                      \
    X(ETIMEDOUT, -110, "deadline exceeded")                                              \
    X(ECONNREFUSED, -111, "connection refused")                                          \
    X(ECANCELED, -125, "operation canceled")

/* ferry's own codes, with no POSIX counterpart. */
#define FERRY_OWN_ERRNO_MAP(X)                                                           \
    X(EUNAVAIL, -3001, "peer unavailable")                                               \
    X(EREMOTE, -3002, "remote handler failed")                                           \
    X(ECORRUPT, -3003, "corrupt or truncated message")                                   \
    X(EUNAUTH, -3004, "missing or wrong cluster token")                                  \
    X(EINTERNAL, -3005, "internal error")                                                \
    X(ESHUTDOWN, -3006, "shutting down")                                                 \
    X(EUNKNOWN, -3007, "unknown error")

#define FERRY_ERRNO_MAP(X) FERRY_POSIX_ERRNO_MAP(X) FERRY_OWN_ERRNO_MAP(X)

typedef enum {
#define FERRY_ERR_ENUM(name, value, msg) FERRY_##name = (value),
    FERRY_ERRNO_MAP(FERRY_ERR_ENUM)
#undef FERRY_ERR_ENUM
} ferry_errno_t;

/* A short English description of `err`; "unknown error" for a code not in the
 * table. The string is static: never free it. Thread-safe. */
const char *ferry_strerror(int err);

/* The symbolic name of `err` ("EINVAL", "ETIMEDOUT"); "UNKNOWN" for a code not
 * in the table. Static string, thread-safe. */
const char *ferry_err_name(int err);

#ifdef __cplusplus
}
#endif
#endif
