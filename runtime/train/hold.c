/* A master's hold on its training session: one TrainHold call a rank,
 * parked on the worker for the whole run, and never answered while the
 * session lives. It takes no handler slot while parked (its handler returns
 * at once, as a parked pull's does) and costs nothing per epoch: the next
 * begin asks it whether its caller is still there (rpc_srv_cancelled, which
 * rpc learns from the call's close on the wire). A master killed between
 * two of its calls (after its begins returned, or between epochs) has no
 * call running on the worker that could see it go, and its session would
 * otherwise refuse every other submitter until it idles out.
 *
 * Only a reply or a failure ends a server call, so every path that ends a
 * session answers its hold (rt_session_free), and a worker that shuts down
 * answers it before its server waits for its calls. */
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "session.h"

void rt_session_set_secret(rt_train_session *s, const uint8_t *secret)
{
    if (!secret)
        return;
    memcpy(s->secret, secret, sizeof s->secret);
    s->has_secret = true;
}

bool rt_session_hold_gone(const rt_train_session *s)
{
    return s->hold && rpc_srv_cancelled(s->hold);
}

void rt_session_end_hold(rt_train_session *s, int err, const char *why)
{
    rpc_srv_call *sc = s->hold;
    s->hold = NULL;
    if (!sc)
        return;
    if (err) {
        rpc_srv_fail(sc, err, "%s", why);
        return;
    }
    rpc_msg_out reply = {0}; /* TrainHoldReply is empty */
    rpc_srv_reply(sc, &reply);
}

/* Whether `in` may hold the worker's session: 0, or the error with `why`.
 * Under train_lock. */
static int may_hold(const rt_worker *w, const proto_train_hold_req *in, char *why,
                    size_t len)
{
    const rt_train_session *s = w->session;
    unsigned long long id = (unsigned long long)in->session;
    if (w->train_closed) {
        snprintf(why, len, "TrainHold: the worker is shutting down");
        return FERRY_EUNAVAIL;
    }
    if (!s || s->id != in->session) {
        snprintf(why, len, "TrainHold: no training session %016llx on this worker", id);
        return FERRY_ENOENT;
    }
    if (!s->has_secret || in->secret.len != sizeof s->secret ||
        CRYPTO_memcmp(in->secret.data, s->secret, sizeof s->secret) != 0) {
        snprintf(why, len, "TrainHold: not the secret of session %016llx", id);
        return FERRY_EACCES;
    }
    if (s->hold && !rpc_srv_cancelled(s->hold)) {
        snprintf(why, len, "TrainHold: session %016llx is held already", id);
        return FERRY_EEXIST;
    }
    return 0;
}

void rt_train_hold_handler(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    rt_worker *w = data;
    proto_train_hold_req *in = NULL;
    if (proto_train_hold_req_unpack(req->head, req->head_len, &in)) {
        rpc_srv_fail(sc, FERRY_EINVAL, "TrainHold: request is not a TrainHoldRequest");
        return;
    }
    char why[160];
    pthread_mutex_lock(&w->train_lock);
    int rc = may_hold(w, in, why, sizeof why);
    if (rc == 0) {
        /* A hold whose caller left before this one came ends now. */
        rt_session_end_hold(w->session, FERRY_ECANCELED, "TrainHold: replaced");
        w->session->hold = sc; /* parked: answered when the session ends */
        w->session->held = true;
    }
    pthread_mutex_unlock(&w->train_lock);
    OPENSSL_cleanse(in->secret.data, in->secret.len);
    proto_free(in);
    if (rc)
        rpc_srv_fail(sc, rc, "%s (from %s)", why, rpc_srv_peer(sc));
}

void rt_train_holds_close(rt_worker *w)
{
    pthread_mutex_lock(&w->train_lock);
    w->train_closed = true;
    if (w->session)
        rt_session_end_hold(w->session, FERRY_EUNAVAIL,
                            "TrainHold: the worker is shutting down");
    pthread_mutex_unlock(&w->train_lock);
}
