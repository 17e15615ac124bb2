/* Stray ReduceChunks sent into a running sync session by a client holding
 * the cluster token, on real workers: the test is the master (begin, epochs
 * and end through the library, with a session id and secret of its own),
 * so that it can aim at the session. A well-formed chunk of zeros, and one
 * of the wrong element count, for the step after next, a few steps into
 * the run: without the session's secret each is refused at once as such;
 * with it (a sender that has it), as not coming from the rank it claims
 * (whose chunks came over another connection). A chunk without the secret
 * sent before the rank's first (rank 1 has not even begun) is refused as
 * well. Each run ends bit-identical to its undisturbed twin (the
 * parameters' SHA-256 the workers report). */
#include <pthread.h>
#include <stdatomic.h>
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
#include "runtime/collective/coll_int.h"
#include "runtime/runtime.h"

TestSuite(e2e_chunk_strays, .init = e2e_setup, .fini = e2e_teardown, .timeout = 300);

#define EPOCHS 2

typedef struct run {
    cluster *cl;
    cluster_module m;
    const char *peers[2];
    uint64_t session;
    uint64_t n; /* floats its all-reduce carries */
    uint8_t secret[RT_COMM_SECRET_BYTES];
    int rc;
    char err[2048];
    char sha[80];
} run;

/* cluster_call_all of `fn` with in[r] = msgs[r] packed; out gathered. */
static int call_all(run *u, const char *fn, ProtobufCMessage *msgs[2], ferry_bytes_t out[2])
{
    ferry_bytes_t in[2];
    for (int r = 0; r < 2; r++) {
        in[r].len = protobuf_c_message_get_packed_size(msgs[r]);
        in[r].data = malloc(in[r].len ? in[r].len : 1);
        cr_assert(in[r].data);
        protobuf_c_message_pack(msgs[r], in[r].data);
    }
    memset(out, 0, 2 * sizeof *out);
    int rc = cluster_call_all(u->cl, &u->m, fn, in, out);
    if (rc)
        snprintf(u->err, sizeof u->err, "%s: %s", fn, cluster_error(u->cl));
    for (int r = 0; r < 2; r++)
        free(in[r].data);
    return rc;
}

/* Both ranks' begins of u's session. */
static void begin_msgs(run *u, Ferry__TrainBegin b[2], ProtobufCMessage *msgs[2])
{
    for (int r = 0; r < 2; r++) {
        ferry__train_begin__init(&b[r]);
        b[r].session = u->session;
        b[r].batch = 32;
        b[r].seed = 5;
        b[r].epochs = EPOCHS;
        b[r].rank = (uint32_t)r;
        b[r].world = 2;
        b[r].n_peers = 2;
        b[r].peers = (char **)u->peers;
        b[r].timeout_ms = 10000;
        b[r].submitter = "the strays test";
        b[r].secret.data = u->secret;
        b[r].secret.len = sizeof u->secret;
        msgs[r] = &b[r].base;
    }
}

static void begin(run *u)
{
    Ferry__TrainBegin b[2];
    ProtobufCMessage *msgs[2];
    begin_msgs(u, b, msgs);
    ferry_bytes_t out[2];
    int rc = call_all(u, "ferry.train.begin", msgs, out);
    cr_assert(rc == 0, "%s", u->err);
    Ferry__TrainBeginReply *rep =
        ferry__train_begin_reply__unpack(NULL, out[0].len, out[0].data);
    cr_assert(rep && rep->buckets == 1, "one all-reduce a step expected");
    ferry__train_begin_reply__free_unpacked(rep, NULL);
    for (int r = 0; r < 2; r++)
        cluster_free_bytes(&out[r]);
}

/* Epochs `first` to `last` of u's session, unless one has failed. */
static void epochs(run *u, int first, int last)
{
    Ferry__TrainEpoch ep = FERRY__TRAIN_EPOCH__INIT;
    ep.session = u->session;
    ProtobufCMessage *msgs[2] = {&ep.base, &ep.base};
    ferry_bytes_t out[2];
    for (int e = first; e <= last && u->rc == 0; e++) {
        u->rc = call_all(u, "ferry.train.epoch", msgs, out);
        for (int r = 0; r < 2; r++)
            cluster_free_bytes(&out[r]);
    }
}

