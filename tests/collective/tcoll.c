/* tests/collective — the shared fixture. */
#include "tcoll.h"
#include "tcommon.h"
#include "proto/raw.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

co_ring R;

/* ---- fixture ------------------------------------------------------------------- */

void co_setup(void)
{
    memset(&R, 0, sizeof R);
}

static int release_all(void)
{
    co_leave_all();
    if (R.ch)
        rpc_channel_destroy(R.ch);
    R.ch = NULL;
    if (R.client)
        rpc_client_close(R.client);
    R.client = NULL;
    int rc = 0;
    if (R.loop_open) {
        uv_run(&R.loop, UV_RUN_DEFAULT);
        rc = uv_loop_close(&R.loop);
        if (rc != 0)
            uv_print_all_handles(&R.loop, stderr);
        else
            R.loop_open = false;
    }
    for (int i = 0; i < CO_MAX_RANKS; i++) {
        rpc_server_destroy(R.r[i].server);
        R.r[i].server = NULL;
    }
    for (int i = 0; i < CO_MAX_RANKS; i++) {
        rt_hub_destroy(R.r[i].hub);
        R.r[i].hub = NULL;
        rpc_poller_destroy(R.r[i].poller);
        R.r[i].poller = NULL;
    }
    for (size_t i = 0; i < sizeof R.allocs / sizeof R.allocs[0]; i++) {
        free(R.allocs[i]);
        R.allocs[i] = NULL;
    }
    rpc_buf_trim();
    return rc;
}

void co_teardown(void)
{
    if (!R.finished)
        release_all();
}

void co_finish(void)
{
    int rc = release_all();
    R.finished = true;
    cr_assert(rc == 0, "uv_loop_close: %s (a handle was left open)", uv_err_name(rc));
    tcom_assert_no_leaks();
}

void co_make_hub(int rank)
{
    int rc = rpc_poller_create(&R.r[rank].poller);
    cr_assert(rc == 0, "rpc_poller_create: %s", ferry_err_name(rc));
    rc = rt_hub_create(R.r[rank].poller, &R.r[rank].hub);
    cr_assert(rc == 0, "rt_hub_create: %s", ferry_err_name(rc));
}

void co_start(int world)
{
    cr_assert(world >= 1 && world <= CO_MAX_RANKS);
    R.world = world;
    for (int i = 0; i < world; i++) {
        co_make_hub(i);
        /* The name string must outlive the server: a literal does. */
        rpc_method m = {PROTO_METHOD_REDUCE_CHUNK, rt_reduce_chunk_handler, R.r[i].hub,
                        RT_REDUCE_CHUNK_FLAGS, 0};
        rpc_server_opts so = {.listen = "127.0.0.1:0",
                              .max_payload = CO_MAX_PAYLOAD,
                              .poller = R.r[i].poller};
        int rc = rpc_server_create(&so, &m, 1, &R.r[i].server);
        cr_assert(rc == 0, "rpc_server_create: %s", ferry_err_name(rc));
        int port = rpc_server_port(R.r[i].server);
        cr_assert(port > 0 && port < 65536, "rpc_server_port returned %d", port);
        snprintf(R.r[i].addr, sizeof R.r[i].addr, "127.0.0.1:%d", port);
        R.peers[i] = R.r[i].addr;
    }
}

void co_stop_server(int rank)
{
    rpc_server_destroy(R.r[rank].server);
    R.r[rank].server = NULL;
}

int co_listen_again(int rank)
{
    rpc_method m = {PROTO_METHOD_REDUCE_CHUNK, rt_reduce_chunk_handler, R.r[rank].hub,
                    RT_REDUCE_CHUNK_FLAGS, 0};
    rpc_server_opts so = {
        .listen = R.r[rank].addr, .max_payload = CO_MAX_PAYLOAD, .poller = R.r[rank].poller};
    return rpc_server_create(&so, &m, 1, &R.r[rank].server);
}

const uint8_t co_secret[RT_COMM_SECRET_BYTES] = {0xc0, 0x5e, 0xc7, 0x3e, 0x7a, 0x11,
                                                 0x0d, 0x2b, 0x95, 0x48, 0xe6, 0x01};

ProtobufCBinaryData co_secret_field(void)
{
    return (ProtobufCBinaryData){.len = sizeof co_secret, .data = (uint8_t *)co_secret};
}

rt_comm_opts co_opts(uint64_t session, size_t chunk_bytes, rt_compress compress,
                     int64_t timeout_ms)
{
    return (rt_comm_opts){.session = session,
                          .secret = co_secret,
                          .world = R.world,
                          .peers = R.peers,
                          .chunk_bytes = chunk_bytes,
                          .compress = compress,
                          .timeout_ms = timeout_ms,
                          .max_payload = CO_MAX_PAYLOAD};
}

int co_join(int rank, const rt_comm_opts *o, char *err, size_t errlen)
{
    rt_comm_opts mine = *o;
    mine.rank = rank;
    mine.world = R.world;
    mine.peers = R.peers;
    return rt_comm_create(R.r[rank].hub, &mine, &R.r[rank].comm, err, errlen);
}

