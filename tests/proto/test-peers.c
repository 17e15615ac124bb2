/* tests/proto — the heads that a run's workers send each other (a ring's
 * chunks, the parameter server's pushes and pulls) are the generated
 * messages field for field, the session's secret included as bytes, and
 * a view whose bytes member is not a proto_blob is refused. */
#include <string.h>

#include <criterion/criterion.h>

#include <ferry/ferry.h>

#include "proto/proto_int.h"
#include "refused.h"

static const uint8_t secret[32] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                   11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                                   21, 22, 23, 24, 25, 26, 27, 28, 29};

Test(proto_peers, a_chunk_head_is_the_generated_message)
{
    proto_reduce_chunk_req in = {.job = 1,
                                 .step = 2,
                                 .phase = 1,
                                 .chunk = 3,
                                 .from_rank = 4,
                                 .ring_step = 5,
                                 .count = 1u << 20,
                                 .elem = 1,
                                 .root = 6,
                                 .secret = {(uint8_t *)secret, sizeof secret}};
    proto_bytes b;
    cr_assert_eq(proto_reduce_chunk_req_pack(&in, &b), 0);
    Ferry__ReduceChunkRequest *m =
        ferry__reduce_chunk_request__unpack(NULL, b.len, b.data);
    cr_assert(m);
    cr_assert_eq(m->job, 1);
    cr_assert_eq(m->step, 2);
    cr_assert_eq(m->phase, 1);
    cr_assert_eq(m->chunk, 3);
    cr_assert_eq(m->from_rank, 4);
    cr_assert_eq(m->ring_step, 5);
    cr_assert_eq(m->count, 1u << 20);
    cr_assert_eq(m->elem, FERRY__ELEM__ELEM_F16);
    cr_assert_eq(m->root, 6);
    cr_assert_eq(m->secret.len, sizeof secret);
    cr_assert_eq(memcmp(m->secret.data, secret, sizeof secret), 0);
    ferry__reduce_chunk_request__free_unpacked(m, NULL);

    proto_reduce_chunk_req *out = NULL;
    cr_assert_eq(proto_reduce_chunk_req_unpack(b.data, b.len, &out), 0);
    proto_bytes_fini(&b);
    cr_assert_eq(out->count, 1u << 20);
    cr_assert_eq(out->secret.len, sizeof secret);
    cr_assert_neq(out->secret.data, secret, "the view holds its own copy");
    cr_assert_eq(memcmp(out->secret.data, secret, sizeof secret), 0);
    proto_free(out);
}

Test(proto_peers, a_push_and_its_reply_round_trip)
{
    proto_push_req in = {.job = 9,
                         .shard = 3,
                         .worker_step = 100,
                         .from_rank = 1,
                         .version = 99,
                         .kind = PROTO_PUSH_ELASTIC,
                         .samples = 64,
                         .pull = true,
                         .until_samples = 6400,
                         .secret = {(uint8_t *)secret, 5}};
    proto_bytes b;
    cr_assert_eq(proto_push_req_pack(&in, &b), 0);
    Ferry__PushRequest *m = ferry__push_request__unpack(NULL, b.len, b.data);
    cr_assert(m);
    cr_assert_eq(m->kind, FERRY__PUSH_KIND__PUSH_ELASTIC);
    cr_assert(m->pull);
    cr_assert_eq(m->secret.len, 5, "a secret of any length travels as it is");
    ferry__push_request__free_unpacked(m, NULL);
    proto_push_req *out = NULL;
    cr_assert_eq(proto_push_req_unpack(b.data, b.len, &out), 0);
    proto_bytes_fini(&b);
    cr_assert_eq(out->version, 99);
    cr_assert_eq(out->samples, 64);
    cr_assert_eq(out->until_samples, 6400);
    cr_assert_eq(out->secret.len, 5);
    proto_free(out);

    proto_push_reply r = {
        .shard_version = 5, .samples = 6, .staleness = 7, .min_clock = 8};
    cr_assert_eq(proto_push_reply_pack(&r, &b), 0);
    proto_push_reply *rout = NULL;
    cr_assert_eq(proto_push_reply_unpack(b.data, b.len, &rout), 0);
    proto_bytes_fini(&b);
    cr_assert_eq(rout->staleness, 7);
    cr_assert_eq(rout->min_clock, 8);
    proto_free(rout);
}

Test(proto_peers, a_pull_without_a_secret_has_none)
{
    proto_pull_req in = {.job = 2, .shard = 1, .worker_step = 3, .until_samples = 4};
    proto_bytes b;
    cr_assert_eq(proto_pull_req_pack(&in, &b), 0);
    proto_pull_req *out = NULL;
    cr_assert_eq(proto_pull_req_unpack(b.data, b.len, &out), 0);
    proto_bytes_fini(&b);
    cr_assert_eq(out->worker_step, 3);
    cr_assert_eq(out->secret.len, 0);
    cr_assert_null(out->secret.data);
    proto_free(out);

    proto_pull_reply r = {.shard_version = 11, .samples = 12, .min_clock = 13};
    cr_assert_eq(proto_pull_reply_pack(&r, &b), 0);
    Ferry__PullReply *m = ferry__pull_reply__unpack(NULL, b.len, b.data);
    cr_assert(m);
    cr_assert_eq(m->min_clock, 13);
    ferry__pull_reply__free_unpacked(m, NULL);
    proto_bytes_fini(&b);
}

/* PullRequest's secret held as a string, and as a number: not a blob. */
#define STRING_SECRET_FIELDS(F, LIST) F(uint64_t, job) F(char *, secret)
#define NUMBER_SECRET_FIELDS(F, LIST) F(uint64_t, job) F(uint64_t, secret)
BAD_VIEW(string_secret, pull_request, STRING_SECRET_FIELDS)
BAD_VIEW(number_secret, pull_request, NUMBER_SECRET_FIELDS)

static proto_bytes pull_bytes(void)
{
    proto_bytes b = {0};
    proto_pull_req in = {.job = 1, .secret = {(uint8_t *)secret, sizeof secret}};
    cr_assert_eq(proto_pull_req_pack(&in, &b), 0);
    return b;
}

Test(proto_peers, a_bytes_field_held_as_a_string_is_refused)
{
    REFUSED_BOTH_WAYS(string_secret, pull_bytes);
}

Test(proto_peers, a_bytes_field_held_as_a_number_is_refused)
{
    REFUSED_BOTH_WAYS(number_secret, pull_bytes);
}
