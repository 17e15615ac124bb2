/* SIGTERM and SIGINT, which stop the worker as a Shutdown call does. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "wm_int.h"

/* SIGTERM and SIGINT may land on any thread (gRPC's included) at any time,
 * also while main destroys the worker; so the handler touches only a pipe
 * that outlives the worker (it is never closed). Main waits on the worker
 * and on that pipe together. */
static int signal_pipe[2] = {-1, -1};

static void on_stop_signal(int sig)
{
    (void)sig;
    int saved = errno;
    ssize_t n = write(signal_pipe[1], "x", 1);
    (void)n; /* a full pipe already holds a wake-up */
    errno = saved;
}

int wm_install_stop_signals(void)
{
    /* Both ends non-blocking: the handler must never block, and main only
     * polls the read end. Created once per process, never closed. */
    if (signal_pipe[0] < 0 && pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return -errno;
    char stale[64]; /* an earlier run in this process left its wake-ups */
    while (read(signal_pipe[0], stale, sizeof stale) > 0)
        ;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART; /* a burst of signals must not fail start-up's I/O */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0)
        return -errno;
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    return -pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
}

int wm_stop_signal_fd(void)
{
    return signal_pipe[0];
}