int co_join2(int rank, const rt_comm_opts *o, char *err, size_t errlen)
{
    rt_comm_opts mine = *o;
    mine.rank = rank;
    mine.world = R.world;
    mine.peers = R.peers;
    return rt_comm_create(R.r[rank].hub, &mine, &R.r[rank].comm2, err, errlen);
}

void co_join_all(const rt_comm_opts *o)
{
    for (int i = 0; i < R.world; i++) {
        char err[CO_ERRLEN] = "";
        int rc = co_join(i, o, err, sizeof err);
        cr_assert(rc == 0, "rank %d: rt_comm_create: %s: %s", i, ferry_err_name(rc), err);
        cr_assert(rt_comm_rank(R.r[i].comm) == i);
        cr_assert(rt_comm_world(R.r[i].comm) == R.world);
    }
}

void co_leave_all(void)
{
    for (int i = 0; i < CO_MAX_RANKS; i++) {
        rt_comm_destroy(R.r[i].comm);
        R.r[i].comm = NULL;
        rt_comm_destroy(R.r[i].comm2);
        R.r[i].comm2 = NULL;
    }
}

/* ---- threads -------------------------------------------------------------------- */

typedef struct job {
    int rank;
    co_fn fn;
    void *arg;
    co_result *res;
} job;

static void *job_main(void *p)
{
    job *j = p;
    j->res->err[0] = 0;
    j->res->start_ms = co_now_ms();
    j->res->rc = j->fn(j->rank, j->arg, j->res->err, sizeof j->res->err);
    j->res->end_ms = co_now_ms();
    return NULL;
}

void co_run(co_fn fn, void *arg, co_result res[CO_MAX_RANKS])
{
    pthread_t t[CO_MAX_RANKS];
    job jobs[CO_MAX_RANKS];
    for (int i = 0; i < R.world; i++) {
        jobs[i] = (job){.rank = i, .fn = fn, .arg = arg, .res = &res[i]};
        cr_assert(pthread_create(&t[i], NULL, job_main, &jobs[i]) == 0);
    }
    /* A rank that never returns hangs here until the suite's .timeout. */
    for (int i = 0; i < R.world; i++)
        pthread_join(t[i], NULL);
}

void co_run_ok(co_fn fn, void *arg, const char *what)
{
    co_result res[CO_MAX_RANKS];
    co_run(fn, arg, res);
    /* Every rank's failure in one message: the first is often a
     * consequence of another's. */
    char all[CO_MAX_RANKS * (CO_ERRLEN + 64)] = "";
    size_t at = 0;
    bool failed = false;
    for (int i = 0; i < R.world; i++) {
        failed |= res[i].rc != 0;
        at += (size_t)snprintf(
            all + at, sizeof all - at, "\n  rank %d after %.0f ms: %s%s%s", i,
            res[i].end_ms - res[i].start_ms, res[i].rc ? ferry_err_name(res[i].rc) : "ok",
            res[i].rc ? ": " : "", res[i].rc ? res[i].err : "");
    }
    cr_assert(!failed, "%s:%s", what, all);
}

int co_allreduce_fn(int rank, void *arg, char *err, size_t errlen)
{
    co_allreduce_arg *a = arg;
    return rt_comm_allreduce(R.r[rank].comm, a->bufs[rank], a->n, NULL, NULL, err,
                             errlen);
}

int co_allreduce_all_but_fn(int rank, void *arg, char *err, size_t errlen)
{
    co_silent_arg *s = arg;
    return rank == s->silent ? 0 : co_allreduce_fn(rank, &s->a, err, errlen);
}

int co_broadcast_fn(int rank, void *arg, char *err, size_t errlen)
{
    co_broadcast_arg *a = arg;
    return rt_comm_broadcast(R.r[rank].comm, a->bufs[rank], a->n, a->root, NULL, NULL,
                             err, errlen);
}

/* ---- data ------------------------------------------------------------------------ */

void *co_alloc(size_t len)
{
    void *p = malloc(len ? len : 1);
    cr_assert(p, "no memory for %zu bytes of test data", len);
    for (size_t i = 0; i < sizeof R.allocs / sizeof R.allocs[0]; i++)
        if (!R.allocs[i]) {
            R.allocs[i] = p;
            return p;
        }
    free(p);
    cr_assert_fail("co_alloc: more than %zu live allocations",
                   sizeof R.allocs / sizeof R.allocs[0]);
    return NULL;
}

void co_free(void *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < sizeof R.allocs / sizeof R.allocs[0]; i++)
        if (R.allocs[i] == p)
            R.allocs[i] = NULL;
    free(p);
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void co_fill_random(float *x, size_t n, uint64_t seed)
{
    uint64_t s = seed * 0x2545f4914f6cdd1dull + 1;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((double)(splitmix(&s) >> 40) * 0x1p-23 - 1.0);
}

