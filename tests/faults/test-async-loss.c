/* A worker lost in the middle of async training, one that holds no shard
 * of the parameter server: a SIGKILL at a random moment is named, the
 * others keep training, the supervisor's restart takes the worker back in
 * from the shards' current values, and the run ends within a point of the
 * accuracy of its twin that lost nothing (async runs are not
 * bit-identical). With --max-restarts 0 the worker stays out, as before. */
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
#define EPOCHS  "16"
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
        double u = (rand() + 1.0) / (RAND_MAX + 2.0), v = (rand() + 1.0) / (RAND_MAX + 2.0);
        double r = sqrt(-2 * log(u)) * 0.9;
        len += (size_t)snprintf(text + len, cap - len, "%.3f,%.3f,c%d\n",
                                cx[c] + r * cos(2 * M_PI * v), cy[c] + r * sin(2 * M_PI * v),
                                c);
    }
    const char *path = e2e_write_file("blobs.csv", text);
    free(text);
    return path;
}

/* What the killer thread does: once `dir` holds a shard's checkpoint (the
 * run is training), waits `delay_ms` and kills worker `rank`. */
typedef struct killer {
    const char *dir;
    int rank, delay_ms;
    pid_t victim;
} killer;

static void *kill_main(void *arg)
{
    killer *k = arg;
    for (int i = 0; i < 6000; i++) {
        char **names;
        int n = rt_ckpt_list_shards(k->dir, &names);
        rt_ckpt_names_free(names, n > 0 ? n : 0);
        if (n > 0)
            break;
        usleep(10000);
    }
    usleep((useconds_t)k->delay_ms * 1000);
    k->victim = e2e_worker_pid_file(k->rank);
    if (k->victim > 0 && kill(k->victim, SIGKILL) != 0)
        k->victim = 0;
    return NULL;
}

/* An async mlp run on the blobs with one shard (held by rank 0), its
 * checkpoints in `tag`'s directory, with --max-restarts `max`. */
static void run(e2e_run *r, const char *data, const char *tag, const char *max)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ck-%s", e2e_home, tag);
    e2e_ferry(r, RUN_MS, "submit", e2e_task("mlp"), "--data", data, "--label", "class",
              "--mode", "async", "--ps-shards", "1", "--epochs", EPOCHS, "--seed", "3",
              "--checkpoint-dir", dir, "--checkpoint-every", "8", "--max-restarts", max,
              "--json", NULL);
}

/* The same run with a random worker other than the shard's holder killed
 * at a random moment; its output in *r. */
static pid_t run_with_kill(e2e_run *r, const char *data, const char *tag, const char *max,
                           int rank, int delay_ms)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ck-%s", e2e_home, tag);
    killer k = {.dir = dir, .rank = rank, .delay_ms = delay_ms};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, kill_main, &k), 0);
    run(r, data, tag, max);
    pthread_join(th, NULL);
    cr_assert(k.victim > 0, "%s: worker %d was not killed:\n%s", tag, rank, r->err);
    return k.victim;
}

Test(faults_async, a_killed_worker_without_a_shard_rejoins_and_the_run_finishes)
{
    e2e_start(WORKERS);
    const char *data = blobs();
    e2e_run r;
    run(&r, data, "twin", "3");
    E2E_EXPECT(&r, 0);
    double twin = e2e_json_number(r.out, "test_accuracy");
    e2e_run_fini(&r);
    for (unsigned seed = 1; seed <= 2; seed++) {
        srand(20261128 + seed);
        char tag[32];
        snprintf(tag, sizeof tag, "kill%u", seed);
        int rank = 1 + rand() % (WORKERS - 1);
        pid_t victim = run_with_kill(&r, data, tag, "3", rank, rand() % 300);
        E2E_EXPECT(&r, 0);
        char said[64];
        snprintf(said, sizeof said, "worker %d (", rank);
        cr_assert(e2e_has(r.err, said) && e2e_has(r.err, "SIGKILL") &&
                      e2e_has(r.err, "restarted by its supervisor: rejoins the async run") &&
                      e2e_has(r.err, "from the shards' current values"),
                  "seed %u: the restart of worker %d is not named:\n%s", seed, rank, r.err);
        double acc = e2e_json_number(r.out, "test_accuracy");
        cr_log_info("async mlp on blobs: %.4f without a fault, %.4f with worker %d killed",
                    twin, acc, rank);
        cr_assert(fabs(acc - twin) <= 0.01, "seed %u: accuracy %.4f, its twin's %.4f:\n%s",
                  seed, acc, twin, r.err);
        cr_assert(e2e_json_number(r.out, "workers_lost") == 0,
                  "seed %u: the worker is still counted lost:\n%s", seed, r.out);
        e2e_run_fini(&r);
        cr_assert(e2e_wait_new_worker(rank, victim, 10000) > 0);
    }
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
