/* runtime/collective — private header shared by the files of this folder. */
#ifndef FERRY_RUNTIME_COLL_INT_H
#define FERRY_RUNTIME_COLL_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include <uv.h>

#include "collective.h"

/* The exchange is the all-reduce of two ranks: each sends the other its
 * whole buffer and adds what comes back, one hop instead of the ring's two
 * (float32 only: with fp16 the ranks would round different values). In a
 * world of 2^k ranks it runs in k rounds (recursive doubling): in round j
 * rank r exchanges with rank r ^ 2^j what it holds, so that after the last
 * round every rank holds the sum; ring_step carries the round. */
enum { RT_PHASE_RS = 0, RT_PHASE_AG = 1, RT_PHASE_BC = 2, RT_PHASE_EX = 3, RT_PHASES = 4 };
enum { RT_OP_ALLREDUCE = 1, RT_OP_BROADCAST = 2 };
enum { RT_ELEM_F32 = 0, RT_ELEM_F16 = 1 };

/* How far past the last completed collective a chunk may be: a sender can
 * run ahead of its receiver by the buckets of about one step. */
#define RT_COMM_WINDOW 1024u

/* Chunks of collectives this rank has not started yet are kept until they
 * start, within two bounds a session, so that a peer holding the cluster
 * token cannot make a worker hold what it likes. A sender runs ahead of
 * its receiver by the collectives its caller starts before it waits: the
 * trainer's buckets of one step (25 MiB each, so 1-4 for the models here),
 * the initial broadcast. RT_COMM_AHEAD collectives past the last one
 * completed covers that many times over. Their bytes: a step's gradient can
 * all arrive before this rank starts it (all but its own segment of every
 * bucket), which RT_COMM_HELD_BYTES covers for the models here; a bigger
 * one costs time, not memory. A chunk past either bound is refused as
 * NOT_FOUND, as for a session not registered yet: its sender tries again
 * (for up to the collective's timeout), by when this rank has usually
 * started the collective and takes it at once. Each chunk kept is charged
 * its payload and RT_COMM_HELD_OVERHEAD (its gRPC buffer's slices and
 * headers, its record), so that a flood of tiny chunks is bounded too. */
#define RT_COMM_AHEAD         16u
#define RT_COMM_HELD_BYTES    ((size_t)64 << 20)
#define RT_COMM_HELD_OVERHEAD ((size_t)4096)

/* Chunks' worth of payload a session has on the wire at once (one chunk
 * at least). All of a collective's chunks at once share the connection and
 * all arrive late: the first could have been passed on or added while the
 * rest travelled; and gRPC buffers every partial message meanwhile. */
#define RT_COMM_WIRE_CHUNKS 4

/* ---- geometry (geometry.c) -------------------------------------------------- */

typedef struct rt_span {
    size_t off, len; /* in floats */
} rt_span;

/* Segment s of a buffer of n floats split over `world` ranks: the first
 * n % world segments one float longer. */
rt_span rt_geo_segment(size_t n, int world, int s);
/* Chunks of at most `chunk` floats in `len` floats. */
size_t rt_geo_chunks(size_t len, size_t chunk);
/* Chunk c of span `s`. */
rt_span rt_geo_chunk(rt_span s, size_t chunk, size_t c);
/* The segment `rank` sends, or receives, at ring step j of a phase. */
int rt_geo_send_segment(int rank, int world, int phase, int j);
int rt_geo_recv_segment(int rank, int world, int phase, int j);

/* What a receiver expects of one chunk header: the span of the buffer it
 * covers. Returns 0, or FERRY_EINVAL with `why` saying what was expected. */
typedef struct rt_chunk_hdr {
    uint64_t seq, count;
    uint32_t phase, ring_step, chunk, from_rank, root;
    int elem;
} rt_chunk_hdr;

int rt_geo_check(const rt_chunk_hdr *h, int rank, int world, size_t chunk,
                 rt_span *out, char *why, size_t len);

/* "reduce-scatter", "all-gather", "broadcast" */
const char *rt_phase_name(uint32_t phase);

/* ---- a received chunk --------------------------------------------------------- */

typedef struct rt_chunk {
    struct rt_chunk *next;
    rt_chunk_hdr h;
    rpc_payload pl; /* in gRPC's buffers as it arrived, or decoded (lz4) */
    size_t wire_len;
    size_t held; /* charged to c->held_bytes: it came before its collective */
    bool lz4;
    char peer[64]; /* who sent it, as gRPC names the caller */
} rt_chunk;

void rt_chunk_free(rt_chunk *ch);

/* ---- a session (comm.c, ring.c) ------------------------------------------------ */

typedef struct rt_send rt_send;

/* Where gRPC reports, from any thread, that it is done with the bytes of
 * a send (rpc_msg_out.payload_free): shared by the session and every send
 * it has lent, freed by the last of them. `c` is NULL once the session is
 * gone. */
