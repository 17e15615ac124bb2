/* A training start that fails leaves the cluster free at once, on 3-worker
 * clusters: a worker SIGKILLed while the others are in their begin, the
 * submit itself SIGKILLed there, a submit refused because another run holds
 * some of the workers (with a long --timeout-ms), and an async start that
 * fails. After each, the next `ferry submit` trains at once and no healthy
 * worker is restarted (the wedge grace is 3 s here, so a begin left stuck
 * past its cancellation would get its worker killed within the test). And
 * `ferry start` keeps the state directory of an attached worker that shares
 * its FERRY_HOME.
 *
 * "At once" is a liveness bound, not a performance claim: the next submit
 * must be done within 2 s more than an undisturbed submit of the same run
 * took on the same cluster just before (a refused or waiting start took
 * 30-75 s). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "e2e.h"
#include "e2e_train.h"
#include "ferry.pb-c.h"
#include "runtime/collective/collective.h"
#include "tcommon.h"

#define WORKERS 3
/* Over an undisturbed submit's own time. */
#define LIVENESS_MARGIN_MS 2000

static void fs_setup(void)
{
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    e2e_setup();
}

TestSuite(e2e_failed_start, .init = fs_setup, .fini = e2e_teardown, .timeout = 240);

static pid_t pids[WORKERS];

/* Three workers whose calls wedge them 3 s after a cancellation they
 * ignore, with the cluster file's `more` lines; their pids. */
static void start3_with(const char *more)
{
    char ini[256];
    snprintf(ini, sizeof ini, "[cluster]\nwedge_grace_ms = 3000\n%s", more);
    const char *conf = e2e_write_file("wedge.ini", ini);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "3", "--base-port", "0", "--config", conf, NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    for (int i = 0; i < WORKERS; i++)
        cr_assert((pids[i] = e2e_worker_pid_file(i)) > 0);
}

static void start3(void)
{
    start3_with("");
}

/* A short sync run of linreg on every worker; asserted to succeed. Its
 * wall time in ms. */
static double train_linreg(const char *why)
{
    e2e_run r;
    double t0 = e2e_now_ms();
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", "1", NULL);
    double ms = e2e_now_ms() - t0;
    cr_assert(r.status == 0, "%s: exit %d\nstdout:\n%s\nstderr:\n%s\n%s", why, r.status,
              r.out, r.err, e2e_logs());
    cr_assert(e2e_has(r.out, "on 3 workers"), "%s:\n%s", why, r.out);
    e2e_run_fini(&r);
    return ms;
}

/* The next submit, started as the failure is reported, is done within
 * LIVENESS_MARGIN_MS more than an undisturbed one. */
static void trains_at_once(double failed_at, double undisturbed_ms)
{
    train_linreg("the submit after the failed start");
    double took = e2e_now_ms() - failed_at;
    cr_log_info(
        "the next submit was done %.0f ms after the failure (undisturbed: %.0f ms)", took,
        undisturbed_ms);
    cr_assert(took < undisturbed_ms + LIVENESS_MARGIN_MS,
              "the next submit was done %.0f ms after the failure; an undisturbed one "
              "takes %.0f ms\n%s",
              took, undisturbed_ms, e2e_logs());
}

/* Workers other than `lost` (-1: none) still run the pid they had, and the
 * supervisor restarted nobody else; waits out the wedge grace first. */
static void no_healthy_worker_restarted(int lost)
{
    e2e_sleep_ms(3500);
    for (int i = 0; i < WORKERS; i++)
        if (i != lost)
            cr_assert(e2e_worker_pid_file(i) == pids[i] && e2e_alive(pids[i]),
                      "worker %d was restarted\n%s", i, e2e_logs());
    char *log = e2e_slurp_log("supervisor.log");
    cr_assert(log);
    cr_assert(!e2e_has(log, "wedged"), "a worker was wedged:\n%s", log);
    for (int i = 0; i < WORKERS; i++) {
        char crashed[64];
        snprintf(crashed, sizeof crashed, "worker %d crashed", i);
        cr_assert(i == lost || !e2e_has(log, crashed), "%s:\n%s", crashed, log);
    }
    free(log);
}

