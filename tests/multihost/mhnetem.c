/* tests/multihost — a slow, lossy link on one host: tc netem where the
 * kernel has the qdisc, else the same delay and loss in user space, the
 * host's veth pair replaced by two TAP devices with lossy_link.c between
 * them (CI's virtual machines run kernels built without netem). */
#include "mhnet.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The seed of host i's drops: the same drops every run. */
#define SEED 0x5eed0000u

/* Reads lossy-link's output until its "ready" line (true), its exit or
 * 10 s; `out` keeps what it said. */
static bool await_ready(int fd, char *out, size_t len)
{
    size_t got = 0;
    out[0] = '\0';
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left =
            10000 - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) == 0)
            return false;
        ssize_t r = read(fd, out + got, len - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        got += (size_t)r;
        out[got] = '\0';
        if (strstr(out, "ready\n"))
            return true;
        if (got + 1 >= len)
            return false;
    }
}

static void stop_link(mh_net *net, int host)
{
    if (net->link_pid[host] <= 0)
        return;
    kill(-net->link_pid[host], SIGKILL);
    while (waitpid(net->link_pid[host], NULL, 0) < 0 && errno == EINTR)
        ;
    net->link_pid[host] = 0;
}

/* lossy-link started between host `host` and the bridge, its devices given
 * the veth pair's MAC, address and bridge port. */
static int start_link(mh_net *net, int host, double delay_ms, double loss_pct, char *err,
                      size_t len)
{
    char host_ns[128], bridge_ns[128], port[16], delay[32], loss[32], seed[32];
    snprintf(host_ns, sizeof host_ns, "/run/netns/%s", net->ns[host]);
    snprintf(bridge_ns, sizeof bridge_ns, "/run/netns/%s", net->bridge);
    snprintf(port, sizeof port, "v%d", host);
    snprintf(delay, sizeof delay, "%g", delay_ms);
    snprintf(loss, sizeof loss, "%g", loss_pct);
    snprintf(seed, sizeof seed, "%u", SEED + (unsigned)host);
    const char *cmd[] = {net->lossy, host_ns, MH_HOST_IF, bridge_ns, port,
                         delay,      loss,    seed,       NULL};
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        snprintf(err, len, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = mh_spawn_fd(net, -1, cmd, p[1]);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        snprintf(err, len, "cannot start %s: %s", net->lossy, strerror((int)-pid));
        return -1;
    }
    net->link_pid[host] = pid;
    char said[512];
    bool ready = await_ready(p[0], said, sizeof said);
    close(p[0]);
    if (!ready) {
        /* no TUN device either: a kernel without CONFIG_TUN */
        snprintf(err, len,
                 "this kernel has no netem qdisc, and its emulation in user space "
                 "did not start: %s",
                 said[0] ? said : "lossy-link said nothing");
        return strstr(said, "/dev/net/tun") || strstr(said, "No such device") ? -ENOTSUP
                                                                              : -1;
    }
    return mh_sh(net, err, len,
                 "set -e\n"
                 "%s -n %s link set " MH_HOST_IF " address " MH_MAC_FMT "\n"
                 "%s -n %s addr add %s/24 dev " MH_HOST_IF "\n"
                 "%s -n %s link set " MH_HOST_IF " up\n"
                 "%s -n %s link set v%d master br0 up\n",
                 net->ip, net->ns[host], host + 1, net->ip, net->ns[host],
                 net->addr[host], net->ip, net->ns[host], net->ip, net->bridge, host);
}

/* lossy-link out (its devices go with it), the veth pair back in. */
static int unemulate(mh_net *net, int host, char *err, size_t len)
{
    stop_link(net, host);
    net->netem[host] = NULL;
    char s[2048];
    if (mh_veth_script(net, host, s, sizeof s) >= sizeof s) {
        snprintf(err, len, "plumbing script too long");
        return -1;
    }
    /* Its process, reparented in the hosts' PID namespace, may not have
     * closed them yet: the devices go now, whatever it still holds. */
    return mh_sh(net, err, len,
                 "ip=%s\n"
                 "$ip -n %s link del " MH_HOST_IF " 2>/dev/null\n"
                 "$ip -n %s link del v%d 2>/dev/null\n"
                 "set -e\n%s",
                 net->ip, net->ns[host], net->bridge, host, s);
}

/* Host `host`'s veth pair out, lossy-link in; where it cannot start, the
 * veth pair back. */
static int emulate(mh_net *net, int host, double delay_ms, double loss_pct, char *err,
                   size_t len)
{
    if (!net->lossy[0] || access(net->lossy, X_OK) != 0) {
        snprintf(err, len,
                 "this kernel has no netem qdisc, and tests/multihost/lossy-link, "
                 "which emulates it, is not built");
        return -ENOTSUP;
    }
    if (mh_sh(net, err, len, "%s -n %s link del v%d", net->ip, net->bridge, host) != 0)
        return -1;
    int rc = start_link(net, host, delay_ms, loss_pct, err, len);
    char again[256];
    if (rc != 0 && unemulate(net, host, again, sizeof again) != 0)
        fprintf(stderr, "host %d's veth pair could not be put back: %s\n", host, again);
    if (rc == 0)
        net->netem[host] = MH_NETEM_USER;
    return rc;
}

int mh_netem(mh_net *net, int host, const char *spec, char *err, size_t len)
{
    if (host < 0 || host >= net->n) {
        snprintf(err, len, "no host %d", host);
        return -1;
    }
    if (!spec && net->link_pid[host] > 0)
        return unemulate(net, host, err, len);
    if (!spec) {
        net->netem[host] = NULL;
        return mh_sh(net, err, len, "%s -n %s qdisc del dev " MH_HOST_IF " root", net->tc,
                     net->ns[host]);
    }
    if (mh_sh(net, err, len, "%s -n %s qdisc replace dev " MH_HOST_IF " root netem %s",
              net->tc, net->ns[host], spec) == 0) {
        net->netem[host] = MH_NETEM_KERNEL;
        return 0;
    }
    /* tc's words for a qdisc the kernel was built without */
    if (!strstr(err, "qdisc kind is unknown"))
        return -1;
    double delay_ms, loss_pct;
    char tail;
    if (sscanf(spec, "delay %lfms loss %lf%% %c", &delay_ms, &loss_pct, &tail) != 2) {
        snprintf(err, len,
                 "this kernel has no netem qdisc, and its emulation in user space "
                 "takes only \"delay Nms loss P%%\", not \"%s\"",
                 spec);
        return -ENOTSUP;
    }
    if (net->link_pid[host] > 0 && unemulate(net, host, err, len) != 0)
        return -1;
    return emulate(net, host, delay_ms, loss_pct, err, len);
}