float **co_bufs(int world, size_t n, uint64_t seed)
{
    float **b = co_alloc((size_t)world * sizeof *b);
    for (int r = 0; r < world; r++) {
        b[r] = co_alloc((n ? n : 1) * sizeof(float));
        co_fill_random(b[r], n, seed * 16 + (uint64_t)r);
    }
    return b;
}

void co_free_bufs(float **bufs, int world)
{
    if (!bufs)
        return;
    for (int r = 0; r < world; r++)
        co_free(bufs[r]);
    co_free(bufs);
}

float **co_copy_bufs(float *const *bufs, int world, size_t n)
{
    float **b = co_alloc((size_t)world * sizeof *b);
    for (int r = 0; r < world; r++) {
        b[r] = co_alloc((n ? n : 1) * sizeof(float));
        if (n)
            memcpy(b[r], bufs[r], n * sizeof(float));
    }
    return b;
}

void co_reference(float *const *in, int world, size_t n, double **want, double **mag)
{
    *want = co_alloc((n ? n : 1) * sizeof(double));
    *mag = co_alloc((n ? n : 1) * sizeof(double));
    memset(*want, 0, (n ? n : 1) * sizeof(double));
    memset(*mag, 0, (n ? n : 1) * sizeof(double));
    for (int r = 0; r < world; r++)
        for (size_t i = 0; i < n; i++) {
            (*want)[i] += in[r][i];
            (*mag)[i] += fabs((double)in[r][i]);
        }
}

void co_assert_sums(float *const *got, int world, size_t n, const double *want,
                    const double *mag, double rel, double abs_tol, const char *what)
{
    for (int r = 0; r < world; r++)
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)got[r][i] - want[i]);
            double tol = rel * mag[i] + abs_tol;
            if (!(d <= tol))
                cr_assert_fail("%s: rank %d element %zu of %zu: got %.9g, want %.9g "
                               "(|diff| %.3g > tolerance %.3g)",
                               what, r, i, n, (double)got[r][i], want[i], d, tol);
        }
}

void co_assert_identical(float *const *got, int world, size_t n, const char *what)
{
    for (int r = 1; r < world; r++) {
        if (n == 0 || memcmp(got[0], got[r], n * sizeof(float)) == 0)
            continue;
        size_t i = 0;
        while (memcmp(&got[0][i], &got[r][i], sizeof(float)) == 0)
            i++;
        cr_assert_fail("%s: rank %d differs from rank 0 at element %zu of %zu: "
                       "%.9g vs %.9g",
                       what, r, i, n, (double)got[r][i], (double)got[0][i]);
    }
}

void co_allreduce_check(size_t n, uint64_t seed, const char *what)
{
    int w = R.world;
    float **bufs = co_bufs(w, n, seed);
    double *want, *mag;
    co_reference(bufs, w, n, &want, &mag);
    co_allreduce_arg a = {bufs, n};
    co_run_ok(co_allreduce_fn, &a, what);
    co_assert_sums(bufs, w, n, want, mag, CO_F32_REL(w), CO_F32_ABS, what);
    co_assert_identical(bufs, w, n, what);
    co_free(want);
    co_free(mag);
    co_free_bufs(bufs, w);
}

/* ---- a hand-made ReduceChunk ----------------------------------------------------- */

void co_client_to(int rank)
{
    if (R.ch)
        return;
    cr_assert(uv_loop_init(&R.loop) == 0);
    R.loop_open = true;
    int rc = rpc_client_create(&R.loop, &R.client);
    cr_assert(rc == 0, "rpc_client_create: %s", ferry_err_name(rc));
    rpc_channel_opts o = {.max_payload = CO_MAX_PAYLOAD};
    rc = rpc_channel_create(R.client, R.r[rank].addr, &o, &R.ch);
    cr_assert(rc == 0, "rpc_channel_create(%s): %s", R.r[rank].addr, ferry_err_name(rc));
}

int co_send_chunk(const Ferry__ReduceChunkRequest *req, const void *payload, size_t len,
                  char *err, size_t errlen)
{
    cr_assert(R.ch, "co_client_to first");
    proto_raw out_head = proto_raw_pack(&req->base);
    rpc_msg_out out = {.head_bytes = out_head.data,
                       .head_len = out_head.len,
                       .payload = payload,
                       .payload_len = len,
                       .codec = RPC_CODEC_RAW};
    rpc_call call = {0};
    int rc =
        rpc_call_start(R.ch, &call, PROTO_METHOD_REDUCE_CHUNK, &out, CO_TIMEOUT_MS, NULL);
    cr_assert(rc == 0, "rpc_call_start: %s", ferry_err_name(rc));
    rc = rpc_call_wait(&call);
    snprintf(err, errlen, "%s", rc && call.errmsg ? call.errmsg : "");
    rpc_call_fini(&call);
    return rc;
}

/* ---- time -------------------------------------------------------------------------- */

double co_now_ms(void)
{
    return (double)uv_hrtime() / 1e6;
}

void co_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}
