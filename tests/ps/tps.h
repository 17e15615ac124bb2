/* tests/ps — the shared fixture: W ranks in this test process, each with
 * its own rt_ps_store and its own rpc_server on 127.0.0.1:0 serving Push
 * and Pull on the handler pool (the store as their data), as a worker
 * does. Sessions open with tps_open_all(); rt_ps_clients come from
 * tps_client(). A loop of the test's own with a raw channel to each rank
 * sends hand-made Push and Pull calls, to read a shard's version and values
 * and to check what a refusal says. tps_start_worker() starts a real
 * rt_worker, for the token check that guards Push and Pull.
 *
 * Criterion forks each test: everything gRPC is made inside the test. The
 * checks that end a test (the loop closes clean, no leak in sanitizer
 * builds) run in tps_finish(), called from the body by TPS_TEST: Criterion
 * 2.4.1 reports a test whose .fini fails as passed. tps_teardown (.fini)
 * only releases what a failed test left behind. */
#ifndef FERRY_TESTS_PS_TPS_H
#define FERRY_TESTS_PS_TPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include "proto/raw.h"
#include "rpc/rpc.h"
#include "runtime/ps/ps.h"
#include "runtime/runtime.h"
#include "runtime/train/train.h"

#define TPS_MAX_RANKS   4
#define TPS_MAX_CLIENTS 16
#define TPS_ERRLEN      512
/* A call that should succeed gives up after this long (a broken
 * implementation fails the test rather than hanging it). */
#define TPS_TIMEOUT_MS 10000
#define TPS_TOKEN      "feedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedface"
/* Every session's secret (RT_PS_SECRET_BYTES): the fixture's clients and
 * hand-made pushes and pulls carry it unless a request sets its own. */
#define TPS_SECRET ((const uint8_t *)"0123456789abcdef0123456789ABCDEF")

typedef struct tps_rank {
    rt_ps_store *store;
    rpc_server *server;
    rpc_channel *ch; /* the test's raw channel to it */
    char addr[32];   /* "127.0.0.1:PORT" */
} tps_rank;

typedef struct tps_world {
    int world;
    tps_rank r[TPS_MAX_RANKS];
    const char *peers[TPS_MAX_RANKS];
    rt_ps_client *clients[TPS_MAX_CLIENTS];
    uv_loop_t loop;
    bool loop_open;
    rpc_client *client;
    /* tps_start_worker's */
    char dir[64];
    rt_worker *worker;
    char worker_addr[32];
    rpc_channel *extra[8]; /* tps_channel_to's */
    rpc_call calls[8];     /* tps_pull_start's, in fixture memory */
    bool call_used[8];
    void *allocs[32];
    bool finished;
} tps_world;

extern tps_world T;

void tps_setup(void);
void tps_teardown(void);
/* Destroys the clients, the channels, the servers, the stores and the
 * worker, trims rpc's buffer pool and asserts that the loop closed clean
 * and (sanitizer builds) that nothing leaked. */
void tps_finish(void);

