/* Administration: what every worker says about itself (ping + stats), and
 * asking every worker to exit. */
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"

void cl_survey_free(cluster *cl)
{
    if (!cl->survey)
        return;
    for (size_t i = 0; i < cl->n; i++) {
        if (cl->survey[i].ping)
            protobuf_c_message_free_unpacked(&cl->survey[i].ping->base, NULL);
        if (cl->survey[i].stats)
            protobuf_c_message_free_unpacked(&cl->survey[i].stats->base, NULL);
    }
    free(cl->survey);
    cl->survey = NULL;
}

typedef struct survey_state {
    size_t pending;
} survey_state;

static void survey_done(cl_req *r)
{
    survey_state *st = r->data;
    cluster_worker *w = &r->cl->survey[r->node->rank];
    st->pending--;
    if (r->result)
        return;
    if (r->kind == CL_REQ_PING) {
        if (pw_ping_reply(&r->call, &w->ping))
            goto corrupt;
        w->alive = true;
        cl_node_seen(r->cl, r->node, w->ping, true);
    } else if (pw_stats_reply(&r->call, &w->stats)) {
        goto corrupt;
    }
    return;
corrupt:
    r->result = FERRY_ECORRUPT;
    char *label = cl_req_label(r);
    free(r->err);
    r->err = cl_fmt("%s: corrupt reply", label);
    free(label);
}

int cluster_survey(cluster *cl, bool stats, const cluster_worker **out)
{
    if (!cl)
        return FERRY_EINVAL;
    cl_survey_free(cl);
    cl->survey = calloc(cl->n, sizeof *cl->survey);
    size_t per = stats ? 2 : 1;
    cl_req *reqs = calloc(cl->n * per, sizeof *reqs);
    if (!cl->survey || !reqs) {
        free(reqs);
        return FERRY_ENOMEM;
    }
    survey_state st = {0};
    for (size_t i = 0; i < cl->n; i++) {
        cl_node *node = &cl->nodes[i];
        cl->survey[i].rank = (int)i;
        cl->survey[i].target = node->target;
        cl_req *p = &reqs[i * per];
        cl_req_prepare(p, cl, node, CL_REQ_PING, NULL, NULL, survey_done, &st);
        st.pending++;
        cl_req_started(p, pw_ping(node->pw, &p->call, ++cl->nonce, cl->ping_timeout_ms,
                                  cl_req_rpc_done));
        if (!stats)
            continue;
        cl_req *s = &reqs[i * per + 1];
        cl_req_prepare(s, cl, node, CL_REQ_STATS, NULL, NULL, survey_done, &st);
        st.pending++;
        cl_req_started(
            s, pw_stats(node->pw, &s->call, cl->ping_timeout_ms, cl_req_rpc_done));
    }
    cl_run(cl, &st.pending);
    int rc = 0;
    for (size_t i = 0; i < cl->n * per; i++) {
        if (reqs[i].result && !rc) {
            rc = reqs[i].result;
            cl_set_error_text(cl, reqs[i].err);
            reqs[i].err = NULL;
        }
        cl_req_fini(&reqs[i]);
    }
    free(reqs);
    if (out)
        *out = cl->survey;
    return rc;
}

/* ---- shutdown ------------------------------------------------------------- */

typedef struct shut_state {
    size_t pending;
} shut_state;

static void shut_done(cl_req *r)
{
    shut_state *st = r->data;
    st->pending--;
    /* A worker that is already gone, or that closed the connection on its
     * way out before the reply got through, has stopped: that is success. */
    if (r->result == FERRY_EUNAVAIL || r->result == FERRY_ECONNRESET) {
        r->result = 0;
        free(r->err);
        r->err = NULL;
    }
}

int cluster_shutdown_all(cluster *cl, uint32_t grace_ms)
{
    if (!cl)
        return FERRY_EINVAL;
    cl_req *reqs = calloc(cl->n, sizeof *reqs);
    if (!reqs)
        return FERRY_ENOMEM;
    shut_state st = {0};
    for (size_t i = 0; i < cl->n; i++) {
        cl_node *node = &cl->nodes[i];
        node->shut = true; /* its lost connection is no news */
        cl_req_prepare(&reqs[i], cl, node, CL_REQ_SHUTDOWN, NULL, NULL, shut_done, &st);
        st.pending++;
        cl_req_started(&reqs[i], pw_shutdown(node->pw, &reqs[i].call, grace_ms,
                                             (int64_t)grace_ms + cl->call_timeout_ms,
                                             cl_req_rpc_done));
    }
    cl_run(cl, &st.pending);
    int rc = 0;
    for (size_t i = 0; i < cl->n; i++) {
        cl_node *node = &cl->nodes[i];
        if (reqs[i].result && !rc) {
            rc = reqs[i].result;
            cl_set_error_text(cl, reqs[i].err);
            reqs[i].err = NULL;
        }
        if (!reqs[i].result && !node->dead) {
            node->dead = true;
            free(node->dead_why);
            node->dead_why = strdup("it was shut down");
        }
        cl_req_fini(&reqs[i]);
    }
    free(reqs);
    return rc;
}
