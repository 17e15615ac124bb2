/* Synchronous data parallelism in one process: W ranks, each on a thread of
 * its own with its own cpu device, rt_hub, rpc_server on 127.0.0.1:0
 * (serving ReduceChunk) and rt_comm, train the same model with the same
 * seed, global batch and hyper-parameters as one trainer alone; after K
 * steps their parameters match the lone trainer's up to float summation
 * order, and every rank of a run holds bit-identical parameters. A loss
 * that is NaN on one rank stops every rank at the same step; a model that
 * fails on one rank mid-backward stops the others at once. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "rpc/rpc.h"
#include "runtime/train/tensors.h"
#include "runtime/train/trainer_int.h"
#include "tcommon.h"
#include "ttrain.h"

#define MAX_RANKS 4
/* A collective that should succeed gives up after this long: a broken
 * implementation fails the test instead of hanging it. */
#define COMM_TIMEOUT_MS 10000
#define SESSION         77
/* The ranks' shared secret, as a master would give it. */
static const uint8_t secret[RT_COMM_SECRET_BYTES] = {0x77, 0x5e, 0xc7};

typedef struct rank_state {
    ferry_device_t *dev;
    rpc_poller *poller;
    rt_hub *hub;
    rpc_server *server;
    rt_comm *comm;
    char addr[32];
    /* What the rank's thread left. */
    int rc;
    char err[512];
    float *params; /* malloc'ed, plen floats; NULL if no trainer was made */
    rt_tensors state; /* the parameters and this rank's buffers, by name */
    rt_epoch_stats st;
    size_t buckets;
    atomic_bool finished; /* the thread is done with its trainer */
} rank_state;

/* One run: `world` ranks (1: a lone trainer, no comm) of `epochs` epochs. */
typedef struct sync_run {
    const ferry_model_t *m;
    rt_train_opts o;                       /* rank, world and comm set per rank */
    const rt_dataset *train_of[MAX_RANKS]; /* per-rank training set; NULL: o's */
    const ferry_model_t *model_of[MAX_RANKS]; /* per-rank model; NULL: m */
    int world, epochs;
    size_t chunk_bytes; /* the all-reduce's chunks (0: the default) */
    size_t plen;
    rank_state r[MAX_RANKS];
    const char *peers[MAX_RANKS];
} sync_run;

/* Every rank's resources, for .fini when a test failed half-way. */
static sync_run *live[4];

static void release(sync_run *s)
{
    for (int i = 0; i < MAX_RANKS; i++) {
        rt_comm_destroy(s->r[i].comm);
        s->r[i].comm = NULL;
    }
    for (int i = 0; i < MAX_RANKS; i++) {
        rpc_server_destroy(s->r[i].server);
        s->r[i].server = NULL;
    }
    for (int i = 0; i < MAX_RANKS; i++) {
        rt_hub_destroy(s->r[i].hub);
        s->r[i].hub = NULL;
        rpc_poller_destroy(s->r[i].poller);
        s->r[i].poller = NULL;
        if (s->r[i].dev)
            rt_device_close(s->r[i].dev);
        s->r[i].dev = NULL;
        free(s->r[i].params);
        s->r[i].params = NULL;
        rt_tensors_free(&s->r[i].state);
    }
}

static void teardown(void)
{
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
        if (live[i])
            release(live[i]);
}

TestSuite(train_sync, .fini = teardown, .timeout = 120);

static void track(sync_run *s)
{
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
        if (!live[i]) {
            live[i] = s;
            return;
        }
    cr_assert_fail("too many runs in one test");
}

static void untrack(sync_run *s)
{
    release(s);
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
        if (live[i] == s)
            live[i] = NULL;
}

typedef struct job {
    sync_run *s;
    int rank;
} job;

