/* tests/collective — failures: a rank that never joins a collective, a
 * right neighbour whose server goes away (or never was), a peer that never
 * registers the session, ranks that disagree on the collective or on the
 * session's options, a cancelled wait, and a session destroyed with work
 * outstanding. Each failure names the rank (and its address) within the
 * session's timeout, and sticks.
 *
 * Bounds: a failure must come no earlier than the timeout minus a little
 * (it is a timeout) and no later than the timeout plus FAIL_SLACK_MS (the
 * session checks for silent peers on a timer; sanitizer builds and a busy
 * 2-core machine are slow). */
#include "tcoll.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

TestSuite(failure, .timeout = 60);

#define FAIL_TIMEOUT_MS 800
#define FAIL_SLACK_MS   2500

static void assert_names(const char *err, int rank, const char *what)
{
    char name[32];
    snprintf(name, sizeof name, "rank %d", rank);
    cr_assert(strstr(err, name), "%s: the error \"%s\" does not name %s", what, err,
              name);
    cr_assert(strstr(err, R.r[rank].addr),
              "%s: the error \"%s\" does not give %s's address %s", what, err, name,
              R.r[rank].addr);
}

/* ---- a silent rank ----------------------------------------------------------------- */

#define SILENT 2

CO_TEST(failure, a_silent_rank_times_the_others_out_naming_it)
{
    int w = 3;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, FAIL_TIMEOUT_MS);
    co_join_all(&o);
    size_t n = 3 * CO_CHUNK_FLOATS;
    float **bufs = co_bufs(w, n, 1);
    co_silent_arg s = {{bufs, n}, SILENT};
    co_result res[CO_MAX_RANKS];
    co_run(co_allreduce_all_but_fn, &s, res);
    for (int r = 0; r < w; r++) {
        if (r == SILENT)
            continue;
        double ms = res[r].end_ms - res[r].start_ms;
        cr_assert(res[r].rc == FERRY_ETIMEDOUT, "rank %d: got %s (%s), want ETIMEDOUT", r,
                  ferry_err_name(res[r].rc), res[r].err);
        cr_assert(ms >= FAIL_TIMEOUT_MS - 50 && ms <= FAIL_TIMEOUT_MS + FAIL_SLACK_MS,
                  "rank %d failed after %.0f ms with a timeout of %d ms", r, ms,
                  FAIL_TIMEOUT_MS);
    }
    /* Rank 0 waits on the silent rank itself (its left neighbour); rank 1
     * on rank 0, which is stuck behind it: each names whom it waits for. */
    assert_names(res[0].err, SILENT, "rank 0");
    cr_assert(strstr(res[1].err, "rank "), "rank 1's error \"%s\" names no rank",
              res[1].err);
    cr_assert(strstr(res[1].err, "127.0.0.1:"), "rank 1's error \"%s\" gives no address",
              res[1].err);

    /* The failure sticks: later starts return it at once. */
    for (int r = 0; r < w; r++) {
        if (r == SILENT)
            continue;
        rt_comm_op *op = NULL;
        int rc = rt_comm_allreduce_start(R.r[r].comm, bufs[r], n, &op);
        cr_assert(rc == FERRY_ETIMEDOUT, "rank %d: a start after the failure gave %s", r,
                  ferry_err_name(rc));
        rc = rt_comm_broadcast_start(R.r[r].comm, bufs[r], n, 0, &op);
        cr_assert(rc == FERRY_ETIMEDOUT, "rank %d: a broadcast after the failure gave %s",
                  r, ferry_err_name(rc));
        char err[CO_ERRLEN] = "";
        rc = rt_comm_allreduce(R.r[r].comm, bufs[r], n, NULL, NULL, err, sizeof err);
        cr_assert(rc == FERRY_ETIMEDOUT,
                  "rank %d: a blocking all-reduce after the failure "
                  "gave %s",
                  r, ferry_err_name(rc));
    }
    co_free_bufs(bufs, w);
}

/* ---- a right neighbour that goes away ---------------------------------------------- */

