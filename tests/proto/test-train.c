/* tests/proto — the training messages' views, and the two kinds of field
 * only they have: repeated numbers (TrainEpochReply.staleness) and repeated
 * nested messages (TrainEpochReply.metrics, ModelMetric's views). Packed
 * views are read by protobuf-c and generated messages are read as views;
 * a field list that does not match ferry.proto is refused, both ways. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include <ferry/ferry.h>

#include "proto/proto_int.h"
#include "proto/train_spec.h"
#include "refused.h"

static proto_bytes packed_epoch(void)
{
    uint64_t stale[] = {5, 0, UINT64_MAX};
    proto_model_metric m[] = {{.name = "mse", .value = 0.25},
                              {.name = NULL, .value = -1}};
    proto_train_epoch_reply in = {.epoch = 3,
                                  .train_loss = 0.5,
                                  .samples = 60000,
                                  .steps = 469,
                                  .n_staleness = 3,
                                  .staleness = stale,
                                  .n_metrics = 2,
                                  .metrics = m};
    proto_bytes b;
    cr_assert_eq(proto_train_epoch_reply_pack(&in, &b), 0);
    return b;
}

Test(proto_train, epoch_reply_lists_round_trip)
{
    proto_bytes b = packed_epoch();
    proto_train_epoch_reply *out;
    cr_assert_eq(proto_train_epoch_reply_unpack(b.data, b.len, &out), 0);
    cr_assert_eq(out->epoch, 3);
    cr_assert_eq(out->train_loss, 0.5);
    cr_assert_eq(out->samples, 60000);
    cr_assert_eq(out->steps, 469);
    cr_assert_eq(out->n_staleness, 3);
    cr_assert_eq(out->staleness[0], 5);
    cr_assert_eq(out->staleness[1], 0);
    cr_assert_eq(out->staleness[2], UINT64_MAX);
    cr_assert_eq(out->n_metrics, 2);
    cr_assert_str_eq(out->metrics[0].name, "mse");
    cr_assert_eq(out->metrics[0].value, 0.25);
    cr_assert_str_eq(out->metrics[1].name, "");
    cr_assert_eq(out->metrics[1].value, -1);
    /* The view holds its own copies: the message is gone. */
    proto_free(out);
    proto_bytes_fini(&b);
}

Test(proto_train, epoch_reply_packed_is_the_generated_message)
{
    proto_bytes b = packed_epoch();
    Ferry__TrainEpochReply *m = ferry__train_epoch_reply__unpack(NULL, b.len, b.data);
    cr_assert(m);
    cr_assert_eq(m->n_staleness, 3);
    cr_assert_eq(m->staleness[2], UINT64_MAX);
    cr_assert_eq(m->n_metrics, 2);
    cr_assert_str_eq(m->metrics[0]->name, "mse");
    cr_assert_eq(m->metrics[0]->value, 0.25);
    cr_assert_str_eq(m->metrics[1]->name, "");
    ferry__train_epoch_reply__free_unpacked(m, NULL);
    proto_bytes_fini(&b);
}

Test(proto_train, epoch_reply_from_the_generated_message)
{
    uint64_t stale[] = {1, 2};
    Ferry__ModelMetric mm[3], *mp[3];
    const char *names[] = {"a", "distance", "c"};
    for (int i = 0; i < 3; i++) {
        ferry__model_metric__init(&mm[i]);
        mm[i].name = (char *)names[i];
        mm[i].value = i + 0.5;
        mp[i] = &mm[i];
    }
    Ferry__TrainEpochReply m = FERRY__TRAIN_EPOCH_REPLY__INIT;
    m.epoch = 9;
    m.n_staleness = 2;
    m.staleness = stale;
    m.n_metrics = 3;
    m.metrics = mp;
    uint8_t buf[256];
    size_t len = ferry__train_epoch_reply__pack(&m, buf);
    proto_train_epoch_reply *out;
    cr_assert_eq(proto_train_epoch_reply_unpack(buf, len, &out), 0);
    cr_assert_eq(out->epoch, 9);
    cr_assert_eq(out->n_staleness, 2);
    cr_assert_eq(out->staleness[1], 2);
    cr_assert_eq(out->n_metrics, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_str_eq(out->metrics[i].name, names[i]);
        cr_assert_eq(out->metrics[i].value, i + 0.5);
    }
    proto_free(out);
}

Test(proto_train, empty_lists_are_null)
{
    proto_bytes b;
    cr_assert_eq(proto_train_epoch_reply_pack(&(proto_train_epoch_reply){.epoch = 1}, &b),
                 0);
    proto_train_epoch_reply *out;
    cr_assert_eq(proto_train_epoch_reply_unpack(b.data, b.len, &out), 0);
    cr_assert_eq(out->n_staleness, 0);
    cr_assert_null(out->staleness);
    cr_assert_eq(out->n_metrics, 0);
    cr_assert_null(out->metrics);
    proto_free(out);
    proto_bytes_fini(&b);
}

