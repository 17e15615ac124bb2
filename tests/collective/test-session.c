/* tests/collective — sessions over time: one after another on the same
 * servers and hubs, several collectives in a row, several in flight at
 * once, and a rank that registers its session late. */
#include "tcoll.h"

#include <stdlib.h>
#include <string.h>

TestSuite(session, .timeout = 60);

CO_TEST(session, two_sessions_one_after_another_use_the_same_servers_and_hubs)
{
    co_start(3);
    rt_comm_opts o = co_opts(11, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    co_allreduce_check(5000, 1, "session 11");
    co_allreduce_check(77, 2, "session 11, second");
    co_leave_all();

    o = co_opts(12, 2 * CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    co_allreduce_check(5000, 3, "session 12");
    rt_comm_stats st;
    rt_comm_get_stats(R.r[1].comm, &st);
    cr_assert(st.ops == 1, "a new session starts its stats afresh: ops %llu",
              (unsigned long long)st.ops);
    co_leave_all();

    /* An id is free again once its session is gone. */
    o = co_opts(11, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    co_allreduce_check(4099, 4, "session 11 again");
}

CO_TEST(session, several_collectives_in_a_row_each_give_the_right_result)
{
    int w = 4;
    co_start(w);
    rt_comm_opts o = co_opts(3, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    co_allreduce_check(10000, 1, "op 1 (all-reduce)");

    size_t n = 6001;
    float **bufs = co_bufs(w, n, 2);
    float *root = co_alloc(n * sizeof(float));
    memcpy(root, bufs[1], n * sizeof(float));
    co_broadcast_arg b = {bufs, n, 1};
    co_run_ok(co_broadcast_fn, &b, "op 2 (broadcast)");
    for (int r = 0; r < w; r++)
        cr_assert(memcmp(bufs[r], root, n * sizeof(float)) == 0,
                  "op 2 (broadcast): rank %d differs", r);
    co_free(root);
    co_free_bufs(bufs, w);

    co_allreduce_check(0, 3, "op 3 (all-reduce of nothing)");
    co_allreduce_check(3, 4, "op 4 (all-reduce of 3 floats)");
    co_allreduce_check(10000, 5, "op 5 (all-reduce)");
    for (int r = 0; r < w; r++) {
        rt_comm_stats st;
        rt_comm_get_stats(R.r[r].comm, &st);
        cr_assert(st.ops == 5, "rank %d: stats.ops %llu after 5 collectives", r,
                  (unsigned long long)st.ops);
    }
}

/* ---- several in flight ------------------------------------------------------------ */

#define N_OPS 3

typedef struct inflight {
    float **bufs[N_OPS];
    size_t n[N_OPS];
    bool broadcast[N_OPS]; /* from rank 1; else an all-reduce */
    bool reverse;          /* wait for the last started first */
} inflight;

static int inflight_fn(int rank, void *arg, char *err, size_t errlen)
{
    inflight *f = arg;
    rt_comm *c = R.r[rank].comm;
    rt_comm_op *ops[N_OPS] = {0};
    for (int k = 0; k < N_OPS; k++) {
        int rc = f->broadcast[k]
                     ? rt_comm_broadcast_start(c, f->bufs[k][rank], f->n[k], 1, &ops[k])
                     : rt_comm_allreduce_start(c, f->bufs[k][rank], f->n[k], &ops[k]);
        if (rc) {
            snprintf(err, errlen, "start of op %d: %s", k + 1, ferry_err_name(rc));
            /* Still wait for what started, so nothing leaks. */
            char why[CO_ERRLEN];
            for (int j = 0; j < k; j++)
                rt_comm_wait(c, ops[j], NULL, NULL, why, sizeof why);
            return rc;
        }
    }
    int first = 0;
    for (int i = 0; i < N_OPS; i++) {
        int k = f->reverse ? N_OPS - 1 - i : i;
        char why[CO_ERRLEN] = "";
        int rc = rt_comm_wait(c, ops[k], NULL, NULL, why, sizeof why);
        if (rc && !first) {
            first = rc;
            snprintf(err, errlen, "wait for op %d: %s", k + 1, why);
        }
    }
    return first;
}

static void inflight_check(bool reverse, const bool broadcast[N_OPS])
{
    int w = 3;
    co_start(w);
    rt_comm_opts o = co_opts(5, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    inflight f = {.n = {1000, 3 * CO_CHUNK_FLOATS + 5, 1}, .reverse = reverse};
    double *want[N_OPS], *mag[N_OPS];
    float *root[N_OPS];
    for (int k = 0; k < N_OPS; k++) {
        f.broadcast[k] = broadcast[k];
        f.bufs[k] = co_bufs(w, f.n[k], 10 + (uint64_t)k);
        co_reference(f.bufs[k], w, f.n[k], &want[k], &mag[k]);
        root[k] = co_alloc(f.n[k] * sizeof(float));
        memcpy(root[k], f.bufs[k][1], f.n[k] * sizeof(float));
    }
    co_run_ok(inflight_fn, &f, "three collectives in flight");
    for (int k = 0; k < N_OPS; k++) {
        char what[64];
        snprintf(what, sizeof what, "op %d of %d in flight", k + 1, N_OPS);
        if (broadcast[k]) {
            for (int r = 0; r < w; r++)
                cr_assert(memcmp(f.bufs[k][r], root[k], f.n[k] * sizeof(float)) == 0,
                          "%s (broadcast): rank %d differs", what, r);
        } else {
            co_assert_sums(f.bufs[k], w, f.n[k], want[k], mag[k], CO_F32_REL(w),
                           CO_F32_ABS, what);
            co_assert_identical(f.bufs[k], w, f.n[k], what);
        }
        co_free(want[k]);
        co_free(mag[k]);
        co_free(root[k]);
        co_free_bufs(f.bufs[k], w);
    }
}

CO_TEST(session, three_allreduces_started_before_waiting_give_their_sums)
{
    inflight_check(false, (const bool[N_OPS]){false, false, false});
}

CO_TEST(session, collectives_in_flight_may_be_waited_for_last_first)
{
    inflight_check(true, (const bool[N_OPS]){false, true, false});
}

/* ---- a late rank ------------------------------------------------------------------- */

#define LATE_RANK 2
#define LATE_MS   300

typedef struct late {
    rt_comm_opts o;
    co_allreduce_arg a;
} late;

static int late_fn(int rank, void *arg, char *err, size_t errlen)
{
    late *l = arg;
    if (rank == LATE_RANK) {
        co_sleep_ms(LATE_MS);
        int rc = co_join(rank, &l->o, err, errlen);
        if (rc)
            return rc;
    }
    return co_allreduce_fn(rank, &l->a, err, errlen);
}

CO_TEST(session, a_session_registered_300_ms_after_its_peers_still_completes)
{
    int w = 3;
    co_start(w);
    late l = {.o = co_opts(9, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS)};
    for (int r = 0; r < w; r++) {
        if (r == LATE_RANK)
            continue;
        char err[CO_ERRLEN] = "";
        int rc = co_join(r, &l.o, err, sizeof err);
        cr_assert(rc == 0, "rank %d: %s: %s", r, ferry_err_name(rc), err);
    }
    size_t n = 3 * CO_CHUNK_FLOATS + 1;
    float **bufs = co_bufs(w, n, 1);
    double *want, *mag;
    co_reference(bufs, w, n, &want, &mag);
    l.a = (co_allreduce_arg){bufs, n};
    co_run_ok(late_fn, &l, "all-reduce with a late rank");
    co_assert_sums(bufs, w, n, want, mag, CO_F32_REL(w), CO_F32_ABS,
                   "all-reduce with a late rank");
    co_assert_identical(bufs, w, n, "all-reduce with a late rank");
    /* Rank 1 sends to the late rank, which refused it until it registered. */
    rt_comm_stats st;
    rt_comm_get_stats(R.r[LATE_RANK - 1].comm, &st);
    cr_assert(st.retries > 0, "rank %d never retried a send to the late rank",
              LATE_RANK - 1);
    co_free(want);
    co_free(mag);
    co_free_bufs(bufs, w);
}

/* ---- two sessions at once ---------------------------------------------------------- */

typedef struct twin {
    co_allreduce_arg a, b; /* a in session 31 (comm), b in session 32 (comm2) */
} twin;

static int twin_fn(int rank, void *arg, char *err, size_t errlen)
{
    twin *t = arg;
    rt_comm_op *oa = NULL, *ob = NULL;
    int rc = rt_comm_allreduce_start(R.r[rank].comm, t->a.bufs[rank], t->a.n, &oa);
    if (rc) {
        snprintf(err, errlen, "start in session 31: %s", ferry_err_name(rc));
        return rc;
    }
    rc = rt_comm_allreduce_start(R.r[rank].comm2, t->b.bufs[rank], t->b.n, &ob);
    if (rc) {
        snprintf(err, errlen, "start in session 32: %s", ferry_err_name(rc));
        char why[CO_ERRLEN];
        rt_comm_wait(R.r[rank].comm, oa, NULL, NULL, why, sizeof why);
        return rc;
    }
    char why[CO_ERRLEN] = "";
    int rb = rt_comm_wait(R.r[rank].comm2, ob, NULL, NULL, why, sizeof why);
    if (rb)
        snprintf(err, errlen, "session 32: %s", why);
    int ra = rt_comm_wait(R.r[rank].comm, oa, NULL, NULL, why, sizeof why);
    if (ra)
        snprintf(err, errlen, "session 31: %s", why);
    return ra ? ra : rb;
}

/* Each rank's hub routes every chunk to its own session: the same step
 * numbers, ranks and lengths in two sessions at once must not mix. */
CO_TEST(session, two_sessions_at_once_on_the_same_hubs_keep_their_chunks_apart)
{
    int w = 3;
    co_start(w);
    rt_comm_opts oa = co_opts(31, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    rt_comm_opts ob = co_opts(32, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&oa);
    for (int r = 0; r < w; r++) {
        char err[CO_ERRLEN] = "";
        int rc = co_join2(r, &ob, err, sizeof err);
        cr_assert(rc == 0, "rank %d, session 32: %s: %s", r, ferry_err_name(rc), err);
    }
    size_t n = 4 * CO_CHUNK_FLOATS + 3;
    twin t = {{co_bufs(w, n, 1), n}, {co_bufs(w, n, 2), n}};
    double *wa, *ma, *wb, *mb;
    co_reference(t.a.bufs, w, n, &wa, &ma);
    co_reference(t.b.bufs, w, n, &wb, &mb);
    co_run_ok(twin_fn, &t, "two sessions at once");
    co_assert_sums(t.a.bufs, w, n, wa, ma, CO_F32_REL(w), CO_F32_ABS, "session 31");
    co_assert_sums(t.b.bufs, w, n, wb, mb, CO_F32_REL(w), CO_F32_ABS, "session 32");
    co_assert_identical(t.a.bufs, w, n, "session 31");
    co_assert_identical(t.b.bufs, w, n, "session 32");
    co_free(wa);
    co_free(ma);
    co_free(wb);
    co_free(mb);
    co_free_bufs(t.a.bufs, w);
    co_free_bufs(t.b.bufs, w);
}
