/* The cluster token: a shared secret in a file only its owner may read. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_int.h"

#define TOKEN_BYTES (CONF_TOKEN_LEN / 2)

int conf_token_create(const char *path)
{
    unsigned char raw[TOKEN_BYTES];
    char text[CONF_TOKEN_LEN + 2];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(text + 2 * i, 3, "%02x", raw[i]);
    text[CONF_TOKEN_LEN] = '\n';
    text[CONF_TOKEN_LEN + 1] = '\0';
    int rc = base_write_atomic(path, text, CONF_TOKEN_LEN + 1, true);
    memset(raw, 0, sizeof raw);
    memset(text, 0, sizeof text);
    return rc;
}

static bool is_hex(char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
           (ch >= 'A' && ch <= 'F');
}

int conf_token_read(const char *path, char *buf, size_t len, char *err, size_t errlen)
{
    /* One byte past the longest acceptable content tells "too long" apart. */
    char text[CONF_TOKEN_LEN + 8];
    struct stat st;
    if (len < CONF_TOKEN_LEN + 1)
        return base_errf(err, errlen, FERRY_ERANGE, "token buffer too small");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        return base_errf(err, errlen, -e, "cannot open token file %s: %s", path,
                         strerror(e));
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return base_errf(err, errlen, -e, "cannot stat token file %s: %s", path,
                         strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return base_errf(err, errlen, FERRY_EINVAL, "token file %s is not a regular file",
                         path);
    }
    if (st.st_mode & 077) {
        close(fd);
        return base_errf(err, errlen, FERRY_EACCES,
                         "token file %s is %s by others (mode %04o): run chmod 600 %s",
                         path, st.st_mode & 044 ? "readable" : "accessible",
                         (unsigned)(st.st_mode & 07777), path);
    }
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, text + n, sizeof text - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return base_errf(err, errlen, -e, "cannot read token file %s: %s", path,
                             strerror(e));
        }
        n += (size_t)r;
        if (r == 0 || n == sizeof text)
            break;
    }
    close(fd);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == ' ' ||
                     text[n - 1] == '\t'))
        n--;
    if (n == 0)
        return base_errf(err, errlen, FERRY_EINVAL, "token file %s is empty", path);
    bool ok = n == CONF_TOKEN_LEN;
    for (size_t i = 0; ok && i < n; i++)
        ok = is_hex(text[i]);
    if (!ok) {
        memset(text, 0, sizeof text);
        return base_errf(err, errlen, FERRY_EINVAL,
                         "token file %s holds no token (expected %d hex characters)",
                         path, CONF_TOKEN_LEN);
    }
    memcpy(buf, text, CONF_TOKEN_LEN);
    buf[CONF_TOKEN_LEN] = '\0';
    memset(text, 0, sizeof text);
    return 0;
}
