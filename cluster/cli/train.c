/* `ferry submit MODEL.so --epochs E ...`: trains the module's model on one
 * worker through its built-in "ferry.train.*" functions, one call an epoch,
 * so every epoch's reply is the progress line the user sees as it happens.
 * The data never crosses the network: the worker reads its own copy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <uv.h>

#include "cli.h"
#include "json.h"

/* Epoch calls run as long as an epoch takes; a dead or hung worker is found
 * by the heartbeat instead. */
#define TRAIN_CALL_TIMEOUT_MS (24LL * 3600 * 1000)

/* Packs `msg` into `b` (malloc'ed). */
static int pack(const ProtobufCMessage *msg, ferry_bytes_t *b)
{
    b->len = protobuf_c_message_get_packed_size(msg);
    b->data = malloc(b->len ? b->len : 1);
    if (!b->data)
        return FERRY_ENOMEM;
    protobuf_c_message_pack(msg, b->data);
    return 0;
}

/* Calls the built-in `fn` on the training rank with `msg`; on success
 * *reply holds the unpacked result (free it with its descriptor). */
static int call(cluster *cl, const cluster_module *m, int rank, const char *fn,
                const ProtobufCMessage *msg, const ProtobufCMessageDescriptor *desc,
                ProtobufCMessage **reply)
{
    ferry_bytes_t in = {0}, out = {0};
    int rc = pack(msg, &in);
    if (rc == 0)
        rc = cluster_call(cl, m, rank, fn, &in, &out);
    free(in.data);
    if (rc)
        return rc;
    *reply = protobuf_c_message_unpack(desc, NULL, out.len, out.data);
    cluster_free_bytes(&out);
    if (!*reply) {
        cli_err("submit", "worker %d: %s: the reply is not a %s", rank, fn, desc->name);
        return FERRY_EPROTO;
    }
    return 0;
}

static uint64_t new_session_id(void)
{
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
        id = uv_hrtime() ^ ((uint64_t)getpid() << 32);
    return id ? id : 1;
}

static void print_json(const cli_train_opts *o, const char *module, const char *task,
                       const Ferry__TrainBeginReply *b,
                       const Ferry__TrainEpochReply *last, double samples, double train_s,
                       double wall_s, const char *sha)
{
    printf("{\"module\":");
    json_str(stdout, module);
    printf(",\"task\":");
    json_str(stdout, task);
    printf(",\"device\":");
    json_str(stdout, b->device);
    printf(",\"epochs\":%d,\"batch\":%d,\"optimizer\":", o->epochs, o->batch);
    json_str(stdout, o->optimizer);
    printf(",\"schedule\":");
    json_str(stdout, o->schedule);
    printf(",\"lr\":%g,\"momentum\":%g,\"weight_decay\":%g,\"seed\":%llu,\"params\":%llu",
           o->lr, o->momentum, o->weight_decay, (unsigned long long)o->seed,
           (unsigned long long)b->params);
    printf(",\"train_loss\":%.6g,\"test_loss\":%.6g,\"test_accuracy\":%.6g",
           last->train_loss, last->test_loss, last->test_accuracy);
    printf(",\"samples_per_s\":%.1f,\"train_s\":%.3f,\"wall_s\":%.3f,\"params_sha256\":",
           train_s > 0 ? samples / train_s : 0.0, train_s, wall_s);
    json_str(stdout, sha);
    printf("}\n");
}

