/* tests/runtime — `ferry worker` (rt_worker_main) in forked children: help,
 * usage errors, a port in use, a full life ended by Shutdown or SIGTERM, and
 * a crash that the next worker on the same state reports. */
#include "rth.h"

#include "ferry.pb-c.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ferry/version.h>

TestSuite(rt_main, .init = rth_setup_dir, .fini = rth_teardown, .timeout = 90);

typedef struct job {
    int argc;
    char *argv[32];
    char storage[32][600];
    const char *ferry_home; /* set in the child; NULL: unset */
} job;

static job J;

/* Fills J with "worker" and the NULL-terminated arguments. */
static void args(const char *first, ...)
{
    memset(&J, 0, sizeof J);
    snprintf(J.storage[0], sizeof J.storage[0], "worker");
    J.argv[J.argc] = J.storage[J.argc];
    J.argc++;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a; a = va_arg(ap, const char *)) {
        snprintf(J.storage[J.argc], sizeof J.storage[0], "%s", a);
        J.argv[J.argc] = J.storage[J.argc];
        J.argc++;
    }
    va_end(ap);
}

static int run_main(void *arg)
{
    job *j = arg;
    if (j->ferry_home)
        setenv("FERRY_HOME", j->ferry_home, 1);
    else
        unsetenv("FERRY_HOME");
    return rt_worker_main(j->argc, j->argv);
}

/* Runs J to the end; returns the exit status (asserting a normal exit). */
static int run(char **out, char **err)
{
    char *o = NULL, *e = NULL;
    int status = rth_fork(run_main, &J, &o, &e);
    cr_assert(WIFEXITED(status), "rt_worker_main died by signal %d: %s", WTERMSIG(status),
              e ? e : "");
    if (out)
        *out = o;
    else
        free(o);
    if (err)
        *err = e;
    else
        free(e);
    return WEXITSTATUS(status);
}

static char state_dir[512], port_file[512];

/* A worker in a child, listening on a free port of `host` (an address as
 * --listen takes it: 127.0.0.1, [::1]); returns its pid and port. */
static pid_t start_daemon_on(const char *host, rth_child_out *paths, int *port,
                             const char *rank, const char *restarts)
{
    char listen_at[64];
    snprintf(listen_at, sizeof listen_at, "%s:0", host);
    snprintf(state_dir, sizeof state_dir, "%s/state", R.dir);
    snprintf(port_file, sizeof port_file, "%s/port", R.dir);
    args("--listen", listen_at, "--state-dir", state_dir, "--token-file",
         rth_token_file(), "--port-file", port_file, "--rank", rank, "--restarts",
         restarts, "--threads", "4", NULL);
    pid_t pid = rth_spawn(run_main, &J, paths);
    /* Bounded: a worker that never writes its port fails the test. */
    for (int i = 0; i < 2000; i++) {
        char *text = rth_read_file(port_file, NULL);
        if (text) {
            *port = atoi(text);
            free(text);
            cr_assert(*port > 0 && *port < 65536, "port file holds %d", *port);
            return pid;
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            char *err = rth_read_file(paths->err, NULL);
            cr_assert_fail("the worker exited (status %d) before listening: %s", status,
                           err ? err : "");
        }
        usleep(10000);
    }
    kill(pid, SIGKILL);
    rth_reap(pid);
    cr_assert_fail("the worker never wrote its port file");
    return -1;
}

static pid_t start_daemon(rth_child_out *paths, int *port, const char *rank,
                          const char *restarts)
{
    return start_daemon_on("127.0.0.1", paths, port, rank, restarts);
}

