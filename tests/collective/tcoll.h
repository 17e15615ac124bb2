/* tests/collective — the shared fixture: K ranks in this test process, each
 * with its own poller, rt_hub, rpc_server on 127.0.0.1:0 on that poller
 * serving ReduceChunk (inline, the hub as its data) and its own rt_comm of one
 * session whose peers are every rank's server. Each rank's collectives run
 * on a thread of their own (co_run), as they would in K workers.
 *
 * Criterion forks each test: everything gRPC is made inside the test, never
 * in a constructor. The checks that end a test (no leak, in sanitizer
 * builds) run in co_finish(), called from the body by CO_TEST: Criterion
 * 2.4.1 reports a test whose .fini fails as passed. co_teardown (.fini)
 * only releases what a failed test left behind: sessions, then servers,
 * then hubs and pollers. */
#ifndef FERRY_TESTS_COLLECTIVE_TCOLL_H
#define FERRY_TESTS_COLLECTIVE_TCOLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include "proto/raw.h"
#include "rpc/rpc.h"
#include "runtime/collective/collective.h"

#define CO_MAX_RANKS 4
/* The small chunk most tests use, so that chunk boundaries cost little. */
#define CO_CHUNK_BYTES  4096
#define CO_CHUNK_FLOATS (CO_CHUNK_BYTES / sizeof(float))
/* A collective that should succeed gives up after this long (a broken
 * implementation fails the test rather than hanging it). */
#define CO_TIMEOUT_MS 10000
/* Large enough for the default 1 MiB chunk and the biggest test buffers. */
#define CO_MAX_PAYLOAD ((size_t)64 << 20)
#define CO_ERRLEN      512

typedef struct co_rank {
    rpc_poller *poller; /* the server's and the sessions': outlives both */
    rt_hub *hub;
    rpc_server *server;
    rt_comm *comm;
    rt_comm *comm2; /* a second session in the same hub, for tests that need one */
    char addr[32];  /* "127.0.0.1:PORT" */
} co_rank;

typedef struct co_ring {
    int world;
    co_rank r[CO_MAX_RANKS];
    const char *peers[CO_MAX_RANKS];
    /* A client of the test's own, for hand-made ReduceChunk calls. */
    uv_loop_t loop;
    bool loop_open;
    rpc_client *client;
    rpc_channel *ch;
    /* Test data from co_alloc, freed by the fixture if a failed test left
     * it (so that the leak check at exit reports only real leaks). */
    void *allocs[64];
    bool finished;
} co_ring;

extern co_ring R;

void co_setup(void);
void co_teardown(void);
/* Destroys the sessions, the client, the servers and the hubs, trims rpc's
 * buffer pool and asserts no leak (sanitizer builds). */
void co_finish(void);

