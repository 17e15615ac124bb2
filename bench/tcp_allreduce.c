/* bench/tcp_allreduce — the plain-TCP reference of bench/allreduce: the
 * same all-reduce over bare loopback sockets, with no framing, no RPC and
 * no thread hand-offs, timed as ferry's ranks are (allreduce_plan.h).
 *
 *   build/bench/tcp_allreduce --ranks N --plan BYTES:REPS:ITERS,...
 *
 * With Open MPI and gloo it says what loopback TCP gives on this machine:
 * a target above all three asks for more than any implementation over TCP
 * reached here. Two ranks exchange their buffers
 * (each sends all of its own and adds the other's as it arrives, as
 * ferry's exchange does); more ranks run the ring, reduce-scatter then
 * all-gather, one segment a step, adding as bytes arrive. Every rank is a
 * forked process with one nonblocking socket to its right and one from its
 * left, written and read by one thread. Rank 0 prints the lines. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "allreduce_plan.h"
#include "stats.h"

#define READ_SIZE  ((size_t)256 << 10)
#define WRITE_SIZE ((size_t)1 << 20)
#define MAX_RANKS  8

typedef struct rank {
    int r, world;
    int left, right; /* sockets */
    float *buf, *tmp;
} rank;

static void die(const rank *k, const char *what)
{
    fprintf(stderr, "tcp_allreduce: rank %d: %s\n", k ? k->r : -1, what);
    exit(1);
}

/* Blocking reads and writes of a few bytes on the nonblocking sockets. */
static void wait_for(const rank *k, int fd, short ev)
{
    struct pollfd p = {.fd = fd, .events = ev};
    if (poll(&p, 1, -1) < 0)
        die(k, "poll");
}

static void read_all(const rank *k, void *p, size_t len)
{
    for (size_t at = 0; at < len;) {
        ssize_t n = read(k->left, (char *)p + at, len - at);
        if (n < 0 && errno == EAGAIN)
            wait_for(k, k->left, POLLIN);
        else if (n <= 0)
            die(k, "read from the left neighbour failed");
        else
            at += (size_t)n;
    }
}

static void write_all(const rank *k, const void *p, size_t len)
{
    for (size_t at = 0; at < len;) {
        ssize_t n = write(k->right, (const char *)p + at, len - at);
        if (n < 0 && errno == EAGAIN)
            wait_for(k, k->right, POLLOUT);
        else if (n <= 0)
            die(k, "write to the right neighbour failed");
        else
            at += (size_t)n;
    }
}

static void add(float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
}

/* What arrives, and where it goes: read into tmp and added into dst (in
 * place, but no further than `limit` floats while the send still reads
 * them), or read into dst itself. */
typedef struct recv_to {
    float *dst;
    size_t len; /* floats */
    bool reduce;
} recv_to;

/* Sends out[0..out_len) to the right while `in` arrives from the left, on
 * nonblocking sockets in one thread (as Open MPI's TCP layer progresses):
 * no thread to start or hand over to. With `in.dst == out` (the exchange)
 * an arrived float is added once this rank's own copy of it has gone. */
static void transfer(rank *k, const float *out, size_t out_len, recv_to in)
{
    size_t sent = 0, got = 0, added = 0; /* bytes, bytes, floats */
    size_t out_bytes = out_len * sizeof(float), in_bytes = in.len * sizeof(float);
    bool aliased = in.reduce && in.dst == out;
    char *land = in.reduce ? (char *)k->tmp : (char *)in.dst;
    while (sent < out_bytes || got < in_bytes) {
        struct pollfd p[2] = {{.fd = k->right, .events = sent < out_bytes ? POLLOUT : 0},
                              {.fd = k->left, .events = got < in_bytes ? POLLIN : 0}};
        if (poll(p, 2, -1) < 0)
            die(k, "poll");
        if (p[0].revents & (POLLOUT | POLLERR | POLLHUP)) {
            size_t n = out_bytes - sent < WRITE_SIZE ? out_bytes - sent : WRITE_SIZE;
            ssize_t w = write(k->right, (const char *)out + sent, n);
            if (w < 0 && errno != EAGAIN)
                die(k, "write to the right neighbour failed");
            sent += w > 0 ? (size_t)w : 0;
        }
        if (p[1].revents & (POLLIN | POLLERR | POLLHUP)) {
            size_t n = in_bytes - got < READ_SIZE ? in_bytes - got : READ_SIZE;
            ssize_t r = read(k->left, land + got, n);
            if (r == 0 || (r < 0 && errno != EAGAIN))
                die(k, "read from the left neighbour failed");
            got += r > 0 ? (size_t)r : 0;
        }
        if (in.reduce) {
            size_t upto = got / sizeof(float);
            if (aliased && upto > sent / sizeof(float))
                upto = sent / sizeof(float);
            add(in.dst + added, k->tmp + added, upto - added);
            added = upto;
        }
    }
}