typedef struct rt_relbox {
    pthread_mutex_t mu;
    rt_comm *c;
    size_t refs;
} rt_relbox;

/* One start of a send, whose bytes gRPC holds until it fires; then filed
 * with the session (c->released), where it ends the op's loan. */
typedef struct rt_release {
    struct rt_release *next;
    rt_relbox *box;
    rt_send *send; /* referenced until it fires (its fp16 copy) */
    uint64_t seq;  /* the collective */
    uint32_t round, chunk;
    bool ex; /* an exchange's chunk that went through: adds the peer's */
    atomic_bool fired;
} rt_release;

/* Distinct callers an op remembers by name: the neighbour, and a stray
 * client or two. */
#define RT_OP_SENDERS 4

struct rt_comm_op {
    rt_comm_op *next;  /* in the queue, then in the active list */
    rt_comm_op *owned; /* every op not yet freed by a wait, under mu */
    uint64_t seq;
    int kind;
    float *buf;
    size_t n;
    int root;
    /* Under the comm's mutex: released to the waiter. */
    bool done;
    int result;
    /* Under the session's run. */
    bool started;
    /* The chunks received, by slot (ring.c's slot()), so that a second
     * chunk for one is noticed (one of the two was not the neighbour's):
     * 0, or 1 + the index in `senders` of where it came from (255: a
     * sender past the first RT_OP_SENDERS). */
    uint8_t *got;
    size_t got_slots;
    char senders[RT_OP_SENDERS][64];
    int n_senders;
    /* Chunks kept for it before it started here that did not fit it, and
     * why the first did not: quoted if it then times out. */
    size_t strays;
    char stray[384];
    size_t recv_expected[RT_PHASES], recv_done[RT_PHASES];
    /* The exchange's chunks, by round * chunks + chunk: whether this
     * rank's own send of it is done (only then may the peer's be added in
     * place), the peer's chunk kept until it is, and whether the peer's
     * has come. */
    struct rt_ex_chunk {
        bool sent, got;
        struct rt_chunk *parked;
    } *ex;
    size_t ex_chunks; /* chunks a round */
    size_t sends_expected, sends_done, inflight;
    /* Starts of its sends whose bytes gRPC has not released: the op is not
     * done, and its buffer not the caller's again, until none is left. */
    size_t lent;
    uint64_t progress_ns; /* last receive or acknowledged send */
};

struct rt_comm {
    rt_hub *hub;
    rt_comm *hub_next; /* under the hub's mutex */
    uint64_t session;
    int rank, world;
    char **peers;
    char *token;
    uint8_t secret[RT_COMM_SECRET_BYTES];
    bool keyed;   /* it has a secret: a world of 1 has none, and takes no chunk */
    size_t chunk; /* floats */
    rt_compress compress;
    int64_t timeout_ms;
    size_t max_payload;

    /* Shared, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rt_chunk *inbox, **inbox_tail; /* filed by the handler */
    rt_release *released;          /* filed by gRPC's threads */
    rt_comm_op *queue, **queue_tail;
    rt_comm_op *owned; /* started, not yet waited for: destroy frees them */
    uint64_t next_seq; /* the last seq handed out */
    int error;         /* sticky: the first failure */
    char errmsg[1024]; /* room for a neighbour's error quoted in ours */
    bool stopping;
    rt_comm_stats stats;
    size_t held_bytes; /* charged by the chunks kept before their collective */
    /* By rank: the caller its chunks come from (hub.c's pin()). */
    struct rt_pin {
        char peer[64];
        uint64_t last_ns; /* its last chunk taken */
    } *pins;
    atomic_uint_fast64_t done_upto; /* every seq <= this completed; read by the handler */

    /* The session's work — starting ops, reducing chunks, sends and their
     * completions, the tick — is done by whichever thread holds `run`: a
     * caller starting a collective, the poller's thread that received a
     * chunk or completed a send, the ticker. A thread that files something
     * and finds `run` taken sets `dirty`; the holder looks again before it
     * lets go (rt_comm_poke). Order: run, then mu. */
    pthread_mutex_t run;
    atomic_bool dirty, tick_due;
    /* Threads from outside inside the session (the poller's, in a send's
     * completion; gRPC's, releasing a send's bytes): destroy waits for
     * them to leave. */
    atomic_int guests;
    pthread_t ticker;
    pthread_cond_t tick_cv; /* under mu: tick_stop */
    bool tick_stop;
    bool closed; /* the channels and client are closed */

    /* Under run. */
    rpc_client *client;
    struct rt_peer_ch {
        rpc_channel *ch; /* to the right neighbour and the exchange partners */
        bool reached;    /* a chunk has gone through on it */
    } *to;
    int rounds; /* of an exchange: log2(world), or 0 when not a power of two */
    rt_comm_op *active;
    rt_chunk *pending; /* arrived before its collective started here */
    rt_send *sends;    /* in flight, queued or waiting to be retried */
    rt_send *sendq;    /* not yet started: oldest collective first, FIFO */
    size_t wire_bytes; /* payload bytes of the sends started and not done */
    size_t wire_max;   /* start no more than this, unless none is out */
    bool failed_seen;  /* the sends of a failure are cancelled */
    rt_relbox *box;
    struct rt_timeline *tl; /* chunk events go there (NULL: none); set before any op */
};

