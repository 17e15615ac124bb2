/* The checkpoint writer (rank 0's worker) killed from outside at random
 * moments of a run that writes one every step: whatever the moment, every
 * checkpoint file left in the directory is whole, there is always one,
 * and a run continues from the newest. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "e2e.h"
#include "runtime/train/ckpt_file.h"

TestSuite(e2e_checkpoint_kill, .init = e2e_setup, .fini = e2e_teardown, .timeout = 400);

#define ROUNDS 8

/* Temporary files of writes that never finished. */
static int leftovers(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        n += strstr(e->d_name, RT_CKPT_SUFFIX ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* Every checkpoint in `dir` reads back whole; returns the newest's epoch. */
static uint64_t expect_all_whole(const char *dir, int round)
{
    char **names;
    int n = rt_ckpt_list(dir, &names);
    cr_assert(n >= 1, "round %d: no checkpoint left in %s", round, dir);
    uint64_t epoch = 0;
    for (int i = 0; i < n; i++) {
        char path[1024], why[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        rt_ckpt_file f;
        cr_assert_eq(rt_ckpt_read(path, &f, why, sizeof why), 0, "round %d: %s: %s",
                     round, path, why);
        if (i == 0)
            epoch = f.h.epoch;
        rt_ckpt_file_free(&f);
    }
    rt_ckpt_names_free(names, n);
    return epoch;
}

Test(e2e_checkpoint_kill, the_writer_killed_at_any_moment_leaves_whole_checkpoints)
{
    e2e_start(1);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/kill", e2e_home);
    cr_assert_eq(mkdir(dir, 0700), 0);
    srand(20261128);
    int cut = 0;
    uint64_t epoch = 0;
    for (int round = 0; round < ROUNDS; round++) {
        pid_t w = e2e_worker_pid_file(0);
        cr_assert(w > 0);
        char before[64] = "";
        char **names;
        int n = rt_ckpt_list(dir, &names);
        if (n > 0)
            snprintf(before, sizeof before, "%s", names[0]);
        rt_ckpt_names_free(names, n);
        /* A crash loop: each run after the first continues from the last. */
        pid_t sub = round ? e2e_spawn("submit", e2e_task("linreg"), "--epochs", "100000",
                                      "--resume", dir, "--checkpoint-every", "1",
                                      "--keep", "2", NULL)
                          : e2e_spawn("submit", e2e_task("linreg"), "--epochs", "100000",
                                      "--checkpoint-dir", dir, "--checkpoint-every", "1",
                                      "--keep", "2", NULL);
        /* Once this run writes, at a random moment. */
        bool wrote = false;
        for (int i = 0; i < 3000 && !wrote; i++) {
            n = rt_ckpt_list(dir, &names);
            wrote = n > 0 && strcmp(names[0], before) > 0;
            rt_ckpt_names_free(names, n);
            if (!wrote)
                usleep(10000);
        }
        cr_assert(wrote, "round %d: the run wrote no checkpoint", round);
        usleep((useconds_t)(rand() % 40000));
        cr_assert_eq(kill(w, SIGKILL), 0);
        cr_assert(e2e_wait_gone(sub, 60000), "round %d: submit still runs", round);
        cut += leftovers(dir);
        epoch = expect_all_whole(dir, round);
        cr_assert(e2e_wait_new_worker(0, w, 30000) > 0, "round %d: no worker 0", round);
    }
    cr_log_info("%d of %d kills left a write unfinished", cut, ROUNDS);
    char epochs[32];
    snprintf(epochs, sizeof epochs, "%llu", (unsigned long long)epoch + 1);
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", epochs, "--resume",
              dir, NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.err, "continuing from ") && !e2e_has(r.err, "warning"), "%s",
              r.err);
    e2e_run_fini(&r);
}
