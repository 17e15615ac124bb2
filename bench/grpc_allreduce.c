/* bench/grpc_allreduce — the gRPC floor of bench/allreduce: ranks exchange
 * their buffers over gRPC-core unary calls as ferry's ranks do (one call
 * per chunk of 1 MiB, at most four on the wire, the partner's chunk added
 * in place once this rank's own copy of it is acknowledged; with 4 or 8
 * ranks in rounds, rank r with r ^ 2^j in round j, each chunk sent on as
 * soon as it has been added), but with the fewest threads gRPC allows: one
 * completion queue per process serves the server and the client, and the
 * one thread that drains it sends, receives and adds. No protobuf, no
 * token, no session, no libuv.
 *
 *   build/bench/grpc_allreduce [--stream] --ranks 2|4|8 --plan BYTES:REPS:ITERS,...
 *
 * With --stream the chunks go as messages of one bidirectional stream a
 * partner, opened once: no call to set up per chunk, one message in
 * flight a stream (all gRPC allows), a chunk added once its own copy's
 * send has completed (chttp2 completes it once the bytes are written).
 * That is the cheapest way gRPC offers to move a chunk.
 *
 * What it reaches is about what an RPC-per-chunk design (or a stream a
 * partner) can reach here: ferry's own figure below it is the price of
 * its threads and checks. (On
 * 4 ranks ferry runs the rounds up to 1 MiB only, and the ring above,
 * which moves 1.5 buffers a rank where the rounds move 2.) Rank 0 prints
 * the lines. */
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "allreduce_plan.h"
#include "grpc_unary.h"
#include "stats.h"

#define METHOD     "/bench.Allreduce/Chunk"
#define STREAM     "/bench.Allreduce/Stream"
#define CHUNK      ((size_t)1 << 20) /* bytes, ferry's default */
#define WIRE       4                 /* chunks in flight, as ferry */
#define REQUESTS   8                 /* server calls waiting for a chunk */
#define MAX_CHUNKS 128               /* 128 MiB */
#define MAX_RANKS  8
#define MAX_ROUNDS 3

enum { T_REQUEST, T_REPLY, T_SEND, T_STREAM_IN, T_STREAM_RECV, T_STREAM_SEND, T_OPENED };

typedef struct tag {
    int kind;
    grpc_call *call;
    /* T_REQUEST */
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_byte_buffer *msg;
    int cancelled;
    /* T_SEND, T_STREAM_SEND; T_STREAM_RECV: round is the stream's slot */
    uint32_t round, chunk;
    bench_unary u;
    grpc_byte_buffer *out; /* T_STREAM_SEND: the message in flight */
} tag;

/* A chunk of a round, ready to go to that round's partner. */
typedef struct ready {
    uint32_t round, chunk;
} ready;

typedef struct rank {
    int r, world, rounds;
    int side[MAX_RANKS]; /* rank 0: a socket to each rank; others: side[0] */
    grpc_completion_queue *cq;
    grpc_server *srv;
    void *srv_method;
    grpc_channel *ch[MAX_ROUNDS]; /* to each round's partner */
    void *ch_method[MAX_ROUNDS];
    float *buf;
    size_t n;        /* floats in the current all-reduce */
    uint32_t seq;    /* the current all-reduce */
    size_t chunks;   /* of it */
    size_t inflight; /* sends not yet acknowledged */
    ready queue[MAX_ROUNDS * MAX_CHUNKS];
    size_t q_head, q_tail;
    bool acked[MAX_ROUNDS][MAX_CHUNKS], added[MAX_ROUNDS][MAX_CHUNKS];
    /* Partners' chunks by the parity of their all-reduce: a rank may be one
     * all-reduce ahead of another, never two (it needs its chunks). */
    grpc_byte_buffer *parked[2][MAX_ROUNDS][MAX_CHUNKS];
    size_t left; /* chunk-rounds not yet both acknowledged and added */
    tag req[REQUESTS];
    /* --stream: a stream to each round's partner, one from each. */
    bool stream;
    void *srv_stream, *ch_stream[MAX_ROUNDS];
    grpc_call *out[MAX_ROUNDS];
    tag sending[MAX_ROUNDS]; /* the message in flight on stream j, while busy[j] */
    bool busy[MAX_ROUNDS];
    tag in_req[MAX_ROUNDS], recv[MAX_ROUNDS], opened;
    grpc_call *in[MAX_ROUNDS];
    grpc_byte_buffer *in_msg[MAX_ROUNDS];
    int n_in;
} rank;