static void *rank_main(void *arg)
{
    job *j = arg;
    sync_run *s = j->s;
    rank_state *me = &s->r[j->rank];
    rt_train_opts o = s->o;
    o.rank = j->rank;
    o.world = s->world;
    o.comm = s->world > 1 ? me->comm : NULL;
    if (s->train_of[j->rank])
        o.train_set = s->train_of[j->rank];
    rt_trainer *t = NULL;
    const ferry_model_t *m = s->model_of[j->rank] ? s->model_of[j->rank] : s->m;
    me->rc = rt_trainer_create(m, me->dev, &o, &t, me->err, sizeof me->err);
    if (me->rc)
        return NULL;
    me->buckets = (size_t)rt_trainer_buckets(t);
    for (int e = 0; e < s->epochs && me->rc == 0; e++)
        me->rc = rt_trainer_epoch(t, &me->st, NULL, NULL, me->err, sizeof me->err);
    /* Kept even after a failure: what the failed step left. */
    me->params = malloc(s->plen * sizeof(float));
    if (me->params && rt_trainer_params(t, me->params) != 0) {
        free(me->params);
        me->params = NULL;
    }
    if (me->params && me->rc == 0)
        rt_trainer_tensors(t, me->params, &me->state);
    rt_trainer_destroy(t);
    atomic_store(&me->finished, true);
    return NULL;
}

/* Sets up `world` ranks and runs them to the end; each rank's outcome is in
 * s->r[rank]. */
static void run(sync_run *s)
{
    cr_assert(s->world >= 1 && s->world <= MAX_RANKS);
    track(s);
    s->plen = ferry_model_layout(s->m, NULL);
    for (int i = 0; i < s->world; i++) {
        rank_state *me = &s->r[i];
        char err[512] = "";
        int rc = rt_device_open("cpu", &me->dev, err, sizeof err);
        cr_assert(rc == 0, "rank %d: cpu device: %s", i, err);
        if (s->world == 1)
            break;
        cr_assert(rpc_poller_create(&me->poller) == 0);
        cr_assert(rt_hub_create(me->poller, &me->hub) == 0);
        rpc_method m = {PROTO_METHOD_REDUCE_CHUNK, rt_reduce_chunk_handler, me->hub,
                        RT_REDUCE_CHUNK_FLAGS, 0};
        rpc_server_opts so = {.listen = "127.0.0.1:0", .poller = me->poller};
        rc = rpc_server_create(&so, &m, 1, &me->server);
        cr_assert(rc == 0, "rank %d: rpc_server_create: %s", i, ferry_err_name(rc));
        snprintf(me->addr, sizeof me->addr, "127.0.0.1:%d", rpc_server_port(me->server));
        s->peers[i] = me->addr;
    }
    for (int i = 0; i < s->world && s->world > 1; i++) {
        rt_comm_opts co = {.session = SESSION,
                           .rank = i,
                           .world = s->world,
                           .peers = s->peers,
                           .chunk_bytes = s->chunk_bytes,
                           .timeout_ms = COMM_TIMEOUT_MS,
                           .secret = secret};
        char err[512] = "";
        int rc = rt_comm_create(s->r[i].hub, &co, &s->r[i].comm, err, sizeof err);
        cr_assert(rc == 0, "rank %d: rt_comm_create: %s: %s", i, ferry_err_name(rc), err);
    }
    pthread_t th[MAX_RANKS];
    job jobs[MAX_RANKS];
    for (int i = 0; i < s->world; i++) {
        jobs[i] = (job){s, i};
        cr_assert(pthread_create(&th[i], NULL, rank_main, &jobs[i]) == 0);
    }
    /* A rank that never returns hangs here until the suite's .timeout. */
    for (int i = 0; i < s->world; i++)
        pthread_join(th[i], NULL);
}

static void assert_all_ok(const sync_run *s, const char *what)
{
    for (int i = 0; i < s->world; i++)
        cr_assert(s->r[i].rc == 0 && s->r[i].params, "%s, %d ranks: rank %d: %s: %s",
                  what, s->world, i, ferry_err_name(s->r[i].rc), s->r[i].err);
}

/* Every rank of a run ends with the same bits: they all step from the same
 * all-reduced gradient (the ring's all-gather hands every rank the same
 * sums) with the same optimizer from the same broadcast start. */
