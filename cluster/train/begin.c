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

_Static_assert(sizeof(((ct_run *)0)->secret) == RT_COMM_SECRET_BYTES,
               "the run keeps the whole secret");

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

/* Rank r's begin, packed into `b`: the session, who asks, the secret, the
 * options (`given`: the run's, its files made absolute; the ranks' ones with
 * more than one rank) and the peers, each rank's worker; the mode the one
 * the run takes. */
int ct_begin_pack(proto_bytes *b, const ct_run *run, int r, const proto_train_spec *given,
                  const char *submitter, const uint8_t *secret, size_t secret_len,
                  int rejoin_epoch)
{
    const char *peers[run->k];
    for (int i = 0; i < run->k; i++)
        peers[i] = cluster_target(run->cl, run->node[i]);
    proto_train_spec spec = *given;
    spec.mode = run->mode->name;
    proto_train_begin_run rb = {.session = run->session,
                                .submitter = submitter,
                                .secret = secret,
                                .secret_len = secret_len,
                                .rank = (uint32_t)r,
                                .world = (uint32_t)run->k,
                                .n_peers = (size_t)run->k,
                                .peers = peers,
                                .timeline = run->tl != NULL,
                                .rejoin_epoch = (uint32_t)rejoin_epoch};
    const cluster_tensors *init = run->o->init;
    if (init)
        rb.init = *init;
    return proto_train_begin_pack(&spec, run->k > 1, &rb, b);
}

int ct_begin(ct_run *run, const proto_train_spec *spec, proto_train_begin_reply **b)
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
    char submitter[256];
    describe_submitter(submitter, sizeof submitter);
    proto_bytes begin[k];
    memset(begin, 0, sizeof begin);
    int rc = 0;
    for (int r = 0; r < k && rc == 0; r++)
        rc = ct_begin_pack(&begin[r], run, r, spec, submitter, secret, sizeof secret, 0);
    if (rc == 0)
        rc = ct_call(run, "ferry.train.begin", begin, &ct_begin_reply, (void **)b);
    if (rc == 0)
        ct_hold(run, secret, sizeof secret);
    if (rc == 0) /* async: a restarted rank is begun again with it */
        memcpy(run->secret, secret, sizeof run->secret);
    OPENSSL_cleanse(secret, sizeof secret);
    for (int r = 0; r < k; r++) {
        if (begin[r].data)
            OPENSSL_cleanse(begin[r].data, begin[r].len);
        proto_bytes_fini(&begin[r]);
    }
    if (rc) {
        ct_fail(run, "%s: cannot start training: %s", run->module,
                cluster_error(run->cl));
        /* The workers that did begin would hold their session, refusing
         * other submitters until it idles out: each is asked to end it. */
        ct_discard(run);
    }
    return rc;
}