Test(rt_main, help_exits_0_and_lists_the_options)
{
    args("--help", NULL);
    char *out = NULL;
    cr_assert(run(&out, NULL) == 0);
    cr_assert(strstr(out, "usage: ferry worker --listen ADDR"), "%s", out);
    const char *opts[] = {"--state-dir", "--token-file", "--rank",   "--threads",
                          "--restarts",  "--port-file",  "--version"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        cr_assert(strstr(out, opts[i]), "help lacks %s", opts[i]);
    free(out);
    rth_finish();
}

Test(rt_main, version_prints_the_version)
{
    args("--version", NULL);
    char *out = NULL;
    cr_assert(run(&out, NULL) == 0);
    cr_assert_str_eq(out, "ferry " FERRY_VERSION_STRING "\n");
    free(out);
    rth_finish();
}

static void usage_error(const char *want, const char *first, ...)
{
    /* Rebuild J from the variable arguments (args() takes them itself). */
    memset(&J, 0, sizeof J);
    snprintf(J.storage[0], sizeof J.storage[0], "worker");
    J.argv[0] = J.storage[0];
    J.argc = 1;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a; a = va_arg(ap, const char *)) {
        snprintf(J.storage[J.argc], sizeof J.storage[0], "%s", a);
        J.argv[J.argc] = J.storage[J.argc];
        J.argc++;
    }
    va_end(ap);
    char *err = NULL;
    int rc = run(NULL, &err);
    cr_assert(rc == 2, "exit %d for %s: %s", rc, first ? first : "(no args)", err);
    cr_assert(strstr(err, want), "'%s' lacks '%s'", err, want);
    cr_assert(strstr(err, "Try 'ferry worker --help'") || strstr(err, "cannot listen"),
              "%s", err);
    free(err);
}

Test(rt_main, usage_mistakes_exit_2_and_say_what_is_wrong)
{
    usage_error("--listen ADDR is required", (const char *)NULL);
    usage_error("--listen ADDR is required", "--rank", "1", NULL);
    usage_error("--rank: expected a number", "--listen", "127.0.0.1:0", "--rank", "one",
                NULL);
    usage_error("--threads: expected a number", "--listen", "127.0.0.1:0", "--threads",
                "-3", NULL);
    usage_error("unknown option '--bogus'", "--listen", "127.0.0.1:0", "--bogus", NULL);
    usage_error("--listen needs a value", "--listen", NULL);
    usage_error("unexpected argument 'extra'", "--listen", "127.0.0.1:0", "extra", NULL);
    usage_error("--listen: expected host:port", "--listen", "no-port-here", NULL);
    rth_finish();
}

Test(rt_main, a_missing_token_file_exits_1_and_names_it)
{
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no-token", R.dir);
    snprintf(state_dir, sizeof state_dir, "%s/state", R.dir);
    args("--listen", "127.0.0.1:0", "--token-file", missing, "--state-dir", state_dir,
         NULL);
    char *err = NULL;
    cr_assert(run(NULL, &err) == 1, "%s", err);
    cr_assert(strstr(err, missing), "%s", err);
    free(err);
    rth_finish();
}

Test(rt_main, a_port_in_use_exits_3_and_names_the_port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    cr_assert(listen(fd, 4) == 0);
    socklen_t alen = sizeof a;
    cr_assert(getsockname(fd, (struct sockaddr *)&a, &alen) == 0);
    int port = ntohs(a.sin_port);

    char listen_at[64], want[64];
    snprintf(listen_at, sizeof listen_at, "127.0.0.1:%d", port);
    snprintf(want, sizeof want, "port %d is in use", port);
    snprintf(state_dir, sizeof state_dir, "%s/state", R.dir);
    args("--listen", listen_at, "--token-file", rth_token_file(), "--state-dir",
         state_dir, NULL);
    char *err = NULL;
    int rc = run(NULL, &err);
    close(fd);
    cr_assert(rc == 3, "exit %d: %s", rc, err);
    cr_assert(strstr(err, want), "'%s' lacks '%s'", err, want);
    free(err);
    rth_finish();
}

Test(rt_main, a_worker_serves_until_shutdown_and_exits_0)
{
    rth_child_out paths;
    int port;
    pid_t pid = start_daemon(&paths, &port, "5", "2");
    rth_connect(port);
    proto_ping_reply *p = NULL;
    int rc = rth_ping(R.ch, &p);
    cr_assert(rc == 0, "%s", ferry_err_name(rc));
    cr_assert(p->pid == pid, "pid %d, expected %d", p->pid, pid);
    cr_assert(p->rank == 5);
    cr_assert(p->restarts == 2);
    proto_free(p);

    Ferry__ShutdownRequest req = FERRY__SHUTDOWN_REQUEST__INIT;
    req.grace_ms = 1000;
    rpc_call c;
    rc = rth_call(R.ch, &c, PROTO_METHOD_SHUTDOWN, &req.base, NULL, 0);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), c.errmsg);
    rpc_call_fini(&c);
    int status = rth_reap(pid);
    char *err = rth_read_file(paths.err, NULL);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d: %s", status,
              err);
    char want[128];
    snprintf(want, sizeof want,
             "ferry worker rank 5 listening on 127.0.0.1:%d (pid %d)\n", port, pid);
    cr_assert(strstr(err, want), "'%s' lacks '%s'", err, want);
    free(err);
    rth_finish();
}