static void end_run(run *u)
{
    ProtobufCMessage *msgs[2];
    ferry_bytes_t out[2];
    Ferry__TrainEnd end = FERRY__TRAIN_END__INIT;
    end.session = u->session;
    msgs[0] = msgs[1] = &end.base;
    char keep[sizeof u->err];
    snprintf(keep, sizeof keep, "%s", u->err);
    int rc = call_all(u, "ferry.train.end", msgs, out);
    if (u->rc == 0) {
        cr_assert(rc == 0, "%s", u->err);
        Ferry__TrainEndReply *rep = ferry__train_end_reply__unpack(NULL, out[0].len, out[0].data);
        cr_assert(rep);
        snprintf(u->sha, sizeof u->sha, "%s", rep->params_sha256);
        ferry__train_end_reply__free_unpacked(rep, NULL);
    }
    snprintf(u->err, sizeof u->err, "%s", keep);
    for (int r = 0; r < 2; r++)
        cluster_free_bytes(&out[r]);
}

/* ---- the stray ------------------------------------------------------------------- */

typedef struct stray {
    run *u;
    const char *token;
    bool keyed;           /* it carries the session's secret */
    uint64_t count_delta; /* from the all-reduce's floats: the stray's count */
    uint64_t count;
    int rc;         /* of the stray that went in (kept or refused at once) */
    uint64_t step;
    char msg[1024];
} stray;

static int send_chunk(rpc_channel *ch, uint64_t session, const uint8_t *secret,
                      uint64_t step, uint64_t count, char *msg, size_t msglen)
{
    float *zeros = calloc(count ? count : 1, sizeof(float));
    cr_assert(zeros);
    int rc = e2e_exchange_chunk(ch, session, secret, step, 0, count, zeros, count, msg,
                                msglen);
    free(zeros);
    return rc;
}

/* Aims at the step after next on rank 0, as learnt from the refusal of a
 * chunk for step 1 (long done; sent with the secret). Sent between the
 * first epoch and the second, so that the neighbour's chunks are known and
 * the step it aims at is still to come whatever the machine's load: kept,
 * it would be summed into the second epoch. */
static void send_stray(stray *s)
{
    uv_loop_t loop;
    cr_assert(uv_loop_init(&loop) == 0);
    rpc_client *cl = NULL;
    cr_assert(rpc_client_create(&loop, &cl) == 0);
    rpc_channel_opts co = {.token = s->token};
    rpc_channel *ch = NULL;
    cr_assert(rpc_channel_create(cl, s->u->peers[0], &co, &ch) == 0);
    double t0 = e2e_now_ms();
    char msg[1024] = "";
    unsigned long long done = 0;
    s->count = s->u->n + s->count_delta;
    for (;;) {
        /* Only a connection still being made is tried again. */
        cr_assert(e2e_now_ms() - t0 < 20000, "rank 0 never answered the probe: %s", msg);
        int rc = send_chunk(ch, s->u->session, s->u->secret, 1, 1, msg, sizeof msg);
        const char *at = strstr(msg, "collectives up to ");
        if (rc == FERRY_EUNAVAIL) {
            e2e_sleep_ms(10);
            continue;
        }
        cr_assert(rc == FERRY_EINVAL && at &&
                      sscanf(at, "collectives up to %llu", &done) == 1 && done >= 10,
                  "a chunk for step 1 after an epoch: %s: %s", ferry_err_name(rc), msg);
        break;
    }
    s->step = done + 2;
    s->rc = send_chunk(ch, s->u->session, s->keyed ? s->u->secret : NULL, s->step, s->count,
                       s->msg, sizeof s->msg);
    rpc_channel_destroy(ch);
    rpc_client_close(cl);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert(uv_loop_close(&loop) == 0, "a handle was left open");
}