/* Two ranks: each sends its whole buffer and adds the other's. */
static void exchange(rank *k, size_t n)
{
    transfer(k, k->buf, n, (recv_to){k->buf, n, true});
}

/* Segment s of n floats over `world` ranks. */
static void segment(size_t n, int world, int s, size_t *off, size_t *len)
{
    size_t base = n / (size_t)world, extra = n % (size_t)world, i = (size_t)s;
    *off = i * base + (i < extra ? i : extra);
    *len = base + (i < extra);
}

/* One ring step: segment `out` goes right while segment `in` comes from
 * the left, added into place (reduce-scatter) or read into place
 * (all-gather). The tmp offset keeps a reduce's arrivals apart. */
static void ring_step(rank *k, size_t n, int out, int in, bool reduce)
{
    size_t so, sl, ro, rl;
    segment(n, k->world, out, &so, &sl);
    segment(n, k->world, in, &ro, &rl);
    transfer(k, k->buf + so, sl, (recv_to){k->buf + ro, rl, reduce});
}

static void allreduce(rank *k, size_t n)
{
    if (k->world == 2) {
        exchange(k, n);
        return;
    }
    int W = k->world, r = k->r;
    for (int j = 0; j + 1 < W; j++)
        ring_step(k, n, (r - j + W) % W, (r - j - 1 + W) % W, true);
    for (int j = 0; j + 1 < W; j++)
        ring_step(k, n, (r - j + 1 + W) % W, (r - j + W) % W, false);
}

/* A value passed round the ring and back to rank 0, each rank keeping the
 * larger: a barrier, and the slowest rank's time at rank 0. */
static double ring_max(rank *k, double v)
{
    double in;
    if (k->r == 0) {
        write_all(k, &v, sizeof v);
        read_all(k, &in, sizeof in);
        return in;
    }
    read_all(k, &in, sizeof in);
    v = in > v ? in : v;
    write_all(k, &v, sizeof v);
    return v;
}

static void run_allreduce(void *arg, size_t n, const char *what)
{
    (void)what;
    allreduce(arg, n);
}

static double run_max(void *arg, double v)
{
    return ring_max(arg, v);
}

static int run_rank(rank *k, const ar_plan *plan)
{
    size_t max = ar_plan_max_bytes(plan);
    k->buf = malloc(max);
    k->tmp = malloc(max);
    if (!k->buf || !k->tmp)
        die(k, "no memory");
    memset(k->tmp, 0, max); /* touched: no page faults in the timed part */
    ar_runner run = {.impl = "tcp",
                     .extra = "\"transport\":\"tcp\",\"framing\":\"none\"",
                     .rank = k->r,
                     .world = k->world,
                     .buf = k->buf,
                     .arg = k,
                     .allreduce = run_allreduce,
                     .max = run_max};
    ar_run_plan(plan, &run);
    free(k->buf);
    free(k->tmp);
    return 0;
}

static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 1) ||
        getsockname(fd, (struct sockaddr *)&a, &len))
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a))
        return -1;
    return fd;
}

int main(int argc, char **argv)
{
    bench_set_name("allreduce");
    ar_plan plan;
    int world = argc == 5 && strcmp(argv[1], "--ranks") == 0 ? atoi(argv[2]) : 0;
    if (world < 2 || world > MAX_RANKS || strcmp(argv[3], "--plan") != 0 ||
        ar_plan_parse(argv[4], &plan) != 0) {
        fprintf(stderr,
                "usage: tcp_allreduce --ranks N --plan BYTES:REPS:ITERS,...\n"
                "  (N from 2 to %d)\n",
                MAX_RANKS);
        return 2;
    }
    int lfd[MAX_RANKS], port[MAX_RANKS];
    for (int r = 0; r < world; r++)
        if ((lfd[r] = listen_any(&port[r])) < 0)
            die(NULL, "cannot listen on 127.0.0.1");
    pid_t pid[MAX_RANKS];
    for (int r = 0; r < world; r++) {
        if ((pid[r] = fork()) < 0)
            die(NULL, "fork");
        if (pid[r] == 0) {
            rank k = {.r = r, .world = world};
            int one = 1;
            if ((k.right = connect_to(port[(r + 1) % world])) < 0 ||
                (k.left = accept(lfd[r], NULL, NULL)) < 0)
                die(&k, "cannot connect the ring");
            setsockopt(k.right, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            setsockopt(k.left, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            fcntl(k.right, F_SETFL, fcntl(k.right, F_GETFL) | O_NONBLOCK);
            fcntl(k.left, F_SETFL, fcntl(k.left, F_GETFL) | O_NONBLOCK);
            for (int i = 0; i < world; i++)
                close(lfd[i]);
            _exit(run_rank(&k, &plan));
        }
    }
    for (int r = 0; r < world; r++)
        close(lfd[r]);
    int failed = 0;
    for (int r = 0; r < world; r++) {
        int st;
        if (waitpid(pid[r], &st, 0) != pid[r] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed = 1;
    }
    return failed;
}
