/* Two lines of a cluster file that name one worker.
 *
 * "localhost:7100" and "127.0.0.1:7100" differ as text, so the duplicate
 * check of the parser lets them through, yet both reach one process: the
 * cluster would count it twice, train on it twice and stop it twice. Only
 * name resolution tells, so it happens here, apart from conf_load(), which
 * also reads the running cluster's state and must not wait on DNS. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "config_int.h"

/* One resolved address, as text without the port. */
typedef struct endpoint {
    char addr[INET6_ADDRSTRLEN];
    int port;
    size_t worker;
} endpoint;

static void add(endpoint **list, size_t *n, size_t *cap, const char *addr, int port,
                size_t worker)
{
    if (*n == *cap) {
        size_t grown = *cap ? *cap * 2 : 16;
        endpoint *l = realloc(*list, grown * sizeof *l);
        if (!l)
            return; /* fewer comparisons, never a wrong refusal */
        *list = l;
        *cap = grown;
    }
    endpoint *e = &(*list)[(*n)++];
    snprintf(e->addr, sizeof e->addr, "%s", addr);
    e->port = port;
    e->worker = worker;
}

/* Appends every address `host` resolves to. An IPv4-mapped IPv6 address
 * is the IPv4 one: gRPC listens on both through one socket. */
static void resolve(const char *host, int port, size_t worker, endpoint **list, size_t *n,
                    size_t *cap)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        char text[INET6_ADDRSTRLEN] = "";
        if (ai->ai_family == AF_INET) {
            const struct sockaddr_in *in = (const void *)ai->ai_addr;
            inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
        } else if (ai->ai_family == AF_INET6) {
            const struct sockaddr_in6 *in6 = (const void *)ai->ai_addr;
            if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
                inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof text);
            else
                inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
        }
        if (text[0])
            add(list, n, cap, text, port, worker);
    }
    freeaddrinfo(res);
}

static void where(char *buf, size_t len, const char *path, const conf_worker *w,
                  size_t rank)
{
    if (path && w->line)
        snprintf(buf, len, "%s:%d", path, w->line);
    else
        snprintf(buf, len, "worker %zu", rank);
}

int conf_check_aliases(const conf_cluster *c, const char *path, char *err, size_t errlen)
{
    endpoint *list = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; i < c->n_workers; i++) {
        size_t first = n;
        resolve(c->workers[i].host, c->workers[i].port, i, &list, &n, &cap);
        for (size_t a = first; a < n && !rc; a++) {
            for (size_t b = 0; b < first; b++) {
                if (list[b].port != list[a].port ||
                    strcmp(list[b].addr, list[a].addr) != 0)
                    continue;
                const conf_worker *old = &c->workers[list[b].worker],
                                  *new = &c->workers[i];
                char at[CONF_ERR_LEN / 2], was[64];
                where(at, sizeof at, path, new, i);
                if (old->line)
                    snprintf(was, sizeof was, "of line %d", old->line);
                else
                    snprintf(was, sizeof was, "(worker %zu)", list[b].worker);
                rc = base_errf(err, errlen, FERRY_EINVAL,
                               "%s: worker '%s' is worker '%s' %s: both reach %s port %d",
                               at, new->address, old->address, was, list[a].addr,
                               list[a].port);
                break;
            }
        }
        if (rc)
            break;
    }
    free(list);
    return rc;
}
