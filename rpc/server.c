/* The server: listening, the method table, keeping requests posted, and
 * graceful shutdown. A poller's thread drains the completion queue; handlers
 * run on a pool (or inline on that thread when they never block), so a long
 * task never holds up other calls. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpc/grpc_security.h>

#include "rpc_int.h"

/* Requests kept posted per method: a burst beyond this waits in gRPC's own
 * pending queue, which costs its executor thread ~6 us a call (measured at
 * 256 in flight), so keep as many posted as a busy master keeps in flight. */
#define REQUESTS_PER_METHOD 256
/* How often a draining server looks whether its pool is idle. */
#define DRAIN_POLL_US 10000

/* ---- refusals ---------------------------------------------------------- */

static void refusals_flush(rpc_server *s, uint64_t now, bool force)
{
    rpc_refusals *r = &s->refusals;
    if (!r->pending || (!force && now - r->last_line_ns < r->interval_ns))
        return;
    char line[512];
    snprintf(line, sizeof line,
             "refused %llu more calls without a valid token in the last %.0f s (the "
             "first: %s)",
             (unsigned long long)r->pending,
             (double)(now - r->pending_since_ns) / 1e9 < 1
                 ? 1.0
                 : (double)(now - r->pending_since_ns) / 1e9,
             r->first);
    s->log(s->log_arg, line);
    r->last_line_ns = now;
    r->pending = 0;
}

void rpc_server_refusal(rpc_server *s, rpc_srv_call *sc, const char *why)
{
    atomic_fetch_add(&s->refused, 1);
    if (!s->log)
        return;
    rpc_refusals *r = &s->refusals;
    uint64_t now = uv_hrtime();
    if (!r->pending && (!r->last_line_ns || now - r->last_line_ns >= r->interval_ns)) {
        /* The first after a quiet interval gets a line of its own. */
        char line[512];
        snprintf(line, sizeof line,
                 "refused %s from %s: %s (more refusals are summarised every %.0f s)",
                 rpc_srv_method(sc), rpc_srv_peer(sc), why, (double)r->interval_ns / 1e9);
        s->log(s->log_arg, line);
        r->last_line_ns = now;
        return;
    }
    if (r->pending++ == 0) {
        r->pending_since_ns = now;
        snprintf(r->first, sizeof r->first, "%s from %s: %s", rpc_srv_method(sc),
                 rpc_srv_peer(sc), why);
    }
}

uint64_t rpc_server_refused(const rpc_server *s)
{
    return atomic_load(&((rpc_server *)s)->refused);
}

/* ---- threads ------------------------------------------------------------ */

/* The poller's hook: the summary of refusals, once per interval. */
static bool refusals_hook(void *arg, bool final)
{
    rpc_server *s = arg;
    if (s->refusals.pending)
        refusals_flush(s, uv_hrtime(), final);
    return s->refusals.pending != 0;
}

/* A thread of the handler pool, or the lane: takes calls off its queue,
 * decodes them and runs their handlers. */
static void queue_thread(rpc_server *s, rpc_srv_queue *q, rpc_slot *slot)
{
    uv_mutex_lock(&s->lock);
    for (;;) {
        while (!q->head && !s->pool_exit)
            uv_cond_wait(&q->cond, &s->lock);
        if (!q->head)
            break;
        rpc_srv_call *sc = q->head;
        q->head = sc->queue_next;
        if (!q->head)
            q->tail = NULL;
        if (slot)
            rpc_slot_enter(slot, sc);
        uv_mutex_unlock(&s->lock);
        rpc_srv_call_run(sc, SIZE_MAX);
        uv_mutex_lock(&s->lock);
        if (slot) {
            rpc_slot_leave(slot);
            uv_mutex_unlock(&s->lock);
            rpc_srv_call_unref(sc); /* may free it, taking the lock */
            uv_mutex_lock(&s->lock);
        }
    }
    uv_mutex_unlock(&s->lock);
}

static void pool_thread(void *arg)
{
    rpc_server *s = arg;
    pthread_setname_np(pthread_self(), "ferry-handler");
    int i = atomic_fetch_add(&s->next_slot, 1);
    queue_thread(s, &s->work, i < s->n_slots ? &s->slots[i] : NULL);
}

