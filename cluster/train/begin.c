/* The TrainBegin each rank gets: the run's session and secret, who submits
 * it, and the options the workers train with. */
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <uv.h>

#include "runtime/collective/collective.h"
#include "train_int.h"

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

/* Rank r's options; with more than one rank, how they train together. */
static void fill(Ferry__TrainBegin *a, const ct_run *run, int r, const char *data,
                 const char **peers, char *submitter, uint8_t *secret, size_t secret_len)
{
    const cluster_train_opts *o = run->o;
    ferry__train_begin__init(a);
    a->session = run->session;
    a->batch = (uint32_t)o->batch;
    a->optimizer = (char *)o->optimizer;
    a->lr = (float)o->lr;
    a->momentum = (float)o->momentum;
    a->weight_decay = (float)o->weight_decay;
    a->seed = o->seed;
    a->epochs = (uint32_t)o->epochs;
    a->schedule = (char *)o->schedule;
    a->data_dir = (char *)data;
    a->precision = (char *)(o->precision ? o->precision : "");
    a->submitter = submitter; /* idle_ms 0: the workers' default */
    a->secret.data = secret;
    a->secret.len = secret_len;
    if (run->k == 1)
        return;
    a->rank = (uint32_t)r;
    a->world = (uint32_t)run->k;
    a->n_peers = (size_t)run->k;
    a->peers = (char **)peers;
    a->grad_compression = (char *)o->grad_compression;
    a->chunk_bytes = (uint32_t)o->chunk_bytes;
    a->bucket_bytes = (uint32_t)o->bucket_bytes;
    a->timeout_ms = (uint32_t)o->timeout_ms;
    a->mode = (char *)run->mode->name;
    a->ps_shards = (uint32_t)o->ps_shards;
    a->staleness = (int32_t)o->staleness;
    a->push_every = (uint32_t)o->push_every;
    a->pull_every = (uint32_t)o->pull_every;
    a->algo = (char *)o->algo;
    a->alpha = (float)o->alpha;
    a->tau = (uint32_t)o->tau;
}

int ct_begin(ct_run *run, const char *data_dir, Ferry__TrainBeginReply **b)
{
    int k = run->k;
    run->session = new_session_id();
    /* The run's secret: the workers take a chunk of its collectives only
     * with it, so that a client holding the cluster token and the session
     * id (shown by status) cannot pass for a rank. */
    uint8_t secret[RT_COMM_SECRET_BYTES];
    if (RAND_bytes(secret, sizeof secret) != 1) {
        ct_fail(run, "cannot draw the run's secret from OpenSSL's generator");
        return FERRY_EINTERNAL;
    }
    const char *peers[k];
    for (int r = 0; r < k; r++)
        peers[r] = cluster_target(run->cl, r);
    char submitter[256];
    describe_submitter(submitter, sizeof submitter);
    Ferry__TrainBegin begin[k];
    ProtobufCMessage *msgs[k];
    for (int r = 0; r < k; r++) {
        fill(&begin[r], run, r, data_dir, peers, submitter, secret, sizeof secret);
        msgs[r] = &begin[r].base;
    }
    int rc = ct_call(run, "ferry.train.begin", msgs,
                     &ferry__train_begin_reply__descriptor, (ProtobufCMessage **)b);
    OPENSSL_cleanse(secret, sizeof secret);
    if (rc) {
        ct_fail(run, "%s: cannot start training: %s", run->module,
                cluster_error(run->cl));
        /* The workers that did begin would hold their session, refusing
         * other submitters until it idles out: each is asked to end it. */
        ct_discard(run);
    }
    return rc;
}
