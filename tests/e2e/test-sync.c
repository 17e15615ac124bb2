/* Synchronous data-parallel training through the CLI on 2-worker clusters:
 * the mlp, with and without gradient compression, and the cnn train to
 * their usual accuracy with every worker ending on the same parameters;
 * --mode, --workers, --batch and --grad-compression are checked against
 * the cluster; a worker killed or stopped mid-training fails the submit by
 * name within the timeout, and the cluster trains again afterwards; a
 * ReduceChunk from outside is refused without the token and for a session
 * that does not exist. */
#include <dirent.h>
#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "config/config.h"
#include "e2e.h"
#include "e2e_train.h"
#include "ferry.pb-c.h"
#include "rpc/rpc.h"
#include "runtime/collective/collective.h"
#include "proto/raw.h"

/* A worker this test stopped (SIGSTOP): continued before teardown, so that
 * `ferry shutdown` can stop it the ordinary way. */
static pid_t stopped;

static void sync_setup(void)
{
    /* Two workers on two cores: one BLAS thread each. The supervisor gives
     * each local worker its share of the cores unless this is set; setting
     * it keeps the tests' timings whatever that default becomes. The
     * workers inherit the environment of `ferry start`. */
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    stopped = 0;
    e2e_setup();
}

static void sync_teardown(void)
{
    if (stopped > 0)
        kill(stopped, SIGCONT);
    stopped = 0;
    e2e_teardown();
}

TestSuite(e2e_sync, .init = sync_setup, .fini = sync_teardown, .timeout = 240);

/* Asserts the one JSON object of a sync run of `workers` workers that
 * ended with the same parameters on every worker. */
static void expect_sync_json(const e2e_run *r, int workers, const char *compression)
{
    const char *j = r->out;
    cr_assert(j[0] == '{' && strchr(j, '\n') == j + strlen(j) - 1,
              "stdout is not one JSON line:\n%s", j);
    cr_assert(e2e_json_is(j, "mode", "sync", true), "%s", j);
    cr_assert_eq(e2e_json_number(j, "workers"), workers, "%s", j);
    cr_assert(e2e_json_is(j, "grad_compression", compression, true), "%s", j);
    cr_assert(e2e_json_is(j, "params_identical", "true", false), "%s", j);
    const char *sha = strstr(j, "\"params_sha256\":\"");
    cr_assert(sha && strspn(sha + 17, "0123456789abcdef") == 64, "%s", j);
    if (workers > 1)
        cr_assert(e2e_json_number(j, "allreduce_s") > 0, "%s", j);
    /* linreg's compute rounds to 0.000 s */
    cr_assert(e2e_json_number(j, "compute_s") >= 0, "%s", j);
    cr_assert(e2e_json_number(j, "samples_per_s") > 0, "%s", j);
}

/* ---- training ------------------------------------------------------------------ */

Test(e2e_sync, the_mlp_on_2_workers_reaches_85_percent_in_2_epochs)
{
    e2e_start(2);
    e2e_run r;
    e2e_ferry(&r, 180000, "submit", e2e_task("mlp"), "--epochs", "2", "--json", NULL);
    E2E_EXPECT(&r, 0);
    expect_sync_json(&r, 2, "none");
    double acc = e2e_json_number(r.out, "test_accuracy");
    cr_log_info("sync mlp, 2 workers, 2 epochs: test accuracy %.4f, %.0f samples/s, "
                "all-reduce %.2f s of %.2f s",
                acc, e2e_json_number(r.out, "samples_per_s"),
                e2e_json_number(r.out, "allreduce_s"), e2e_json_number(r.out, "train_s"));
    cr_assert(acc >= 0.85 && acc <= 1.0, "test accuracy %g after 2 epochs:\n%s", acc,
              r.out);
    cr_assert(e2e_json_number(r.out, "buckets") >= 1, "%s", r.out);
    cr_assert(e2e_json_number(r.out, "compute_s") > 0, "%s", r.out);
    /* The progress lines (stderr with --json): the mode, then each epoch
     * with its all-reduce share. */
    cr_assert(e2e_has(r.err, "training mlp in sync mode on 2 workers") &&
                  e2e_has(r.err, "all-reduce by exchange") &&
                  e2e_has(r.err, "batch 128 (global)"),
              "%s", r.err);
    cr_assert(e2e_has(r.err, "epoch 1/2") && e2e_has(r.err, "epoch 2/2"), "%s", r.err);
    const char *line = strstr(r.err, "epoch 2/2");
    const char *share = line ? strstr(line, "all-reduce ") : NULL;
    cr_assert(share && strstr(share, "% of a step"), "no all-reduce share in:\n%s",
              r.err);
    e2e_run_fini(&r);
}

