/* Workers that stop, hang, get killed or crash: every failure names the
 * worker and its address, and nothing hangs. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void assert_names(const char *err, int rank, const char *what)
{
    char who[160];
    snprintf(who, sizeof who, "worker %d (%s)%s%s", rank, T.target[rank],
             what ? ": " : "", what ? what : "");
    cr_assert(strstr(err, who), "'%s' does not name '%s'", err, who);
}

/* ---- a worker destroyed in the middle of a call --------------------------- */

static void *destroy_later(void *arg)
{
    (void)arg;
    sleep_ms(300);
    rt_worker *w = T.w[0];
    T.w[0] = NULL;
    rt_worker_destroy(w, 0);
    return NULL;
}

TC_TEST(cluster_failure, a_worker_stopped_mid_call_is_named)
{
    tc_workers(1);
    tc_cluster(20000, 0, 0);
    tc_load_faulty();
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, destroy_later, NULL) == 0);
    ferry_bytes_t in = tc_str("10000"), out;
    int rc = cluster_call(T.cl, &T.mod, 0, "sleep", &in, &out);
    pthread_join(th, NULL);
    cr_assert_neq(rc, 0, "the call outlived its worker");
    assert_names(cluster_error(T.cl), 0, "module faulty.so function sleep");
}

/* ---- a peer that never answers, and one that is not there ----------------- */

TC_TEST(cluster_failure, a_hung_peer_is_named_not_waited_for)
{
    T.n = 1;
    snprintf(T.target[0], sizeof T.target[0], "127.0.0.1:%d", tc_silent_server());
    const char *targets[] = {T.target[0]};
    cluster_opts o = {.token = TC_TOKEN, .call_timeout_ms = 1000, .heartbeat_ms = -1};
    cr_assert(cluster_create(targets, 1, &o, &T.cl) == 0);
    int rc = cluster_wait_ready(T.cl, 500);
    cr_assert_eq(rc, FERRY_ETIMEDOUT);
    cr_assert(strstr(cluster_error(T.cl), "1 of 1 workers did not answer"), "%s",
              cluster_error(T.cl));
    assert_names(cluster_error(T.cl), 0, "ping");

    tc_read_module("faulty.so");
    rc = cluster_load_module(T.cl, "faulty.so", T.bytes, T.len, &T.mod);
    cr_assert_eq(rc, FERRY_ETIMEDOUT, "%s", ferry_err_name(rc));
    assert_names(cluster_error(T.cl), 0, "module faulty.so");
}

TC_TEST(cluster_failure, a_worker_that_is_not_there_is_named)
{
    tc_workers(2);
    /* Nothing listens on worker 1's port any more: connection refused. */
    rt_worker_destroy(T.w[1], 0);
    T.w[1] = NULL;
    const char *targets[] = {T.target[0], T.target[1]};
    cluster_opts o = {.token = TC_TOKEN};
    cr_assert(cluster_create(targets, 2, &o, &T.cl) == 0);
    int rc = cluster_wait_ready(T.cl, 300);
    cr_assert_eq(rc, FERRY_ETIMEDOUT);
    cr_assert(strstr(cluster_error(T.cl), "1 of 2 workers did not answer"), "%s",
              cluster_error(T.cl));
    assert_names(cluster_error(T.cl), 1, "ping");
}

/* ---- a worker killed with SIGKILL during a call --------------------------- */

static void *kill_later(void *arg)
{
    size_t slot = (size_t)arg;
    sleep_ms(300);
    kill(T.child[slot], SIGKILL);
    return NULL;
}

TC_TEST(cluster_failure, a_killed_worker_fails_its_call_by_name)
{
    tc_child_worker();
    tc_cluster(3000, 0, 0);
    tc_load_faulty();
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, kill_later, (void *)0) == 0);
    ferry_bytes_t in = tc_str("2500"), out;
    int rc = cluster_call(T.cl, &T.mod, 0, "sleep", &in, &out);
    pthread_join(th, NULL);
    cr_assert_neq(rc, 0, "the call survived its worker");
    assert_names(cluster_error(T.cl), 0,
                 "module faulty.so function sleep: connection lost");

    /* The cluster knows it is gone: the next call says so at once. */
    rc = cluster_call(T.cl, &T.mod, 0, "echo", NULL, &out);
    cr_assert_eq(rc, FERRY_EUNAVAIL, "%s", ferry_err_name(rc));
    assert_names(cluster_error(T.cl), 0,
                 "module faulty.so function echo: worker is down");
}