/* Something was filed for the session (a chunk, a release, an op, a
 * failure): does the session's work now if `run` is free, or leaves it to
 * the thread that holds it. Any thread that keeps the session alive (its
 * owner's, a guest's, the hub's handler under the hub's mutex); never
 * under mu. */
void rt_comm_poke(rt_comm *c);

/* Whether the session has failed (takes mu). */
static inline bool rt_comm_failed(rt_comm *c)
{
    pthread_mutex_lock(&c->mu);
    bool failed = c->error != 0;
    pthread_mutex_unlock(&c->mu);
    return failed;
}

/* Records the session's first failure and pokes the session. Any
 * thread; takes mu. */
void rt_comm_fail(rt_comm *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void rt_comm_fail_locked(rt_comm *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Under run: an op taken off the queue starts; a chunk for an active op
 * is consumed; the tick looks for silent peers; failures release ops. */
void rt_ring_start(rt_comm *c, rt_comm_op *op);
/* Frees an op and what it still holds. Any thread, once the session is
 * done with it. */
void rt_ring_op_free(rt_comm_op *op);
void rt_ring_consume(rt_comm *c, rt_comm_op *op, rt_chunk *ch);
/* "all-reduce" or "broadcast". */
const char *rt_op_name(const rt_comm_op *op);
/* Whether op runs as an exchange rather than round the ring. */
bool rt_ring_exchange(const rt_comm *c, const rt_comm_op *op);

void rt_ring_check_progress(rt_comm *c, uint64_t now_ns);
/* The rank `op` waits on now: the one whose chunk it misses first, or the
 * one that has not acknowledged its send; -1 once complete. Under mu. */
int rt_ring_waits_for(const rt_comm *c, const rt_comm_op *op);
void rt_ring_retry_due(rt_comm *c, uint64_t now_ns);
/* Marks ops done that are complete, or whose session failed and whose
 * sends have all ended, once gRPC has released all their bytes; updates
 * done_upto. */
void rt_ring_release(rt_comm *c);
/* Cancels every send in flight and drops those waiting for a retry. */
void rt_ring_cancel_sends(rt_comm *c);
/* Takes note of sends whose bytes gRPC no longer holds (under run), also
 * once the session has failed. */
void rt_ring_released(rt_comm *c, rt_release *list);
void rt_relbox_unref(rt_relbox *b);

/* ---- what an op has received (slots.c) ------------------------------------------ */

/* Whether chunk `h` can belong to op `op` (its element count, kind, root
 * and algorithm): 0, or FERRY_EINVAL with `why` naming `peer`, the chunk's
 * sender. Under mu or run: reads only what start() fixed. */
int rt_slot_fits(const rt_comm *c, const rt_comm_op *op, const rt_chunk_hdr *h,
                 const char *peer, char *why, size_t len);
/* Whether `peer` may send chunks as rank `from` (the caller its chunks
 * came from so far): 0, or FERRY_EINVAL with `why` naming both. Under mu. */
int rt_slot_pin_check(const rt_comm *c, uint32_t from, const char *peer, char *why,
                      size_t len);
/* Gives back what a chunk kept before its collective was charged (under
 * run; takes mu). */
void rt_slot_uncharge(rt_comm *c, rt_chunk *ch);
/* Makes op->got for the chunks op receives; false (the session failed
 * with ENOMEM) when there is no memory. Under run, at the op's start. */
bool rt_slots_alloc(rt_comm *c, rt_comm_op *op);
/* Marks the slot chunk `ch` fills as taken, by its caller; false when a
 * chunk filled it already: the session has failed (EPROTO) naming both
 * callers, and `ch` must not be used. Under run. */
bool rt_slot_take(rt_comm *c, rt_comm_op *op, const rt_chunk *ch);

/* The left and right neighbours. */
static inline int rt_left(const rt_comm *c)
{
    return (c->rank + c->world - 1) % c->world;
}
static inline int rt_right(const rt_comm *c)
{
    return (c->rank + 1) % c->world;
}
/* The rank this one exchanges with in round `round`. */
static inline int rt_partner(const rt_comm *c, uint32_t round)
{
    return c->rank ^ (1 << round);
}

/* The hub's list lookup (hub.c): a session by id, under the hub's mutex. */
int rt_hub_add(rt_hub *h, rt_comm *c);
/* Where the hub's sessions run their calls: its server's poller. */
rpc_poller *rt_hub_poller(const rt_hub *h);
void rt_hub_remove(rt_hub *h, rt_comm *c);

#endif
