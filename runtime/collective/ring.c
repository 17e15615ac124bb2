/* The ring collectives as chunk events, under the session's run.
 *
 * All-reduce: rank r starts by sending each chunk of its own segment to
 * r + 1 (reduce-scatter step 0). Each chunk it receives is added into
 * place and sent on at once for the next step, so a chunk travels round the
 * ring without waiting for the rest of its segment; after world - 1 steps
 * the chunk is complete and the all-gather carries it round once more,
 * copied into place at each rank. Broadcast: the root sends its chunks,
 * each rank copies and forwards until the ring is closed. Two ranks
 * exchange: each sends its whole buffer and adds the other's chunk k once
 * its own chunk k has gone (rank 0's value first on both, so that both hold
 * the same bits). In a world of 2^k ranks a small all-reduce exchanges in k
 * rounds, rank r with r ^ 2^j in round j, each chunk sent on to the next
 * round's partner as soon as it has been added (the lower rank's value
 * first, so that the pair holds the same bits, and so every rank at the
 * end).
 *
 * Sends lend the caller's buffer to gRPC without a copy (rpc.h): a region
 * is only sent once it will not be written again in that phase, and a
 * region overwritten by the all-gather was sent in the reduce-scatter to a
 * rank that had to receive it before the complete value could come back.
 * An op is done, and its buffer the caller's again, only once gRPC has
 * released every start of its sends (op->lent), whatever became of the
 * calls. With fp16 a chunk is converted into a buffer of its own, freed
 * with the send once gRPC has released it too, and the rank that completes
 * a segment rounds its own copy to half so that every rank holds the same
 * bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_int.h"
#include "runtime/train/timeline.h"

#define RETRY_FIRST_NS (2 * 1000000ull)
#define RETRY_MAX_NS   (50 * 1000000ull)

struct rt_send {
    rpc_call call; /* call.data: this */
    rt_send *next;
    rt_comm *c;
    rt_comm_op *op;
    int to; /* the rank it goes to */
    rt_chunk_hdr h;
    rt_span span;
    uint16_t *half; /* fp16 copy of the span, or NULL */
    uint64_t first_ns, backoff_ns, retry_at;
    bool waiting; /* for a retry, not in flight */
    bool queued;  /* behind others, not yet started */
    bool on_wire; /* started: counted in c->wire_bytes */
    rt_send *qnext; /* in c->sendq */
    size_t bytes;
    int last_rc;  /* why it waits: FERRY_ENOENT or FERRY_EUNAVAIL */
    char *last_err; /* the last refusal's text, for FERRY_EUNAVAIL */
    /* The session's, until send_free, and one for each start whose bytes
     * gRPC holds: `half` lives until the last. */
    atomic_int refs;
};

const char *rt_op_name(const rt_comm_op *op)
{
    return op->kind == RT_OP_ALLREDUCE ? "all-reduce" : "broadcast";
}

static bool complete(const rt_comm_op *op)
{
    if (!op->started)
        return false;
    size_t want = 0, got = 0;
    for (int ph = 0; ph < RT_PHASES; ph++) {
        want += op->recv_expected[ph];
        got += op->recv_done[ph];
    }
    return got == want && op->sends_done == op->sends_expected;
}

static void unlink_send(rt_comm *c, rt_send *s)
{
    for (rt_send **p = &c->sends; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            return;
        }
}

static void unqueue(rt_comm *c, rt_send *s)
{
    for (rt_send **p = &c->sendq; *p; p = &(*p)->qnext)
        if (*p == s) {
            *p = s->qnext;
            return;
        }
}

static void send_unref(rt_send *s)
{
    if (atomic_fetch_sub(&s->refs, 1) == 1) {
        free(s->half);
        free(s);
    }
}

static void send_free(rt_comm *c, rt_send *s)
{
    unlink_send(c, s);
    if (s->queued)
        unqueue(c, s);
    s->op->inflight--;
    free(s->last_err);
    s->last_err = NULL;
    send_unref(s);
}

static void send_done(rpc_call *call);

void rt_relbox_unref(rt_relbox *b)
{
    pthread_mutex_lock(&b->mu);
    bool last = --b->refs == 0;
    pthread_mutex_unlock(&b->mu);
    if (last) {
        pthread_mutex_destroy(&b->mu);
        free(b);
    }
}

/* gRPC is done with a send's bytes (any thread, once per start that
 * succeeded, or during a start that failed after encoding). */