CO_TEST(failure, a_right_neighbour_whose_server_is_gone_is_named_within_the_timeout)
{
    int w = 3;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, FAIL_TIMEOUT_MS);
    co_join_all(&o);
    size_t n = 3 * CO_CHUNK_FLOATS + 2;
    float **bufs = co_bufs(w, n, 1);
    co_allreduce_arg a = {bufs, n};
    co_run_ok(co_allreduce_fn, &a, "the all-reduce before the server goes");

    co_stop_server(1); /* rank 0's right neighbour */
    co_result res[CO_MAX_RANKS];
    co_run(co_allreduce_fn, &a, res);
    for (int r = 0; r < w; r++) {
        double ms = res[r].end_ms - res[r].start_ms;
        cr_assert(res[r].rc != 0, "rank %d's all-reduce succeeded without rank 1", r);
        cr_assert(ms <= FAIL_TIMEOUT_MS + FAIL_SLACK_MS,
                  "rank %d failed after %.0f ms with a timeout of %d ms", r, ms,
                  FAIL_TIMEOUT_MS);
    }
    cr_assert(res[0].rc == FERRY_EUNAVAIL || res[0].rc == FERRY_ETIMEDOUT,
              "rank 0: got %s (%s), want EUNAVAIL or ETIMEDOUT",
              ferry_err_name(res[0].rc), res[0].err);
    assert_names(res[0].err, 1, "rank 0");
    co_free_bufs(bufs, w);
}

/* Rank 1's server goes while rank 0 is in the middle of a collective with
 * it: rank 0's first chunks were taken (rank 1 has received bytes), the
 * next ones cannot be. Rank 2 starts only once the server is gone, so rank
 * 0 has something to send on only then. Each waits for the other's event,
 * not for a time. */
static atomic_bool server1_gone;
static atomic_ullong received_before_gone;
static double gone_ms;

static bool wait_for(bool (*ready)(void), int ms)
{
    for (double end = co_now_ms() + ms; !ready(); co_sleep_ms(2))
        if (co_now_ms() > end)
            return false;
    return true;
}

static bool rank1_received(void)
{
    rt_comm_stats st;
    rt_comm_get_stats(R.r[1].comm, &st);
    return st.wire_received > 0;
}

static bool rank1_gone(void)
{
    return atomic_load(&server1_gone);
}

static int server_goes_fn(int rank, void *arg, char *err, size_t errlen)
{
    co_allreduce_arg *a = arg;
    rt_comm *c = R.r[rank].comm;
    if (rank == 2 && !wait_for(rank1_gone, 10000)) {
        snprintf(err, errlen, "rank 1's server did not go within 10 s");
        return FERRY_ETIMEDOUT;
    }
    rt_comm_op *op = NULL;
    int rc = rt_comm_allreduce_start(c, a->bufs[rank], a->n, &op);
    if (rc) {
        snprintf(err, errlen, "start: %s", ferry_err_name(rc));
        return rc;
    }
    if (rank == 1) {
        bool got = wait_for(rank1_received, 10000);
        rt_comm_stats st;
        rt_comm_get_stats(c, &st);
        atomic_store(&received_before_gone, got ? st.wire_received : 0);
        gone_ms = co_now_ms();
        co_stop_server(1);
        atomic_store(&server1_gone, true);
    }
    return rt_comm_wait(c, op, NULL, NULL, err, errlen);
}

CO_TEST(failure, a_right_neighbour_whose_server_goes_mid_collective_is_named)
{
    int w = 3;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, FAIL_TIMEOUT_MS);
    co_join_all(&o);
    size_t n = 3 * CO_CHUNK_FLOATS + 2;
    float **bufs = co_bufs(w, n, 1);
    co_allreduce_arg a = {bufs, n};
    co_result res[CO_MAX_RANKS];
    co_run(server_goes_fn, &a, res);
    cr_assert(atomic_load(&received_before_gone) > 0,
              "rank 1 received nothing before its server went: not mid collective");
    for (int r = 0; r < w; r++) {
        double ms = res[r].end_ms - gone_ms;
        cr_assert(res[r].rc != 0, "rank %d's all-reduce succeeded without rank 1", r);
        cr_assert(ms <= FAIL_TIMEOUT_MS + FAIL_SLACK_MS,
                  "rank %d failed %.0f ms after the server went, with a timeout of %d ms",
                  r, ms, FAIL_TIMEOUT_MS);
    }
    cr_assert(res[0].rc == FERRY_EUNAVAIL || res[0].rc == FERRY_ETIMEDOUT,
              "rank 0: got %s (%s), want EUNAVAIL or ETIMEDOUT",
              ferry_err_name(res[0].rc), res[0].err);
    assert_names(res[0].err, 1, "rank 0");
    co_free_bufs(bufs, w);
}

