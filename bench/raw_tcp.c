/* bench — baseline A: raw TCP loopback throughput. */
#include "raw_tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "data.h"
#include "stats.h"

static int write_all(int fd, const void *p, size_t len, size_t chunk)
{
    const char *c = p;
    while (len > 0) {
        size_t n = len < chunk ? len : chunk;
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        c += w;
        len -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t len)
{
    char *c = p;
    while (len > 0) {
        ssize_t r = recv(fd, c, len, 0);
        if (r == 0)
            return -1;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        c += r;
        len -= (size_t)r;
    }
    return 0;
}

/* The receiver, in the child. Each message is a uint64 length (0: stop),
 * then the bytes. */
static int sink_main(void *arg)
{
    bench_tcp *t = arg;
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    if (getsockname(t->listen_fd, (struct sockaddr *)&sa, &sl) != 0)
        bench_child_die("getsockname: %s", strerror(errno));
    char *buf = malloc(t->max_len);
    if (!buf)
        bench_child_die("out of memory");
    bench_touch(buf, t->max_len);
    bench_child_ready(ntohs(sa.sin_port));

    int fd = accept(t->listen_fd, NULL, NULL);
    if (fd < 0)
        bench_child_die("accept: %s", strerror(errno));
    close(t->listen_fd);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (;;) {
        uint64_t len;
        if (read_all(fd, &len, sizeof len) != 0)
            bench_child_die("raw tcp: peer closed early");
        if (len == 0)
            break;
        if (len > t->max_len)
            bench_child_die("raw tcp: message of %llu bytes", (unsigned long long)len);
        if (read_all(fd, buf, len) != 0)
            bench_child_die("raw tcp: short message");
        char ack = 1;
        if (write_all(fd, &ack, 1, 1) != 0)
            bench_child_die("raw tcp: cannot answer");
    }
    close(fd);
    free(buf);
    bench_child_wait_stop();
    return 0;
}

int bench_tcp_start(bench_tcp *t, size_t max_len)
{
    memset(t, 0, sizeof *t);
    t->fd = -1;
    t->max_len = max_len;
    t->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (t->listen_fd < 0 || bind(t->listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(t->listen_fd, 1) != 0) {
        fprintf(stderr, "bench/rpc: raw tcp listen: %s\n", strerror(errno));
        if (t->listen_fd >= 0)
            close(t->listen_fd);
        return -1;
    }
    int rc = bench_child_start(&t->child, "raw-tcp", sink_main, t);
    close(t->listen_fd);
    t->listen_fd = -1;
    return rc;
}

int bench_tcp_connect(bench_tcp *t)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)t->child.port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    t->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (t->fd < 0 || connect(t->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        fprintf(stderr, "bench/rpc: raw tcp connect: %s\n", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return 0;
}

double bench_tcp_send(bench_tcp *t, const void *buf, size_t len)
{
    uint64_t hdr = len;
    char ack;
    if (len == 0 || len > t->max_len)
        return -1;
    uint64_t t0 = bench_now_ns();
    if (write_all(t->fd, &hdr, sizeof hdr, sizeof hdr) != 0 ||
        write_all(t->fd, buf, len, BENCH_TCP_WRITE) != 0 ||
        read_all(t->fd, &ack, 1) != 0) {
        fprintf(stderr, "bench/rpc: raw tcp: %s\n",
                errno ? strerror(errno) : "peer closed");
        return -1;
    }
    return (double)(bench_now_ns() - t0) * 1e-9;
}

int bench_tcp_stop(bench_tcp *t)
{
    if (t->fd >= 0) {
        uint64_t stop = 0;
        write_all(t->fd, &stop, sizeof stop, sizeof stop);
        close(t->fd);
        t->fd = -1;
    }
    return bench_child_stop(&t->child, 5000);
}