static void assert_ranks_identical(const sync_run *s, const char *what)
{
    for (int i = 1; i < s->world; i++) {
        if (memcmp(s->r[0].params, s->r[i].params, s->plen * sizeof(float)) == 0)
            continue;
        size_t k = 0;
        while (memcmp(&s->r[0].params[k], &s->r[i].params[k], sizeof(float)) == 0)
            k++;
        cr_assert_fail("%s, %d ranks: rank %d differs from rank 0 at parameter %zu of "
                       "%zu: %.9g vs %.9g",
                       what, s->world, i, k, s->plen, (double)s->r[i].params[k],
                       (double)s->r[0].params[k]);
    }
}

/* max over i of |got[i] - want[i]| / max(1, |want[i]|), and where. */
static double max_rel_diff(const float *got, const float *want, size_t n, size_t *at)
{
    double worst = 0;
    *at = 0;
    for (size_t i = 0; i < n; i++) {
        double d =
            fabs((double)got[i] - (double)want[i]) / fmax(1.0, fabs((double)want[i]));
        if (!(d <= worst)) { /* a NaN is the worst of all */
            worst = isnan(d) ? INFINITY : d;
            *at = i;
        }
    }
    return worst;
}

/* Trains the model alone and with 2 and 4 ranks; asserts every sync run's
 * parameters are within `tol` (relative, see max_rel_diff) of the lone
 * trainer's and identical across its ranks, and that the reduced
 * statistics match the lone trainer's. */
static void equivalence(const char *model, rt_train_opts o, int epochs,
                        size_t chunk_bytes, const rt_dataset *train,
                        const rt_dataset *test, double tol, const char *what)
{
    ttrain f;
    ttrain_open(&f, model);
    o.train_set = train;
    o.test_set = test;
    sync_run *alone = calloc(1, sizeof *alone);
    cr_assert(alone);
    *alone = (sync_run){.m = f.mod.task->model, .o = o, .world = 1, .epochs = epochs};
    run(alone);
    assert_all_ok(alone, what);
    const rank_state *ref = &alone->r[0];
    cr_assert(ref->st.samples == train->n, "%s alone: %zu samples an epoch", what,
              ref->st.samples);

    static const int worlds[] = {2, 4};
    for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++) {
        sync_run *s = calloc(1, sizeof *s);
        cr_assert(s);
        *s = (sync_run){.m = f.mod.task->model,
                        .o = o,
                        .world = worlds[w],
                        .epochs = epochs,
                        .chunk_bytes = chunk_bytes};
        run(s);
        assert_all_ok(s, what);
        assert_ranks_identical(s, what);
        size_t at;
        double d = max_rel_diff(s->r[0].params, ref->params, s->plen, &at);
        cr_log_info("%s, %d ranks vs 1 (all-reduce buckets a step: %zu): max relative "
                    "parameter difference %.3g",
                    what, s->world, s->r[0].buckets, d);
        /* Small buckets: several all-reduces a step, started mid-backward. */
        cr_assert(s->r[0].buckets >= (o.bucket_bytes ? 3u : 1u), "%s: %zu buckets", what,
                  s->r[0].buckets);
        cr_assert(d <= tol,
                  "%s, %d ranks vs 1: parameter %zu of %zu is %.9g, alone %.9g "
                  "(relative difference %.3g > %.3g)",
                  what, s->world, at, s->plen, (double)s->r[0].params[at],
                  (double)ref->params[at], d, tol);
        for (int i = 0; i < s->world; i++) {
            const rt_epoch_stats *st = &s->r[i].st;
            /* Losses, accuracy and samples are over every rank. */
            cr_assert(st->samples == ref->st.samples,
                      "%s rank %d: %zu samples, alone %zu", what, i, st->samples,
                      ref->st.samples);
            cr_assert(st->local_samples < st->samples, "%s rank %d: %zu of %zu samples",
                      what, i, st->local_samples, st->samples);
            cr_assert(fabs(st->train_loss - ref->st.train_loss) <=
                          1e-3 * fmax(1.0, fabs(ref->st.train_loss)),
                      "%s rank %d: train loss %.9g, alone %.9g", what, i, st->train_loss,
                      ref->st.train_loss);
            cr_assert(fabs(st->test_loss - ref->st.test_loss) <=
                          1e-3 * fmax(1.0, fabs(ref->st.test_loss)),
                      "%s rank %d: test loss %.9g, alone %.9g", what, i, st->test_loss,
                      ref->st.test_loss);
            /* One test sample may flip where two logits nearly tie. */
            cr_assert(fabs(st->test_accuracy - ref->st.test_accuracy) <=
                          1.0 / (double)test->n + 1e-9,
                      "%s rank %d: test accuracy %g, alone %g", what, i,
                      st->test_accuracy, ref->st.test_accuracy);
        }
        size_t local = 0;
        for (int i = 0; i < s->world; i++)
            local += s->r[i].st.local_samples;
        cr_assert(local == train->n, "%s: the ranks trained on %zu samples of %zu", what,
                  local, train->n);
        untrack(s);
        free(s);
    }
    untrack(alone);
    free(alone);
    ttrain_close(&f);
    rpc_buf_trim();
    tcom_assert_no_leaks();
}

