/* A worker lost in the middle of async training: a SIGKILL at a random
 * moment is named and the run ends within a point of the accuracy of its
 * twin that lost nothing (async runs are not bit-identical). One that held
 * no shard of the parameter server: the others keep training and the
 * supervisor's restart takes it back in from the shards' current values.
 * The shard's holder: its shard is restored from its newest checkpoint on
 * the restarted worker; without --checkpoint-dir the run ends saying so.
 * With --max-restarts 0 a worker without a shard stays out, as before. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../e2e/e2e.h"
#include "../e2e/e2e_train.h"
#include "runtime/train/ckpt_file.h"

static void async_setup(void)
{
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    e2e_setup();
}

TestSuite(faults_async, .init = async_setup, .fini = e2e_teardown, .timeout = 400);

#define WORKERS 3
#define EPOCHS  "30"
#define RUN_MS  240000
#define SAMPLES 4000

/* Three classes of two features around (0, 0), (3, 3) and (-3, 3): a CSV
 * for the mlp that trains in well under a second an epoch. */
static const char *blobs(void)
{
    static const double cx[3] = {0, 3, -3}, cy[3] = {0, 3, 3};
    size_t cap = 40 * SAMPLES, len = 0;
    char *text = malloc(cap);
    cr_assert(text);
    len += (size_t)snprintf(text, cap, "x,y,class\n");
    srand(7);
    for (int i = 0; i < SAMPLES; i++) {
        int c = rand() % 3;
        double u = (rand() + 1.0) / (RAND_MAX + 2.0),
               v = (rand() + 1.0) / (RAND_MAX + 2.0);
        double r = sqrt(-2 * log(u)) * 0.9;
        len += (size_t)snprintf(text + len, cap - len, "%.3f,%.3f,c%d\n",
                                cx[c] + r * cos(2 * M_PI * v),
                                cy[c] + r * sin(2 * M_PI * v), c);
    }
    const char *path = e2e_write_file("blobs.csv", text);
    free(text);
    return path;
}

/* What the killer thread does: once the run trains (a shard's checkpoint
 * in `dir`, or without one an epoch line in `err`), waits `delay_ms` and
 * kills worker `rank`. */
typedef struct killer {
    const char *dir, *err;
    int rank, delay_ms;
    pid_t victim;
} killer;

static bool training(const killer *k)
{
    if (!k->dir) {
        char *text = e2e_slurp(k->err);
        bool yes = text && strstr(text, "\nepoch 1/");
        free(text);
        return yes;
    }
    char **names;
    int n = rt_ckpt_list_shards(k->dir, &names);
    rt_ckpt_names_free(names, n > 0 ? n : 0);
    return n > 0;
}

static void *kill_main(void *arg)
{
    killer *k = arg;
    for (int i = 0; i < 6000 && !training(k); i++)
        usleep(10000);
    usleep((useconds_t)k->delay_ms * 1000);
    k->victim = e2e_worker_pid_file(k->rank);
    if (k->victim > 0 && kill(k->victim, SIGKILL) != 0)
        k->victim = 0;
    return NULL;
}

/* An async mlp run on the blobs with one shard (held by rank 0), with
 * --max-restarts `max`, its checkpoints in `dir` (NULL: none). */
static void run(e2e_run *r, const char *data, const char *dir, const char *max)
{
    if (dir)
        e2e_ferry(r, RUN_MS, "submit", e2e_task("mlp"), "--data", data, "--label",
                  "class", "--mode", "async", "--ps-shards", "1", "--epochs", EPOCHS,
                  "--seed", "3", "--checkpoint-dir", dir, "--checkpoint-every", "8",
                  "--max-restarts", max, "--json", NULL);
    else
        e2e_ferry(r, RUN_MS, "submit", e2e_task("mlp"), "--data", data, "--label",
                  "class", "--mode", "async", "--ps-shards", "1", "--epochs", EPOCHS,
                  "--seed", "3", "--max-restarts", max, "--json", NULL);
}

static const char *dir_of(const char *tag)
{
    static char dir[600];
    snprintf(dir, sizeof dir, "%s/ck-%s", e2e_home, tag);
    return dir;
}

/* The same run with worker `rank` killed at a random moment of its
 * training; its output in *r. */
