/* tests/ps — a push whose shard holder is killed mid-send: the shard runs
 * in a forked child, stopped while the push's megabytes are on their way
 * and then SIGKILLed. The push fails naming the shard, and returns only
 * once gRPC has let go of the caller's values, which the test overwrites
 * and frees the moment it returns (a sanitizer build reports any later
 * read). */
#include "tps.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tchild.h"

#define S 73
#define N ((size_t)8 << 20) /* 32 MiB of floats: far above a write of gRPC's */

static pid_t holder;

static void fini(void)
{
    tcom_reap(&holder);
    tps_teardown();
}

/* The child: rank 0's store and server with the session open; sends its
 * port down `fd` and waits to be killed. */
static void hold_shard(int fd, const tps_sess *s)
{
    tps_start(1);
    tps_open_all(s);
    int port = rpc_server_port(T.r[0].server);
    if (write(fd, &port, sizeof port) != (ssize_t)sizeof port)
        _exit(1);
    for (;;)
        pause();
}

Test(ps_kill,
     a_push_whose_shard_holder_is_killed_mid_send_fails_and_lets_go_of_its_values,
     .init = tps_setup, .fini = fini, .timeout = 120)
{
    float *init = calloc(N, sizeof *init);
    cr_assert(init);
    tps_sess s = {
        .session = S, .shards = 1, .staleness = -1, .lr = 1, .init = init, .n = N};
    int fds[2];
    cr_assert(pipe(fds) == 0);
    /* Before anything here starts gRPC. */
    holder = tcom_fork();
    if (holder == 0) {
        close(fds[0]);
        hold_shard(fds[1], &s);
    }
    close(fds[1]);
    int port = 0;
    cr_assert(read(fds[0], &port, sizeof port) == (ssize_t)sizeof port,
              "the shard holder did not start");
    close(fds[0]);
    free(init);
    s.init = NULL;

    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    const char *peers[] = {addr};
    T.world = 1;
    rt_ps_client *c = tps_client(0, &s, peers, 5000);

    /* A pull and a push that go through: the holder has answered, so a
     * failure is not retried, and the connection's windows have grown. */
    float *params = malloc(N * sizeof *params), *g = malloc(N * sizeof *g);
    cr_assert(params && g);
    for (size_t i = 0; i < N; i++)
        g[i] = (float)(i % 97) * 1e-3f;
    rt_ps_seen seen;
    char err[TPS_ERRLEN] = "";
    int rc = rt_ps_pull(c, params, 0, 0, &seen, NULL, NULL, err, sizeof err);
    cr_assert(rc == 0, "pull: %s: %s", ferry_err_name(rc), err);
    rc = rt_ps_push(c, g, FERRY__PUSH_KIND__PUSH_GRADIENT, 1, 1, &seen, NULL, NULL, err,
                    sizeof err);
    cr_assert(rc == 0, "push: %s: %s", ferry_err_name(rc), err);

    cr_assert(kill(holder, SIGSTOP) == 0);
    pthread_t th;
    tcom_kill_after(holder, 300, &th);
    double t0 = tps_now_ms();
    rc = rt_ps_push(c, g, FERRY__PUSH_KIND__PUSH_GRADIENT, 2, 1, &seen, NULL, NULL, err,
                    sizeof err);
    double took = tps_now_ms() - t0;
    /* The caller's to reuse now. */
    memset(g, 0xee, N * sizeof *g);
    free(g);
    pthread_join(th, NULL);
    tcom_reap(&holder);
    cr_assert(rc != 0, "the push to a killed shard holder succeeded");
    cr_assert(strstr(err, "shard 0") && strstr(err, addr), "%s: %s", ferry_err_name(rc),
              err);
    cr_assert(took < 5000 + 3000, "the push took %.0f ms", took);
    cr_log_info("push to a killed holder: %s after %.0f ms: %s", ferry_err_name(rc), took,
                err);
    free(params);
    tps_finish();
}
