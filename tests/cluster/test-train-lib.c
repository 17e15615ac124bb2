/* cluster/train as a library, without the command line: a caller hands it
 * options and gets the run's events and its result back, nothing printed;
 * a run it refuses or that fails at the start says why through the error
 * callback alone and leaves the workers free for the next run. */
#include <math.h>
#include <string.h>

#include "cluster/train/train.h"
#include "harness.h"

/* What the callbacks saw, in order. */
typedef struct seen {
    int started, epochs, errors, lost;
    unsigned last_epoch;
    bool epoch_before_start, out_of_order;
    char mode[16];
    char error[512];
} seen;

static void on_error(void *data, const char *message)
{
    seen *s = data;
    s->errors++;
    snprintf(s->error, sizeof s->error, "%s", message);
}

static void on_started(void *data, const cluster_train_started *st)
{
    seen *s = data;
    s->started++;
    snprintf(s->mode, sizeof s->mode, "%s", st->mode);
}

static void on_epoch(void *data, const cluster_train_epoch *e)
{
    seen *s = data;
    s->epoch_before_start |= s->started == 0;
    s->out_of_order |= e->epoch != s->last_epoch + 1;
    s->last_epoch = e->epoch;
    s->epochs++;
}

static void on_lost(void *data, int rank, const char *target, int epoch, const char *why,
                    int left)
{
    (void)rank, (void)target, (void)epoch, (void)why, (void)left;
    ((seen *)data)->lost++;
}

/* submit's defaults, as its option parser leaves them. */
static cluster_train_opts defaults(const char *mode)
{
    return (cluster_train_opts){.epochs = 2,
                                .batch = 256,
                                .optimizer = "sgd",
                                .schedule = "cosine",
                                .lr = 0.05,
                                .momentum = 0.9,
                                .seed = 1,
                                .grad_compression = "none",
                                .precision = "fp32",
                                .staleness = -1,
                                .algo = "downpour",
                                .mode = mode};
}

static cluster_train_events events(seen *s)
{
    memset(s, 0, sizeof *s);
    return (cluster_train_events){.data = s,
                                  .error = on_error,
                                  .started = on_started,
                                  .epoch = on_epoch,
                                  .worker_lost = on_lost};
}

static void two_workers_with_linreg(void)
{
    tc_workers(2);
    tc_cluster(0, 0, 0);
    tc_read_task("linreg.so");
    int rc = cluster_load_module(T.cl, "linreg.so", T.bytes, T.len, &T.mod);
    cr_assert(rc == 0, "cluster_load_module: %s", cluster_error(T.cl));
}

static void assert_trained(const seen *s, const cluster_train_result *res, int epochs)
{
    cr_assert_eq(s->errors, 0, "error: %s", s->error);
    cr_assert_eq(s->started, 1);
    cr_assert_eq(s->epochs, epochs);
    cr_assert(!s->epoch_before_start && !s->out_of_order, "epochs out of order");
    cr_assert_eq(res->last.epoch, (unsigned)epochs);
    cr_assert(res->samples > 0 && res->train_s > 0 && res->wall_s > 0);
    cr_assert(isfinite(res->last.train_loss) && isfinite(res->last.test_loss));
    cr_assert(res->identical);
    cr_assert_eq(strlen(res->params_sha256), 64, "sha '%s'", res->params_sha256);
    cr_assert_str_not_empty(res->started.device);
}

TC_TEST(train_lib, a_sync_run_reports_each_epoch_and_its_result)
{
    two_workers_with_linreg();
    seen s;
    cluster_train_events ev = events(&s);
    cluster_train_opts o = defaults("sync");
    cluster_train_result res;
    int rc = cluster_train_run(T.cl, &T.mod, "linreg.so", &o, &ev, &res);
    cr_assert(rc == 0, "rc %d: %s", rc, s.error);
    assert_trained(&s, &res, 2);
    cr_assert_str_eq(s.mode, "sync");
    cr_assert_str_eq(res.started.mode, "sync");
    cr_assert_eq(res.started.workers, 2);
    cr_assert_eq(res.lost, 0);
    cluster_train_result_fini(&res);
    cr_assert_null(res.owned);
}

TC_TEST(train_lib, an_async_run_adds_up_every_rank)
{
    two_workers_with_linreg();
    seen s;
    cluster_train_events ev = events(&s);
    cluster_train_opts o = defaults("async");
    cluster_train_result res;
    int rc = cluster_train_run(T.cl, &T.mod, "linreg.so", &o, &ev, &res);
    cr_assert(rc == 0, "rc %d: %s", rc, s.error);
    assert_trained(&s, &res, 2);
    cr_assert_str_eq(res.started.mode, "async");
    cr_assert_eq(res.started.shards, 2);
    cr_assert_eq(s.lost, 0);
    cr_assert_eq(res.lost, 0);
    cr_assert(res.pushes > 0);
    for (int r = 0; r < 2; r++)
        cr_assert(res.steps_by_worker[r] > 0, "rank %d took no step", r);
    cluster_train_result_fini(&res);
}

TC_TEST(train_lib, runs_without_callbacks)
{
    two_workers_with_linreg();
    cluster_train_opts o = defaults(NULL); /* two workers: sync */
    o.epochs = 1;
    cluster_train_result res;
    int rc = cluster_train_run(T.cl, &T.mod, "linreg.so", &o, NULL, &res);
    cr_assert(rc == 0, "rc %d", rc);
    cr_assert_str_eq(res.started.mode, "sync");
    cr_assert_eq(res.last.epoch, 1);
    cluster_train_result_fini(&res);
}

TC_TEST(train_lib, refuses_more_workers_than_the_cluster_has_before_any_call)
{
    two_workers_with_linreg();
    seen s;
    cluster_train_events ev = events(&s);
    cluster_train_opts o = defaults("sync");
    o.workers = 3;
    cluster_train_result res;
    cr_assert_eq(cluster_train_run(T.cl, &T.mod, "linreg.so", &o, &ev, &res),
                 FERRY_EINVAL);
    cr_assert_eq(s.errors, 1);
    cr_assert_str_eq(s.error, "--workers 3: the cluster has 2 workers");
    cr_assert_eq(s.started, 0);

    o = defaults("async");
    o.workers = 1;
    cr_assert_eq(cluster_train_run(T.cl, &T.mod, "linreg.so", &o, &ev, &res),
                 FERRY_EINVAL);
    cr_assert_str_eq(s.error,
                     "--mode async needs 2 or more workers (it would train on 1)");
    cr_assert_eq(s.started, 0);
}

TC_TEST(train_lib, a_run_the_workers_refuse_at_the_start_leaves_them_free)
{
    two_workers_with_linreg();
    seen s;
    cluster_train_events ev = events(&s);
    cluster_train_opts o = defaults("sync");
    o.precision = "bf16"; /* the cpu takes fp32 only */
    cluster_train_result res;
    int rc = cluster_train_run(T.cl, &T.mod, "linreg.so", &o, &ev, &res);
    cr_assert(rc != 0);
    cr_assert(s.errors >= 1);
    cr_assert(strstr(s.error, "linreg.so: cannot start training: "), "error '%s'",
              s.error);
    cr_assert_eq(s.started, 0);
    cr_assert_null(res.owned);

    /* No session left behind: the next run begins at once. */
    ev = events(&s);
    o = defaults("sync");
    o.epochs = 1;
    rc = cluster_train_run(T.cl, &T.mod, "linreg.so", &o, &ev, &res);
    cr_assert(rc == 0, "rc %d: %s", rc, s.error);
    assert_trained(&s, &res, 1);
    cluster_train_result_fini(&res);
}