static void lane_thread(void *arg)
{
    rpc_server *s = arg;
    pthread_setname_np(pthread_self(), "ferry-srv-lane");
    queue_thread(s, &s->lane_work, NULL);
}

static void enqueue(rpc_server *s, rpc_srv_queue *q, rpc_srv_call *sc)
{
    sc->queue_next = NULL;
    uv_mutex_lock(&s->lock);
    if (q->tail)
        q->tail->queue_next = sc;
    else
        q->head = sc;
    q->tail = sc;
    uv_cond_signal(&q->cond);
    uv_mutex_unlock(&s->lock);
}

void rpc_srv_dispatch(rpc_srv_call *sc)
{
    rpc_server *s = sc->srv;
    rpc_count_request(sc, grpc_byte_buffer_length(sc->req_bb));
    if ((sc->method->m.flags & RPC_METHOD_NEW_WORK) && atomic_load(&s->draining)) {
        rpc_srv_fail(sc, FERRY_EUNAVAIL, "%s: the server is shutting down",
                     rpc_srv_method(sc));
        return;
    }
    if (sc->method->m.flags & RPC_METHOD_INLINE) {
        /* Small requests here, at once; larger ones to the lane, so that
         * this thread never spends long on one message. */
        if (!rpc_srv_call_run(sc, RPC_INLINE_DECODE_MAX))
            enqueue(s, &s->lane_work, sc);
        return;
    }
    /* A pool whose every thread is held by a cancelled call never frees. */
    if (rpc_slots_refuse(s, sc))
        return;
    enqueue(s, &s->work, sc);
}

void rpc_server_call_ended(rpc_server *s)
{
    uv_mutex_lock(&s->lock);
    s->live_calls--;
    /* Only shutdown waits for this; waking it per call costs a futex each. */
    if (s->stopping && s->live_calls == 0)
        uv_cond_signal(&s->drained);
    uv_mutex_unlock(&s->lock);
}

static void shutdown_done(rpc_tag *tag, bool ok)
{
    rpc_server *s = (rpc_server *)((char *)tag - offsetof(rpc_server, shutdown_tag));
    (void)ok;
    uv_mutex_lock(&s->lock);
    s->shutdown_done = true;
    uv_cond_signal(&s->drained);
    uv_mutex_unlock(&s->lock);
}

/* Splits "host:port" or "[v6]:port" into the host, without brackets, and
 * the port text. gRPC accepts "host" alone (port 443) and ports past 65535
 * (wrapped) without a word: insist on an explicit, valid port. */
static bool split_listen(const char *listen, char host[256], const char **port)
{
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen)
        return false;
    size_t digits = strspn(colon + 1, "0123456789");
    if (digits < 1 || digits > 5 || colon[1 + digits] != '\0' ||
        strtol(colon + 1, NULL, 10) > 65535)
        return false;
    const char *h = listen;
    size_t hlen = (size_t)(colon - listen);
    if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']') {
        h++;
        hlen -= 2;
    }
    if (hlen >= 256)
        return false;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = colon + 1;
    return true;
}

/* Tries to bind every address `host` resolves to at `port`, as the server
 * will. gRPC itself says only "0" when it cannot bind. */
static int probe_bind(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai;
    if (getaddrinfo(host[0] ? host : NULL, port, &hints, &ai) != 0)
        return FERRY_EINVAL;
    int rc = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype, 0);
        if (fd < 0)
            continue;
        /* As gRPC does: a port whose last connections linger in TIME_WAIT
         * is free to listen on again. */
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0)
            rc = errno == EADDRINUSE ? FERRY_EADDRINUSE : rc ? rc : -errno;
        close(fd);
    }
    freeaddrinfo(ai);
    return rc;
}

int rpc_listen_probe(const char *listen)
{
    char host[256];
    const char *port;
    if (!listen || !split_listen(listen, host, &port))
        return FERRY_EINVAL;
    return probe_bind(host, port);
}

static void server_free(rpc_server *s)
{
    if (s->gs)
        grpc_server_destroy(s->gs);
    /* No batch of the server's is left on the queue (shutdown waited for
     * every call): the summary of refusals is this thread's now. */
    if (s->hooked) {
        rpc_poller_unhook(s->poller, refusals_hook, s);
        refusals_flush(s, uv_hrtime(), true);
    }
    if (s->own_poller)
        rpc_poller_destroy(s->poller);
    free(s->pool);
    free(s->slots);
    free(s->methods);
    if (s->token) {
        explicit_bzero(s->token, s->token_len);
        free(s->token);
    }
    free(s->version);
    uv_cond_destroy(&s->work.cond);
    uv_cond_destroy(&s->lane_work.cond);
    uv_cond_destroy(&s->drained);
    uv_mutex_destroy(&s->lock);
    free(s);
    grpc_shutdown();
}

