/* bench/train — children with their stdout on a pipe. */
#include "train_child.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int bench_proc_start(bench_proc *p, char *const argv[], const char *const *env)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -errno;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return -e;
    }
    if (pid == 0) {
        for (size_t i = 0; env && env[i]; i++) {
            const char *eq = strchr(env[i], '=');
            if (eq)
                putenv((char *)env[i]);
            else
                unsetenv(env[i]);
        }
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], argv);
        fprintf(stderr, "bench/train: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    p->pid = pid;
    p->out = fdopen(fds[0], "r");
    if (!p->out) {
        int e = errno;
        close(fds[0]);
        bench_proc_wait(p);
        return -e;
    }
    return 0;
}

int bench_proc_wait(bench_proc *p)
{
    if (p->out)
        fclose(p->out);
    p->out = NULL;
    int status;
    while (waitpid(p->pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static const char *after_key(const char *line, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    return p ? p + strlen(pat) : NULL;
}

double bench_json_number(const char *line, const char *key)
{
    const char *p = after_key(line, key);
    char *end;
    double v = p ? strtod(p, &end) : NAN;
    return p && end != p ? v : NAN;
}

void bench_json_string(const char *line, const char *key, char *buf, size_t len)
{
    const char *p = after_key(line, key);
    size_t n = 0;
    if (p && (p = strchr(p, '"'))) {
        for (p++; *p && *p != '"' && n + 1 < len; p++) {
            if (*p == '\\' && p[1])
                p++;
            buf[n++] = *p;
        }
    }
    buf[n] = '\0';
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

void bench_remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