/* A run of session `id`, with a stray claiming `count` floats (0: none). */
static void run_with(run *u, uint64_t id, uint64_t count_delta, bool stray_on, bool keyed,
                     const char *token)
{
    u->session = id;
    u->err[0] = u->sha[0] = 0;
    u->rc = 0;
    begin(u);
    if (stray_on) {
        epochs(u, 1, 1);
        cr_assert(u->rc == 0, "the first epoch: %s", u->err);
        stray s = {.u = u, .token = token, .keyed = keyed, .count_delta = count_delta};
        send_stray(&s);
        cr_log_info("stray of %llu floats for step %llu: %s %s", (unsigned long long)s.count,
                    (unsigned long long)s.step, ferry_err_name(s.rc), s.msg);
        /* With the secret: rank 1's chunks came over its own connection,
         * the stray's is another, refused at once naming both. Without
         * it: refused at once for that. */
        bool as_expected =
            keyed ? s.rc == FERRY_EINVAL && strstr(s.msg, "claims to be rank 1's") &&
                        strstr(s.msg, "come from ipv")
                  : s.rc == FERRY_EACCES &&
                        strstr(s.msg, "does not carry the session's secret") &&
                        strstr(s.msg, "from ipv");
        cr_assert(as_expected, "the stray (%s the secret) was refused as %s: %s",
                  keyed ? "with" : "without", ferry_err_name(s.rc), s.msg);
    }
    epochs(u, stray_on ? 2 : 1, EPOCHS);
    end_run(u);
}

static void setup_run(run *u, char addr[2][128], char *token)
{
    e2e_start(2);
    e2e_worker_address(0, addr[0], 128);
    e2e_worker_address(1, addr[1], 128);
    e2e_cluster_token(token, CONF_TOKEN_LEN + 1);
    for (size_t i = 0; i < sizeof u->secret; i++)
        u->secret[i] = (uint8_t)(0xa5 ^ i * 7);
    u->cl = e2e_cluster(NULL, 60000);
    u->peers[0] = addr[0];
    u->peers[1] = addr[1];
    const char *so = e2e_task("linreg");
    e2e_load_module(u->cl, so, "linreg.so", &u->m);
    /* The step's one all-reduce: sync.c's 16-float loss slot in front of
     * the flat parameters, laid out as the workers lay them out. */
    rt_module mod;
    char err[512];
    cr_assert(rt_module_open(&mod, so, "linreg.so", err, sizeof err) == 0, "%s", err);
    u->n = 16 + ferry_model_layout(mod.task->model, NULL);
    rt_module_close(&mod);
}

/* A twin run, then one with a stray claiming the all-reduce's floats plus
 * `count_delta`, `keyed` or not: the same parameters at the end. */
static void run_twins(run *u, uint64_t twin_id, uint64_t id, uint64_t count_delta,
                      bool keyed)
{
    char addr[2][128], token[CONF_TOKEN_LEN + 1];
    setup_run(u, addr, token);
    run_with(u, twin_id, 0, false, false, token);
    cr_assert(u->rc == 0, "the undisturbed twin: %s", u->err);
    char twin[80];
    snprintf(twin, sizeof twin, "%s", u->sha);
    run_with(u, id, count_delta, true, keyed, token);
    cr_assert(u->rc == 0, "the run with a stray failed: %s", u->err);
    cr_assert_str_eq(u->sha, twin, "the run with a stray differs from its twin");
    cluster_module_fini(&u->m);
}

Test(e2e_chunk_strays, a_wrong_count_chunk_leaves_the_run_identical_to_its_twin)
{
    run u = {0};
    run_twins(&u, 0x7a1, 0x57a1, 3, true);
}

