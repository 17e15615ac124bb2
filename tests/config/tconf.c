/* tests/config — the shared fixture. */
#include "tconf.h"
#include "tcommon.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char T_DIR[256];

void t_setup(void)
{
    snprintf(T_DIR, sizeof T_DIR, "/tmp/ferry-test-config-XXXXXX");
    cr_assert(mkdtemp(T_DIR) != NULL, "mkdtemp failed");
}

void t_teardown(void)
{
    if (T_DIR[0])
        tcom_rm_tree(T_DIR);
}

void t_finish(void)
{
    tcom_assert_no_leaks();
}

const char *t_path(char *buf, size_t len, const char *name)
{
    int n = snprintf(buf, len, "%s/%s", T_DIR, name);
    cr_assert(n > 0 && (size_t)n < len, "path too long");
    return buf;
}

const char *t_write(const char *name, const char *text, unsigned mode)
{
    static char path[512];
    t_path(path, sizeof path, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(fd >= 0, "cannot create %s", path);
    size_t len = strlen(text);
    cr_assert(write(fd, text, len) == (ssize_t)len, "short write to %s", path);
    cr_assert(fchmod(fd, mode) == 0);
    close(fd);
    return path;
}

char *t_read(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = (len + 4096 + 1) * 2;
            buf = realloc(buf, cap);
            cr_assert(buf);
        }
        size_t n = fread(buf + len, 1, 4096, f);
        len += n;
        if (n == 0)
            break;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

int t_mode(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}
