/* FERRY_HOME: where a cluster keeps its state, logs, token and lock. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_int.h"

/* Daemons chdir("/"), so a relative FERRY_HOME is made absolute here, while
 * the directory the user meant is still the current one. */
static int absolute(char *buf, size_t len, const char *dir, const char *suffix)
{
    char cwd[4096];
    int n;
    if (dir[0] == '/') {
        n = snprintf(buf, len, "%s%s", dir, suffix);
    } else {
        if (!getcwd(cwd, sizeof cwd))
            return errno == ERANGE ? FERRY_ERANGE : -errno;
        n = snprintf(buf, len, "%s/%s%s", strcmp(cwd, "/") ? cwd : "", dir, suffix);
    }
    if (n < 0 || (size_t)n >= len)
        return FERRY_ERANGE;
    /* "/tmp/x/" and "/tmp/x" are one home: keep names derived from it equal. */
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = '\0';
    return 0;
}

int conf_absolute_path(const char *dir, const char *path, char **out)
{
    char cwd[4096];
    int n;
    *out = NULL;
    if (path[0] == '/') {
        n = asprintf(out, "%s", path);
    } else if (dir && dir[0] == '/') {
        n = asprintf(out, "%s/%s", dir, path);
    } else {
        if (!getcwd(cwd, sizeof cwd))
            return -errno;
        if (!dir || strcmp(dir, ".") == 0)
            n = asprintf(out, "%s/%s", cwd, path);
        else
            n = asprintf(out, "%s/%s/%s", cwd, dir, path);
    }
    if (n < 0) {
        *out = NULL;
        return FERRY_ENOMEM;
    }
    return 0;
}

int conf_home(char *buf, size_t len)
{
    const char *home = getenv("FERRY_HOME");
    if (home && *home)
        return absolute(buf, len, home, "");
    home = getenv("HOME");
    if (home && *home)
        return absolute(buf, len, home, "/.ferry");
    return FERRY_ENOENT;
}

int conf_home_path(char *buf, size_t len, const char *home, const char *rel)
{
    while (*rel == '/')
        rel++;
    size_t hl = strlen(home);
    const char *sep = (hl && home[hl - 1] == '/') || !*rel ? "" : "/";
    int n = snprintf(buf, len, "%s%s%s", home, sep, rel);
    return n < 0 || (size_t)n >= len ? FERRY_ERANGE : 0;
}

int conf_mkdirs(const char *dir, unsigned mode)
{
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0)
        return FERRY_ENOENT;
    if (n >= sizeof path)
        return FERRY_ERANGE;
    if (strspn(dir, "/") == n)
        return 0;
    memcpy(path, dir, n + 1);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(path, (mode_t)mode) != 0) {
            int e = errno;
            struct stat st;
            if (e != EEXIST)
                return -e;
            if (stat(path, &st) != 0)
                return -errno;
            if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        }
        *p = saved;
        if (saved == '\0')
            return 0;
        while (p[1] == '/')
            p++;
    }
}
