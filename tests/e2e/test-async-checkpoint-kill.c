/* An async run's checkpoint writers (its workers, each writing the shard
 * it holds every global step) killed from outside at random moments, round
 * after round, each round continuing from the last: every shard file left
 * is whole, a whole set is always there, and a run continues from it.
 * --max-restarts 0: the run ends with its writer, not restoring its shard. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "e2e.h"
#include "e2e_train.h"
#include "runtime/train/ckpt_file.h"

TestSuite(e2e_async_checkpoint_kill, .init = e2e_setup, .fini = e2e_teardown,
          .timeout = 300);

#define ROUNDS 5

/* Asserts every shard file in `dir` reads back whole; the newest set
 * whose two shards are both there (0: none). */
static uint64_t expect_whole(const char *dir, int round)
{
    char **names;
    int n = rt_ckpt_list_shards(dir, &names);
    uint64_t newest = 0, steps, prev = UINT64_MAX;
    for (int i = 0; i < n; i++) { /* newest first: shard 1 before shard 0 */
        char path[1300], why[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        rt_ckpt_file f;
        cr_assert_eq(rt_ckpt_read(path, &f, why, sizeof why), 0, "round %d: %s: %s",
                     round, path, why);
        rt_ckpt_file_free(&f);
        int shard, shards;
        cr_assert(rt_ckpt_is_shard_name(names[i], &steps, &shard, &shards));
        if (shard == 0 && steps == prev && !newest)
            newest = steps;
        prev = shard == 1 ? steps : UINT64_MAX;
    }
    rt_ckpt_names_free(names, n);
    return newest;
}

/* The newest set's steps of either shard (0: none yet). */
static uint64_t newest_file(const char *dir)
{
    char **names;
    int n = rt_ckpt_list_shards(dir, &names);
    uint64_t steps = 0;
    if (n > 0)
        rt_ckpt_is_shard_name(names[0], &steps, NULL, NULL);
    rt_ckpt_names_free(names, n > 0 ? n : 0);
    return steps;
}

Test(e2e_async_checkpoint_kill, writers_killed_at_any_moment_leave_a_whole_set)
{
    e2e_start(2);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/kill", e2e_home);
    cr_assert_eq(mkdir(dir, 0700), 0);
    srand(20261128);
    for (int round = 0; round < ROUNDS; round++) {
        int victim = rand() % 2;
        pid_t w = e2e_worker_pid_file(victim);
        cr_assert(w > 0);
        uint64_t before = newest_file(dir);
        char out[600], err[600];
        e2e_next_outputs(out, err);
        pid_t sub =
            round ? e2e_spawn("submit", e2e_task("linreg"), "--mode", "async", "--epochs",
                              "100000", "--resume", dir, "--checkpoint-every", "1",
                              "--max-restarts", "0", NULL)
                  : e2e_spawn("submit", e2e_task("linreg"), "--mode", "async", "--epochs",
                              "100000", "--checkpoint-dir", dir, "--checkpoint-every",
                              "1", "--max-restarts", "0", NULL);
        bool wrote = false;
        for (int i = 0; i < 3000 && !wrote && e2e_alive(sub); i++) {
            wrote = newest_file(dir) > before;
            if (!wrote)
                usleep(10000);
        }
        char *said = wrote ? NULL : e2e_slurp(err);
        cr_assert(wrote, "round %d: the run wrote no checkpoint (%s):\n%s", round,
                  e2e_alive(sub) ? "it still runs" : "it ended", said ? said : "");
        free(said);
        usleep((useconds_t)(rand() % 30000));
        cr_assert_eq(kill(w, SIGKILL), 0);
        cr_assert(e2e_wait_gone(sub, 60000), "round %d: submit still runs", round);
        cr_assert(expect_whole(dir, round) > 0, "round %d: no whole set left", round);
        cr_assert(e2e_wait_new_worker(victim, w, 30000) > 0, "round %d: no worker %d",
                  round, victim);
        /* The restarted worker has written its pid before it listens (a
         * submit then fails within its 3 s ping, slower under load), and
         * the survivor's session lingers until the run's end is seen: the
         * next round starts once both answer with nothing in flight. */
        cr_assert(e2e_wait_idle(2, 60000), "round %d: the workers are not both back",
                  round);
    }
    /* One epoch past the newest whole set. */
    char p[1300], why[256], epochs[32];
    snprintf(p, sizeof p, "%s/", dir);
    rt_ckpt_shard_name(expect_whole(dir, ROUNDS), 0, 2, p + strlen(p),
                       sizeof p - strlen(p));
    rt_ckpt_file f;
    cr_assert_eq(rt_ckpt_read(p, &f, why, sizeof why), 0, "%s: %s", p, why);
    snprintf(epochs, sizeof epochs, "%llu", (unsigned long long)f.h.epoch + 1);
    rt_ckpt_file_free(&f);
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--mode", "async", "--epochs",
              epochs, "--resume", dir, NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.err, "continuing from ") && !e2e_has(r.err, "checksum") &&
                  !e2e_has(r.err, "truncated") && !e2e_has(r.err, "empty"),
              "%s", r.err);
    e2e_run_fini(&r);
}
