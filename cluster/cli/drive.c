/* A module's driver, run by `ferry submit` in a child process.
 *
 * The driver is plugin code on the master: a crash in it, or an exit(0)
 * from it, used to be submit's own end, silent or reported as success. In a
 * child it is reported the way a worker's death is: the module, the signal
 * or exit status, and the last lines it printed. The child connects to the
 * cluster itself (gRPC is never initialised before the fork), ships the
 * module, runs the driver and, once the driver has returned, writes its exit
 * status on a pipe of its own: an exit with no status written is an exit()
 * the driver made. Its output passes through this process, which keeps the
 * tail. It shares submit's process group, so Ctrl-C reaches both, and dies
 * with submit (PR_SET_PDEATHSIG). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ferry/ferry.h>

#include "cli_plugin.h"
#include "runtime/runtime.h"

#define TAIL_BYTES 4096
#define TAIL_LINES 5
#define DRAIN_MS   200

/* ---- the child ------------------------------------------------------------ */

static int drive_here(const cli_drive_opts *o)
{
    int status = CLI_FAIL;
    cli_running r = {0};
    cluster_module m = {0};
    rt_module mod = {0};
    char err[512] = "";
    if (cli_running_ship(&r, o->home, "submit", o->shown, o->bytes, o->len, &m))
        goto out;
    /* What the driver's calls log on the workers goes where its own
     * errors go: this process's stderr, relayed to the user's. */
    cluster_show_task_logs(r.cl, o->quiet ? NULL : stderr);
    int rc = rt_module_open(&mod, o->path, o->shown, err, sizeof err);
    if (rc) {
        cli_err("submit", "%s", err[0] ? err : ferry_strerror(rc));
        goto out;
    }
    rc = cluster_run_driver(r.cl, &m, mod.task, o->argc, o->argv, o->json);
    fflush(stdout);
    if (rc) {
        /* The cluster's text names the failed call, or says what the
         * driver returned: a code's generic words ("no such file or
         * directory" for a worker's NOT_FOUND) would only mislead. */
        const char *why = cluster_error(r.cl);
        cli_err("submit", "%s: %s", o->shown, why[0] ? why : ferry_strerror(rc));
        goto out;
    }
    status = CLI_OK;
out:
    cluster_module_fini(&m);
    if (r.cl)
        cli_running_close(&r);
    if (mod.handle)
        rt_module_close(&mod);
    return status;
}

static void child(const cli_drive_opts *o, pid_t parent, int out, int err, int result)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(CLI_FAIL);
    if (dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
        _exit(CLI_FAIL);
    close(out);
    close(err);
    int status = drive_here(o);
    fflush(NULL);
    unsigned char b = (unsigned char)status;
    ssize_t n;
    while ((n = write(result, &b, 1)) < 0 && errno == EINTR)
        ;
    exit(status); /* atexit handlers: what this process set up, it tidies */
}

/* ---- the parent ----------------------------------------------------------- */

typedef struct tail {
    char buf[TAIL_BYTES];
    size_t len;
} tail;

static void tail_add(tail *t, const char *p, size_t n)
{
    if (n >= sizeof t->buf) {
        memcpy(t->buf, p + n - sizeof t->buf, sizeof t->buf);
        t->len = sizeof t->buf;
        return;
    }
    if (t->len + n > sizeof t->buf) {
        size_t drop = t->len + n - sizeof t->buf;
        memmove(t->buf, t->buf + drop, t->len - drop);
        t->len -= drop;
    }
    memcpy(t->buf + t->len, p, n);
    t->len += n;
}

/* The last TAIL_LINES lines, each indented, into out. */
static void tail_lines(const tail *t, char *out, size_t len)
{
    size_t end = t->len;
    while (end && (t->buf[end - 1] == '\n' || t->buf[end - 1] == '\r'))
        end--;
    size_t start = end;
    for (int lines = 0; start > 0; start--)
        if (t->buf[start - 1] == '\n' && ++lines == TAIL_LINES)
            break;
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = start; i < end && used + 8 < len;) {
        size_t nl = i;
        while (nl < end && t->buf[nl] != '\n')
            nl++;
        int n = snprintf(out + used, len - used, "\n  | %.*s", (int)(nl - i), t->buf + i);
        if (n < 0)
            break;
        used += (size_t)n < len - used ? (size_t)n : len - used - 1;
        i = nl + 1;
    }
}

