/* The slow link (mh_netem) on its own, two hosts: what leaves the slow
 * host waits 5 ms and loses about 1%, what comes to it neither, whether the
 * kernel's netem makes the link or lossy-link emulates it in user space;
 * taken off, the host's plain link is back. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "mhcluster.h"
#include "tchild.h"
#include "tcommon.h"

#define SLOW 1
#define FAST 0
#define PORT 7300
/* Datagrams counted each way: 1% of them is 50 (sd 7). */
#define COUNT 5000

static mh_net net;

static void netem_setup(void)
{
    mhc_skip_unless_able();
    char err[1024];
    int rc = mh_net_up(&net, 2, err, sizeof err);
    if (rc == -EPERM)
        cr_skip_test("no namespaces here even for root: %s", err);
    cr_assert(rc == 0, "the hosts' namespaces: %s", err);
}

static void netem_teardown(void)
{
    mh_net_down(&net);
}

TestSuite(multihost_netem, .init = netem_setup, .fini = netem_teardown, .timeout = 120);

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* A UDP socket on host `host` (this process moves there), bound to `port`
 * of any address (0: none), with a 2 s receive timeout. */
static int udp_on(int host, int port)
{
    int ns = mh_netns_fd(&net, host);
    if (ns < 0 || setns(ns, CLONE_NEWNET) != 0)
        return -1;
    close(ns);
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    int big = 1 << 22;
    struct timeval tv = {.tv_sec = 2};
    setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (s < 0 || (port && bind(s, (struct sockaddr *)&a, sizeof a) != 0))
        return -1;
    return s;
}

static struct sockaddr_in addr_of(int host)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(PORT)};
    inet_pton(AF_INET, net.addr[host], &a.sin_addr);
    return a;
}

/* What a child on a host does: writes a byte to `ready` once it listens,
 * and returns its figure. */
typedef double (*host_fn)(int host, int ready);

/* Runs fn on host `host` in a child, whose figure comes through
 * *result_fd; with wait_ready, returns once the child listens. */
static pid_t in_host(int host, host_fn fn, int *result_fd, bool wait_ready)
{
    int res[2], rdy[2];
    cr_assert(pipe(res) == 0 && pipe(rdy) == 0);
    pid_t pid = tcom_fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(res[0]), close(rdy[0]);
        double v = fn(host, rdy[1]);
        _exit(write(res[1], &v, sizeof v) == sizeof v ? 0 : 1);
    }
    close(res[1]), close(rdy[1]);
    char b;
    if (wait_ready)
        cr_assert(read(rdy[0], &b, 1) == 1, "host %d's side did not start", host);
    close(rdy[0]);
    *result_fd = res[0];
    return pid;
}

static double result(pid_t pid, int fd)
{
    double v = -1;
    cr_assert(read(fd, &v, sizeof v) == sizeof v, "a host's side died");
    close(fd);
    waitpid(pid, NULL, 0);
    return v;
}

/* Echoes datagrams until killed. */
static double echo(int host, int ready)
{
    int s = udp_on(host, PORT);
    if (s < 0 || write(ready, "r", 1) != 1)
        return -1;
    char buf[64];
    struct sockaddr_in from;
    for (;;) {
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
        if (n > 0)
            sendto(s, buf, (size_t)n, 0, (struct sockaddr *)&from, fl);
    }
}

/* The least round trip of 20 to the other host's echo, in ms; -1 when one
 * is never answered after three tries. */
static double least_rtt(int host, int ready)
{
    (void)ready;
    int s = udp_on(host, 0);
    struct sockaddr_in to = addr_of(1 - host);
    double least = 1e9;
    for (int i = 0, tries = 0; i < 20 && tries < 60; tries++) {
        double t0 = now_ms();
        char b[8] = "ping";
        sendto(s, b, sizeof b, 0, (struct sockaddr *)&to, sizeof to);
        if (recv(s, b, sizeof b, 0) != sizeof b)
            continue; /* lost (1%) or ARP still resolving */
        double rtt = now_ms() - t0;
        least = rtt < least ? rtt : least;
        i++;
    }
    return least < 1e9 ? least : -1;
}

