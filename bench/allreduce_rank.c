/* bench/allreduce — one ferry rank, in its own forked process: an
 * rpc_server for ReduceChunk, an rt_hub and one rt_comm, then the plan. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allreduce_ranks.h"
#include "ferry/error.h"
#include "rpc/rpc.h"
#include "runtime/collective/collective.h"
#include "stats.h"

/* Every rank's session has this id: ranks of one run are one session. */
#define SESSION 0xfe77u
/* Workers always check a cluster token on every chunk: so do the ranks. */
#define TOKEN "bench-allreduce-5f0c2a9e7d41b386"
/* The ranks are processes of one run: they share a secret as a master's
 * workers do (its value does not matter to the timing). */
static const uint8_t secret[RT_COMM_SECRET_BYTES] = {0x5e, 0xc7, 0xe7};
/* Floats in the barrier's all-reduce: a few, so that every segment of the
 * ring has one. */
#define BARRIER_FLOATS 64

typedef struct rank {
    int rank, world;
    const ar_ferry_opts *o;
    int up, down;
    rpc_poller *poller;
    rt_hub *hub;
    rpc_server *server;
    rt_comm *comm;
    float *buf;
    ar_rank_result res;
} rank;

static bool put(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        c += w, n -= (size_t)w;
    }
    return true;
}

static bool get(int fd, void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        c += r, n -= (size_t)r;
    }
    return true;
}

/* Reports a failure to the parent (once the port is out, it reads an
 * ar_rank_result; before, only stderr and the exit status say it). */
