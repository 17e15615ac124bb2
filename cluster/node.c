/* A worker as the cluster sees it: alive or dead (and why), the process
 * it last answered from, and the modules that process holds in our view. */
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"

bool cl_node_has(const cl_node *node, const char *sha256)
{
    for (size_t i = 0; i < node->n_loaded; i++)
        if (strcmp(node->loaded[i], sha256) == 0)
            return true;
    return false;
}

void cl_node_add(cl_node *node, const char *sha256)
{
    if (cl_node_has(node, sha256))
        return;
    if (node->n_loaded == node->cap_loaded) {
        size_t cap = node->cap_loaded ? node->cap_loaded * 2 : 4;
        void *p = realloc(node->loaded, cap * sizeof *node->loaded);
        if (!p)
            return; /* only costs an extra "have you got it?" later */
        node->loaded = p;
        node->cap_loaded = cap;
    }
    memcpy(node->loaded[node->n_loaded++], sha256, RT_SHA256_HEX);
}

void cl_node_forget_modules(cl_node *node)
{
    node->n_loaded = 0;
}

void cl_node_kill(cluster *cl, cl_node *node, char *why)
{
    (void)cl;
    if (node->dead) {
        free(why);
        return;
    }
    node->dead = true;
    free(node->dead_why);
    node->dead_why = why ? why : strdup("worker is down");
    /* The completions arrive later, through the loop, as cancelled. */
    for (cl_req *r = node->inflight; r; r = r->next) {
        r->killed = true;
        rpc_call_cancel(&r->call);
    }
}

void cl_node_seen(cluster *cl, cl_node *node, const proto_ping_reply *rep, bool baseline)
{
    (void)cl;
    /* A new process has none of the modules the old one had loaded; and
     * modules loaded before the worker's pid was known may have been
     * loaded into any process: asking again is cheap. */
    if (rep->pid != node->loaded_pid)
        cl_node_forget_modules(node);
    node->loaded_pid = rep->pid;
    /* The first answer is the reference too: a crash record it already
     * holds is older than anything this cluster asked for. */
    if (baseline || !node->known) {
        node->known = true;
        node->pid = rep->pid;
        node->crash_id = rep->crash_id;
    }
    node->missed = 0;
    node->shut = false;
    if (node->dead) {
        node->dead = false;
        free(node->dead_why);
        node->dead_why = NULL;
    }
}

bool cl_ping_seen(cl_req *r)
{
    proto_ping_reply *rep;
    if (r->result || pw_ping_result(&r->call, &rep))
        return false;
    cl_node_seen(r->cl, r->node, rep, true);
    proto_free(rep);
    return true;
}
