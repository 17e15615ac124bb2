/* tests/rpc — creating and destroying servers: ports and addresses. */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

TestSuite(rpc_server, .init = h_setup_bare, .fini = h_teardown, .timeout = 60);

static int listen_socket(int port, int *fd_out)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    if (rc == 0)
        rc = listen(fd, 4);
    if (rc != 0) {
        close(fd);
        return -1;
    }
    socklen_t alen = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &alen);
    *fd_out = fd;
    return ntohs(a.sin_port);
}

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
    int port = listen_socket(0, &fd);
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
    int got = listen_socket(port, &fd);
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
    rpc_server_opts o = {.listen = "[::1]:0"};
    int rc = rpc_server_create(&o, m, n, &H.server);
    if (rc != 0)
        cr_skip_test("no IPv6 loopback here: %s", ferry_err_name(rc));
    H.port = rpc_server_port(H.server);
    snprintf(H.target, sizeof H.target, "[::1]:%d", H.port);
    h_channel_open(NULL);
    rpc_call call;
    rc = h_call(H.ch, &call, H_ECHO, "6", "six", "v6", 2, RPC_CODEC_RAW,
                H_CALL_TIMEOUT_MS);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), call.errmsg);
    rpc_call_fini(&call);
}
