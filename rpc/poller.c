/* A poller: one completion queue and the one thread that drains it,
 * running each finished batch's `done` right there.
 *
 * A server and the clients that share its poller are served by a single
 * thread: gRPC then reads every connection on the thread that owns the
 * queue, where with one queue per side the thread that polls must wake the
 * other for each event it reads on its behalf (a context switch a message,
 * each way). Hooks let the owner of something on the queue act on a timer
 * without a thread of its own (a server's summary of refusals). */
#include <pthread.h>
#include <stdlib.h>

#include "rpc_int.h"

/* How often a hook that asks for it runs without an event. */
#define HOOK_WAKE_MS 1000

typedef struct rpc_hook {
    struct rpc_hook *next;
    rpc_poller_hook_fn fn;
    void *arg;
} rpc_hook;

/* Runs every hook; whether one asks to run again within HOOK_WAKE_MS. */
static bool run_hooks(rpc_poller *p, bool final)
{
    if (!atomic_load(&p->n_hooks))
        return false;
    bool wake = false;
    pthread_mutex_lock(&p->mu);
    for (rpc_hook *h = p->hooks; h; h = h->next)
        wake |= h->fn(h->arg, final);
    pthread_mutex_unlock(&p->mu);
    return wake;
}

static void *poller_thread(void *arg)
{
    rpc_poller *p = arg;
    pthread_setname_np(pthread_self(), "ferry-poller");
    for (;;) {
        gpr_timespec until =
            run_hooks(p, false)
                ? gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                               gpr_time_from_millis(HOOK_WAKE_MS, GPR_TIMESPAN))
                : gpr_inf_future(GPR_CLOCK_MONOTONIC);
        grpc_event ev = grpc_completion_queue_next(p->cq, until, NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) {
            run_hooks(p, true);
            return NULL;
        }
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        rpc_tag *t = ev.tag;
        t->done(t, ev.success != 0);
    }
}

int rpc_poller_create(rpc_poller **out)
{
    *out = NULL;
    rpc_poller *p = calloc(1, sizeof *p);
    if (!p)
        return FERRY_ENOMEM;
    grpc_init();
    pthread_mutex_init(&p->mu, NULL);
    p->cq = grpc_completion_queue_create_for_next(NULL);
    if (!p->cq || pthread_create(&p->thread, NULL, poller_thread, p) != 0) {
        if (p->cq) {
            grpc_completion_queue_shutdown(p->cq);
            grpc_completion_queue_destroy(p->cq);
        }
        pthread_mutex_destroy(&p->mu);
        free(p);
        grpc_shutdown();
        return FERRY_ENOMEM;
    }
    *out = p;
    return 0;
}

void rpc_poller_destroy(rpc_poller *p)
{
    if (!p)
        return;
    /* Every batch on the queue has completed (its owners waited for
     * them): the shutdown event comes at once. */
    grpc_completion_queue_shutdown(p->cq);
    pthread_join(p->thread, NULL);
    grpc_completion_queue_destroy(p->cq);
    while (p->hooks) {
        rpc_hook *h = p->hooks;
        p->hooks = h->next;
        free(h);
    }
    pthread_mutex_destroy(&p->mu);
    free(p);
    grpc_shutdown();
}

int rpc_poller_hook(rpc_poller *p, rpc_poller_hook_fn fn, void *arg)
{
    rpc_hook *h = calloc(1, sizeof *h);
    if (!h)
        return FERRY_ENOMEM;
    h->fn = fn;
    h->arg = arg;
    pthread_mutex_lock(&p->mu);
    h->next = p->hooks;
    p->hooks = h;
    atomic_fetch_add(&p->n_hooks, 1);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

void rpc_poller_unhook(rpc_poller *p, rpc_poller_hook_fn fn, void *arg)
{
    pthread_mutex_lock(&p->mu);
    for (rpc_hook **q = &p->hooks; *q; q = &(*q)->next)
        if ((*q)->fn == fn && (*q)->arg == arg) {
            rpc_hook *h = *q;
            *q = h->next;
            free(h);
            atomic_fetch_sub(&p->n_hooks, 1);
            break;
        }
    pthread_mutex_unlock(&p->mu);
}