/* gRPC's server with ferry's arguments: the payload limit, and what a
 * listening worker must refuse or close. */
static grpc_server *grpc_server_for(size_t max_payload, bool token)
{
    grpc_arg args[] = {
        {0},
        {0}, /* the size limits, filled below */
        /* With SO_REUSEPORT a second worker would share a busy port silently. */
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ALLOW_REUSEPORT, .value.integer = 0},
        /* With a token, no bandwidth-delay probing of what clients send: it
         * raises the window every new stream opens with to megabytes, which
         * a tokenless client fills before its call is refused (measured: 4
         * MB read, 0.7 ms of CPU and tens of MB of heap per refused call,
         * against 64 KB and 0.08 ms without). A request that is read gets
         * its whole length as its window anyway: 1-64 MiB Calls through a
         * worker measured the same either way. */
        {.type = GRPC_ARG_INTEGER,
         .key = GRPC_ARG_HTTP2_BDP_PROBE,
         .value.integer = token ? 0 : 1},
        /* Connections cost a file descriptor each: one that never speaks
         * HTTP/2, or opens no call for a while, is closed (a master's
         * channel reconnects on its next call), and one connection carries
         * at most so many calls at once. */
        {.type = GRPC_ARG_INTEGER,
         .key = GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
         .value.integer = RPC_HANDSHAKE_TIMEOUT_MS},
        {.type = GRPC_ARG_INTEGER,
         .key = GRPC_ARG_MAX_CONNECTION_IDLE_MS,
         .value.integer = RPC_MAX_CONNECTION_IDLE_MS},
        {.type = GRPC_ARG_INTEGER,
         .key = GRPC_ARG_MAX_CONCURRENT_STREAMS,
         .value.integer = RPC_MAX_CONCURRENT_STREAMS},
    };
    rpc_grpc_size_args(args, max_payload);
    grpc_channel_args srv_args = {.num_args = sizeof args / sizeof args[0], .args = args};
    return grpc_server_create(&srv_args, NULL);
}

/* Registers each method with gRPC. Returns 0, or FERRY_EINVAL for a
 * duplicate name. */
static int register_methods(rpc_server *s, const rpc_method *methods)
{
    for (size_t i = 0; i < s->n_methods; i++) {
        s->methods[i].m = methods[i];
        /* A method that needs the token gets its message only once the
         * token was seen (rpc_srv_call_post). */
        s->methods[i].handle =
            grpc_server_register_method(s->gs, methods[i].name, NULL,
                                        rpc_srv_needs_token(s, &s->methods[i])
                                            ? GRPC_SRM_PAYLOAD_NONE
                                            : GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER,
                                        0);
        if (!s->methods[i].handle) /* a duplicate name */
            return FERRY_EINVAL;
    }
    return 0;
}

/* The handler threads (twice the CPUs by default, at least 4) and the lane
 * thread. On failure, n_pool counts the threads to join. */
static int start_threads(rpc_server *s, int handler_threads)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    s->n_pool = handler_threads > 0 ? handler_threads : (int)(ncpu > 2 ? 2 * ncpu : 4);
    s->pool = calloc((size_t)s->n_pool, sizeof *s->pool);
    s->slots = calloc((size_t)s->n_pool, sizeof *s->slots);
    s->n_slots = s->slots ? s->n_pool : 0;
    if (!s->pool || !s->slots) {
        s->n_pool = 0; /* no thread to join */
        return FERRY_ENOMEM;
    }
    for (int i = 0; i < s->n_pool; i++) {
        int rc = uv_thread_create(&s->pool[i], pool_thread, s);
        if (rc) {
            s->n_pool = i;
            return rc;
        }
    }
    int rc = uv_thread_create(&s->lane, lane_thread, s);
    if (rc)
        return rc;
    s->lane_started = true;
    return 0;
}