/* The right neighbour's address has never had a server: the sends are
 * retried (the neighbour may just not be accepting yet) until the timeout,
 * then fail as unavailable, naming the rank and its address. */
CO_TEST(failure, a_right_neighbour_that_never_listened_is_named_within_the_timeout)
{
    int w = 2;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, FAIL_TIMEOUT_MS);
    co_join_all(&o);
    co_stop_server(1);
    size_t n = 100;
    float *buf = co_alloc(n * sizeof(float));
    memset(buf, 0, n * sizeof(float));
    char err[CO_ERRLEN] = "";
    double t0 = co_now_ms();
    int rc = rt_comm_allreduce(R.r[0].comm, buf, n, NULL, NULL, err, sizeof err);
    double ms = co_now_ms() - t0;
    co_free(buf);
    cr_assert(rc == FERRY_EUNAVAIL, "got %s (%s), want EUNAVAIL", ferry_err_name(rc), err);
    cr_assert(ms >= FAIL_TIMEOUT_MS - 50 && ms <= FAIL_TIMEOUT_MS + FAIL_SLACK_MS,
              "failed after %.0f ms with a timeout of %d ms", ms, FAIL_TIMEOUT_MS);
    assert_names(err, 1, "rank 0");
    cr_assert(strstr(err, "chunk 0"), "the error \"%s\" does not say which chunk", err);
    rt_comm_stats st;
    rt_comm_get_stats(R.r[0].comm, &st);
    cr_assert(st.reconnects > 0, "no send was repeated");
}

/* Two ranks, rank 1's server gone: rank 1's chunks reach rank 0, which
 * keeps them until its own have gone, and they never go. Both fail within
 * the timeout, and what rank 0 kept is freed with the collective (the leak
 * check of sanitizer builds sees it otherwise). */
CO_TEST(failure, chunks_kept_for_sends_that_never_go_are_freed)
{
    int w = 2;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, FAIL_TIMEOUT_MS);
    co_join_all(&o);
    co_stop_server(1);
    size_t n = 5 * CO_CHUNK_FLOATS + 1;
    float **bufs = co_bufs(w, n, 1);
    co_allreduce_arg a = {bufs, n};
    co_result res[CO_MAX_RANKS];
    co_run(co_allreduce_fn, &a, res);
    cr_assert(res[0].rc == FERRY_EUNAVAIL, "rank 0: got %s (%s), want EUNAVAIL",
              ferry_err_name(res[0].rc), res[0].err);
    assert_names(res[0].err, 1, "rank 0");
    cr_assert(res[1].rc == FERRY_ETIMEDOUT, "rank 1: got %s (%s), want ETIMEDOUT",
              ferry_err_name(res[1].rc), res[1].err);
    assert_names(res[1].err, 0, "rank 1");
    for (int r = 0; r < w; r++) {
        double ms = res[r].end_ms - res[r].start_ms;
        cr_assert(ms <= FAIL_TIMEOUT_MS + FAIL_SLACK_MS, "rank %d failed after %.0f ms", r,
                  ms);
    }
    co_free_bufs(bufs, w);
}

/* ---- a right neighbour that starts listening late -------------------------------- */

#define LATE_MS 300

/* Rank 1's server comes up only LATE_MS after the collective started (a
 * worker still binding its port, or the first connect losing a race in
 * gRPC): rank 0's first sends find nobody listening and are repeated. */
