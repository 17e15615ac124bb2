/* The fault tests' runs of `ferry submit` in the background. */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../e2e/e2e.h"
#include "faults.h"
#include "runtime/train/ckpt_file.h"

static void output_path(const char *tag, const char *which, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s.%s", e2e_home, tag, which);
}

pid_t faults_submit(const char *tag, const char *dir, const char *epochs, ...)
{
    const char *bin = getenv("FERRY_TEST_BIN");
    cr_assert(bin);
    const char *argv[24] = {bin,
                            "submit",
                            e2e_task("linreg"),
                            "--json",
                            "--epochs",
                            epochs,
                            "--checkpoint-dir",
                            dir,
                            "--checkpoint-every",
                            "20"};
    int n = 10;
    va_list ap;
    va_start(ap, epochs);
    for (const char *a; n < 22 && (a = va_arg(ap, const char *));)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char out[700], err[700];
    output_path(tag, "out", out, sizeof out);
    output_path(tag, "err", err, sizeof err);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (o < 0 || e < 0)
            _exit(127);
        dup2(o, 1);
        dup2(e, 2);
        signal(SIGINT, SIG_DFL);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

int faults_wait(pid_t pid, int ms)
{
    int status = 0;
    for (int i = 0; i < ms / 10; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return status;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

bool faults_wait_checkpoint(const char *dir, int ms)
{
    for (int i = 0; i < ms / 10; i++) {
        char **names;
        int n = rt_ckpt_list(dir, &names);
        rt_ckpt_names_free(names, n > 0 ? n : 0);
        if (n > 0)
            return true;
        usleep(10000);
    }
    return false;
}

char *faults_output(const char *tag, const char *which)
{
    char path[700];
    output_path(tag, which, path, sizeof path);
    return e2e_slurp(path);
}

bool faults_sha(const char *json, char *buf, size_t len)
{
    const char *p = json ? strstr(json, "\"params_sha256\":\"") : NULL;
    if (!p)
        return false;
    p += strlen("\"params_sha256\":\"");
    size_t n = strcspn(p, "\"");
    if (n == 0 || n >= len)
        return false;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return true;
}
