/* tests/multihost — the cluster across the hosts: its files, its workers
 * and the commands run on the submitter's host. */
#include "mhcluster.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tcommon.h"

/* Workers listening on their hosts' addresses in plain text, as meant: a
 * worker warns about that without the flag that says so. */
const mhc_flags mhc_plain = {{"--insecure", NULL}, {NULL}};

mh_net mhc_net;

static char dir[256];
static pid_t workers[MHC_WORKERS];
static bool started; /* `ferry start` ran: shut the cluster down */
static int n_runs;

const char *mhc_dir(void)
{
    return dir;
}

void mhc_skip_unless_able(void)
{
    char why[256];
    switch (mh_unavailable(why, sizeof why)) {
    case MH_CAN_RUN:
        return;
    case MH_NO_IP:
        tcom_skip_missing("iproute2", "ip (ip netns, tc netem)");
    case MH_NO_NSENTER:
        tcom_skip_missing("util-linux", "nsenter");
    case MH_NOT_ROOT:
        break;
    }
    fprintf(stderr, "skipped: %s\n", why);
    cr_skip_test("%s", why);
}

void mhc_setup(void)
{
    mhc_skip_unless_able();
    snprintf(dir, sizeof dir, "/tmp/ferry-multihost-XXXXXX");
    cr_assert(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    memset(workers, 0, sizeof workers);
    started = false;
    n_runs = 0;
    char err[1024];
    int rc = mh_net_up(&mhc_net, MHC_WORKERS + 1, err, sizeof err);
    if (rc == -EPERM) {
        fprintf(stderr, "skipped: no namespaces here even for root: %s\n", err);
        cr_skip_test("no namespaces here even for root: %s", err);
    }
    cr_assert(rc == 0, "the hosts' namespaces: %s", err);
}

void mhc_teardown(void)
{
    if (!dir[0])
        return;
    if (started) {
        mhc_run r;
        mhc_ferry(&r, 30000, "shutdown", NULL);
        mhc_run_fini(&r);
    }
    /* Whatever still runs on the hosts dies with their namespaces. */
    mh_net_down(&mhc_net);
    for (int i = 0; i < MHC_WORKERS; i++)
        if (workers[i] > 0)
            waitpid(workers[i], NULL, 0);
    tcom_rm_tree(dir);
    dir[0] = '\0';
}

static const char *need_env(const char *name)
{
    const char *v = getenv(name);
    cr_assert(v && *v, "%s is not set", name);
    return v;
}

const char *mhc_task(const char *name)
{
    static char path[8][512];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, sizeof path[0], "%s/%s.so", need_env("FERRY_TEST_TASKS"), name);
    return p;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s: %s", path, strerror(errno));
    fputs(text, f);
    cr_assert(fclose(f) == 0 && chmod(path, mode) == 0, "%s: %s", path, strerror(errno));
}

/* Host `host`'s FERRY_HOME: DIR/h<host>. */
static void home_of(int host, char *out, size_t len)
{
    snprintf(out, len, "%s/h%d", dir, host);
}

static void run_args(mhc_run *r, int timeout_ms, const char *const *args);

static void start_worker(int rank, const mhc_flags *flags)
{
    char home[300], state[320], listen[64], token[300], out[320], err[320], henv[320];
    home_of(rank, home, sizeof home);
    cr_assert(mkdir(home, 0700) == 0, "%s: %s", home, strerror(errno));
    snprintf(state, sizeof state, "%s/state", home);
    snprintf(listen, sizeof listen, "%s:%d", mhc_net.addr[rank], MHC_PORT);
    snprintf(token, sizeof token, "%s/token", dir);
    snprintf(out, sizeof out, "%s/out", home);
    snprintf(err, sizeof err, "%s/err", home);
    snprintf(henv, sizeof henv, "FERRY_HOME=%s", home);
    const char *cmd[32] = {need_env("FERRY_TEST_BIN"),
                           "worker",
                           "--listen",
                           listen,
                           "--token-file",
                           token,
                           "--state-dir",
                           state};
    size_t n = 8;
    for (size_t i = 0; flags->worker[i] && n < 31; i++)
        cmd[n++] = flags->worker[i];
    cmd[n] = NULL;
    /* One BLAS thread a worker: three workers share two cores. */
    const char *env[] = {henv, "OPENBLAS_NUM_THREADS=1", NULL};
    workers[rank] = mh_spawn(&mhc_net, rank, cmd, env, out, err);
    cr_assert(workers[rank] > 0, "cannot start worker %d: %s", rank,
              strerror(-workers[rank]));
}

