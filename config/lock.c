/* The cluster lock: an flock on $FERRY_HOME/lock held by the supervisor of
 * the running cluster. The kernel drops it when the last process holding the
 * open file exits, however it exits, so a crashed cluster never leaves a
 * stale lock behind (a pid file would). */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "config_int.h"

/* conf_lock_held() probes by taking the lock shared for a moment; a take
 * that lands in that moment retries rather than reporting a running
 * cluster. A real holder keeps it for its whole life, far past this. */
#define TAKE_TRIES    20
#define TAKE_RETRY_NS (1000 * 1000)

static int lock_path(char *buf, size_t len, const char *home)
{
    return conf_home_path(buf, len, home, "lock");
}

int conf_lock_take(const char *home)
{
    char path[4096];
    int rc = conf_mkdirs(home, 0700);
    if (rc)
        return rc;
    if (lock_path(path, sizeof path, home))
        return FERRY_ERANGE;
    /* A forked daemon inherits the lock (fork keeps descriptors); the
     * programs it execs, the workers, must not hold it. */
    int fd = open(path, O_RDWR | O_CREAT | O_NOCTTY | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    for (int i = 0;; i++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        int e = errno;
        if (e == EINTR)
            continue;
        if (e != EWOULDBLOCK || i + 1 >= TAKE_TRIES) {
            close(fd);
            return e == EWOULDBLOCK ? FERRY_EBUSY : -e;
        }
        struct timespec ts = {0, TAKE_RETRY_NS};
        nanosleep(&ts, NULL);
    }
}

bool conf_lock_held(const char *home)
{
    char path[4096];
    if (lock_path(path, sizeof path, home))
        return false;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return false;
    int rc;
    do
        rc = flock(fd, LOCK_SH | LOCK_NB);
    while (rc != 0 && errno == EINTR);
    bool held = rc != 0 && errno == EWOULDBLOCK;
    close(fd); /* releases the shared lock, if taken */
    return held;
}
