/* tests/e2e — modules built in the test, and "nothing left behind" from
 * /proc. */
#include "e2e_plugin.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "e2e.h"

char *e2e_build_module(const char *name, const char *source)
{
    const char *pcdir = getenv("FERRY_TEST_PKGCONFIG");
    cr_assert(pcdir, "FERRY_TEST_PKGCONFIG is not set");
    char src[700], *so = malloc(700), cmd[3000];
    cr_assert(so);
    snprintf(src, sizeof src, "%s-%s.c", e2e_home, name);
    snprintf(so, 700, "%s-%s.so", e2e_home, name);
    FILE *f = fopen(src, "w");
    cr_assert(f, "%s: %s", src, strerror(errno));
    fputs(source, f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "cc -shared -fPIC -fvisibility=hidden -o '%s' '%s' "
             "$(PKG_CONFIG_PATH='%s' pkg-config --cflags --libs ferry-uninstalled) 2>&1",
             so, src, pcdir);
    cr_assert(system(cmd) == 0, "building %s failed: %s", name, cmd);
    return so;
}

typedef struct proc {
    pid_t pid, ppid;
    char state;
} proc;

/* Every process on the machine: pid, parent, state. */
static size_t scan(proc *out, size_t cap)
{
    DIR *d = opendir("/proc");
    cr_assert(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < cap) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        char *paren = strrchr(buf, ')');
        int ppid;
        char state;
        if (!paren || sscanf(paren + 1, " %c %d", &state, &ppid) != 2)
            continue;
        out[n++] = (proc){(pid_t)atoi(e->d_name), (pid_t)ppid, state};
    }
    closedir(d);
    return n;
}

static bool descends(const proc *all, size_t n, pid_t pid, pid_t root)
{
    for (int depth = 0; depth < 64 && pid > 1; depth++) {
        pid_t parent = 0;
        for (size_t i = 0; i < n; i++)
            if (all[i].pid == pid)
                parent = all[i].ppid;
        if (parent == root)
            return true;
        pid = parent;
    }
    return false;
}

bool e2e_proc_alive(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
}

void e2e_expect_no_descendants(int ms)
{
    static proc all[65536];
    pid_t self = getpid();
    char left[2048];
    for (int waited = 0;; waited += 50) {
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        size_t n = scan(all, sizeof all / sizeof all[0]);
        size_t used = 0, count = 0;
        left[0] = '\0';
        for (size_t i = 0; i < n; i++) {
            if (all[i].state == 'Z' || !descends(all, n, all[i].pid, self))
                continue;
            char path[64], cmd[200] = "";
            snprintf(path, sizeof path, "/proc/%d/cmdline", (int)all[i].pid);
            FILE *f = fopen(path, "r");
            if (f) {
                size_t len = fread(cmd, 1, sizeof cmd - 1, f);
                fclose(f);
                for (size_t k = 0; k < len; k++)
                    if (!cmd[k])
                        cmd[k] = ' ';
                cmd[len] = '\0';
            }
            count++;
            int w = snprintf(left + used, sizeof left - used, "  pid %d (parent %d): %s\n",
                             (int)all[i].pid, (int)all[i].ppid, cmd);
            if (w > 0 && (size_t)w < sizeof left - used)
                used += (size_t)w;
        }
        if (!count)
            return;
        cr_assert(waited < ms, "%zu process(es) of the test still run:\n%s", count, left);
        struct timespec ts = {.tv_nsec = 50 * 1000000};
        nanosleep(&ts, NULL);
    }
}

void e2e_shutdown_leaves_nothing(void)
{
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "shutdown", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    e2e_expect_no_descendants(5000);
}
