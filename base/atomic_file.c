/* Replacing a file whole: temp file, fsync, rename. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"

int base_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int sync_dir_of(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return FERRY_ENOMEM;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(copy);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

int base_write_atomic(const char *path, const void *data, size_t len, bool durable)
{
    size_t n = strlen(path);
    char *tmp = malloc(n + sizeof ".tmp.XXXXXX");
    if (!tmp)
        return FERRY_ENOMEM;
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    /* mkstemp creates the file 0600 and O_EXCL: a secret is never visible
     * with looser permissions, not even for a moment. */
    int fd = mkostemp(tmp, O_CLOEXEC);
    int rc;
    if (fd < 0) {
        rc = -errno;
        free(tmp);
        return rc;
    }
    rc = base_write_all(fd, data, len);
    if (!rc && fchmod(fd, 0600) != 0)
        rc = -errno;
    if (!rc && durable && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path) != 0)
        rc = -errno;
    if (rc)
        unlink(tmp);
    else if (durable)
        rc = sync_dir_of(path);
    free(tmp);
    return rc;
}
