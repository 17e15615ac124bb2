/* Stopping a supervisor with everything it started: the cluster lock tells
 * when it is gone. */
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "cli.h"

bool cli_wait_unlocked(const home_paths *h, double ms)
{
    double end = base_mono_ms() + ms;
    while (conf_lock_held(h->dir)) {
        if (base_mono_ms() > end)
            return false;
        usleep(10000);
    }
    return true;
}

bool cli_stop_supervisor(const home_paths *h, pid_t sup, double wait_ms)
{
    /* The lock is held by the supervisor alone: its release is the
     * supervisor's end, whoever its parent is. */
    bool gone = cli_wait_unlocked(h, wait_ms);
    if (!gone && sup > 0) {
        kill(sup, SIGTERM);
        gone = cli_wait_unlocked(h, 8000);
    }
    if (!gone && sup > 0) {
        /* Its own process group holds it and the workers it spawned. */
        kill(-sup, SIGKILL);
        gone = cli_wait_unlocked(h, 2000);
    }
    /* `start` giving up stops its own child: reap it, so no zombie stays.
     * Of anyone else's process, waitpid says ECHILD at once. */
    for (int i = 0; sup > 0 && i < 100 && waitpid(sup, NULL, WNOHANG) == 0; i++)
        usleep(10000);
    return gone;
}
