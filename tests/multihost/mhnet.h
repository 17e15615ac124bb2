/* tests/multihost — hosts as network namespaces on one machine: a few
 * "hosts", each a network namespace with one address on a private /24,
 * joined by veth pairs through a bridge that sits in a namespace of its
 * own, so that this machine's own network gets nothing.
 *
 * Everything lives inside a mount and a PID namespace that a keeper process
 * holds: the namespaces' names (ip's /run/netns) exist only in that mount
 * namespace, and every process started on a host runs in that PID
 * namespace. Killing the keeper (mh_net_down(), or the kernel when the
 * process that made it dies: it is SIGKILLed with it) kills every such
 * process and releases every namespace, however the test or benchmark ended.
 *
 * Shared by tests/multihost and bench/multihost; needs root, ip (iproute2)
 * and nsenter (util-linux). Not thread-safe; call from one thread. */
#ifndef FERRY_TESTS_MULTIHOST_MHNET_H
#define FERRY_TESTS_MULTIHOST_MHNET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define MH_MAX_HOSTS 8
/* The hosts' /24: host i is MH_SUBNET.(i+1); nothing outside the namespaces
 * ever has an address in it. */
#define MH_SUBNET "10.77.0"
/* The name every host's link has inside its namespace, and its MAC (printf
 * format of host i + 1). */
#define MH_HOST_IF "eth0"
#define MH_MAC_FMT "02:00:0a:4d:00:%02x"

/* mh_netem()'s two ways of making a slow link, as it names them. */
#define MH_NETEM_KERNEL "netem (kernel)"
#define MH_NETEM_USER   "netem emulated in user space: no netem qdisc in this kernel"

typedef enum mh_lack {
    MH_CAN_RUN,
    MH_NOT_ROOT, /* namespaces, veths and qdiscs need root */
    MH_NO_IP,    /* no ip command: Debian's iproute2 */
    MH_NO_NSENTER,
} mh_lack;

/* What keeps namespaces from being made here, with the reason in `why`
 * (a sentence); MH_CAN_RUN when nothing does. */
mh_lack mh_unavailable(char *why, size_t len);

typedef struct mh_net {
    pid_t keeper; /* our child; its death ends everything below */
    pid_t init;   /* PID 1 of the hosts' PID namespace, as we number it */
    int n;
    char prefix[32];                  /* "ferry-<our pid>-" */
    char bridge[48];                  /* the namespace holding the bridge */
    char ns[MH_MAX_HOSTS][48];        /* host i's network namespace */
    char addr[MH_MAX_HOSTS][16];      /* host i's address */
    char ip[64], tc[64], nsenter[64]; /* the tools, as found */
    char lossy[512];                  /* tests/multihost/lossy-link; "": not built */
    /* host i's link emulated in user space (lossy-link's nsenter), or 0 */
    pid_t link_pid[MH_MAX_HOSTS];
    const char *netem[MH_MAX_HOSTS]; /* MH_NETEM_* on host i's link, or NULL */
} mh_net;

/* Makes `hosts` hosts (1..MH_MAX_HOSTS), named prefix + "h<i>", and the
 * bridge's namespace, prefix + "br". Returns 0, or -errno with `err` saying
 * what failed (-EPERM: this machine refuses namespaces even to root, as an
 * unprivileged container does); on failure nothing is left. */
int mh_net_up(mh_net *net, int hosts, char *err, size_t len);

/* Kills every process on the hosts and releases every namespace; waits
 * until they are gone. Harmless on a net that is not up. */
void mh_net_down(mh_net *net);

/* Fills out[0..max) with the command line that runs cmd (NULL-terminated)
 * on host `host` (-1: in the keeper's namespaces but on no host, which
 * the namespaces' plumbing uses), NULL-terminated. The strings point into
 * `net` and `cmd`. Returns the number of arguments, or 0 when max is too
 * small. */
size_t mh_argv(const mh_net *net, int host, const char *const *cmd, const char **out,
               size_t max);

/* Starts cmd on host `host` (as mh_argv()) in a process group of its own,
 * stdin from /dev/null, stdout and stderr to the files `out` and `err`
 * (NULL: ours), with env ("K=V", NULL-terminated, or NULL) added. Returns
 * the pid, or -errno. */
pid_t mh_spawn(const mh_net *net, int host, const char *const *cmd,
               const char *const *env, const char *out, const char *err);

/* Waits up to timeout_ms for `pid` (from mh_spawn()); past it, kills its
 * process group. Returns the exit status, 128 + the signal, or -1 when it
 * timed out. */
int mh_wait(pid_t pid, int timeout_ms);

/* Runs the shell command made from fmt on no host (ip and tc with -n reach
 * each namespace). Returns 0, or -1 with `err` holding its stderr. */
int mh_sh(const mh_net *net, char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* As mh_spawn(), with stdout and stderr both to out_fd. */
pid_t mh_spawn_fd(const mh_net *net, int host, const char *const *cmd, int out_fd);

/* The shell lines (ip as $ip) that give host i its veth pair to the bridge,
 * its MAC and address, up; the length they took (>= len: cut short). */
size_t mh_veth_script(const mh_net *net, int i, char *s, size_t len);

/* Puts `spec` ("delay 5ms loss 1%") on host `host`'s link, as its outgoing
 * packets see it: tc netem, or where the kernel has no netem qdisc the
 * same delay and loss in user space (lossy_link.c takes the place of the
 * host's veth pair); net->netem[host] says which. NULL removes it. Returns
 * 0, -ENOTSUP where neither can be had (err says why), or -1 with `err`. */
int mh_netem(mh_net *net, int host, const char *spec, char *err, size_t len);

/* A descriptor of host `host`'s network namespace, for setns(2) (a forked
 * process that becomes a host of its own), close-on-exec; -errno when it
 * cannot be opened. The caller closes it: an open descriptor keeps the
 * namespace alive. */
int mh_netns_fd(const mh_net *net, int host);

/* The inode of host `host`'s network namespace (what /proc/PID/ns/net
 * names as net:[INODE]); 0 when it cannot be read. */
unsigned long mh_netns_inode(const mh_net *net, int host);

/* Whether any process, or any mount in any process's view, still holds the
 * network namespace of inode `ino` (read from /proc). */
bool mh_netns_held(unsigned long ino);

#endif
