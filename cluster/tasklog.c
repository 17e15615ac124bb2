/* What a task logged on a worker (the log lines of a Call's reply), shown
 * where the cluster's user chose, each line prefixed with the worker's
 * rank: "[rank 1] echo: info: ...".
 *
 * A task that logs in a loop must not flood the user's terminal: each
 * rank has a token bucket of CL_TASKLOG_BURST lines that refills at
 * CL_TASKLOG_RATE lines a second, and what finds it empty is counted and
 * said in one line after the reply's others ("... K lines dropped"),
 * together with the lines the worker itself did not keep. A failed call's
 * lines (the last it logged) are cut from the front instead: the lines
 * just before a failure say most about it. Off until asked for: a reply's
 * head is not even read then. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"

#define CL_TASKLOG_BURST 50
#define CL_TASKLOG_RATE  20.0 /* lines a second */

struct cl_tasklog {
    FILE *to;
    double *tokens;
    uint64_t *refilled_ms;
};

void cluster_show_task_logs(cluster *cl, FILE *to)
{
    if (!to) {
        cl_tasklog_free(cl);
        return;
    }
    cl_tasklog *t = cl->tasklog ? cl->tasklog : calloc(1, sizeof *t);
    if (!t)
        return;
    if (!t->tokens) {
        t->tokens = malloc(cl->n * sizeof *t->tokens);
        t->refilled_ms = calloc(cl->n, sizeof *t->refilled_ms);
        for (size_t i = 0; t->tokens && i < cl->n; i++)
            t->tokens[i] = CL_TASKLOG_BURST;
    }
    if (!t->tokens || !t->refilled_ms) {
        free(t->tokens);
        free(t->refilled_ms);
        free(t);
        cl->tasklog = NULL;
        return;
    }
    t->to = to;
    cl->tasklog = t;
}

void cl_tasklog_free(cluster *cl)
{
    if (!cl->tasklog)
        return;
    free(cl->tasklog->tokens);
    free(cl->tasklog->refilled_ms);
    free(cl->tasklog);
    cl->tasklog = NULL;
}

/* The lines rank may show now. */
static size_t refill(cl_tasklog *t, int rank, uint64_t now)
{
    double *tokens = &t->tokens[rank];
    if (t->refilled_ms[rank] && now > t->refilled_ms[rank]) {
        *tokens += (double)(now - t->refilled_ms[rank]) * CL_TASKLOG_RATE / 1000.0;
        if (*tokens > CL_TASKLOG_BURST)
            *tokens = CL_TASKLOG_BURST;
    }
    t->refilled_ms[rank] = now;
    return *tokens < 1 ? 0 : (size_t)*tokens;
}

/* Whether rank may show one more line now; takes its token if so. */
static bool take(cl_tasklog *t, int rank, uint64_t now)
{
    if (!refill(t, rank, now))
        return false;
    t->tokens[rank] -= 1;
    return true;
}

void cl_tasklog_show(cluster *cl, const cl_node *node, const rpc_call *call)
{
    cl_tasklog *t = cl->tasklog;
    if (!t || !call->done || node->rank < 0 || (size_t)node->rank >= cl->n)
        return;
    /* A failure's lines come as a CallReply head too (runtime/call.c). */
    const void *head = call->result ? call->detail : call->reply.head;
    size_t len = call->result ? call->detail_len : call->reply.head_len;
    proto_call_reply *r = NULL;
    if (!head || proto_call_reply_unpack(head, len, &r) != 0)
        return;
    uv_update_time(&cl->loop);
    uint64_t now = uv_now(&cl->loop);
    unsigned long long dropped = 0;
    size_t lines = r->n_log_lines, skip = 0;
    if (lines && r->log_lines[lines - 1][0] == CL_TASKLOG_DROPPED)
        lines--;
    if (call->result && lines > refill(t, node->rank, now))
        skip = lines - refill(t, node->rank, now);
    dropped += skip;
    for (size_t i = skip; i < r->n_log_lines; i++) {
        const char *line = r->log_lines[i];
        if (line[0] == CL_TASKLOG_DROPPED) /* the worker's count, last */
            dropped += strtoull(line + 1, NULL, 10);
        else if (take(t, node->rank, now))
            fprintf(t->to, "[rank %d] %s\n", node->rank, line);
        else
            dropped++;
    }
    if (dropped)
        fprintf(t->to, "[rank %d] ... %llu lines dropped\n", node->rank, dropped);
    fflush(t->to);
    proto_free(r);
}