/* Waits until `n` workers run a call (their begins), or fails. */
static void wait_begins(cluster *cl, int n)
{
    double end = e2e_now_ms() + 60000;
    while (e2e_now_ms() < end) {
        const cluster_worker *w;
        cluster_survey(cl, true, &w);
        int busy = 0;
        for (int i = 0; i < WORKERS; i++)
            busy += w[i].stats && w[i].stats->in_flight > 0;
        if (busy >= n)
            return;
        e2e_sleep_ms(5);
    }
    cr_assert_fail("the begins never ran\n%s", e2e_logs());
}

/* Worker 2 SIGKILLed while the others are in their begin of an mlp run in
 * `mode`: the submit fails promptly, naming it (`said` too), and the next
 * submit trains at once. */
static void worker_killed_in_start(const char *mode, const char *said)
{
    start3();
    double undisturbed = train_linreg("the undisturbed submit");
    cluster *cl = e2e_cluster(NULL, 5000);
    char out[600], err[600];
    e2e_next_outputs(out, err);
    /* mlp: loading its data keeps the begins running long enough to be
     * seen; in sync mode the others then wait for worker 2 at the start's
     * barrier. */
    pid_t run =
        e2e_spawn("submit", e2e_task("mlp"), "--epochs", "1", "--mode", mode, NULL);
    wait_begins(cl, 2);
    double killed = e2e_now_ms();
    cr_assert(kill(pids[2], SIGKILL) == 0);
    int status = e2e_wait_exit(run, 20000);
    double failed_at = e2e_now_ms();
    char *e = e2e_slurp(err);
    cr_log_info("%s start: submit exited %.0f ms after worker 2 died", mode,
                failed_at - killed);
    cr_assert(status == 1, "exit %d:\n%s", status, e);
    cr_assert(e2e_has(e, "worker 2") && e2e_has(e, said), "%s", e);
    cr_assert(failed_at - killed < 10000, "submit exited %.0f ms after the failure:\n%s",
              failed_at - killed, e);
    free(e);
    trains_at_once(failed_at, undisturbed);
    no_healthy_worker_restarted(2);
}

Test(e2e_failed_start, a_worker_killed_during_the_start_leaves_the_others_free)
{
    worker_killed_in_start("sync", "cannot start training");
}

Test(e2e_failed_start, a_submit_killed_during_the_start_leaves_every_worker_free)
{
    start3();
    double undisturbed = train_linreg("the undisturbed submit");
    cluster *cl = e2e_cluster(NULL, 5000);
    pid_t run = e2e_spawn("submit", e2e_task("mlp"), "--epochs", "1", NULL);
    wait_begins(cl, 1);
    cr_assert(kill(run, SIGKILL) == 0);
    cr_assert(e2e_wait_exit(run, 5000) == 128 + SIGKILL);
    trains_at_once(e2e_now_ms(), undisturbed);
    no_healthy_worker_restarted(-1);
}

/* A run on workers 0 and 1, under way; its pid. */
static pid_t hold_two(char out[600], char err[600])
{
    e2e_next_outputs(out, err);
    pid_t pid =
        e2e_spawn("submit", e2e_task("mlp"), "--epochs", "2", "--workers", "2", NULL);
    bool begun = e2e_wait_for_text(out, "training mlp in sync mode on 2 workers", 60000);
    char *o = e2e_slurp(out), *e = e2e_slurp(err);
    cr_assert(begun, "the holding run did not begin:\n%s\n%s", o, e);
    free(o);
    free(e);
    return pid;
}

/* A submit of all 3 workers while the holding run has 0 and 1: refused
 * naming a busy worker, promptly. */
static void refused(const char *mode, const char *timeout_ms)
{
    e2e_run r;
    e2e_ferry(&r, 60000, "submit", e2e_task("mlp"), "--epochs", "1", "--mode", mode,
              "--timeout-ms", timeout_ms, NULL);
    cr_assert(r.status == 1, "exit %d\n%s\n%s", r.status, r.out, r.err);
    cr_assert(e2e_has(r.err, "for another submitter"), "%s", r.err);
    cr_log_info("the refused %s submit exited after %.0f ms", mode, r.ms);
    /* Refused at the first busy worker: it does not wait on the others. */
    cr_assert(r.ms < 15000, "the refused submit took %.0f ms to exit:\n%s", r.ms, r.err);
    e2e_run_fini(&r);
}