static void on_release(void *payload, void *arg)
{
    (void)payload;
    rt_release *r = arg;
    rt_relbox *b = r->box;
    send_unref(r->send);
    r->send = NULL;
    pthread_mutex_lock(&b->mu);
    atomic_store(&r->fired, true);
    rt_comm *c = b->c;
    if (c) /* a guest: destroy waits for it to leave */
        atomic_fetch_add(&c->guests, 1);
    pthread_mutex_unlock(&b->mu);
    rt_relbox_unref(b);
    if (!c) {
        free(r);
        return;
    }
    pthread_mutex_lock(&c->mu);
    r->next = c->released;
    c->released = r;
    pthread_mutex_unlock(&c->mu);
    rt_comm_poke(c);
    atomic_fetch_sub(&c->guests, 1);
}

/* The note that gRPC fires when it lets go of this start of send `s`: it
 * ends the op's loan, and, for the exchange, lets the peer's chunk be added
 * in place of the bytes without waiting for the acknowledgement (a round
 * trip later). That only once a chunk has gone through: before, a send
 * refused because the peer is not there yet is sent again from the same
 * bytes. NULL: no memory. */
static rt_release *release_note(rt_comm *c, rt_send *s)
{
    rt_release *r = c->box ? calloc(1, sizeof *r) : NULL;
    if (!r)
        return NULL;
    r->box = c->box;
    r->send = s;
    r->seq = s->h.seq;
    r->round = s->h.ring_step;
    r->chunk = s->h.chunk;
    r->ex = s->h.phase == RT_PHASE_EX && c->to[s->to].reached;
    atomic_init(&r->fired, false);
    pthread_mutex_lock(&c->box->mu);
    c->box->refs++;
    pthread_mutex_unlock(&c->box->mu);
    atomic_fetch_add(&s->refs, 1);
    s->op->lent++;
    return r;
}

static void issue(rt_comm *c, rt_send *s)
{
    proto_reduce_chunk_req req = {.job = c->session,
                                  .step = s->h.seq,
                                  .phase = s->h.phase,
                                  .chunk = s->h.chunk,
                                  .from_rank = (uint32_t)c->rank,
                                  .ring_step = s->h.ring_step,
                                  .count = s->h.count,
                                  .elem = (uint32_t)s->h.elem,
                                  .root = s->h.root,
                                  .secret = {.data = c->secret, .len = sizeof c->secret}};
    proto_bytes head = {0};
    int packed = proto_reduce_chunk_req_pack(&req, &head);
    size_t bytes = s->span.len * (s->half ? sizeof(uint16_t) : sizeof(float));
    rpc_msg_out out = {
        .head_bytes = head.data,
        .head_len = head.len,
        .payload = s->half ? (const void *)s->half : (const void *)(s->op->buf + s->span.off),
        .payload_len = bytes,
        .codec = c->compress == RT_COMPRESS_LZ4 ? RPC_CODEC_AUTO : RPC_CODEC_RAW,
    };
    rt_release *rel = packed ? NULL : release_note(c, s);
    out.payload_free = on_release;
    out.free_arg = rel;
    s->call.data = s;
    s->queued = false;
    int rc = rel ? rpc_call_start(c->to[s->to].ch, &s->call, PROTO_METHOD_REDUCE_CHUNK, &out,
                                  c->timeout_ms, send_done)
                 : FERRY_ENOMEM;
    proto_bytes_fini(&head);
    /* A start that failed before it encoded never releases; one that failed
     * after has released already (on this thread, so the note is filed and
     * ends the loan at the session's next drain). */
    if (rc && rel && !atomic_load(&rel->fired)) {
        s->op->lent--;
        atomic_fetch_sub(&s->refs, 1);
        rt_relbox_unref(rel->box);
        free(rel);
    }
    if (rc == 0) {
        s->on_wire = true;
        c->wire_bytes += s->bytes;
    } else {
        rt_comm_fail(c, rc, "cannot send %s %llu to rank %d (%s): %s", rt_op_name(s->op),
                     (unsigned long long)s->h.seq, s->to, c->peers[s->to],
                     ferry_strerror(rc));
        send_free(c, s);
    }
}

/* Sends go out oldest collective first, and in the order they became
 * ready within one: a rank's own chunks first, which its neighbour needs to
 * have anything to pass on, then what it passes on as it comes. */
static bool before(const rt_send *a, const rt_send *b)
{
    return a->h.seq < b->h.seq;
}

/* Starts queued sends while the bytes on the wire allow: chunks that share
 * the connection all at once arrive all late, while one after the other
 * the first can be reduced and passed on while the next travels. */
static void pump(rt_comm *c)
{
    while (c->sendq && (c->wire_bytes == 0 || c->wire_bytes + c->sendq->bytes <= c->wire_max)) {
        rt_send *s = c->sendq;
        c->sendq = s->qnext;
        issue(c, s);
    }
}