Test(proto_train, the_other_training_messages_round_trip)
{
    proto_bytes b;
    proto_train_begin_reply br = {.params = 7, .device = "cpu", .world = 4, .buckets = 2};
    proto_train_begin_reply *bo;
    cr_assert_eq(proto_train_begin_reply_pack(&br, &b), 0);
    cr_assert_eq(proto_train_begin_reply_unpack(b.data, b.len, &bo), 0);
    cr_assert_eq(bo->params, 7);
    cr_assert_str_eq(bo->device, "cpu");
    cr_assert_eq(bo->world, 4);
    cr_assert_eq(bo->buckets, 2);
    proto_free(bo);
    proto_bytes_fini(&b);

    proto_train_epoch *eo;
    cr_assert_eq(proto_train_epoch_pack(&(proto_train_epoch){.session = UINT64_MAX}, &b),
                 0);
    cr_assert_eq(proto_train_epoch_unpack(b.data, b.len, &eo), 0);
    cr_assert_eq(eo->session, UINT64_MAX);
    proto_free(eo);
    proto_bytes_fini(&b);

    proto_train_end *ndo;
    cr_assert_eq(
        proto_train_end_pack(&(proto_train_end){.session = 5, .discard = true}, &b), 0);
    cr_assert_eq(proto_train_end_unpack(b.data, b.len, &ndo), 0);
    cr_assert_eq(ndo->session, 5);
    cr_assert(ndo->discard);
    proto_free(ndo);
    proto_bytes_fini(&b);

    proto_train_end_reply *ro;
    proto_train_end_reply er = {.params_sha256 = "ab12", .params = 9};
    cr_assert_eq(proto_train_end_reply_pack(&er, &b), 0);
    cr_assert_eq(proto_train_end_reply_unpack(b.data, b.len, &ro), 0);
    cr_assert_str_eq(ro->params_sha256, "ab12");
    cr_assert_eq(ro->params, 9);
    proto_free(ro);
    proto_bytes_fini(&b);

    proto_train_leave *lo;
    cr_assert_eq(
        proto_train_leave_pack(&(proto_train_leave){.session = 2, .rank = 3}, &b), 0);
    cr_assert_eq(proto_train_leave_unpack(b.data, b.len, &lo), 0);
    cr_assert_eq(lo->session, 2);
    cr_assert_eq(lo->rank, 3);
    proto_free(lo);
    proto_bytes_fini(&b);
}

Test(proto_train, a_cut_head_or_garbage_is_refused)
{
    proto_bytes b = packed_epoch();
    proto_train_epoch_reply *out = (proto_train_epoch_reply *)&out;
    cr_assert_eq(proto_train_epoch_reply_unpack(b.data, b.len - 1, &out), FERRY_ECORRUPT);
    cr_assert_null(out);
    static const uint8_t never_ends[] = {0x08, 0x80};
    cr_assert_eq(proto_train_epoch_reply_unpack(never_ends, sizeof never_ends, &out),
                 FERRY_ECORRUPT);
    cr_assert_null(out);
    proto_bytes_fini(&b);
}

/* Views of TrainEpochReply that get its lists wrong, made as proto.h and
 * messages.c make the real one. */
typedef struct wide_metric {
    char *name;
    double value;
    double extra;
} wide_metric;

#define NARROW_LIST_FIELDS(F, LIST, REP)    REP(uint32_t, staleness)
#define NUMBER_METRICS_FIELDS(F, LIST, REP) REP(double, metrics)
#define WIDE_METRICS_FIELDS(F, LIST, REP)   REP(wide_metric, metrics)
#define REPEATED_EPOCH_FIELDS(F, LIST, REP) REP(uint32_t, epoch)
#define SINGLE_LIST_FIELDS(F, LIST, REP)    F(uint64_t, staleness)

#define BAD_EPOCH_VIEW(view, FIELDS)                                                     \
    typedef struct proto_##view {                                                        \
        FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER, PROTO_REP_MEMBER)                        \
    } proto_##view;                                                                      \
    int proto_##view##_pack(const proto_##view *in, proto_bytes *out);                   \
    int proto_##view##_unpack(const void *buf, size_t len, proto_##view **out);          \
    PROTO_REP_VIEW(view, train_epoch_reply, FIELDS)

