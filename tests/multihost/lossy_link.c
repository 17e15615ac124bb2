/* tests/multihost — lossy-link: one host's link to the bridge, emulated in
 * user space for kernels built without the netem qdisc (mhnet.c's
 * mh_netem() starts it there, and only there).
 *
 *   lossy-link HOST_NETNS HOST_IF BRIDGE_NETNS BRIDGE_IF DELAY_MS LOSS_PCT SEED
 *
 * Opens a TAP device named HOST_IF in the network namespace HOST_NETNS (a
 * path: /run/netns/NAME) and one named BRIDGE_IF in BRIDGE_NETNS, and
 * forwards Ethernet frames between them: what leaves the host is held
 * DELAY_MS and dropped with probability LOSS_PCT percent (a generator
 * seeded with SEED), as netem on the host's interface does; what comes
 * to the host passes at once. Prints "ready" on stdout once both devices
 * exist; the caller gives them their addresses and the bridge, and kills
 * it to end the link (the devices go with its descriptors).
 *
 * A test helper, not part of ferry. */
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/* netem's default limit: frames held at once, past which it drops. */
#define QUEUE_FRAMES 1000
/* Frames are at most the MTU (1500) and its Ethernet header: without
 * IFF_VNET_HDR the kernel hands a TAP no larger, offloaded ones. */
#define FRAME_MAX 2048
/* Frames moved each way per wakeup, so that neither way starves. */
#define BURST 64

typedef struct held {
    int64_t due_ns;
    uint16_t len;
    unsigned char data[FRAME_MAX];
} held;

static held queue[QUEUE_FRAMES];
static int head, count;
static uint64_t rng;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* splitmix64: a fixed seed gives the same drops every run */
static double uniform(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / (double)(1ull << 53);
}

static int die(const char *what)
{
    fprintf(stderr, "lossy-link: %s: %s\n", what, strerror(errno));
    return -1;
}

/* A TAP device named `name` in the network namespace at `ns_path`: a
 * descriptor created there stays bound to that namespace's device. */
static int open_tap(const char *ns_path, const char *name)
{
    int ns = open(ns_path, O_RDONLY | O_CLOEXEC);
    if (ns < 0)
        return die(ns_path);
    int rc = setns(ns, CLONE_NEWNET);
    close(ns);
    if (rc != 0)
        return die(ns_path);
    /* the kernel's TUN/TAP driver (CONFIG_TUN): without it, no link */
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return die("/dev/net/tun");
    struct ifreq ifr = {.ifr_flags = IFF_TAP | IFF_NO_PI};
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", name);
    if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
        die("/dev/net/tun: TUNSETIFF");
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads up to BURST frames from the host: each is dropped or queued. */
static void from_host(int fd, int64_t delay_ns, double loss)
{
    unsigned char scratch[FRAME_MAX];
    for (int i = 0; i < BURST; i++) {
        bool room = count < QUEUE_FRAMES;
        held *h = &queue[(head + count) % QUEUE_FRAMES];
        unsigned char *buf = room ? h->data : scratch;
        ssize_t n = read(fd, buf, FRAME_MAX);
        if (n <= 0)
            return;
        if (!room || uniform() < loss)
            continue;
        h->len = (uint16_t)n;
        h->due_ns = now_ns() + delay_ns;
        count++;
    }
}

/* Passes up to BURST frames from the bridge to the host, undelayed. */
static void to_host(int from, int to)
{
    unsigned char buf[FRAME_MAX];
    for (int i = 0; i < BURST; i++) {
        ssize_t n = read(from, buf, sizeof buf);
        if (n <= 0)
            return;
        ssize_t w = write(to, buf, (size_t)n);
        (void)w;
    }
}

/* Sends every held frame that is due; the time until the next one is, in
 * ns, or -1 when none is held. */
static int64_t release(int to)
{
    int64_t now = now_ns();
    while (count > 0 && queue[head].due_ns <= now) {
        /* one the device refuses is lost, as on a full link */
        ssize_t w = write(to, queue[head].data, queue[head].len);
        (void)w;
        head = (head + 1) % QUEUE_FRAMES;
        count--;
    }
    return count > 0 ? queue[head].due_ns - now : -1;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: lossy-link HOST_NETNS HOST_IF BRIDGE_NETNS BRIDGE_IF "
                        "DELAY_MS LOSS_PCT SEED\n");
        return 2;
    }
    int64_t delay_ns = (int64_t)(strtod(argv[5], NULL) * 1e6);
    double loss = strtod(argv[6], NULL) / 100.0;
    rng = strtoull(argv[7], NULL, 0);
    int host = open_tap(argv[1], argv[2]);
    int bridge = host < 0 ? -1 : open_tap(argv[3], argv[4]);
    if (bridge < 0)
        return 1;
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        int64_t wait_ns = release(bridge);
        struct timespec ts = {.tv_sec = wait_ns / 1000000000,
                              .tv_nsec = wait_ns % 1000000000};
        struct pollfd p[2] = {{.fd = host, .events = POLLIN},
                              {.fd = bridge, .events = POLLIN}};
        if (ppoll(p, 2, wait_ns >= 0 ? &ts : NULL, NULL) < 0 && errno != EINTR) {
            die("poll");
            return 1;
        }
        if (p[0].revents & POLLIN)
            from_host(host, delay_ns, loss);
        if (p[1].revents & POLLIN)
            to_host(bridge, host);
        if ((p[0].revents | p[1].revents) & (POLLERR | POLLHUP | POLLNVAL)) {
            fprintf(stderr, "lossy-link: a device went away\n");
            return 1;
        }
    }
}
