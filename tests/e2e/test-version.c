/* tests/e2e — a worker tells a caller of another ferry build, at its first
 * call (a Ping, token or not), which version each side speaks; `ferry`
 * itself speaks the worker's and is served. */
#include "e2e.h"

#include <string.h>

#include <uv.h>

#include "proto/proto.h"
#include "rpc/rpc.h"

TestSuite(e2e_version, .init = e2e_setup, .fini = e2e_teardown, .timeout = 60);

/* A Ping to `target` from a channel saying `version`: its result, and its
 * error text into err. */
static int ping_as(const char *target, const char *version, char *err, size_t len)
{
    uv_loop_t loop;
    rpc_client *c;
    rpc_channel *ch;
    rpc_channel_opts o = {.version = version};
    cr_assert(uv_loop_init(&loop) == 0 && rpc_client_create(&loop, &c) == 0 &&
              rpc_channel_create(c, target, &o, &ch) == 0);
    proto_bytes head = {0};
    proto_ping_req req = {.nonce = 7};
    cr_assert(proto_ping_req_pack(&req, &head) == 0);
    rpc_msg_out out = {.head_bytes = head.data, .head_len = head.len};
    rpc_call call;
    memset(&call, 0, sizeof call);
    cr_assert(rpc_call_start(ch, &call, PROTO_METHOD_PING, &out, 10000, NULL) == 0);
    int rc = rpc_call_wait(&call);
    snprintf(err, len, "%s", call.errmsg ? call.errmsg : "");
    rpc_call_fini(&call);
    proto_bytes_fini(&head);
    rpc_channel_destroy(ch);
    rpc_client_close(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert(uv_loop_close(&loop) == 0);
    return rc;
}

Test(e2e_version, a_caller_of_another_build_is_told_both_versions_at_its_first_call)
{
    e2e_start(1);
    cluster *cl = e2e_cluster(NULL, 10000);
    const cluster_worker *w;
    cr_assert_eq(cluster_survey(cl, false, &w), 0, "%s", cluster_error(cl));
    char target[300], err[1024];
    snprintf(target, sizeof target, "%s", w[0].target);

    int rc = ping_as(target, "wire 999, ferry 99.0.0", err, sizeof err);
    cr_assert_eq(rc, FERRY_ENOTSUP, "%s: %s", ferry_err_name(rc), err);
    cr_assert(strstr(err, "this worker speaks " PROTO_VERSION) &&
                  strstr(err, "the caller speaks wire 999, ferry 99.0.0"),
              "%s", err);
    cr_assert_eq(ping_as(target, PROTO_VERSION, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ping_as(target, NULL, err, sizeof err), 0, "another gRPC client: %s",
                 err);

    e2e_run r; /* ferry's own commands speak the worker's version */
    e2e_ferry(&r, E2E_CMD_MS, "status", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}
