/* Rendezvous (ferry.proto): rank 0 of a launcher's world keeps the address
 * each rank joined with, so that workers started by an engine and a
 * submitter without the engine's FERRY_HOME find each other, as torchrun's
 * c10d store does. Inline on the completion-queue thread: it takes one
 * short lock and never blocks. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "runtime_int.h"

struct rt_rendezvous {
    pthread_mutex_t mu;
    int world_size;
    char **addresses; /* [world_size]; NULL: not joined */
};

int rt_rendezvous_create(int world_size, const char *self, rt_rendezvous **out)
{
    rt_rendezvous *rv = calloc(1, sizeof *rv);
    if (!rv || !(rv->addresses = calloc((size_t)world_size, sizeof *rv->addresses)) ||
        !(rv->addresses[0] = strdup(self))) {
        rt_rendezvous_free(rv);
        return FERRY_ENOMEM;
    }
    rv->world_size = world_size;
    pthread_mutex_init(&rv->mu, NULL);
    *out = rv;
    return 0;
}

void rt_rendezvous_free(rt_rendezvous *rv)
{
    if (!rv)
        return;
    for (int i = 0; rv->addresses && i < rv->world_size; i++)
        free(rv->addresses[i]);
    free(rv->addresses);
    free(rv);
}

/* The address a joining rank is reached at: as it says, or, when it listens
 * on every interface, the host its call came from ("ipv4:10.1.0.5:41234",
 * "ipv6:[fd00::5]:41234") with the port it gave. */
static int reach_address(const char *given, const char *peer, char *buf, size_t len)
{
    char host[256];
    int port;
    if (conf_split_address(given, host, sizeof host, &port) != 0)
        return FERRY_EINVAL;
    if (!conf_is_wildcard(host)) {
        conf_format_address(buf, len, host, port);
        return 0;
    }
    const char *colon = peer ? strchr(peer, ':') : NULL;
    const char *last = peer ? strrchr(peer, ':') : NULL;
    if (!colon || last == colon)
        return FERRY_EINVAL;
    int n = snprintf(buf, len, "%.*s:%d", (int)(last - colon - 1), colon + 1, port);
    return n > 0 && (size_t)n < len ? 0 : FERRY_EINVAL;
}

/* Files the join, or says in `why` what contradicts rank 0's world. Under
 * rv->mu. */
static int file_join(rt_rendezvous *rv, const proto_rendezvous_req *in, const char *peer,
                     char *why, size_t whylen)
{
    if (in->world_size != rv->world_size) {
        snprintf(why, whylen, "rank %d says the world has %d ranks; rank 0 says %d",
                 (int)in->rank, (int)in->world_size, rv->world_size);
        return FERRY_EINVAL;
    }
    if (in->rank <= 0 || in->rank >= rv->world_size) {
        snprintf(why, whylen, "rank %d is not one that joins a world of %d ranks",
                 (int)in->rank, rv->world_size);
        return FERRY_EINVAL;
    }
    char addr[300];
    if (reach_address(in->address ? in->address : "", peer, addr, sizeof addr)) {
        snprintf(why, whylen, "rank %d's address '%s' is not host:port", (int)in->rank,
                 in->address ? in->address : "");
        return FERRY_EINVAL;
    }
    /* A rank that joins again was restarted by its engine, perhaps on
     * another host: its newest address wins. */
    char *copy = strdup(addr);
    if (!copy)
        return FERRY_ENOMEM;
    free(rv->addresses[in->rank]);
    rv->addresses[in->rank] = copy;
    return 0;
}

void rt_rendezvous_handler(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    rt_rendezvous *rv = ((rt_worker *)data)->rendezvous;
    proto_rendezvous_req *in;
    if (proto_rendezvous_req_unpack(req->head, req->head_len, &in)) {
        rpc_srv_fail(sc, FERRY_EINVAL, "Rendezvous: request is not a RendezvousRequest");
        return;
    }
    if (!rv) {
        proto_free(in);
        rpc_srv_fail(sc, FERRY_EBUSY,
                     "Rendezvous: this worker keeps no world (only rank 0 of workers "
                     "started with `ferry worker --from-env` does)");
        return;
    }
    char why[256] = "";
    pthread_mutex_lock(&rv->mu);
    int rc = in->join ? file_join(rv, in, rpc_srv_peer(sc), why, sizeof why) : 0;
    char *empty = "";
    char **list = calloc((size_t)rv->world_size, sizeof *list);
    for (int i = 0; list && i < rv->world_size; i++)
        list[i] = rv->addresses[i] ? rv->addresses[i] : empty;
    proto_rendezvous_reply out = {.world_size = rv->world_size,
                                  .n_addresses = (size_t)rv->world_size,
                                  .addresses = list};
    proto_bytes head = {0};
    int prc = rc ? 0 : !list ? FERRY_ENOMEM : proto_rendezvous_reply_pack(&out, &head);
    pthread_mutex_unlock(&rv->mu);
    free(list);
    proto_free(in);
    if (rc)
        rpc_srv_fail(sc, rc, "Rendezvous: %s", why[0] ? why : ferry_strerror(rc));
    else
        rt_reply_packed(sc, prc, &head, "Rendezvous");
}