static pid_t run_with_kill(e2e_run *r, const char *data, const char *tag, const char *max,
                           int rank, int delay_ms)
{
    char out[600], err[600];
    e2e_next_outputs(out, err);
    killer k = {
        .dir = tag ? dir_of(tag) : NULL, .err = err, .rank = rank, .delay_ms = delay_ms};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, kill_main, &k), 0);
    run(r, data, k.dir, max);
    pthread_join(th, NULL);
    cr_assert(k.victim > 0, "%s: worker %d was not killed:\n%s", tag, rank, r->err);
    return k.victim;
}

/* A killed worker's restart named, the run ended as well as its twin. */
static void expect_back(e2e_run *r, unsigned seed, int rank, const char *how, double twin)
{
    E2E_EXPECT(r, 0);
    char said[64];
    snprintf(said, sizeof said, "worker %d (", rank);
    cr_assert(e2e_has(r->err, said) && e2e_has(r->err, "SIGKILL") &&
                  e2e_has(r->err, "restarted by its supervisor: ") &&
                  e2e_has(r->err, how),
              "seed %u: the restart of worker %d is not named:\n%s", seed, rank, r->err);
    double acc = e2e_json_number(r->out, "test_accuracy");
    cr_log_info("async mlp on blobs: %.4f without a fault, %.4f with worker %d killed",
                twin, acc, rank);
    cr_assert(fabs(acc - twin) <= 0.01, "seed %u: accuracy %.4f, its twin's %.4f:\n%s",
              seed, acc, twin, r->err);
    cr_assert(e2e_has(r->err, "from the shards' current values") ||
                  e2e_has(r->err, "run epoch"),
              "seed %u: where it goes on from is not said:\n%s", seed, r->err);
    cr_assert(e2e_json_number(r->out, "workers_lost") == 0,
              "seed %u: the worker is still counted lost:\n%s", seed, r->out);
}

static double twin_accuracy(const char *data)
{
    e2e_run r;
    run(&r, data, dir_of("twin"), "3");
    E2E_EXPECT(&r, 0);
    double twin = e2e_json_number(r.out, "test_accuracy");
    e2e_run_fini(&r);
    return twin;
}

/* Two seeds of a run with a worker killed at a random moment: one of the
 * workers without a shard (holder false) or the shard's holder, rank 0.
 * Each run's restart named by `how`, its end as good as its twin's. */
static void kill_twice(bool holder, const char *how)
{
    e2e_start(WORKERS);
    const char *data = blobs();
    double twin = twin_accuracy(data);
    for (unsigned seed = 1; seed <= 2; seed++) {
        srand((holder ? 20261200 : 20261128) + seed);
        char tag[32];
        snprintf(tag, sizeof tag, "%s%u", holder ? "holder" : "kill", seed);
        int rank = holder ? 0 : 1 + rand() % (WORKERS - 1);
        e2e_run r;
        pid_t victim = run_with_kill(&r, data, tag, "3", rank, rand() % 300);
        expect_back(&r, seed, rank, how, twin);
        cr_assert(!holder || e2e_has(r.err, dir_of(tag)), "%s", r.err);
        e2e_run_fini(&r);
        cr_assert(e2e_wait_new_worker(rank, victim, 10000) > 0);
    }
}

Test(faults_async, a_killed_worker_without_a_shard_rejoins_and_the_run_finishes)
{
    kill_twice(false, "rejoins the async run after epoch");
}

Test(faults_async, a_killed_shard_holder_is_restored_from_its_checkpoint)
{
    kill_twice(true, "the shard it held restored from ");
}

Test(faults_async, without_a_checkpoint_dir_a_killed_shard_holder_ends_the_run)
{
    e2e_start(WORKERS);
    const char *data = blobs();
    e2e_run r;
    run_with_kill(&r, data, NULL, "3", 0, 0);
    cr_assert(r.status == 1, "exit %d:\n%s", r.status, r.err);
    cr_assert(e2e_has(r.err, "worker 0 (") && e2e_has(r.err, "held shard 0 of 1") &&
                  e2e_has(r.err,
                          "without --checkpoint-dir there is nothing to restore it "
                          "from, so the run stops"),
              "%s", r.err);
    e2e_run_fini(&r);
}

Test(faults_async, without_restarts_a_killed_worker_stays_out)
{
    e2e_start(WORKERS);
    const char *data = blobs();
    e2e_run r;
    run_with_kill(&r, data, "norestart", "0", 2, 0);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.err, "worker 2 (") && e2e_has(r.err, "lost in epoch") &&
                  e2e_has(r.err, "goes on with 2 workers") &&
                  !e2e_has(r.err, "rejoins the async run"),
              "%s", r.err);
    e2e_run_fini(&r);
}