/* The tolerances, on max |a - b| / max(1, |b|) over every parameter.
 *
 * W ranks compute the same global-batch mean gradient as one trainer, but as
 * a weighted sum of W partial means (sum_r n_r/N * mean_r) summed around the
 * ring, where the lone trainer sums all N samples in one BLAS product: the
 * same terms in another order, so each gradient element differs by a few
 * ulps of the magnitudes summed (relative ~1e-7). SGD, with or without
 * momentum, is linear in the gradient: a step adds lr times that difference,
 * and over K steps the model's curvature (the next gradient taken at
 * slightly different parameters) amplifies it only mildly on these small,
 * well-conditioned problems. Measured on this machine: ~1e-7 for linreg
 * after 25 steps, ~5e-8 for the mlp after 22 (and 44) steps. We assert
 * 1e-5: two orders of margin for other BLAS kernels and summation orders,
 * yet far below what a real disagreement does in a single step (a rank's
 * gradient weighted wrongly, a sample dropped or counted twice, a bucket
 * reduced twice or not at all: lr * |g| ~ 1e-4 .. 1e-2).
 *
 * Adam divides by sqrt(v) + eps: where a gradient element is within its
 * rounding of zero, the tiny absolute difference becomes a relative one of
 * the update itself (m / sqrt(v) is ~sign(g) in the first steps), so in the
 * worst case a parameter can move by up to 2 lr a step more in one run than
 * in the other; elsewhere the difference stays ~lr * 1e-6 a step. Measured:
 * ~3e-6 after K = 8 steps (~8e-5 after 32, as the differences feed back),
 * so K stays at 8. We assert lr / 2 = 5e-4: a step taken on a wrong gradient
 * direction moves most parameters by ~lr (Adam's update is normalised, so a
 * wrongly scaled gradient is the SGD tests' to catch), while rounding stays
 * two orders below. */
#define TOL_SGD  1e-5
#define TOL_ADAM 5e-4

Test(train_sync, linreg_sgd_on_2_and_4_ranks_matches_one_trainer)
{
    /* 258 samples, global batch 64: four full steps an epoch, then a step
     * of 2 samples, which leaves ranks 2 and 3 of 4 with nothing to
     * compute (they still take part in the all-reduce). 5 epochs: K = 25. */
    rt_dataset train, test;
    cr_assert(rt_linear_make(258, 8, 0.1f, 3, 0, &train) == 0);
    cr_assert(rt_linear_make(100, 8, 0.1f, 3, 1, &test) == 0);
    rt_train_opts o = {
        .batch = 64, .optim = {.kind = RT_OPT_SGD, .lr = 0.1f}, .seed = 11};
    equivalence("linreg", o, 5, 0, &train, &test, TOL_SGD, "linreg sgd");
    rt_dataset_free(&train);
    rt_dataset_free(&test);
}