Test(rt_main, sigterm_stops_a_worker_with_exit_0)
{
    rth_child_out paths;
    int port;
    pid_t pid = start_daemon(&paths, &port, "0", "0");
    cr_assert(kill(pid, SIGTERM) == 0);
    int status = rth_reap(pid);
    char *err = rth_read_file(paths.err, NULL);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d: %s", status,
              err);
    cr_assert(strstr(err, "ferry worker rank 0 stopped"), "%s", err);
    free(err);
    rth_finish();
}

Test(rt_main, an_ipv6_worker_names_its_address_in_brackets)
{
    rth_child_out paths;
    int port;
    pid_t pid = start_daemon_on("[::1]", &paths, &port, "3", "0");
    cr_assert(kill(pid, SIGTERM) == 0);
    int status = rth_reap(pid);
    char *err = rth_read_file(paths.err, NULL);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d: %s", status,
              err);
    char want[128];
    snprintf(want, sizeof want, "ferry worker rank 3 listening on [::1]:%d (pid %d)\n",
             port, pid);
    cr_assert(strstr(err, want), "'%s' lacks '%s'", err, want);
    free(err);
    rth_finish();
}

Test(rt_main, defaults_come_from_ferry_home)
{
    char home[600], token[700], port_path[600], dir[700];
    snprintf(home, sizeof home, "%s/home", R.dir);
    cr_assert(mkdir(home, 0700) == 0);
    snprintf(token, sizeof token, "%s/token", home);
    cr_assert(rename(rth_token_file(), token) == 0);
    snprintf(port_path, sizeof port_path, "%s/port", R.dir);
    args("--listen", "127.0.0.1:0", "--port-file", port_path, NULL);
    J.ferry_home = home;
    rth_child_out paths;
    pid_t pid = rth_spawn(run_main, &J, &paths);
    snprintf(dir, sizeof dir, "%s/workers/pid-%d/cache", home, pid);
    struct stat st;
    bool up = false;
    for (int i = 0; i < 2000 && !up; i++) {
        char *text = rth_read_file(port_path, NULL);
        up = text != NULL;
        free(text);
        if (!up)
            usleep(10000);
    }
    kill(pid, SIGTERM);
    int status = rth_reap(pid);
    char *err = rth_read_file(paths.err, NULL);
    cr_assert(up, "the worker never listened: %s", err);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d: %s", status,
              err);
    cr_assert(stat(dir, &st) == 0 && S_ISDIR(st.st_mode), "no state dir %s", dir);
    free(err);
    rth_finish();
}

Test(rt_main, a_crash_in_a_call_is_reported_by_the_next_worker)
{
    rth_child_out paths;
    int port;
    pid_t pid = start_daemon(&paths, &port, "1", "0");
    rth_connect(port);
    char sha[RT_SHA256_HEX], errtext[1024];
    rth_load_faulty(sha);
    int rc = rth_invoke(R.ch, sha, "segv", NULL, NULL, errtext, sizeof errtext);
    cr_assert(rc != 0, "a call that crashed its worker succeeded");
    int status = rth_reap(pid);
    char *err = rth_read_file(paths.err, NULL);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "status %d: %s", status,
              err);
    cr_assert(strstr(err, "crashed: module faulty.so function segv: signal 11 (SIGSEGV)"),
              "%s", err);
    free(err);

    /* The supervisor would start the next worker on the same state. */
    rth_disconnect();
    rt_worker_opts o = {.rank = 1, .restarts = 1, .state_dir = state_dir};
    rth_start_worker(&o);
    proto_ping_reply *p = NULL;
    cr_assert(rth_ping(R.ch, &p) == 0);
    const char *want = "module faulty.so function segv: signal 11 (SIGSEGV) at address "
                       "0x10 in function segv; frames: segv+0x";
    cr_assert(strncmp(p->last_crash, want, strlen(want)) == 0, "%s", p->last_crash);
    cr_assert(p->crash_id != 0);
    cr_assert(p->restarts == 1);
    proto_free(p);
    /* Its cache still holds the module. */
    char err2[512];
    cr_assert(rth_load(R.ch, "faulty.so", NULL, false, NULL, err2, sizeof err2) == 0,
              "%s", err2);
    char *out = NULL;
    cr_assert(rth_invoke(R.ch, sha, "echo", "alive", &out, err2, sizeof err2) == 0);
    cr_assert_str_eq(out, "alive");
    free(out);
    rth_finish();
}

