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
#include "e2e_ckpt.h"
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
        char what[32];
        snprintf(what, sizeof what, "round %d", round);
        epoch = e2e_ckpt_expect_whole(dir, what);
        cr_assert(e2e_wait_new_worker(0, w, 30000) > 0, "round %d: no worker 0", round);
    }
    cr_log_info("%d of %d kills left a write unfinished", cut, ROUNDS);
    e2e_ckpt_expect_resumes(dir, epoch);
}