void mhc_start(const mhc_flags *flags)
{
    char token[300], ini[300], text[2048];
    /* A token as `ferry start` makes one: 32 random bytes, in hex. */
    unsigned char raw[32];
    FILE *u = fopen("/dev/urandom", "r");
    cr_assert(u && fread(raw, 1, sizeof raw, u) == sizeof raw);
    fclose(u);
    char hex[65];
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    snprintf(token, sizeof token, "%s/token", dir);
    write_file(token, hex, 0600);
    for (int r = 0; r < MHC_WORKERS; r++)
        start_worker(r, flags);

    /* Timeouts for two loaded cores: three workers and a netem link. */
    size_t n = (size_t)snprintf(text, sizeof text,
                                "[cluster]\n"
                                "token_file = %s\n"
                                "start_timeout_ms = 60000\n"
                                "call_timeout_ms = 120000\n"
                                "\n[workers]\n",
                                token);
    for (int r = 0; r < MHC_WORKERS; r++)
        n += (size_t)snprintf(text + n, sizeof text - n, "worker = %s:%d\n",
                              mhc_net.addr[r], MHC_PORT);
    snprintf(ini, sizeof ini, "%s/cluster.ini", dir);
    write_file(ini, text, 0644);

    const char *args[16] = {"start", "--config", ini};
    size_t a = 3;
    for (size_t i = 0; flags->start[i] && a < 15; i++)
        args[a++] = flags->start[i];
    args[a] = NULL;
    started = true;
    mhc_run r;
    run_args(&r, 90000, args);
    MHC_EXPECT(&r, 0);
    cr_assert(mhc_has(r.out, "3 worker(s) ready"), "%s", r.out);
    mhc_run_fini(&r);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return strdup("");
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    for (size_t got; s && (got = fread(s + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (cap - n < 2) {
            char *t = realloc(s, cap *= 2);
            if (!t)
                break;
            s = t;
        }
    }
    fclose(f);
    if (s)
        s[n] = '\0';
    return s ? s : strdup("");
}

/* `ferry args...` on the submitter's host, under its FERRY_HOME. */
static void run_args(mhc_run *r, int timeout_ms, const char *const *args)
{
    const char *cmd[32] = {need_env("FERRY_TEST_BIN")};
    size_t n = 1;
    for (; args[n - 1] && n < 31; n++)
        cmd[n] = args[n - 1];
    cmd[n] = NULL;
    char home[300], henv[320], out[320], err[320];
    home_of(MHC_SUBMITTER, home, sizeof home);
    mkdir(home, 0700);
    snprintf(henv, sizeof henv, "FERRY_HOME=%s", home);
    n_runs++;
    snprintf(out, sizeof out, "%s/out-%d", dir, n_runs);
    snprintf(err, sizeof err, "%s/err-%d", dir, n_runs);
    const char *env[] = {henv, NULL};
    pid_t pid = mh_spawn(&mhc_net, MHC_SUBMITTER, cmd, env, out, err);
    cr_assert(pid > 0, "cannot run ferry %s: %s", args[0], strerror(-pid));
    r->status = mh_wait(pid, timeout_ms);
    r->out = slurp(out);
    r->err = slurp(err);
}

void mhc_ferry(mhc_run *r, int timeout_ms, const char *arg, ...)
{
    const char *args[31];
    size_t n = 0;
    va_list ap;
    va_start(ap, arg);
    for (const char *a = arg; a && n < 30; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    run_args(r, timeout_ms, args);
}

void mhc_run_fini(mhc_run *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

const char *mhc_logs(void)
{
    static char text[16384];
    size_t len = 0;
    text[0] = '\0';
    for (int h = 0; h <= MHC_WORKERS; h++) {
        char path[320];
        if (h < MHC_WORKERS)
            snprintf(path, sizeof path, "%s/h%d/err", dir, h);
        else
            snprintf(path, sizeof path, "%s/h%d/logs/supervisor.log", dir, h);
        char *all = slurp(path);
        size_t n = strlen(all);
        const char *tail = n > 3000 ? all + n - 3000 : all;
        if (len < sizeof text)
            len += (size_t)snprintf(text + len, sizeof text - len, "== %s:\n%s\n", path,
                                    tail);
        free(all);
    }
    return text;
}

int mhc_worker_exit(int rank, int ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int status;
        pid_t w = waitpid(workers[rank], &status, WNOHANG);
        if (w == workers[rank]) {
            workers[rank] = 0;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
            return -1;
        usleep(10000);
    }
}

double mhc_json_number(const char *json, const char *key)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    return p ? strtod(p + strlen(pat), NULL) : NAN;
}

bool mhc_has(const char *text, const char *needle)
{
    return text && strstr(text, needle) != NULL;
}

void mhc_expect_shutdown(void)
{
    mhc_run r;
    mhc_ferry(&r, 60000, "shutdown", NULL);
    MHC_EXPECT(&r, 0);
    cr_assert(mhc_has(r.out, "3 worker(s) stopped"), "%s", r.out);
    mhc_run_fini(&r);
    /* Each worker, asked over the network, stops the ordinary way. */
    for (int w = 0; w < MHC_WORKERS; w++)
        cr_assert_eq(mhc_worker_exit(w, 30000), 0, "worker %d:\n%s", w, mhc_logs());
}
