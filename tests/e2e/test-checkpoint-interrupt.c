/* Ctrl-C (SIGINT) of `ferry submit` while its run writes checkpoints: the
 * submit says where they are and how to continue, every checkpoint left is
 * whole, and the workers are free for the run that continues from them. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"
#include "e2e_ckpt.h"
#include "runtime/train/ckpt_file.h"

TestSuite(e2e_checkpoint_interrupt, .init = e2e_setup, .fini = e2e_teardown,
          .timeout = 240);

/* `ferry submit` of linreg, endless, writing a checkpoint every step into
 * dir, its stderr into errpath. */
static pid_t submit(const char *dir, const char *errpath)
{
    const char *bin = getenv("FERRY_TEST_BIN");
    cr_assert(bin);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int o = open("/dev/null", O_WRONLY);
        if (e < 0 || o < 0)
            _exit(127);
        dup2(o, 1);
        dup2(e, 2);
        signal(SIGINT, SIG_DFL);
        execl(bin, bin, "submit", e2e_task("linreg"), "--epochs", "100000",
              "--checkpoint-dir", dir, "--checkpoint-every", "1", (char *)NULL);
        _exit(127);
    }
    return pid;
}

Test(e2e_checkpoint_interrupt,
     sigint_says_where_the_checkpoints_are_and_leaves_them_whole)
{
    e2e_start(2);
    char dir[600], errpath[700];
    snprintf(dir, sizeof dir, "%s/ctrl-c", e2e_home);
    snprintf(errpath, sizeof errpath, "%s/submit.err", e2e_home);
    pid_t pid = submit(dir, errpath);
    char **names;
    int n = 0;
    for (int i = 0; i < 3000 && n < 1; i++) {
        rt_ckpt_names_free(names, n = rt_ckpt_list(dir, &names));
        if (n < 1)
            usleep(10000);
        n = n < 0 ? 0 : n;
    }
    cr_assert(n >= 1, "no checkpoint written");
    usleep(50000);
    cr_assert_eq(kill(pid, SIGINT), 0);
    int status = 0;
    bool gone = false;
    for (int i = 0; i < 3000 && !gone; i++) {
        gone = waitpid(pid, &status, WNOHANG) == pid;
        if (!gone)
            usleep(10000);
    }
    if (!gone) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    cr_assert(gone && WIFSIGNALED(status) && WTERMSIG(status) == SIGINT,
              "submit did not end by its SIGINT (status %d)", status);
    char *err = e2e_slurp(errpath);
    cr_assert(err);
    char want[800];
    snprintf(want, sizeof want, "interrupted; the checkpoints are in %s: ", dir);
    cr_assert(e2e_has(err, want) && e2e_has(err, "--resume"), "%s", err);
    free(err);
    /* Every one left is whole; the newest is where the run goes on. */
    e2e_ckpt_expect_resumes(dir, e2e_ckpt_expect_whole(dir, "after SIGINT"));
}
