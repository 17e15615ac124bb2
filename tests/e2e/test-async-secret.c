/* An async run's shards, on real workers, take a pull only with the run's
 * secret: the test is the master (the begins through the library, with a
 * secret of its own), then calls a shard as any client holding the cluster
 * token could. Refused without the secret or with another; answered with
 * it, so the secret the master gave the begin is the one the shards hold. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "cluster/cluster.h"
#include "config/config.h"
#include "e2e.h"
#include "e2e_train.h"
#include "ferry.pb-c.h"
#include "rpc/rpc.h"
#include "runtime/ps/ps.h"
#include "runtime/runtime.h"
#include "proto/raw.h"

TestSuite(e2e_async_secret, .init = e2e_setup, .fini = e2e_teardown, .timeout = 180);

#define SESSION 0xa5ec

/* cluster_call_all of `fn` with msgs[r] packed for rank r; asserts it
 * worked and frees the replies. */
static void call_all(cluster *cl, const cluster_module *m, const char *fn,
                     ProtobufCMessage *msgs[2])
{
    ferry_bytes_t in[2], out[2] = {{0}};
    for (int r = 0; r < 2; r++) {
        in[r].len = protobuf_c_message_get_packed_size(msgs[r]);
        in[r].data = malloc(in[r].len ? in[r].len : 1);
        cr_assert(in[r].data);
        protobuf_c_message_pack(msgs[r], in[r].data);
    }
    int rc = cluster_call_all(cl, m, fn, in, out);
    cr_assert(rc == 0, "%s: %s", fn, cluster_error(cl));
    for (int r = 0; r < 2; r++) {
        free(in[r].data);
        cluster_free_bytes(&out[r]);
    }
}

/* A pull of shard 0 (held by rank 0) at step 0, which never waits, with
 * `secret` of `len` bytes (NULL: none). Returns the call's result, its
 * text in msg. */
static int pull(rpc_channel *ch, const uint8_t *secret, size_t len, char *msg, size_t msglen)
{
    Ferry__PullRequest rq = FERRY__PULL_REQUEST__INIT;
    rq.job = SESSION;
    rq.shard = 0;
    rq.from_rank = 1;
    rq.secret.data = (uint8_t *)secret;
    rq.secret.len = secret ? len : 0;
    proto_raw out_head = proto_raw_pack(&rq.base);
    rpc_msg_out out = {.head_bytes = out_head.data, .head_len = out_head.len};
    return e2e_call_raw(ch, PROTO_METHOD_PULL, &out, msg, msglen);
}

Test(e2e_async_secret, a_shard_answers_a_pull_only_with_the_secret_its_master_gave_the_begin)
{
    e2e_start(2);
    char addr[2][128], token[CONF_TOKEN_LEN + 1];
    e2e_worker_address(0, addr[0], sizeof addr[0]);
    e2e_worker_address(1, addr[1], sizeof addr[1]);
    e2e_cluster_token(token, sizeof token);
    const char *peers[2] = {addr[0], addr[1]};
    uint8_t secret[RT_PS_SECRET_BYTES];
    for (size_t i = 0; i < sizeof secret; i++)
        secret[i] = (uint8_t)(0x3c ^ i * 11);

    cluster *cl = e2e_cluster(NULL, 60000);
    cluster_module m;
    e2e_load_module(cl, e2e_task("linreg"), "linreg.so", &m);
    Ferry__TrainBegin b[2];
    ProtobufCMessage *msgs[2];
    for (int r = 0; r < 2; r++) {
        ferry__train_begin__init(&b[r]);
        b[r].session = SESSION;
        b[r].mode = "async";
        b[r].batch = 32;
        b[r].seed = 5;
        b[r].epochs = 1;
        b[r].rank = (uint32_t)r;
        b[r].world = 2;
        b[r].n_peers = 2;
        b[r].peers = (char **)peers;
        b[r].timeout_ms = 10000;
        b[r].staleness = -1;
        b[r].submitter = "the async secret test";
        b[r].secret.data = secret;
        b[r].secret.len = sizeof secret;
        msgs[r] = &b[r].base;
    }
    call_all(cl, &m, "ferry.train.begin", msgs);

    /* The begins have returned: every rank holds its shards. */
    uv_loop_t loop;
    cr_assert(uv_loop_init(&loop) == 0);
    rpc_client *rc_client = NULL;
    cr_assert(rpc_client_create(&loop, &rc_client) == 0);
    rpc_channel_opts co = {.token = token};
    rpc_channel *ch = NULL;
    cr_assert(rpc_channel_create(rc_client, addr[0], &co, &ch) == 0);
    char msg[1024];
    int rc = pull(ch, NULL, 0, msg, sizeof msg);
    cr_assert(rc == FERRY_EACCES && strstr(msg, "does not carry the session's secret"),
              "a pull without the secret: %s: %s", ferry_err_name(rc), msg);
    uint8_t other[RT_PS_SECRET_BYTES];
    memset(other, 0, sizeof other); /* what a secret wiped too early would be */
    rc = pull(ch, other, sizeof other, msg, sizeof msg);
    cr_assert(rc == FERRY_EACCES, "a pull with a secret of zeros: %s: %s",
              ferry_err_name(rc), msg);
    rc = pull(ch, secret, sizeof secret, msg, sizeof msg);
    cr_assert(rc == 0, "a pull with the run's secret: %s: %s", ferry_err_name(rc), msg);
    rpc_channel_destroy(ch);
    rpc_client_close(rc_client);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert(uv_loop_close(&loop) == 0, "a handle was left open");

    Ferry__TrainEnd end = FERRY__TRAIN_END__INIT;
    end.session = SESSION;
    end.discard = true;
    msgs[0] = msgs[1] = &end.base;
    call_all(cl, &m, "ferry.train.end", msgs);
    cluster_module_fini(&m);
}