Test(train_sync, mlp_sgd_with_momentum_on_2_and_4_ranks_matches_one_trainer)
{
    /* 512 samples, global batch 50: ranks get 25/25 or 13/13/12/12 a step,
     * and each epoch's last step has 12 samples (6/6 or 3/3/3/3). Two
     * epochs: K = 22 steps. */
    rt_dataset train, test;
    ttrain_random_set(&train, 512, 1, 28, 28, 10, 7);
    ttrain_random_set(&test, 128, 1, 28, 28, 10, 8);
    /* Buckets of 16 KiB (the mlp's six tensors in four buckets, each
     * started from grad_ready while backward still runs) and 4 KiB chunks;
     * the cosine schedule counts global steps, the same whatever the
     * world. */
    rt_train_opts o = {.batch = 50,
                       .optim = {.kind = RT_OPT_SGD, .lr = 0.05f, .momentum = 0.9f},
                       .seed = 5,
                       .bucket_bytes = 16 << 10,
                       .epochs = 2,
                       .cosine = true};
    equivalence("mlp", o, 2, 4096, &train, &test, TOL_SGD, "mlp sgd momentum");
    ttrain_free_set(&train);
    ttrain_free_set(&test);
}

Test(train_sync, mlp_adam_on_2_and_4_ranks_matches_one_trainer)
{
    /* 512 samples, global batch 64: K = 8 steps. */
    rt_dataset train, test;
    ttrain_random_set(&train, 512, 1, 28, 28, 10, 9);
    ttrain_random_set(&test, 128, 1, 28, 28, 10, 10);
    rt_train_opts o = {
        .batch = 64, .optim = {.kind = RT_OPT_ADAM, .lr = 1e-3f}, .seed = 6};
    equivalence("mlp", o, 1, 0, &train, &test, TOL_ADAM, "mlp adam");
    ttrain_free_set(&train);
    ttrain_free_set(&test);
}

Test(train_sync, a_nan_loss_on_one_rank_stops_every_rank_at_the_same_step)
{
    /* linreg, whose loss a NaN input reaches (the mlp's ReLU, x > 0 ? x : 0,
     * turns a NaN activation into 0 before the loss). */
    ttrain f;
    ttrain_open(&f, "linreg");
    rt_dataset clean, poisoned, test;
    cr_assert(rt_linear_make(256, 8, 0.1f, 4, 0, &clean) == 0);
    cr_assert(rt_linear_make(256, 8, 0.1f, 4, 0, &poisoned) == 0);
    cr_assert(rt_linear_make(64, 8, 0.1f, 4, 1, &test) == 0);
    /* Rank 1 reads its slices from a copy in which every sample has a NaN
     * feature: its loss is NaN from the first step, rank 0's is finite. */
    for (size_t i = 0; i < poisoned.n; i++)
        poisoned.x[i * (size_t)poisoned.features + 3] = NAN;
    sync_run *s = calloc(1, sizeof *s);
    cr_assert(s);
    *s = (sync_run){.m = f.mod.task->model,
                    .o = {.batch = 64,
                          .optim = {.kind = RT_OPT_SGD, .lr = 0.05f, .momentum = 0.9f},
                          .seed = 3,
                          .train_set = &clean,
                          .test_set = &test},
                    .train_of = {&clean, &poisoned},
                    .world = 2,
                    .epochs = 1};
    run(s);
    for (int i = 0; i < 2; i++) {
        const rank_state *me = &s->r[i];
        /* Rank 0 learns of rank 1's NaN through the summed loss, not through
         * a timeout or a broken ring. */
        cr_assert(me->rc == FERRY_ERANGE, "rank %d: rc %d (%s): %s", i, me->rc,
                  ferry_err_name(me->rc), me->err);
        cr_assert(strstr(me->err, "loss is nan at epoch 1 step 1"), "rank %d: %s", i,
                  me->err);
        cr_assert(me->params, "rank %d: no parameters", i);
    }
    /* The NaN step was not taken: the ranks hold the same finite values. */
    for (size_t k = 0; k < s->plen; k++)
        cr_assert(isfinite(s->r[0].params[k]), "rank 0 parameter %zu is %g", k,
                  (double)s->r[0].params[k]);
    assert_ranks_identical(s, "after a NaN");
    untrack(s);
    free(s);
    rt_dataset_free(&clean);
    rt_dataset_free(&poisoned);
    rt_dataset_free(&test);
    ttrain_close(&f);
    rpc_buf_trim();
    tcom_assert_no_leaks();
}

/* The mlp, except on its second step: rank 1's loss_grad fails once its
 * backward has run (the buckets its grad_ready calls started are on their
 * way), and rank 0's starts only once rank 1's thread has given the step
 * up and is done (or 10 s passed), so that its chunks for those buckets
 * reach rank 1 only after that. */