static void relay_to(int to, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(to, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* our reader went away: keep the tail, drop the rest */
        p += w;
        n -= (size_t)w;
    }
}

/* Reads what is there on fd; false at its end. */
static bool relay(int fd, int to, tail *t)
{
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0)
        return false;
    relay_to(to, buf, (size_t)n);
    tail_add(t, buf, (size_t)n);
    return true;
}

int cli_drive(const cli_drive_opts *o)
{
    int out[2] = {-1, -1}, err[2] = {-1, -1}, res[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || pipe2(res, O_CLOEXEC)) {
        cli_err("submit", "%s: cannot run the driver: pipe: %s", o->shown, strerror(errno));
        for (int i = 0; i < 2; i++) {
            if (out[i] >= 0)
                close(out[i]);
            if (err[i] >= 0)
                close(err[i]);
            if (res[i] >= 0)
                close(res[i]);
        }
        return CLI_FAIL;
    }
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        close(out[0]);
        close(err[0]);
        close(res[0]);
        child(o, parent, out[1], err[1], res[1]);
    }
    close(out[1]);
    close(err[1]);
    close(res[1]);
    if (pid < 0) {
        cli_err("submit", "%s: cannot run the driver: fork: %s", o->shown, strerror(errno));
        close(out[0]);
        close(err[0]);
        close(res[0]);
        return CLI_FAIL;
    }

    /* Until the child has exited and its pipes are drained; a grandchild
     * the driver left behind may hold them open, and write, for ever, so the
     * end of the child, not of its pipes, ends the relay: what is there then
     * is relayed, for DRAIN_MS at most. */
    tail t = {.len = 0};
    int reported = -1, status = 0;
    bool exited = false;
    double drain_until = 0;
    struct pollfd pf[3] = {{.fd = out[0], .events = POLLIN},
                           {.fd = err[0], .events = POLLIN},
                           {.fd = res[0], .events = POLLIN}};
    int to[2] = {STDOUT_FILENO, STDERR_FILENO};
    int64_t began = base_wall_ms();
    for (;;) {
        int n = poll(pf, 3, exited ? 0 : 100);
        if (n < 0 && errno != EINTR)
            break;
        bool any = false;
        for (int i = 0; i < 2 && n > 0; i++) {
            if (pf[i].fd >= 0 && pf[i].revents) {
                any = true;
                /* The driver's errors are what a shutdown under it looked
                 * like: the shutdown is said before them. */
                if (i == 1)
                    cli_shutdown_explain_before(o->home, "submit", began);
                if (!relay(pf[i].fd, to[i], &t))
                    pf[i].fd = -1;
            }
        }
        if (n > 0 && pf[2].fd >= 0 && pf[2].revents) {
            unsigned char b;
            ssize_t r = read(pf[2].fd, &b, 1);
            if (r == 1)
                reported = b;
            else if (r == 0)
                pf[2].fd = -1;
            any = true;
        }
        if (exited && (!any || base_mono_ms() > drain_until))
            break;
        if (!exited) {
            pid_t w = waitpid(pid, &status, WNOHANG);
            exited = w == pid || (w < 0 && errno != EINTR);
            drain_until = base_mono_ms() + DRAIN_MS;
        }
        if (pf[0].fd < 0 && pf[1].fd < 0 && pf[2].fd < 0 && exited)
            break;
    }
    if (!exited)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    close(out[0]);
    close(err[0]);
    close(res[0]);

    char lines[TAIL_BYTES + 256];
    tail_lines(&t, lines, sizeof lines);
    const char *intro = t.len ? "; its last lines:" : "; it printed nothing";
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        cli_err("submit", "%s: the driver's process died: signal %d (%s)%s%s", o->shown,
                sig, cli_signal_name(sig), intro, lines);
        return CLI_FAIL;
    }
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : CLI_FAIL;
    if (reported < 0) {
        cli_err("submit", "%s: the driver called exit(%d) instead of returning%s%s",
                o->shown, code, intro, lines);
        return CLI_FAIL;
    }
    /* The driver returned; a destructor's exit() afterwards may still say
     * otherwise, and a failure wins. */
    return reported != CLI_OK ? reported : code != 0 ? CLI_FAIL : CLI_OK;
}
