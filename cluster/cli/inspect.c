/* Inspecting a module for `ferry submit`: dlopen, the descriptor's ABI
 * check and its bounds, in a child process with a time limit.
 *
 * Loading a module runs its constructors: plugin code. In `submit`'s own
 * process an abort() there would kill it without a word, an exit(0) would
 * make it report success, a loop would hang it. In a child, each of these
 * becomes a sentence naming the module. The child is its own process group
 * (so that what a constructor forks dies with it on the time limit) and dies
 * with submit (PR_SET_PDEATHSIG), and hands back what submit needs to know
 * about the module as one fixed-size record over a pipe. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_plugin.h"
#include "runtime/runtime.h"
#include "runtime/train/train.h"

typedef struct record {
    int rc;
    cli_module_info info;
    char err[512];
} record;

static void child(const char *path, const char *shown, int fd)
{
    record rec = {0};
    rt_module m;
    rec.rc = rt_module_open(&m, path, shown, rec.err, sizeof rec.err);
    if (!rec.rc) {
        const ferry_task_t *t = m.task;
        snprintf(rec.info.task, sizeof rec.info.task, "%s", t->name);
        rec.info.driver = t->driver != NULL;
        rec.info.model = t->model != NULL;
        rec.info.classifier = t->model && t->model->kind == FERRY_MODEL_CLASSIFIER;
        if (t->model && !rt_model_from_data(t->model))
            rec.info.params = rt_model_param_count(t->model);
        rt_module_list(&m, rec.info.functions, sizeof rec.info.functions);
    }
    /* No dlclose, no exit(): destructors are plugin code too, and this
     * process has nothing else to tidy. */
    _exit(base_write_all(fd, &rec, sizeof rec) == 0 ? 0 : 1);
}

void cli_describe_limit(char *buf, size_t len, int ms)
{
    if (ms % 1000 == 0)
        snprintf(buf, len, "%d s", ms / 1000);
    else
        snprintf(buf, len, "%.1f s", ms / 1000.0);
}

int cli_inspect(const char *path, const char *shown, int timeout_ms, cli_module_info *info,
                char *err, size_t errlen)
{
    memset(info, 0, sizeof *info);
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "%s: cannot inspect: pipe: %s", shown, strerror(errno));
        return FERRY_EIO;
    }
    fflush(NULL); /* the child must not write our buffers again */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "%s: cannot inspect: fork: %s", shown, strerror(errno));
        close(p[0]);
        close(p[1]);
        return FERRY_EIO;
    }
    if (pid == 0) {
        close(p[0]);
        setpgid(0, 0);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(1);
        child(path, shown, p[1]);
    }
    setpgid(pid, pid); /* either side may win the race; both ask the same */
    close(p[1]);

    record rec;
    size_t got = 0;
    bool timed_out = false;
    double deadline = base_mono_ms() + timeout_ms;
    for (;;) {
        double left = deadline - base_mono_ms();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        int n = poll(&pf, 1, (int)left + 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue; /* the deadline is checked above */
        ssize_t r = got < sizeof rec ? read(p[0], (char *)&rec + got, sizeof rec - got)
                                     : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(p[0]);
    if (timed_out)
        kill(-pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!timed_out)
        kill(-pid, SIGKILL); /* whatever a constructor forked */

    if (timed_out) {
        char limit[32];
        cli_describe_limit(limit, sizeof limit, timeout_ms);
        snprintf(err, errlen, "%s: loading did not finish within %s", shown, limit);
        return FERRY_ETIMEDOUT;
    }
    if (got == sizeof rec && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        if (rec.rc) {
            rec.err[sizeof rec.err - 1] = '\0';
            snprintf(err, errlen, "%s", rec.err);
            return rec.rc < 0 ? rec.rc : FERRY_EINVAL;
        }
        *info = rec.info;
        info->task[sizeof info->task - 1] = '\0';
        info->functions[sizeof info->functions - 1] = '\0';
        return 0;
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        snprintf(err, errlen, "%s: constructor %s (%s) while loading", shown,
                 sig == SIGABRT ? "aborted" : sig == SIGKILL ? "was killed" : "crashed",
                 cli_signal_name(sig));
    } else if (WIFEXITED(status)) {
        snprintf(err, errlen, "%s: constructor called exit(%d)", shown,
                 WEXITSTATUS(status));
    } else {
        snprintf(err, errlen, "%s: loading ended without an answer", shown);
    }
    return FERRY_EINVAL;
}

const char *cli_signal_name(int sig)
{
    static char buf[32];
    const char *abbrev = sigabbrev_np(sig);
    if (!abbrev)
        snprintf(buf, sizeof buf, "signal %d", sig);
    else
        snprintf(buf, sizeof buf, "SIG%s", abbrev);
    return buf;
}
