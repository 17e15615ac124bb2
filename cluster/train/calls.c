/* Calling a run's ranks: its messages packed, sent to every rank at once
 * and the replies unpacked, and a failed run's sessions discarded. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_int.h"

void ct_fail(ct_run *run, const char *fmt, ...)
{
    if (!run->ev || !run->ev->error)
        return;
    /* A run the stall inspector ended fails for what it found. */
    const char *stalled = ct_stall_abort_report(run);
    if (stalled) {
        run->ev->error(run->ev->data, stalled);
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0)
        text = NULL;
    va_end(ap);
    run->ev->error(run->ev->data, text ? text : ferry_strerror(FERRY_ENOMEM));
    free(text);
}

/* Each view's unpack behind ct_reply's one signature. */
#define CT_REPLY(var, view, name)                                                        \
    static int var##_unpack(const void *buf, size_t len, void **out)                     \
    {                                                                                    \
        proto_##view *v;                                                                 \
        int rc = proto_##view##_unpack(buf, len, &v);                                    \
        *out = v;                                                                        \
        return rc;                                                                       \
    }                                                                                    \
    const ct_reply var = {name, var##_unpack};

CT_REPLY(ct_begin_reply, train_begin_reply, "ferry.TrainBeginReply")
CT_REPLY(ct_epoch_reply, train_epoch_reply, "ferry.TrainEpochReply")
CT_REPLY(ct_end_reply, train_end_reply, "ferry.TrainEndReply")

void ct_free_replies(void *const *reply, int n)
{
    for (int r = 0; r < n; r++)
        proto_free(reply[r]);
}

/* A packed head as a call's argument: the same bytes, not a copy. */
static ferry_bytes_t arg(const proto_bytes *b)
{
    return (ferry_bytes_t){.data = b->data, .len = b->len};
}

int ct_call(ct_run *run, const char *fn, const proto_bytes *in, const ct_reply *kind,
            void **reply)
{
    int n = run->k;
    ferry_bytes_t args[n], out[n];
    for (int r = 0; r < n; r++)
        args[r] = arg(&in[r]);
    int rc =
        n == 1 ? cluster_call(run->cl, run->m, run->node[0], fn, &args[0], &out[0])
               : cluster_call_ranks(run->cl, run->m, fn, (size_t)n, run->node, args, out);
    if (rc)
        return rc;
    for (int r = 0; r < n; r++) {
        reply[r] = NULL;
        if (rc == 0 && kind->unpack(out[r].data, out[r].len, &reply[r])) {
            ct_fail(run, "worker %d: %s: the reply is not a %s", r, fn, kind->what);
            rc = FERRY_EPROTO;
        }
        cluster_free_bytes(&out[r]);
    }
    if (rc)
        ct_free_replies(reply, n);
    return rc;
}

int ct_call_all(ct_run *run, const char *fn, const proto_bytes *in, const ct_reply *kind,
                void **reply)
{
    proto_bytes each[run->k];
    for (int r = 0; r < run->k; r++)
        each[r] = *in;
    return ct_call(run, fn, each, kind, reply);
}

int ct_call_each(ct_run *run, const char *fn, const proto_bytes *in,
                 const cluster_each_follow *follow, ct_each *each)
{
    size_t n = (size_t)run->k;
    each->rcs = calloc(n, sizeof *each->rcs);
    each->errs = calloc(n, sizeof *each->errs);
    each->out = calloc(n, sizeof *each->out);
    ferry_bytes_t *args = calloc(n, sizeof *args);
    int rc = each->rcs && each->errs && each->out && args ? 0 : FERRY_ENOMEM;
    for (size_t r = 0; r < n && rc == 0; r++)
        args[r] = arg(in);
    if (rc == 0)
        rc = cluster_call_each(run->cl, run->m, fn, n, run->alive, args, each->out,
                               each->rcs, each->errs, follow);
    free(args);
    return rc;
}

void ct_each_free(ct_run *run, ct_each *each)
{
    for (int r = 0; r < run->k; r++) {
        if (each->errs)
            free(each->errs[r]);
        if (each->out)
            cluster_free_bytes(&each->out[r]);
    }
    free(each->rcs);
    free(each->errs);
    free(each->out);
    memset(each, 0, sizeof *each);
}

void ct_discard(ct_run *run)
{
    proto_bytes in = {0};
    if (proto_train_end_pack(&(proto_train_end){.session = run->session, .discard = true},
                             &in))
        return;
    for (int r = 0; r < run->k; r++) {
        ferry_bytes_t a = arg(&in), out = {0};
        if (run->alive[r] &&
            cluster_call(run->cl, run->m, run->node[r], "ferry.train.end", &a, &out) == 0)
            cluster_free_bytes(&out);
    }
    proto_bytes_fini(&in);
}
