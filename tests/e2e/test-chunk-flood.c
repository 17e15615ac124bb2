/* A real worker flooded with well-formed ReduceChunks for collectives it
 * has not started, by a client holding the cluster token: the worker keeps
 * them within its session's budget (RT_COMM_HELD_BYTES), refuses the rest
 * with NOT_FOUND, and its RSS stays within that budget and comes back down
 * when the session ends.
 *
 * The session is the test's own: worker 0 is told to begin a 2-worker sync
 * session whose other rank never begins, so it waits in its first
 * broadcast for the begin's timeout, its collective session registered
 * meanwhile; the flood claims to be rank 1, exchanging (a world of 2),
 * for steps 2 to 16, with the session's secret (the test began it): the
 * bounds hold for a sender that has it. A chunk without it is refused at
 * once and charged nothing. */
#include <pthread.h>
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
#include "tcommon.h"
#include "runtime/collective/coll_int.h"

TestSuite(e2e_chunk_flood, .init = e2e_setup, .fini = e2e_teardown, .timeout = 300);

#define SESSION     0x5eedf100dull
#define CHUNK       65536 /* bytes: the session's chunk */
#define CHUNKS      64    /* of a collective */
#define FLOOD       3000
#define BEGIN_MS    10000 /* the begin's timeout: how long the session lives */

static const uint8_t secret[RT_COMM_SECRET_BYTES] = {0xf1, 0x00, 0xd5};

typedef struct begin_job {
    cluster *cl;
    cluster_module m;
    const char *peers[2];
    int rc;
    char err[512];
} begin_job;

static void *begin_main(void *arg)
{
    begin_job *j = arg;
    Ferry__TrainBegin b = FERRY__TRAIN_BEGIN__INIT;
    b.session = SESSION;
    b.epochs = 1;
    b.rank = 0;
    b.world = 2;
    b.n_peers = 2;
    b.peers = (char **)j->peers;
    b.chunk_bytes = CHUNK;
    b.timeout_ms = BEGIN_MS;
    b.submitter = "the flood test";
    b.secret.data = (uint8_t *)secret;
    b.secret.len = sizeof secret;
    ferry_bytes_t in = {0}, out = {0};
    in.len = protobuf_c_message_get_packed_size(&b.base);
    in.data = malloc(in.len);
    protobuf_c_message_pack(&b.base, in.data);
    j->rc = cluster_call(j->cl, &j->m, 0, "ferry.train.begin", &in, &out);
    snprintf(j->err, sizeof j->err, "%s", j->rc ? cluster_error(j->cl) : "");
    free(in.data);
    cluster_free_bytes(&out);
    return NULL;
}


static int send_chunk(rpc_channel *ch, uint64_t step, uint32_t chunk, const float *payload,
                      char *msg, size_t msglen)
{
    return e2e_exchange_chunk(ch, SESSION, secret, step, chunk,
                              (uint64_t)CHUNKS * (CHUNK / sizeof(float)), payload,
                              CHUNK / sizeof(float), msg, msglen);
}

Test(e2e_chunk_flood, a_worker_keeps_a_flood_of_future_chunks_within_its_budget)
{
    e2e_start(2);
    char addr[2][128], token[CONF_TOKEN_LEN + 1];
    e2e_worker_address(0, addr[0], sizeof addr[0]);
    e2e_worker_address(1, addr[1], sizeof addr[1]);
    e2e_cluster_token(token, sizeof token);
    pid_t worker = e2e_worker_pid_file(0);
    cr_assert(worker > 0);

    begin_job j = {.cl = e2e_cluster(NULL, 60000), .peers = {addr[0], addr[1]}};
    e2e_load_module(j.cl, e2e_task("linreg"), "linreg.so", &j.m);
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, begin_main, &j) == 0);

    uv_loop_t loop;
    cr_assert(uv_loop_init(&loop) == 0);
    rpc_client *cl = NULL;
    cr_assert(rpc_client_create(&loop, &cl) == 0);
    rpc_channel_opts co = {.token = token, .max_payload = (size_t)4 << 20};
    rpc_channel *ch = NULL;
    cr_assert(rpc_channel_create(cl, addr[0], &co, &ch) == 0);
    float *payload = calloc(CHUNK / sizeof(float), sizeof(float));
    cr_assert(payload);

    /* The session is registered once a chunk is kept. */
    char msg[1024] = "";
    int rc;
    double t0 = e2e_now_ms();
    while ((rc = send_chunk(ch, 2, 0, payload, msg, sizeof msg)) == FERRY_ENOENT &&
           e2e_now_ms() - t0 < 10000)
        e2e_sleep_ms(20);
    cr_assert(rc == 0, "the begin's session never took a chunk: %s (%s)", ferry_err_name(rc),
              msg);
    rc = e2e_exchange_chunk(ch, SESSION, NULL, 2, 1,
                            (uint64_t)CHUNKS * (CHUNK / sizeof(float)), payload,
                            CHUNK / sizeof(float), msg, sizeof msg);
    cr_assert(rc == FERRY_EACCES && strstr(msg, "does not carry the session's secret"),
              "a chunk without the secret: %s (%s)", ferry_err_name(rc), msg);
    long rss0 = tcom_rss_kib(worker);
    int kept = 1, refused = 0;
    for (int i = 1; i < FLOOD; i++) {
        rc = send_chunk(ch, 2 + (uint64_t)(i % 15), (uint32_t)(i / 15 % CHUNKS), payload, msg,
                        sizeof msg);
        cr_assert(rc == 0 || (rc == FERRY_ENOENT && strstr(msg, "MiB")), "chunk %d: %s (%s)",
                  i, ferry_err_name(rc), msg);
        kept += rc == 0;
        refused += rc != 0;
    }
    double flood_ms = e2e_now_ms() - t0;
    long rss1 = tcom_rss_kib(worker);
    cr_assert(flood_ms < BEGIN_MS, "the flood outlived the session (%.0f ms)", flood_ms);
    size_t want = RT_COMM_HELD_BYTES / (CHUNK + RT_COMM_HELD_OVERHEAD);
    cr_assert((size_t)kept == want, "%d of %d chunks kept, want %zu", kept, FLOOD, want);

    pthread_join(th, NULL);
    cr_assert(j.rc != 0, "a begin whose other rank never came succeeded");
    long rss2 = tcom_rss_kib(worker);
    cr_log_info("flood of %d chunks of %d bytes on a worker: %d kept, %d refused; RSS %ld -> "
                "%ld KiB, %ld KiB after the session ended",
                FLOOD, CHUNK, kept, refused, rss0, rss1, rss2);
#if !defined(__SANITIZE_ADDRESS__)
    long budget_kib = (long)(RT_COMM_HELD_BYTES >> 10);
    cr_assert(rss1 - rss0 <= 2 * budget_kib, "RSS grew by %ld KiB for a budget of %ld KiB",
              rss1 - rss0, budget_kib);
    cr_assert(rss2 - rss0 <= budget_kib / 2, "RSS %ld KiB after the session ended, %ld before",
              rss2, rss0);
#endif
    free(payload);
    rpc_channel_destroy(ch);
    rpc_client_close(cl);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert(uv_loop_close(&loop) == 0, "a handle was left open");
    cluster_module_fini(&j.m);

    /* The worker trains the next run as ever. */
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", "1", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}
