/* A master's hold on its training session (TrainHold), against a real
 * worker: parked only for the session it names and with the secret its
 * begin carried, answered when the session ends or the worker shuts down,
 * and, once its caller is gone, the session goes to the next begin at once
 * instead of after its 30 s of idle time. */
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proto/train_spec.h"
#include "runtime/collective/collective.h"
#include "runtime/train/session.h"

#define SECRET_BYTES RT_COMM_SECRET_BYTES

static const uint8_t secret[SECRET_BYTES] = "the run's secret, 32 bytes long";

/* Begins session `id` on worker 0 in single mode (linreg, the workers'
 * default idle time), with the secret above, as `submitter`; the call's
 * result. */
static int begin(uint64_t id, const char *submitter)
{
    proto_train_spec spec;
    proto_train_spec_defaults(&spec);
    spec.epochs = 1;
    spec.mode = "single";
    proto_train_begin_run run = {.session = id,
                                 .submitter = submitter,
                                 .secret = secret,
                                 .secret_len = sizeof secret};
    proto_bytes b;
    cr_assert(proto_train_begin_pack(&spec, false, &run, &b) == 0);
    ferry_bytes_t in = {b.data, b.len}, out = {0};
    int rc = cluster_call(T.cl, &T.mod, 0, "ferry.train.begin", &in, &out);
    proto_bytes_fini(&b);
    cluster_free_bytes(&out);
    return rc;
}

static void one_worker_with_linreg(void)
{
    tc_workers(1);
    tc_cluster(0, 0, 0);
    tc_read_task("linreg.so");
    int rc = cluster_load_module(T.cl, "linreg.so", T.bytes, T.len, &T.mod);
    cr_assert(rc == 0, "cluster_load_module: %s", cluster_error(T.cl));
}

/* A hold of session `id` with `len` bytes of `key`, left open. */
static cluster_open *hold(uint64_t id, const uint8_t *key, size_t len)
{
    proto_train_hold_req h = {.session = id, .secret = {(uint8_t *)key, len}};
    proto_bytes b;
    cr_assert(proto_train_hold_req_pack(&h, &b) == 0);
    cluster_open *c;
    int rc = cluster_open_call(T.cl, 0, PROTO_METHOD_TRAIN_HOLD, b.data, b.len, &c);
    proto_bytes_fini(&b);
    cr_assert(rc == 0, "cluster_open_call: %d", rc);
    return c;
}

static bool ended(void *arg)
{
    return cluster_open_ended(arg, NULL);
}

/* Runs the loop until `c` ends (TC_WAIT_MS at most); its result, or 1 if
 * it is still open. */
static int outcome(cluster_open *c, int64_t ms)
{
    cluster_run_until(T.cl, ms, ended, c);
    int rc = 1;
    cluster_open_ended(c, &rc);
    return rc;
}

static int end_session(uint64_t id)
{
    proto_bytes b;
    cr_assert(proto_train_end_pack(&(proto_train_end){.session = id, .discard = true},
                                   &b) == 0);
    ferry_bytes_t in = {b.data, b.len}, out = {0};
    int rc = cluster_call(T.cl, &T.mod, 0, "ferry.train.end", &in, &out);
    proto_bytes_fini(&b);
    cluster_free_bytes(&out);
    return rc;
}

