/* The hub: a process's collective sessions by id, and the ReduceChunk
 * handler that files each incoming chunk with its session.
 *
 * The handler runs inline on the server's poller thread: it checks the
 * header, takes the payload where gRPC received it (the method has
 * RPC_METHOD_PAYLOAD_RUNS: no copy) and pokes the session, which reduces
 * it in place, on this thread unless another holds the session's work.
 * It holds the hub's mutex while it touches a session, and a session
 * leaves the hub before it is torn down, so no chunk is ever filed with a
 * session being freed. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "coll_int.h"

struct rt_hub {
    pthread_mutex_t mu;
    rt_comm *list;
    rpc_poller *poller;
};

int rt_hub_create(rpc_poller *poller, rt_hub **out)
{
    *out = NULL;
    if (!poller)
        return FERRY_EINVAL;
    rt_hub *h = calloc(1, sizeof *h);
    if (!h)
        return FERRY_ENOMEM;
    h->poller = poller;
    pthread_mutex_init(&h->mu, NULL);
    *out = h;
    return 0;
}

void rt_hub_destroy(rt_hub *h)
{
    if (!h)
        return;
    pthread_mutex_destroy(&h->mu);
    free(h);
}

rpc_poller *rt_hub_poller(const rt_hub *h)
{
    return h->poller;
}

static rt_comm *find(rt_hub *h, uint64_t session)
{
    for (rt_comm *c = h->list; c; c = c->hub_next)
        if (c->session == session)
            return c;
    return NULL;
}

int rt_hub_add(rt_hub *h, rt_comm *c)
{
    pthread_mutex_lock(&h->mu);
    int rc = find(h, c->session) ? FERRY_EEXIST : 0;
    if (rc == 0) {
        c->hub_next = h->list;
        h->list = c;
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

void rt_hub_remove(rt_hub *h, rt_comm *c)
{
    pthread_mutex_lock(&h->mu);
    for (rt_comm **p = &h->list; *p; p = &(*p)->hub_next)
        if (*p == c) {
            *p = c->hub_next;
            break;
        }
    pthread_mutex_unlock(&h->mu);
}

void rt_chunk_free(rt_chunk *ch)
{
    if (!ch)
        return;
    rpc_payload_fini(&ch->pl);
    free(ch);
}

/* The op a caller started as `seq`, or NULL when it has been waited for.
 * Under mu. */
static rt_comm_op *started_op(rt_comm *c, uint64_t seq)
{
    for (rt_comm_op *op = c->owned; op; op = op->owned)
        if (op->seq == seq)
            return op;
    return NULL;
}

/* Whether a chunk for collective `h->seq`, not started on this rank, may be
 * kept until it starts (coll_int.h's bounds): 0, charging the session
 * `cost`, or FERRY_ENOENT, which its sender takes as "try again". Under
 * mu. */
static int hold(rt_comm *c, const rt_chunk_hdr *h, uint64_t done, size_t cost, char *why,
                size_t len)
{
    size_t budget = RT_COMM_HELD_BYTES;
    if (h->seq > done + RT_COMM_AHEAD) {
        snprintf(
            why, len,
            "collective %llu of session %llu has not started on rank %d, which keeps "
            "chunks of collectives up to %llu only until then",
            (unsigned long long)h->seq, (unsigned long long)c->session, c->rank,
            (unsigned long long)done + RT_COMM_AHEAD);
    } else if (c->held_bytes + cost > budget && c->held_bytes > 0) {
        snprintf(
            why, len,
            "collective %llu of session %llu has not started on rank %d, whose chunks "
            "kept for collectives not started fill its %zu MiB",
            (unsigned long long)h->seq, (unsigned long long)c->session, c->rank,
            budget >> 20);
    } else {
        c->held_bytes += cost;
        c->stats.held++;
        c->stats.held_bytes = c->held_bytes;
        if (c->held_bytes > c->stats.held_peak)
            c->stats.held_peak = c->held_bytes;
        return 0;
    }
    c->stats.held_refused++;
    return FERRY_ENOENT;
}

/* Checks the chunk against session `c` and files it: 0, FERRY_EBUSY when
 * the session has failed (the text is its own error and code, so that the
 * sender can say what happened here), FERRY_ENOENT for a chunk that may
 * come again later (hold) or FERRY_EINVAL, with `why` naming the sender. */
