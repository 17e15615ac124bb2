/* A cluster's life: one loop, one rpc client, one proxyworker per worker,
 * created here and torn down here. The top of the folder: it calls the
 * other files' init and free functions and none of them calls it.
 *
 * The files build on one another one way only:
 *   core.c     texts, accessors, a request's bookkeeping
 *   node.c     a worker's state: alive or dead, its process, its modules
 *   health.c   the heartbeat, how a request ended, a lost call's diagnosis
 *   run.c      the loop run from blocking code, with the heartbeat going
 *   probe.c    wait_ready, and dead workers pinged before they are used
 *   modules.c  content-addressed shipping; calls.c, admin.c, driver.c
 *   cluster.c  create and destroy */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>

#include "cluster_int.h"

/* ---- create / destroy ----------------------------------------------------- */

/* Node i at `target`, its channel opened. */
static int open_node(cluster *cl, size_t i, const char *target)
{
    cl_node *node = &cl->nodes[i];
    node->cl = cl;
    node->rank = (int)i;
    node->target = strdup(target);
    if (!node->target)
        return FERRY_ENOMEM;
    pw_opts po = {.target = target,
                  .token = cl->token,
                  .rank = (int)i,
                  .max_payload = cl->max_payload};
    int rc = pw_create(cl->client, &po, &node->pw);
    if (rc)
        cl_set_error(cl, "worker %zu (%s): cannot open a channel: %s", i, target,
                     ferry_strerror(rc));
    return rc;
}

int cluster_add_worker(cluster *cl, const char *target)
{
    if (!cl || !target || !*target)
        return FERRY_EINVAL;
    if (cl->n >= cl->cap) {
        cl_set_error(cl, "worker %zu (%s): this cluster takes at most %zu workers", cl->n,
                     target, cl->cap);
        return FERRY_ERANGE;
    }
    int rc = open_node(cl, cl->n, target);
    if (rc) {
        free(cl->nodes[cl->n].target);
        memset(&cl->nodes[cl->n], 0, sizeof cl->nodes[cl->n]);
        return rc;
    }
    cl_health_init_node(cl, cl->n);
    cl->n++;
    return 0;
}

int cluster_create(const char *const *targets, size_t n, const cluster_opts *opts,
                   cluster **out)
{
    if (!targets || !n || !out || n > INT32_MAX)
        return FERRY_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!targets[i] || !*targets[i])
            return FERRY_EINVAL;

    cluster *cl = calloc(1, sizeof *cl);
    if (!cl)
        return FERRY_ENOMEM;
    cl->n = n;
    cl->cap = opts && opts->max_workers > n ? opts->max_workers : n;
    cl->call_timeout_ms = opts && opts->call_timeout_ms ? opts->call_timeout_ms : 60000;
    cl->ping_timeout_ms = opts && opts->ping_timeout_ms ? opts->ping_timeout_ms : 1000;
    cl->heartbeat_ms = opts && opts->heartbeat_ms ? opts->heartbeat_ms : 1000;
    cl->max_payload = opts ? opts->max_payload : 0;
    if (opts && opts->token && !(cl->token = strdup(opts->token))) {
        free(cl);
        return FERRY_ENOMEM;
    }

    grpc_init();
    int rc = uv_loop_init(&cl->loop);
    if (rc) {
        grpc_shutdown();
        free(cl->token);
        free(cl);
        return rc;
    }
    uv_timer_init(&cl->loop, &cl->wait_timer);
    cl->wait_timer.data = cl;
    uv_timer_init(&cl->loop, &cl->gather_timer);
    cl->nodes = calloc(cl->cap, sizeof *cl->nodes);
    rc = cl->nodes ? rpc_client_create(&cl->loop, &cl->client) : FERRY_ENOMEM;
    if (rc)
        goto fail;
    cl_health_init(cl);
    for (size_t i = 0; i < n; i++)
        if ((rc = open_node(cl, i, targets[i])))
            goto fail;
    *out = cl;
    return 0;

fail:
    cluster_destroy(cl);
    return rc;
}

void cluster_destroy(cluster *cl)
{
    if (!cl)
        return;
    cl->closing = true;
    for (size_t i = 0; cl->nodes && i < cl->n; i++) {
        pw_destroy(cl->nodes[i].pw); /* cancels; the callbacks still run */
        cl->nodes[i].pw = NULL;
    }
    if (cl->client)
        cl_health_close(cl);
    uv_close((uv_handle_t *)&cl->wait_timer, NULL);
    uv_close((uv_handle_t *)&cl->gather_timer, NULL);
    cl_watch_close(cl);
    rpc_client_close(cl->client);
    uv_run(&cl->loop, UV_RUN_DEFAULT);
    cl_watch_free(cl);
    int rc = uv_loop_close(&cl->loop);
    if (rc)
        fprintf(stderr, "ferry: cluster: loop still busy at close: %s\n",
                uv_strerror(rc));
    for (size_t i = 0; cl->nodes && i < cl->n; i++) {
        cl_node *node = &cl->nodes[i];
        free(node->target);
        free(node->dead_why);
        free(node->diag_cause);
        free(node->loaded);
        rpc_call_fini(&node->hb_call);
        rpc_call_fini(&node->diag_call);
    }
    cl_survey_free(cl);
    cl_modules_free(cl);
    cl_tasklog_free(cl);
    free(cl->nodes);
    free(cl->token);
    free(cl->err);
    free(cl);
    grpc_shutdown();
}