static void refused_then_free(const char *mode, const char *timeout_ms)
{
    start3();
    double undisturbed = train_linreg("the undisturbed submit");
    char out[600], err[600];
    pid_t hold = hold_two(out, err);
    /* Twice: the first refusal's cleanup must leave the idle worker free
     * for the second (an async end once pulled from shards held by the
     * other run, for the whole timeout). */
    refused(mode, timeout_ms);
    refused(mode, timeout_ms);
    int status = e2e_wait_exit(hold, 120000);
    char *o = e2e_slurp(out), *e = e2e_slurp(err);
    cr_assert(status == 0, "the holding run: exit %d\n%s\n%s", status, o, e);
    free(o);
    free(e);
    trains_at_once(e2e_now_ms(), undisturbed);
    no_healthy_worker_restarted(-1);
}

Test(e2e_failed_start, a_refused_submit_with_a_long_timeout_leaves_nothing_behind)
{
    refused_then_free("sync", "120000");
}

Test(e2e_failed_start, a_failed_async_start_exits_at_once_and_leaves_nothing_behind)
{
    refused_then_free("async", "120000");
}

Test(e2e_failed_start, an_async_start_losing_a_worker_exits_at_once)
{
    /* The begins may all be done before the kill: then the first epoch
     * loses worker 2, a shard holder, and the run stops. */
    worker_killed_in_start("async", "mlp.so");
}

/* Whether worker `i` is past its data and shards in its async begin: the
 * begin has returned, or it says it waits for the other ranks'. */
static bool past_its_shards(const cluster_worker *w, int i)
{
    char name[32];
    snprintf(name, sizeof name, "worker-%d.log", i);
    char *log = e2e_slurp_log(name);
    bool waits = log && e2e_has(log, "has its data and shards");
    free(log);
    return waits || (w[i].stats && w[i].stats->in_flight == 0);
}

/* In async mode the ranks start on their own. Worker 2 SIGSTOPped in its
 * begin, and the submit SIGKILLed once workers 0 and 1 are past their data
 * and shards: neither keeps the session (a begin that had returned would
 * keep it until it idled out, 30 s), and the next submit trains at once.
 * No heartbeat: the submit must not notice worker 2 stopped and end the
 * start itself. */
Test(e2e_failed_start, a_submit_killed_in_an_async_start_leaves_every_worker_free)
{
    start3_with("heartbeat_ms = 0\n");
    double undisturbed = train_linreg("the undisturbed submit");
    cluster *cl = e2e_cluster(NULL, 5000);
    pid_t run =
        e2e_spawn("submit", e2e_task("mlp"), "--epochs", "1", "--mode", "async", NULL);
    wait_begins(cl, WORKERS);
    cr_assert(kill(pids[2], SIGSTOP) == 0);
    bool past = false;
    double end = e2e_now_ms() + 60000;
    while (!past && e2e_now_ms() < end) {
        const cluster_worker *w;
        cluster_survey(cl, true, &w); /* worker 2 answers nothing */
        past = past_its_shards(w, 0) && past_its_shards(w, 1);
        if (!past)
            e2e_sleep_ms(20);
    }
    cr_assert(kill(run, SIGKILL) == 0);
    int status = e2e_wait_exit(run, 5000);
    double killed_at = e2e_now_ms();
    cr_assert(kill(pids[2], SIGCONT) == 0);
    cr_assert(past, "workers 0 and 1 never got past their data\n%s", e2e_logs());
    cr_assert(status == 128 + SIGKILL, "the submit exited %d before it was killed\n%s",
              status, e2e_logs());
    trains_at_once(killed_at, undisturbed);
    no_healthy_worker_restarted(-1);
}