TC_TEST(train_hold, is_refused_without_the_secret_or_for_a_session_not_running_here)
{
    one_worker_with_linreg();
    cr_assert(begin(41, "test") == 0, "begin: %s", cluster_error(T.cl));
    uint8_t wrong[SECRET_BYTES];
    memcpy(wrong, secret, sizeof wrong);
    wrong[7] ^= 1;

    cluster_open *other = hold(42, secret, sizeof secret);
    cluster_open *bad = hold(41, wrong, sizeof wrong);
    cluster_open *shorter = hold(41, secret, sizeof secret - 1);
    cluster_open *none = hold(41, secret, 0);
    cr_assert_eq(outcome(other, TC_WAIT_MS), FERRY_ENOENT);
    cr_assert_eq(outcome(bad, TC_WAIT_MS), FERRY_EACCES);
    cr_assert_eq(outcome(shorter, TC_WAIT_MS), FERRY_EACCES);
    cr_assert_eq(outcome(none, TC_WAIT_MS), FERRY_EACCES);
    /* Bytes that are not a TrainHoldRequest (a field 1 of a length that
     * runs past the end), and a secret one byte too long. */
    static const uint8_t junk[] = {0x0a, 0x7f, 0x01};
    cluster_open *garbled;
    cr_assert(cluster_open_call(T.cl, 0, PROTO_METHOD_TRAIN_HOLD, junk, sizeof junk,
                                &garbled) == 0);
    cr_assert_eq(outcome(garbled, TC_WAIT_MS), FERRY_EINVAL);
    cluster_close_call(garbled);
    uint8_t longer[SECRET_BYTES + 1];
    memcpy(longer, secret, sizeof secret);
    longer[SECRET_BYTES] = 0;
    cluster_open *toolong = hold(41, longer, sizeof longer);
    cr_assert_eq(outcome(toolong, TC_WAIT_MS), FERRY_EACCES);
    cluster_close_call(toolong);

    /* With the secret it is parked, and a second one is refused as held. */
    cluster_open *good = hold(41, secret, sizeof secret);
    cluster_open *again = hold(41, secret, sizeof secret);
    int first = outcome(good, 300), second = outcome(again, TC_WAIT_MS);
    cr_assert((first == 1 && second == FERRY_EEXIST) ||
                  (first == FERRY_EEXIST && second == 1),
              "one parked, one refused: %d, %d", first, second);
    cluster_open *parked = first == 1 ? good : again;
    cr_assert_eq(outcome(parked, 300), 1, "the hold ended while its session lives");

    /* The session's end answers it. */
    cr_assert(end_session(41) == 0, "end: %s", cluster_error(T.cl));
    cr_assert_eq(outcome(parked, TC_WAIT_MS), 0);
    cluster_open *after = hold(41, secret, sizeof secret);
    cr_assert_eq(outcome(after, TC_WAIT_MS), FERRY_ENOENT);
    cluster_open *all[] = {other, bad, shorter, none, good, again, after};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        cluster_close_call(all[i]);
}

TC_TEST(train_hold, a_session_whose_holder_hung_up_goes_to_the_next_begin_at_once)
{
    one_worker_with_linreg();
    cr_assert(begin(51, "the first submitter") == 0, "begin: %s", cluster_error(T.cl));
    cluster_open *h = hold(51, secret, sizeof secret);
    cr_assert_eq(outcome(h, 300), 1, "the hold was not parked");
    /* Held and idle for less than its 30 s: another submitter is refused. */
    cr_assert_eq(begin(52, "the second submitter"), FERRY_EBUSY);
    cr_assert(strstr(cluster_error(T.cl), "for another submitter"), "%s",
              cluster_error(T.cl));

    /* The holder hangs up: the worker learns it from the call's end on the
     * wire, a moment after the cancel here. */
    double t0 = tc_now_ms();
    cr_assert_eq(cluster_close_call(h), FERRY_ECANCELED);
    int rc;
    while ((rc = begin(52, "the second submitter")) == FERRY_EBUSY &&
           tc_now_ms() - t0 < 5000)
        ;
    cr_assert(rc == 0, "the next begin after %.0f ms: %s", tc_now_ms() - t0,
              cluster_error(T.cl));
    cr_log_info("the next begin took the session %.0f ms after its holder hung up",
                tc_now_ms() - t0);
    cr_assert(end_session(52) == 0, "end: %s", cluster_error(T.cl));
}

TC_TEST(train_hold, a_parked_hold_does_not_keep_its_worker_from_shutting_down)
{
    one_worker_with_linreg();
    cr_assert(begin(61, "test") == 0, "begin: %s", cluster_error(T.cl));
    cluster_open *h = hold(61, secret, sizeof secret);
    cr_assert_eq(outcome(h, 300), 1, "the hold was not parked");
    /* The server waits for every call it has: a hold left parked would
     * hang this destroy for good. */
    rt_worker_destroy(T.w[0], 0);
    T.w[0] = NULL;
    cr_assert_eq(outcome(h, TC_WAIT_MS), FERRY_EUNAVAIL);
    cluster_close_call(h);
}

TC_TEST(train_hold, a_session_never_held_goes_to_the_next_begin_after_the_grace)
{
    /* A master killed after the begin returned and before its hold was
     * parked: the session is never held. Refused at first (a master holds
     * within a round trip), taken once it has been idle for the grace. */
    one_worker_with_linreg();
    cr_assert(begin(61, "a master killed before its hold") == 0, "begin: %s",
              cluster_error(T.cl));
    double t0 = tc_now_ms();
    cr_assert_eq(begin(62, "the next submitter"), FERRY_EBUSY);
    cr_assert(strstr(cluster_error(T.cl), "idle"), "%s", cluster_error(T.cl));
    while (tc_now_ms() - t0 < RT_HOLD_GRACE_MS + 200)
        usleep(100 * 1000);
    cr_assert(begin(62, "the next submitter") == 0,
              "the next begin %.0f ms after the never-held one: %s", tc_now_ms() - t0,
              cluster_error(T.cl));
    cr_assert(RT_HOLD_GRACE_MS < 30000, "the grace is shorter than the idle reclaim");
}