static void send_chunk(rt_comm *c, rt_comm_op *op, uint32_t phase, uint32_t ring_step,
                       uint32_t chunk, rt_span span)
{
    /* Nothing new once the session has failed: a send acknowledged after
     * the failure would otherwise pass its chunk on to the next round's
     * partner and keep the failed op, and its waiter, until that call
     * ended (up to the timeout, were the partner hung). */
    if (rt_comm_failed(c))
        return;
    rt_send *s = calloc(1, sizeof *s);
    bool f16 = phase != RT_PHASE_BC && phase != RT_PHASE_EX && c->compress == RT_COMPRESS_FP16;
    if (s && f16 && (s->half = malloc(span.len * sizeof(uint16_t))))
        rt_half_from_float(s->half, op->buf + span.off, span.len);
    if (!s || (f16 && !s->half)) {
        if (s)
            free(s);
        rt_comm_fail(c, FERRY_ENOMEM, "no memory to send %s %llu", rt_op_name(op),
                     (unsigned long long)op->seq);
        return;
    }
    atomic_init(&s->refs, 1);
    s->c = c;
    s->op = op;
    s->to = phase == RT_PHASE_EX ? rt_partner(c, ring_step) : rt_right(c);
    s->span = span;
    s->h = (rt_chunk_hdr){.seq = op->seq,
                          .count = op->n,
                          .phase = phase,
                          .ring_step = ring_step,
                          .chunk = chunk,
                          .from_rank = (uint32_t)c->rank,
                          .root = (uint32_t)op->root,
                          .elem = f16 ? RT_ELEM_F16 : RT_ELEM_F32};
    s->first_ns = uv_hrtime();
    s->backoff_ns = RETRY_FIRST_NS;
    s->bytes = span.len * (f16 ? sizeof(uint16_t) : sizeof(float));
    s->next = c->sends;
    c->sends = s;
    op->inflight++;
    rt_send **p = &c->sendq;
    while (*p && !before(s, *p))
        p = &(*p)->qnext;
    s->qnext = *p;
    *p = s;
    s->queued = true;
    pump(c);
}

/* A session that has failed refuses chunks with FAILED_PRECONDITION and
 * "ReduceChunk: rank 1 of session 7 stopped (ETIMEDOUT): <its error>"
 * (hub.c). */
#define STOPPED_PREFIX "ReduceChunk: "