/* The executor thread's stack runs out: the record needs the alternate
 * signal stack. */
Test(rt_main, a_stack_overflow_in_a_call_is_recorded)
{
    rth_child_out paths;
    int port;
    pid_t pid = start_daemon(&paths, &port, "1", "0");
    rth_connect(port);
    char sha[RT_SHA256_HEX], errtext[1024];
    rth_load_faulty(sha);
    int rc = rth_invoke(R.ch, sha, "overflow", NULL, NULL, errtext, sizeof errtext);
    cr_assert(rc != 0, "a call that overflowed its stack succeeded");
    int status = rth_reap(pid);
    char *err = rth_read_file(paths.err, NULL);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "status %d: %s", status,
              err);
    const char *want = "module faulty.so function overflow: signal 11 (SIGSEGV)";
    char record[600];
    snprintf(record, sizeof record, "%s/crash", state_dir);
    rt_identity id = {0};
    rt_crash_read(record, &id);
    cr_assert(strncmp(id.last_crash, want, strlen(want)) == 0, "stderr: %s", err);
    cr_assert(id.crash_id != 0);
    cr_assert(strstr(err, want), "%s", err);
    free(err);
    rth_finish();
}

/* The child starts with SIGTERM blocked, as a launcher may hold it across
 * fork and exec: rt_worker_main unblocks it once its handler is in place,
 * so none of the signals below can kill the child before that. */
static pid_t spawn_with_sigterm_blocked(rth_child_out *paths)
{
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    cr_assert(sigprocmask(SIG_BLOCK, &term, &old) == 0);
    pid_t pid = rth_spawn(run_main, &J, paths);
    cr_assert(sigprocmask(SIG_SETMASK, &old, NULL) == 0);
    return pid;
}

Test(rt_main, sigterm_storms_during_start_up_and_shutdown_always_exit_0)
{
    snprintf(state_dir, sizeof state_dir, "%s/state", R.dir);
    args("--listen", "127.0.0.1:0", "--state-dir", state_dir, "--token-file",
         rth_token_file(), "--threads", "2", NULL);
    for (int round = 0; round < 20; round++) {
        rth_child_out paths;
        pid_t pid = spawn_with_sigterm_blocked(&paths);
        /* Each round starts its storm a little later, so that the first
         * signal lands in a different stage of start-up; the storm goes on
         * through the shutdown until the child is gone. */
        usleep((useconds_t)round * 2000);
        int status = 0;
        bool gone = false;
        for (int i = 0; i < 40000 && !gone; i++) { /* bounds a hang at ~20 s */
            kill(pid, SIGTERM);
            pid_t r = waitpid(pid, &status, WNOHANG);
            cr_assert(r >= 0 || errno == EINTR, "waitpid: %s", strerror(errno));
            gone = r == pid;
            if (!gone)
                usleep(500);
        }
        if (!gone) {
            kill(pid, SIGKILL);
            rth_reap(pid);
        }
        char *err = rth_read_file(paths.err, NULL);
        cr_assert(gone, "round %d: the worker did not stop on SIGTERM: %s", round,
                  err ? err : "");
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "round %d: status %d (signal %d): %s", round, status,
                  WIFSIGNALED(status) ? WTERMSIG(status) : 0, err ? err : "");
        cr_assert(strstr(err, "ferry worker stopped"), "round %d: %s", round,
                  err);
        free(err);
    }
    rth_finish();
}