Test(e2e_chunk_strays, a_zero_chunk_ahead_is_refused_and_the_run_stays_identical_to_its_twin)
{
    run u = {0};
    run_twins(&u, 0x7a2, 0x57a2, 0, true);
    /* The cluster trains the next run as ever. */
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", "1", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}

Test(e2e_chunk_strays,
     a_zero_chunk_ahead_without_the_secret_is_refused_as_such_and_the_run_stays_identical)
{
    run u = {0};
    run_twins(&u, 0x7a3, 0x57a3, 0, false);
}

/* Rank 0's begin, alone: it registers the session and waits for rank 1. */
typedef struct lone_begin {
    run *u;
    int rank;
    cluster *cl;
    cluster_module *m;
    int rc;
    char err[1024];
} lone_begin;

static void *lone_begin_main(void *arg)
{
    lone_begin *b = arg;
    Ferry__TrainBegin msg[2];
    ProtobufCMessage *msgs[2];
    begin_msgs(b->u, msg, msgs);
    ferry_bytes_t in = {0}, out = {0};
    in.len = protobuf_c_message_get_packed_size(msgs[b->rank]);
    in.data = malloc(in.len);
    cr_assert(in.data);
    protobuf_c_message_pack(msgs[b->rank], in.data);
    b->rc = cluster_call(b->cl, b->m, b->rank, "ferry.train.begin", &in, &out);
    snprintf(b->err, sizeof b->err, "%s", b->rc ? cluster_error(b->cl) : "");
    free(in.data);
    cluster_free_bytes(&out);
    return NULL;
}

/* The opening of a session: before rank 1 has even begun, chunks claiming
 * to be its exchange of the start's barrier and of the first step (each
 * the whole buffer in one chunk, so that, taken, it would finish that
 * collective on rank 0 with its zeros). Without the secret each is
 * refused at once, and the run, once rank 1 begins, ends identical to its
 * twin. */
Test(
    e2e_chunk_strays,
    a_chunk_without_the_secret_before_rank_1_begins_is_refused_and_the_run_stays_identical)
{
    run u = {0};
    char addr[2][128], token[CONF_TOKEN_LEN + 1];
    setup_run(&u, addr, token);
    run_with(&u, 0x7a4, 0, false, false, token);
    cr_assert(u.rc == 0, "the undisturbed twin: %s", u.err);
    char twin[80];
    snprintf(twin, sizeof twin, "%s", u.sha);

    u.session = 0x57a4;
    u.err[0] = u.sha[0] = 0;
    cluster_module m0;
    lone_begin b0 = {.u = &u, .rank = 0, .cl = e2e_cluster_another(60000), .m = &m0};
    e2e_load_module(b0.cl, e2e_task("linreg"), "linreg.so", &m0);
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, lone_begin_main, &b0) == 0);

    uv_loop_t loop;
    cr_assert(uv_loop_init(&loop) == 0);
    rpc_client *cl = NULL;
    cr_assert(rpc_client_create(&loop, &cl) == 0);
    rpc_channel_opts co = {.token = token};
    rpc_channel *ch = NULL;
    cr_assert(rpc_channel_create(cl, u.peers[0], &co, &ch) == 0);
    char msg[1024] = "";
    int rc;
    double t0 = e2e_now_ms();
    /* Step 2: the start's barrier, a 1-float all-reduce after rank 0's
     * broadcast of the parameters (step 1, to which rank 1 sends nothing):
     * rank 1's first chunk to rank 0. NOT_FOUND until rank 0 has registered
     * the session. Then step 3, the first step's gradient. */
    while ((rc = send_chunk(ch, u.session, NULL, 2, 1, msg, sizeof msg)) ==
               FERRY_ENOENT &&
           e2e_now_ms() - t0 < 20000)
        e2e_sleep_ms(10);
    cr_log_info("a chunk without the secret before rank 1 began: %s %s",
                ferry_err_name(rc), msg);
    cr_assert(rc == FERRY_EACCES && strstr(msg, "does not carry the session's secret") &&
                  strstr(msg, "from ipv"),
              "got %s (%s), want EACCES naming the caller", ferry_err_name(rc), msg);
    rc = send_chunk(ch, u.session, NULL, 3, u.n, msg, sizeof msg);
    cr_assert(rc == FERRY_EACCES, "step 3: got %s (%s), want EACCES", ferry_err_name(rc),
              msg);
    rpc_channel_destroy(ch);
    rpc_client_close(cl);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert(uv_loop_close(&loop) == 0, "a handle was left open");

    /* Rank 1 begins: the ranks' starts end together. */
    lone_begin b1 = {.u = &u, .rank = 1, .cl = u.cl, .m = &u.m};
    lone_begin_main(&b1);
    pthread_join(th, NULL);
    cr_assert(b0.rc == 0 && b1.rc == 0, "the begins: %s | %s", b0.err, b1.err);
    u.rc = 0;
    epochs(&u, 1, EPOCHS);
    end_run(&u);
    cr_assert(u.rc == 0, "the run after the stray failed: %s", u.err);
    cr_assert_str_eq(u.sha, twin, "the run after the stray differs from its twin");
    cluster_module_fini(&m0);
    cluster_destroy(b0.cl);
    cluster_module_fini(&u.m);
}
