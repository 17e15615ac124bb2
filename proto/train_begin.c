/* A rank's TrainBegin packed whole, and read whole on the rank: the run's
 * options by the spec's one pack and unpack, and what only the run knows
 * (its session, secret and ranks). */
#include <stdlib.h>
#include <string.h>

#include "proto_int.h"
#include "train_spec.h"

int proto_train_begin_pack(const proto_train_spec *s, bool peers,
                           const proto_train_begin_run *run, proto_bytes *out)
{
    Ferry__TrainBegin a = FERRY__TRAIN_BEGIN__INIT;
    proto_train_spec_pack(s, peers, &a);
    a.session = run->session;
    a.submitter = proto_str(run->submitter); /* idle_ms 0: the workers' default */
    a.secret.data = (uint8_t *)run->secret;
    a.secret.len = run->secret_len;
    const proto_tensors *init = &run->init;
    a.n_init_names = init->n;
    a.init_names = (char **)init->names;
    a.n_init_shapes = init->n * 4;
    a.init_shapes = (uint32_t *)init->shapes;
    a.init_values.data = (uint8_t *)init->values;
    a.init_values.len = init->floats * sizeof(float);
    a.timeline = run->timeline;
    a.rejoin_epoch = run->rejoin_epoch;
    if (peers) {
        a.rank = run->rank;
        a.world = run->world;
        a.n_peers = run->n_peers;
        a.peers = (char **)run->peers;
    }
    out->len = ferry__train_begin__get_packed_size(&a);
    if (!(out->data = malloc(out->len ? out->len : 1))) {
        out->len = 0;
        return FERRY_ENOMEM;
    }
    ferry__train_begin__pack(&a, out->data);
    return 0;
}

int proto_train_begin_unpack(const void *buf, size_t len, proto_train_begin **out)
{
    *out = NULL;
    static const uint8_t empty[1];
    Ferry__TrainBegin *a = ferry__train_begin__unpack(NULL, len, buf ? buf : empty);
    if (!a)
        return FERRY_ECORRUPT;
    proto_train_begin *b = calloc(1, sizeof *b);
    if (!b) {
        explicit_bzero(a->secret.data, a->secret.len);
        ferry__train_begin__free_unpacked(a, NULL);
        return FERRY_ENOMEM;
    }
    proto_train_spec_unpack(a, &b->spec);
    b->run = (proto_train_begin_run){.session = a->session,
                                     .submitter = a->submitter,
                                     .secret = a->secret.data,
                                     .secret_len = a->secret.len,
                                     .rank = a->rank,
                                     .world = a->world,
                                     .n_peers = a->n_peers,
                                     .peers = (const char *const *)a->peers,
                                     .timeline = a->timeline,
                                     .rejoin_epoch = a->rejoin_epoch};
    /* Tensors whose shapes or values do not add up are the worker's to
     * refuse, naming what is wrong: here they are only taken apart. */
    if (a->n_init_shapes == a->n_init_names * 4 &&
        a->init_values.len % sizeof(float) == 0) {
        b->run.init = (proto_tensors){.n = a->n_init_names,
                                      .names = (const char *const *)a->init_names,
                                      .shapes = a->init_shapes,
                                      .values = (const float *)(void *)a->init_values.data,
                                      .floats = a->init_values.len / sizeof(float)};
    } else {
        b->init_malformed = true;
    }
    b->eval_batch = a->eval_batch;
    b->idle_ms = a->idle_ms;
    b->msg = a;
    *out = b;
    return 0;
}

void proto_train_begin_free(proto_train_begin *b)
{
    if (!b)
        return;
    Ferry__TrainBegin *a = b->msg;
    if (a->secret.len)
        explicit_bzero(a->secret.data, a->secret.len);
    ferry__train_begin__free_unpacked(a, NULL);
    free(b);
}