static const ferry_model_t *mlp;
static atomic_int calls[2];
static const atomic_bool *failing_rank_done;
static atomic_bool waited_for_it;

static int slow_second_step(ferry_model_ctx_t *mc, const float *p, const ferry_batch_t *b,
                            float *grad, float *loss)
{
    if (atomic_fetch_add(&calls[0], 1) == 1) {
        for (int ms = 0; ms < 10000 && !atomic_load(failing_rank_done); ms += 2)
            usleep(2000);
        atomic_store(&waited_for_it, atomic_load(failing_rank_done));
    }
    return mlp->loss_grad(mc, p, b, grad, loss);
}

static int failing_second_step(ferry_model_ctx_t *mc, const float *p,
                               const ferry_batch_t *b, float *grad, float *loss)
{
    int rc = mlp->loss_grad(mc, p, b, grad, loss);
    return rc == 0 && atomic_fetch_add(&calls[1], 1) == 1 ? FERRY_EIO : rc;
}

Test(train_sync, a_model_failing_mid_step_on_one_rank_stops_the_others_at_once)
{
    ttrain f;
    ttrain_open(&f, "mlp");
    rt_dataset train, test;
    ttrain_random_set(&train, 512, 1, 28, 28, 10, 7);
    ttrain_random_set(&test, 128, 1, 28, 28, 10, 8);
    mlp = f.mod.task->model;
    atomic_store(&calls[0], 0);
    atomic_store(&calls[1], 0);
    ferry_model_t slow = *mlp, failing = *mlp;
    slow.loss_grad = slow_second_step;
    failing.loss_grad = failing_second_step;
    sync_run *s = calloc(1, sizeof *s);
    cr_assert(s);
    failing_rank_done = &s->r[1].finished;
    atomic_store(&waited_for_it, false);
    /* 16 KiB buckets: fc3's and fc2's start from grad_ready, mid-backward. */
    *s = (sync_run){.m = mlp,
                    .o = {.batch = 50,
                          .optim = {.kind = RT_OPT_SGD, .lr = 0.05f},
                          .seed = 5,
                          .bucket_bytes = 16 << 10,
                          .train_set = &train,
                          .test_set = &test},
                    .model_of = {&slow, &failing},
                    .world = 2,
                    .epochs = 1,
                    .chunk_bytes = 4096};
    run(s);
    cr_assert(atomic_load(&waited_for_it), "rank 0's second step began before rank 1 "
                                           "had given it up");
    cr_assert(s->r[1].rc == FERRY_EIO, "rank 1: rc %d (%s): %s", s->r[1].rc,
              ferry_err_name(s->r[1].rc), s->r[1].err);
    cr_assert(strstr(s->r[1].err, "loss_grad failed at epoch 1 step 2"), "rank 1: %s",
              s->r[1].err);
    /* Rank 0 hears from rank 1's session that it stopped, instead of
     * waiting out the 10 s timeout for the buckets rank 1 never starts;
     * and rank 1's session has let go of the reduction buffer, which
     * rank_main frees at once (rank 0's chunks, come later, would be added
     * into it: the sanitizer build sees that). */
    cr_assert(s->r[0].rc == FERRY_ECANCELED, "rank 0: rc %d (%s): %s", s->r[0].rc,
              ferry_err_name(s->r[0].rc), s->r[0].err);
    cr_assert(strstr(s->r[0].err, "rank 1") &&
                  strstr(s->r[0].err, "loss_grad failed at epoch 1 step 2"),
              "rank 0: %s", s->r[0].err);
    untrack(s);
    free(s);
    ttrain_free_set(&train);
    ttrain_free_set(&test);
    ttrain_close(&f);
    rpc_buf_trim();
    tcom_assert_no_leaks();
}

/* The value of tensor `name` of `t`, element k. */
static float tensor_at(const rt_tensors *t, const char *name, size_t k)
{
    size_t at = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t c = 1;
        for (int d = 0; d < 4 && t->shapes[4 * i + d]; d++)
            c *= t->shapes[4 * i + d];
        if (strcmp(t->names[i], name) == 0)
            return t->values[at + k];
        at += c;
    }
    cr_assert_fail("no tensor %s among the %zu", name, t->n);
    return 0;
}