static void die(const rank *k, const char *what)
{
    fprintf(stderr, "grpc_allreduce: rank %d: %s\n", k ? k->r : -1, what);
    exit(1);
}

static grpc_channel_args *unlimited(void)
{
    static grpc_arg a[2];
    static grpc_channel_args args = {.num_args = 2, .args = a};
    a[0] = (grpc_arg){.type = GRPC_ARG_INTEGER,
                      .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                      .value.integer = -1};
    a[1] = (grpc_arg){.type = GRPC_ARG_INTEGER,
                      .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
                      .value.integer = -1};
    return &args;
}

static void request(rank *k, tag *t)
{
    grpc_metadata_array_init(&t->md);
    t->kind = T_REQUEST;
    t->msg = NULL;
    if (grpc_server_request_registered_call(k->srv, k->srv_method, &t->call, &t->deadline,
                                            &t->md, &t->msg, k->cq, k->cq,
                                            t) != GRPC_CALL_OK)
        die(k, "cannot request a call");
}

static void noop_free(void *p)
{
    (void)p;
}

#define HEAD_BYTES (3 * sizeof(uint32_t)) /* seq, round, chunk */

/* Chunk c of the current all-reduce to round j's partner, from the buffer
 * itself: the head and the floats, no copy. */
static grpc_byte_buffer *chunk_message(const rank *k, uint32_t j, size_t c)
{
    size_t off = c * (CHUNK / sizeof(float));
    size_t len = k->n - off < CHUNK / sizeof(float) ? k->n - off : CHUNK / sizeof(float);
    uint32_t head[3] = {k->seq, j, (uint32_t)c};
    grpc_slice s[2] = {grpc_slice_from_copied_buffer((const char *)head, sizeof head),
                       grpc_slice_new(k->buf + off, len * sizeof(float), noop_free)};
    grpc_byte_buffer *out = grpc_raw_byte_buffer_create(s, 2);
    grpc_slice_unref(s[0]);
    grpc_slice_unref(s[1]);
    return out;
}

/* --stream: the chunk as the next message of round j's stream. */
static void stream_chunk(rank *k, uint32_t j, size_t c)
{
    tag *t = &k->sending[j];
    *t = (tag){.kind = T_STREAM_SEND, .round = j, .chunk = (uint32_t)c};
    t->out = chunk_message(k, j, c);
    grpc_op op = {.op = GRPC_OP_SEND_MESSAGE};
    op.data.send_message.send_message = t->out;
    if (grpc_call_start_batch(k->out[j], &op, 1, t, NULL) != GRPC_CALL_OK)
        die(k, "cannot send on a stream");
    k->busy[j] = true;
}

