/* rt_worker: the worker's gRPC service — its method table, the token every
 * method but Ping must carry, Stats and Shutdown.
 *
 * The token is rpc's to check (rpc_server_opts.token): every method but Ping
 * is registered as needing it, so no handler can forget it, and a call
 * without it is refused from its metadata, before its message is read,
 * decoded or decompressed. Refusals reach the log as rate-limited summaries
 * (log_line). Ping's request, read before any check, is capped at
 * RPC_PUBLIC_MAX_PAYLOAD.
 *
 * Ping, Stats and Shutdown run inline on the completion-queue thread: the
 * handler pool is the executor, and with as many long Calls as it has
 * threads anything queued there waits for a Call to end — `ferry status`
 * would get no Stats and `ferry shutdown` would not be heard. So these three
 * must never block: they read atomics, take the module list's short lock and
 * log with one write(2) (no stdio lock that a pool thread may hold). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "runtime/device/device.h"
#include "runtime_int.h"
#include "where.h"

/* One line to stderr in one write(2), taking no stdio lock. */
static void say(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof line - 1 ? (size_t)n : sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w; /* nowhere to report a failed log line */
}

/* rpc's log: refusals, summarised. On the completion-queue thread. */
static void log_line(void *arg, const char *line)
{
    (void)arg;
    say("ferry worker: %s", line);
}

/* A module's name comes from the wire and goes on into logs, the crash
 * record, `ferry status` and error texts: it is escaped and cut here, where
 * it enters, and only the escaped name goes on. Then the load is logged.
 * The request is decoded here once; the load takes its view. */
static void load_module_handler(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    proto_load_module_req *in = NULL;
    if (proto_load_module_req_unpack(req->head, req->head_len, &in)) {
        rpc_srv_fail(sc, FERRY_EINVAL, "LoadModule: request is not a LoadModuleRequest");
        return;
    }
    char name[RT_MODULE_NAME_MAX], sha[112];
    base_escape(name, sizeof name, in->name, strlen(in->name));
    base_escape(sha, sizeof sha, in->sha256, strlen(in->sha256));
    say("ferry worker: LoadModule %s (sha256 %s, %zu bytes) from %s", name, sha,
        req->payload_len, rpc_srv_peer(sc));
    rt_load_module(sc, data, in->sha256, name, req);
    proto_free(in);
}

static void stats_handler(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)req;
    rt_worker *w = data;
    proto_stats_reply out = {0};
    out.calls_served = atomic_load(&w->stats.calls_served);
    out.in_flight = atomic_load(&w->stats.in_flight);
    out.calls_failed = atomic_load(&w->stats.calls_failed);
    out.modules_loaded = (uint32_t)rt_modcache_count(w->cache);
    out.uptime_s = (double)uv_hrtime() / 1e9 - w->id.started;
    out.restarts = w->id.restarts;
    out.last_crash = w->id.last_crash;
    rpc_slots_info slots;
    char holders[1024];
    rpc_server_slots(w->srv, &slots);
    rpc_server_holders(w->srv, holders, sizeof holders);
    out.slots = (uint32_t)slots.slots;
    out.busy_slots = (uint32_t)slots.busy;
    out.stuck_calls = (uint32_t)slots.stuck;
    out.oldest_call_s = slots.oldest_s;
    out.oldest_call = slots.oldest;
    out.slot_holders = holders;
    out.queued_calls = (uint32_t)slots.queued;
    out.train_epochs = atomic_load(&w->stats.train_epochs);
    out.train_steps = atomic_load(&w->stats.train_steps);
    uint64_t bits = atomic_load(&w->stats.train_rate_bits);
    memcpy(&out.train_samples_per_s, &bits, sizeof bits);
    rt_where_stats where;
    rt_where_to_stats(&where, &out);
    proto_bytes head;
    rt_reply_packed(sc, proto_stats_reply_pack(&out, &head), &head, "Stats");
}

static void shutdown_handler(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    rt_worker *w = data;
    proto_shutdown_req *in = NULL;
    if (proto_shutdown_req_unpack(req->head, req->head_len, &in)) {
        rpc_srv_fail(sc, FERRY_EINVAL, "Shutdown: request is not a ShutdownRequest");
        return;
    }
    atomic_store(&w->shutdown_grace_ms, (long long)in->grace_ms);
    say("ferry worker: Shutdown from %s (grace %u ms)", rpc_srv_peer(sc), in->grace_ms);
    proto_free(in);
    rpc_msg_out reply = {0}; /* ShutdownReply is empty */
    rpc_srv_reply(sc, &reply);
    rt_worker_stop(w);
}

