/* Calls: one worker, all (scatter/gather), any (work queue); barrier,
 * survey, shutdown; the loop idles between calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/cluster_int.h"
#include "harness.h"

TC_TEST(cluster_call, one_worker_echoes_its_argument)
{
    tc_workers(2);
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    ferry_bytes_t in = tc_str("hello"), out;
    int rc = cluster_call(T.cl, &T.mod, 1, "echo", &in, &out);
    cr_assert(rc == 0, "%s", cluster_error(T.cl));
    tc_assert_bytes(&out, "hello");
    cluster_free_bytes(&out);
    cr_assert(out.data == NULL && out.len == 0);
    cr_assert_str_eq(cluster_error(T.cl), "");
}

TC_TEST(cluster_call, call_all_gathers_in_rank_order)
{
    tc_workers(3);
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    char args[3][32];
    ferry_bytes_t in[3], out[3];
    for (int r = 0; r < 3; r++) {
        snprintf(args[r], sizeof args[r], "argument for rank %d", r);
        in[r] = tc_str(args[r]);
    }
    int rc = cluster_call_all(T.cl, &T.mod, "echo", in, out);
    cr_assert(rc == 0, "%s", cluster_error(T.cl));
    for (int r = 0; r < 3; r++) {
        tc_assert_bytes(&out[r], args[r]);
        cluster_free_bytes(&out[r]);
    }

    rc = cluster_call_all(T.cl, &T.mod, "info", NULL, out);
    cr_assert(rc == 0, "%s", cluster_error(T.cl));
    for (int r = 0; r < 3; r++) {
        char want[64];
        snprintf(want, sizeof want, "rank %d of 3 task faulty function info", r);
        tc_assert_bytes(&out[r], want);
        cluster_free_bytes(&out[r]);
    }
}

TC_TEST(cluster_call, call_any_returns_500_results_in_order)
{
    tc_workers(3);
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    enum { N = 500 };
    static char args[N][24];
    static ferry_bytes_t in[N], out[N];
    for (int i = 0; i < N; i++) {
        snprintf(args[i], sizeof args[i], "item %d", i);
        in[i] = tc_str(args[i]);
    }
    int rc = cluster_call_any(T.cl, &T.mod, "echo", N, in, out, 8);
    cr_assert(rc == 0, "%s", cluster_error(T.cl));
    for (int i = 0; i < N; i++) {
        tc_assert_bytes(&out[i], args[i]);
        cluster_free_bytes(&out[i]);
    }
    /* Every worker took a share of the queue. */
    const cluster_worker *w;
    cr_assert(cluster_survey(T.cl, true, &w) == 0, "%s", cluster_error(T.cl));
    uint64_t total = 0;
    for (int r = 0; r < 3; r++) {
        cr_assert(w[r].stats && w[r].stats->calls_served > 0, "worker %d served none", r);
        total += w[r].stats->calls_served;
    }
    cr_assert_eq(total, N);
}

TC_TEST(cluster_call, a_failing_function_names_worker_module_and_function)
{
    tc_workers(2);
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    ferry_bytes_t in = tc_str("oops"), out = {(void *)1, 1};
    int rc = cluster_call(T.cl, &T.mod, 1, "fail", &in, &out);
    cr_assert_eq(rc, FERRY_EINVAL, "%s", ferry_err_name(rc));
    cr_assert(out.data == NULL && out.len == 0);
    char who[128];
    snprintf(who, sizeof who, "worker 1 (%s): module faulty.so function fail",
             T.target[1]);
    const char *err = cluster_error(T.cl);
    cr_assert(strstr(err, who) && strstr(err, "bad input: oops"), "%s", err);
}

TC_TEST(cluster_call, an_unknown_function_is_named)
{
    tc_workers(1);
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    ferry_bytes_t out;
    int rc = cluster_call(T.cl, &T.mod, 0, "no_such_function", NULL, &out);
    cr_assert_neq(rc, 0);
    cr_assert(strstr(cluster_error(T.cl), "no_such_function"), "%s", cluster_error(T.cl));
}

TC_TEST(cluster_call, call_all_fails_fast_reports_the_failure_and_keeps_nothing)
{
    tc_workers(3);
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    /* Rank 2 would sleep 20 s: the failure of rank 1 cancels it. */
    ferry_bytes_t in[3] = {tc_str("1"), tc_str("not a number"), tc_str("20000")}, out[3];
    double t0 = tc_now_ms();
    int rc = cluster_call_all(T.cl, &T.mod, "sleep", in, out);
    cr_assert(tc_now_ms() - t0 < 10000, "the gather waited for the slowest call");
    cr_assert_eq(rc, FERRY_EINVAL, "%s: %s", ferry_err_name(rc), cluster_error(T.cl));
    char who[128];
    snprintf(who, sizeof who, "worker 1 (%s): module faulty.so function sleep",
             T.target[1]);
    cr_assert(strstr(cluster_error(T.cl), who), "%s", cluster_error(T.cl));
    cr_assert(strstr(cluster_error(T.cl), "not a number"), "%s", cluster_error(T.cl));
    for (int r = 0; r < 3; r++)
        cr_assert(out[r].data == NULL && out[r].len == 0);
}

