/* Content-addressed shipping: ask every worker for the SHA-256 first, send
 * the bytes only to those that lack it. The cluster keeps a copy of each
 * module's bytes, so that a worker its supervisor restarted can be given the
 * module again before its next call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"

static cl_stored *store_find(cluster *cl, const char *sha256)
{
    for (cl_stored *s = cl->modules; s; s = s->next)
        if (strcmp(s->sha256, sha256) == 0)
            return s;
    return NULL;
}

void cl_modules_free(cluster *cl)
{
    while (cl->modules) {
        cl_stored *s = cl->modules;
        cl->modules = s->next;
        free(s->bytes);
        free(s);
    }
}

/* ---- the load protocol ---------------------------------------------------- */

enum { PHASE_ASK = 0, PHASE_SEND = 1 };

typedef struct load_state {
    cluster *cl;
    const cl_stored *sm;
    size_t pending;
    int shipped;
    proto_load_module_reply **replies; /* per rank, the successful ones */
} load_state;

static void load_done(cl_req *r);

static void load_start(load_state *st, cl_req *r, cl_node *node, int phase)
{
    cl_req_prepare(r, st->cl, node, CL_REQ_LOAD, st->sm->name, NULL, load_done, st);
    r->index = (size_t)phase;
    const void *bytes = phase == PHASE_SEND ? st->sm->bytes : NULL;
    size_t len = phase == PHASE_SEND ? st->sm->len : 0;
    cl_req_started(r,
                   pw_load_module(node->pw, &r->call, st->sm->sha256, st->sm->name, bytes,
                                  len, st->cl->call_timeout_ms, cl_req_rpc_done));
}

static void load_done(cl_req *r)
{
    load_state *st = r->data;
    if (r->result == FERRY_ENOENT && r->index == PHASE_ASK) {
        load_start(st, r, r->node, PHASE_SEND);
        return;
    }
    if (!r->result) {
        proto_load_module_reply *rep = NULL;
        if (pw_load_module_result(&r->call, &rep)) {
            char *label = cl_req_label(r);
            cl_req_finish(r, FERRY_ECORRUPT, CL_FAIL_OWN,
                          base_asprintf("%s: the worker's LoadModule reply is corrupt", label));
            free(label);
            return; /* load_done runs again, with the failure */
        }
        st->replies[r->node->rank] = rep;
        cl_node_add(r->node, st->sm->sha256);
        st->shipped += r->index == PHASE_SEND;
    }
    st->pending--;
}

/* Loads `sm` on the nodes in `need`; fills `out`'s functions and shipped
 * count when given. Returns the first failure in rank order. */
static int load_on(cluster *cl, const cl_stored *sm, const bool *need,
                   cluster_module *out)
{
    cl_probe_dead(cl, need);
    cl_req *reqs = calloc(cl->n, sizeof *reqs);
    load_state st = {.cl = cl, .sm = sm};
    st.replies = calloc(cl->n, sizeof *st.replies);
    if (!reqs || !st.replies) {
        free(reqs);
        free(st.replies);
        cl_set_error(cl, "module %s: out of memory", sm->name);
        return FERRY_ENOMEM;
    }
    for (size_t i = 0; i < cl->n; i++) {
        cl_node *node = &cl->nodes[i];
        if (!need[i])
            continue;
        st.pending++;
        if (node->dead) {
            cl_req_prepare(&reqs[i], cl, node, CL_REQ_LOAD, sm->name, NULL, load_done,
                           &st);
            cl_req_down(&reqs[i]);
            continue;
        }
        load_start(&st, &reqs[i], node, PHASE_ASK);
    }
    cl_run(cl, &st.pending);

    /* Those not needed were never started: they did not fail. */
    int rc = cl_first_error(cl, reqs, cl->n, NULL);
    if (out) {
        out->shipped = st.shipped;
        for (size_t i = 0; i < cl->n && !rc; i++) {
            proto_load_module_reply *rep = st.replies[i];
            if (!rep || out->functions)
                continue;
            char *list = NULL;
            for (size_t f = 0; f < rep->n_functions; f++)
                cl_append(&list, "%s%s", f ? "," : "", rep->functions[f]);
            out->functions = list ? list : strdup("");
        }
    }
    for (size_t i = 0; i < cl->n; i++)
        if (st.replies[i])
            proto_free(st.replies[i]);
    free(st.replies);
    cl_reqs_free(reqs, cl->n);
    return rc;
}

int cluster_load_module(cluster *cl, const char *name, const void *bytes, size_t len,
                        cluster_module *out)
{
    return cluster_load_module_on(cl, name, bytes, len, NULL, out);
}

int cluster_load_module_on(cluster *cl, const char *name, const void *bytes, size_t len,
                           const bool *which, cluster_module *out)
{
    if (!cl || !name || !bytes || !len || !out)
        return FERRY_EINVAL;
    memset(out, 0, sizeof *out);
    uint64_t t0 = uv_hrtime();
    char sha[RT_SHA256_HEX];
    rt_sha256_hex(bytes, len, sha);

    cl_stored *sm = store_find(cl, sha);
    if (!sm) {
        sm = calloc(1, sizeof *sm);
        void *copy = sm ? malloc(len) : NULL;
        if (!copy) {
            free(sm);
            cl_set_error(cl, "module %s: out of memory for a copy of %zu bytes", name,
                         len);
            return FERRY_ENOMEM;
        }
        memcpy(copy, bytes, len);
        memcpy(sm->sha256, sha, sizeof sha);
        snprintf(sm->name, sizeof sm->name, "%s", name);
        sm->bytes = copy;
        sm->len = len;
        sm->next = cl->modules;
        cl->modules = sm;
    }
    memcpy(out->sha256, sha, sizeof out->sha256);
    snprintf(out->name, sizeof out->name, "%s", name);
    out->bytes = len;

    /* Every worker is asked, even one we believe has it: a worker may have
     * been restarted since, by anyone. */
    bool *need = malloc(cl->n * sizeof *need);
    if (!need)
        return FERRY_ENOMEM;
    for (size_t i = 0; i < cl->n; i++)
        need[i] = !which || which[i];
    int rc = load_on(cl, sm, need, out);
    free(need);
    if (rc)
        cluster_module_fini(out);
    out->load_start_ns = t0;
    out->load_end_ns = uv_hrtime();
    return rc;
}

void cluster_module_fini(cluster_module *m)
{
    if (!m)
        return;
    free(m->functions);
    m->functions = NULL;
}

int cl_ensure_loaded(cluster *cl, const cluster_module *m, const bool *which)
{
    cl_stored *sm = store_find(cl, m->sha256);
    if (!sm) {
        cl_set_error(cl, "module %s (%.12s...) was not loaded through this cluster",
                     m->name, m->sha256);
        return FERRY_EINVAL;
    }
    bool *need = calloc(cl->n, sizeof *need);
    if (!need)
        return FERRY_ENOMEM;
    size_t missing = 0;
    for (size_t i = 0; i < cl->n; i++) {
        /* A worker that is down fails its own calls, with its own text. */
        need[i] = (!which || which[i]) && !cl->nodes[i].dead &&
                  !cl_node_has(&cl->nodes[i], sm->sha256);
        missing += need[i];
    }
    int rc = missing ? load_on(cl, sm, need, NULL) : 0;
    free(need);
    return rc;
}
