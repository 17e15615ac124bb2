/* A worker of rank > 0 started by an engine joins rank 0's rendezvous
 * (Rendezvous, ferry.proto), from a thread with a loop of its own: the
 * engine starts the ranks in any order, so rank 0 may not listen yet, and
 * the worker serves meanwhile. A world that contradicts rank 0's, or a
 * rank 0 that never answers, stops the worker with its reason: an engine
 * shows a failed task, not a cluster that never completes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ferry/ferry.h>

#include "wm_int.h"

#define JOIN_CALL_MS  2000
#define JOIN_RETRY_MS 500

/* One Rendezvous call; 0 with the ranks there in *joined, or its error,
 * its text in `err`. */
static int join_once(rpc_channel *ch, const wm_join *j, int *joined, char *err,
                     size_t errlen)
{
    proto_rendezvous_req req = {.join = true,
                                .rank = j->rank,
                                .world_size = j->world_size,
                                .address = (char *)j->address};
    proto_bytes head;
    int rc = proto_rendezvous_req_pack(&req, &head);
    if (rc)
        return rc;
    rpc_msg_out m = {.head_bytes = head.data, .head_len = head.len};
    rpc_call call = {0};
    rc = rpc_call_start(ch, &call, PROTO_METHOD_RENDEZVOUS, &m, JOIN_CALL_MS, NULL);
    proto_bytes_fini(&head);
    if (rc)
        return rc;
    if ((rc = rpc_call_wait(&call)) != 0) {
        snprintf(err, errlen, "%s", call.errmsg ? call.errmsg : ferry_strerror(rc));
    } else {
        proto_rendezvous_reply *out;
        if ((rc = proto_rendezvous_reply_unpack(call.reply.head, call.reply.head_len,
                                                &out)) == 0) {
            *joined = 0;
            for (size_t i = 0; i < out->n_addresses; i++)
                *joined += out->addresses[i][0] != '\0';
            proto_free(out);
        }
    }
    rpc_call_fini(&call);
    return rc;
}

/* Whether an error is rank 0 not there yet (retried) rather than rank 0
 * refusing this rank (final). */
static bool not_there_yet(int rc)
{
    return rc == FERRY_EUNAVAIL || rc == FERRY_ETIMEDOUT || rc == FERRY_ECONNRESET ||
           rc == FERRY_ECONNREFUSED || rc == FERRY_ECANCELED;
}

static void join_loop(wm_join *j, rpc_channel *ch)
{
    char err[512] = "";
    int64_t waited = 0;
    for (;;) {
        int joined = 0;
        int rc = join_once(ch, j, &joined, err, sizeof err);
        if (rc == 0) {
            fprintf(stderr, "%s joined the rendezvous at %s (%d of %d ranks there)\n",
                    j->who, j->rendezvous, joined, j->world_size);
            return;
        }
        if (!not_there_yet(rc) || waited >= j->timeout_ms) {
            if (!not_there_yet(rc))
                fprintf(stderr, "%s: rank 0 at %s refused this rank: %s\n", j->who,
                        j->rendezvous, err);
            else
                fprintf(stderr, "%s: rank 0 at %s did not answer in %lld s: %s\n", j->who,
                        j->rendezvous, (long long)(j->timeout_ms / 1000), err);
            atomic_store(&j->failed, true);
            rt_worker_stop(j->w);
            return;
        }
        if (!wm_nap(&j->quit, JOIN_RETRY_MS))
            return;
        waited += JOIN_RETRY_MS + JOIN_CALL_MS * (rc == FERRY_ETIMEDOUT);
    }
}

static void *join_thread(void *arg)
{
    wm_join *j = arg;
    uv_loop_t loop;
    rpc_client *c = NULL;
    rpc_channel *ch = NULL;
    if (uv_loop_init(&loop) != 0) {
        fprintf(stderr, "%s: cannot join the rendezvous: no event loop\n", j->who);
        atomic_store(&j->failed, true);
        rt_worker_stop(j->w);
        return NULL;
    }
    rpc_channel_opts co = {.token = j->token, .version = PROTO_VERSION};
    if (rpc_client_create(&loop, &c) == 0 &&
        rpc_channel_create(c, j->rendezvous, &co, &ch) == 0) {
        join_loop(j, ch);
    } else {
        fprintf(stderr, "%s: cannot reach the rendezvous at %s\n", j->who, j->rendezvous);
        atomic_store(&j->failed, true);
        rt_worker_stop(j->w);
    }
    if (ch)
        rpc_channel_destroy(ch);
    if (c)
        rpc_client_close(c);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return NULL;
}

int wm_join_start(wm_join *j)
{
    atomic_init(&j->quit, false);
    atomic_init(&j->failed, false);
    j->started = pthread_create(&j->thread, NULL, join_thread, j) == 0;
    return j->started ? 0 : FERRY_ENOMEM;
}

bool wm_join_stop(wm_join *j)
{
    if (j->started) {
        atomic_store(&j->quit, true);
        pthread_join(j->thread, NULL);
        j->started = false;
    }
    return !atomic_load(&j->failed);
}