Test(e2e_sync, gradients_as_fp16_reach_85_percent_and_lz4_trains)
{
    e2e_start(2);
    e2e_run r;
    e2e_ferry(&r, 180000, "submit", e2e_task("mlp"), "--epochs", "2",
              "--grad-compression", "fp16", "--json", NULL);
    E2E_EXPECT(&r, 0);
    expect_sync_json(&r, 2, "fp16");
    double acc = e2e_json_number(r.out, "test_accuracy");
    cr_log_info("sync mlp, fp16 gradients, 2 epochs: test accuracy %.4f", acc);
    cr_assert(acc >= 0.85 && acc <= 1.0, "test accuracy %g with fp16 gradients:\n%s", acc,
              r.out);
    cr_assert(e2e_has(r.err, "gradients as fp16"), "%s", r.err);
    e2e_run_fini(&r);

    /* Small chunks and buckets: many lz4 frames a step. */
    e2e_ferry(&r, 180000, "submit", e2e_task("mlp"), "--epochs", "1",
              "--grad-compression", "lz4", "--chunk-bytes", "65536", "--bucket-bytes",
              "131072", "--json", NULL);
    E2E_EXPECT(&r, 0);
    expect_sync_json(&r, 2, "lz4");
    acc = e2e_json_number(r.out, "test_accuracy");
    cr_assert(acc > 0.80 && acc <= 1.0, "test accuracy %g with lz4 gradients:\n%s", acc,
              r.out);
    cr_assert(e2e_json_number(r.out, "buckets") >= 2, "%s", r.out);
    cr_assert(e2e_has(r.err, "gradients as lz4"), "%s", r.err);
    e2e_run_fini(&r);
}

Test(e2e_sync, the_cnn_trains_an_epoch_on_2_workers)
{
    /* About 30 s an epoch on two cores (each worker convolves half of each
     * batch; most of a step is compute, not all-reduce). */
    e2e_start(2);
    e2e_run r;
    e2e_ferry(&r, 200000, "submit", e2e_task("cnn"), "--epochs", "1", "--json", NULL);
    E2E_EXPECT(&r, 0);
    expect_sync_json(&r, 2, "none");
    double acc = e2e_json_number(r.out, "test_accuracy");
    cr_log_info("sync cnn, 2 workers, 1 epoch: test accuracy %.4f in %.1f s", acc,
                e2e_json_number(r.out, "wall_s"));
    cr_assert(acc > 0.75 && acc <= 1.0, "test accuracy %g after an epoch:\n%s", acc,
              r.out);
    e2e_run_fini(&r);
}

/* ---- options against the cluster --------------------------------------------- */

