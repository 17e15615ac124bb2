/* The liveness ping. A worker whose process exists but does not answer
 * (wedged as when its descriptors ran out, SIGSTOPped, spinning with the
 * completion queue stuck) is as gone as a dead one, yet no exit tells the
 * supervisor. So the supervisor pings every worker it runs; one that has not
 * answered for liveness_timeout_ms (cluster file) is killed with SIGKILL,
 * and its exit is then a crash recorded as "unresponsive for N s". Ping
 * needs no token, and a worker answers it on its completion-queue thread,
 * however busy its executor is. Each ping has a third of the timeout: one
 * lost on the way costs a retry, not the worker. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "supervisor_int.h"

/* Pings this often, at most; a shorter timeout pings more often. */
#define TICK_MAX_MS 1000
#define TICK_MIN_MS 100
/* Failed pings, besides the timeout's silence, that kill a worker. */
#define FAILED_PINGS_TO_KILL 2

static uint64_t tick_ms(const supervisor *sv)
{
    int64_t t = sv->o->conf->liveness_timeout_ms / 4;
    return (uint64_t)(t < TICK_MIN_MS ? TICK_MIN_MS : t > TICK_MAX_MS ? TICK_MAX_MS : t);
}

static int64_t ping_deadline_ms(const supervisor *sv)
{
    int64_t t = sv->o->conf->liveness_timeout_ms / 3;
    return t < TICK_MIN_MS ? TICK_MIN_MS : t;
}

static void on_pong(rpc_call *call)
{
    sv_worker *w = call->data;
    w->pinging = false;
    proto_ping_reply *rep = NULL;
    bool answered = false;
    if (call->result == 0 && pw_ping_result(call, &rep) == 0) {
        /* Anything may listen on a port: only our own process counts. */
        answered = w->proc && rep->pid == w->proc->pid;
        if (!answered)
            snprintf(w->ping_error, sizeof w->ping_error, "answered by pid %d, not %d",
                     (int)rep->pid, w->proc ? w->proc->pid : 0);
        proto_free(rep);
    } else {
        snprintf(w->ping_error, sizeof w->ping_error, "%s",
                 call->errmsg ? call->errmsg : ferry_strerror(call->result));
    }
    if (answered && w->running) {
        w->last_answer_ms = uv_now(&w->sv->loop);
        w->ping_failures = 0;
    } else if (!answered) {
        w->ping_failures++;
    }
    rpc_call_fini(call);
}

/* What the pings got since the last answer, for the kill's log line. */
static void describe_silence(const sv_worker *w, char *buf, size_t len)
{
    if (!w->pw)
        snprintf(buf, len, "no ping sent: its port is not known");
    else if (!w->ping_failures)
        snprintf(buf, len, "a ping still waits for its answer");
    else
        snprintf(buf, len, "%u ping(s) failed, the last: %s", w->ping_failures,
                 w->ping_error);
}

static void check(sv_worker *w, uint64_t now)
{
    supervisor *sv = w->sv;
    const home_paths *h = sv->o->home;
    if (!w->port && sv_became_ready(w)) {
        char path[HOME_FILE_MAX];
        long port;
        home_worker_file(h, w->rank, "port", path, sizeof path);
        if (home_read_number(path, 1, 65535, &port))
            w->port = (int)port;
    }
    /* Silence alone may be the supervisor's own: a loop that did not run
     * for the timeout sees the answers that came meanwhile only after this
     * tick. So two pings of the silence must have failed as well (unless
     * none could be sent: the worker never said its port). */
    uint64_t silent = now - w->last_answer_ms;
    bool unanswered = !w->pw || w->ping_failures >= FAILED_PINGS_TO_KILL;
    if (!w->silent_ms && unanswered &&
        silent > (uint64_t)sv->o->conf->liveness_timeout_ms) {
        w->silent_ms = silent;
        char what[320];
        describe_silence(w, what, sizeof what);
        sv_log(sv, "worker %d (pid %d) has not answered a ping for %.1f s (%s): SIGKILL",
               w->rank, w->proc->pid, (double)silent / 1e3, what);
        uv_process_kill(w->proc, SIGKILL);
        return;
    }
    if (w->port && !w->pw) {
        char target[300];
        conf_format_address(target, sizeof target, home_reach_host(w->host), w->port);
        pw_opts po = {.target = target, .rank = w->rank};
        if (pw_create(sv->client, &po, &w->pw) != 0)
            w->pw = NULL;
    }
    if (w->pw && !w->pinging) {
        w->ping.data = w;
        int rc = pw_ping(w->pw, &w->ping, now, ping_deadline_ms(sv), on_pong);
        if (rc == 0) {
            w->pinging = true;
        } else {
            w->ping_failures++;
            snprintf(w->ping_error, sizeof w->ping_error, "cannot send it: %s",
                     ferry_strerror(rc));
        }
    }
}

static void on_tick(uv_timer_t *t)
{
    supervisor *sv = t->data;
    uint64_t now = uv_now(&sv->loop);
    for (size_t i = 0; i < sv->n && !sv->stopping; i++)
        if (sv->w[i].running)
            check(&sv->w[i], now);
}

int sv_live_start(supervisor *sv)
{
    uv_timer_init(&sv->loop, &sv->live_timer);
    sv->live_timer.data = sv;
    if (sv->o->conf->liveness_timeout_ms <= 0)
        return 0;
    int rc = rpc_client_create(&sv->loop, &sv->client);
    if (rc) {
        sv_log(sv, "no liveness pings (%s): a wedged worker will not be restarted",
               ferry_strerror(rc));
        sv->client = NULL;
        return rc;
    }
    uint64_t tick = tick_ms(sv);
    return uv_timer_start(&sv->live_timer, on_tick, tick, tick);
}

void sv_live_spawned(sv_worker *w)
{
    w->last_answer_ms = uv_now(&w->sv->loop);
    w->silent_ms = 0;
    w->ping_failures = 0;
}

void sv_live_stop(supervisor *sv)
{
    uv_timer_stop(&sv->live_timer);
    uv_close((uv_handle_t *)&sv->live_timer, NULL);
    for (size_t i = 0; i < sv->n; i++) {
        /* Cancels a ping in flight; its callback still runs. */
        pw_destroy(sv->w[i].pw);
        sv->w[i].pw = NULL;
    }
    if (sv->client)
        rpc_client_close(sv->client);
    sv->client = NULL;
}
