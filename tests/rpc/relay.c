/* tests/rpc — the holdable relay: one thread, poll() over every pair. */
#include "relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PAIRS 8
#define BUF   (64 << 10)
/* Small kernel buffers on the relay's sockets, so that what the client
 * sends while held stays on its side, mostly in gRPC's buffer. */
#define SOCKBUF (16 << 10)

typedef struct dir {
    char buf[BUF];
    size_t len;
} dir;

typedef struct pair {
    int cfd, sfd; /* -1: unused */
    dir up, down; /* client -> server, server -> client */
} pair;

struct h_relay {
    int lfd, port, to_port, wake[2];
    atomic_bool hold, stop;
    pthread_t thread;
    pair pairs[PAIRS];
};

static void nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void small_buffers(int fd)
{
    int n = SOCKBUF;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &n, sizeof n);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &n, sizeof n);
}

static void pair_close(pair *p)
{
    if (p->cfd >= 0)
        close(p->cfd);
    if (p->sfd >= 0)
        close(p->sfd);
    p->cfd = p->sfd = -1;
    p->up.len = p->down.len = 0;
}

static void accept_one(h_relay *r)
{
    int cfd = accept(r->lfd, NULL, NULL);
    if (cfd < 0)
        return;
    pair *p = NULL;
    for (int i = 0; i < PAIRS && !p; i++)
        if (r->pairs[i].cfd < 0)
            p = &r->pairs[i];
    int sfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)r->to_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!p || sfd < 0) {
        close(cfd);
        if (sfd >= 0)
            close(sfd);
        return;
    }
    small_buffers(sfd);
    if (connect(sfd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(cfd);
        close(sfd);
        return;
    }
    nonblock(cfd);
    nonblock(sfd);
    p->cfd = cfd;
    p->sfd = sfd;
}

/* Moves what it can from `from` through `d` to `to`; false when either end
 * is gone. */
static bool pump(int from, int to, dir *d, bool may_read)
{
    if (may_read && d->len < BUF) {
        ssize_t n = read(from, d->buf + d->len, BUF - d->len);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return false;
        if (n > 0)
            d->len += (size_t)n;
    }
    if (d->len) {
        ssize_t n = write(to, d->buf, d->len);
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return false;
        if (n > 0) {
            memmove(d->buf, d->buf + n, d->len - (size_t)n);
            d->len -= (size_t)n;
        }
    }
    return true;
}

static void *relay_main(void *arg)
{
    h_relay *r = arg;
    while (!atomic_load(&r->stop)) {
        struct pollfd fds[2 + 2 * PAIRS];
        int n = 0;
        fds[n++] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
        fds[n++] = (struct pollfd){.fd = r->wake[0], .events = POLLIN};
        bool hold = atomic_load(&r->hold);
        for (int i = 0; i < PAIRS; i++) {
            pair *p = &r->pairs[i];
            if (p->cfd < 0)
                continue;
            short ce = (short)((!hold && p->up.len < BUF ? POLLIN : 0) |
                               (p->down.len ? POLLOUT : 0));
            short se =
                (short)((p->down.len < BUF ? POLLIN : 0) | (p->up.len ? POLLOUT : 0));
            fds[n++] = (struct pollfd){.fd = p->cfd, .events = ce};
            fds[n++] = (struct pollfd){.fd = p->sfd, .events = se};
        }
        if (poll(fds, (nfds_t)n, 100) < 0 && errno != EINTR)
            break;
        if (fds[1].revents) {
            char c[16];
            while (read(r->wake[0], c, sizeof c) > 0) {
            }
        }
        if (fds[0].revents & POLLIN)
            accept_one(r);
        hold = atomic_load(&r->hold);
        for (int i = 0; i < PAIRS; i++) {
            pair *p = &r->pairs[i];
            if (p->cfd < 0)
                continue;
            if (!pump(p->cfd, p->sfd, &p->up, !hold) ||
                !pump(p->sfd, p->cfd, &p->down, true))
                pair_close(p);
        }
    }
    return NULL;
}

h_relay *h_relay_start(int to_port)
{
    h_relay *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    for (int i = 0; i < PAIRS; i++)
        r->pairs[i].cfd = r->pairs[i].sfd = -1;
    r->to_port = to_port;
    r->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (r->lfd < 0 || pipe(r->wake) != 0) {
        if (r->lfd >= 0)
            close(r->lfd);
        free(r);
        return NULL;
    }
    small_buffers(r->lfd); /* inherited by accepted sockets */
    if (bind(r->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(r->lfd, 8) != 0 ||
        getsockname(r->lfd, (struct sockaddr *)&a, &alen) != 0)
        goto fail;
    nonblock(r->lfd);
    nonblock(r->wake[0]);
    r->port = ntohs(a.sin_port);
    atomic_init(&r->hold, false);
    atomic_init(&r->stop, false);
    if (pthread_create(&r->thread, NULL, relay_main, r) != 0)
        goto fail;
    return r;
fail:
    close(r->lfd);
    close(r->wake[0]);
    close(r->wake[1]);
    free(r);
    return NULL;
}

int h_relay_port(const h_relay *r)
{
    return r->port;
}

void h_relay_hold(h_relay *r, bool hold)
{
    atomic_store(&r->hold, hold);
    (void)!write(r->wake[1], "w", 1);
}

void h_relay_stop(h_relay *r)
{
    if (!r)
        return;
    atomic_store(&r->stop, true);
    (void)!write(r->wake[1], "w", 1);
    pthread_join(r->thread, NULL);
    for (int i = 0; i < PAIRS; i++)
        pair_close(&r->pairs[i]);
    close(r->lfd);
    close(r->wake[0]);
    close(r->wake[1]);
    free(r);
}