/* Counts datagrams that arrive until 1 s passes without one. */
static double count_in(int host, int ready)
{
    int s = udp_on(host, PORT);
    struct timeval tv = {.tv_sec = 1};
    if (s < 0 || setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        write(ready, "r", 1) != 1)
        return -1;
    char b[64];
    int n = 0;
    while (recv(s, b, sizeof b, 0) > 0)
        n++;
    return n;
}

/* Sends COUNT datagrams to the other host, 5 a millisecond: 25 wait out
 * the 5 ms at a time, and a link emulated in user space that waits
 * 100 ms for a core on a loaded machine then has 500 to catch up on, well
 * under what the kernel's queues on the way hold (1000). */
static double send_out(int host, int ready)
{
    (void)ready;
    int s = udp_on(host, 0);
    struct sockaddr_in to = addr_of(1 - host);
    char b[32] = "count";
    for (int i = 0; i < COUNT; i++) {
        if (sendto(s, b, sizeof b, 0, (struct sockaddr *)&to, sizeof to) != sizeof b)
            return -1;
        if (i % 5 == 4)
            usleep(1000);
    }
    return 0;
}

static double rtt_from(int host)
{
    int efd, rfd;
    pid_t e = in_host(1 - host, echo, &efd, true);
    pid_t r = in_host(host, least_rtt, &rfd, false);
    double ms = result(r, rfd);
    kill(e, SIGKILL);
    waitpid(e, NULL, 0);
    close(efd);
    return ms;
}

/* Datagrams of COUNT that `from` gets through to the other host. */
static int delivered(int from)
{
    int cfd, sfd;
    pid_t c = in_host(1 - from, count_in, &cfd, true);
    pid_t s = in_host(from, send_out, &sfd, false);
    cr_assert(result(s, sfd) == 0, "host %d could not send", from);
    return (int)result(c, cfd);
}

/* The slow host has its veth pair, nothing on it, and a fast round trip. */
static void expect_plain_link(void)
{
    char err[512];
    cr_assert_null(net.netem[SLOW]);
    cr_assert_eq(net.link_pid[SLOW], 0);
    cr_assert(mh_sh(&net, err, sizeof err,
                    "%s -n %s -d link show " MH_HOST_IF " | grep -q veth", net.ip,
                    net.ns[SLOW]) == 0,
              "host %d's link is not a veth pair: %s", SLOW, err);
    double ms = rtt_from(FAST);
    cr_assert(ms >= 0 && ms < 5.0, "the plain link's least round trip: %.2f ms", ms);
}

Test(multihost_netem, slow_link_delays_and_drops_only_what_leaves_its_host)
{
    char err[1024];
    int rc = mh_netem(&net, SLOW, "delay 5ms loss 1%", err, sizeof err);
    if (rc == -ENOTSUP) {
        fprintf(stderr, "skipped: %s\n", err);
        cr_skip_test("%s", err);
    }
    cr_assert(rc == 0, "%s", err);
    cr_assert(net.netem[SLOW] != NULL);
    fprintf(stderr, "%s on host %d's link\n", net.netem[SLOW], SLOW);

    /* Each echo's answer leaves the slow host: 5 ms on every round trip. */
    double ms = rtt_from(FAST);
    cr_assert(ms >= 5.0, "a round trip through the slow link took %.2f ms", ms);

    int out = delivered(SLOW), in = delivered(FAST);
    cr_log_info("%s: least round trip %.2f ms; %d of %d out, %d of %d in",
                net.netem[SLOW], ms, out, COUNT, in, COUNT);
    int lost_out = COUNT - out, lost_in = COUNT - in;
    cr_assert(lost_out >= COUNT / 250 && lost_out <= COUNT / 50,
              "%d of %d datagrams leaving the slow host were lost, not about 1%%",
              lost_out, COUNT);
    cr_assert(lost_in <= COUNT / 500,
              "%d of %d datagrams coming to the slow host were lost", lost_in, COUNT);

    /* Off again: the host's veth pair (or qdisc-less link) is back. */
    cr_assert(mh_netem(&net, SLOW, NULL, err, sizeof err) == 0, "%s", err);
    expect_plain_link();
    tcom_assert_no_leaks();
}

