/* The metrics endpoint: libmicrohttpd on one thread of its own, answering
 * GET /metrics with rt_metrics_text() and anything else with 404. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "base/base.h"
#include "metrics.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct rt_metrics {
    struct MHD_Daemon *d;
    rt_worker *w;
    int port;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *body,
                             enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_len, void **state)
{
    rt_metrics *m = cls;
    (void)version, (void)upload, (void)state;
    if (*upload_len) /* a body nobody asked for: refused below, not read */
        *upload_len = 0;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n",
                     MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/metrics") != 0)
        return reply(c, MHD_HTTP_NOT_FOUND, "ferry serves /metrics only\n",
                     MHD_RESPMEM_PERSISTENT);
    char *text = rt_metrics_text(m->w);
    if (!text)
        return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n",
                     MHD_RESPMEM_PERSISTENT);
    return reply(c, MHD_HTTP_OK, text, MHD_RESPMEM_MUST_FREE);
}

/* The address to bind, IPv4 or IPv6. */
static int address(const char *host, int port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        return 0;
    }
    return FERRY_EINVAL;
}

/* The port the kernel gave, for port 0. */
static int bound_port(struct MHD_Daemon *d)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    return info ? (int)info->port : 0;
}

int rt_metrics_start(rt_worker *w, const char *host, int port, rt_metrics **out,
                     char *err, size_t errlen)
{
    *out = NULL;
    struct sockaddr_storage ss;
    if (port < 0 || port > 65535 || address(host, port, &ss) != 0)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "metrics: '%s' port %d is not an address to listen on", host,
                         port);
    rt_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return base_errf(err, errlen, FERRY_ENOMEM, "metrics: out of memory");
    m->w = w;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
                     (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    errno = 0;
    m->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, m,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_CONNECTION_LIMIT, 16u,
                            MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!m->d) {
        int e = errno;
        free(m);
        return base_errf(err, errlen, e == EADDRINUSE ? FERRY_EADDRINUSE : FERRY_EIO,
                         "metrics: cannot listen on %s port %d: %s", host, port,
                         e ? strerror(e) : "libmicrohttpd refused");
    }
    m->port = bound_port(m->d);
    *out = m;
    return 0;
}

int rt_metrics_port(const rt_metrics *m)
{
    return m->port;
}

void rt_metrics_stop(rt_metrics *m)
{
    if (!m)
        return;
    MHD_stop_daemon(m->d);
    free(m);
}