int cli_train(cluster *cl, const cluster_module *m, const char *module, const char *task,
              const cli_train_opts *o)
{
    /* With --json, stdout holds the one JSON object; progress goes to stderr. */
    FILE *progress = o->json ? stderr : stdout;
    const int rank = 0;
    cluster_set_call_timeout(cl, TRAIN_CALL_TIMEOUT_MS);
    double t0 = (double)uv_hrtime() / 1e9;
    uint64_t session = new_session_id();

    Ferry__TrainBegin begin = FERRY__TRAIN_BEGIN__INIT;
    begin.session = session;
    begin.batch = (uint32_t)o->batch;
    begin.optimizer = (char *)o->optimizer;
    begin.lr = (float)o->lr;
    begin.momentum = (float)o->momentum;
    begin.weight_decay = (float)o->weight_decay;
    begin.seed = o->seed;
    begin.epochs = (uint32_t)o->epochs;
    begin.schedule = (char *)o->schedule;
    begin.data_dir = (char *)(o->data_dir ? o->data_dir : "");
    Ferry__TrainBeginReply *b = NULL;
    int rc = call(cl, m, rank, "ferry.train.begin", &begin.base,
                  &ferry__train_begin_reply__descriptor, (ProtobufCMessage **)&b);
    if (rc) {
        cli_err("submit", "%s: cannot start training: %s", module, cluster_error(cl));
        return rc;
    }
    char optim[128];
    if (strcmp(o->optimizer, "sgd") == 0)
        snprintf(optim, sizeof optim, "sgd lr %g momentum %g", o->lr, o->momentum);
    else
        snprintf(optim, sizeof optim, "%s lr %g", o->optimizer, o->lr);
    if (strcmp(o->schedule, "constant") != 0)
        snprintf(optim + strlen(optim), sizeof optim - strlen(optim), " (%s schedule)",
                 o->schedule);
    if (o->weight_decay != 0)
        snprintf(optim + strlen(optim), sizeof optim - strlen(optim), " weight decay %g",
                 o->weight_decay);
    fprintf(progress,
            "training %s on worker %d (%s): %llu parameters, %llu training and %llu test "
            "samples, %s, batch %d, seed %llu\n",
            task, rank, b->device, (unsigned long long)b->params,
            (unsigned long long)b->train_samples, (unsigned long long)b->test_samples,
            optim, o->batch, (unsigned long long)o->seed);
    fflush(progress);

    Ferry__TrainEpoch ep = FERRY__TRAIN_EPOCH__INIT;
    ep.session = session;
    Ferry__TrainEpochReply *last = NULL;
    double samples = 0, train_s = 0;
    for (int e = 1; e <= o->epochs && rc == 0; e++) {
        Ferry__TrainEpochReply *r = NULL;
        rc = call(cl, m, rank, "ferry.train.epoch", &ep.base,
                  &ferry__train_epoch_reply__descriptor, (ProtobufCMessage **)&r);
        if (rc) {
            cli_err("submit", "%s: epoch %d failed: %s", module, e, cluster_error(cl));
            break;
        }
        fprintf(
            progress,
            "epoch %u/%d  loss %.4f  test_loss %.4f  test_accuracy %.4f  %.0f samples/s  "
            "%.2f s\n",
            r->epoch, o->epochs, r->train_loss, r->test_loss, r->test_accuracy,
            r->samples_per_s, r->train_s + r->eval_s);
        fflush(progress);
        samples += (double)r->samples;
        train_s += r->train_s;
        if (last)
            ferry__train_epoch_reply__free_unpacked(last, NULL);
        last = r;
    }

    Ferry__TrainEnd end = FERRY__TRAIN_END__INIT;
    end.session = session;
    Ferry__TrainEndReply *done = NULL;
    if (rc == 0) {
        rc = call(cl, m, rank, "ferry.train.end", &end.base,
                  &ferry__train_end_reply__descriptor, (ProtobufCMessage **)&done);
        if (rc)
            cli_err("submit", "%s: cannot end training: %s", module, cluster_error(cl));
    } else {
        /* Frees the worker's session now; it would be replaced anyway. */
        if (call(cl, m, rank, "ferry.train.end", &end.base,
                 &ferry__train_end_reply__descriptor, (ProtobufCMessage **)&done) == 0)
            ferry__train_end_reply__free_unpacked(done, NULL);
        done = NULL;
    }
    double wall = (double)uv_hrtime() / 1e9 - t0;
    if (rc == 0 && last) {
        if (o->json)
            print_json(o, module, task, b, last, samples, train_s, wall,
                       done->params_sha256);
        else
            printf("done: %s %.4f after %d epochs, %.0f samples/s, %.1f s\n",
                   o->classifier ? "test_accuracy" : "test_loss",
                   o->classifier ? last->test_accuracy : last->test_loss, o->epochs,
                   train_s > 0 ? samples / train_s : 0.0, wall);
    }
    if (done)
        ferry__train_end_reply__free_unpacked(done, NULL);
    if (last)
        ferry__train_epoch_reply__free_unpacked(last, NULL);
    ferry__train_begin_reply__free_unpacked(b, NULL);
    return rc;
}