static void send_chunk(rank *k, uint32_t j, size_t c)
{
    tag *t = calloc(1, sizeof *t);
    if (!t)
        die(k, "no memory");
    t->kind = T_SEND;
    t->round = j;
    t->chunk = (uint32_t)c;
    grpc_byte_buffer *out = chunk_message(k, j, c);
    t->call = grpc_channel_create_registered_call(k->ch[j], NULL, GRPC_PROPAGATE_DEFAULTS,
                                                  k->cq, k->ch_method[j],
                                                  gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (!t->call || bench_unary_start(t->call, &t->u, out, t) != GRPC_CALL_OK)
        die(k, "cannot start a call");
    k->inflight++;
}

/* --stream: the oldest ready chunk of each idle stream; chunks taken out
 * of order are marked by round = UINT32_MAX. */
static void pump_streams(rank *k)
{
    for (size_t i = k->q_head; i < k->q_tail; i++) {
        ready *x = &k->queue[i];
        if (x->round != UINT32_MAX && !k->busy[x->round]) {
            stream_chunk(k, x->round, x->chunk);
            x->round = UINT32_MAX;
        }
    }
    while (k->q_head < k->q_tail && k->queue[k->q_head].round == UINT32_MAX)
        k->q_head++;
}

static void pump(rank *k)
{
    if (k->stream) {
        pump_streams(k);
        return;
    }
    while (k->q_head < k->q_tail && k->inflight < WIRE) {
        ready x = k->queue[k->q_head++];
        send_chunk(k, x.round, x.chunk);
    }
}

static void enqueue(rank *k, uint32_t j, size_t c)
{
    k->queue[k->q_tail++] = (ready){j, (uint32_t)c};
}

/* dst[0..) += the floats of `msg` after its head, run by run as gRPC
 * received them; a float split between two runs is put together first. */
static void add_message(float *dst, grpc_byte_buffer *msg)
{
    grpc_byte_buffer_reader rd;
    grpc_byte_buffer_reader_init(&rd, msg);
    grpc_slice s;
    size_t skip = HEAD_BYTES, at = 0, have = 0;
    union {
        float f;
        uint8_t b[4];
    } part;
    while (grpc_byte_buffer_reader_next(&rd, &s)) {
        const uint8_t *p = GRPC_SLICE_START_PTR(s);
        size_t len = GRPC_SLICE_LENGTH(s);
        size_t k = skip < len ? skip : len;
        p += k, len -= k, skip -= k;
        if (have) {
            k = sizeof part - have < len ? sizeof part - have : len;
            memcpy(part.b + have, p, k);
            p += k, len -= k, have += k;
            if (have == sizeof part)
                dst[at++] += part.f, have = 0;
        }
        size_t whole = have ? 0 : len / sizeof(float);
        for (size_t i = 0; i < whole; i++) {
            float v;
            memcpy(&v, p + i * sizeof v, sizeof v);
            dst[at + i] += v;
        }
        at += whole;
        if (!have) {
            have = len - whole * sizeof(float);
            memcpy(part.b, p + whole * sizeof(float), have);
        }
        grpc_slice_unref(s);
    }
    grpc_byte_buffer_reader_destroy(&rd);
}

/* Round j's partner's chunk c, added once this rank's own copy of it has
 * been acknowledged; then on to the next round's partner. */
static void try_add(rank *k, uint32_t j, size_t c)
{
    grpc_byte_buffer **m = &k->parked[k->seq & 1][j][c];
    if (!*m || !k->acked[j][c] || k->added[j][c])
        return;
    add_message(k->buf + c * (CHUNK / sizeof(float)), *m);
    grpc_byte_buffer_destroy(*m);
    *m = NULL;
    k->added[j][c] = true;
    k->left--;
    if ((int)j + 1 < k->rounds) {
        enqueue(k, j + 1, c);
        pump(k);
    }
}

/* Files a partner's chunk (taking `msg`) by the head of its first run or
 * two: the floats stay where they are; added at once if its turn came. */
static void file_chunk(rank *k, grpc_byte_buffer *msg)
{
    uint32_t head[3];
    grpc_byte_buffer_reader rd;
    grpc_byte_buffer_reader_init(&rd, msg);
    uint8_t hb[sizeof head];
    size_t got = 0;
    grpc_slice s;
    while (got < sizeof hb && grpc_byte_buffer_reader_next(&rd, &s)) {
        size_t n = GRPC_SLICE_LENGTH(s) < sizeof hb - got ? GRPC_SLICE_LENGTH(s)
                                                           : sizeof hb - got;
        memcpy(hb + got, GRPC_SLICE_START_PTR(s), n);
        got += n;
        grpc_slice_unref(s);
    }
    grpc_byte_buffer_reader_destroy(&rd);
    memcpy(head, hb, sizeof head);
    if (head[1] >= (uint32_t)k->rounds || head[2] >= MAX_CHUNKS ||
        k->parked[head[0] & 1][head[1]][head[2]])
        die(k, "a chunk out of place");
    k->parked[head[0] & 1][head[1]][head[2]] = msg;
    if (head[0] == k->seq && k->chunks)
        try_add(k, head[1], head[2]);
}

static void on_request(rank *k, tag *t, bool ok)
{
    if (!ok || !t->msg)
        die(k, "a request failed");

    /* The reply: no message, status OK; its own tag frees it. */
    tag *rep = calloc(1, sizeof *rep);
    if (!rep)
        die(k, "no memory");
    rep->kind = T_REPLY;
    rep->call = t->call;
    grpc_op ops[3];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[1].data.send_status_from_server.status = GRPC_STATUS_OK;
    ops[2].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[2].data.recv_close_on_server.cancelled = &rep->cancelled;
    if (grpc_call_start_batch(t->call, ops, 3, rep, NULL) != GRPC_CALL_OK)
        die(k, "cannot reply");
    grpc_metadata_array_destroy(&t->md);
    grpc_byte_buffer *msg = t->msg;
    request(k, t);
    file_chunk(k, msg);
}

/* --stream: the next message of incoming stream `slot`. */
static void stream_recv(rank *k, int slot)
{
    tag *t = &k->recv[slot];
    *t = (tag){.kind = T_STREAM_RECV, .round = (uint32_t)slot};
    grpc_op op = {.op = GRPC_OP_RECV_MESSAGE};
    op.data.recv_message.recv_message = &k->in_msg[slot];
    if (grpc_call_start_batch(k->in[slot], &op, 1, t, NULL) != GRPC_CALL_OK)
        die(k, "cannot receive on a stream");
}

static void request_stream(rank *k, tag *t)
{
    grpc_metadata_array_init(&t->md);
    t->kind = T_STREAM_IN;
    if (grpc_server_request_registered_call(k->srv, k->srv_stream, &t->call, &t->deadline,
                                            &t->md, NULL, k->cq, k->cq,
                                            t) != GRPC_CALL_OK)
        die(k, "cannot request a stream");
}

static void on_stream_in(rank *k, tag *t, bool ok)
{
    if (!ok || k->n_in == k->rounds)
        die(k, "a stream request failed");
    grpc_metadata_array_destroy(&t->md);
    k->in[k->n_in] = t->call;
    stream_recv(k, k->n_in++);
}

static void on_stream_recv(rank *k, tag *t, bool ok)
{
    int slot = (int)t->round;
    grpc_byte_buffer *msg = k->in_msg[slot];
    k->in_msg[slot] = NULL;
    if (!ok || !msg)
        die(k, "a stream ended");
    stream_recv(k, slot);
    file_chunk(k, msg);
}

static void on_stream_sent(rank *k, tag *t, bool ok)
{
    if (!ok)
        die(k, "a stream refused a chunk");
    grpc_byte_buffer_destroy(t->out);
    uint32_t j = t->round, c = t->chunk;
    k->busy[j] = false;
    k->acked[j][c] = true;
    pump(k);
    try_add(k, j, c);
}

static void on_send(rank *k, tag *t, bool ok)
{
    if (!ok || t->u.status != GRPC_STATUS_OK)
        die(k, "a chunk was refused");
    bench_unary_fini(&t->u);
    grpc_call_unref(t->call);
    k->inflight--;
    k->acked[t->round][t->chunk] = true;
    uint32_t j = t->round, c = t->chunk;
    free(t);
    pump(k);
    try_add(k, j, c);
}

static void step(rank *k)
{
    grpc_event ev = grpc_completion_queue_next(k->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type != GRPC_OP_COMPLETE)
        die(k, "the completion queue ended");
    tag *t = ev.tag;
    if (t->kind == T_REQUEST)
        on_request(k, t, ev.success);
    else if (t->kind == T_SEND)
        on_send(k, t, ev.success);
    else if (t->kind == T_STREAM_IN)
        on_stream_in(k, t, ev.success);
    else if (t->kind == T_STREAM_RECV)
        on_stream_recv(k, t, ev.success);
    else if (t->kind == T_STREAM_SEND)
        on_stream_sent(k, t, ev.success);
    else if (t->kind == T_OPENED) {
        if (!ev.success)
            die(k, "cannot open a stream");
    } else {
        grpc_call_unref(t->call);
        free(t);
    }
}

static void allreduce(rank *k, size_t n)
{
    k->seq++;
    k->n = n;
    k->chunks = (n * sizeof(float) + CHUNK - 1) / CHUNK;
    if (k->chunks > MAX_CHUNKS)
        die(k, "buffer too large");
    k->left = k->chunks * (size_t)k->rounds;
    memset(k->acked, 0, sizeof k->acked);
    memset(k->added, 0, sizeof k->added);
    k->q_head = k->q_tail = 0;
    for (size_t c = 0; c < k->chunks; c++)
        enqueue(k, 0, c);
    pump(k);
    while (k->left)
        step(k);
    k->chunks = 0;
}

static void put(rank *k, int fd, double v)
{
    if (write(fd, &v, sizeof v) != sizeof v)
        die(k, "a side socket failed");
}

static double get(rank *k, int fd)
{
    double v;
    if (read(fd, &v, sizeof v) != sizeof v)
        die(k, "a side socket failed");
    return v;
}

/* The largest of the ranks' values, gathered at rank 0 over the side
 * sockets and sent back: a barrier, and the slowest rank's time. */
static double all_max(rank *k, double v)
{
    if (k->r) {
        put(k, k->side[0], v);
        return get(k, k->side[0]);
    }
    for (int i = 1; i < k->world; i++) {
        double in = get(k, k->side[i]);
        v = in > v ? in : v;
    }
    for (int i = 1; i < k->world; i++)
        put(k, k->side[i], v);
    return v;
}

static void run_allreduce(void *arg, size_t n, const char *what)
{
    (void)what;
    allreduce(arg, n);
}

static double run_max(void *arg, double v)
{
    return all_max(arg, v);
}

/* The lines' own members, the algorithm last. */
#define EXTRA(calls) "\"transport\":\"grpc\",\"calls\":\"" calls "\",\"threads\":1,\"algorithm\":"

static int run_rank(rank *k, const ar_plan *plan, int port_w, int port_r)
{
    grpc_init();
    k->cq = grpc_completion_queue_create_for_next(NULL);
    k->srv = grpc_server_create(unlimited(), NULL);
    k->srv_method = grpc_server_register_method(k->srv, METHOD, NULL,
                                                GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    k->srv_stream =
        grpc_server_register_method(k->srv, STREAM, NULL, GRPC_SRM_PAYLOAD_NONE, 0);
    grpc_server_register_completion_queue(k->srv, k->cq, NULL);
    grpc_server_credentials *sc = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(k->srv, "127.0.0.1:0", sc);
    grpc_server_credentials_release(sc);
    if (port <= 0)
        die(k, "cannot listen on 127.0.0.1");
    grpc_server_start(k->srv);
    for (int i = 0; i < REQUESTS; i++)
        request(k, &k->req[i]);
    for (int j = 0; k->stream && j < k->rounds; j++)
        request_stream(k, &k->in_req[j]);

    /* Ports through the parent: each rank learns every rank's. */
    int ports[MAX_RANKS];
    if (write(port_w, &port, sizeof port) != sizeof port ||
        read(port_r, ports, sizeof ports[0] * (size_t)k->world) !=
            (ssize_t)(sizeof ports[0] * (size_t)k->world))
        die(k, "cannot learn the other ranks' ports");
    for (int j = 0; j < k->rounds; j++) {
        char target[64];
        snprintf(target, sizeof target, "127.0.0.1:%d", ports[k->r ^ (1 << j)]);
        grpc_channel_credentials *cc = grpc_insecure_credentials_create();
        k->ch[j] = grpc_channel_create(target, cc, unlimited());
        grpc_channel_credentials_release(cc);
        k->ch_method[j] = grpc_channel_register_call(k->ch[j], METHOD, NULL, NULL);
        k->ch_stream[j] = grpc_channel_register_call(k->ch[j], STREAM, NULL, NULL);
    }
    k->opened.kind = T_OPENED;
    for (int j = 0; k->stream && j < k->rounds; j++) {
        k->out[j] = grpc_channel_create_registered_call(
            k->ch[j], NULL, GRPC_PROPAGATE_DEFAULTS, k->cq, k->ch_stream[j],
            gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        grpc_op op = {.op = GRPC_OP_SEND_INITIAL_METADATA};
        if (!k->out[j] ||
            grpc_call_start_batch(k->out[j], &op, 1, &k->opened, NULL) != GRPC_CALL_OK)
            die(k, "cannot open a stream");
    }

    if (!(k->buf = malloc(ar_plan_max_bytes(plan))))
        die(k, "no memory");
    const char *extra = k->stream
                            ? (k->world == 2 ? EXTRA("a stream a partner") "\"exchange\""
                                             : EXTRA("a stream a partner") "\"rounds\"")
                            : (k->world == 2 ? EXTRA("unary, one a chunk") "\"exchange\""
                                             : EXTRA("unary, one a chunk") "\"rounds\"");
    ar_runner run = {.impl = k->stream ? "grpc_stream" : "grpc",
                     .extra = extra,
                     .rank = k->r,
                     .world = k->world,
                     .buf = k->buf,
                     .arg = k,
                     .allreduce = run_allreduce,
                     .max = run_max};
    ar_run_plan(plan, &run);
    /* Leaves without tearing gRPC down: the process ends here, and a peer
     * may still be reading its last reply. */
    all_max(k, 0);
    free(k->buf);
    return 0;
}

int main(int argc, char **argv)
{
    bench_set_name("allreduce");
    ar_plan plan;
    bool stream = argc > 1 && strcmp(argv[1], "--stream") == 0;
    argc -= stream, argv += stream;
    int world = argc == 5 && strcmp(argv[1], "--ranks") == 0 ? atoi(argv[2]) : 0;
    if ((world != 2 && world != 4 && world != 8) || strcmp(argv[3], "--plan") != 0 ||
        ar_plan_parse(argv[4], &plan) != 0) {
        fprintf(stderr, "usage: grpc_allreduce [--stream] --ranks 2|4|8 --plan "
                        "BYTES:REPS:ITERS,...\n");
        return 2;
    }
    if (ar_plan_max_bytes(&plan) > MAX_CHUNKS * CHUNK) {
        fprintf(stderr, "grpc_allreduce: buffers of up to %zu MiB\n", MAX_CHUNKS * CHUNK >> 20);
        return 2;
    }
    /* Side sockets from rank 0 to each rank (barriers); a pipe up and one
     * down per rank for the ports. */
    int side[MAX_RANKS][2], up[MAX_RANKS][2], down[MAX_RANKS][2];
    for (int r = 0; r < world; r++)
        if ((r && socketpair(AF_UNIX, SOCK_STREAM, 0, side[r])) || pipe(up[r]) ||
            pipe(down[r]))
            die(NULL, "cannot make the side channels");
    pid_t pid[MAX_RANKS];
    for (int r = 0; r < world; r++) {
        if ((pid[r] = fork()) < 0)
            die(NULL, "fork");
        if (pid[r] == 0) {
            rank k = {.r = r,
                      .world = world,
                      .rounds = __builtin_ctz((unsigned)world),
                      .stream = stream};
            if (r)
                k.side[0] = side[r][1];
            else
                for (int i = 1; i < world; i++)
                    k.side[i] = side[i][0];
            _exit(run_rank(&k, &plan, up[r][1], down[r][0]));
        }
    }
    int port[MAX_RANKS];
    for (int r = 0; r < world; r++)
        if (read(up[r][0], &port[r], sizeof port[r]) != sizeof port[r])
            die(NULL, "a rank did not start");
    for (int r = 0; r < world; r++)
        if (write(down[r][1], port, sizeof port[0] * (size_t)world) !=
            (ssize_t)(sizeof port[0] * (size_t)world))
            die(NULL, "a rank did not start");
    int failed = 0;
    for (int r = 0; r < world; r++) {
        int st;
        if (waitpid(pid[r], &st, 0) != pid[r] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed = 1;
    }
    return failed;
}
