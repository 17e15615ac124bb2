/* The master's hold on each rank's session (TrainHold, ferry.proto): one
 * call a rank left open for the whole run, never answered while the session
 * lives. When this process dies, its connections close and each worker
 * frees the session for the next submitter at once, even between two
 * calls (after the begins returned, or between epochs), where no call of
 * the run is there to see it go.
 *
 * Each rank gets the hold twice: the worker parks one and refuses the other
 * as held already, and that refusal tells the master the hold is in place.
 * The run goes on once each rank has answered so (or refused both: a
 * worker without holds trains as before, its session freed by its idle
 * time), so that a run that says it started is held. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "train_int.h"

/* How long a start waits for its workers to take their holds. They answer
 * within a round trip; a worker that does not is found by the epochs. */
#define HOLD_CONFIRM_MS 5000

/* Whether every rank has answered one of its two holds. */
static bool all_held(void *arg)
{
    const ct_run *run = arg;
    for (int r = 0; r < run->k; r++)
        if (!cluster_open_ended(run->holds[2 * r], NULL) &&
            !cluster_open_ended(run->holds[2 * r + 1], NULL))
            return false;
    return true;
}

void ct_hold(ct_run *run, const uint8_t *secret, size_t len)
{
    if (!(run->holds = calloc(2 * (size_t)run->k, sizeof *run->holds)))
        return; /* unheld: the workers' idle time frees the sessions */
    proto_train_hold_req h = {.session = run->session,
                              .secret = {(uint8_t *)secret, len}};
    proto_bytes b;
    int rc = proto_train_hold_req_pack(&h, &b);
    for (int i = 0; rc == 0 && i < 2 * run->k; i++)
        cluster_open_call(run->cl, run->node[i / 2], PROTO_METHOD_TRAIN_HOLD, b.data,
                          b.len, &run->holds[i]);
    if (rc == 0) {
        OPENSSL_cleanse(b.data, b.len);
        proto_bytes_fini(&b);
    }
    cluster_run_until(run->cl, HOLD_CONFIRM_MS, all_held, run);
}

void ct_unhold(ct_run *run)
{
    for (int i = 0; run->holds && i < 2 * run->k; i++)
        cluster_close_call(run->holds[i]);
    free(run->holds);
    run->holds = NULL;
}