static _Noreturn void fail(rank *k, bool ready, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void fail(rank *k, bool ready, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(k->res.err, sizeof k->res.err, "rank %d: ", k->rank);
    vsnprintf(k->res.err + n, sizeof k->res.err - (size_t)n, fmt, ap);
    va_end(ap);
    k->res.status = rc ? rc : FERRY_EINVAL;
    dprintf(2, "bench/allreduce: %s\n", k->res.err);
    if (ready)
        put(k->up, &k->res, sizeof k->res);
    _exit(2);
}

static void start_server(rank *k)
{
    int rc = rpc_poller_create(&k->poller);
    if (rc == 0)
        rc = rt_hub_create(k->poller, &k->hub);
    if (rc)
        fail(k, false, rc, "rt_hub_create: %s", ferry_strerror(rc));
    const rpc_method m = {PROTO_METHOD_REDUCE_CHUNK, rt_reduce_chunk_handler, k->hub,
                          RT_REDUCE_CHUNK_FLAGS, 0};
    /* The largest chunk is a whole segment at most; rpc's default limit
     * (1 GiB) covers every size of the plan. */
    char listen[64];
    snprintf(listen, sizeof listen, "%s:0",
             k->o->host ? k->o->host[k->rank] : "127.0.0.1");
    rpc_server_opts so = {.listen = listen, .poller = k->poller, .token = TOKEN};
    rc = rpc_server_create(&so, &m, 1, &k->server);
    if (rc)
        fail(k, false, rc, "rpc_server_create: %s", ferry_strerror(rc));
}

static void open_comm(rank *k)
{
    int32_t port = rpc_server_port(k->server);
    int32_t ports[AR_MAX_RANKS];
    if (!put(k->up, &port, sizeof port) ||
        !get(k->down, ports, sizeof ports[0] * (size_t)k->world))
        fail(k, false, FERRY_EPROTO, "lost the parent while exchanging ports");
    char addr[AR_MAX_RANKS][80];
    const char *peers[AR_MAX_RANKS];
    for (int i = 0; i < k->world; i++) {
        snprintf(addr[i], sizeof addr[i], "%s:%d",
                 k->o->host ? k->o->host[i] : "127.0.0.1", (int)ports[i]);
        peers[i] = addr[i];
    }
    rt_comm_opts co = {
        .session = SESSION,
        .rank = k->rank,
        .world = k->world,
        .peers = peers,
        .chunk_bytes = k->o->chunk_bytes,
        .compress = RT_COMPRESS_NONE,
        .timeout_ms = k->o->timeout_ms,
        .token = TOKEN,
        .secret = secret,
    };
    char err[256] = "";
    int rc = rt_comm_create(k->hub, &co, &k->comm, err, sizeof err);
    if (rc)
        fail(k, true, rc, "rt_comm_create: %s: %s", ferry_strerror(rc), err);
}

static void allreduce(rank *k, float *buf, size_t n, const char *what)
{
    char err[400] = "";
    int rc = rt_comm_allreduce(k->comm, buf, n, NULL, NULL, err, sizeof err);
    if (rc)
        fail(k, true, rc, "%s of %zu floats: %s: %s", what, n, ferry_strerror(rc), err);
}

static void barrier(rank *k)
{
    float b[BARRIER_FLOATS] = {0};
    allreduce(k, b, BARRIER_FLOATS, "barrier");
}

static void run_allreduce(void *arg, size_t n, const char *what)
{
    rank *k = arg;
    allreduce(k, k->buf, n, what);
}

/* The parent takes the slowest rank's times. */
static double run_barrier(void *arg, double v)
{
    barrier(arg);
    return v;
}

static void run_abort(void *arg, const char *why)
{
    fail(arg, true, FERRY_EPROTO, "%s", why);
}

static void run_times(void *arg, int step, const double *secs, int reps)
{
    rank *k = arg;
    memcpy(k->res.secs[step], secs, sizeof secs[0] * (size_t)reps);
}

void ar_rank_main(int rank_no, const ar_plan *plan, const ar_ferry_opts *o, int up,
                  int down)
{
    rank k = {.rank = rank_no, .world = o->world, .o = o, .up = up, .down = down};
    rpc_tune_malloc();
    if (o->tls_dir) {
        char cert[4200], key[4200], ca[4200], err[600] = "";
        snprintf(cert, sizeof cert, "%s/server.pem", o->tls_dir);
        snprintf(key, sizeof key, "%s/server.key", o->tls_dir);
        snprintf(ca, sizeof ca, "%s/ca.pem", o->tls_dir);
        rpc_tls_files f = {.cert = cert, .key = key, .ca = ca};
        if (rpc_tls_use(&f, err, sizeof err))
            fail(&k, true, FERRY_EINVAL, "--tls: %s", err);
    }
    start_server(&k);
    open_comm(&k);
    k.buf = aligned_alloc(64, (ar_plan_max_bytes(plan) + 63) / 64 * 64);
    if (!k.buf)
        fail(&k, true, FERRY_ENOMEM, "no memory for %zu bytes", ar_plan_max_bytes(plan));
    ar_runner run = {.impl = "ferry",
                     .rank = k.rank,
                     .world = k.world,
                     .buf = k.buf,
                     .arg = &k,
                     .allreduce = run_allreduce,
                     .max = run_barrier,
                     .abort = run_abort,
                     .times = run_times};
    ar_run_plan(plan, &run);
    barrier(&k);
    if (!put(up, &k.res, sizeof k.res))
        _exit(3);
    /* Tear down only once the parent has every result: no rank closes its
     * server while another could still be sending to it. */
    char c;
    while (read(down, &c, 1) < 0 && errno == EINTR)
        ;
    uint64_t t0 = bench_now_ns();
    rt_comm_destroy(k.comm);
    uint64_t t1 = bench_now_ns();
    rpc_server_shutdown(k.server, 1000);
    rpc_server_destroy(k.server);
    uint64_t t2 = bench_now_ns();
    rt_hub_destroy(k.hub);
    rpc_poller_destroy(k.poller);
    free(k.buf);
    /* The parent gives a rank 5 s to exit: say where a slow one spent it. */
    if (bench_now_ns() - t0 > 1000000000u)
        dprintf(2,
                "bench/allreduce: rank %d: rt_comm_destroy took %.2f s, the server's "
                "shutdown %.2f s\n",
                k.rank, (double)(t1 - t0) / 1e9, (double)(t2 - t1) / 1e9);
    _exit(0);
}
