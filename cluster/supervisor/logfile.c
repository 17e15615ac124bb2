/* A log file in FERRY_HOME/logs that rotates at a size.
 *
 * A tokenless client, a chatty task or a crash loop can write without end;
 * the disk must not fill. Past max_bytes the file becomes NAME.1 (NAME.1
 * becomes NAME.2, ... up to `keep`) and a new one starts. Only the
 * supervisor writes logs (it copies each worker's output from a pipe), so
 * renaming is safe: nobody else holds the file open. The supervisor's own
 * lines carry the time and its pid. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "supervisor_int.h"

static int open_log(sv_logfile *l, bool truncate)
{
    int fd =
        open(l->path,
             O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0600);
    if (fd < 0)
        return -errno;
    struct stat st;
    l->size = fstat(fd, &st) == 0 ? st.st_size : 0;
    if (l->dup_to_stdio) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
    }
    l->fd = fd;
    return 0;
}

int sv_logfile_open(sv_logfile *l, const char *path, int64_t max_bytes, int keep, bool stdio)
{
    memset(l, 0, sizeof *l);
    l->fd = -1;
    snprintf(l->path, sizeof l->path, "%s", path);
    l->max_bytes = max_bytes;
    l->keep = keep;
    l->dup_to_stdio = stdio;
    return open_log(l, false);
}

static void rotate(sv_logfile *l)
{
    char from[HOME_FILE_MAX + 16], to[HOME_FILE_MAX + 16];
    close(l->fd);
    l->fd = -1;
    if (l->keep > 0) {
        for (int i = l->keep - 1; i >= 1; i--) {
            snprintf(from, sizeof from, "%s.%d", l->path, i);
            snprintf(to, sizeof to, "%s.%d", l->path, i + 1);
            rename(from, to);
        }
        snprintf(to, sizeof to, "%s.1", l->path);
        rename(l->path, to);
    }
    /* keep 0: the one file starts over. */
    open_log(l, true);
}

static void write_all(sv_logfile *l, const char *p, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(l->fd, p + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* a full disk loses log lines, not the cluster */
        off += (size_t)n;
    }
    l->size += (int64_t)off;
}

/* How much of p[0..len) goes into the current file: all that fits, cut
 * after its last whole line; 0: rotate first. */
static size_t fits(const sv_logfile *l, const char *p, size_t len)
{
    if (l->max_bytes <= 0 || l->size + (int64_t)len <= l->max_bytes)
        return len;
    size_t room = l->size < l->max_bytes ? (size_t)(l->max_bytes - l->size) : 0;
    const char *nl = room ? memrchr(p, '\n', room) : NULL;
    if (nl)
        return (size_t)(nl - p) + 1;
    /* A fresh file takes a line longer than the limit in pieces. */
    return l->size > 0 ? 0 : room;
}

void sv_logfile_write(sv_logfile *l, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0 && l->fd >= 0) {
        size_t take = fits(l, p, len);
        if (take == 0) {
            rotate(l);
            continue;
        }
        write_all(l, p, take);
        p += take;
        len -= take;
    }
}

void sv_logfile_close(sv_logfile *l)
{
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}

void sv_log(supervisor *sv, const char *fmt, ...)
{
    time_t t = time(NULL);
    struct tm tm;
    char line[1024];
    int n = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", localtime_r(&t, &tm));
    n += snprintf(line + n, sizeof line - (size_t)n, " supervisor[%d]: ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    if (n < (int)sizeof line)
        n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    sv_logfile_write(&sv->log, line, (size_t)n);
}
