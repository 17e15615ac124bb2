/* `ferry submit MODEL.so --epochs E ...`: trains the module's model on one
 * worker through its built-in "ferry.train.*" functions, one call an epoch,
 * so every epoch's reply is the progress line the user sees as it happens.
 * The data never crosses the network: the worker reads its own copy. */
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <uv.h>

#include "json.h"
#include "runtime/collective/collective.h"
#include "train_int.h"

/* Epoch calls run as long as an epoch takes; a dead or hung worker is found
 * by the heartbeat instead. */
#define TRAIN_CALL_TIMEOUT_MS (24LL * 3600 * 1000)

int cli_pack(const ProtobufCMessage *msg, ferry_bytes_t *b)
{
    b->len = protobuf_c_message_get_packed_size(msg);
    b->data = malloc(b->len ? b->len : 1);
    if (!b->data)
        return FERRY_ENOMEM;
    protobuf_c_message_pack(msg, b->data);
    return 0;
}

static void free_replies(ProtobufCMessage **reply, int n)
{
    for (int r = 0; r < n; r++)
        if (reply[r])
            protobuf_c_message_free_unpacked(reply[r], NULL);
}

/* Calls the built-in `fn` on ranks 0..n-1 at once, in[r] to rank r; on
 * success reply[r] holds each unpacked result (free them with
 * free_replies). */
static int call(cluster *cl, const cluster_module *m, int n, const char *fn,
                ProtobufCMessage *const *msg, const ProtobufCMessageDescriptor *desc,
                ProtobufCMessage **reply)
{
    ferry_bytes_t in[n], out[n];
    memset(in, 0, sizeof in);
    int rc = 0;
    for (int r = 0; r < n && rc == 0; r++)
        rc = cli_pack(msg[r], &in[r]);
    if (rc == 0)
        rc = n == 1 ? cluster_call(cl, m, 0, fn, &in[0], &out[0])
                    : cluster_call_first(cl, m, fn, (size_t)n, in, out);
    for (int r = 0; r < n; r++)
        free(in[r].data);
    if (rc)
        return rc;
    for (int r = 0; r < n; r++) {
        reply[r] = rc ? NULL : protobuf_c_message_unpack(desc, NULL, out[r].len, out[r].data);
        cluster_free_bytes(&out[r]);
        if (!reply[r] && !rc) {
            reply[r] = NULL;
            cli_err("submit", "worker %d: %s: the reply is not a %s", r, fn, desc->name);
            rc = FERRY_EPROTO;
        }
    }
    if (rc)
        free_replies(reply, n);
    return rc;
}

/* How a worker names this process when it refuses another submitter. */
static void describe_submitter(char *buf, size_t len)
{
    char host[128] = "?";
    gethostname(host, sizeof host - 1);
    struct passwd *pw = getpwuid(getuid());
    snprintf(buf, len, "ferry submit (pid %ld, user %s, host %s)", (long)getpid(),
             pw && pw->pw_name ? pw->pw_name : "?", host);
}

static uint64_t new_session_id(void)
{
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
        id = uv_hrtime() ^ ((uint64_t)getpid() << 32);
    return id ? id : 1;
}

/* What the epochs added up to. */
typedef struct run_totals {
    double samples, train_s, allreduce_s, compute_s, ps_wait_s;
} run_totals;