static void worker_free(rt_worker *w)
{
    /* Pulls parked by a staleness bound end only when answered: the server
     * would wait for them forever. */
    rt_ps_store_shutdown(w->ps);
    rt_train_holds_close(w);
    rpc_server_destroy(w->srv);
    /* The session computes with a module's model on the device: it ends
     * before either goes. */
    rt_train_session_free(w);
    rt_hub_destroy(w->hub);
    rt_ps_store_destroy(w->ps);
    rpc_poller_destroy(w->poller);
    rt_device_close(w->device);
    rt_modcache_destroy(w->cache);
    rt_rendezvous_free(w->rendezvous);
    rt_datacache_destroy(w->datacache);
    pthread_mutex_destroy(&w->train_lock);
    for (int i = 0; i < 2; i++)
        if (w->stop_pipe[i] >= 0)
            close(w->stop_pipe[i]);
    if (w->token) {
        explicit_bzero(w->token, w->token_len);
        free(w->token);
    }
    free(w);
}

int rt_worker_create(const rt_worker_opts *opts, rt_worker **out)
{
    *out = NULL;
    if (!opts || !opts->listen || !opts->state_dir || !opts->state_dir[0] ||
        !opts->token || !opts->token[0])
        return FERRY_EINVAL;
    char crash[4096], cache[4096], data[4096];
    if (conf_home_path(crash, sizeof crash, opts->state_dir, "crash") ||
        conf_home_path(cache, sizeof cache, opts->state_dir, "cache") ||
        conf_home_path(data, sizeof data, opts->state_dir, "data"))
        return FERRY_ERANGE;
    int rc = conf_mkdirs(opts->state_dir, 0700);
    if (rc)
        return rc;

    rt_worker *w = calloc(1, sizeof *w);
    if (!w)
        return FERRY_ENOMEM;
    w->stop_pipe[0] = w->stop_pipe[1] = -1;
    pthread_mutex_init(&w->train_lock, NULL);
    rt_call_register(w, &rt_train_builtins);
    atomic_store(&w->shutdown_grace_ms, -1);
    w->token_len = strlen(opts->token);
    if (!(w->token = strdup(opts->token))) {
        rc = FERRY_ENOMEM;
        goto fail;
    }
    /* Only the write end is non-blocking: a signal handler must never block
     * on it, while rt_worker_wait() sleeps on the read end. */
    if (pipe2(w->stop_pipe, O_CLOEXEC) != 0 ||
        fcntl(w->stop_pipe[1], F_SETFL, O_NONBLOCK) != 0) {
        rc = -errno;
        goto fail;
    }
    w->id.rank = opts->rank;
    w->id.started = (double)uv_hrtime() / 1e9;
    w->id.restarts = opts->restarts;
    rt_crash_read(crash, &w->id);
    char why[512] = "";
    if ((rc = rt_device_open(opts->device, &w->device, why, sizeof why))) {
        fprintf(stderr, "ferry worker: %s\n", why);
        goto fail;
    }
    snprintf(w->id.device, sizeof w->id.device, "%s", w->device->description);
    if ((rc = rt_modcache_create(cache, &w->cache)) || (rc = rpc_poller_create(&w->poller)) ||
        (rc = rt_hub_create(w->poller, &w->hub)) || (rc = rt_ps_store_create(&w->ps)))
        goto fail;
    if ((rc = rt_datacache_create(data, opts->data_cache_bytes, &w->datacache)))
        goto fail;
    if (opts->rank == 0 && opts->world_size > 0 && opts->rendezvous &&
        (rc = rt_rendezvous_create(opts->world_size, opts->rendezvous, &w->rendezvous)))
        goto fail;

    /* LoadModule writes a file and dlopens, so it stays on the pool and,
     * like Call, queues behind Calls that occupy every pool thread. Every
     * method but Ping needs the token (rpc checks it). */
    static const struct {
        const char *name;
        rpc_handler handler;
        unsigned flags;
    } guarded_methods[RT_GUARDED_METHODS] = {
        {PROTO_METHOD_LOAD_MODULE, load_module_handler, RPC_METHOD_NEW_WORK},
        {PROTO_METHOD_CALL, rt_call_handler, RPC_METHOD_NEW_WORK},
        {PROTO_METHOD_STATS, stats_handler, RPC_METHOD_INLINE},
        {PROTO_METHOD_SHUTDOWN, shutdown_handler, RPC_METHOD_INLINE},
        /* Files the chunk and reduces it unless the session is busy
         * elsewhere: never blocks. */
        {PROTO_METHOD_REDUCE_CHUNK, rt_reduce_chunk_handler, RT_REDUCE_CHUNK_FLAGS},
        /* A push steps the shard's optimizer: the pool. */
        {PROTO_METHOD_PUSH, rt_ps_push_handler, 0},
        {PROTO_METHOD_PULL, rt_ps_pull_handler, 0},
        /* Parked for a run, returning at once: on the pool, whose calls
         * learn when their caller goes. */
        {PROTO_METHOD_TRAIN_HOLD, rt_train_hold_handler, 0},
        {PROTO_METHOD_RENDEZVOUS, rt_rendezvous_handler, RPC_METHOD_INLINE},
        /* Writes and hashes files: the pool. */
        {PROTO_METHOD_PUT_DATA, rt_put_data_handler, 0},
    };
    rpc_method methods[1 + RT_GUARDED_METHODS] = {
        {PROTO_METHOD_PING, rt_ping_handler, &w->id,
         RPC_METHOD_INLINE | RPC_METHOD_PUBLIC, 0},
    };
    for (int i = 0; i < RT_GUARDED_METHODS; i++) {
        /* ReduceChunk's data is the hub, Push's and Pull's the store. */
        rpc_handler h = guarded_methods[i].handler;
        void *data = h == rt_reduce_chunk_handler                      ? (void *)w->hub
                     : h == rt_ps_push_handler || h == rt_ps_pull_handler ? (void *)w->ps
                                                                          : (void *)w;
        methods[1 + i] = (rpc_method){guarded_methods[i].name, h, data, guarded_methods[i].flags,
                                      h == load_module_handler ? opts->max_module : 0};
    }
    rpc_server_opts so = {
        .listen = opts->listen,
        .max_payload = opts->max_payload,
        .handler_threads = opts->threads,
        .poller = w->poller,
        .token = opts->token,
        .version = PROTO_VERSION,
        .log = log_line,
        .log_interval_ms = opts->log_interval_ms,
    };
    if ((rc = rpc_server_create(&so, methods, 1 + RT_GUARDED_METHODS, &w->srv)))
        goto fail;
    *out = w;
    return 0;

fail:
    worker_free(w);
    return rc;
}