/* Test() whose body ends with co_finish(). */
#define CO_TEST(suite, name, ...)                                                        \
    static void co_body_##suite##_##name(void);                                          \
    Test(suite, name, .init = co_setup, .fini = co_teardown, ##__VA_ARGS__)              \
    {                                                                                    \
        co_body_##suite##_##name();                                                      \
        co_finish();                                                                     \
    }                                                                                    \
    static void co_body_##suite##_##name(void)

/* Starts `world` ranks: a poller, a hub and a server each; fills R.peers. */
void co_start(int world);
/* Rank's poller and hub, without a server. */
void co_make_hub(int rank);
/* Destroys rank's server now (its hub and session stay). */
void co_stop_server(int rank);
/* Starts rank's server again on its old address (after co_stop_server).
 * Any thread: returns rpc_server_create's result, no assertion. */
int co_listen_again(int rank);

/* The secret every session of the fixture has (co_opts), as the master
 * gives a run's ranks theirs: RT_COMM_SECRET_BYTES bytes. */
extern const uint8_t co_secret[RT_COMM_SECRET_BYTES];
/* It, as a ReduceChunkRequest carries it: a hand-made chunk that is to
 * get past the secret's check sets req.secret = co_secret_field(). */
ProtobufCBinaryData co_secret_field(void);

/* Options for every rank of a session (rank is set by co_join). */
rt_comm_opts co_opts(uint64_t session, size_t chunk_bytes, rt_compress compress,
                     int64_t timeout_ms);
/* Creates rank's session from `o` (rank, world and peers filled in).
 * Any thread; returns rt_comm_create's result, no assertion. */
int co_join(int rank, const rt_comm_opts *o, char *err, size_t errlen);
/* The same for rank's second session (R.r[rank].comm2). */
int co_join2(int rank, const rt_comm_opts *o, char *err, size_t errlen);
/* Every rank joins; asserts it worked. */
void co_join_all(const rt_comm_opts *o);
/* Destroys every rank's session (no wait may be running). */
void co_leave_all(void);

/* ---- running a collective on every rank at once ------------------------------ */

typedef struct co_result {
    int rc;
    char err[CO_ERRLEN];
    double start_ms, end_ms; /* co_now_ms() when the rank's function began and ended */
} co_result;

/* What one rank does: returns 0 or an error, with `err` saying why. */
typedef int (*co_fn)(int rank, void *arg, char *err, size_t errlen);

/* Runs fn(rank, arg) on one thread per rank and joins them all. */
void co_run(co_fn fn, void *arg, co_result res[CO_MAX_RANKS]);
/* The same, asserting that every rank returned 0 (`what` names the step). */
void co_run_ok(co_fn fn, void *arg, const char *what);

/* All-reduce of bufs[rank][0..n) on every rank (co_run's fn for it). */
typedef struct co_allreduce_arg {
    float **bufs;
    size_t n;
} co_allreduce_arg;
int co_allreduce_fn(int rank, void *arg, char *err, size_t errlen);

/* The same on every rank but `silent`, which returns 0 at once: a rank
 * that never joins the collective. */
typedef struct co_silent_arg {
    co_allreduce_arg a;
    int silent;
} co_silent_arg;
int co_allreduce_all_but_fn(int rank, void *arg, char *err, size_t errlen);

typedef struct co_broadcast_arg {
    float **bufs;
    size_t n;
    int root;
} co_broadcast_arg;
int co_broadcast_fn(int rank, void *arg, char *err, size_t errlen);

/* ---- data --------------------------------------------------------------------- */

/* malloc that the fixture frees if the test does not (co_free). */
void *co_alloc(size_t len);
void co_free(void *p);

/* Distinct random floats in [-1, 1) for each seed. */
void co_fill_random(float *x, size_t n, uint64_t seed);

/* world buffers of n floats (at least one float each, so never NULL),
 * filled with co_fill_random(seed * 16 + rank); free with co_free_bufs. */
float **co_bufs(int world, size_t n, uint64_t seed);
void co_free_bufs(float **bufs, int world);
/* A copy of the inputs, as co_bufs returns them. */
float **co_copy_bufs(float *const *bufs, int world, size_t n);

/* The reference: want[i] = sum over ranks of in[r][i] in double, mag[i] the
 * sum of the magnitudes. Free both with co_free(). */
void co_reference(float *const *in, int world, size_t n, double **want, double **mag);

/* Asserts |got[r][i] - want[i]| <= rel * mag[i] + abs_tol on every rank,
 * naming the first element that is not. */
void co_assert_sums(float *const *got, int world, size_t n, const double *want,
                    const double *mag, double rel, double abs_tol, const char *what);
/* Asserts that every rank holds the same bits as rank 0. */
void co_assert_identical(float *const *got, int world, size_t n, const char *what);

/* An all-reduce of co_bufs(R.world, n, seed) on every rank, asserted to sum
 * within the float32 bound and to leave every rank the same bits. */
void co_allreduce_check(size_t n, uint64_t seed, const char *what);

/* The float32 ring's bound: a sum of W terms added in some order, each
 * addition rounding by at most 2^-24 of a partial sum no larger than
 * sum |x_i|, so |got - want| <= W * 2^-23 * sum |x_i| (twice the bound,
 * for margin) plus a tiny absolute term. */
#define CO_F32_REL(w) ((double)(w)*0x1p-23)
#define CO_F32_ABS    1e-30

/* ---- a hand-made ReduceChunk ------------------------------------------------- */

/* Opens R.client and a channel to rank's server (once). */
void co_client_to(int rank);
/* Sends `req` with `payload` to that channel and waits. Returns the
 * call's result; `err` gets its error text ("" on success). */
int co_send_chunk(const Ferry__ReduceChunkRequest *req, const void *payload, size_t len,
                  char *err, size_t errlen);

/* ---- time --------------------------------------------------------------------- */

double co_now_ms(void);
void co_sleep_ms(int ms);

#endif
