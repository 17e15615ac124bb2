/* Asking workers whether they are there: every worker until all answer
 * (wait_ready), and the dead ones once before they are used again. */
#include <stdlib.h>

#include "cluster_int.h"

void cl_probe_dead(cluster *cl, const bool *which)
{
    size_t n_dead = 0;
    for (size_t i = 0; i < cl->n; i++)
        n_dead += (!which || which[i]) && cl->nodes[i].dead;
    if (!n_dead)
        return;
    bool *dead = calloc(cl->n, sizeof *dead);
    cl_req *reqs = calloc(cl->n, sizeof *reqs);
    if (dead && reqs) {
        for (size_t i = 0; i < cl->n; i++)
            dead[i] = (!which || which[i]) && cl->nodes[i].dead;
        cl_fanout(cl, reqs, dead, CL_REQ_PING, cl_send_ping, &cl->ping_timeout_ms);
        for (size_t i = 0; i < cl->n; i++)
            if (dead[i])
                cl_ping_seen(&reqs[i]);
    }
    free(dead);
    cl_reqs_free(reqs, cl->n);
}

int cluster_wait_ready(cluster *cl, int64_t timeout_ms)
{
    return cluster_wait_ready_from(cl, 0, timeout_ms);
}

int cluster_wait_ready_from(cluster *cl, size_t from, int64_t timeout_ms)
{
    if (!cl || from > cl->n)
        return FERRY_EINVAL;
    bool *need = malloc(cl->n * sizeof *need); /* not answered yet */
    cl_req *reqs = calloc(cl->n, sizeof *reqs);
    if (!need || !reqs) {
        free(need);
        free(reqs);
        return FERRY_ENOMEM;
    }
    for (size_t i = 0; i < cl->n; i++)
        need[i] = i >= from;
    uv_update_time(&cl->loop);
    uint64_t deadline = uv_now(&cl->loop) + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    int rc = 0;
    for (;;) {
        uint64_t now = uv_now(&cl->loop);
        int64_t left = now < deadline ? (int64_t)(deadline - now) : 1;
        int64_t t = left < cl->ping_timeout_ms ? left : cl->ping_timeout_ms;
        cl_fanout(cl, reqs, need, CL_REQ_PING, cl_send_ping, &t);
        size_t missing = 0;
        for (size_t i = 0; i < cl->n; i++) {
            if (need[i] && cl_ping_seen(&reqs[i]))
                need[i] = false;
            missing += need[i];
        }
        if (!missing)
            break;
        uv_update_time(&cl->loop);
        now = uv_now(&cl->loop);
        if (now >= deadline) {
            rc = FERRY_ETIMEDOUT;
            break;
        }
        int64_t pause = (int64_t)(deadline - now);
        cl_run_for(cl, pause < CL_RETRY_MS ? pause : CL_RETRY_MS, NULL);
    }
    if (rc) {
        size_t missing = 0;
        char *list = NULL;
        for (size_t i = 0; i < cl->n; i++) {
            if (!need[i])
                continue;
            missing++;
            cl_append(&list, "; %s", reqs[i].err ? reqs[i].err : "no answer");
        }
        cl_set_error(cl, "%zu of %zu workers did not answer within %lld ms%s", missing,
                     cl->n - from, (long long)timeout_ms, list ? list : "");
        free(list);
    }
    cl_reqs_free(reqs, cl->n);
    free(need);
    return rc;
}