static int late_listener_fn(int rank, void *arg, char *err, size_t errlen)
{
    co_allreduce_arg *a = arg;
    rt_comm *c = R.r[rank].comm;
    rt_comm_op *op = NULL;
    int rc = rt_comm_allreduce_start(c, a->bufs[rank], a->n, &op);
    if (rc) {
        snprintf(err, errlen, "start: %s", ferry_err_name(rc));
        return rc;
    }
    if (rank == 1) {
        co_sleep_ms(LATE_MS);
        if ((rc = co_listen_again(1))) {
            snprintf(err, errlen, "listening again on %s: %s", R.r[1].addr,
                     ferry_err_name(rc));
            rt_comm_wait(c, op, NULL, NULL, NULL, 0);
            return rc;
        }
    }
    return rt_comm_wait(c, op, NULL, NULL, err, errlen);
}

CO_TEST(failure, a_right_neighbour_that_listens_late_is_waited_for)
{
    int w = 2;
    co_start(w);
    co_stop_server(1);
    /* Long enough for gRPC's reconnect backoff (100 ms, then x1.6). */
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, 5000);
    co_join_all(&o);
    size_t n = 5 * CO_CHUNK_FLOATS + 3;
    float **bufs = co_bufs(w, n, 1);
    double *want, *mag;
    co_reference(bufs, w, n, &want, &mag);
    co_allreduce_arg a = {bufs, n};
    double t0 = co_now_ms();
    co_run_ok(late_listener_fn, &a, "an all-reduce with a late listener");
    double ms = co_now_ms() - t0;
    co_assert_sums(bufs, w, n, want, mag, CO_F32_REL(w), CO_F32_ABS, "late listener");
    co_assert_identical(bufs, w, n, "late listener");
    cr_assert(ms >= LATE_MS, "done after %.0f ms, before rank 1 listened", ms);
    rt_comm_stats st;
    rt_comm_get_stats(R.r[0].comm, &st);
    cr_assert(st.reconnects > 0, "rank 0 never repeated a send to the late listener");
    /* The session goes on as usual. */
    co_run_ok(co_allreduce_fn, &a, "the next all-reduce");
    co_free(want);
    co_free(mag);
    co_free_bufs(bufs, w);
}

/* ---- a neighbour whose session has failed ---------------------------------------- */

/* Rank 0's all-reduce of `buf` fails with rank 1's code `want` well before
 * `within_ms`, naming rank 1 and saying `says`; `err` keeps rank 0's error
 * for the caller's own checks. */
static void expect_rank1_stopped(float *buf, size_t n, int want, double within_ms,
                                 const char *says, char *err, size_t errlen)
{
    double t0 = co_now_ms();
    int rc = rt_comm_allreduce(R.r[0].comm, buf, n, NULL, NULL, err, errlen);
    double ms = co_now_ms() - t0;
    cr_assert(rc == want, "rank 0: got %s (%s), want rank 1's %s", ferry_err_name(rc), err,
              ferry_err_name(want));
    cr_assert(ms < within_ms, "rank 0 took %.0f ms to hear that rank 1 stopped", ms);
    assert_names(err, 1, "rank 0");
    cr_assert(strstr(err, says), "rank 0's error \"%s\" does not say \"%s\"", err, says);
}

/* Rank 1 ran a collective alone and timed out waiting for rank 0. When rank
 * 0 then starts it, rank 1 refuses its chunks with its own error, and rank
 * 0 fails at once saying what happened there, not that its chunks were
 * out of some window. */
