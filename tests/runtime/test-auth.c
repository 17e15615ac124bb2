/* tests/runtime — the cluster token: Ping needs none, every other method
 * is refused without it or with a wrong one, and the refusal is logged. */
#include "rth.h"

#include "ferry.pb-c.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

TestSuite(rt_auth, .init = rth_setup, .fini = rth_teardown, .timeout = 60);

RTH_TEST(rt_auth, ping_needs_no_token)
{
    proto_ping_reply *p = NULL;
    int rc = rth_ping(R.ch_none, &p);
    cr_assert(rc == 0, "Ping without a token: %s", ferry_err_name(rc));
    cr_assert(p->pid == getpid());
    cr_assert(p->rank == 2, "rank %d", p->rank);
    cr_assert_str_eq(p->last_crash, "");
    cr_assert(p->crash_id == 0);
    cr_assert(p->restarts == 0);
    proto_free(p);
    cr_assert(rth_ping(R.ch_wrong, NULL) == 0, "Ping with a wrong token must work too");
}

/* Issues every guarded method on `ch`; each must fail with FERRY_EUNAUTH and
 * a text containing `why`. */
static void all_refused(rpc_channel *ch, const char *why)
{
    size_t len = 0;
    char *bytes = rth_read_file(rth_module("faulty.so"), &len);
    cr_assert(bytes);
    char sha[RT_SHA256_HEX];
    rt_sha256_hex(bytes, len, sha);

    Ferry__LoadModuleRequest load = FERRY__LOAD_MODULE_REQUEST__INIT;
    load.sha256 = sha;
    load.name = "faulty.so";
    Ferry__CallRequest call = FERRY__CALL_REQUEST__INIT;
    call.sha256 = sha;
    call.function = "echo";
    Ferry__StatsRequest stats = FERRY__STATS_REQUEST__INIT;
    Ferry__ShutdownRequest shut = FERRY__SHUTDOWN_REQUEST__INIT;
    struct {
        const char *method;
        const ProtobufCMessage *head;
        const void *payload;
        size_t len;
    } cases[] = {
        {PROTO_METHOD_LOAD_MODULE, &load.base, bytes, len},
        {PROTO_METHOD_CALL, &call.base, "hi", 2},
        {PROTO_METHOD_STATS, &stats.base, NULL, 0},
        {PROTO_METHOD_SHUTDOWN, &shut.base, NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rpc_call c;
        int rc = rth_call(ch, &c, cases[i].method, cases[i].head, cases[i].payload,
                          cases[i].len);
        cr_assert(rc == FERRY_EUNAUTH, "%s: %s (%s), expected EUNAUTH", cases[i].method,
                  ferry_err_name(rc), c.errmsg ? c.errmsg : "");
        cr_assert(c.errmsg && strstr(c.errmsg, why), "%s: text '%s' lacks '%s'",
                  cases[i].method, c.errmsg ? c.errmsg : "", why);
        rpc_call_fini(&c);
    }
    free(bytes);

    /* Nothing happened: no module, no call, and the worker still serves. */
    proto_stats_reply *s = rth_stats(R.ch);
    cr_assert(s->modules_loaded == 0, "a refused LoadModule loaded %u modules",
              s->modules_loaded);
    cr_assert(s->calls_served == 0, "a refused Call was served");
    proto_free(s);
    char err[512];
    cr_assert(rth_invoke(R.ch, sha, "echo", "x", NULL, err, sizeof err) == FERRY_ENOENT,
              "%s", err);

    /* And every method the Worker service declares but Ping, read from the
     * generated descriptor so that a method added later is covered: the
     * token is checked before the request is read, so an empty one will do. */
    const ProtobufCServiceDescriptor *svc = &ferry__worker__descriptor;
    size_t checked = 0;
    for (unsigned i = 0; i < svc->n_methods; i++) {
        char method[128];
        snprintf(method, sizeof method, "/%s/%s", svc->name, svc->methods[i].name);
        if (strcmp(method, PROTO_METHOD_PING) == 0)
            continue;
        rpc_msg_out out = {0};
        rpc_call c;
        memset(&c, 0, sizeof c);
        cr_assert(rpc_call_start(ch, &c, method, &out, RTH_CALL_TIMEOUT, NULL) == 0);
        int rc = rpc_call_wait(&c);
        cr_assert(rc == FERRY_EUNAUTH && c.errmsg && strstr(c.errmsg, why),
                  "%s: %s (%s), expected EUNAUTH: %s", method, ferry_err_name(rc),
                  c.errmsg ? c.errmsg : "", why);
        rpc_call_fini(&c);
        checked++;
    }
    cr_assert(checked == svc->n_methods - 1 && checked >= 7, "%zu methods checked",
              checked);
}

RTH_TEST(rt_auth, every_other_method_without_a_token_is_refused)
{
    all_refused(R.ch_none, "missing cluster token");
}

RTH_TEST(rt_auth, every_other_method_with_a_wrong_token_is_refused)
{
    all_refused(R.ch_wrong, "wrong cluster token");
}

RTH_TEST(rt_auth, a_prefix_of_the_token_is_refused)
{
    rpc_channel *ch;
    char prefix[sizeof RTH_TOKEN];
    memcpy(prefix, RTH_TOKEN, sizeof prefix);
    prefix[sizeof prefix - 2] = '\0';
    rpc_channel_opts o = {.token = prefix};
    cr_assert(rpc_channel_create(R.client, R.target, &o, &ch) == 0);
    Ferry__StatsRequest stats = FERRY__STATS_REQUEST__INIT;
    rpc_call c;
    int rc = rth_call(ch, &c, PROTO_METHOD_STATS, &stats.base, NULL, 0);
    cr_assert(rc == FERRY_EUNAUTH, "%s", ferry_err_name(rc));
    rpc_call_fini(&c);
    rpc_channel_destroy(ch);
}

RTH_TEST(rt_auth, a_refusal_is_logged_with_peer_and_method)
{
    rth_capture_start();
    Ferry__StatsRequest stats = FERRY__STATS_REQUEST__INIT;
    rpc_call c;
    int rc = rth_call(R.ch_wrong, &c, PROTO_METHOD_STATS, &stats.base, NULL, 0);
    char *log = rth_capture_end();
    cr_assert(rc == FERRY_EUNAUTH);
    rpc_call_fini(&c);
    cr_assert(strstr(log, "refused " PROTO_METHOD_STATS " from "), "log: %s", log);
    cr_assert(strstr(log, "127.0.0.1"), "the peer is not named: %s", log);
    cr_assert(strstr(log, "wrong cluster token"), "log: %s", log);
    cr_assert(!strstr(log, RTH_TOKEN), "the log shows the token");
    free(log);
}

RTH_TEST(rt_auth, a_worker_without_a_token_does_not_start)
{
    rt_worker *w = NULL;
    rt_worker_opts o = {.listen = "127.0.0.1:0", .state_dir = R.state};
    cr_assert(rt_worker_create(&o, &w) == FERRY_EINVAL);
    cr_assert(w == NULL);
    o.token = "";
    cr_assert(rt_worker_create(&o, &w) == FERRY_EINVAL);
    o.token = RTH_TOKEN;
    o.state_dir = NULL;
    cr_assert(rt_worker_create(&o, &w) == FERRY_EINVAL);
    o.state_dir = R.state;
    o.listen = "not an address";
    cr_assert(rt_worker_create(&o, &w) == FERRY_EINVAL);
    cr_assert(w == NULL);
}
