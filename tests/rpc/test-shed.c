/* tests/rpc — the README's "queued calls are failed when every slot is
 * stuck": once each slot of the handler pool is held by a call that was
 * cancelled and has not returned, rpc_server_shed() fails the calls queued
 * behind them with RESOURCE_EXHAUSTED naming what holds the slots, and a
 * call that arrives then fails the same way at once. While a slot still
 * runs a live call nothing is shed, and once the holders return the pool
 * serves again. */
#include "harness.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <grpc/status.h>

#define HOLD "/test.Shed/Hold"
enum { SLOTS = 2, QUEUED = 3 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool released;
static atomic_int entered;

/* Holds its slot, deaf to cancellation as a stuck task is, until the test
 * lets it go. */
static void hold(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)req, (void)data;
    rpc_srv_describe(sc, "Hold %d", atomic_fetch_add(&entered, 1));
    pthread_mutex_lock(&mu);
    while (!released)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    rpc_msg_out out = {0};
    rpc_srv_reply(sc, &out);
}

static void release_holders(void)
{
    pthread_mutex_lock(&mu);
    released = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* The holders go before the server does, even when a test failed. */
static void teardown(void)
{
    release_holders();
    h_teardown();
}

TestSuite(rpc_shed, .init = h_setup_bare, .fini = teardown, .timeout = 60);

static void start_server(void)
{
    static const rpc_method methods[] = {{HOLD, hold, NULL, 0, 0}};
    rpc_server_opts o = {.listen = "127.0.0.1:0", .handler_threads = SLOTS};
    int rc = rpc_server_create(&o, methods, 1, &H.server);
    cr_assert(rc == 0, "rpc_server_create: %s", ferry_err_name(rc));
    H.port = rpc_server_port(H.server);
    snprintf(H.target, sizeof H.target, "127.0.0.1:%d", H.port);
    h_channel_open(NULL);
}

static void start(rpc_call *c)
{
    rpc_msg_out out = {0};
    memset(c, 0, sizeof *c);
    int rc = rpc_call_start(H.ch, c, HOLD, &out, H_CALL_TIMEOUT_MS, NULL);
    cr_assert(rc == 0, "start: %s", ferry_err_name(rc));
}

/* Waits up to H_WAIT_MS for the pool to show busy/stuck/queued (-1: any). */
static rpc_slots_info wait_pool(int busy, int stuck, int queued)
{
    rpc_slots_info si;
    for (int waited = 0;; waited += 2) {
        rpc_server_slots(H.server, &si);
        if ((busy < 0 || si.busy == busy) && (stuck < 0 || si.stuck == stuck) &&
            (queued < 0 || si.queued == queued))
            return si;
        cr_assert(waited < H_WAIT_MS,
                  "the pool shows %d busy, %d stuck, %d queued; wanted %d, %d, %d", si.busy,
                  si.stuck, si.queued, busy, stuck, queued);
        usleep(2000);
    }
}

static void expect_shed(rpc_call *c, const char *what)
{
    int rc = rpc_call_wait(c);
    /* RESOURCE_EXHAUSTED on the wire, which a client reads as EMSGSIZE. */
    cr_assert(rc == rpc_status_to_err(GRPC_STATUS_RESOURCE_EXHAUSTED),
              "%s: %s (%s), expected RESOURCE_EXHAUSTED", what, ferry_err_name(rc),
              c->errmsg ? c->errmsg : "");
    cr_assert(strstr(c->errmsg, "RESOURCE_EXHAUSTED") &&
                  strstr(c->errmsg, "no executor slot: all 2 are held by calls that were "
                                    "cancelled and have not returned") &&
                  strstr(c->errmsg, "Hold 0 for ") && strstr(c->errmsg, "Hold 1 for ") &&
                  strstr(c->errmsg, "cancelled"),
              "%s: %s", what, c->errmsg);
}

H_TEST(rpc_shed, calls_queued_behind_stuck_slots_are_failed_naming_the_holders)
{
    start_server();
    static rpc_call holders[SLOTS], queued[QUEUED], late;
    for (int i = 0; i < SLOTS; i++)
        start(&holders[i]);
    wait_pool(SLOTS, 0, 0);
    for (int i = 0; i < QUEUED; i++)
        start(&queued[i]);
    wait_pool(SLOTS, 0, QUEUED);

    /* Busy with live calls: nothing to shed. */
    cr_assert(rpc_server_shed(H.server) == 0, "shed calls behind live ones");
    wait_pool(SLOTS, 0, QUEUED);

    /* Their callers give up; the handlers go on. */
    for (int i = 0; i < SLOTS; i++) {
        rpc_call_cancel(&holders[i]);
        cr_assert(rpc_call_wait(&holders[i]) == FERRY_ECANCELED);
        rpc_call_fini(&holders[i]);
    }
    wait_pool(SLOTS, SLOTS, QUEUED);

    cr_assert(rpc_server_shed(H.server) == QUEUED, "the queued calls were not all shed");
    for (int i = 0; i < QUEUED; i++) {
        expect_shed(&queued[i], "a queued call");
        rpc_call_fini(&queued[i]);
    }
    wait_pool(SLOTS, SLOTS, 0);

    /* One that comes now is not queued to wait for them. */
    start(&late);
    expect_shed(&late, "a call after the shedding");
    rpc_call_fini(&late);
    cr_assert(atomic_load(&entered) == SLOTS, "%d handlers ran", atomic_load(&entered));

    /* The holders return: the pool serves again. */
    release_holders();
    wait_pool(0, 0, 0);
    start(&late);
    int rc = rpc_call_wait(&late);
    cr_assert(rc == 0, "after the holders returned: %s: %s", ferry_err_name(rc),
              late.errmsg ? late.errmsg : "");
    rpc_call_fini(&late);
}