Test(e2e_failed_start, start_keeps_an_attached_workers_state_under_the_same_home)
{
    char token[600];
    snprintf(token, sizeof token, "%s-token", e2e_home);
    cr_assert(conf_token_create(token) == 0);
    int port = tcom_free_port();
    char listen[64], state[700];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    /* Its default state directory: FERRY_HOME/workers/PORT. */
    snprintf(state, sizeof state, "%s/workers/%d", e2e_home, port);
    pid_t attached = e2e_spawn("worker", "--listen", listen, "--token-file", token, NULL);
    struct stat st;
    for (int i = 0; i < 1000 && stat(state, &st) != 0; i++)
        usleep(10000);
    cr_assert(stat(state, &st) == 0, "the attached worker made no %s", state);
    char conf[1000];
    snprintf(
        conf, sizeof conf,
        "[cluster]\ntoken_file = %s\n\n[workers]\nworker = 127.0.0.1:%d\nattach = %s\n",
        token, tcom_free_port(), listen);
    const char *path = e2e_write_file("attach.ini", conf);

    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "--config", path, NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    cr_assert(stat(state, &st) == 0 && S_ISDIR(st.st_mode),
              "ferry start removed the attached worker's %s", state);
    /* Loading a module writes to its cache there. */
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("hello"), NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "shutdown", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    cr_assert(e2e_wait_gone(attached, 5000), "the attached worker still runs");
    cr_assert(stat(state, &st) == 0, "ferry shutdown removed the attached worker's %s",
              state);
    unlink(token);
}

Test(e2e_failed_start, absurd_option_values_are_refused_with_the_real_bounds)
{
    e2e_start(1);
    static const char *const bad[][3] = {
        {"--lr", "1e30", "--lr: expected a positive learning rate from 1e-12 to 1e6"},
        {"--chunk-bytes", "64", "--chunk-bytes: expected a chunk size from 16384 bytes"},
        {"--epochs", "1000000", "--epochs: expected a number of epochs from 1 to 100000"},
        {"--weight-decay", "1e9",
         "--weight-decay: expected a weight decay from 0 to 1e6"},
        {"--workers", "300", "--workers: expected a number of workers from 1 to 256"},
        {"--staleness", "-1", "--staleness: expected a number of steps from 0 to"},
        {"--push-every", "0",
         "--push-every: expected a number of steps from 1 to 1048576"},
    };
    e2e_expect_option_errors(bad, sizeof bad / sizeof bad[0]);
}

/* ---- a begin held in its start, seen from a client of its own ------------------ */

typedef struct held_begin {
    cluster *cl;
    cluster_module m;
    int rc;
    char err[1024];
    double t0, ms;
} held_begin;

/* Packs a TrainBegin of session `id` for rank `rank` of both workers. */
static void pack_begin(uint64_t id, uint32_t rank, uint32_t chunk_bytes,
                       ferry_bytes_t *in)
{
    static const uint8_t secret[RT_COMM_SECRET_BYTES] = {0x42};
    char a0[128], a1[128];
    e2e_worker_address(0, a0, sizeof a0);
    e2e_worker_address(1, a1, sizeof a1);
    char *peers[] = {a0, a1};
    Ferry__TrainBegin b = FERRY__TRAIN_BEGIN__INIT;
    b.session = id;
    b.batch = 64;
    b.mode = "sync";
    b.rank = rank;
    b.world = 2;
    b.n_peers = 2;
    b.peers = peers;
    b.chunk_bytes = chunk_bytes;
    b.timeout_ms = 60000;
    b.submitter = "the test's own client";
    b.secret.data = (uint8_t *)secret;
    b.secret.len = sizeof secret;
    in->len = ferry__train_begin__get_packed_size(&b);
    in->data = malloc(in->len);
    cr_assert(in->data);
    ferry__train_begin__pack(&b, in->data);
}

static void *begin_rank0(void *arg)
{
    held_begin *h = arg;
    ferry_bytes_t in, out = {0};
    pack_begin(42, 0, 0, &in);
    h->t0 = e2e_now_ms();
    h->rc = cluster_call(h->cl, &h->m, 0, "ferry.train.begin", &in, &out);
    h->ms = e2e_now_ms() - h->t0;
    snprintf(h->err, sizeof h->err, "%s", h->rc ? cluster_error(h->cl) : "");
    cluster_free_bytes(&out);
    free(in.data);
    return NULL;
}