/* The code in such a text, or FERRY_EREMOTE. */
static int stopped_code(const char *why)
{
    const char *at = why ? strstr(why, " stopped (") : NULL;
    if (!at)
        return FERRY_EREMOTE;
    at += strlen(" stopped (");
#define NAME_CODE(name, value, msg)                                                      \
    if (strncmp(at, #name ")", strlen(#name ")")) == 0)                                  \
        return FERRY_##name;
    FERRY_ERRNO_MAP(NAME_CODE)
#undef NAME_CODE
    return FERRY_EREMOTE;
}

/* Says why the neighbour or partner did not take send `s`: the existing
 * wording, with the call's text. */
static void fail_send(rt_comm *c, rt_send *s, int rc, const char *detail)
{
    char step[32] = "";
    if (s->h.phase == RT_PHASE_RS || s->h.phase == RT_PHASE_AG)
        snprintf(step, sizeof step, " ring step %u", s->h.ring_step);
    else if (s->h.phase == RT_PHASE_EX && c->rounds > 1)
        snprintf(step, sizeof step, " round %u", s->h.ring_step);
    rt_comm_fail(c, rc, "rank %d (%s) did not take %s %llu, %s%s chunk %u: %s", s->to,
                 c->peers[s->to], rt_op_name(s->op), (unsigned long long)s->h.seq,
                 rt_phase_name(s->h.phase), step, s->h.chunk,
                 detail ? detail : ferry_strerror(rc));
}

static void ex_sent(rt_comm *c, rt_comm_op *op, uint32_t round, uint32_t k);

static void send_done(rpc_call *call)
{
    rt_send *s = call->data;
    rt_comm *c = s->c;
    rt_comm_op *op = s->op;
    uint64_t now = uv_hrtime();
    int rc = call->result;
    if (s->on_wire) {
        s->on_wire = false;
        c->wire_bytes -= s->bytes;
    }
    bool failed = rt_comm_failed(c);
    /* The neighbour has not registered the session yet (it is still
     * loading its data, say), or its server cannot be reached before this
     * session has ever reached it (it is not accepting yet, or gRPC lost
     * the race of its first connect): try again until the collective's
     * timeout. Once a chunk has gone through, an unreachable neighbour has
     * gone away, and that fails at once. */
    bool unreachable = rc == FERRY_EUNAVAIL && !c->to[s->to].reached;
    if ((rc == FERRY_ENOENT || unreachable) && !failed &&
        now - s->first_ns < (uint64_t)c->timeout_ms * 1000000ull) {
        s->last_rc = rc;
        if (unreachable && call->errmsg) {
            free(s->last_err);
            s->last_err = strdup(call->errmsg);
        }
        rpc_call_fini(call);
        s->waiting = true;
        s->retry_at = now + s->backoff_ns;
        s->backoff_ns = s->backoff_ns * 2 > RETRY_MAX_NS ? RETRY_MAX_NS : s->backoff_ns * 2;
        pthread_mutex_lock(&c->mu);
        if (unreachable)
            c->stats.reconnects++;
        else
            c->stats.retries++;
        pthread_mutex_unlock(&c->mu);
        return;
    }
    if (rc == 0) {
        c->to[s->to].reached = true;
        if (s->h.phase == RT_PHASE_EX)
            ex_sent(c, op, s->h.ring_step, s->h.chunk);
        op->sends_done++;
        rt_timeline_chunk(c->tl, PROTO_TL_SEND, s->h.chunk, op->seq, s->first_ns);
        op->progress_ns = now;
        pthread_mutex_lock(&c->mu);
        c->stats.chunks_sent++;
        c->stats.bytes_sent += s->span.len * sizeof(float);
        pthread_mutex_unlock(&c->mu);
    } else if (!failed && rc == FERRY_EBUSY) {
        /* The neighbour's session failed first and refuses every chunk with
         * its own error: fail as it did, quoting it. */
        const char *why = call->errmsg ? strstr(call->errmsg, STOPPED_PREFIX) : NULL;
        why = why ? why + strlen(STOPPED_PREFIX) : call->errmsg;
        fail_send(c, s, stopped_code(why), why);
    } else if (!failed) {
        /* A chunk this rank built from the session's own geometry, with
         * its secret, can only be refused as malformed or unauthorised
         * when the ranks disagree on them. A peer
         * still without the session when the timeout has passed is what
         * the tick would have found a moment later: a timeout. */
        fail_send(c, s,
                  rc == FERRY_EINVAL || rc == FERRY_EACCES ? FERRY_EPROTO
                  : rc == FERRY_ENOENT                     ? FERRY_ETIMEDOUT
                                                           : rc,
                  call->errmsg);
    }
    rpc_call_fini(call);
    send_free(c, s);
    pump(c);
    rt_ring_release(c);
}

bool rt_ring_exchange(const rt_comm *c, const rt_comm_op *op)
{
    return c->rounds > 0 && op->kind == RT_OP_ALLREDUCE && c->compress != RT_COMPRESS_FP16 &&
           (c->world == 2 || op->n * sizeof(float) <= RT_EX_MAX_BYTES);
}

void rt_ring_start(rt_comm *c, rt_comm_op *op)
{
    op->progress_ns = uv_hrtime();
    op->started = true;
    int W = c->world, r = c->rank;
    if (W == 1 || op->n == 0)
        return;
    if (rt_ring_exchange(c, op)) {
        size_t chunks = rt_geo_chunks(op->n, c->chunk);
        if (!(op->ex = calloc(chunks * (size_t)c->rounds, sizeof *op->ex))) {
            rt_comm_fail(c, FERRY_ENOMEM, "no memory to start all-reduce %llu",
                         (unsigned long long)op->seq);
            return;
        }
        op->ex_chunks = chunks;
        if (!rt_slots_alloc(c, op))
            return;
        op->recv_expected[RT_PHASE_EX] = op->sends_expected = chunks * (size_t)c->rounds;
        for (size_t k = 0; k < chunks; k++)
            send_chunk(c, op, RT_PHASE_EX, 0, (uint32_t)k,
                       rt_geo_chunk((rt_span){0, op->n}, c->chunk, k));
        return;
    }
    if (!rt_slots_alloc(c, op))
        return;
    if (op->kind == RT_OP_BROADCAST) {
        size_t chunks = rt_geo_chunks(op->n, c->chunk);
        op->recv_expected[RT_PHASE_BC] = r == op->root ? 0 : chunks;
        op->sends_expected = rt_right(c) == op->root ? 0 : chunks;
        if (r == op->root)
            for (size_t k = 0; k < chunks; k++)
                send_chunk(c, op, RT_PHASE_BC, 0, (uint32_t)k,
                           rt_geo_chunk((rt_span){0, op->n}, c->chunk, k));
        return;
    }
    for (int ph = RT_PHASE_RS; ph <= RT_PHASE_AG; ph++)
        for (int j = 0; j + 1 < W; j++) {
            rt_span in = rt_geo_segment(op->n, W, rt_geo_recv_segment(r, W, ph, j));
            rt_span out = rt_geo_segment(op->n, W, rt_geo_send_segment(r, W, ph, j));
            op->recv_expected[ph] += rt_geo_chunks(in.len, c->chunk);
            op->sends_expected += rt_geo_chunks(out.len, c->chunk);
        }
    rt_span own = rt_geo_segment(op->n, W, r);
    size_t chunks = rt_geo_chunks(own.len, c->chunk);
    for (size_t k = 0; k < chunks; k++)
        send_chunk(c, op, RT_PHASE_RS, 0, (uint32_t)k, rt_geo_chunk(own, c->chunk, k));
}

void rt_ring_op_free(rt_comm_op *op)
{
    if (!op)
        return;
    if (op->ex)
        for (size_t k = 0; k < op->recv_expected[RT_PHASE_EX]; k++)
            rt_chunk_free(op->ex[k].parked);
    free(op->ex);
    free(op->got);
    free(op);
}

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

/* The kernels below read `src` at any alignment: a payload's runs start
 * wherever gRPC's slices split it. */
static float load(const void *src, size_t i)
{
    float v;
    memcpy(&v, (const char *)src + i * sizeof v, sizeof v);
    return v;
}

static void add(float *restrict dst, const void *restrict src_v, size_t n)
{
    const char *src = src_v;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v4f d0, d1, s0, s1;
        memcpy(&d0, dst + i, 16);
        memcpy(&d1, dst + i + 4, 16);
        memcpy(&s0, src + 4 * i, 16);
        memcpy(&s1, src + 4 * (i + 4), 16);
        d0 += s0;
        d1 += s1;
        memcpy(dst + i, &d0, 16);
        memcpy(dst + i + 4, &d1, 16);
    }
    for (; i < n; i++)
        dst[i] += load(src, i);
}

/* A NaN sum of a and b as both ranks of an exchange make it: a's NaN
 * (quieted) if a is one, else b's, else the sum's (Inf - Inf). The
 * hardware keeps one operand's payload, and which depends on the order the
 * compiler chose: each rank adds in its own order. */
static float nan_of(float sum, float a, float b)
{
    uint32_t u;
    if (a != a)
        memcpy(&u, &a, 4);
    else if (b != b)
        memcpy(&u, &b, 4);
    else
        return sum;
    u |= 0x00400000u;
    memcpy(&sum, &u, 4);
    return sum;
}

/* dst[i] += src[i] one value at a time, NaNs as ex_add_f32() makes them. */
static void ex_add_scalar(float *restrict dst, const char *restrict src, size_t n,
                          bool src_first)
{
    for (size_t i = 0; i < n; i++) {
        float d = dst[i], v = load(src, i), sum = d + v;
        if (sum != sum)
            sum = src_first ? nan_of(sum, v, d) : nan_of(sum, d, v);
        dst[i] = sum;
    }
}

/* Floats per block of the exchange's add: the sums of a block are kept
 * (in L1) until one test says none is a NaN, so that the common case is a
 * plain vector add with no per-lane test. */
#define EX_BLOCK 64

/* dst += src for the exchange, where the NaNs that come out must not
 * depend on which rank adds: `src_first` says src is rank 0's. */
static void ex_add_f32(float *restrict dst, const void *restrict src_v, size_t n,
                       bool src_first)
{
    const char *src = src_v;
    size_t i = 0;
    for (; i + EX_BLOCK <= n; i += EX_BLOCK) {
        v4f sum[EX_BLOCK / 4];
        v4i nan = {0, 0, 0, 0};
        for (int k = 0; k < EX_BLOCK / 4; k++) {
            v4f d, v;
            memcpy(&d, dst + i + 4 * k, 16);
            memcpy(&v, src + 4 * (i + 4 * k), 16);
            sum[k] = d + v;
            nan |= sum[k] != sum[k];
        }
        if (nan[0] | nan[1] | nan[2] | nan[3])
            ex_add_scalar(dst + i, src + 4 * i, EX_BLOCK, src_first);
        else
            memcpy(dst + i, sum, sizeof sum);
    }
    ex_add_scalar(dst + i, src + 4 * i, n - i, src_first);
}

/* What to do with a piece of a received chunk: n elements at src (any
 * alignment) for dst[0..n). */
typedef void (*piece_fn)(float *dst, const void *src, size_t n, bool arg);

/* Feeds chunk `ch`'s payload to `fn` in pieces of whole elements of
 * `esize` bytes, run by run as gRPC received it; an element split between
 * two runs is put together first. dst is where element 0 goes. */
static void for_pieces(const rt_chunk *ch, size_t esize, float *dst, piece_fn fn,
                       bool arg)
{
    union {
        float f;
        uint8_t b[4];
    } part;
    size_t have = 0, at = 0;
    for (size_t r = 0; r < ch->pl.n_runs; r++) {
        const uint8_t *p = ch->pl.runs[r].p;
        size_t len = ch->pl.runs[r].len;
        if (have) {
            size_t k = esize - have < len ? esize - have : len;
            memcpy(part.b + have, p, k);
            have += k;
            p += k;
            len -= k;
            if (have < esize)
                continue;
            fn(dst + at++, part.b, 1, arg);
            have = 0;
        }
        size_t n = len / esize;
        if (n)
            fn(dst + at, p, n, arg);
        at += n;
        have = len - n * esize;
        memcpy(part.b, p + n * esize, have);
    }
}

static void piece_ex_add(float *dst, const void *src, size_t n, bool src_first)
{
    ex_add_f32(dst, src, n, src_first);
}

static void piece_add(float *dst, const void *src, size_t n, bool unused)
{
    (void)unused;
    add(dst, src, n);
}

static void piece_copy(float *dst, const void *src, size_t n, bool unused)
{
    (void)unused;
    memcpy(dst, src, n * sizeof(float));
}

/* Half values at any alignment: through an aligned copy when need be. */
static void piece_half(float *dst, const void *src, size_t n, bool add_to)
{
    uint16_t tmp[1024];
    const uint16_t *h = src;
    for (size_t at = 0; at < n;) {
        size_t k = n - at;
        if ((uintptr_t)src % sizeof(uint16_t)) {
            k = k < 1024 ? k : 1024;
            memcpy(tmp, (const char *)src + at * sizeof(uint16_t), k * sizeof(uint16_t));
            h = tmp;
        } else {
            h = (const uint16_t *)src + at;
        }
        if (add_to)
            rt_half_add_to_float(dst + at, h, k);
        else
            rt_half_to_float(dst + at, h, k);
        at += k;
    }
}

static void received(rt_comm *c, rt_comm_op *op, rt_chunk *ch)
{
    bool first = !op->recv_done[RT_PHASE_RS] && !op->recv_done[RT_PHASE_EX] &&
                 !op->recv_done[RT_PHASE_AG] && !op->recv_done[RT_PHASE_BC];
    if (first)
        rt_timeline_chunk(c->tl, PROTO_TL_WAIT, ch->h.from_rank, op->seq,
                          op->progress_ns);
    rt_timeline_chunk(c->tl, PROTO_TL_RECV, ch->h.chunk, op->seq, op->progress_ns);
    op->recv_done[ch->h.phase]++;
    op->progress_ns = uv_hrtime();
    pthread_mutex_lock(&c->mu);
    c->stats.chunks_lz4 += ch->lz4;
    c->stats.wire_received += ch->wire_len;
    pthread_mutex_unlock(&c->mu);
}

/* The partner's chunk of an exchange round, added in place now that this
 * rank's own copy of it has gone: the lower rank's value first on both
 * (they hold the same bits after), and on to the next round's partner. */
static void ex_add(rt_comm *c, rt_comm_op *op, rt_chunk *ch)
{
    uint32_t round = ch->h.ring_step;
    rt_span sp = rt_geo_chunk((rt_span){0, op->n}, c->chunk, ch->h.chunk);
    received(c, op, ch);
    uint64_t t0 = uv_hrtime();
    for_pieces(ch, sizeof(float), op->buf + sp.off, piece_ex_add,
               rt_partner(c, round) < c->rank);
    rt_timeline_chunk(c->tl, PROTO_TL_REDUCE, ch->h.chunk, op->seq, t0);
    if ((int)round + 1 < c->rounds)
        send_chunk(c, op, RT_PHASE_EX, round + 1, ch->h.chunk, sp);
    rt_chunk_free(ch);
}

static void ex_sent(rt_comm *c, rt_comm_op *op, uint32_t round, uint32_t k)
{
    struct rt_ex_chunk *x = &op->ex[round * op->ex_chunks + k];
    if (x->sent) /* released first, then acknowledged */
        return;
    x->sent = true;
    rt_chunk *ch = x->parked;
    x->parked = NULL;
    if (ch)
        ex_add(c, op, ch);
}

void rt_ring_consume(rt_comm *c, rt_comm_op *op, rt_chunk *ch)
{
    const rt_chunk_hdr *h = &ch->h;
    bool bc = h->phase == RT_PHASE_BC;
    char why[512];
    rt_span sp;
    bool kept = ch->held != 0;
    rt_slot_uncharge(c, ch);
    int unfit = rt_slot_fits(c, op, h, ch->peer, why, sizeof why);
    if (!unfit && kept) { /* the rank's own chunks may have come since */
        pthread_mutex_lock(&c->mu);
        unfit = rt_slot_pin_check(c, h->from_rank, ch->peer, why, sizeof why);
        pthread_mutex_unlock(&c->mu);
    }
    if (unfit) {
        /* Kept before its collective started (a chunk that came after was
         * refused on arrival): not this collective's, or not from the rank
         * it claims, so it is dropped, and the real one is still to come.
         * Should that never come, the timeout's message quotes this. */
        if (!op->strays++)
            snprintf(op->stray, sizeof op->stray, "%.380s", why);
        pthread_mutex_lock(&c->mu);
        c->stats.strays++;
        pthread_mutex_unlock(&c->mu);
        rt_chunk_free(ch);
        return;
    }
    if (rt_geo_check(h, c->rank, c->world, c->chunk, &sp, why, sizeof why)) {
        rt_comm_fail(c, FERRY_EPROTO, "collective %llu: %s", (unsigned long long)op->seq,
                     why);
        rt_chunk_free(ch);
        return;
    }
    if (!rt_slot_take(c, op, ch)) {
        rt_chunk_free(ch);
        return;
    }
    if (h->phase == RT_PHASE_EX) {
        if (!op->ex) { /* its start ran out of memory */
            rt_chunk_free(ch);
            return;
        }
        struct rt_ex_chunk *x = &op->ex[h->ring_step * op->ex_chunks + h->chunk];
        x->got = true;
        if (x->sent) {
            ex_add(c, op, ch);
        } else {
            x->parked = ch; /* until this rank's own chunk has gone */
        }
        return;
    }
    float *dst = op->buf + sp.off;
    bool f16 = h->elem == RT_ELEM_F16;
    received(c, op, ch);
    uint64_t t0 = uv_hrtime();
    if (h->phase == RT_PHASE_RS) {
        if (f16)
            for_pieces(ch, sizeof(uint16_t), dst, piece_half, true);
        else
            for_pieces(ch, sizeof(float), dst, piece_add, false);
    } else if (f16) {
        for_pieces(ch, sizeof(uint16_t), dst, piece_half, false);
    } else {
        for_pieces(ch, sizeof(float), dst, piece_copy, false);
    }
    if (h->phase == RT_PHASE_RS)
        rt_timeline_chunk(c->tl, PROTO_TL_REDUCE, h->chunk, op->seq, t0);

    int W = c->world;
    if (bc) {
        if (rt_right(c) != op->root)
            send_chunk(c, op, RT_PHASE_BC, 0, h->chunk, sp);
    } else if (h->ring_step + 2 < (uint32_t)W) {
        send_chunk(c, op, h->phase, h->ring_step + 1, h->chunk, sp);
    } else if (h->phase == RT_PHASE_RS) {
        /* This rank now holds the chunk's complete sum. */
        if (c->compress == RT_COMPRESS_FP16)
            rt_half_round(dst, sp.len);
        send_chunk(c, op, RT_PHASE_AG, 0, h->chunk, sp);
    }
    rt_chunk_free(ch);
}

void rt_ring_released(rt_comm *c, rt_release *list)
{
    bool failed = rt_comm_failed(c);
    while (list) {
        rt_release *r = list;
        list = r->next;
        for (rt_comm_op *op = c->active; op; op = op->next)
            if (op->seq == r->seq) {
                op->lent--;
                if (!failed && r->ex && op->ex && (int)r->round < c->rounds &&
                    r->chunk < op->ex_chunks)
                    ex_sent(c, op, r->round, r->chunk);
                break;
            }
        free(r);
    }
}

/* The phase whose chunks are not all in yet (the last when all are). */
static int recv_phase(const rt_comm_op *op)
{
    int ph = 0;
    while (ph + 1 < RT_PHASES && op->recv_done[ph] == op->recv_expected[ph])
        ph++;
    return ph;
}

/* The exchange phase's first chunk not in yet. */
static size_t ex_missing(const rt_comm_op *op)
{
    size_t k = 0;
    while (k + 1 < op->recv_expected[RT_PHASE_EX] && op->ex[k].got)
        k++;
    return k;
}

int rt_ring_waits_for(const rt_comm *c, const rt_comm_op *op)
{
    int ph = recv_phase(op);
    if (op->recv_done[ph] < op->recv_expected[ph])
        return ph == RT_PHASE_EX
                   ? rt_partner(c, (uint32_t)(ex_missing(op) / op->ex_chunks))
                   : rt_left(c);
    for (const rt_send *s = c->sends; s; s = s->next)
        if (s->op == op)
            return s->to;
    return complete(op) ? -1 : rt_left(c);
}

void rt_ring_check_progress(rt_comm *c, uint64_t now_ns)
{
    uint64_t limit = (uint64_t)c->timeout_ms * 1000000ull;
    for (rt_comm_op *op = c->active; op; op = op->next) {
        if (complete(op) || now_ns - op->progress_ns <= limit)
            continue;
        /* A send still repeated because the neighbour's server does not
         * answer is the cause: say so, as its last refusal did. */
        for (rt_send *s = c->sends; s; s = s->next)
            if (s->op == op && s->last_rc == FERRY_EUNAVAIL) {
                fail_send(c, s, FERRY_EUNAVAIL, s->last_err);
                return;
            }
        double quiet = (double)(now_ns - op->progress_ns) / 1e9;
        int ph = recv_phase(op);
        if (op->recv_done[ph] < op->recv_expected[ph]) {
            int from = rt_ring_waits_for(c, op);
            char round[32] = "";
            if (ph == RT_PHASE_EX) { /* the partner of the first round not in */
                size_t k = ex_missing(op);
                if (c->rounds > 1)
                    snprintf(round, sizeof round, " round %zu", k / op->ex_chunks);
            }
            /* Chunks that came for it and did not fit it, then silence: the
             * ranks most likely disagree on it. */
            char stray[sizeof op->stray + 96] = "";
            if (op->strays)
                snprintf(stray, sizeof stray,
                         "; %zu chunk(s) that came for it before it started here did "
                         "not fit it, the first: %.380s",
                         op->strays, op->stray);
            rt_comm_fail(c, op->strays ? FERRY_EPROTO : FERRY_ETIMEDOUT,
                         "rank %d (%s) sent nothing for %.1f s: %s %llu of %zu floats, "
                         "%s%s: %zu of %zu chunks received; it is dead, hung or not in "
                         "this collective%s",
                         from, c->peers[from], quiet, rt_op_name(op),
                         (unsigned long long)op->seq, op->n, rt_phase_name((uint32_t)ph),
                         round, op->recv_done[ph], op->recv_expected[ph], stray);
        } else {
            int to = rt_right(c);
            for (rt_send *s = c->sends; s; s = s->next)
                if (s->op == op) {
                    to = s->to;
                    break;
                }
            rt_comm_fail(c, FERRY_ETIMEDOUT,
                         "rank %d (%s) acknowledged nothing for %.1f s: %s %llu of %zu "
                         "floats, %zu of %zu chunks sent",
                         to, c->peers[to], quiet, rt_op_name(op),
                         (unsigned long long)op->seq, op->n, op->sends_done,
                         op->sends_expected);
        }
        return;
    }
}

void rt_ring_retry_due(rt_comm *c, uint64_t now_ns)
{
    rt_send *due[64];
    size_t n = 0;
    for (rt_send *s = c->sends; s && n < 64; s = s->next)
        if (s->waiting && s->retry_at <= now_ns)
            due[n++] = s;
    for (size_t i = 0; i < n; i++) {
        due[i]->waiting = false;
        issue(c, due[i]);
    }
}

void rt_ring_cancel_sends(rt_comm *c)
{
    for (rt_send *s = c->sends, *next; s; s = next) {
        next = s->next;
        if (s->waiting || s->queued)
            send_free(c, s);
        else
            rpc_call_cancel(&s->call);
    }
}

void rt_ring_release(rt_comm *c)
{
    pthread_mutex_lock(&c->mu);
    int err = c->error;
    bool ended = false;
    for (rt_comm_op **p = &c->active; *p;) {
        rt_comm_op *op = *p;
        bool ok = complete(op) && op->lent == 0;
        if (ok || (err && op->inflight == 0 && op->lent == 0)) {
            *p = op->next;
            c->stats.ops += ok;
            op->result = ok ? 0 : err;
            op->done = true; /* the waiter may free it from here on */
            ended = true;
            continue;
        }
        p = &op->next;
    }
    uint64_t low = c->next_seq + 1;
    for (rt_comm_op *op = c->active; op; op = op->next)
        low = op->seq < low ? op->seq : low;
    for (rt_comm_op *op = c->queue; op; op = op->next)
        low = op->seq < low ? op->seq : low;
    atomic_store(&c->done_upto, low - 1);
    /* Waiters wait for their op alone: a wake-up for anything else costs
     * them a context switch for nothing. */
    if (ended)
        pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);

    /* Chunks of collectives that are over can only be strays. */
    for (rt_chunk **q = &c->pending; *q;) {
        rt_chunk *ch = *q;
        if (ch->h.seq < low) {
            *q = ch->next;
            rt_slot_uncharge(c, ch);
            rt_chunk_free(ch);
        } else {
            q = &ch->next;
        }
    }
}
