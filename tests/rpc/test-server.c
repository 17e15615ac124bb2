/* tests/rpc — creating and destroying servers: ports and addresses. */
#include "harness.h"
#include "tcommon.h"
#include "proto/raw.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

TestSuite(rpc_server, .init = h_setup_bare, .fini = h_teardown, .timeout = 60);

H_TEST(rpc_server, port_zero_picks_a_free_port_for_each_server)
{
    h_server_start(0);
    const rpc_method *m;
    size_t n = h_methods(&m);
    rpc_server_opts o = {.listen = "127.0.0.1:0"};
    cr_assert(rpc_server_create(&o, m, n, &H.extra_server) == 0);
    int p2 = rpc_server_port(H.extra_server);
    cr_assert(p2 > 0 && p2 != H.port, "ports %d and %d", H.port, p2);
}

H_TEST(rpc_server, address_held_by_another_socket_fails_with_eaddrinuse)
{
    int fd;
    int port = tcom_listen(0, &fd);
    cr_assert(port > 0);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    const rpc_method *m;
    size_t n = h_methods(&m);
    rpc_server_opts o = {.listen = addr};
    rpc_server *s = NULL;
    int rc = rpc_server_create(&o, m, n, &s);
    close(fd);
    rpc_server_destroy(rc == 0 ? s : NULL);
    cr_assert(rc == FERRY_EADDRINUSE, "rpc_server_create on a taken port: %s",
              ferry_err_name(rc));
}

/* gRPC sets SO_REUSEPORT by default: two ferry workers on one port would both
 * "succeed" and share the traffic. A port in use must be an error. */
H_TEST(rpc_server, address_held_by_another_rpc_server_fails_with_eaddrinuse)
{
    h_server_start(0);
    const rpc_method *m;
    size_t n = h_methods(&m);
    rpc_server_opts o = {.listen = H.target};
    rpc_server *s = NULL;
    int rc = rpc_server_create(&o, m, n, &s);
    rpc_server_destroy(rc == 0 ? s : NULL);
    cr_assert(rc == FERRY_EADDRINUSE, "second server on %s: %s", H.target,
              ferry_err_name(rc));
}

H_TEST(rpc_server, bad_listen_address_fails_with_einval)
{
    /* gRPC itself takes the port modulo 65536 (99999 binds 34463, 65536 a
     * random one) and a missing port as 443: rpc must refuse these. */
    const char *bad[] = {"127.0.0.1:99999", "127.0.0.1:65536", "127.0.0.1",
                         "127.0.0.1:-1",    "127.0.0.1:abc",   ""};
    const rpc_method *m;
    size_t n = h_methods(&m);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rpc_server_opts o = {.listen = bad[i]};
        rpc_server *s = NULL;
        int rc = rpc_server_create(&o, m, n, &s);
        int port = rc == 0 ? rpc_server_port(s) : -1;
        rpc_server_destroy(rc == 0 ? s : NULL);
        cr_expect(rc == FERRY_EINVAL, "listen \"%s\": %s (listening on port %d)", bad[i],
                  rc ? ferry_err_name(rc) : "success", port);
    }
}

H_TEST(rpc_server, destroyed_server_releases_its_port)
{
    h_server_start(0);
    int port = H.port;
    rpc_server_destroy(H.server);
    H.server = NULL;
    int fd;
    int got = tcom_listen(port, &fd);
    cr_assert(got == port, "port %d still taken after rpc_server_destroy", port);
    close(fd);
}

H_TEST(rpc_server, destroy_of_null_is_a_noop)
{
    rpc_server_destroy(NULL);
}

H_TEST(rpc_server, server_without_methods_answers_enotsup)
{
    rpc_server_opts o = {.listen = "127.0.0.1:0"};
    cr_assert(rpc_server_create(&o, NULL, 0, &H.server) == 0);
    H.port = rpc_server_port(H.server);
    snprintf(H.target, sizeof H.target, "127.0.0.1:%d", H.port);
    h_channel_open(NULL);
    rpc_call call;
    int rc =
        h_call(H.ch, &call, H_ECHO, "", "", NULL, 0, RPC_CODEC_RAW, H_CALL_TIMEOUT_MS);
    cr_assert(rc == FERRY_ENOTSUP, "%s", ferry_err_name(rc));
    rpc_call_fini(&call);
}

