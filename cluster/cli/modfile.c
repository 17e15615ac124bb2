/* Reading the module file `ferry submit` was given, with a sentence for
 * each way it is not one: a directory, a FIFO or a device (opened without
 * blocking, so a FIFO cannot hang submit), a file too large to ship. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static const char *kind(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISCHR(m) || S_ISBLK(m))
        return "a device";
    return "not a regular file";
}

const char *cli_base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int cli_read_module(const char *path, const conf_cluster *conf, void **out, size_t *len,
                    char *err, size_t errlen)
{
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(-rc));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s is %s, not a module file (a .so)", path,
                 kind(st.st_mode));
        rc = FERRY_EINVAL;
        goto out;
    }
    if ((uint64_t)st.st_size > (uint64_t)CONF_MAX_BYTES_LIMIT) {
        snprintf(err, errlen,
                 "%s is %lld bytes: more than any cluster ships (max_module_bytes is at "
                 "most %lld)",
                 path, (long long)st.st_size, (long long)CONF_MAX_BYTES_LIMIT);
        rc = FERRY_EMSGSIZE;
        goto out;
    }
    /* Before a byte is read: a module over the limit would otherwise cost
     * its whole size in memory just to be refused. */
    if (conf && (rc = cli_check_module_size(cli_base_name(path), (size_t)st.st_size, conf,
                                            err, errlen)))
        goto out;
    *len = (size_t)st.st_size;
    *out = malloc(*len ? *len : 1);
    if (!*out) {
        snprintf(err, errlen, "%s: no memory for its %zu bytes", path, *len);
        rc = FERRY_ENOMEM;
        goto out;
    }
    size_t got = 0;
    while (got < *len) {
        ssize_t n = read(fd, (char *)*out + got, *len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(err, errlen, "cannot read %s: %s", path,
                     n < 0 ? strerror(errno) : "it shrank while being read");
            rc = FERRY_EIO;
            break;
        }
        got += (size_t)n;
    }
out:
    close(fd);
    if (rc) {
        free(*out);
        *out = NULL;
        *len = 0;
    }
    return rc;
}

int cli_check_module_size(const char *name, size_t len, const conf_cluster *conf,
                          char *err, size_t errlen)
{
    if ((int64_t)len <= conf->max_module_bytes)
        return 0;
    snprintf(err, errlen,
             "%s is %zu bytes (%.1f MiB): over the cluster's max_module_bytes, %lld "
             "bytes (%.1f MiB; a cluster-file key)",
             name, len, (double)len / (1 << 20), (long long)conf->max_module_bytes,
             (double)conf->max_module_bytes / (1 << 20));
    return FERRY_EMSGSIZE;
}
