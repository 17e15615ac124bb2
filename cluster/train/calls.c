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
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0)
        text = NULL;
    va_end(ap);
    run->ev->error(run->ev->data, text ? text : ferry_strerror(FERRY_ENOMEM));
    free(text);
}

int ct_pack(const ProtobufCMessage *msg, ferry_bytes_t *b)
{
    b->len = protobuf_c_message_get_packed_size(msg);
    b->data = malloc(b->len ? b->len : 1);
    if (!b->data)
        return FERRY_ENOMEM;
    protobuf_c_message_pack(msg, b->data);
    return 0;
}

void ct_free_replies(ProtobufCMessage **reply, int n)
{
    for (int r = 0; r < n; r++)
        if (reply[r])
            protobuf_c_message_free_unpacked(reply[r], NULL);
}

int ct_call(ct_run *run, const char *fn, ProtobufCMessage *const *msg,
            const ProtobufCMessageDescriptor *desc, ProtobufCMessage **reply)
{
    int n = run->k;
    ferry_bytes_t in[n], out[n];
    memset(in, 0, sizeof in);
    int rc = 0;
    for (int r = 0; r < n && rc == 0; r++)
        rc = ct_pack(msg[r], &in[r]);
    if (rc == 0)
        rc = n == 1 ? cluster_call(run->cl, run->m, 0, fn, &in[0], &out[0])
                    : cluster_call_first(run->cl, run->m, fn, (size_t)n, in, out);
    for (int r = 0; r < n; r++)
        free(in[r].data);
    if (rc)
        return rc;
    for (int r = 0; r < n; r++) {
        reply[r] =
            rc ? NULL : protobuf_c_message_unpack(desc, NULL, out[r].len, out[r].data);
        cluster_free_bytes(&out[r]);
        if (!reply[r] && !rc) {
            reply[r] = NULL;
            ct_fail(run, "worker %d: %s: the reply is not a %s", r, fn, desc->name);
            rc = FERRY_EPROTO;
        }
    }
    if (rc)
        ct_free_replies(reply, n);
    return rc;
}

int ct_call_all(ct_run *run, const char *fn, const ProtobufCMessage *msg,
                const ProtobufCMessageDescriptor *desc, ProtobufCMessage **reply)
{
    ProtobufCMessage *msgs[run->k];
    for (int r = 0; r < run->k; r++)
        msgs[r] = (ProtobufCMessage *)msg;
    return ct_call(run, fn, msgs, desc, reply);
}

int ct_call_each(ct_run *run, const char *fn, const ProtobufCMessage *msg,
                 const cluster_each_follow *follow, ct_each *each)
{
    size_t n = (size_t)run->k;
    each->rcs = calloc(n, sizeof *each->rcs);
    each->errs = calloc(n, sizeof *each->errs);
    each->out = calloc(n, sizeof *each->out);
    ferry_bytes_t *in = calloc(n, sizeof *in);
    int rc = each->rcs && each->errs && each->out && in ? 0 : FERRY_ENOMEM;
    for (size_t r = 0; r < n && rc == 0; r++)
        rc = ct_pack(msg, &in[r]);
    if (rc == 0)
        rc = cluster_call_each(run->cl, run->m, fn, n, run->alive, in, each->out,
                               each->rcs, each->errs, follow);
    for (size_t r = 0; in && r < n; r++)
        free(in[r].data);
    free(in);
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
    Ferry__TrainEnd end = FERRY__TRAIN_END__INIT;
    end.session = run->session;
    end.discard = true;
    for (int r = 0; r < run->k; r++) {
        ferry_bytes_t in = {0}, out = {0};
        if (!run->alive[r])
            continue;
        if (ct_pack(&end.base, &in) == 0 &&
            cluster_call(run->cl, run->m, r, "ferry.train.end", &in, &out) == 0)
            cluster_free_bytes(&out);
        free(in.data);
    }
}