int rpc_server_create(const rpc_server_opts *opts, const rpc_method *methods,
                      size_t n_methods, rpc_server **out)
{
    char host[256];
    const char *port;
    if (!opts || !opts->listen || (n_methods && !methods) ||
        !split_listen(opts->listen, host, &port))
        return FERRY_EINVAL;
    size_t max_payload = opts->max_payload ? opts->max_payload : RPC_DEFAULT_MAX_PAYLOAD;
    if (max_payload > RPC_MAX_PAYLOAD_LIMIT)
        return FERRY_EINVAL;
    for (size_t i = 0; i < n_methods; i++)
        if (!methods[i].name || !methods[i].handler)
            return FERRY_EINVAL;

    rpc_server *s = calloc(1, sizeof *s);
    if (!s)
        return FERRY_ENOMEM;
    grpc_init();
    uv_mutex_init(&s->lock);
    uv_cond_init(&s->work.cond);
    uv_cond_init(&s->lane_work.cond);
    uv_cond_init(&s->drained);
    s->max_payload = max_payload;
    snprintf(s->host, sizeof s->host, "%s", host);
    s->shutdown_tag.done = shutdown_done;
    s->log = opts->log;
    s->log_arg = opts->log_arg;
    s->refusals.interval_ns =
        (uint64_t)(opts->log_interval_ms > 0 ? opts->log_interval_ms : 10000) * 1000000u;
    int rc = FERRY_ENOMEM;
    if (opts->token) {
        s->token_len = strlen(opts->token);
        if (!(s->token = strdup(opts->token)))
            goto fail;
    }
    if (opts->version && !(s->version = strdup(opts->version)))
        goto fail;

    s->n_methods = n_methods;
    s->methods = calloc(n_methods ? n_methods : 1, sizeof *s->methods);
    if (!s->methods)
        goto fail;

    s->gs = grpc_server_for(max_payload, opts->token != NULL);
    if (!s->gs)
        goto fail;
    /* The queue's thread exists before the server starts, so that a
     * failure from here on can always shut down through it. */
    if ((s->poller = opts->poller))
        rc = 0;
    else if ((rc = rpc_poller_create(&s->poller)) == 0)
        s->own_poller = true;
    if (rc || (rc = rpc_poller_hook(s->poller, refusals_hook, s)))
        goto fail;
    s->hooked = true;
    s->cq = s->poller->cq;
    grpc_server_register_completion_queue(s->gs, s->cq, NULL);

    if ((rc = register_methods(s, methods)))
        goto fail;

    s->tls = rpc_tls_enabled();
    grpc_server_credentials *creds = rpc_tls_server_credentials();
    if (!creds) { /* TLS without a certificate of its own to show */
        rc = FERRY_EINVAL;
        goto fail;
    }
    s->port = grpc_server_add_http2_port(s->gs, opts->listen, creds);
    grpc_server_credentials_release(creds);
    if (s->port <= 0) {
        rc = probe_bind(host, port) == FERRY_EADDRINUSE ? FERRY_EADDRINUSE : FERRY_EINVAL;
        goto fail;
    }
    grpc_server_start(s->gs);
    s->started = true;

    if ((rc = start_threads(s, opts->handler_threads)))
        goto fail;

    /* No call is served before a request is posted for it, and a handler
     * may read what *out points to (a worker's Stats and Shutdown read its
     * server): set it first. A worker's port is known before it listens,
     * and `ferry start` asks for its Stats as soon as the port answers. */
    *out = s;
    for (size_t i = 0; i < n_methods; i++)
        for (int k = 0; k < REQUESTS_PER_METHOD; k++)
            if ((rc = rpc_srv_call_post(s, &s->methods[i])))
                goto fail;
    for (int k = 0; k < 2; k++)
        if ((rc = rpc_srv_call_post(s, NULL)))
            goto fail;
    return 0;

fail:
    /* Handlers already served may read *out until the shutdown has
     * drained them. */
    if (s->started)
        rpc_server_shutdown(s, 0); /* destroys s->gs */
    *out = NULL;
    server_free(s);
    return rc;
}

int rpc_server_port(const rpc_server *s)
{
    return s->port;
}

/* ---- is the listener still accepting? ----------------------------------- */

static int probe_fail(int fd, int rc)
{
    close(fd);
    return rc;
}

