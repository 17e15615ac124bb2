/* tests/rpc — the server's bounds on connections (rpc.h): one that has not
 * finished its HTTP/2 handshake in RPC_HANDSHAKE_TIMEOUT_MS is closed; one
 * with no call for RPC_MAX_CONNECTION_IDLE_MS is told to go (GOAWAY); one
 * carries at most RPC_MAX_CONCURRENT_STREAMS calls at once, the rest
 * waiting in the client until a stream is free. The first two are watched
 * on a raw socket, as the server's peer sees them. */
#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

TestSuite(rpc_conn_limits, .init = h_setup, .fini = h_teardown, .timeout = 150);

static int raw_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)H.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect: %s",
              strerror(errno));
    return fd;
}

/* Reads exactly n bytes before `end_ms`; false at EOF, on an error or when
 * time runs out (*eof says which). */
static bool read_full(int fd, uint8_t *buf, size_t n, double end_ms, bool *eof)
{
    *eof = false;
    for (size_t got = 0; got < n;) {
        int left = (int)(end_ms - h_now_ms());
        if (left <= 0)
            return false;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int k = poll(&p, 1, left);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            *eof = true; /* closed, or reset */
            return false;
        }
        got += (size_t)r;
    }
    return true;
}

static void write_all(int fd, const void *buf, size_t n)
{
    cr_assert(write(fd, buf, n) == (ssize_t)n, "write: %s", strerror(errno));
}

H_TEST(rpc_conn_limits, a_connection_that_never_handshakes_is_closed_at_the_timeout)
{
    int fd = raw_connect();
    double t0 = h_now_ms();
    uint8_t byte;
    bool eof = false;
    size_t heard = 0;
    /* The client sends nothing, not even its preface; what the server sends
     * (its own SETTINGS) is read and dropped until it closes. */
    while (read_full(fd, &byte, 1, t0 + RPC_HANDSHAKE_TIMEOUT_MS + 20000, &eof))
        heard++;
    double took = h_now_ms() - t0;
    close(fd);
    fprintf(stderr, "a silent connection was closed after %.0f ms (%zu bytes heard)\n",
            took, heard);
    cr_assert(eof, "the silent connection is still open after %.0f ms", took);
    /* The handshake timeout closed it, not an instant refusal. */
    cr_assert(took >= RPC_HANDSHAKE_TIMEOUT_MS - 500, "closed after %.0f ms", took);
    /* The server still serves. */
    rpc_call call;
    int rc = h_call(H.ch, &call, H_ECHO, "", "after", "x", 1, RPC_CODEC_RAW,
                    H_CALL_TIMEOUT_MS);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), call.errmsg);
    rpc_call_fini(&call);
}

/* HTTP/2 frame types and flags this client needs (RFC 9113). */
enum { F_SETTINGS = 4, F_PING = 6, F_GOAWAY = 7, FLAG_ACK = 1 };

static void frame(int fd, uint8_t type, uint8_t flags, const uint8_t *payload, size_t len)
{
    uint8_t h[9] = {(uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len, type, flags,
                    0, 0, 0, 0};
    write_all(fd, h, sizeof h);
    if (len)
        write_all(fd, payload, len);
}

H_TEST(rpc_conn_limits, a_connection_with_no_call_is_sent_goaway_once_idle)
{
    int fd = raw_connect();
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    write_all(fd, preface, sizeof preface - 1);
    frame(fd, F_SETTINGS, 0, NULL, 0);
    double t0 = h_now_ms(), end = t0 + RPC_MAX_CONNECTION_IDLE_MS + 30000;
    bool goaway = false, eof = false, settings = false;
    double at = 0;
    uint8_t h[9], payload[1024];
    /* Answer what a client must (SETTINGS, PING) until the server says go. */
    while (!goaway && read_full(fd, h, sizeof h, end, &eof)) {
        size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
        cr_assert(len <= sizeof payload, "a frame of %zu bytes", len);
        if (len && !read_full(fd, payload, len, end, &eof))
            break;
        if (h[3] == F_SETTINGS && !(h[4] & FLAG_ACK)) {
            settings = true;
            frame(fd, F_SETTINGS, FLAG_ACK, NULL, 0);
        } else if (h[3] == F_PING && !(h[4] & FLAG_ACK)) {
            frame(fd, F_PING, FLAG_ACK, payload, len);
        } else if (h[3] == F_GOAWAY) {
            goaway = true;
        }
        at = h_now_ms() - t0;
    }
    if (!goaway)
        at = h_now_ms() - t0;
    close(fd);
    fprintf(stderr, "an idle connection got %s after %.0f ms\n",
            goaway ? "GOAWAY" : eof ? "closed" : "nothing", at);
    cr_assert(settings, "the server never sent its SETTINGS");
    cr_assert(goaway || eof, "an idle connection is still open after %.0f ms", at);
    /* Idle, not refused: the handshake timeout did not close it either. */
    cr_assert(at >= RPC_MAX_CONNECTION_IDLE_MS - 1000, "told to go after %.0f ms", at);
}

/* ---- one connection, at most RPC_MAX_CONCURRENT_STREAMS calls ------------- */

#define PARK  "/test.Limits/Park"
#define EXTRA 8
enum { MAX_CALLS = RPC_MAX_CONCURRENT_STREAMS + 2 * EXTRA };

static pthread_mutex_t park_mu = PTHREAD_MUTEX_INITIALIZER;
static rpc_srv_call *parked[MAX_CALLS];
static atomic_int arrived;
static bool letting_go;

/* Keeps each call open until the test lets them go; later ones are answered
 * at once. Never blocks (it runs on the queue thread). */
static void park(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)req, (void)data;
    pthread_mutex_lock(&park_mu);
    bool now = letting_go;
    int i = atomic_fetch_add(&arrived, 1);
    if (!now && i < MAX_CALLS)
        parked[i] = sc;
    pthread_mutex_unlock(&park_mu);
    if (now || i >= MAX_CALLS) {
        rpc_msg_out out = {0};
        rpc_srv_reply(sc, &out);
    }
}

