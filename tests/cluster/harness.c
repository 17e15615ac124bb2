/* tests/cluster — the shared fixture. */
#include "harness.h"
#include "tcommon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

tc T;

#define MAX_SILENT 4
static int silent_fd[MAX_SILENT];
static size_t n_silent;

double tc_now_ms(void)
{
    return (double)uv_hrtime() / 1e6;
}

void tc_setup(void)
{
    memset(&T, 0, sizeof T);
    snprintf(T.dir, sizeof T.dir, "/tmp/ferry-cluster-test-XXXXXX");
    cr_assert_not_null(mkdtemp(T.dir), "mkdtemp: %s", strerror(errno));
    n_silent = 0;
}

static void release_all(void)
{
    cluster_module_fini(&T.mod);
    cluster_destroy(T.cl);
    T.cl = NULL;
    for (size_t i = 0; i < TC_MAX; i++) {
        rt_worker_destroy(T.w[i], 0);
        T.w[i] = NULL;
        if (T.child[i] > 0) {
            kill(T.child[i], SIGKILL);
            waitpid(T.child[i], NULL, 0);
            T.child[i] = 0;
        }
    }
    for (size_t i = 0; i < n_silent; i++)
        close(silent_fd[i]);
    n_silent = 0;
    free(T.bytes);
    T.bytes = NULL;
    if (T.dir[0])
        tcom_rm_tree(T.dir);
    T.dir[0] = '\0';
    rpc_buf_trim();
}

void tc_teardown(void)
{
    if (!T.finished)
        release_all();
}

void tc_finish(void)
{
    release_all();
    T.finished = true;
    tcom_assert_no_leaks();
}

/* ---- workers -------------------------------------------------------------- */

static void slot_paths(size_t slot)
{
    char dir[sizeof T.dir];
    memcpy(dir, T.dir, sizeof dir);
    snprintf(T.state[slot], sizeof T.state[slot], "%s/worker%zu", dir, slot);
}

size_t tc_worker_at(size_t slot, int port, const char *token, uint32_t restarts)
{
    cr_assert(slot < TC_MAX);
    slot_paths(slot);
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    rt_worker_opts o = {.listen = listen,
                        .state_dir = T.state[slot],
                        .token = token,
                        .rank = (int)slot,
                        .restarts = restarts};
    int rc = rt_worker_create(&o, &T.w[slot]);
    cr_assert(rc == 0, "rt_worker_create(%s): %s", listen, ferry_strerror(rc));
    T.port[slot] = rt_worker_port(T.w[slot]);
    snprintf(T.target[slot], sizeof T.target[slot], "127.0.0.1:%d", T.port[slot]);
    if (slot >= T.n)
        T.n = slot + 1;
    return slot;
}

size_t tc_worker(const char *token)
{
    return tc_worker_at(T.n, 0, token, 0);
}

void tc_workers(size_t n)
{
    for (size_t i = 0; i < n; i++)
        tc_worker(TC_TOKEN);
}

size_t tc_child_worker(void)
{
    size_t slot = T.n;
    cr_assert(slot < TC_MAX);
    slot_paths(slot);
    int p[2];
    cr_assert(pipe(p) == 0);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* The child is a worker as `ferry worker` runs one; it never returns
         * into Criterion, and dies with the test. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(p[0]);
        char crash[400];
        snprintf(crash, sizeof crash, "%s/crash", T.state[slot]);
        mkdir(T.state[slot], 0700);
        rt_crash_install(crash);
        rt_worker_opts o = {.listen = "127.0.0.1:0",
                            .state_dir = T.state[slot],
                            .token = TC_TOKEN,
                            .rank = (int)slot};
        rt_worker *w = NULL;
        int rc = rt_worker_create(&o, &w);
        int port = rc ? -1 : rt_worker_port(w);
        if (write(p[1], &port, sizeof port) != sizeof port || rc)
            _exit(1);
        close(p[1]);
        rt_worker_wait(w);
        rt_worker_destroy(w, 0);
        _exit(0);
    }
    close(p[1]);
    int port = -1;
    ssize_t got = read(p[0], &port, sizeof port);
    close(p[0]);
    T.child[slot] = pid;
    cr_assert(got == sizeof port && port > 0, "the child worker did not start");
    T.port[slot] = port;
    snprintf(T.target[slot], sizeof T.target[slot], "127.0.0.1:%d", port);
    T.n = slot + 1;
    return slot;
}

void tc_child_signal(size_t slot, int sig, bool reap)
{
    cr_assert(T.child[slot] > 0);
    kill(T.child[slot], sig);
    if (reap) {
        waitpid(T.child[slot], NULL, 0);
        T.child[slot] = 0;
    }
}

/* ---- the cluster ---------------------------------------------------------- */