int rpc_server_probe(const rpc_server *s, int timeout_ms)
{
    /* A wildcard address is probed on loopback. */
    const char *host = s->host;
    if (!host[0] || strcmp(host, "0.0.0.0") == 0)
        host = "127.0.0.1";
    else if (strcmp(host, "::") == 0)
        host = "::1";
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai;
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        return FERRY_EINVAL;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int rc = -errno; /* out of descriptors ourselves: no verdict */
        freeaddrinfo(ai);
        return rc;
    }
    int c = connect(fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (c != 0 && errno != EINPROGRESS)
        return probe_fail(fd, FERRY_EUNAVAIL);
    uint64_t end = uv_hrtime() + (uint64_t)timeout_ms * 1000000u;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    if (poll(&p, 1, timeout_ms) != 1 || (p.revents & (POLLERR | POLLHUP)))
        return probe_fail(fd, FERRY_EUNAVAIL);
    /* The client preface and an empty SETTINGS frame: a live server
     * answers with its own SETTINGS at once. The kernel completes the TCP
     * handshake from its backlog even when nobody accepts, so only an
     * answer tells. */
    static const char hello[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                "\0\0\0\x04\0\0\0\0\0";
    if (s->tls ? rpc_tls_hello(fd) != 0
               : send(fd, hello, sizeof hello - 1, MSG_NOSIGNAL) !=
                     (ssize_t)(sizeof hello - 1))
        return probe_fail(fd, FERRY_EUNAVAIL);
    uint64_t now = uv_hrtime();
    p = (struct pollfd){.fd = fd, .events = POLLIN};
    if (now >= end || poll(&p, 1, (int)((end - now) / 1000000u)) != 1)
        return probe_fail(fd, FERRY_EUNAVAIL);
    char buf[64];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    return probe_fail(fd, n > 0 ? 0 : FERRY_EUNAVAIL);
}

/* gRPC's own shutdown refuses every new call at once, pings included, and
 * closes the listener: a caller whose heartbeat pings on a connection of
 * its own would take the worker for dead and give up on the very calls the
 * grace is for. So the pool's calls finish first, with the server still
 * answering. Polled: a pool thread's end signals nobody before stopping. */
static void drain(rpc_server *s, uint64_t deadline)
{
    atomic_store(&s->draining, true);
    for (;;) {
        rpc_slots_info in;
        rpc_server_slots(s, &in);
        if ((in.busy == 0 && in.queued == 0) || uv_hrtime() >= deadline)
            return;
        usleep(DRAIN_POLL_US);
    }
}

void rpc_server_shutdown(rpc_server *s, int64_t grace_ms)
{
    if (!s || s->shut)
        return;
    s->shut = true;

    uint64_t deadline = uv_hrtime() + (uint64_t)(grace_ms > 0 ? grace_ms : 0) * 1000000u;
    drain(s, deadline);
    uv_mutex_lock(&s->lock);
    s->stopping = true;
    uv_mutex_unlock(&s->lock);
    grpc_server_shutdown_and_notify(s->gs, s->cq, &s->shutdown_tag);
    uv_mutex_lock(&s->lock);
    while (!s->shutdown_done) {
        uint64_t now = uv_hrtime();
        if (now >= deadline ||
            uv_cond_timedwait(&s->drained, &s->lock, deadline - now) != 0)
            break;
    }
    bool graceful = s->shutdown_done;
    uv_mutex_unlock(&s->lock);
    if (!graceful)
        grpc_server_cancel_all_calls(s->gs);

    /* Cancelled calls still belong to their handlers until they end them;
     * unmatched requests come back failed. Wait until no call object is left. */
    uv_mutex_lock(&s->lock);
    while (!s->shutdown_done || s->live_calls > 0)
        uv_cond_wait(&s->drained, &s->lock);
    s->pool_exit = true;
    uv_cond_broadcast(&s->work.cond);
    uv_cond_broadcast(&s->lane_work.cond);
    uv_mutex_unlock(&s->lock);
    for (int i = 0; i < s->n_pool; i++)
        uv_thread_join(&s->pool[i]);
    s->n_pool = 0;
    if (s->lane_started)
        uv_thread_join(&s->lane);
    s->lane_started = false;

    grpc_server_destroy(s->gs);
    s->gs = NULL;
}

void rpc_server_destroy(rpc_server *s)
{
    if (!s)
        return;
    rpc_server_shutdown(s, 0);
    server_free(s);
}
