/* Reading an async model back at the end of a run: the shards are pulled
 * over the network, and a caller who hangs up meanwhile (a master killed
 * while it ends the run) frees the worker at once instead of leaving it
 * waiting out the session's timeout for a shard that does not answer. */
#include <stdlib.h>

#include <criterion/criterion.h>

#include "rpc/rpc.h"
#include "tcommon.h"
#include "ttrain.h"

#define SESSION 91
/* Far beyond the suite's timeout: a read that waits for it fails the test. */
#define TIMEOUT_MS 600000

static struct {
    ttrain f;
    bool opened;
    rt_dataset train, test;
    rt_ps_store *store;
    rpc_server *server;
    rt_trainer *t;
    float *host;
} E;

static void teardown(void)
{
    rt_trainer_destroy(E.t);
    rt_ps_store_shutdown(E.store);
    rpc_server_destroy(E.server);
    rt_ps_store_destroy(E.store);
    free(E.host);
    ttrain_free_set(&E.train);
    ttrain_free_set(&E.test);
    if (E.opened)
        ttrain_close(&E.f);
}

TestSuite(train_async_end, .fini = teardown, .timeout = 60);

static bool hung_up(void *arg)
{
    (void)arg;
    return true;
}

Test(train_async_end, reading_the_shards_back_gives_up_when_the_caller_hangs_up)
{
    ttrain_open(&E.f, "linreg");
    E.opened = true;
    cr_assert(rt_linear_make(64, 8, 0.1f, 3, 0, &E.train) == 0);
    cr_assert(rt_linear_make(16, 8, 0.1f, 3, 1, &E.test) == 0);
    cr_assert(rt_ps_store_create(&E.store) == 0);
    rpc_method m[2] = {{PROTO_METHOD_PUSH, rt_ps_push_handler, E.store, 0, 0},
                       {PROTO_METHOD_PULL, rt_ps_pull_handler, E.store, 0, 0}};
    rpc_server_opts so = {.listen = "127.0.0.1:0"};
    int rc = rpc_server_create(&so, m, 2, &E.server);
    cr_assert(rc == 0, "rpc_server_create: %s", ferry_err_name(rc));
    /* Rank 1, which holds shard 1, never comes up: a pull of it is
     * retried until the timeout. */
    char addr[2][32];
    snprintf(addr[0], sizeof addr[0], "127.0.0.1:%d", rpc_server_port(E.server));
    snprintf(addr[1], sizeof addr[1], "127.0.0.1:%d", tcom_free_port());
    const char *peers[2] = {addr[0], addr[1]};
    rt_train_opts o = {.batch = 16,
                       .optim = {.kind = RT_OPT_SGD, .lr = 0.1f},
                       .seed = 5,
                       .rank = 0,
                       .world = 2,
                       .ps_store = E.store,
                       .session = SESSION,
                       .peers = peers,
                       .secret = TTRAIN_SECRET,
                       .timeout_ms = TIMEOUT_MS,
                       .staleness = -1,
                       .train_set = &E.train,
                       .test_set = &E.test};
    char err[512] = "";
    rc = rt_trainer_create(E.f.mod.task->model, E.f.dev, &o, &E.t, err, sizeof err);
    cr_assert(rc == 0, "rt_trainer_create: %s: %s", ferry_err_name(rc), err);
    E.host = calloc(rt_trainer_params_len(E.t), sizeof *E.host);
    cr_assert(E.host);
    rc = rt_trainer_params_polled(E.t, E.host, hung_up, NULL);
    cr_assert(rc == FERRY_ECANCELED, "reading the model back: %s, not ECANCELED",
              ferry_err_name(rc));
}