int rt_worker_port(const rt_worker *w)
{
    return rpc_server_port(w->srv);
}

bool rt_worker_wait_or(rt_worker *w, int fd)
{
    /* The stop byte is never read: rt_worker_stop() sets the flag before it
     * writes, so a readable pipe always finds the flag set, and any number
     * of waiters all wake. */
    struct pollfd p[2] = {{.fd = w->stop_pipe[0], .events = POLLIN},
                          {.fd = fd, .events = POLLIN}};
    nfds_t n = fd >= 0 ? 2 : 1;
    while (!atomic_load(&w->stopped)) {
        if (poll(p, n, -1) < 0) {
            if (errno != EINTR)
                return false;
            continue;
        }
        if (n == 2 && p[1].revents)
            return true;
    }
    return false;
}

void rt_worker_wait(rt_worker *w)
{
    rt_worker_wait_or(w, -1);
}

void rt_worker_stop(rt_worker *w)
{
    int saved = errno;
    atomic_store(&w->stopped, true);
    ssize_t n = write(w->stop_pipe[1], "x", 1);
    (void)n; /* a full pipe already holds a wake-up */
    errno = saved;
}

void rt_worker_destroy(rt_worker *w, int64_t grace_ms)
{
    if (!w)
        return;
    long long asked = atomic_load(&w->shutdown_grace_ms);
    rt_ps_store_shutdown(w->ps);
    rt_train_holds_close(w);
    rpc_server_shutdown(w->srv, asked >= 0 ? asked : grace_ms);
    worker_free(w);
}
