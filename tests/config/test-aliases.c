/* conf_check_aliases and the cap on workers: two lines that reach one
 * worker are refused naming both, and no cluster lists more than
 * CONF_MAX_WORKERS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tconf.h"

static int load(const char *text, conf_cluster *c, char *err, size_t len)
{
    const char *path = t_write("cluster.ini", text, 0644);
    conf_defaults(c);
    return conf_load(c, path, err, len);
}

T_TEST(conf_aliases, localhost_and_127_0_0_1_on_one_port_are_one_worker)
{
    conf_cluster c;
    char err[CONF_ERR_LEN] = "", path[512], want[CONF_ERR_LEN + 600];
    cr_assert_eq(load("[workers]\nworker = 127.0.0.1:7100\n; a comment\n"
                      "worker = localhost:7100\n",
                      &c, err, sizeof err),
                 0, "%s", err);
    t_path(path, sizeof path, "cluster.ini");
    cr_expect_eq(conf_check_aliases(&c, path, err, sizeof err), FERRY_EINVAL);
    snprintf(want, sizeof want,
             "%s:4: worker 'localhost:7100' is worker '127.0.0.1:7100' of line 2: both "
             "reach 127.0.0.1 port 7100",
             path);
    cr_expect_str_eq(err, want);
    conf_fini(&c);
}

T_TEST(conf_aliases, an_ipv4_mapped_address_is_its_ipv4_worker)
{
    conf_cluster c;
    char err[CONF_ERR_LEN] = "";
    cr_assert_eq(load("[workers]\nworker = [::ffff:127.0.0.1]:7100\n"
                      "attach = 127.0.0.1:7100\n",
                      &c, err, sizeof err),
                 0, "%s", err);
    cr_expect_eq(conf_check_aliases(&c, "c.ini", err, sizeof err), FERRY_EINVAL);
    cr_expect(strstr(err, "c.ini:3:") && strstr(err, "of line 2"), "%s", err);
    conf_fini(&c);
}

T_TEST(conf_aliases, other_ports_and_other_hosts_are_other_workers)
{
    conf_cluster c;
    char err[CONF_ERR_LEN] = "";
    cr_assert_eq(load("[workers]\nworker = 127.0.0.1:7100\nworker = localhost:7101\n"
                      "worker = 127.0.0.2:7100\nworker = [::1]:7102\n"
                      "worker = no-such-host.invalid:7100\n",
                      &c, err, sizeof err),
                 0, "%s", err);
    cr_expect_eq(conf_check_aliases(&c, "c.ini", err, sizeof err), 0, "%s", err);
    conf_fini(&c);
}

T_TEST(conf_aliases, workers_from_no_file_are_named_by_rank)
{
    conf_cluster c;
    char err[CONF_ERR_LEN] = "";
    conf_defaults(&c);
    cr_assert_eq(conf_add_worker(&c, "127.0.0.1:7300", NULL, 0), 0);
    cr_assert_eq(conf_add_worker(&c, "localhost:7300", NULL, 0), 0);
    cr_expect_eq(conf_check_aliases(&c, NULL, err, sizeof err), FERRY_EINVAL);
    cr_expect_str_eq(err, "worker 1: worker 'localhost:7300' is worker '127.0.0.1:7300' "
                          "(worker 0): both reach 127.0.0.1 port 7300");
    conf_fini(&c);
}

T_TEST(conf_aliases, a_cluster_file_lists_at_most_the_cap)
{
    size_t cap = 64 + (size_t)CONF_MAX_WORKERS * 32;
    char *text = malloc(cap);
    cr_assert(text);
    size_t used = (size_t)snprintf(text, cap, "[workers]\n");
    for (int i = 0; i <= CONF_MAX_WORKERS; i++)
        used += (size_t)snprintf(text + used, cap - used, "worker = 127.0.0.1:%d\n",
                                 10000 + i);
    conf_cluster c;
    char err[CONF_ERR_LEN] = "", want[64];
    cr_expect_eq(load(text, &c, err, sizeof err), FERRY_EINVAL);
    free(text);
    snprintf(want, sizeof want, ":%d: worker: more than %d workers", CONF_MAX_WORKERS + 2,
             CONF_MAX_WORKERS);
    cr_expect(strstr(err, want), "%s", err);
    cr_expect_eq(c.n_workers, 0, "a failed load changes nothing");
    conf_fini(&c);
}