/* Where the kernel has no netem: without lossy-link, or with one that
 * never says it is ready, the slow link is refused with the reason, and
 * the host keeps its plain link. */
Test(multihost_netem, an_emulation_that_cannot_start_leaves_the_plain_link)
{
    char err[1024];
    net.lossy[0] = '\0';
    int rc = mh_netem(&net, SLOW, "delay 5ms loss 1%", err, sizeof err);
    if (rc == 0 && strcmp(net.netem[SLOW], MH_NETEM_KERNEL) == 0)
        cr_skip_test("this kernel has netem: nothing is emulated here");
    cr_assert_eq(rc, -ENOTSUP, "%d: %s", rc, err);
    cr_assert(strstr(err, "lossy-link, which emulates it, is not built"), "%s", err);

    snprintf(net.lossy, sizeof net.lossy, "/bin/true");
    rc = mh_netem(&net, SLOW, "delay 5ms loss 1%", err, sizeof err);
    cr_assert_eq(rc, -1, "%d: %s", rc, err);
    cr_assert(strstr(err, "its emulation in user space did not start"), "%s", err);
    expect_plain_link();
    tcom_assert_no_leaks();
}

/* How many processes run the program at `path`. */
static int running(const char *path)
{
    DIR *d = opendir("/proc");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char link[300], exe[600];
        snprintf(link, sizeof link, "/proc/%.32s/exe", e->d_name);
        ssize_t len = readlink(link, exe, sizeof exe - 1);
        if (len <= 0)
            continue;
        exe[len] = '\0';
        n += strcmp(exe, path) == 0;
    }
    if (d)
        closedir(d);
    return n;
}

/* Hosts of its own and a slow link on `host`'s; says it is ready, and
 * waits to be killed. */
static double make_slow_link(int host, int ready)
{
    static mh_net own;
    char e[512];
    if (mh_net_up(&own, 2, e, sizeof e) != 0 ||
        mh_netem(&own, host, "delay 5ms loss 1%", e, sizeof e) != 0 ||
        write(ready, "r", 1) != 1)
        return -1;
    pause();
    return 0;
}

/* Killing the process that made the slow link ends it, as it ends the
 * hosts: lossy-link runs in the hosts' PID namespace. */
Test(multihost_netem, killing_the_process_that_made_the_slow_link_ends_it)
{
    char err[1024];
    cr_assert(mh_netem(&net, SLOW, "delay 5ms loss 1%", err, sizeof err) == 0, "%s", err);
    if (strcmp(net.netem[SLOW], MH_NETEM_KERNEL) == 0)
        cr_skip_test("this kernel has netem: no process makes the slow link");
    cr_assert(mh_netem(&net, SLOW, NULL, err, sizeof err) == 0, "%s", err);
    int before = running(net.lossy);

    int fd;
    pid_t maker = in_host(SLOW, make_slow_link, &fd, true);
    cr_assert_eq(running(net.lossy), before + 1,
                 "no lossy-link runs for the child's link");
    kill(maker, SIGKILL);
    waitpid(maker, NULL, 0);
    close(fd);
    double t0 = now_ms();
    while (running(net.lossy) > before && now_ms() - t0 < 10000)
        usleep(20000);
    cr_assert_eq(
        running(net.lossy), before,
        "lossy-link still runs 10 s after the process that started it was killed");
}
