/* Administration: what every worker says about itself (ping + stats), and
 * asking every worker to exit. */
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"

void cl_survey_free(cluster *cl)
{
    if (!cl->survey)
        return;
    for (size_t i = 0; i < cl->n_survey; i++) {
        if (cl->survey[i].ping)
            proto_free(cl->survey[i].ping);
        if (cl->survey[i].stats)
            proto_free(cl->survey[i].stats);
    }
    free(cl->survey);
    cl->survey = NULL;
}

/* Keeps the reply of a survey request that succeeded in its worker's entry. */
static void survey_keep(cl_req *r)
{
    cluster_worker *w = &r->cl->survey[r->node->rank];
    if (r->result)
        return;
    if (r->kind == CL_REQ_PING) {
        if (pw_ping_result(&r->call, &w->ping))
            goto corrupt;
        w->alive = true;
        cl_node_seen(r->cl, r->node, w->ping, true);
    } else if (pw_stats_result(&r->call, &w->stats)) {
        goto corrupt;
    }
    return;
corrupt:
    r->result = FERRY_ECORRUPT;
    char *label = cl_req_label(r);
    free(r->err);
    r->err = base_asprintf("%s: corrupt reply", label);
    free(label);
}

static int send_stats(cl_req *r, void *ctx)
{
    (void)ctx;
    return pw_stats(r->node->pw, &r->call, r->cl->ping_timeout_ms, cl_req_rpc_done);
}

int cluster_survey(cluster *cl, bool stats, const cluster_worker **out)
{
    if (!cl)
        return FERRY_EINVAL;
    cl_survey_free(cl);
    cl->survey = calloc(cl->n, sizeof *cl->survey);
    cl->n_survey = cl->survey ? cl->n : 0;
    /* The pings, then (with stats) the Stats requests, all at once. */
    cl_req *reqs = calloc(cl->n * 2, sizeof *reqs);
    if (!cl->survey || !reqs) {
        free(reqs);
        return FERRY_ENOMEM;
    }
    for (size_t i = 0; i < cl->n; i++) {
        cl->survey[i].rank = (int)i;
        cl->survey[i].target = cl->nodes[i].target;
    }
    size_t pending = 0;
    cl_fanout_start(cl, reqs, NULL, CL_REQ_PING, cl_send_ping, &cl->ping_timeout_ms,
                    &pending);
    if (stats)
        cl_fanout_start(cl, reqs + cl->n, NULL, CL_REQ_STATS, send_stats, NULL, &pending);
    cl_run(cl, &pending);
    /* The first failure in rank order, a worker's ping before its stats. */
    int rc = 0;
    for (size_t i = 0; i < cl->n; i++) {
        survey_keep(&reqs[i]);
        if (!rc)
            rc = cl_first_error(cl, &reqs[i], 1, NULL);
        if (!stats)
            continue;
        survey_keep(&reqs[cl->n + i]);
        if (!rc)
            rc = cl_first_error(cl, &reqs[cl->n + i], 1, NULL);
    }
    cl_reqs_free(reqs, cl->n * 2);
    if (out)
        *out = cl->survey;
    return rc;
}

/* ---- shutdown ------------------------------------------------------------- */

static int send_shutdown(cl_req *r, void *grace_ms)
{
    uint32_t grace = *(const uint32_t *)grace_ms;
    return pw_shutdown(r->node->pw, &r->call, grace,
                       (int64_t)grace + r->cl->call_timeout_ms, cl_req_rpc_done);
}

int cluster_shutdown_all(cluster *cl, uint32_t grace_ms)
{
    if (!cl)
        return FERRY_EINVAL;
    cl_req *reqs = calloc(cl->n, sizeof *reqs);
    if (!reqs)
        return FERRY_ENOMEM;
    for (size_t i = 0; i < cl->n; i++)
        cl->nodes[i].shut = true; /* its lost connection is no news */
    cl_fanout(cl, reqs, NULL, CL_REQ_SHUTDOWN, send_shutdown, &grace_ms);
    /* A worker that is already gone, or that closed the connection on its
     * way out before the reply got through, has stopped: that is success. */
    for (size_t i = 0; i < cl->n; i++) {
        if (reqs[i].result == FERRY_EUNAVAIL || reqs[i].result == FERRY_ECONNRESET) {
            reqs[i].result = 0;
            free(reqs[i].err);
            reqs[i].err = NULL;
        }
    }
    int rc = cl_first_error(cl, reqs, cl->n, NULL);
    for (size_t i = 0; i < cl->n; i++) {
        cl_node *node = &cl->nodes[i];
        if (!reqs[i].result && !node->dead) {
            node->dead = true;
            free(node->dead_why);
            node->dead_why = strdup("it was shut down");
        }
    }
    cl_reqs_free(reqs, cl->n);
    return rc;
}
