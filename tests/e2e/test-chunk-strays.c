/* Stray ReduceChunks sent into a running sync session by a client holding
 * the cluster token, on real workers: the test is the master (begin, epochs
 * and end through the library, with a session id of its own), so that it
 * can aim at the session. A well-formed chunk of zeros, and one of the
 * wrong element count, for the step after next, a few steps into the run:
 * each is refused at once as not coming from the rank it claims (whose
 * chunks came over another connection), and the run ends bit-identical to
 * its undisturbed twin (the parameters' SHA-256 the workers report). (A
 * stray that comes before the rank's first chunk is the in-process
 * tests': tests/collective/test-strays.c.) */
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

static void begin(run *u)
{
    Ferry__TrainBegin b[2];
    ProtobufCMessage *msgs[2];
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
        msgs[r] = &b[r].base;
    }
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

static void epochs_and_end(run *u)
{
    Ferry__TrainEpoch ep = FERRY__TRAIN_EPOCH__INIT;
    ep.session = u->session;
    ProtobufCMessage *msgs[2] = {&ep.base, &ep.base};
    ferry_bytes_t out[2];
    u->rc = 0;
    for (int e = 1; e <= EPOCHS && u->rc == 0; e++) {
        u->rc = call_all(u, "ferry.train.epoch", msgs, out);
        for (int r = 0; r < 2; r++)
            cluster_free_bytes(&out[r]);
    }
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

static void *epochs_main(void *arg)
{
    epochs_and_end(arg);
    return NULL;
}

/* ---- the stray ------------------------------------------------------------------- */

typedef struct stray {
    run *u;
    const char *token;
    uint64_t count_delta; /* from the all-reduce's floats: the stray's count */
    uint64_t count;
    int rc;         /* of the stray that went in (kept or refused at once) */
    uint64_t step;
    char msg[1024];
} stray;

static int send_chunk(rpc_channel *ch, uint64_t session, uint64_t step, uint64_t count,
                      char *msg, size_t msglen)
{
    float *zeros = calloc(count ? count : 1, sizeof(float));
    cr_assert(zeros);
    int rc = e2e_exchange_chunk(ch, session, step, 0, count, zeros, count, msg, msglen);
    free(zeros);
    return rc;
}

/* Aims at the step after next on rank 0, as learnt from the refusal of a
 * chunk for step 1 (long done), until the stray goes in or is refused for
 * itself (not for a step over). */
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
        cr_assert(e2e_now_ms() - t0 < 20000, "the stray never went in: %s", s->msg);
        int rc = send_chunk(ch, s->u->session, 1, 1, msg, sizeof msg);
        const char *at = strstr(msg, "collectives up to ");
        /* Mid-run: a few steps in, the neighbour's chunks known. */
        if (rc != FERRY_EINVAL || !at || sscanf(at, "collectives up to %llu", &done) != 1 ||
            done < 10)
            continue;
        s->step = done + 2;
        s->rc = send_chunk(ch, s->u->session, s->step, s->count, s->msg, sizeof s->msg);
        if (s->rc == 0 || (s->rc == FERRY_EINVAL && !strstr(s->msg, "are done")))
            break;
    }
    rpc_channel_destroy(ch);
    rpc_client_close(cl);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert(uv_loop_close(&loop) == 0, "a handle was left open");
}

/* A run of session `id`, with a stray claiming `count` floats (0: none). */
static void run_with(run *u, uint64_t id, uint64_t count_delta, bool stray_on,
                     const char *token)
{
    u->session = id;
    u->err[0] = u->sha[0] = 0;
    begin(u);
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, epochs_main, u) == 0);
    if (stray_on) {
        stray s = {.u = u, .token = token, .count_delta = count_delta};
        send_stray(&s);
        cr_log_info("stray of %llu floats for step %llu: %s %s", (unsigned long long)s.count,
                    (unsigned long long)s.step, ferry_err_name(s.rc), s.msg);
        /* Rank 1's chunks came over its own connection: the stray's is
         * another, refused at once naming both. */
        cr_assert(s.rc == FERRY_EINVAL && strstr(s.msg, "claims to be rank 1's") &&
                      strstr(s.msg, "come from ipv"),
                  "the stray was not refused as not rank 1's: %s (%s)", ferry_err_name(s.rc),
                  s.msg);
    }
    pthread_join(th, NULL);
}

static void setup_run(run *u, char addr[2][128], char *token)
{
    e2e_start(2);
    e2e_worker_address(0, addr[0], 128);
    e2e_worker_address(1, addr[1], 128);
    e2e_cluster_token(token, CONF_TOKEN_LEN + 1);
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
 * `count_delta`: the same parameters at the end. */
static void run_twins(run *u, uint64_t twin_id, uint64_t id, uint64_t count_delta)
{
    char addr[2][128], token[CONF_TOKEN_LEN + 1];
    setup_run(u, addr, token);
    run_with(u, twin_id, 0, false, token);
    cr_assert(u->rc == 0, "the undisturbed twin: %s", u->err);
    char twin[80];
    snprintf(twin, sizeof twin, "%s", u->sha);
    run_with(u, id, count_delta, true, token);
    cr_assert(u->rc == 0, "the run with a stray failed: %s", u->err);
    cr_assert_str_eq(u->sha, twin, "the run with a stray differs from its twin");
    cluster_module_fini(&u->m);
}

Test(e2e_chunk_strays, a_wrong_count_chunk_leaves_the_run_identical_to_its_twin)
{
    run u = {0};
    run_twins(&u, 0x7a1, 0x57a1, 3);
}

Test(e2e_chunk_strays, a_zero_chunk_ahead_is_refused_and_the_run_stays_identical_to_its_twin)
{
    run u = {0};
    run_twins(&u, 0x7a2, 0x57a2, 0);
    /* The cluster trains the next run as ever. */
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", "1", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}
