/* tests/rpc — connecting to a server that is slow to accept.
 *
 * A busy worker (or a long round trip) can take well over 100 ms to complete
 * a TCP connection. A call with a deadline of seconds must wait for it, not
 * fail as unavailable after the first attempt. The test puts a relay in front
 * of the server whose accept queue is full for a while: the client's SYN is
 * dropped and the kernel retransmits it after about a second, exactly what a
 * lossy or overloaded peer looks like. */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

TestSuite(rpc_connect, .init = h_setup, .fini = h_teardown, .timeout = 60);

typedef struct relay {
    int lsock;       /* listening, backlog 0 */
    int filler;      /* the connection that fills the accept queue */
    int port;        /* the relay's port */
    int server_port; /* where it forwards to */
    int hold_ms;     /* how long the queue stays full */
    atomic_bool stop;
    pthread_t thread;
    bool started;
} relay;

static relay R;

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Copies what one side has to the other; false when a side closed. */
static bool pump(int from, int to)
{
    char buf[65536];
    ssize_t n = read(from, buf, sizeof buf);
    if (n <= 0)
        return false;
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w <= 0)
            return false;
        off += w;
    }
    return true;
}

static void *relay_main(void *arg)
{
    (void)arg;
    usleep((useconds_t)R.hold_ms * 1000);
    /* Empty the queue, then serve the one connection the client makes. */
    int fd = accept(R.lsock, NULL, NULL);
    if (fd >= 0)
        close(fd);
    int client = -1;
    while (!atomic_load(&R.stop) && client < 0) {
        struct pollfd p = {.fd = R.lsock, .events = POLLIN};
        if (poll(&p, 1, 50) > 0)
            client = accept(R.lsock, NULL, NULL);
    }
    if (client < 0)
        return NULL;
    int server = connect_to(R.server_port);
    while (server >= 0 && !atomic_load(&R.stop)) {
        struct pollfd p[2] = {{.fd = client, .events = POLLIN},
                              {.fd = server, .events = POLLIN}};
        if (poll(p, 2, 50) <= 0)
            continue;
        if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && !pump(client, server))
            break;
        if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) && !pump(server, client))
            break;
    }
    if (server >= 0)
        close(server);
    close(client);
    return NULL;
}

static void relay_start(int server_port, int hold_ms)
{
    memset(&R, 0, sizeof R);
    R.server_port = server_port;
    R.hold_ms = hold_ms;
    R.filler = -1;
    R.lsock = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(R.lsock >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    cr_assert(bind(R.lsock, (struct sockaddr *)&a, sizeof a) == 0);
    cr_assert(listen(R.lsock, 0) == 0);
    cr_assert(getsockname(R.lsock, (struct sockaddr *)&a, &alen) == 0);
    R.port = ntohs(a.sin_port);
    /* It completes and sits in the queue: with backlog 0 the queue is then
     * full, and the kernel drops further SYNs. */
    R.filler = connect_to(R.port);
    cr_assert(R.filler >= 0);
    cr_assert(pthread_create(&R.thread, NULL, relay_main, NULL) == 0);
    R.started = true;
}

static void relay_stop(void)
{
    if (!R.started)
        return;
    atomic_store(&R.stop, true);
    pthread_join(R.thread, NULL);
    R.started = false;
    if (R.filler >= 0)
        close(R.filler);
    close(R.lsock);
}

static void connect_teardown(void)
{
    relay_stop();
    h_teardown();
}

TestSuite(rpc_connect_slow, .init = h_setup, .fini = connect_teardown, .timeout = 60);

H_TEST(rpc_connect_slow, call_waits_for_a_server_that_is_slow_to_accept)
{
    relay_start(H.port, 300);
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", R.port);
    cr_assert(rpc_channel_create(H.client, target, NULL, &H.extra[0]) == 0);
    double t0 = h_now_ms();
    rpc_call call;
    int rc = h_call(H.extra[0], &call, H_ECHO, "slow", "accept", "abc", 3, RPC_CODEC_RAW,
                    10000);
    double took = h_now_ms() - t0;
    cr_assert(rc == 0,
              "a call with a 10 s deadline failed after %.0f ms while the peer took "
              "~1 s to accept: %s: %s",
              took, ferry_err_name(rc), call.errmsg);
    cr_assert(call.reply.payload_len == 3 && memcmp(call.reply.payload, "abc", 3) == 0);
    rpc_call_fini(&call);
    rpc_channel_destroy(H.extra[0]);
    H.extra[0] = NULL;
    relay_stop();
}

H_TEST(rpc_connect, channel_connects_lazily_on_the_first_call)
{
    /* A channel to a port nobody listens on can be created and destroyed. */
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", h_dead_port());
    cr_assert(rpc_channel_create(H.client, target, NULL, &H.extra[0]) == 0);
    cr_assert_str_eq(rpc_channel_target(H.extra[0]), target);
}