TC_TEST(cluster_failure, call_any_moves_the_work_of_a_killed_worker)
{
    tc_child_worker(); /* fork before this process starts gRPC */
    tc_worker(TC_TOKEN);
    tc_cluster(2000, 0, 0);
    tc_load_faulty();
    enum { N = 400 };
    static ferry_bytes_t in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = tc_str("20");
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, kill_later, (void *)0) == 0);
    int rc = cluster_call_any(T.cl, &T.mod, "nap", N, in, out, 4);
    pthread_join(th, NULL);
    cr_assert(rc == 0, "%s", cluster_error(T.cl));
    /* Every call has its result, the ones worker 0 held when it died
     * included: worker 1 ran them. It did most of the work (~2 s of it on
     * two workers; worker 0 dies at 0.3 s). */
    int by[2] = {0, 0};
    for (int i = 0; i < N; i++) {
        char text[32];
        snprintf(text, sizeof text, "%.*s", (int)out[i].len,
                 out[i].data ? (const char *)out[i].data : "");
        int rank = -1;
        cr_assert(sscanf(text, "rank %d", &rank) == 1 && (rank == 0 || rank == 1),
                  "call %d: '%s'", i, text);
        by[rank]++;
        cluster_free_bytes(&out[i]);
    }
    fprintf(stderr, "call_any: worker 0 ran %d calls before it was killed, worker 1 %d\n",
            by[0], by[1]);
    cr_assert(by[1] > N / 2, "worker 1 ran %d of %d calls, worker 0 %d", by[1], N, by[0]);
    /* Worker 0 did die on the way: */
    ferry_bytes_t o;
    cr_assert_eq(cluster_call(T.cl, &T.mod, 0, "echo", NULL, &o), FERRY_EUNAVAIL);
}

/* ---- a worker that hangs: the heartbeat notices --------------------------- */

static void *stop_later(void *arg)
{
    size_t slot = (size_t)arg;
    sleep_ms(300);
    kill(T.child[slot], SIGSTOP);
    return NULL;
}

TC_TEST(cluster_failure, the_heartbeat_finds_a_hung_worker_while_another_works)
{
    tc_child_worker();
    tc_child_worker();
    tc_cluster(60000, 500, 200);
    tc_load_faulty();
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, stop_later, (void *)1) == 0);
    /* Worker 1's call would last 30 s and its deadline is a minute away. */
    ferry_bytes_t in[2] = {tc_str("1500"), tc_str("30000")}, out[2];
    int rc = cluster_call_all(T.cl, &T.mod, "sleep", in, out);
    pthread_join(th, NULL);
    cr_assert_eq(rc, FERRY_EUNAVAIL, "%s: %s", ferry_err_name(rc), cluster_error(T.cl));
    assert_names(cluster_error(T.cl), 1, "module faulty.so function sleep");
    cr_assert(strstr(cluster_error(T.cl), "stopped answering pings"), "%s",
              cluster_error(T.cl));
}

/* ---- a function that crashes its worker ----------------------------------- */

typedef struct restarter {
    size_t slot;
    int rc;
} restarter;

/* Plays the supervisor: once the child died, starts a worker on the same
 * port and state directory, which finds the crash record. */
static void *restart_after_death(void *arg)
{
    restarter *r = arg;
    waitpid(T.child[r->slot], NULL, 0);
    T.child[r->slot] = 0;
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", T.port[r->slot]);
    rt_worker_opts o = {.listen = listen,
                        .state_dir = T.state[r->slot],
                        .token = TC_TOKEN,
                        .rank = (int)r->slot,
                        .restarts = 1};
    r->rc = rt_worker_create(&o, &T.w[r->slot]);
    return NULL;
}

/* `function` crashes worker 0; the error names it with `signal`, and the
 * restarted worker serves the next call. */
static void crash_and_recover(const char *function, const char *signal)
{
    tc_child_worker();
    tc_cluster(10000, 0, 0);
    tc_load_faulty();
    restarter rs = {.slot = 0, .rc = -1};
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, restart_after_death, &rs) == 0);
    ferry_bytes_t out;
    int rc = cluster_call(T.cl, &T.mod, 0, function, NULL, &out);
    pthread_join(th, NULL);
    cr_assert(rs.rc == 0, "the restarted worker did not start: %s",
              ferry_strerror(rs.rc));
    cr_assert_eq(rc, FERRY_EREMOTE, "%s", ferry_err_name(rc));
    const char *err = cluster_error(T.cl);
    char want[128];
    snprintf(want, sizeof want, "module faulty.so function %s: worker crashed: %s",
             function, signal);
    assert_names(err, 0, want);
    cr_assert(strstr(err, "restarted by its supervisor"), "%s", err);

    /* The new process lost the module from memory: the cluster gives it
     * back before the next call. */
    ferry_bytes_t in = tc_str("after the crash");
    rc = cluster_call(T.cl, &T.mod, 0, "echo", &in, &out);
    cr_assert(rc == 0, "%s", cluster_error(T.cl));
    tc_assert_bytes(&out, "after the crash");
    cluster_free_bytes(&out);
}

TC_TEST(cluster_failure, an_abort_is_named_and_the_restarted_worker_serves_again)
{
    crash_and_recover("abort", "signal 6 (SIGABRT)");
}