static void print_json(const cli_train_opts *o, const char *module, const char *task,
                       const char *mode, int workers, const Ferry__TrainBeginReply *b,
                       const Ferry__TrainEpochReply *last, const run_totals *t,
                       double wall_s, const char *sha, bool identical,
                       const cli_async_run *arun)
{
    printf("{\"module\":");
    json_str(stdout, module);
    printf(",\"task\":");
    json_str(stdout, task);
    printf(",\"device\":");
    json_str(stdout, b->device);
    printf(",\"precision\":");
    json_str(stdout, o->precision ? o->precision : "fp32");
    printf(",\"mode\":\"%s\",\"workers\":%d", mode, workers);
    printf(",\"epochs\":%d,\"batch\":%d,\"optimizer\":", o->epochs, o->batch);
    json_str(stdout, o->optimizer);
    printf(",\"schedule\":");
    json_str(stdout, o->schedule);
    printf(",\"lr\":%g,\"momentum\":%g,\"weight_decay\":%g,\"seed\":%llu,\"params\":%llu",
           o->lr, o->momentum, o->weight_decay, (unsigned long long)o->seed,
           (unsigned long long)b->params);
    printf(",\"train_loss\":%.6g,\"test_loss\":%.6g,\"test_accuracy\":%.6g",
           last->train_loss, last->test_loss, last->test_accuracy);
    cli_scores_json(stdout, last);
    printf(",\"samples_per_s\":%.1f,\"train_s\":%.3f,\"wall_s\":%.3f",
           t->train_s > 0 ? t->samples / t->train_s : 0.0, t->train_s, wall_s);
    if (!arun) {
        /* The all-reduce fields mean nothing in async mode, which has none. */
        printf(",\"grad_compression\":");
        json_str(stdout, o->grad_compression);
        printf(",\"buckets\":%u", b->buckets);
        printf(",\"allreduce_s\":%.3f,\"compute_s\":%.3f,\"allreduce_share\":%.4f",
               t->allreduce_s, t->compute_s,
               t->train_s > 0 ? t->allreduce_s / t->train_s : 0.0);
    } else {
        uint64_t smin, smed, smax;
        cli_async_staleness(arun, &smin, &smed, &smax);
        printf(",\"algo\":");
        json_str(stdout, o->algo);
        printf(",\"staleness_bound\":%ld,\"ps_shards\":%d,\"push_every\":%ld,"
               "\"pull_every\":%ld,\"pushes\":%llu,\"staleness_min\":%llu,"
               "\"staleness_median\":%llu,\"staleness_max\":%llu,\"workers_lost\":%d,"
               "\"ps_wait_s\":%.3f",
               o->staleness, arun->shards, o->push_every ? o->push_every : 1,
               o->pull_every ? o->pull_every : 1, (unsigned long long)arun->pushes,
               (unsigned long long)smin, (unsigned long long)smed, (unsigned long long)smax,
               arun->lost, t->ps_wait_s);
        printf(",\"steps_by_worker\":[");
        for (int r = 0; r < arun->world; r++)
            printf("%s%llu", r ? "," : "", (unsigned long long)arun->steps[r]);
        printf("]");
    }
    printf(",\"params_identical\":%s,\"params_sha256\":", identical ? "true" : "false");
    json_str(stdout, sha);
    printf("}\n");
}

static void describe_optimizer(const cli_train_opts *o, char *buf, size_t len)
{
    if (strcmp(o->optimizer, "sgd") == 0)
        snprintf(buf, len, "sgd lr %g momentum %g", o->lr, o->momentum);
    else
        snprintf(buf, len, "%s lr %g", o->optimizer, o->lr);
    if (strcmp(o->schedule, "constant") != 0)
        snprintf(buf + strlen(buf), len - strlen(buf), " (%s schedule)", o->schedule);
    if (o->weight_decay != 0)
        snprintf(buf + strlen(buf), len - strlen(buf), " weight decay %g", o->weight_decay);
}

/* How many workers train: 1 in single mode, else --workers or them all. */
/* How runtime/collective sums a gradient among k workers. */
static const char *allreduce_kind(int k, char *text, size_t len)
{
    if (k == 2)
        return "all-reduce by exchange";
    if (rt_exchange_rounds(k) > 1) {
        snprintf(text, len, "ring all-reduce, exchange rounds up to %zu MiB",
                 RT_EX_MAX_BYTES >> 20);
        return text;
    }
    return "ring all-reduce";
}

static int training_workers(cluster *cl, const cli_train_opts *o, const char **mode)
{
    int size = (int)cluster_size(cl);
    bool single = o->mode ? strcmp(o->mode, "single") == 0 : size == 1;
    *mode = single ? "single" : o->mode && strcmp(o->mode, "async") == 0 ? "async" : "sync";
    if (single)
        return 1;
    if (o->workers > size) {
        cli_err("submit", "--workers %d: the cluster has %d worker%s", o->workers, size,
                size == 1 ? "" : "s");
        return -1;
    }
    int k = o->workers ? o->workers : size;
    if (strcmp(*mode, "async") == 0 && k < 2) {
        cli_err("submit", "--mode async needs 2 or more workers (it would train on %d)", k);
        return -1;
    }
    if (o->batch < k) {
        cli_err("submit",
                "the global batch of %d is smaller than the %d workers: each needs at "
                "least one sample a step (raise --batch or lower --workers)",
                o->batch, k);
        return -1;
    }
    return k;
}

