/* tests/rpc — a third-party client (Python grpcio) calls a ferry server.
 *
 * The client is tests/rpc/grpcio_ping.py run by /usr/bin/python3 (Debian's
 * python3-grpcio lives there, not in whatever python3 is first on PATH). It
 * builds its message classes from the FileDescriptorSet meson generated;
 * meson passes both paths in FERRY_TEST_GRPCIO_SCRIPT and
 * FERRY_TEST_PROTO_DESC. */
#include "harness.h"
#include "tcommon.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define PYTHON "/usr/bin/python3"

TestSuite(rpc_grpcio, .init = h_setup, .fini = h_teardown, .timeout = 90);

typedef struct py_result {
    int status; /* exit code, or 128 + signal */
    char out[8192];
} py_result;

/* Runs the script with `mode` and `arg` against H.target; captures stdout. */
static void run_client(const char *mode, const char *arg, py_result *res)
{
    const char *script = getenv("FERRY_TEST_GRPCIO_SCRIPT");
    const char *desc = getenv("FERRY_TEST_PROTO_DESC");
    if (!script || !desc)
        cr_skip_test("FERRY_TEST_GRPCIO_SCRIPT / FERRY_TEST_PROTO_DESC not set "
                     "(run through meson test)");
    if (access(PYTHON, X_OK) != 0)
        tcom_skip_missing("python3-grpcio", PYTHON);
    cr_assert(access(script, R_OK) == 0, "no script at %s", script);
    cr_assert(access(desc, R_OK) == 0, "no descriptor set at %s", desc);

    int fds[2];
    cr_assert(pipe2(fds, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    char *argv[] = {PYTHON,       (char *)script, (char *)mode, H.target,
                    (char *)desc, (char *)arg,    NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, PYTHON, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    cr_assert(rc == 0, "posix_spawn %s: %s", PYTHON, strerror(rc));

    size_t used = 0;
    double end = h_now_ms() + 60000;
    for (;;) {
        int left = (int)(end - h_now_ms());
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int n = poll(&p, 1, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        ssize_t got = read(fds[0], res->out + used, sizeof res->out - 1 - used);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        used += (size_t)got;
        if (used == sizeof res->out - 1)
            break;
    }
    res->out[used] = 0;
    close(fds[0]);

    int st = 0;
    pid_t w;
    while ((w = waitpid(pid, &st, WNOHANG)) == 0 && h_now_ms() < end)
        usleep(10000);
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        cr_assert_fail("%s %s did not finish within 60 s; stdout: %s", script, mode,
                       res->out);
    }
    res->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (res->status == 77) {
        res->out[strcspn(res->out, "\n")] = '\0'; /* one JSON line */
        tcom_skip_missing("python3-grpcio python3-protobuf", res->out);
    }
    cr_assert(res->status == 0, "%s %s exited with %d; stdout: %s (stderr is in the log)",
              script, mode, res->status, res->out);
}

/* The number after "key": in a one-line JSON object, or asserts. */
static const char *json_value(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    cr_assert(p != NULL, "no %s in %s", key, json);
    return p + strlen(pat);
}

H_TEST(rpc_grpcio, python_grpcio_client_pings_a_ferry_server)
{
    py_result res;
    uint64_t nonce = 0x1234567890abcdefull;
    char arg[32];
    snprintf(arg, sizeof arg, "%llu", (unsigned long long)nonce);
    run_client("ping", arg, &res);
    long long pid = strtoll(json_value(res.out, "pid"), NULL, 10);
    unsigned long long got = strtoull(json_value(res.out, "nonce"), NULL, 10);
    cr_assert(pid == getpid(), "pid %lld, expected %d (%s)", pid, getpid(), res.out);
    cr_assert(got == nonce, "nonce %llu, expected %llu", got, (unsigned long long)nonce);
    cr_assert(strncmp(json_value(res.out, "version"), "\"\"", 2) != 0, "empty version");
    cr_assert(strncmp(json_value(res.out, "device"), "\"\"", 2) != 0, "empty device");
}

/* Python writes fields in number order (head, then payload_info 14 and
 * payload 15) and no payload_info at all for a raw payload; ferry's reply
 * puts its payload fields first. Both must be plain protobuf to the other. */
H_TEST(rpc_grpcio, python_grpcio_client_round_trips_a_payload)
{
    py_result res;
    run_client("echo", "100000", &res);
    cr_assert(strstr(res.out, "\"sha256\":\"py\""), "%s", res.out);
    cr_assert(strstr(res.out, "\"function\":\"echo\""), "%s", res.out);
    cr_assert(strtol(json_value(res.out, "payload_len"), NULL, 10) == 100000, "%s",
              res.out);
    cr_assert(strstr(res.out, "\"payload_ok\":true"), "payload differs: %s", res.out);
    long raw = strtol(json_value(res.out, "raw_size"), NULL, 10);
    cr_assert(raw == 0 || raw == 100000, "payload_info.raw_size %ld", raw);
}