CO_TEST(failure, a_neighbour_that_failed_first_is_quoted)
{
    int w = 2;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, FAIL_TIMEOUT_MS);
    co_join_all(&o);
    size_t n = 3 * CO_CHUNK_FLOATS;
    float **bufs = co_bufs(w, n, 1);
    char err1[CO_ERRLEN] = "";
    int rc = rt_comm_allreduce(R.r[1].comm, bufs[1], n, NULL, NULL, err1, sizeof err1);
    cr_assert(rc == FERRY_ETIMEDOUT, "rank 1 alone: got %s (%s), want ETIMEDOUT",
              ferry_err_name(rc), err1);

    char err[CO_ERRLEN] = "";
    expect_rank1_stopped(bufs[0], n, FERRY_ETIMEDOUT, FAIL_TIMEOUT_MS,
                         "rank 1 of session 1 stopped (ETIMEDOUT)", err, sizeof err);
    cr_assert(strstr(err, "sent nothing"),
              "rank 0's error \"%s\" does not quote rank 1's (\"%s\")", err, err1);
    cr_assert(!strstr(err, "are done"), "rank 0's error \"%s\" talks of windows", err);
    co_free_bufs(bufs, w);
}

/* A rank that leaves the collective (its model failed) says so: its own
 * ops fail at once, and its peer's next chunk is refused with its reason,
 * well before the timeout. */
CO_TEST(failure, an_aborted_session_stops_its_peer_at_its_next_chunk)
{
    int w = 2;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, 20000);
    co_join_all(&o);
    size_t n = 3 * CO_CHUNK_FLOATS;
    float **bufs = co_bufs(w, n, 1);
    rt_comm_abort(R.r[1].comm, "the model failed at step 2");
    rt_comm_abort(R.r[1].comm, "a second reason is not kept");
    rt_comm_op *op = NULL;
    int rc = rt_comm_allreduce_start(R.r[1].comm, bufs[1], n, &op);
    cr_assert(rc == FERRY_ECANCELED, "rank 1: a start after the abort gave %s",
              ferry_err_name(rc));

    char err[CO_ERRLEN] = "";
    expect_rank1_stopped(bufs[0], n, FERRY_ECANCELED, 5000,
                         "rank 1 of session 1 stopped (ECANCELED): the model failed at step 2",
                         err, sizeof err);
    co_free_bufs(bufs, w);
}

/* ---- cancellation -------------------------------------------------------------------
 */

typedef struct cancel {
    float **bufs;
    size_t n;
    atomic_bool flag;
    double cancelled_at; /* co_now_ms() when the flag went up */
} cancel;

static bool is_cancelled(void *arg)
{
    return atomic_load(&((cancel *)arg)->flag);
}

static int cancellable_fn(int rank, void *arg, char *err, size_t errlen)
{
    cancel *c = arg;
    if (rank == SILENT)
        return 0;
    rt_comm_op *op = NULL;
    int rc = rt_comm_allreduce_start(R.r[rank].comm, c->bufs[rank], c->n, &op);
    if (rc) {
        snprintf(err, errlen, "start: %s", ferry_err_name(rc));
        return rc;
    }
    return rt_comm_wait(R.r[rank].comm, op, is_cancelled, c, err, errlen);
}

typedef struct flag_setter {
    cancel *c;
    int after_ms;
} flag_setter;

static void *set_flag_later(void *arg)
{
    flag_setter *f = arg;
    co_sleep_ms(f->after_ms);
    f->c->cancelled_at = co_now_ms();
    atomic_store(&f->c->flag, true);
    return NULL;
}

CO_TEST(failure, a_cancelled_wait_returns_ecanceled_promptly_and_sticks)
{
    int w = 3;
    co_start(w);
    /* A long timeout: only the cancellation can end the wait soon. */
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, 20000);
    co_join_all(&o);
    size_t n = 3 * CO_CHUNK_FLOATS;
    cancel c = {.bufs = co_bufs(w, n, 1), .n = n};
    atomic_init(&c.flag, false);
    flag_setter fs = {&c, 200};
    pthread_t t;
    cr_assert(pthread_create(&t, NULL, set_flag_later, &fs) == 0);
    co_result res[CO_MAX_RANKS];
    co_run(cancellable_fn, &c, res);
    pthread_join(t, NULL);
    for (int r = 0; r < w; r++) {
        if (r == SILENT)
            continue;
        double late = res[r].end_ms - c.cancelled_at;
        cr_assert(res[r].rc == FERRY_ECANCELED, "rank %d: got %s (%s), want ECANCELED", r,
                  ferry_err_name(res[r].rc), res[r].err);
        cr_assert(late >= 0 && late <= 1000,
                  "rank %d returned %.0f ms after the cancellation", r, late);
        rt_comm_op *op = NULL;
        int rc = rt_comm_allreduce_start(R.r[r].comm, c.bufs[r], n, &op);
        cr_assert(rc == FERRY_ECANCELED,
                  "rank %d: a start after the cancellation gave %s", r,
                  ferry_err_name(rc));
    }
    co_free_bufs(c.bufs, w);
}