TC_TEST(cluster_call, call_any_stops_at_the_first_function_failure)
{
    tc_workers(2);
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    enum { N = 200, DEPTH = 2, WORKERS = 2 };
    static ferry_bytes_t in[N], out[N];
    /* 50 ms a call: the failure's reply, at once, comes back long before
     * any call started beside it ends. */
    for (int i = 0; i < N; i++)
        in[i] = tc_str(i == 10 ? "bad" : "50");
    int rc = cluster_call_any(T.cl, &T.mod, "sleep", N, in, out, DEPTH);
    cr_assert_eq(rc, FERRY_EINVAL, "%s", cluster_error(T.cl));
    cr_assert(strstr(cluster_error(T.cl), "function sleep") &&
                  strstr(cluster_error(T.cl), "'bad'"),
              "%s", cluster_error(T.cl));
    for (int i = 0; i < N; i++)
        cr_assert(out[i].data == NULL);
    /* It stopped handing out work at the failure: the ten calls before it,
     * itself, and what was in flight beside it (DEPTH on each worker; twice
     * that, for a reply that is slow to come on a loaded machine). */
    const cluster_worker *w;
    cr_assert(cluster_survey(T.cl, true, &w) == 0, "%s", cluster_error(T.cl));
    uint64_t served = w[0].stats->calls_served + w[1].stats->calls_served;
    fprintf(stderr, "call_any: %llu calls ran, the failure was the 11th\n",
            (unsigned long long)served);
    cr_assert(served <= 11 + 2 * DEPTH * WORKERS, "%llu calls ran after a failure at 11",
              (unsigned long long)served);
}

TC_TEST(cluster_call, a_rank_out_of_range_is_refused)
{
    tc_workers(1);
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    ferry_bytes_t out;
    cr_assert_eq(cluster_call(T.cl, &T.mod, 1, "echo", NULL, &out), FERRY_EINVAL);
    cr_assert(strstr(cluster_error(T.cl), "rank 1"), "%s", cluster_error(T.cl));
    cr_assert_eq(cluster_call(T.cl, &T.mod, -1, "echo", NULL, &out), FERRY_EINVAL);
}

TC_TEST(cluster_call, a_module_from_elsewhere_is_refused)
{
    tc_workers(1);
    tc_cluster(0, 0, 0);
    cluster_module fake = {.sha256 = "00ff", .name = "ghost.so"};
    ferry_bytes_t out;
    cr_assert_eq(cluster_call(T.cl, &fake, 0, "echo", NULL, &out), FERRY_EINVAL);
    cr_assert(strstr(cluster_error(T.cl), "ghost.so"), "%s", cluster_error(T.cl));
}

TC_TEST(cluster_call, the_loop_idles_between_calls)
{
    tc_workers(2);
    tc_cluster(0, 0, 50);
    tc_load_faulty();
    ferry_bytes_t in[2] = {tc_str("300"), tc_str("300")}, out[2];
    /* Long enough for heartbeats to run. */
    cr_assert(cluster_call_all(T.cl, &T.mod, "sleep", in, out) == 0, "%s",
              cluster_error(T.cl));
    cr_assert_not(uv_is_active((uv_handle_t *)&T.cl->hb_timer));
    cr_assert_not(uv_is_active((uv_handle_t *)&T.cl->wait_timer));
}

TC_TEST(cluster_call, barrier_and_survey_see_every_worker)
{
    tc_workers(3);
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    ferry_bytes_t out[3];
    cr_assert(cluster_call_all(T.cl, &T.mod, "info", NULL, out) == 0, "%s",
              cluster_error(T.cl));
    for (int r = 0; r < 3; r++)
        cluster_free_bytes(&out[r]);
    cr_assert(cluster_barrier(T.cl) == 0, "%s", cluster_error(T.cl));

    const cluster_worker *w;
    cr_assert(cluster_survey(T.cl, true, &w) == 0, "%s", cluster_error(T.cl));
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(w[r].rank, r);
        cr_assert_str_eq(w[r].target, T.target[r]);
        cr_assert(w[r].alive);
        cr_assert_eq(w[r].ping->pid, getpid());
        cr_assert_eq(w[r].stats->calls_served, 1);
        cr_assert_eq(w[r].stats->in_flight, 0);
        cr_assert_eq(w[r].stats->modules_loaded, 1);
    }
    cr_assert_str_eq(cluster_target(T.cl, 2), T.target[2]);
    cr_assert_null(cluster_target(T.cl, 3));
    cr_assert_eq(cluster_size(T.cl), 3);
}

TC_TEST(cluster_call, shutdown_all_stops_every_worker_and_is_harmless_twice)
{
    tc_workers(2);
    tc_cluster(0, 0, 0);
    int rc = cluster_shutdown_all(T.cl, 100);
    cr_assert(rc == 0, "%s", cluster_error(T.cl));
    for (int r = 0; r < 2; r++) {
        rt_worker_wait(T.w[r]); /* returns: each got its Shutdown */
        rt_worker_destroy(T.w[r], 0);
        T.w[r] = NULL;
    }
    rc = cluster_shutdown_all(T.cl, 100);
    cr_assert(rc == 0, "a second shutdown: %s", cluster_error(T.cl));
}