/* Batch normalisation in sync mode: each rank normalises by its own slice
 * of the batch (DDP without SyncBatchNorm), and before the evaluation rank
 * 0's running statistics replace the others'. Rank 0 trains on one sample
 * repeated and rank 1 on random ones: after the epoch both hold what rank
 * 0's data alone gives whatever the parameters did (the layer is first:
 * running mean v (1 - 0.9^K), variance 0.9^K, K batches counted), and an
 * evaluation alone with rank 0's state gets the run's test loss. */
Test(train_sync, batchnorm_ranks_evaluate_with_rank_0s_running_statistics)
{
    const char *dir = getenv("FERRY_TEST_NN");
    cr_assert(dir, "FERRY_TEST_NN is not set (run through meson test)");
    char path[4096], err[512] = "";
    snprintf(path, sizeof path, "%s/nn_bn_first.so", dir);
    rt_module mod;
    cr_assert_eq(rt_module_open(&mod, path, "nn_bn_first.so", err, sizeof err), 0, "%s",
                 err);
    rt_dataset same, other, test;
    ttrain_random_set(&same, 256, 1, 1, 8, 4, 3);
    ttrain_random_set(&other, 256, 1, 1, 8, 4, 4);
    ttrain_random_set(&test, 100, 1, 1, 8, 4, 5);
    for (size_t i = 1; i < same.n; i++)
        memcpy(same.x + 8 * i, same.x, 8 * sizeof *same.x);
    rt_train_opts o = {.batch = 32,
                       .optim = {.kind = RT_OPT_SGD, .lr = 0.05f},
                       .seed = 9,
                       .train_set = &same,
                       .test_set = &test};
    sync_run *s = calloc(1, sizeof *s);
    cr_assert(s);
    *s = (sync_run){.m = mod.task->model, .o = o, .world = 2, .epochs = 1};
    s->train_of[1] = &other;
    run(s);
    assert_all_ok(s, "batch normalisation");
    const int K = 256 / 32;
    for (int r = 0; r < 2; r++) {
        const rt_tensors *st = &s->r[r].state;
        cr_expect_eq(tensor_at(st, "bn.num_batches_tracked", 0), (float)K,
                     "rank %d counted %g batches", r,
                     (double)tensor_at(st, "bn.num_batches_tracked", 0));
        for (int f = 0; f < 8; f++) {
            double m = same.x[f] * (1 - pow(0.9, K)), v = pow(0.9, K);
            float gm = tensor_at(st, "bn.running_mean", (size_t)f),
                  gv = tensor_at(st, "bn.running_var", (size_t)f);
            cr_expect(fabs(gm - m) <= 1e-5 * (1 + fabs(m)) && fabs(gv - v) <= 1e-5,
                      "rank %d feature %d: running mean %g and variance %g, rank 0's "
                      "data gives %g and %g",
                      r, f, (double)gm, (double)gv, m, v);
        }
    }
    /* Alone, from rank 0's parameters and buffers. */
    rt_train_opts lone = o;
    lone.init_tensors = &s->r[0].state;
    rt_trainer *t;
    cr_assert_eq(rt_trainer_create(mod.task->model, s->r[0].dev, &lone, &t, err,
                                   sizeof err),
                 0, "%s", err);
    rt_epoch_stats st;
    cr_assert_eq(rt_trainer_evaluate(t, t->params, &st, err, sizeof err), 0, "%s", err);
    cr_expect(fabs(st.test_loss - s->r[0].st.test_loss) <= 1e-5 * st.test_loss &&
                  st.test_accuracy == s->r[0].st.test_accuracy,
              "alone with rank 0's state: loss %.7g, accuracy %g; the run: %.7g, %g",
              st.test_loss, st.test_accuracy, s->r[0].st.test_loss,
              s->r[0].st.test_accuracy);
    rt_trainer_destroy(t);
    untrack(s);
    free(s);
    ttrain_free_set(&same);
    ttrain_free_set(&other);
    ttrain_free_set(&test);
    rt_module_close(&mod);
}
