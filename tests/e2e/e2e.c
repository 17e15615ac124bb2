/* tests/e2e — the fixture: a private FERRY_HOME, running `ferry`, and
 * cleaning up every process a test started. */
#include "e2e.h"
#include "tcommon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"

char e2e_home[512];
static char root[256];
static int n_runs;
static cluster *opened;
static char *paths[64];
static size_t n_paths;
static pid_t spawned[8];
static size_t n_spawned;
static bool home_used[2];

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void e2e_setup(void)
{
    snprintf(root, sizeof root, "/tmp/ferry-e2e-XXXXXX");
    cr_assert(mkdtemp(root), "mkdtemp: %s", strerror(errno));
    home_used[1] = false;
    e2e_use_home(0);
    /* Orphans (the supervisor, once `ferry start` exits) come to us, so we
     * can reap them and be sure they are gone. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    n_runs = 0;
}

void e2e_use_home(int which)
{
    snprintf(e2e_home, sizeof e2e_home, "%s/home%s", root, which ? "-2" : "");
    cr_assert(setenv("FERRY_HOME", e2e_home, 1) == 0);
    home_used[which] = true;
}

void e2e_teardown(void)
{
    cluster_destroy(opened);
    opened = NULL;
    if (!root[0])
        return;
    for (int i = 0; i < 2; i++) {
        if (!home_used[i])
            continue;
        e2e_use_home(i);
        pid_t sup = e2e_supervisor_pid();
        e2e_run r;
        e2e_ferry(&r, E2E_CMD_MS, "shutdown", "--grace-ms", "500", NULL);
        e2e_run_fini(&r);
        /* The supervisor leads its own session and process group, which its
         * workers share: whatever of it survived goes now, even workers
         * whose supervisor died before them. Only while some process still
         * holds that session: once none does, the kernel may give its
         * number to another test's new supervisor (pid_max is 32768 here). */
        pid_t left;
        if (sup > 0 && e2e_session_procs(sup, &left, 1) > 0)
            kill(-sup, SIGKILL);
    }
    /* A child this test reaped already may have lent its pid to a process
     * or thread of another test running beside it: only ours are killed. */
    for (size_t i = 0; i < n_spawned; i++)
        if (waitpid(spawned[i], NULL, WNOHANG) == 0)
            kill(spawned[i], SIGKILL);
    n_spawned = 0;
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
    tcom_rm_tree(root);
    root[0] = '\0';
    for (size_t i = 0; i < n_paths; i++)
        free(paths[i]);
    n_paths = 0;
}

char *e2e_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            char *grown = realloc(buf, cap *= 2);
            if (!grown) {
                free(buf);
                buf = NULL;
            }
            buf = grown;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

#define LOG_TAIL 4096

char *e2e_slurp_log(const char *name)
{
    char path[900];
    snprintf(path, sizeof path, "%s/logs/%s", e2e_home, name);
    return e2e_slurp(path);
}

const char *e2e_logs(void)
{
    static char text[64 * 1024];
    size_t len = 0;
    text[0] = '\0';
    char dir[600];
    snprintf(dir, sizeof dir, "%s/logs", e2e_home);
    DIR *d = opendir(dir);
    if (!d)
        return "(no logs)";
    struct dirent *e;
    while ((e = readdir(d)) && len + LOG_TAIL + 600 < sizeof text) {
        if (e->d_name[0] == '.')
            continue;
        char path[900];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        char *all = e2e_slurp(path);
        if (!all)
            continue;
        size_t n = strlen(all);
        const char *tail = n > LOG_TAIL ? all + n - LOG_TAIL : all;
        len += (size_t)snprintf(text + len, sizeof text - len, "== %s%s:\n%s\n", e->d_name,
                                n > LOG_TAIL ? " (its end)" : "", tail);
        free(all);
    }
    closedir(d);
    return text;
}

/* Forks `ferry args...` with stdout and stderr to two new files under the
 * test's directory, whose names it writes into out and err. */
