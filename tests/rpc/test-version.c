/* tests/rpc — a server made with a version refuses, at the first call and
 * before its token, a caller that says another, naming both; a caller of
 * the same version, or one that says none (another gRPC client), is
 * served. */
#include "harness.h"

#include <string.h>

TestSuite(rpc_version, .init = h_setup_bare, .fini = h_teardown, .timeout = 60);

static void serve(const char *version)
{
    const rpc_method *m;
    size_t n = h_methods(&m);
    rpc_server_opts o = {.listen = "127.0.0.1:0", .token = "tok", .version = version};
    cr_assert(rpc_server_create(&o, m, n, &H.server) == 0);
    H.port = rpc_server_port(H.server);
    snprintf(H.target, sizeof H.target, "127.0.0.1:%d", H.port);
}

/* An H_ECHO call on a new channel saying `version` (and `token`). */
static int echo(const char *version, const char *token, char *err, size_t len)
{
    rpc_channel_opts o = {.token = token, .version = version};
    rpc_channel *ch;
    cr_assert(rpc_channel_create(H.client, H.target, &o, &ch) == 0);
    rpc_call call;
    int rc = h_call(ch, &call, H_ECHO, "", "", NULL, 0, RPC_CODEC_RAW, H_CALL_TIMEOUT_MS);
    snprintf(err, len, "%s", call.errmsg ? call.errmsg : "");
    rpc_call_fini(&call);
    rpc_channel_destroy(ch);
    return rc;
}

H_TEST(rpc_version, another_version_is_refused_naming_both)
{
    serve("wire 1, ferry 0.5.0");
    char err[512];
    int rc = echo("wire 2, ferry 0.6.0", "tok", err, sizeof err);
    cr_assert_eq(rc, FERRY_ENOTSUP, "%s: %s", ferry_err_name(rc), err);
    cr_assert(strstr(err, "UNIMPLEMENTED") &&
                  strstr(err, "this worker speaks wire 1, ferry 0.5.0") &&
                  strstr(err, "the caller speaks wire 2, ferry 0.6.0"),
              "%s", err);
    /* before the token: a caller of another build is told what is wrong
     * with it, not that its token is */
    rc = echo("wire 1, ferry 0.4.9", "wrong", err, sizeof err);
    cr_assert(rc == FERRY_ENOTSUP && strstr(err, "ferry 0.4.9"), "%s", err);
    cr_assert_eq(rpc_server_refused(H.server), 2);
}

H_TEST(rpc_version, the_same_version_or_none_is_served)
{
    serve("wire 1, ferry 0.5.0");
    char err[512];
    cr_assert_eq(echo("wire 1, ferry 0.5.0", "tok", err, sizeof err), 0, "%s", err);
    cr_assert_eq(echo(NULL, "tok", err, sizeof err), 0, "%s", err);
    cr_assert_eq(rpc_server_refused(H.server), 0);
}

H_TEST(rpc_version, a_server_without_a_version_serves_any)
{
    serve(NULL);
    char err[512];
    cr_assert_eq(echo("wire 9, ferry 9.9.9", "tok", err, sizeof err), 0, "%s", err);
}