TC_TEST(cluster_failure, a_segfault_is_named_and_the_restarted_worker_serves_again)
{
    crash_and_recover("segv", "signal 11 (SIGSEGV)");
}

/* ---- a crash record older than the call ----------------------------------- */

/* SIGKILLs the child after `ms` (no crash record: SIGKILL is not caught)
 * and starts it again on the same port and state directory, which still
 * holds the record of a crash from before. */
typedef struct killer {
    restarter rs;
    int ms;
} killer;

static void *kill_and_restart(void *arg)
{
    killer *k = arg;
    sleep_ms(k->ms);
    kill(T.child[k->rs.slot], SIGKILL);
    return restart_after_death(&k->rs);
}

/* A worker with an old crash record, a cluster that has never pinged it
 * (no wait_ready) with the heartbeat every `heartbeat_ms` (-1: none) or,
 * with `seen`, one that has seen it answer a ping, and a call during which
 * the worker is SIGKILLed after `ms` and restarted. Returns the call's
 * result; the error is the cluster's. */
static int call_through_a_restart(int64_t heartbeat_ms, bool seen, int ms)
{
    tc_old_crash("module old.so function boom: signal 11 (SIGSEGV)");
    tc_child_worker();
    tc_cluster_unready(10000, heartbeat_ms);
    if (seen) {
        /* The worker's pid and crash record become the cluster's reference
         * here, before the call, rather than whenever a heartbeat lands. */
        const cluster_worker *w;
        cr_assert(cluster_survey(T.cl, false, &w) == 0, "%s", cluster_error(T.cl));
        cr_assert(w[0].alive && w[0].ping, "the worker did not answer its ping");
    }
    tc_load_faulty();
    killer k = {.rs = {.slot = 0, .rc = -1}, .ms = ms};
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, kill_and_restart, &k) == 0);
    ferry_bytes_t in = tc_str("5000"), out;
    int rc = cluster_call(T.cl, &T.mod, 0, "sleep", &in, &out);
    pthread_join(th, NULL);
    cr_assert(k.rs.rc == 0, "the restarted worker did not start: %s",
              ferry_strerror(k.rs.rc));
    const char *err = cluster_error(T.cl);
    cr_assert(!strstr(err, "crashed") && !strstr(err, "old.so"),
              "an old crash is blamed on this call: %s", err);
    assert_names(err, 0, "module faulty.so function sleep: connection lost");
    return rc;
}

TC_TEST(cluster_failure, an_old_crash_record_is_not_blamed_on_a_call_to_an_unseen_worker)
{
    int rc = call_through_a_restart(-1, false, 300);
    cr_assert_eq(rc, FERRY_ECONNRESET, "%s", ferry_err_name(rc));
    cr_assert(strstr(cluster_error(T.cl), "the worker answers again"), "%s",
              cluster_error(T.cl));
    /* The restarted worker serves the next call. */
    ferry_bytes_t out;
    rc = cluster_call(T.cl, &T.mod, 0, "echo", NULL, &out);
    cr_assert(rc == 0, "%s", cluster_error(T.cl));
    cluster_free_bytes(&out);
}

TC_TEST(cluster_failure, a_restart_of_a_worker_seen_before_is_named_not_its_old_crash)
{
    /* Heartbeats run too, at 100 ms: their answers, during the call and
     * after the restart, must not blur the pid the cluster first saw. */
    int rc = call_through_a_restart(100, true, 300);
    cr_assert_eq(rc, FERRY_ECONNRESET, "%s", ferry_err_name(rc));
    cr_assert(strstr(cluster_error(T.cl), "the worker restarted (pid"), "%s",
              cluster_error(T.cl));
}

/* ---- a worker lost close to the call's deadline --------------------------- */

typedef struct late_kill {
    size_t slot;
    int ms;
} late_kill;

static void *kill_at(void *arg)
{
    late_kill *k = arg;
    sleep_ms(k->ms);
    kill(T.child[k->slot], SIGKILL);
    return NULL;
}

TC_TEST(cluster_failure, a_worker_lost_near_the_deadline_fails_the_call_by_its_deadline)
{
    tc_child_worker();
    tc_cluster(1500, 0, 0);
    tc_load_faulty();
    /* The diagnosis of the lost connection (is it coming back?) must not
     * outlast the call's own 1500 ms. */
    late_kill k = {.slot = 0, .ms = 1200};
    double start = tc_now_ms();
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, kill_at, &k) == 0);
    ferry_bytes_t in = tc_str("10000"), out;
    int rc = cluster_call(T.cl, &T.mod, 0, "sleep", &in, &out);
    double took = tc_now_ms() - start;
    pthread_join(th, NULL);
    cr_assert_neq(rc, 0, "the call survived its worker");
    assert_names(cluster_error(T.cl), 0, "module faulty.so function sleep");
    cr_assert(took < 2500, "the call ended %.0f ms after it began (deadline 1500 ms): %s",
              took, cluster_error(T.cl));
}