#define TPS_TEST(suite, name, ...)                                                       \
    static void tps_body_##suite##_##name(void);                                         \
    Test(suite, name, .init = tps_setup, .fini = tps_teardown, ##__VA_ARGS__)            \
    {                                                                                    \
        tps_body_##suite##_##name();                                                     \
        tps_finish();                                                                    \
    }                                                                                    \
    static void tps_body_##suite##_##name(void)

/* Starts `world` ranks: a store and a server each; fills T.peers. */
void tps_start(int world);
/* Destroys rank's server now and measures how long that took (ms). */
double tps_stop_server(int rank);
/* Starts rank's server again on the port it had (its store unchanged).
 * Any thread; returns rpc_server_create's result, no assertion. */
int tps_restart_server(int rank);

/* Session options for rank `rank` of T.world: SGD with `lr`, momentum 0. */
typedef struct tps_sess {
    uint64_t session;
    int shards;
    int staleness;
    rt_ps_algo algo;
    float lr;
    uint64_t schedule_samples;
    uint32_t batch, push_steps; /* 0: TPS_BATCH, TPS_PUSH_STEPS */
    const float *init;
    size_t n;
} tps_sess;

/* Room for the samples the tests' pushes claim (rt_ps_session_opts). */
#define TPS_BATCH      (1u << 20)
#define TPS_PUSH_STEPS 1024u

/* Opens the session on rank's store; returns rt_ps_open's result. */
int tps_open(int rank, const tps_sess *s, char *err, size_t errlen);
/* Opens it on every rank; asserts it worked. */
void tps_open_all(const tps_sess *s);

/* A client for `rank` of the session (kept for tps_finish to destroy);
 * asserts it was created. peers NULL: T.peers. */
rt_ps_client *tps_client(int rank, const tps_sess *s, const char *const *peers,
                         int64_t timeout_ms);

/* ---- hand-made Push and Pull ------------------------------------------------- */

typedef struct tps_reply {
    int rc;
    char err[TPS_ERRLEN]; /* the error text; "" on success */
    uint64_t version, samples, min_clock, staleness;
    size_t n; /* floats the reply carried (a pull's, a push-pull's) */
} tps_reply;

/* The test's channel to rank (made on first use). */
rpc_channel *tps_channel(int rank);

/* Starts a Pull of `rq` (with TPS_SECRET unless rq->secret is set) to
 * rank, in a call of the fixture's memory (so a
 * failed test can leave it in flight); complete it with tps_pull_finish.
 * call->done says whether it has completed (run the loop meanwhile). */
rpc_call *tps_pull_start(int rank, const Ferry__PullRequest *rq, int64_t timeout_ms);
/* Waits for a pull from tps_pull_start, copies up to `cap` floats into
 * `vals` (may be NULL), fills `out` and frees the call's slot; returns
 * out->rc. */
int tps_pull_finish(rpc_call *call, float *vals, size_t cap, tps_reply *out);
/* The same for a Push of `rq` with `n` floats of payload (copied by the
 * start); tps_push_finish copies a push-pull's values. */
rpc_call *tps_push_start(int rank, const Ferry__PushRequest *rq, const float *vals,
                         size_t n, int64_t timeout_ms);
int tps_push_finish(rpc_call *call, float *vals, size_t cap, tps_reply *out);
/* tps_pull_start and tps_pull_finish at once (TPS_TIMEOUT_MS). */
int tps_pull_raw(int rank, const Ferry__PullRequest *rq, float *vals, size_t cap,
                 tps_reply *out);
/* A Push of `rq` with `n` floats of payload, or exactly `bytes` bytes of
 * it when nonzero (a ragged payload); waits. */
int tps_push_raw(int rank, const Ferry__PushRequest *rq, const float *vals, size_t n,
                 size_t bytes, tps_reply *out);
/* Any method with an already packed head, on any channel; waits. */
int tps_call_bytes(rpc_channel *ch, const char *method, const void *head, size_t head_len,
                   const void *payload, size_t len, tps_reply *out);

/* Shard `shard` of `session` on rank, read with an unbounded pull (step 0):
 * its values into vals (cap floats) and its version; asserts it worked. */
void tps_snapshot(int rank, uint64_t session, int shard, float *vals, size_t cap,
                  uint64_t *version, uint64_t *samples);

/* Runs the test's loop for `ms` (its calls progress meanwhile). */
void tps_run_loop_ms(int ms);

/* ---- a real worker ---------------------------------------------------------------- */

/* Starts an rt_worker (cpu, token TPS_TOKEN) on 127.0.0.1:0 with a private
 * state directory; fills T.worker_addr. */
void tps_start_worker(void);
/* A channel of the test's loop to `addr` carrying `token` (NULL: none);
 * destroyed by tps_finish. */
rpc_channel *tps_channel_to(const char *addr, const char *token);

/* ---- data and time -------------------------------------------------------------------
 */

/* malloc that the fixture frees if the test does not. */
void *tps_alloc(size_t len);
void tps_free(void *p);

double tps_now_ms(void);
void tps_sleep_ms(int ms);

#endif