Test(e2e_sync, workers_mode_batch_and_compression_are_checked_against_the_cluster)
{
    e2e_start(2);
    e2e_run r;
    /* One worker of two, in sync mode: a ring of one. */
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", "1", "--workers", "1",
              "--json", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_json_is(r.out, "mode", "sync", true), "%s", r.out);
    cr_assert_eq(e2e_json_number(r.out, "workers"), 1, "%s", r.out);
    cr_assert(e2e_json_is(r.out, "params_identical", "true", false), "%s", r.out);
    cr_assert(e2e_json_number(r.out, "test_loss") < 0.05, "%s", r.out);
    e2e_run_fini(&r);

    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", "1", "--mode",
              "single", "--json", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_json_is(r.out, "mode", "single", true), "%s", r.out);
    cr_assert_eq(e2e_json_number(r.out, "workers"), 1, "%s", r.out);
    cr_assert(e2e_has(r.err, "training linreg on worker 0"), "%s", r.err);
    e2e_run_fini(&r);

    /* More workers than the cluster has: both numbers named. */
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("linreg"), "--epochs", "1", "--workers",
              "3", NULL);
    cr_assert(r.status == 1 || r.status == 2, "exit %d\n%s\n%s", r.status, r.out, r.err);
    cr_assert(e2e_has(r.err, "--workers 3") && e2e_has(r.err, "2 workers"), "%s", r.err);
    e2e_run_fini(&r);

    /* A global batch that cannot give each worker a sample. */
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("linreg"), "--epochs", "1", "--batch",
              "1", NULL);
    cr_assert(r.status == 1 || r.status == 2, "exit %d\n%s\n%s", r.status, r.out, r.err);
    cr_assert(e2e_has(r.err, "batch of 1") && e2e_has(r.err, "2 workers"), "%s", r.err);
    e2e_run_fini(&r);

    static const char *const bad[][3] = {
        {"--grad-compression", "zstd", "--grad-compression: expected none, lz4 or fp16"},
        {"--mode", "hogwild", "--mode: expected sync, async or single"},
        {"--workers", "0", "--workers: expected a number of workers"},
        {"--timeout-ms", "5", "--timeout-ms: expected a timeout"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("linreg"), bad[i][0], bad[i][1],
                  NULL);
        E2E_EXPECT(&r, 2);
        cr_assert(e2e_has(r.err, bad[i][2]) && e2e_has(r.err, bad[i][1]), "%s %s:\n%s",
                  bad[i][0], bad[i][1], r.err);
        e2e_run_fini(&r);
    }
}

/* ---- a worker lost mid-training ------------------------------------------------ */

/* Starts a long sync run of the mlp in the background and returns its pid
 * once its first epoch is underway; out/err get its output files. Without
 * restarts, a lost worker ends the run (tests/faults has the rollbacks). */
static pid_t start_long_run(char out[600], char err[600])
{
    e2e_next_outputs(out, err);
    pid_t pid = e2e_spawn("submit", e2e_task("mlp"), "--epochs", "20", "--timeout-ms",
                          "3000", "--max-restarts", "0", NULL);
    /* The header line comes once every worker has begun (data loaded,
     * parameters broadcast); then the first epoch runs for ~1.5 s. */
    bool begun = e2e_wait_for_text(out, "training mlp in sync mode on 2 workers", 60000);
    if (!begun) {
        char *o = e2e_slurp(out), *e = e2e_slurp(err);
        cr_assert_fail("the run did not begin:\nstdout:\n%s\nstderr:\n%s", o, e);
    }
    e2e_sleep_ms(400);
    cr_assert(e2e_wait_exit(pid, 0) == -1, "the long run already ended");
    return pid;
}

/* The new run trains on both workers, and `ferry shutdown` leaves no worker
 * (of `pids`) and no supervisor behind. */
static void train_again_then_shut_down(const pid_t *pids, size_t n)
{
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("mlp"), "--epochs", "1", "--json", NULL);
    E2E_EXPECT(&r, 0);
    expect_sync_json(&r, 2, "none");
    e2e_run_fini(&r);
    pid_t sup = e2e_supervisor_pid();
    pid_t now[2] = {e2e_worker_pid_file(0), e2e_worker_pid_file(1)};
    e2e_ferry(&r, E2E_CMD_MS, "shutdown", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    for (size_t i = 0; i < n; i++)
        cr_assert(e2e_wait_gone(pids[i], 5000), "worker pid %d still runs", (int)pids[i]);
    for (int i = 0; i < 2; i++)
        cr_assert(e2e_wait_gone(now[i], 5000), "worker %d (pid %d) still runs", i,
                  (int)now[i]);
    cr_assert(e2e_wait_gone(sup, 5000), "the supervisor (pid %d) still runs", (int)sup);
}