int cli_train(cluster *cl, const cluster_module *m, const char *module, const char *task,
              const cli_train_opts *o)
{
    /* With --json, stdout holds the one JSON object; progress goes to stderr. */
    FILE *progress = o->json ? stderr : stdout;
    const char *mode;
    int k = training_workers(cl, o, &mode);
    if (k < 0)
        return FERRY_EINVAL;
    /* A relative --data names a directory where the user typed it, not where
     * the supervisor (and so every worker) was started: sent absolute. */
    char data[CLI_PATH_MAX] = "", cwd[CLI_PATH_MAX];
    if (o->data_dir && o->data_dir[0] == '/')
        snprintf(data, sizeof data, "%s", o->data_dir);
    else if (o->data_dir && o->data_dir[0] &&
             (!getcwd(cwd, sizeof cwd) ||
              (size_t)snprintf(data, sizeof data, "%s/%s", cwd, o->data_dir) >= sizeof data)) {
        cli_err("submit", "--data %s: cannot make it an absolute path", o->data_dir);
        return FERRY_EINVAL;
    }
    cluster_set_call_timeout(cl, TRAIN_CALL_TIMEOUT_MS);
    double t0 = (double)uv_hrtime() / 1e9;
    uint64_t session = new_session_id();
    /* The run's secret: the workers take a chunk of its collectives only
     * with it, so that a client holding the cluster token and the session
     * id (shown by status) cannot pass for a rank. */
    uint8_t secret[RT_COMM_SECRET_BYTES];
    if (RAND_bytes(secret, sizeof secret) != 1) {
        cli_err("submit", "cannot draw the run's secret from OpenSSL's generator");
        return FERRY_EINTERNAL;
    }

    const char *peers[k];
    for (int r = 0; r < k; r++)
        peers[r] = cluster_target(cl, r);
    char submitter[256];
    describe_submitter(submitter, sizeof submitter);
    Ferry__TrainBegin begin[k];
    ProtobufCMessage *msgs[k];
    for (int r = 0; r < k; r++) {
        Ferry__TrainBegin *a = &begin[r];
        ferry__train_begin__init(a);
        a->session = session;
        a->batch = (uint32_t)o->batch;
        a->optimizer = (char *)o->optimizer;
        a->lr = (float)o->lr;
        a->momentum = (float)o->momentum;
        a->weight_decay = (float)o->weight_decay;
        a->seed = o->seed;
        a->epochs = (uint32_t)o->epochs;
        a->schedule = (char *)o->schedule;
        a->data_dir = data;
        a->precision = (char *)(o->precision ? o->precision : "");
        a->submitter = submitter; /* idle_ms 0: the workers' default */
        a->secret.data = secret;
        a->secret.len = sizeof secret;
        if (k > 1) {
            a->rank = (uint32_t)r;
            a->world = (uint32_t)k;
            a->n_peers = (size_t)k;
            a->peers = (char **)peers;
            a->grad_compression = (char *)o->grad_compression;
            a->chunk_bytes = (uint32_t)o->chunk_bytes;
            a->bucket_bytes = (uint32_t)o->bucket_bytes;
            a->timeout_ms = (uint32_t)o->timeout_ms;
            a->mode = (char *)mode;
            a->ps_shards = (uint32_t)o->ps_shards;
            a->staleness = (int32_t)o->staleness;
            a->push_every = (uint32_t)o->push_every;
            a->pull_every = (uint32_t)o->pull_every;
            a->algo = (char *)o->algo;
            a->alpha = (float)o->alpha;
            a->tau = (uint32_t)o->tau;
        }
        msgs[r] = &a->base;
    }
    Ferry__TrainBeginReply *b[k];
    int rc = call(cl, m, k, "ferry.train.begin", msgs, &ferry__train_begin_reply__descriptor,
                  (ProtobufCMessage **)b);
    OPENSSL_cleanse(secret, sizeof secret);
    if (rc) {
        cli_err("submit", "%s: cannot start training: %s", module, cluster_error(cl));
        /* The workers that did begin would hold their session, refusing
         * other submitters until it idles out: each is asked to end it. */
        Ferry__TrainEnd end = FERRY__TRAIN_END__INIT;
        end.session = session;
        end.discard = true;
        for (int r = 0; r < k; r++) {
            ferry_bytes_t in = {0}, out = {0};
            if (cli_pack(&end.base, &in) == 0 &&
                cluster_call(cl, m, r, "ferry.train.end", &in, &out) == 0)
                cluster_free_bytes(&out);
            free(in.data);
        }
        return rc;
    }
    char optim[128], kind[96];
    describe_optimizer(o, optim, sizeof optim);
    bool async = strcmp(mode, "async") == 0;
    int shards = o->ps_shards ? (int)o->ps_shards : k;
    if (k == 1)
        fprintf(progress, "training %s on worker 0 (%s)", task, b[0]->device);
    else if (async && o->staleness >= 0)
        fprintf(progress,
                "training %s in async mode on %d workers (%s; %s, parameter server in %d "
                "shard%s, staleness bound %ld)",
                task, k, b[0]->device, o->algo, shards, shards == 1 ? "" : "s", o->staleness);
    else if (async)
        fprintf(progress,
                "training %s in async mode on %d workers (%s; %s, parameter server in %d "
                "shard%s, staleness unbounded)",
                task, k, b[0]->device, o->algo, shards, shards == 1 ? "" : "s");
    else
        fprintf(progress,
                "training %s in sync mode on %d workers (%s; %s, %u bucket%s a step%s%s)",
                task, k, b[0]->device, allreduce_kind(k, kind, sizeof kind), b[0]->buckets,
                b[0]->buckets == 1 ? "" : "s",
                strcmp(o->grad_compression, "none") ? ", gradients as " : "",
                strcmp(o->grad_compression, "none") ? o->grad_compression : "");
    fprintf(progress,
            ": %llu parameters, %llu training and %llu test samples, %s, batch %d%s, seed "
            "%llu\n",
            (unsigned long long)b[0]->params, (unsigned long long)b[0]->train_samples,
            (unsigned long long)b[0]->test_samples, optim, o->batch,
            k > 1 ? " (global)" : "", (unsigned long long)o->seed);
    fflush(progress);

    Ferry__TrainEpoch ep = FERRY__TRAIN_EPOCH__INIT;
    ep.session = session;
    for (int r = 0; r < k; r++)
        msgs[r] = &ep.base;
    Ferry__TrainEpochReply *last = NULL;
    run_totals tot = {0};
    bool alive[k];
    for (int r = 0; r < k; r++)
        alive[r] = true;
    uint64_t steps[k];
    memset(steps, 0, sizeof steps);
    cli_async_run arun = {
        .session = session, .world = k, .shards = shards, .alive = alive, .steps = steps};
    for (int e = 1; async && e <= o->epochs && rc == 0; e++) {
        Ferry__TrainEpochReply sum;
        if ((rc = cli_async_epoch(cl, m, module, o, e, &arun, progress, &sum)))
            break;
        tot.samples += (double)sum.samples;
        tot.train_s += sum.train_s;
        tot.compute_s += sum.compute_s;
        tot.ps_wait_s += sum.ps_wait_s;
        if (!last && !(last = malloc(sizeof *last))) {
            rc = FERRY_ENOMEM;
            break;
        }
        *last = sum;
    }
    for (int e = 1; !async && e <= o->epochs && rc == 0; e++) {
        Ferry__TrainEpochReply *r[k];
        rc = call(cl, m, k, "ferry.train.epoch", msgs, &ferry__train_epoch_reply__descriptor,
                  (ProtobufCMessage **)r);
        if (rc) {
            cli_err("submit", "%s: epoch %d failed%s: %s", module, e,
                    k > 1 ? " (sync mode, where rank N is worker N: every worker stops "
                            "with the step)"
                          : "",
                    cluster_error(cl));
            break;
        }
        /* Rank 0's reply speaks for all: losses, accuracy and samples are
         * reduced over the ranks. */
        fprintf(progress, "epoch %u/%d  loss %.4f  test_loss %.4f", r[0]->epoch,
                o->epochs, r[0]->train_loss, r[0]->test_loss);
        cli_scores_print(progress, o, r[0]);
        fprintf(progress, "  %.0f samples/s  %.2f s", r[0]->samples_per_s,
                r[0]->train_s + r[0]->eval_s);
        if (k > 1)
            fprintf(progress, "  all-reduce %.0f%% of a step",
                    r[0]->train_s > 0 ? 100.0 * r[0]->allreduce_s / r[0]->train_s : 0.0);
        fputc('\n', progress);
        fflush(progress);
        tot.samples += (double)r[0]->samples;
        tot.train_s += r[0]->train_s;
        tot.allreduce_s += r[0]->allreduce_s;
        tot.compute_s += r[0]->compute_s;
        if (last)
            ferry__train_epoch_reply__free_unpacked(last, NULL);
        last = r[0];
        r[0] = NULL;
        free_replies((ProtobufCMessage **)r, k);
    }

    Ferry__TrainEnd end = FERRY__TRAIN_END__INIT;
    end.session = session;
    for (int r = 0; r < k; r++)
        msgs[r] = &end.base;
    Ferry__TrainEndReply *done[k];
    memset(done, 0, sizeof done);
    bool identical = true;
    if (rc == 0 && async) {
        /* The lost ranks are out of it; the others read the shards' final
         * values, the same for all of them. */
        ferry_bytes_t in[k], out[k];
        int rcs[k];
        char *errs[k];
        memset(in, 0, sizeof in);
        memset(out, 0, sizeof out);
        memset(errs, 0, sizeof errs);
        for (int r = 0; r < k && rc == 0; r++)
            rc = cli_pack(&end.base, &in[r]);
        if (rc == 0)
            rc = cluster_call_each(cl, m, "ferry.train.end", (size_t)k, alive, in, out, rcs,
                                   errs, NULL);
        for (int r = 0; r < k; r++) {
            free(in[r].data);
            if (rc == 0 && alive[r] && rcs[r] == 0 &&
                !(done[r] = ferry__train_end_reply__unpack(NULL, out[r].len, out[r].data)))
                rcs[r] = FERRY_EPROTO;
            if (rc == 0 && alive[r] && rcs[r]) {
                cli_err("submit", "%s: cannot end training on worker %d: %s", module, r,
                        errs[r] ? errs[r] : "its reply is not a TrainEndReply");
                rc = rcs[r];
            }
            cluster_free_bytes(&out[r]);
            free(errs[r]);
        }
        int first = 0;
        while (first < k && !alive[first])
            first++;
        for (int r = first + 1; rc == 0 && r < k; r++)
            identical &= !alive[r] ||
                         strcmp(done[r]->params_sha256, done[first]->params_sha256) == 0;
        if (rc == 0 && first > 0) {
            done[0] = done[first];
            done[first] = NULL;
        }
    } else if (rc == 0) {
        rc = call(cl, m, k, "ferry.train.end", msgs, &ferry__train_end_reply__descriptor,
                  (ProtobufCMessage **)done);
        if (rc)
            cli_err("submit", "%s: cannot end training: %s", module, cluster_error(cl));
        for (int r = 1; rc == 0 && r < k; r++)
            identical &= strcmp(done[r]->params_sha256, done[0]->params_sha256) == 0;
    }
    if (rc == 0 && !identical) {
        cli_err("submit", "%s: the workers ended with different parameters", module);
        rc = FERRY_EPROTO;
    }
    if (rc) {
        /* Frees the workers' sessions now; they would be replaced anyway. A
         * worker that died answers nothing: each is asked alone. */
        end.discard = true;
        for (int r = 0; r < k; r++) {
            ferry_bytes_t in = {0}, out = {0};
            if (!alive[r])
                continue;
            if (cli_pack(&end.base, &in) == 0 &&
                cluster_call(cl, m, r, "ferry.train.end", &in, &out) == 0)
                cluster_free_bytes(&out);
            free(in.data);
        }
    }
    double wall = (double)uv_hrtime() / 1e9 - t0;
    if (rc == 0 && last) {
        if (o->json)
            print_json(o, module, task, mode, k, b[0], last, &tot, wall,
                       done[0]->params_sha256, identical, async ? &arun : NULL);
        else {
            printf("done: test_loss %.4f", last->test_loss);
            cli_scores_print(stdout, o, last);
            printf(" after %d epochs on %d worker%s, %.0f samples/s, %.1f s\n", o->epochs,
                   k - arun.lost, k - arun.lost == 1 ? "" : "s",
                   tot.train_s > 0 ? tot.samples / tot.train_s : 0.0, wall);
        }
    }
    free_replies((ProtobufCMessage **)done, k);
    if (last && async)
        free(last);
    else if (last)
        ferry__train_epoch_reply__free_unpacked(last, NULL);
    free_replies((ProtobufCMessage **)b, k);
    return rc;
}
