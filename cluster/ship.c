/* Data files sent to the workers that lack them (PutData, ferry.proto):
 * content-addressed as modules are, so that a worker that holds the bytes
 * gets nothing, and sent in chunks under the message size limit, each
 * chunk to every worker that lacks the file at once. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_int.h"

/* A chunk: well under any message limit a cluster may have (64 KiB at
 * least), large enough that a call's fixed cost does not count. */
#define SHIP_CHUNK_MAX (4u << 20)

/* One PutData to each worker `on` marks (a question when chunk is NULL),
 * waited for; `on` cleared for those that have the file whole after it.
 * Returns the first failure, its text set on the cluster. */
static int put_round(cluster *cl, bool *on, const char *sha, const char *name,
                     uint64_t size, uint64_t offset, const void *chunk, size_t len)
{
    rpc_call *calls = calloc(cl->n, sizeof *calls);
    rpc_call **started = calloc(cl->n, sizeof *started);
    if (!calls || !started) {
        free(calls);
        free(started);
        return FERRY_ENOMEM;
    }
    size_t k = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < cl->n; i++) {
        if (!on[i])
            continue;
        calls[i].data = &cl->nodes[i];
        rc = pw_put_data(cl->nodes[i].pw, &calls[i], sha, name, size, offset, chunk, len,
                         cl->call_timeout_ms, NULL);
        if (rc)
            cl_set_error(cl, "worker %zu (%s): cannot send %s: %s", i,
                         cl->nodes[i].target, name, ferry_strerror(rc));
        else
            started[k++] = &calls[i];
    }
    int waited = k ? rpc_call_wait_all(started, k) : 0;
    for (size_t j = 0; j < k; j++) {
        rpc_call *c = started[j];
        size_t i = (size_t)((cl_node *)c->data - cl->nodes);
        proto_put_data_reply *rep = NULL;
        if (c->result && rc == 0) {
            rc = c->result;
            cl_set_error(cl, "worker %zu: %s", i,
                         c->errmsg ? c->errmsg : ferry_strerror(rc));
        } else if (!c->result && pw_put_data_result(c, &rep) == 0) {
            on[i] = !rep->have;
        }
        proto_free(rep);
        rpc_call_fini(c);
    }
    free(calls);
    free(started);
    return rc ? rc : waited;
}

int cluster_ship_fd(cluster *cl, int fd, uint64_t size, const char *name, char *ref,
                    size_t reflen, size_t *sent_to)
{
    *sent_to = 0;
    if (!cl || fd < 0 || !name || !name[0] || strchr(name, '/'))
        return FERRY_EINVAL;
    size_t chunk = cl->max_payload ? cl->max_payload / 2 : SHIP_CHUNK_MAX;
    chunk = chunk > SHIP_CHUNK_MAX ? SHIP_CHUNK_MAX : chunk;
    void *buf = malloc(chunk);
    bool *lacks = calloc(cl->n, sizeof *lacks);
    char sha[RT_SHA256_HEX];
    int rc = buf && lacks ? rt_sha256_fd(fd, size, sha) : FERRY_ENOMEM;
    if (rc)
        cl_set_error(cl, "cannot read %s: %s", name, ferry_strerror(rc));
    for (size_t i = 0; rc == 0 && i < cl->n; i++)
        lacks[i] = true;
    if (rc == 0)
        rc = put_round(cl, lacks, sha, name, size, 0, NULL, 0);
    for (size_t i = 0; rc == 0 && i < cl->n; i++)
        *sent_to += lacks[i];
    for (uint64_t at = 0; rc == 0 && *sent_to && at < size;) {
        size_t want = size - at < chunk ? (size_t)(size - at) : chunk;
        ssize_t n = pread(fd, buf, want, (off_t)at);
        if (n != (ssize_t)want) {
            rc = n < 0 ? -errno : FERRY_EIO;
            cl_set_error(cl, "cannot read %s: %s", name, ferry_strerror(rc));
            break;
        }
        rc = put_round(cl, lacks, sha, name, size, at, buf, want);
        at += want;
    }
    /* An empty file has no chunk: its one question-with-no-bytes round
     * cannot file it, so it is refused rather than silently not sent. */
    if (rc == 0 && *sent_to && size == 0) {
        rc = FERRY_EINVAL;
        cl_set_error(cl, "%s is empty: there is nothing to ship", name);
    }
    if (rc == 0 &&
        snprintf(ref, reflen, PROTO_DATA_REF_PREFIX "%s/%s", sha, name) >= (int)reflen)
        rc = FERRY_ERANGE;
    free(buf);
    free(lacks);
    return rc;
}