static pid_t spawn_ferry(const char *const *args, char out[300], char err[300])
{
    n_runs++;
    snprintf(out, 300, "%s/out-%d", root, n_runs);
    snprintf(err, 300, "%s/err-%d", root, n_runs);
    const char *bin = getenv("FERRY_TEST_BIN");
    cr_assert(bin, "FERRY_TEST_BIN is not set");
    const char *argv[32] = {bin};
    int argc = 1;
    for (; args[argc - 1] && argc < 31; argc++)
        argv[argc] = args[argc - 1];
    argv[argc] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int in = open("/dev/null", O_RDONLY);
        if (o < 0 || e < 0 || in < 0)
            _exit(127);
        dup2(in, 0);
        dup2(o, 1);
        dup2(e, 2);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static void collect_args(const char **args, size_t max, const char *first, va_list ap)
{
    size_t n = 0;
    for (const char *a = first; a && n < max - 1; a = va_arg(ap, const char *))
        args[n++] = a;
    args[n] = NULL;
}

pid_t e2e_spawn(const char *arg, ...)
{
    const char *args[30];
    va_list ap;
    va_start(ap, arg);
    collect_args(args, 30, arg, ap);
    va_end(ap);
    char out[300], err[300];
    cr_assert(n_spawned < sizeof spawned / sizeof spawned[0]);
    pid_t pid = spawn_ferry(args, out, err);
    spawned[n_spawned++] = pid;
    return pid;
}

void e2e_ferry(e2e_run *r, int timeout_ms, const char *arg, ...)
{
    const char *args[30];
    va_list ap;
    va_start(ap, arg);
    collect_args(args, 30, arg, ap);
    va_end(ap);
    char out[300], err[300];
    double t0 = now_ms();
    pid_t pid = spawn_ferry(args, out, err);
    int status = 0;
    r->status = -1;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            break;
        }
        if (now_ms() - t0 > timeout_ms) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        usleep(2000);
    }
    r->ms = now_ms() - t0;
    r->out = e2e_slurp(out);
    r->err = e2e_slurp(err);
    if (!r->out)
        r->out = strdup("");
    if (!r->err)
        r->err = strdup("");
}

