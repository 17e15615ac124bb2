/* tests/collective — the ReduceChunk handler refuses what does not fit its
 * session, sent by hand from a client of the test's own to rank 1 of a
 * 3-rank session: NOT_FOUND for an unknown session, INVALID_ARGUMENT for
 * the rest, each with a text that says what was expected; and the refused
 * chunk disturbs nothing (an all-reduce afterwards still sums right).
 *
 * Every request starts from one that would be accepted (rank 1's first
 * reduce-scatter chunk from rank 0, of a 3000-float all-reduce: segments of
 * 1000 floats, one chunk each) and spoils exactly one thing. */
#include "tcoll.h"

#include <stdlib.h>
#include <string.h>

TestSuite(reduce_chunk, .timeout = 60);

#define SESSION 21
#define TARGET  1
#define COUNT   3000
#define SEG     1000 /* COUNT / 3 */

typedef void (*spoil_fn)(Ferry__ReduceChunkRequest *req, size_t *payload_len);

static void refuse_and_recover(spoil_fn spoil, int want_rc, const char *must1,
                               const char *must2)
{
    int w = 3;
    co_start(w);
    rt_comm_opts o = co_opts(SESSION, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    co_client_to(TARGET);

    Ferry__ReduceChunkRequest req = FERRY__REDUCE_CHUNK_REQUEST__INIT;
    req.job = SESSION;
    req.step = 1;
    req.phase = 0; /* reduce-scatter */
    req.chunk = 0;
    req.from_rank = TARGET - 1;
    req.ring_step = 0;
    req.count = COUNT;
    req.elem = FERRY__ELEM__ELEM_F32;
    req.secret = co_secret_field();
    req.root = 0;
    size_t len = SEG * sizeof(float);
    spoil(&req, &len);
    float *payload = co_alloc(len + sizeof(float));
    for (size_t i = 0; i < len / sizeof(float); i++)
        payload[i] = 1e6f; /* would show in the sum if it were kept */
    char err[CO_ERRLEN];
    int rc = co_send_chunk(&req, payload, len, err, sizeof err);
    co_free(payload);
    cr_assert(rc == want_rc, "got %s (%s), want %s", ferry_err_name(rc), err,
              ferry_err_name(want_rc));
    cr_assert(strstr(err, must1), "the error text \"%s\" does not say \"%s\"", err,
              must1);
    cr_assert(!must2 || strstr(err, must2), "the error text \"%s\" does not say \"%s\"",
              err, must2);

    /* The session goes on undisturbed: its first collective is step 1. */
    co_allreduce_check(COUNT, 1, "all-reduce after a refused chunk");
}

static void unknown_session(Ferry__ReduceChunkRequest *r, size_t *len)
{
    (void)len;
    r->job = 999;
}

CO_TEST(reduce_chunk, refuses_an_unknown_session_as_not_found)
{
    refuse_and_recover(unknown_session, FERRY_ENOENT, "999", NULL);
}

static void wrong_sender(Ferry__ReduceChunkRequest *r, size_t *len)
{
    (void)len;
    r->from_rank = 2;
}

CO_TEST(reduce_chunk, refuses_a_chunk_from_a_rank_other_than_the_left_neighbour)
{
    refuse_and_recover(wrong_sender, FERRY_EINVAL, "rank 2", "rank 0");
}

static void phase_7(Ferry__ReduceChunkRequest *r, size_t *len)
{
    (void)len;
    r->phase = 7;
}

CO_TEST(reduce_chunk, refuses_phase_7_naming_the_phases_it_knows)
{
    refuse_and_recover(phase_7, FERRY_EINVAL, "phase 7", "expected");
}

static void step_far_ahead(Ferry__ReduceChunkRequest *r, size_t *len)
{
    (void)len;
    r->step = 1000000;
}

CO_TEST(reduce_chunk, refuses_a_step_far_outside_the_window_naming_the_window)
{
    refuse_and_recover(step_far_ahead, FERRY_EINVAL, "1000000", "1..");
}

static void step_0(Ferry__ReduceChunkRequest *r, size_t *len)
{
    (void)len;
    r->step = 0;
}

CO_TEST(reduce_chunk, refuses_step_0_which_is_before_the_first_collective)
{
    refuse_and_recover(step_0, FERRY_EINVAL, "step 0", "1..");
}

static void ring_step_world_minus_1(Ferry__ReduceChunkRequest *r, size_t *len)
{
    (void)len;
    r->ring_step = 2;
}

CO_TEST(reduce_chunk, refuses_a_ring_step_of_world_minus_1_naming_the_steps)
{
    refuse_and_recover(ring_step_world_minus_1, FERRY_EINVAL, "ring step 2", "0..1");
}

static void chunk_past_segment(Ferry__ReduceChunkRequest *r, size_t *len)
{
    (void)len;
    r->chunk = 1;
}

CO_TEST(reduce_chunk, refuses_a_chunk_index_past_the_segment_naming_its_chunks)
{
    refuse_and_recover(chunk_past_segment, FERRY_EINVAL, "chunk 1", "1 chunk");
}

static void short_payload(Ferry__ReduceChunkRequest *r, size_t *len)
{
    (void)r;
    *len = 4;
}

CO_TEST(reduce_chunk, refuses_a_payload_of_the_wrong_length_naming_the_right_one)
{
    refuse_and_recover(short_payload, FERRY_EINVAL, "4000", NULL);
}

static void elem_5(Ferry__ReduceChunkRequest *r, size_t *len)
{
    (void)len;
    r->elem = (Ferry__Elem)5;
}

CO_TEST(reduce_chunk, refuses_element_type_5_naming_the_types_it_knows)
{
    refuse_and_recover(elem_5, FERRY_EINVAL, "element type 5", "float32");
}

static void half_in_float_session(Ferry__ReduceChunkRequest *r, size_t *len)
{
    r->elem = FERRY__ELEM__ELEM_F16;
    *len = SEG * 2;
}

CO_TEST(reduce_chunk, refuses_float16_chunks_in_a_float32_session)
{
    refuse_and_recover(half_in_float_session, FERRY_EINVAL, "float32", NULL);
}

static void broadcast_from_self(Ferry__ReduceChunkRequest *r, size_t *len)
{
    (void)len;
    r->phase = 2; /* broadcast */
    r->root = TARGET;
}

CO_TEST(reduce_chunk, refuses_a_broadcast_whose_root_is_the_receiver)
{
    refuse_and_recover(broadcast_from_self, FERRY_EINVAL, "root 1", NULL);
}

static void exchange_in_a_ring_of_3(Ferry__ReduceChunkRequest *r, size_t *len)
{
    r->phase = 3; /* exchange: two ranks only */
    *len = COUNT * sizeof(float);
}

CO_TEST(reduce_chunk, refuses_an_exchange_chunk_in_a_ring_of_3)
{
    refuse_and_recover(exchange_in_a_ring_of_3, FERRY_EINVAL, "exchange", "2 ranks");
}