static void make_cluster(const char *token, int64_t call_timeout_ms,
                         int64_t ping_timeout_ms, int64_t heartbeat_ms, bool wait)
{
    const char *targets[TC_MAX];
    for (size_t i = 0; i < T.n; i++)
        targets[i] = T.target[i];
    cluster_opts o = {.token = token,
                      .call_timeout_ms = call_timeout_ms,
                      .ping_timeout_ms = ping_timeout_ms,
                      .heartbeat_ms = heartbeat_ms};
    int rc = cluster_create(targets, T.n, &o, &T.cl);
    cr_assert(rc == 0, "cluster_create: %s", ferry_strerror(rc));
    if (wait) {
        rc = cluster_wait_ready(T.cl, TC_WAIT_MS);
        cr_assert(rc == 0, "cluster_wait_ready: %s", cluster_error(T.cl));
    }
}

void tc_cluster(int64_t call_timeout_ms, int64_t ping_timeout_ms, int64_t heartbeat_ms)
{
    make_cluster(TC_TOKEN, call_timeout_ms, ping_timeout_ms, heartbeat_ms, true);
}

void tc_cluster_token(const char *token, int64_t call_timeout_ms)
{
    make_cluster(token, call_timeout_ms, 0, 0, true);
}

void tc_cluster_unready(int64_t call_timeout_ms, int64_t heartbeat_ms)
{
    make_cluster(TC_TOKEN, call_timeout_ms, 0, heartbeat_ms, false);
}

void tc_old_crash(const char *what)
{
    size_t slot = T.n;
    cr_assert(slot < TC_MAX);
    slot_paths(slot);
    cr_assert(mkdir(T.state[slot], 0700) == 0, "%s: %s", T.state[slot], strerror(errno));
    char path[400];
    snprintf(path, sizeof path, "%s/crash", T.state[slot]);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    /* The id a crash long ago would have: its time in ns. */
    fprintf(f, "1000000000 %s\n", what);
    cr_assert(fclose(f) == 0);
}

/* ---- modules -------------------------------------------------------------- */

/* Reads `name` in the folder the environment variable `var` names. */
static void read_from(const char *var, const char *name)
{
    const char *dir = getenv(var);
    cr_assert_not_null(dir, "%s is not set (run through meson test)", var);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    free(T.bytes);
    T.bytes = malloc(len > 0 ? (size_t)len : 1);
    T.len = fread(T.bytes, 1, (size_t)len, f);
    fclose(f);
    cr_assert(len > 0 && T.len == (size_t)len, "%s: short read", path);
}

void tc_read_module(const char *name)
{
    read_from("FERRY_TEST_MODULES", name);
}

void tc_read_task(const char *name)
{
    read_from("FERRY_TEST_TASKS", name);
}

void tc_load_faulty(void)
{
    tc_read_module("faulty.so");
    int rc = cluster_load_module(T.cl, "faulty.so", T.bytes, T.len, &T.mod);
    cr_assert(rc == 0, "cluster_load_module: %s", cluster_error(T.cl));
}

ferry_bytes_t tc_str(const char *s)
{
    return (ferry_bytes_t){.data = (void *)s, .len = strlen(s)};
}

void tc_assert_bytes(const ferry_bytes_t *b, const char *s)
{
    size_t n = strlen(s);
    cr_assert(b->len == n && (n == 0 || memcmp(b->data, s, n) == 0),
              "expected '%s', got %zu bytes '%.*s'", s, b->len, (int)b->len,
              b->data ? (const char *)b->data : "");
}

/* ---- a peer that never answers -------------------------------------------- */

int tc_silent_server(void)
{
    cr_assert(n_silent < MAX_SILENT);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    /* The kernel completes connections into the backlog; nobody ever
     * accepts, reads or writes: gRPC's handshake never ends. */
    cr_assert(listen(fd, 16) == 0);
    cr_assert(getsockname(fd, (struct sockaddr *)&a, &alen) == 0);
    silent_fd[n_silent++] = fd;
    return ntohs(a.sin_port);
}

/* ---- a proxyworker of the test's own --------------------------------------- */

void tc_pw_open(tc_pw *t, const char *token, int rank)
{
    cr_assert(uv_loop_init(&t->loop) == 0);
    cr_assert(rpc_client_create(&t->loop, &t->client) == 0);
    pw_opts o = {.target = T.target[0], .token = token, .rank = rank};
    int rc = pw_create(t->client, &o, &t->p);
    cr_assert(rc == 0, "pw_create: %s", ferry_strerror(rc));
}

void tc_pw_close(tc_pw *t)
{
    pw_destroy(t->p);
    rpc_client_close(t->client);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    cr_assert(uv_loop_close(&t->loop) == 0, "a handle was left open");
}