/* ---- destroy with work outstanding ------------------------------------------------- */

/* rt_comm_destroy fails what is still running: an op started but never
 * waited for is freed with the session (the leak check would see it), and
 * chunks filed for a collective that never started here are freed too. */
CO_TEST(failure, destroying_sessions_with_ops_never_waited_for_frees_everything)
{
    int w = 3;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    size_t n = 3 * CO_CHUNK_FLOATS + 1;
    float **bufs = co_bufs(w, n, 1);
    /* Ranks 0 and 1 start; rank 2 never does, so neither can finish, and
     * rank 2 holds the chunks rank 1 sent it. */
    for (int r = 0; r < 2; r++) {
        rt_comm_op *op = NULL;
        int rc = rt_comm_allreduce_start(R.r[r].comm, bufs[r], n, &op);
        cr_assert(rc == 0, "rank %d: start: %s", r, ferry_err_name(rc));
    }
    co_sleep_ms(200);
    double t0 = co_now_ms();
    co_leave_all();
    double ms = co_now_ms() - t0;
    cr_assert(ms < 5000, "destroying three sessions took %.0f ms", ms);
    co_free_bufs(bufs, w);
}

/* ---- ranks that disagree ------------------------------------------------------------
 */

typedef struct disagree {
    float **bufs;
    size_t n[CO_MAX_RANKS];
    bool broadcast[CO_MAX_RANKS];
} disagree;

static int disagree_fn(int rank, void *arg, char *err, size_t errlen)
{
    disagree *d = arg;
    rt_comm *c = R.r[rank].comm;
    return d->broadcast[rank]
               ? rt_comm_broadcast(c, d->bufs[rank], d->n[rank], 0, NULL, NULL, err,
                                   errlen)
               : rt_comm_allreduce(c, d->bufs[rank], d->n[rank], NULL, NULL, err, errlen);
}

static void disagree_check(disagree *d, const char *what)
{
    int w = 2;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, FAIL_TIMEOUT_MS);
    co_join_all(&o);
    d->bufs = co_bufs(w, 4 * CO_CHUNK_FLOATS, 1);
    co_result res[CO_MAX_RANKS];
    co_run(disagree_fn, d, res);
    /* A rank that sees a chunk of another collective fails with EPROTO,
     * naming the sender, and cancels its own sends: the other rank may
     * then hear nothing and time out instead. Either way every rank fails,
     * and at least one says the ranks disagree. */
    int eproto = 0;
    for (int r = 0; r < w; r++) {
        double ms = res[r].end_ms - res[r].start_ms;
        cr_assert(res[r].rc == FERRY_EPROTO || res[r].rc == FERRY_ETIMEDOUT,
                  "%s: rank %d got %s (%s), want EPROTO (or ETIMEDOUT)", what, r,
                  ferry_err_name(res[r].rc), res[r].err);
        cr_assert(ms <= FAIL_TIMEOUT_MS + FAIL_SLACK_MS,
                  "%s: rank %d failed after %.0f ms", what, r, ms);
        assert_names(res[r].err, 1 - r, what);
        eproto += res[r].rc == FERRY_EPROTO;
    }
    cr_assert(eproto > 0, "%s: no rank noticed the disagreement (%s; %s)", what,
              res[0].err, res[1].err);
    co_free_bufs(d->bufs, w);
}

CO_TEST(failure, ranks_that_disagree_on_the_length_fail_with_eproto)
{
    disagree d = {.n = {2000, 3000}};
    disagree_check(&d, "all-reduce of 2000 vs 3000 floats");
}

