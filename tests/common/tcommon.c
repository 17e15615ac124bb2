/* tests/common — shared fixture helpers. */
#include "tcommon.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

int tcom_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    socklen_t len = sizeof a;
    cr_assert(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

int tcom_listen(int port, int *fd_out)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 4) != 0) {
        close(fd);
        return -1;
    }
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    *fd_out = fd;
    return ntohs(a.sin_port);
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    (void)st, (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

void tcom_rm_tree(const char *dir)
{
    if (dir && dir[0])
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void tcom_assert_no_leaks(void)
{
#ifdef __SANITIZE_ADDRESS__
    cr_assert(__lsan_do_recoverable_leak_check() == 0,
              "LeakSanitizer found leaks (report above)");
#endif
}

long tcom_status_kib(int pid, const char *field)
{
    char path[64], line[256];
    if (pid > 0)
        snprintf(path, sizeof path, "/proc/%d/status", pid);
    else
        snprintf(path, sizeof path, "/proc/self/status");
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long kib = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':' &&
            sscanf(line + n + 1, " %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

long tcom_rss_kib(int pid)
{
    return tcom_status_kib(pid, "VmRSS");
}

void tcom_skip_missing(const char *package, const char *what)
{
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0)
        cr_assert_fail("%s is missing (package %s), which CI installs (.ci/install-deps)",
                       what, package);
    fprintf(stderr, "skipped: %s is missing (apt-get install %s)\n", what, package);
    cr_skip_test("%s is missing (apt-get install %s)", what, package);
}

int tcom_open_fds(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

int tcom_wait_open_fds(int pid, int n, int ms)
{
    struct timespec step = {0, 5 * 1000 * 1000};
    int got = tcom_open_fds(pid);
    for (int waited = 0; got < n && waited < ms; waited += 5) {
        nanosleep(&step, NULL);
        got = tcom_open_fds(pid);
    }
    return got;
}
