/* Cluster files take host lists in Slurm's syntax for their workers: one
 * worker a host, in Slurm's order, and a mistake named by file and line. */
#include <stdio.h>
#include <string.h>

#include "tlaunch.h"

static int load(const char *text, conf_cluster *c, char *err, size_t len)
{
    conf_defaults(c);
    return conf_load(c, t_write("cluster.ini", text, 0600), err, len);
}

T_TEST(cluster_file, a_host_list_is_one_worker_a_host)
{
    conf_cluster c;
    char err[CONF_ERR_LEN] = "";
    cr_assert_eq(load("[workers]\n"
                      "worker = 127.0.0.1:7100\n"
                      "worker = n[1-3,07-08]:7100\n"
                      "attach = rack[1-2]-n[01-02]:7200 ; run by hand\n"
                      "worker = a, b:7300\n"
                      "worker = [::1]:7400\n",
                      &c, err, sizeof err),
                 0, "%s", err);
    const char *want[] = {"127.0.0.1:7100", "n1:7100",        "n2:7100",
                          "n3:7100",        "n07:7100",       "n08:7100",
                          "rack1-n01:7200", "rack1-n02:7200", "rack2-n01:7200",
                          "rack2-n02:7200", "a:7300",         "b:7300",
                          "[::1]:7400"};
    cr_assert_eq(c.n_workers, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < c.n_workers; i++)
        cr_expect_str_eq(c.workers[i].address, want[i], "worker %zu", i);
    cr_expect_str_eq(c.workers[3].host, "n3");
    cr_expect_eq(c.workers[3].port, 7100);
    cr_expect_eq(c.workers[3].line, 3);
    cr_expect(!c.workers[5].attach && c.workers[6].attach && c.workers[9].attach);
    cr_expect_eq(c.workers[9].line, 4);
    cr_expect_str_eq(c.workers[12].host, "::1");
    conf_fini(&c);
}

T_TEST(cluster_file, what_is_saved_loads_again_as_the_same_workers)
{
    conf_cluster c, again;
    char err[CONF_ERR_LEN] = "";
    cr_assert_eq(load("[workers]\nworker = 127.0.1.[1-4]:20006\n", &c, err, sizeof err),
                 0, "%s", err);
    char path[300];
    snprintf(path, sizeof path, "%s/saved.ini", T_DIR);
    cr_assert_eq(conf_save(&c, path), 0);
    conf_defaults(&again);
    cr_assert_eq(conf_load(&again, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(again.n_workers, 4);
    cr_expect_str_eq(again.workers[3].address, "127.0.1.4:20006");
    cr_expect(again.workers[0].local, "127.0.1.x is loopback");
    conf_fini(&c);
    conf_fini(&again);
}

typedef struct bad {
    const char *text;
    const char *message; /* after "PATH:" */
} bad;

static const bad BAD[] = {
    {"[workers]\nworker = n1:7100\nworker = n[1-3:7100\n",
     ":3: worker: this '[' is not closed at character 2 of host list 'n[1-3'"},
    {"[workers]\nworker = n[3-1]:7100\n",
     ":2: worker: the range '3-1' runs backwards at character 3 of host list 'n[3-1]'"},
    {"; big\n[workers]\n\nworker = n[1-70000]:7100\n",
     ":4: worker: the range '1-70000' has more than 65536 hosts at character 3"},
    {"[workers]\nattach = n1],n2:7100\n",
     ":2: attach: a ']' that closes no '[' at character 3 of host list 'n1],n2'"},
    {"[workers]\nworker = n1,,n2:7100\n",
     ":2: worker: an empty host name at character 4"},
    {"[workers]\nworker = n[1-2]-ib:7100\n", ":2: worker: text after the last ']'"},
    {"[workers]\nworker = n[1-2]:99999\n",
     ":2: worker: expected host:port with a port from 1 to 65535, got 'n1:99999'"},
    {"[workers]\nworker = n[1-2]\n", ":2: worker: expected host:port, got 'n[1-2]'"},
    {"[workers]\nworker = n2:7100\nworker = n[1-3]:7100\n",
     ":3: duplicate worker 'n2:7100' of 'n[1-3]:7100' (already listed on line 2 as "
     "'n2:7100')"},
    {"[workers]\nworker = n[1,1]:7100\n",
     ":2: duplicate worker 'n1:7100' of 'n[1,1]:7100' (already listed on line 2"},
    {"[workers]\nworker = n[1-300]:7100\n",
     ":2: worker: more than 256 workers: a cluster has at most 256"},
};

T_TEST(cluster_file, a_bad_host_list_is_named_by_its_line)
{
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        conf_cluster c;
        char err[CONF_ERR_LEN] = "";
        cr_expect_eq(load(BAD[i].text, &c, err, sizeof err), FERRY_EINVAL, "taken: %s",
                     BAD[i].text);
        cr_expect(strstr(err, BAD[i].message) != NULL, "got '%s', expected '%s'", err,
                  BAD[i].message);
        cr_expect(strstr(err, "/cluster.ini:") != NULL, "%s", err);
        cr_expect_eq(c.n_workers, 0, "a refused file changes nothing");
        conf_fini(&c);
    }
}

T_TEST(cluster_file, blanks_without_a_comma_are_a_mistyped_address_not_a_list)
{
    conf_cluster c;
    char err[CONF_ERR_LEN] = "";
    cr_expect_eq(load("[workers]\nworker = a b:7100\n", &c, err, sizeof err),
                 FERRY_EINVAL);
    cr_expect(strstr(err,
                     ":2: worker: expected host:port with a host name or address, got "
                     "'a b:7100'"),
              "%s", err);
    conf_fini(&c);
}