CO_TEST(failure, ranks_that_disagree_on_the_collective_fail_with_eproto)
{
    disagree d = {.n = {2000, 2000}, .broadcast = {false, true}};
    disagree_check(&d, "all-reduce vs broadcast");
}

/* Sessions whose options differ (compression, chunk size): each rank's
 * chunks are refused by its right neighbour's hub as not fitting the
 * session there. That is the peers disagreeing, not a bad argument of the
 * caller's: EPROTO, naming the neighbour, on both ranks, at once. */
static void options_disagree(const rt_comm_opts o[2], const char *what)
{
    int w = 2;
    co_start(w);
    for (int r = 0; r < w; r++) {
        char err[CO_ERRLEN] = "";
        int rc = co_join(r, &o[r], err, sizeof err);
        cr_assert(rc == 0, "rank %d: %s: %s", r, ferry_err_name(rc), err);
    }
    size_t n = 4 * CO_CHUNK_FLOATS + 1;
    float **bufs = co_bufs(w, n, 1);
    co_allreduce_arg a = {bufs, n};
    co_result res[CO_MAX_RANKS];
    co_run(co_allreduce_fn, &a, res);
    for (int r = 0; r < w; r++) {
        double ms = res[r].end_ms - res[r].start_ms;
        cr_assert(res[r].rc == FERRY_EPROTO, "%s: rank %d got %s (%s), want EPROTO", what,
                  r, ferry_err_name(res[r].rc), res[r].err);
        cr_assert(ms < FAIL_TIMEOUT_MS, "%s: rank %d took %.0f ms to notice", what, r,
                  ms);
        assert_names(res[r].err, 1 - r, what);
    }
    co_free_bufs(bufs, w);
}

CO_TEST(failure, ranks_that_disagree_on_compression_fail_with_eproto)
{
    R.world = 2; /* co_opts reads it; co_start sets it again */
    rt_comm_opts o[2] = {co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, FAIL_TIMEOUT_MS),
                         co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_FP16, FAIL_TIMEOUT_MS)};
    options_disagree(o, "none vs fp16");
}

CO_TEST(failure, ranks_that_disagree_on_the_chunk_size_fail_with_eproto)
{
    R.world = 2;
    rt_comm_opts o[2] = {
        co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, FAIL_TIMEOUT_MS),
        co_opts(1, 2 * CO_CHUNK_BYTES, RT_COMPRESS_NONE, FAIL_TIMEOUT_MS)};
    options_disagree(o, "4 KiB vs 8 KiB chunks");
}

/* A rank whose worker never registers the session (it never got the
 * training request, say): its left neighbour's sends are refused as an
 * unknown session and retried until the timeout, and nothing comes from
 * it. That is a silent peer: ETIMEDOUT, naming it. */
CO_TEST(failure, a_peer_that_never_registers_the_session_times_out_naming_it)
{
    int w = 2;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, FAIL_TIMEOUT_MS);
    char err[CO_ERRLEN] = "";
    int rc = co_join(0, &o, err, sizeof err);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), err);
    size_t n = 3 * CO_CHUNK_FLOATS;
    float *buf = co_alloc(n * sizeof(float));
    memset(buf, 0, n * sizeof(float));
    double t0 = co_now_ms();
    rc = rt_comm_allreduce(R.r[0].comm, buf, n, NULL, NULL, err, sizeof err);
    double ms = co_now_ms() - t0;
    co_free(buf);
    cr_assert(rc == FERRY_ETIMEDOUT, "got %s (%s), want ETIMEDOUT", ferry_err_name(rc),
              err);
    cr_assert(ms >= FAIL_TIMEOUT_MS - 50 && ms <= FAIL_TIMEOUT_MS + FAIL_SLACK_MS,
              "failed after %.0f ms with a timeout of %d ms", ms, FAIL_TIMEOUT_MS);
    assert_names(err, 1, "rank 0");
    rt_comm_stats st;
    rt_comm_get_stats(R.r[0].comm, &st);
    cr_assert(st.retries > 0, "no send was retried");
}