BAD_EPOCH_VIEW(narrow_list, NARROW_LIST_FIELDS)
BAD_EPOCH_VIEW(number_metrics, NUMBER_METRICS_FIELDS)
BAD_EPOCH_VIEW(wide_metrics, WIDE_METRICS_FIELDS)
BAD_EPOCH_VIEW(repeated_epoch, REPEATED_EPOCH_FIELDS)
BAD_EPOCH_VIEW(single_list, SINGLE_LIST_FIELDS)

Test(proto_train, a_list_of_narrower_numbers_is_refused)
{
    REFUSED_BOTH_WAYS(narrow_list, packed_epoch);
}

Test(proto_train, numbers_for_a_message_list_are_refused)
{
    REFUSED_BOTH_WAYS(number_metrics, packed_epoch);
}

Test(proto_train, a_nested_view_of_another_size_is_refused)
{
    REFUSED_BOTH_WAYS(wide_metrics, packed_epoch);
}

Test(proto_train, a_list_for_a_single_number_is_refused)
{
    REFUSED_BOTH_WAYS(repeated_epoch, packed_epoch);
}

Test(proto_train, a_single_number_for_a_list_is_refused)
{
    REFUSED_BOTH_WAYS(single_list, packed_epoch);
}

Test(proto_train, a_begin_is_packed_with_its_run)
{
    proto_train_spec s;
    proto_train_spec_defaults(&s);
    s.optimizer = "adam";
    const uint8_t secret[] = {1, 2, 3};
    const char *peers[] = {"127.0.0.1:1", "127.0.0.1:2"};
    proto_train_begin_run run = {.session = 42,
                                 .submitter = "me",
                                 .secret = secret,
                                 .secret_len = sizeof secret,
                                 .rank = 1,
                                 .world = 2,
                                 .n_peers = 2,
                                 .peers = peers};
    for (int with_peers = 0; with_peers < 2; with_peers++) {
        proto_bytes b;
        cr_assert_eq(proto_train_begin_pack(&s, with_peers, &run, &b), 0);
        Ferry__TrainBegin *m = ferry__train_begin__unpack(NULL, b.len, b.data);
        cr_assert(m);
        cr_assert_eq(m->session, 42);
        cr_assert_str_eq(m->submitter, "me");
        cr_assert_str_eq(m->optimizer, "adam");
        cr_assert_eq(m->secret.len, sizeof secret);
        cr_assert_eq(memcmp(m->secret.data, secret, sizeof secret), 0);
        cr_assert_eq(m->rank, with_peers ? 1u : 0u);
        cr_assert_eq(m->world, with_peers ? 2u : 0u);
        cr_assert_eq(m->n_peers, with_peers ? 2u : 0u);
        if (with_peers)
            cr_assert_str_eq(m->peers[1], "127.0.0.1:2");
        ferry__train_begin__free_unpacked(m, NULL);
        proto_bytes_fini(&b);
    }
}

Test(proto_train, a_rank_reads_its_begin_whole)
{
    proto_train_spec s;
    proto_train_spec_defaults(&s);
    s.mode = "async";
    s.tau = 7;
    const uint8_t secret[] = {9, 8, 7, 6};
    const char *peers[] = {"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"};
    proto_train_begin_run run = {.session = 77,
                                 .secret = secret,
                                 .secret_len = sizeof secret,
                                 .rank = 2,
                                 .world = 3,
                                 .n_peers = 3,
                                 .peers = peers};
    proto_bytes b;
    cr_assert_eq(proto_train_begin_pack(&s, true, &run, &b), 0);
    proto_train_begin *m = NULL;
    cr_assert_eq(proto_train_begin_unpack(b.data, b.len, &m), 0);
    proto_bytes_fini(&b);
    cr_assert_eq(m->run.session, 77);
    cr_assert_str_eq(m->run.submitter, "", "an absent string is \"\", never NULL");
    cr_assert_eq(m->run.secret_len, sizeof secret);
    cr_assert_eq(memcmp(m->run.secret, secret, sizeof secret), 0);
    cr_assert_eq(m->run.rank, 2);
    cr_assert_eq(m->run.world, 3);
    cr_assert_eq(m->run.n_peers, 3);
    cr_assert_str_eq(m->run.peers[2], "127.0.0.1:3");
    cr_assert_str_eq(m->spec.mode, "async");
    cr_assert_eq(m->spec.tau, 7);
    cr_assert_eq(m->spec.workers, 0, "a LOCAL option does not travel: its default");
    cr_assert_eq(m->idle_ms, 0);
    proto_train_begin_free(m);

    const uint8_t garbage[] = {0xff, 0xff, 0xff};
    m = (proto_train_begin *)1;
    cr_assert_eq(proto_train_begin_unpack(garbage, sizeof garbage, &m), FERRY_ECORRUPT);
    cr_assert_null(m);
    proto_train_begin_free(NULL);
}
