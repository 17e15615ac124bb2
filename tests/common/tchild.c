/* tests/common — children that tests kill. */
#include "tchild.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

pid_t tcom_fork(void)
{
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork failed");
    if (pid == 0)
        prctl(PR_SET_PDEATHSIG, SIGKILL);
    return pid;
}

typedef struct later {
    pid_t pid;
    int ms;
} later;

static void *kill_main(void *arg)
{
    later l = *(later *)arg;
    free(arg);
    usleep((useconds_t)l.ms * 1000);
    kill(l.pid, SIGKILL);
    return NULL;
}

void tcom_kill_after(pid_t pid, int ms, pthread_t *th)
{
    later *l = malloc(sizeof *l);
    cr_assert(l);
    *l = (later){pid, ms};
    cr_assert(pthread_create(th, NULL, kill_main, l) == 0);
}

void tcom_reap(pid_t *pid)
{
    if (*pid > 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
    }
    *pid = 0;
}