static int check_and_file(rt_comm *c, rt_chunk *ch, size_t bytes, char *why, size_t len)
{
    const rt_chunk_hdr *h = &ch->h;
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    uint64_t done = atomic_load(&c->done_upto);
    rt_span sp;
    if (c->error) {
        rc = FERRY_EBUSY;
        snprintf(why, len, "rank %d of session %llu stopped (%s): %.900s", c->rank,
                 (unsigned long long)c->session, ferry_err_name(c->error), c->errmsg);
    } else if (h->seq <= done || h->seq > done + RT_COMM_WINDOW) {
        rc = FERRY_EINVAL;
        snprintf(why, len,
                 "step %llu of session %llu: collectives up to %llu are done, this "
                 "rank takes steps %llu..%llu",
                 (unsigned long long)h->seq, (unsigned long long)c->session,
                 (unsigned long long)done, (unsigned long long)done + 1,
                 (unsigned long long)done + RT_COMM_WINDOW);
    } else {
        rc = rt_geo_check(h, c->rank, c->world, c->chunk, &sp, why, len);
    }
    /* (An fp16 session never exchanges: it refuses exchange chunks here.) */
    int want_elem = h->phase != RT_PHASE_BC && c->compress == RT_COMPRESS_FP16
                        ? RT_ELEM_F16
                        : RT_ELEM_F32;
    if (rc == 0 && h->elem != want_elem) {
        rc = FERRY_EINVAL;
        snprintf(why, len, "element type %d: session %llu sends %s in %s", h->elem,
                 (unsigned long long)c->session, want_elem ? "float16" : "float32",
                 rt_phase_name(h->phase));
    }
    size_t want = rc ? 0 : sp.len * (h->elem == RT_ELEM_F16 ? 2 : 4);
    if (rc == 0 && bytes != want) {
        rc = FERRY_EINVAL;
        snprintf(
            why, len,
            "%s ring step %u chunk %u of a %llu-float collective: %zu payload bytes, "
            "expected %zu",
            rt_phase_name(h->phase), h->ring_step, h->chunk, (unsigned long long)h->count,
            bytes, want);
    }
    if (rc == 0)
        rc = rt_slot_pin_check(c, h->from_rank, ch->peer, why, len);
    if (rc == 0 && h->seq <= c->next_seq) {
        /* Started here: it is checked against its op now. */
        rt_comm_op *op = started_op(c, h->seq);
        if (!op || op->done) {
            rc = FERRY_EINVAL;
            snprintf(why, len, "collective %llu of session %llu is over on rank %d",
                     (unsigned long long)h->seq, (unsigned long long)c->session, c->rank);
        } else if ((rc = rt_slot_fits(c, op, h, ch->peer, why, len)) == 0) {
            /* It fits a collective under way: its caller is the rank's. A
             * chunk kept for one not started pins nothing: it may be a
             * stray, found out only when that one starts. */
            struct rt_pin *p = &c->pins[h->from_rank];
            snprintf(p->peer, sizeof p->peer, "%s", ch->peer);
            p->last_ns = uv_hrtime();
        }
    } else if (rc == 0) {
        size_t cost = bytes + RT_COMM_HELD_OVERHEAD;
        if ((rc = hold(c, h, done, cost, why, len)) == 0)
            ch->held = cost;
    }
    if (rc == 0) {
        *c->inbox_tail = ch;
        c->inbox_tail = &ch->next;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Whether the chunk carries session `c`'s secret. In constant time: how
 * long a refusal takes says nothing of how much of a guess was right. A
 * session without one (a world of 1) takes no chunk. */
static bool keyed(const rt_comm *c, const proto_blob *secret)
{
    return c->keyed && secret->len == sizeof c->secret &&
           CRYPTO_memcmp(secret->data, c->secret, sizeof c->secret) == 0;
}

void rt_reduce_chunk_handler(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    rt_hub *hub = data;
    proto_reduce_chunk_req *in = NULL;
    if (proto_reduce_chunk_req_unpack(req->head, req->head_len, &in)) {
        rpc_srv_fail(sc, FERRY_EINVAL,
                     "ReduceChunk: the request is not a ReduceChunkRequest");
        return;
    }
    rt_chunk_hdr h = {.seq = in->step,
                      .count = in->count,
                      .phase = in->phase,
                      .ring_step = in->ring_step,
                      .chunk = in->chunk,
                      .from_rank = in->from_rank,
                      .root = in->root,
                      .elem = (int)in->elem};
    uint64_t session = in->job;

    rt_chunk *ch = calloc(1, sizeof *ch);
    if (!ch) {
        proto_free(in);
        rpc_srv_fail(sc, FERRY_ENOMEM, "ReduceChunk: no memory");
        return;
    }
    char why[1024];
    int rc;
    pthread_mutex_lock(&hub->mu);
    rt_comm *c = find(hub, session);
    if (!c) {
        rc = FERRY_ENOENT;
        snprintf(why, sizeof why, "no collective session %llu on this worker",
                 (unsigned long long)session);
    } else if (!keyed(c, &in->secret)) {
        /* Before anything else: such a caller is not a rank of the
         * session, and is told nothing of it (its state, its steps). */
        rc = FERRY_EACCES;
        snprintf(why, sizeof why,
                 "a chunk from %.64s for session %llu does not carry the session's "
                 "secret: only its ranks, told it by their master, send its chunks",
                 rpc_srv_peer(sc), (unsigned long long)session);
    } else {
        ch->h = h;
        ch->lz4 = req->codec == RPC_CODEC_LZ4;
        ch->wire_len = req->wire_len;
        snprintf(ch->peer, sizeof ch->peer, "%s", rpc_srv_peer(sc));
        size_t bytes = req->payload_len;
        rpc_msg_take_runs(req, &ch->pl);
        rc = check_and_file(c, ch, bytes, why, sizeof why);
        if (rc)
            rpc_payload_fini(&ch->pl);
    }
    if (in->secret.len)
        OPENSSL_cleanse(in->secret.data, in->secret.len);
    proto_free(in);
    if (rc == 0) {
        /* Reduced (and sent on) right here, unless the session's work is
         * in another thread's hands: that thread takes it. */
        rt_comm_poke(c);
    }
    pthread_mutex_unlock(&hub->mu);
    if (rc) {
        free(ch);
        rpc_srv_fail(sc, rc, "ReduceChunk: %s", why);
        return;
    }
    rpc_srv_reply(sc, &(rpc_msg_out){0}); /* ReduceChunkReply is empty */
}
