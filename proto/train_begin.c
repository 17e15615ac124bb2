/* A rank's TrainBegin packed whole: the run's options by the spec's one
 * pack, and what only the run knows (its session, secret and ranks). */
#include <stdlib.h>

#include "ferry.pb-c.h"
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