static void let_go(void)
{
    pthread_mutex_lock(&park_mu);
    letting_go = true;
    pthread_mutex_unlock(&park_mu);
    for (int i = 0; i < MAX_CALLS; i++) {
        if (parked[i]) {
            rpc_msg_out out = {0};
            rpc_srv_reply(parked[i], &out);
            parked[i] = NULL;
        }
    }
}

static bool wait_arrived(int n)
{
    for (double end = h_now_ms() + 30000; atomic_load(&arrived) < n; usleep(2000))
        if (h_now_ms() > end)
            return false;
    return true;
}

static void teardown_park(void)
{
    let_go();
    h_teardown();
}

TestSuite(rpc_streams, .init = h_setup_bare, .fini = teardown_park, .timeout = 120);

H_TEST(rpc_streams, one_connection_carries_at_most_the_limit_and_the_rest_wait)
{
    static const rpc_method methods[] = {{PARK, park, NULL, RPC_METHOD_INLINE, 0}};
    rpc_server_opts o = {.listen = "127.0.0.1:0"};
    cr_assert(rpc_server_create(&o, methods, 1, &H.server) == 0);
    H.port = rpc_server_port(H.server);
    snprintf(H.target, sizeof H.target, "127.0.0.1:%d", H.port);
    h_channel_open(NULL);
    /* Other options, so gRPC gives it a connection of its own. */
    rpc_channel_opts other = {.max_payload = RPC_DEFAULT_MAX_PAYLOAD / 2};
    cr_assert(rpc_channel_create(H.client, H.target, &other, &H.extra[0]) == 0);

    static rpc_call calls[MAX_CALLS];
    static rpc_call *all[MAX_CALLS];
    rpc_msg_out out = {0};
    enum { ONE = RPC_MAX_CONCURRENT_STREAMS + EXTRA };
    for (int i = 0; i < ONE; i++) {
        all[i] = &calls[i];
        cr_assert(rpc_call_start(H.ch, &calls[i], PARK, &out, 60000, NULL) == 0);
    }
    cr_assert(wait_arrived(RPC_MAX_CONCURRENT_STREAMS), "%d of %d calls arrived",
              atomic_load(&arrived), RPC_MAX_CONCURRENT_STREAMS);
    /* Calls on the second connection, started after the first's extra ones,
     * still get through: the first's are held back by the limit, not by
     * the server. */
    for (int i = ONE; i < MAX_CALLS; i++) {
        all[i] = &calls[i];
        cr_assert(rpc_call_start(H.extra[0], &calls[i], PARK, &out, 60000, NULL) == 0);
    }
    bool second = wait_arrived(RPC_MAX_CONCURRENT_STREAMS + EXTRA);
    int seen = atomic_load(&arrived);
    cr_assert(second, "the second connection's calls did not arrive (%d)", seen);
    cr_assert(seen == RPC_MAX_CONCURRENT_STREAMS + EXTRA,
              "%d calls arrived: one connection carried more than %d", seen,
              RPC_MAX_CONCURRENT_STREAMS);
    /* Freed streams take the calls that waited. */
    let_go();
    cr_assert(wait_arrived(MAX_CALLS), "%d of %d calls arrived", atomic_load(&arrived),
              MAX_CALLS);
    int rc = rpc_call_wait_all(all, MAX_CALLS);
    cr_assert(rc == 0, "%s", ferry_err_name(rc));
    for (int i = 0; i < MAX_CALLS; i++)
        rpc_call_fini(&calls[i]);
}