static cluster *own_cluster(void)
{
    char a0[128], a1[128], token[256];
    e2e_worker_address(0, a0, sizeof a0);
    e2e_worker_address(1, a1, sizeof a1);
    e2e_cluster_token(token, sizeof token);
    const char *targets[] = {a0, a1};
    cluster_opts o = {.token = token, .call_timeout_ms = 120000, .heartbeat_ms = -1};
    cluster *cl = NULL;
    cr_assert(cluster_create(targets, 2, &o, &cl) == 0);
    cr_assert(cluster_wait_ready(cl, 10000) == 0, "%s", cluster_error(cl));
    return cl;
}

static void load_linreg(cluster *cl, cluster_module *m)
{
    FILE *f = fopen(e2e_task("linreg"), "rb");
    cr_assert(f);
    static char bytes[1 << 20];
    size_t len = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    cr_assert(len > 0 && len < sizeof bytes);
    cr_assert(cluster_load_module(cl, "linreg.so", bytes, len, m) == 0, "%s",
              cluster_error(cl));
}

Test(e2e_failed_start, an_end_stops_a_begin_still_waiting_for_its_peers)
{
    e2e_start(2);
    /* Rank 0 of a session whose rank 1 never begins: it waits to send the
     * parameters, up to the session's 60 s timeout. */
    held_begin h = {.cl = own_cluster()};
    load_linreg(h.cl, &h.m);
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, begin_rank0, &h) == 0);
    cluster *cl = own_cluster();
    cluster_module m;
    load_linreg(cl, &m);
    double end = e2e_now_ms() + 30000;
    bool running = false;
    while (!running && e2e_now_ms() < end) {
        const cluster_worker *w;
        cluster_survey(cl, true, &w);
        running = w[0].stats && w[0].stats->in_flight > 0;
        if (!running)
            e2e_sleep_ms(5);
    }
    cr_assert(running, "the begin never ran");

    /* Another submitter is told the session is still starting. */
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("linreg"), "--mode", "single",
              "--epochs", "1", NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "the test's own client") && e2e_has(r.err, "still starting"),
              "%s", r.err);
    e2e_run_fini(&r);

    /* A begin's chunks are checked by the worker too. */
    ferry_bytes_t in, out = {0};
    pack_begin(43, 1, 64, &in);
    cr_assert(cluster_call(cl, &m, 1, "ferry.train.begin", &in, &out) != 0);
    cr_assert(e2e_has(cluster_error(cl), "all-reduce chunks of 64 bytes: at least 16384"),
              "%s", cluster_error(cl));
    free(in.data);

    /* The end reaches the session while its begin runs, and stops it. */
    Ferry__TrainEnd e = FERRY__TRAIN_END__INIT;
    e.session = 42;
    in.len = ferry__train_end__get_packed_size(&e);
    in.data = malloc(in.len);
    ferry__train_end__pack(&e, in.data);
    double t0 = e2e_now_ms();
    cluster_call(cl, &m, 0, "ferry.train.end", &in, &out);
    cluster_free_bytes(&out);
    free(in.data);
    cr_assert(!e2e_has(cluster_error(cl), "busy"), "%s", cluster_error(cl));
    pthread_join(th, NULL);
    cr_log_info("the end returned after %.0f ms; the begin ended after %.0f ms (%.0f ms "
                "before the end was sent): %s",
                e2e_now_ms() - t0, h.ms, t0 - h.t0, h.err);
    /* Stopped while it waited for the peer (or, had it just finished, as
     * it finished). */
    cr_assert(h.rc != 0 && (e2e_has(h.err, "cancelled while waiting for broadcast") ||
                            e2e_has(h.err, "the session was ended while it started")),
              "%s", h.err);
    cr_assert(h.ms < 30000, "the begin ran %.0f ms, as if nobody had ended it", h.ms);
    cluster_module_fini(&h.m);
    cluster_destroy(h.cl);
    cluster_module_fini(&m);
    cluster_destroy(cl);

    e2e_ferry(&r, 60000, "submit", e2e_task("linreg"), "--mode", "single", "--epochs",
              "1", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}
