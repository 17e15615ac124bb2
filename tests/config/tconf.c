/* tests/config — the shared fixture. */
#include "tconf.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

char T_DIR[256];

void t_setup(void)
{
    snprintf(T_DIR, sizeof T_DIR, "/tmp/ferry-test-config-XXXXXX");
    cr_assert(mkdtemp(T_DIR) != NULL, "mkdtemp failed");
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    /* A test may leave a directory read-only; its owner can still fix that. */
    chmod(path, 0700);
    return remove(path);
}

void t_teardown(void)
{
    if (T_DIR[0])
        nftw(T_DIR, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

void t_finish(void)
{
#ifdef __SANITIZE_ADDRESS__
    cr_assert(__lsan_do_recoverable_leak_check() == 0,
              "LeakSanitizer found leaks (report above)");
#endif
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

/* Criterion's default main, except that in sanitizer builds the runner
 * process's own allocations are not checked (Criterion 2.4.1 now and then
 * loses one while tests run in parallel); every test process still is, by
 * t_finish(). */
int main(int argc, char *argv[])
{
    struct criterion_test_set *tests = criterion_initialize();
    int result = 0;
#ifdef __SANITIZE_ADDRESS__
    __lsan_disable();
#endif
    if (criterion_handle_args(argc, argv, true))
        result = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    return result;
}
