/* tests/launch — the shared fixture. */
#include "tlaunch.h"
#include "tchild.h"
#include "tcommon.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char *t_expand(const char *list, char *buf, size_t len)
{
    conf_hosts h = {0};
    char err[CONF_ERR_LEN];
    if (conf_hostlist_expand(list, &h, err, sizeof err) != 0) {
        snprintf(buf, len, "ERROR: %s", err);
        cr_expect_eq(h.n, 0, "a refusal leaves the output alone");
        return buf;
    }
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < h.n && used < len; i++) {
        int n = snprintf(buf + used, len - used, "%s%s", i ? " " : "", h.names[i]);
        used += n > 0 ? (size_t)n : 0;
    }
    conf_hosts_fini(&h);
    return buf;
}

static void slurp(int fd, char *buf, size_t len)
{
    size_t used = 0;
    ssize_t n;
    while (used + 1 < len && (n = read(fd, buf + used, len - 1 - used)) > 0)
        used += (size_t)n;
    buf[used] = '\0';
}

int t_run(char *const argv[], char *const envp[], char *out, size_t outlen, char *err,
          size_t errlen)
{
    const char *bin = getenv("FERRY_TEST_BIN");
    cr_assert(bin, "FERRY_TEST_BIN is not set (run through meson test)");
    return t_run_program(bin, argv, envp, out, outlen, err, errlen);
}

int t_run_program(const char *prog, char *const argv[], char *const envp[], char *out,
                  size_t outlen, char *err, size_t errlen)
{
    char outp[300], errp[300];
    snprintf(outp, sizeof outp, "%s/stdout", T_DIR);
    snprintf(errp, sizeof errp, "%s/stderr", T_DIR);
    pid_t pid = tcom_fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || o < 0 || e < 0 || dup2(in, 0) < 0 || dup2(o, 1) < 0 ||
            dup2(e, 2) < 0)
            _exit(126);
        execvpe(prog, argv, envp);
        _exit(127);
    }
    pthread_t killer;
    tcom_kill_after(pid, 30000, &killer);
    int status;
    cr_assert(waitpid(pid, &status, 0) == pid);
    pthread_cancel(killer);
    pthread_join(killer, NULL);
    int fd = open(outp, O_RDONLY);
    cr_assert(fd >= 0);
    slurp(fd, out, outlen);
    close(fd);
    fd = open(errp, O_RDONLY);
    cr_assert(fd >= 0);
    slurp(fd, err, errlen);
    close(fd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
