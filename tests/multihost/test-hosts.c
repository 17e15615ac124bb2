/* The hosts themselves: they reach each other over the bridge, this
 * machine's own network namespace and /run/netns never see them, they are
 * gone when the process that made them is killed, and a user who is not
 * root is told why the suite skips. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "mhcluster.h"
#include "tchild.h"
#include "tcommon.h"

#define PROBE_PORT 7200

static mh_net net;

static void hosts_setup(void)
{
    mhc_skip_unless_able();
}

static void hosts_teardown(void)
{
    mh_net_down(&net);
}

TestSuite(multihost_hosts, .init = hosts_setup, .fini = hosts_teardown, .timeout = 120);

static void up(int hosts)
{
    char err[1024];
    int rc = mh_net_up(&net, hosts, err, sizeof err);
    if (rc == -EPERM)
        cr_skip_test("no namespaces here even for root: %s", err);
    cr_assert(rc == 0, "the hosts' namespaces: %s", err);
}

/* Whether an interface of this (the machine's) namespace has an address
 * in the hosts' subnet. */
static bool machine_has_host_address(char *which, size_t len)
{
    struct ifaddrs *all;
    cr_assert(getifaddrs(&all) == 0, "getifaddrs: %s", strerror(errno));
    bool found = false;
    for (struct ifaddrs *a = all; a && !found; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET)
            continue;
        char text[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &((struct sockaddr_in *)a->ifa_addr)->sin_addr, text,
                  sizeof text);
        found = strncmp(text, MH_SUBNET ".", strlen(MH_SUBNET) + 1) == 0;
        if (found)
            snprintf(which, len, "%s on %s", text, a->ifa_name);
    }
    freeifaddrs(all);
    return found;
}

/* Whether this machine's /run/netns names anything with `prefix`. */
static bool machine_names(const char *prefix)
{
    DIR *d = opendir("/run/netns");
    bool found = false;
    for (struct dirent *e; d && !found && (e = readdir(d));)
        found = strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return found;
}

/* In a child that joins host `host`'s network namespace: listens on its
 * address (listen: true) and answers one connection with "up", or connects
 * to host `peer`'s listener and exits 0 when it reads "up". */
static pid_t on_host(int host, bool listen_, int peer, int ready_fd)
{
    int ns = mh_netns_fd(&net, host);
    cr_assert(ns >= 0, "host %d's namespace: %s", host, strerror(-ns));
    pid_t pid = tcom_fork();
    cr_assert(pid >= 0);
    if (pid > 0) {
        close(ns);
        return pid;
    }
    if (setns(ns, CLONE_NEWNET) != 0)
        _exit(10);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(PROBE_PORT)};
    inet_pton(AF_INET, net.addr[listen_ ? host : peer], &a.sin_addr);
    if (listen_) {
        if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 1) != 0)
            _exit(11);
        if (write(ready_fd, "r", 1) != 1)
            _exit(12);
        int c = accept(s, NULL, NULL);
        _exit(c >= 0 && write(c, "up", 2) == 2 ? 0 : 13);
    }
    char got[3] = "";
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0)
        _exit(14);
    _exit(read(s, got, 2) == 2 && strcmp(got, "up") == 0 ? 0 : 15);
}

static int exit_of(pid_t *pid)
{
    int status = 0;
    cr_assert(waitpid(*pid, &status, 0) == *pid);
    *pid = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Test(multihost_hosts, the_hosts_reach_each_other_and_the_machine_gets_nothing)
{
    up(3);
    int p[2];
    cr_assert(pipe(p) == 0);
    pid_t server = on_host(0, true, 0, p[1]);
    char c;
    cr_assert(read(p[0], &c, 1) == 1, "host 0 did not listen");
    close(p[0]), close(p[1]);
    pid_t client = on_host(2, false, 0, -1);
    cr_assert_eq(exit_of(&client), 0, "host 2 did not get host 0's answer");
    cr_assert_eq(exit_of(&server), 0, "host 0 did not answer host 2");

    char which[128];
    cr_assert(!machine_has_host_address(which, sizeof which),
              "the machine's own namespace has a host's address: %s", which);
    cr_assert(!machine_names(net.prefix), "/run/netns names the hosts (%s...)",
              net.prefix);
    /* And each host has exactly its own address. */
    char err[512];
    for (int h = 0; h < 3; h++)
        cr_assert(mh_sh(&net, err, sizeof err,
                        "%s -n %s -4 -o addr show dev eth0 | grep -q ' %s/24 ' ||"
                        " { %s -n %s -4 -o addr >&2; exit 1; }",
                        net.ip, net.ns[h], net.addr[h], net.ip, net.ns[h]) == 0,
                  "host %d: %s", h, err);
    tcom_assert_no_leaks();
}

Test(multihost_hosts, killing_the_process_that_made_them_removes_every_host)
{
    int p[2];
    cr_assert(pipe(p) == 0);
    pid_t maker = tcom_fork();
    cr_assert(maker >= 0);
    if (maker == 0) {
        /* Hosts, and a process on one, then wait to be killed. */
        close(p[0]);
        char err[512];
        unsigned long ino[2] = {0, 0};
        if (mh_net_up(&net, 2, err, sizeof err) == 0) {
            const char *sleep_[] = {"/bin/sleep", "600", NULL};
            if (mh_spawn(&net, 0, sleep_, NULL, NULL, NULL) > 0)
                ino[0] = mh_netns_inode(&net, 0), ino[1] = mh_netns_inode(&net, 1);
        }
        if (write(p[1], ino, sizeof ino) != sizeof ino)
            _exit(1);
        pause();
        _exit(0);
    }
    close(p[1]);
    unsigned long ino[2] = {0, 0};
    cr_assert(read(p[0], ino, sizeof ino) == sizeof ino);
    close(p[0]);
    cr_assert(ino[0] && ino[1], "the child could not make its hosts");
    /* The sleeper's time on host 0 holds host 0. */
    cr_assert(mh_netns_held(ino[0]));
    kill(maker, SIGKILL);
    waitpid(maker, NULL, 0);
    for (int h = 0; h < 2; h++) {
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        bool held = true;
        do {
            held = mh_netns_held(ino[h]);
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (held)
                usleep(20000);
        } while (held && t.tv_sec - t0.tv_sec < 10);
        cr_assert(!held,
                  "host %d's namespace (net:[%lu]) is still held 10 s after its maker "
                  "was killed",
                  h, ino[h]);
    }
}

Test(multihost_hosts, a_user_other_than_root_is_told_why_the_hosts_are_skipped)
{
    pid_t pid = tcom_fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(10);
        char why[256];
        mh_lack l = mh_unavailable(why, sizeof why);
        if (l != MH_NOT_ROOT || !strstr(why, "not root"))
            _exit(11);
        /* Tried anyway, the keeper's unshare is refused, and said so. */
        int rc = mh_net_up(&net, 1, why, sizeof why);
        _exit(rc == -EPERM && strstr(why, "unshare") ? 0 : 12);
    }
    int code = exit_of(&pid);
    cr_assert_neq(code, 11, "as nobody: not MH_NOT_ROOT with its reason");
    cr_assert_neq(code, 12, "as nobody: mh_net_up did not fail with EPERM from unshare");
    cr_assert_eq(code, 0);
}