Test(e2e_sync, a_worker_killed_mid_training_fails_the_submit_by_name)
{
    e2e_start(2);
    char addr1[128];
    e2e_worker_address(1, addr1, sizeof addr1);
    pid_t p0 = e2e_worker_pid_file(0), p1 = e2e_worker_pid_file(1);
    cr_assert(p0 > 0 && p1 > 0);
    char out[600], err[600];
    pid_t run = start_long_run(out, err);

    double t0 = e2e_now_ms();
    cr_assert(kill(p1, SIGKILL) == 0);
    int status = e2e_wait_exit(run, 15000);
    double took = e2e_now_ms() - t0;
    char *o = e2e_slurp(out), *e = e2e_slurp(err);
    cr_assert(status != -1, "submit still runs 15 s after worker 1 died:\n%s\n%s", o, e);
    cr_assert(status == 1, "exit %d\nstdout:\n%s\nstderr:\n%s", status, o, e);
    cr_log_info("killed worker 1: submit failed after %.0f ms: %s", took, e);
    /* Worker 0's step may fail first (its neighbour is gone), but the news
     * is the worker lost: the error names it first, with its address. */
    char first[192];
    snprintf(first, sizeof first, "every worker stops with the step): worker 1 (%s): ",
             addr1);
    cr_assert(e2e_has(e, first), "the error does not begin with worker 1 (%s):\n%s",
              addr1, e);
    free(o);
    free(e);

    /* The supervisor restarts worker 1; then the cluster trains again. */
    cr_assert(e2e_wait_gone(p1, 5000));
    double end = e2e_now_ms() + 20000;
    bool back = false;
    while (!back && e2e_now_ms() < end) {
        e2e_run r;
        e2e_ferry(&r, E2E_CMD_MS, "status", NULL);
        pid_t np = e2e_worker_pid_file(1);
        back = r.status == 0 && np > 0 && np != p1;
        e2e_run_fini(&r);
        if (!back)
            e2e_sleep_ms(200);
    }
    cr_assert(back, "worker 1 did not come back within 20 s");
    pid_t old[] = {p0, p1};
    train_again_then_shut_down(old, 2);
}

Test(e2e_sync, a_stopped_worker_fails_the_submit_by_name_within_the_timeout)
{
    e2e_start(2);
    char addr1[128];
    e2e_worker_address(1, addr1, sizeof addr1);
    pid_t p0 = e2e_worker_pid_file(0), p1 = e2e_worker_pid_file(1);
    cr_assert(p0 > 0 && p1 > 0);
    char out[600], err[600];
    pid_t run = start_long_run(out, err);

    double t0 = e2e_now_ms();
    cr_assert(kill(p1, SIGSTOP) == 0);
    stopped = p1;
    /* --timeout-ms 3000 for the ring; the master's heartbeat finds a
     * stopped worker in about two missed pings (1 s each). */
    int status = e2e_wait_exit(run, 15000);
    double took = e2e_now_ms() - t0;
    char *o = e2e_slurp(out), *e = e2e_slurp(err);
    cr_assert(status != -1, "submit still runs 15 s after worker 1 stopped:\n%s\n%s", o,
              e);
    cr_assert(status == 1, "exit %d\nstdout:\n%s\nstderr:\n%s", status, o, e);
    cr_log_info("stopped worker 1: submit failed after %.0f ms: %s", took, e);
    cr_assert(took < 3000 + 5000,
              "took %.0f ms: more than the timeout and the heartbeat's slack", took);
    cr_assert((e2e_has(e, "worker 1") || e2e_has(e, "rank 1")) && e2e_has(e, addr1),
              "the error does not name worker 1 (%s):\n%s", addr1, e);
    free(o);
    free(e);

    /* Continued, it is the same process: it fails the step it was in (its
     * ring is gone) and serves again. */
    cr_assert(kill(p1, SIGCONT) == 0);
    stopped = 0;
    cr_assert(e2e_wait_idle(2, 20000), "the workers did not settle within 20 s of SIGCONT");
    cr_assert_eq(e2e_worker_pid_file(1), p1);
    pid_t old[] = {p0, p1};
    train_again_then_shut_down(old, 2);
}

