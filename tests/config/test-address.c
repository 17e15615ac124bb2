/* conf_split_address, conf_add_worker and conf_is_loopback. */
#include <string.h>

#include "tconf.h"

static void expect_split(const char *address, const char *host, int port)
{
    char h[256] = "unset";
    int p = -1;
    cr_expect_eq(conf_split_address(address, h, sizeof h, &p), 0, "%s", address);
    cr_expect_str_eq(h, host, "%s", address);
    cr_expect_eq(p, port, "%s", address);
}

T_TEST(conf_address, host_port_and_bracketed_ipv6_split_into_host_and_port)
{
    expect_split("127.0.0.1:7100", "127.0.0.1", 7100);
    expect_split("localhost:1", "localhost", 1);
    expect_split("gpu-host-2.example.org:65535", "gpu-host-2.example.org", 65535);
    expect_split("[::1]:7100", "::1", 7100);
    expect_split("[fe80::1%eth0]:80", "fe80::1%eth0", 80);
    expect_split("[::ffff:10.0.0.1]:5000", "::ffff:10.0.0.1", 5000);
    expect_split("0.0.0.0:0", "0.0.0.0", 0); /* port 0: listen on a free one */
}

T_TEST(conf_address, malformed_addresses_are_einval)
{
    static const char *const bad[] = {
        "",          "10.0.0.1",     ":7100",    "host:",    "host:65536",  "host:-1",
        "host:12a",  "host: 80",     "::1:7100", "::1",      "[::1]7100",   "[::1]",
        "[::1:7100", "[nothost]:1",  "[]:1",     "a b:1",    "a..b:1",      ".a:1",
        "host:1:2",  "host:0080000", "ho/st:1",  "[::1%]:1", "[1.2.3.4]:1", "host:+80",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char h[256];
        int p = -7;
        cr_expect_eq(conf_split_address(bad[i], h, sizeof h, &p), FERRY_EINVAL, "'%s'",
                     bad[i]);
        cr_expect_eq(p, -7, "'%s' left port alone", bad[i]);
    }
    char h[256];
    int p;
    cr_expect_eq(conf_split_address(NULL, h, sizeof h, &p), FERRY_EINVAL);
}

T_TEST(conf_address, a_host_longer_than_the_buffer_is_einval)
{
    char h[10];
    int p;
    cr_expect_eq(conf_split_address("123456789:1", h, sizeof h, &p), 0);
    cr_expect_str_eq(h, "123456789");
    cr_expect_eq(conf_split_address("1234567890:1", h, sizeof h, &p), FERRY_EINVAL);
}

T_TEST(conf_address, add_worker_keeps_the_address_as_written_and_marks_local_hosts)
{
    conf_cluster c;
    conf_defaults(&c);
    cr_assert_eq(conf_add_worker(&c, "[::1]:7100", NULL, 0), 0);
    cr_assert_eq(conf_add_worker(&c, "10.1.2.3:7100", NULL, 0), 0);
    cr_assert_eq(conf_add_worker(&c, "localhost:7101", NULL, 0), 0);
    cr_assert_eq(c.n_workers, 3);
    cr_expect_str_eq(c.workers[0].address, "[::1]:7100");
    cr_expect_str_eq(c.workers[0].host, "::1");
    cr_expect(c.workers[0].local);
    cr_expect_str_eq(c.workers[1].host, "10.1.2.3");
    cr_expect_not(c.workers[1].local);
    cr_expect(c.workers[2].local);
    cr_expect_eq(c.workers[2].port, 7101);
    conf_fini(&c);
}

T_TEST(conf_address, add_worker_refuses_port_zero_and_says_why)
{
    conf_cluster c;
    char err[CONF_ERR_LEN] = "";
    conf_defaults(&c);
    cr_expect_eq(conf_add_worker(&c, "127.0.0.1:0", err, sizeof err), FERRY_EINVAL);
    cr_expect_str_eq(err,
                     "expected host:port with a port from 1 to 65535, got '127.0.0.1:0'");
    cr_expect_eq(conf_add_worker(&c, "10.0.0.1", err, sizeof err), FERRY_EINVAL);
    cr_expect_str_eq(err, "expected host:port, got '10.0.0.1'");
    cr_expect_eq(conf_add_worker(&c, "[x]:1", err, sizeof err), FERRY_EINVAL);
    cr_expect_str_eq(err, "expected an IPv6 address inside [], got '[x]:1'");
    cr_expect_eq(c.n_workers, 0);
    cr_expect_null(c.workers);
    conf_fini(&c);
}

T_TEST(conf_address, loopback_hosts_are_recognised)
{
    static const char *const yes[] = {
        "127.0.0.1",  "127.255.0.3",     "::1",
        "[::1]",      "localhost",       "LocalHost",
        "localhost.", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1",
    };
    static const char *const no[] = {
        "10.0.0.1",        "0.0.0.0", "::",  "128.0.0.1", "126.255.255.255",
        "gpu-host",        "",        "::2", "[::2]",     "localhost.example",
        "::ffff:10.0.0.1", "127",
    };
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        cr_expect(conf_is_loopback(yes[i]), "'%s' is loopback", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        cr_expect_not(conf_is_loopback(no[i]), "'%s' is not loopback", no[i]);
    cr_expect_not(conf_is_loopback(NULL));
}