H_TEST(rpc_server, ipv6_loopback_server_answers)
{
    const rpc_method *m;
    size_t n = h_methods(&m);
    /* Skipped only where the kernel itself cannot bind [::1]; where it can,
     * the server must. */
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    if (fd < 0 || bind(fd, (struct sockaddr *)&a6, sizeof a6) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        cr_skip_test("no IPv6 loopback here: binding [::1]:0: %s", strerror(e));
    }
    close(fd);
    rpc_server_opts o = {.listen = "[::1]:0"};
    int rc = rpc_server_create(&o, m, n, &H.server);
    cr_assert(rc == 0, "the kernel binds [::1], the server does not: %s",
              ferry_err_name(rc));
    H.port = rpc_server_port(H.server);
    snprintf(H.target, sizeof H.target, "[::1]:%d", H.port);
    h_channel_open(NULL);
    rpc_call call;
    rc = h_call(H.ch, &call, H_ECHO, "6", "six", "v6", 2, RPC_CODEC_RAW,
                H_CALL_TIMEOUT_MS);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), call.errmsg);
    rpc_call_fini(&call);
}

/* ---- *out is set before the first call is served ------------------------- */

/* What rpc_server_create() fills in, read by the handler: a worker's Stats
 * handler reads its server the same way, and `ferry start` asks for Stats
 * as soon as a worker's port answers. */
static rpc_server *created;
static atomic_int early, peeked;

static void peek_handler(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)req;
    (void)data;
    if (!__atomic_load_n(&created, __ATOMIC_ACQUIRE))
        atomic_fetch_add(&early, 1);
    atomic_fetch_add(&peeked, 1);
    Ferry__CallRequest head = FERRY__CALL_REQUEST__INIT;
    proto_raw reply_head = proto_raw_pack(&head.base);
    rpc_msg_out reply = {.head_bytes = reply_head.data, .head_len = reply_head.len};
    rpc_srv_reply(sc, &reply);
}

typedef struct making {
    rpc_server_opts o;
    rpc_method m;
    int rc;
    atomic_bool done;
} making;

static void *make_server(void *arg)
{
    making *mk = arg;
    mk->rc = rpc_server_create(&mk->o, &mk->m, 1, &created);
    atomic_store(&mk->done, true);
    return NULL;
}

#define RACE_ROUNDS   20
#define RACE_CHANNELS 48

H_TEST(rpc_server, a_handler_sees_the_server_that_create_hands_back)
{
    for (int round = 0; round < RACE_ROUNDS; round++) {
        char addr[64];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", h_dead_port());
        making mk = {.o = {.listen = addr},
                     .m = {"/test.Race/Peek", peek_handler, NULL, RPC_METHOD_INLINE, 0}};
        atomic_init(&mk.done, false);
        __atomic_store_n(&created, NULL, __ATOMIC_RELEASE);
        pthread_t t;
        cr_assert(pthread_create(&t, NULL, make_server, &mk) == 0);
        /* A new channel a millisecond while the server comes up: a fresh
         * channel connects at once, where a refused one would back off. */
        rpc_channel *ch[RACE_CHANNELS];
        rpc_call call[RACE_CHANNELS];
        h_done d[RACE_CHANNELS];
        int n = 0;
        while (n < RACE_CHANNELS && (!atomic_load(&mk.done) || n < 4)) {
            cr_assert(rpc_channel_create(H.client, addr, NULL, &ch[n]) == 0);
            memset(&call[n], 0, sizeof call[n]);
            memset(&d[n], 0, sizeof d[n]);
            call[n].data = &d[n];
            Ferry__CallRequest req;
            proto_raw req_head;
            rpc_msg_out out;
            h_msg_out(&out, &req, &req_head, "", "", NULL, 0, RPC_CODEC_RAW);
            cr_assert(rpc_call_start(ch[n], &call[n], "/test.Race/Peek", &out, 5000,
                                     h_done_cb) == 0);
            n++;
            h_run_for(1);
        }
        pthread_join(t, NULL);
        cr_assert(mk.rc == 0, "rpc_server_create: %s", ferry_err_name(mk.rc));
        for (int i = 0; i < n; i++) {
            cr_assert(h_run_until_flag(&d[i].done, H_WAIT_MS));
            rpc_call_fini(&call[i]);
            rpc_channel_destroy(ch[i]);
        }
        rpc_server_destroy(created);
    }
    cr_assert(atomic_load(&early) == 0,
              "%d of %d calls were served before rpc_server_create() set its result",
              atomic_load(&early), atomic_load(&peeked));
    cr_assert(atomic_load(&peeked) > 0, "no call reached a server as it came up");
}