void e2e_run_fini(e2e_run *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

void e2e_start(int n)
{
    char ns[16];
    snprintf(ns, sizeof ns, "%d", n);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", ns, "--base-port", "0", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}

static const char *keep(char *p)
{
    cr_assert(p && n_paths < sizeof paths / sizeof paths[0]);
    paths[n_paths++] = p;
    return p;
}

static const char *path_in(const char *env, const char *name, const char *suffix)
{
    const char *dir = getenv(env);
    cr_assert(dir, "%s is not set", env);
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s%s", dir, name, suffix) > 0);
    return keep(p);
}

const char *e2e_task(const char *name)
{
    return path_in("FERRY_TEST_TASKS", name, ".so");
}

const char *e2e_module(const char *name)
{
    return path_in("FERRY_TEST_MODULES", name, "");
}

const char *e2e_local_module(const char *name)
{
    return path_in("FERRY_TEST_E2E", name, "");
}

static void load_state(conf_cluster *c)
{
    char state[600], err[CONF_ERR_LEN] = "";
    snprintf(state, sizeof state, "%s/cluster.ini", e2e_home);
    conf_defaults(c);
    int rc = conf_load(c, state, err, sizeof err);
    cr_assert(rc == 0, "cannot read %s: %s", state, err);
}

static cluster *make_cluster(const char *token, int64_t call_timeout_ms)
{
    conf_cluster c;
    load_state(&c);
    char own[CONF_TOKEN_LEN + 1], err[CONF_ERR_LEN] = "";
    if (!token) {
        int rc = conf_token_read(c.token_file, own, sizeof own, err, sizeof err);
        cr_assert(rc == 0, "token: %s", err);
        token = own;
    }
    const char *targets[16];
    cr_assert(c.n_workers <= 16);
    for (size_t i = 0; i < c.n_workers; i++)
        targets[i] = c.workers[i].address;
    cluster_opts o = {.token = token,
                      .call_timeout_ms = call_timeout_ms,
                      .ping_timeout_ms = 1000,
                      .heartbeat_ms = 200};
    cluster *cl = NULL;
    int rc = cluster_create(targets, c.n_workers, &o, &cl);
    conf_fini(&c);
    cr_assert(rc == 0, "cluster_create: %s", ferry_strerror(rc));
    return cl;
}

cluster *e2e_cluster(const char *token, int64_t call_timeout_ms)
{
    cr_assert(opened == NULL, "one library cluster per test");
    opened = make_cluster(token, call_timeout_ms);
    return opened;
}

cluster *e2e_cluster_another(int64_t call_timeout_ms)
{
    return make_cluster(NULL, call_timeout_ms);
}

pid_t e2e_worker_pid(cluster *cl, int rank)
{
    const cluster_worker *w;
    cluster_survey(cl, false, &w);
    cr_assert(w[rank].ping, "worker %d does not answer: %s", rank, cluster_error(cl));
    return w[rank].ping->pid;
}

pid_t e2e_supervisor_pid(void)
{
    /* Written by the supervisor itself, before any cluster state. */
    char path[600];
    snprintf(path, sizeof path, "%s/supervisor.pid", e2e_home);
    char *text = e2e_slurp(path);
    pid_t pid = text ? (pid_t)atoi(text) : 0;
    free(text);
    return pid;
}

pid_t e2e_worker_pid_file(int rank)
{
    char path[600];
    snprintf(path, sizeof path, "%s/workers/%d/pid", e2e_home, rank);
    char *text = e2e_slurp(path);
    pid_t pid = text ? (pid_t)atoi(text) : 0;
    free(text);
    return pid;
}

bool e2e_alive(pid_t pid)
{
    if (pid <= 0)
        return false;
    waitpid(pid, NULL, WNOHANG);
    if (kill(pid, 0) != 0)
        return false;
    char path[64], buf[512] = "";
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return !(p && p[1] == ' ' && p[2] == 'Z');
}

bool e2e_wait_gone(pid_t pid, int ms)
{
    double end = now_ms() + ms;
    while (e2e_alive(pid)) {
        if (now_ms() > end)
            return false;
        usleep(5000);
    }
    return true;
}

bool e2e_has(const char *haystack, const char *needle)
{
    return haystack && strstr(haystack, needle) != NULL;
}

bool e2e_no_gpu(const char *err)
{
    /* runtime/device's words: cudaGetDeviceCount failed or found none; or
     * the backend was never built. Only a worker that exited with status 1
     * said them: one killed by a signal crashed. */
    return e2e_has(err, "exited with status 1: ") &&
           (e2e_has(err, "no GPU visible: cudaGetDeviceCount") ||
            e2e_has(err, "this ferry was built without cuda support"));
}

const char *e2e_write_file(const char *name, const char *text)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", root, name) > 0);
    keep(p);
    FILE *f = fopen(p, "w");
    cr_assert(f, "cannot write %s", p);
    fputs(text, f);
    fclose(f);
    return p;
}

/* Field 6 of /proc/PID/stat, after the command in parentheses. */
static pid_t session_of(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    char state;
    int ppid, pgrp, sid;
    if (!p || sscanf(p + 1, " %c %d %d %d", &state, &ppid, &pgrp, &sid) != 4 ||
        state == 'Z')
        return -1;
    return (pid_t)sid;
}

size_t e2e_session_procs(pid_t sid, pid_t *pids, size_t max)
{
    DIR *d = opendir("/proc");
    cr_assert(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid > 0 && session_of(pid) == sid && n < max)
            pids[n++] = pid;
    }
    closedir(d);
    return n;
}

void e2e_expect_nothing_left(pid_t sup, const pid_t *also, size_t n_also, int ms)
{
    double end = now_ms() + ms;
    pid_t left[16];
    size_t n;
    for (;;) {
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        n = sup > 0 ? e2e_session_procs(sup, left, 16) : 0;
        for (size_t i = 0; i < n_also && n < 16; i++)
            if (e2e_alive(also[i]))
                left[n++] = also[i];
        if (n == 0 || now_ms() > end)
            break;
        usleep(20000);
    }
    cr_assert(n == 0, "%zu process(es) of the cluster still run, the first pid %d", n,
              n ? (int)left[0] : 0);
}

pid_t e2e_wait_new_worker(int rank, pid_t old, int ms)
{
    double end = now_ms() + ms;
    while (now_ms() < end) {
        pid_t pid = e2e_worker_pid_file(rank);
        if (pid > 0 && pid != old && e2e_alive(pid))
            return pid;
        usleep(10000);
    }
    return 0;
}