/* ---- ReduceChunk from outside ------------------------------------------------ */

/* A ReduceChunk of 4 floats for `session` over a channel with `token`
 * (NULL: none) to `addr`; returns the call's result, its text in msg. */
static int send_chunk(rpc_client *cl, const char *addr, const char *token,
                      uint64_t session, char *msg, size_t msglen)
{
    rpc_channel_opts co = {.token = token};
    rpc_channel *ch = NULL;
    int rc = rpc_channel_create(cl, addr, &co, &ch);
    cr_assert(rc == 0, "rpc_channel_create(%s): %s", addr, ferry_err_name(rc));
    Ferry__ReduceChunkRequest req = FERRY__REDUCE_CHUNK_REQUEST__INIT;
    req.job = session;
    req.step = 1;
    req.phase = 0;
    req.chunk = 0;
    req.from_rank = 0;
    req.ring_step = 0;
    req.count = 8;
    req.elem = FERRY__ELEM__ELEM_F32;
    float payload[4] = {1e6f, 1e6f, 1e6f, 1e6f};
    proto_raw out_head = proto_raw_pack(&req.base);
    rpc_msg_out out = {.head_bytes = out_head.data,
                       .head_len = out_head.len,
                       .payload = payload,
                       .payload_len = sizeof payload,
                       .codec = RPC_CODEC_RAW};
    rpc_call call = {0};
    rc = rpc_call_start(ch, &call, PROTO_METHOD_REDUCE_CHUNK, &out, 10000, NULL);
    cr_assert(rc == 0, "rpc_call_start: %s", ferry_err_name(rc));
    rc = rpc_call_wait(&call);
    snprintf(msg, msglen, "%s", call.errmsg ? call.errmsg : "");
    rpc_call_fini(&call);
    rpc_channel_destroy(ch);
    return rc;
}

Test(e2e_sync, a_reduce_chunk_needs_the_token_and_a_session)
{
    e2e_start(2);
    char addr[128], token[CONF_TOKEN_LEN + 1];
    e2e_worker_address(1, addr, sizeof addr);
    e2e_cluster_token(token, sizeof token);
    char wrong[CONF_TOKEN_LEN + 1];
    snprintf(wrong, sizeof wrong, "%s", token);
    wrong[0] = wrong[0] == '0' ? '1' : '0';

    uv_loop_t loop;
    cr_assert(uv_loop_init(&loop) == 0);
    rpc_client *cl = NULL;
    cr_assert(rpc_client_create(&loop, &cl) == 0);
    char msg[512];
    int rc = send_chunk(cl, addr, NULL, 12345, msg, sizeof msg);
    cr_assert(rc == FERRY_EUNAUTH, "no token: %s (%s), expected EUNAUTH",
              ferry_err_name(rc), msg);
    rc = send_chunk(cl, addr, wrong, 12345, msg, sizeof msg);
    cr_assert(rc == FERRY_EUNAUTH, "a wrong token: %s (%s), expected EUNAUTH",
              ferry_err_name(rc), msg);
    rc = send_chunk(cl, addr, token, 12345, msg, sizeof msg);
    cr_assert(rc == FERRY_ENOENT, "no such session: %s (%s), expected ENOENT",
              ferry_err_name(rc), msg);
    cr_assert(e2e_has(msg, "no collective session") && e2e_has(msg, "12345"), "%s", msg);
    rpc_client_close(cl);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert(uv_loop_close(&loop) == 0, "a handle was left open");

    /* The refused chunks disturbed nothing: the workers train together. */
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", "1", "--json", NULL);
    E2E_EXPECT(&r, 0);
    expect_sync_json(&r, 2, "none");
    e2e_run_fini(&r);
}
