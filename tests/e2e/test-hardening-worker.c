/* tests/e2e — what a running task can do to its worker (issue 11, findings
 * 8, 9 and 10): calls that ignore cancellation fill the executor (a later
 * call fails fast naming them, Ping and Stats show them, and past a grace
 * the worker exits to be restarted); a task that forks leaves nothing after
 * `ferry shutdown`; a training session belongs to the submitter that began
 * it. Modules are built here; nothing of the test outlives it (/proc). */
#include "e2e.h"
#include "e2e_plugin.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "ferry.pb-c.h"

TestSuite(e2e_worker, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void load(cluster *cl, const char *path, const char *name, cluster_module *m)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    rewind(f);
    void *bytes = malloc(len);
    cr_assert(bytes && fread(bytes, 1, len, f) == len);
    fclose(f);
    int rc = cluster_load_module(cl, name, bytes, len, m);
    free(bytes);
    cr_assert(rc == 0, "loading %s: %s", name, cluster_error(cl));
}

/* ---- finding 8: calls that ignore cancellation -------------------------- */

Test(e2e_worker, calls_that_ignore_cancellation_are_named_refuse_more_and_wedge_it)
{
    char *so = e2e_build_module(
        "spin", "#include <unistd.h>\n#include <ferry/task.h>\n"
                "static int spin(ferry_ctx_t *c, const ferry_bytes_t *in, ferry_bytes_t *o)\n"
                "{ (void)c, (void)in, (void)o; for (;;) usleep(20000); }\n"
                "static int echo(ferry_ctx_t *c, const ferry_bytes_t *in, ferry_bytes_t *o)\n"
                "{ (void)c; *o = *in; return 0; }\n"
                "FERRY_TASK(.name = \"spin\",\n"
                "           .functions = FERRY_FUNCTIONS({\"spin\", spin}, {\"echo\", echo}));\n");
    /* A worker of its own: two executor threads, a wedge grace of 3 s. */
    char token_file[600], port_file[600], state[600], crash[700];
    snprintf(token_file, sizeof token_file, "%s-token", e2e_home);
    snprintf(port_file, sizeof port_file, "%s-port", e2e_home);
    snprintf(state, sizeof state, "%s-state", e2e_home);
    snprintf(crash, sizeof crash, "%s/crash", state);
    cr_assert(conf_token_create(token_file) == 0);
    pid_t worker = e2e_spawn("worker", "--listen", "127.0.0.1:0", "--token-file", token_file,
                             "--port-file", port_file, "--state-dir", state, "--threads",
                             "2", "--wedge-grace-ms", "3000", NULL);
    char *port = NULL;
    for (int i = 0; i < 1000 && !(port = e2e_slurp(port_file)); i++)
        usleep(10000);
    cr_assert(port, "the worker never wrote its port");
    char target[64], token[CONF_TOKEN_LEN + 1], err[CONF_ERR_LEN];
    snprintf(target, sizeof target, "127.0.0.1:%d", atoi(port));
    free(port);
    cr_assert(conf_token_read(token_file, token, sizeof token, err, sizeof err) == 0, "%s",
              err);
    const char *targets[] = {target};
    cluster_opts o = {.token = token, .call_timeout_ms = 1000, .heartbeat_ms = 200};
    cluster *cl;
    cr_assert(cluster_create(targets, 1, &o, &cl) == 0);
    cr_assert(cluster_wait_ready(cl, 10000) == 0, "%s", cluster_error(cl));
    cluster_module m;
    load(cl, so, "spin.so", &m);
    free(so);

    /* Both slots taken; their deadline passes and they go on. Ping says so
     * once they are cancelled and the oldest has run 2 s (1 s past its
     * deadline, 2 s before the wedge grace ends). */
    ferry_bytes_t out[2] = {{0}};
    cr_assert(cluster_call_any(cl, &m, "spin", 2, NULL, out, 0) != 0);
    const cluster_worker *w = NULL;
    for (double t0 = now_ms(); now_ms() - t0 < 3000; usleep(50 * 1000)) {
        cluster_survey(cl, true, &w);
        if (w[0].ping && w[0].stats && w[0].ping->stuck_calls == 2 &&
            w[0].ping->oldest_call_s >= 2.0)
            break;
    }
    cr_assert(w[0].ping && w[0].stats, "no Ping or Stats: %s", cluster_error(cl));
    cr_assert(w[0].ping->slots == 2 && w[0].ping->busy_slots == 2 &&
                  w[0].ping->stuck_calls == 2 && w[0].ping->oldest_call_s >= 2.0,
              "Ping: %u slots, %u busy, %u stuck, oldest %.1f s", w[0].ping->slots,
              w[0].ping->busy_slots, w[0].ping->stuck_calls, w[0].ping->oldest_call_s);
    cr_assert(e2e_has(w[0].stats->slot_holders, "Call spin.so spin for ") &&
                  e2e_has(w[0].stats->slot_holders, "cancelled"),
              "Stats: '%s'", w[0].stats->slot_holders);
    cr_assert(e2e_has(w[0].stats->oldest_call, "Call spin.so spin"), "'%s'",
              w[0].stats->oldest_call);

    /* A later call fails at once, naming what holds the slots. */
    ferry_bytes_t one = {0};
    double t0 = now_ms();
    int rc = cluster_call(cl, &m, 0, "echo", NULL, &one);
    double took = now_ms() - t0;
    cr_assert(rc != 0, "echo got a slot");
    const char *why = cluster_error(cl);
    /* The worker's own refusal, not the 1 s deadline passing: how fast it
     * comes is not this test's claim, only that it is a refusal. */
    fprintf(stderr, "e2e: the refusal came back in %.0f ms\n", took);
    cr_assert(e2e_has(why, "RESOURCE_EXHAUSTED") && !e2e_has(why, "DEADLINE_EXCEEDED"),
              "%s", why);
    cr_assert(e2e_has(why, "no executor slot: all 2 are held by calls that were cancelled") &&
                  e2e_has(why, "Call spin.so spin for "),
              "%s", why);
    cluster_module_fini(&m);
    cluster_destroy(cl);

    /* Past the grace the worker is wedged: it exits with status 5 and
     * leaves a record naming the calls. */
    int status = 0;
    pid_t gone = 0;
    for (int i = 0; i < 200 && gone == 0; i++) {
        gone = waitpid(worker, &status, WNOHANG);
        if (!gone)
            usleep(50000);
    }
    cr_assert(gone == worker, "the wedged worker still runs");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 5, "status 0x%x", status);
    char *record = e2e_slurp(crash);
    cr_assert(record && e2e_has(record, "wedged: 2 of 2 executor slots") &&
                  e2e_has(record, "Call spin.so spin"),
              "record: %s", record ? record : "(none)");
    free(record);
    e2e_expect_no_descendants(5000);
}

/* The cluster file's wedge_grace_ms reaches the supervisor's workers: a
 * call that outlives its cancellation by that long wedges the worker, which
 * exits and is restarted, and `status` shows why. */
Test(e2e_worker, a_wedged_worker_is_restarted_by_its_supervisor)
{
    char *so = e2e_build_module(
        "stuck", "#include <unistd.h>\n#include <ferry/task.h>\n"
                 "static int spin(ferry_ctx_t *c, const ferry_bytes_t *in, ferry_bytes_t *o)\n"
                 "{ (void)c, (void)in, (void)o; for (;;) usleep(20000); }\n"
                 "static int drive(ferry_driver_t *d)\n"
                 "{ ferry_bytes_t out[1] = {{0}};\n"
                 "  return d->ops->call_all(d, \"spin\", NULL, out); }\n"
                 "FERRY_TASK(.name = \"stuck\", .driver = drive,\n"
                 "           .functions = FERRY_FUNCTIONS({\"spin\", spin}));\n");
    const char *cfg = e2e_write_file("wedge.ini", "[cluster]\nbase_port = 0\nthreads = 1\n"
                                                  "call_timeout_ms = 500\n"
                                                  "wedge_grace_ms = 1500\n");
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "1", "--config", cfg, NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    pid_t worker = e2e_worker_pid_file(0);
    cr_assert(worker > 0);
    e2e_ferry(&r, E2E_CMD_MS, "submit", so, NULL);
    E2E_EXPECT(&r, 1);
    e2e_run_fini(&r);
    free(so);
    if (e2e_wait_new_worker(0, worker, 15000) <= 0) {
        /* Once seen in CI and never again here: what the cluster said. */
        char *sup = e2e_slurp_log("supervisor.log");
        char *log = e2e_slurp_log("worker-0.log");
        cr_assert(false,
                  "the wedged worker (pid %d, %s) was not restarted\nsupervisor.log:\n%s\n"
                  "worker-0.log:\n%s",
                  (int)worker, e2e_alive(worker) ? "still running" : "gone",
                  sup ? sup : "(none)", log ? log : "(none)");
    }
    /* The new run reports the last crash once it answers. */
    bool said = false;
    for (int i = 0; i < 100 && !said; i++) {
        if (i)
            e2e_run_fini(&r), usleep(100000);
        e2e_ferry(&r, E2E_CMD_MS, "status", NULL);
        said = e2e_has(r.out, "wedged");
    }
    cr_assert(said, "status does not say why:\n%s", r.out);
    e2e_run_fini(&r);
    /* Its exit status is named for what the worker meant by it. */
    char *sup = e2e_slurp_log("supervisor.log");
    cr_assert(sup && e2e_has(sup, "status 5 without being asked to stop (wedged:") &&
                  !e2e_has(sup, "a task called exit()"),
              "%s", sup ? sup : "(no supervisor.log)");
    free(sup);
    e2e_shutdown_leaves_nothing();
}

/* ---- finding 9: a task that forks ---------------------------------------- */

/* A task whose `spawn` forks a child that setsid()s away and forks again,
 * both waiting forever; its driver prints each worker's child pid. */
static const char forker_src[] =
        "#include <stdio.h>\n#include <string.h>\n#include <unistd.h>\n"
        "#include <ferry/task.h>\n"
        "static int spawn(ferry_ctx_t *c, const ferry_bytes_t *in, ferry_bytes_t *o)\n"
        "{ (void)in; pid_t pid = fork();\n"
        "  if (pid == 0) { setsid(); if (fork() == 0) for (;;) pause(); for (;;) pause(); }\n"
        "  char *b = c->ops->result(c, o, 32); snprintf(b, 32, \"%d\", (int)pid);\n"
        "  o->len = strlen(b); return 0; }\n"
        "static int drive(ferry_driver_t *d)\n"
        "{ ferry_bytes_t out[64] = {{0}}; int rc = d->ops->call_all(d, \"spawn\", NULL, out);\n"
        "  for (int r = 0; !rc && r < d->world_size; r++) {\n"
        "    d->ops->print(d, \"child %.*s\", (int)out[r].len, (char *)out[r].data);\n"
        "    d->ops->free_bytes(d, &out[r]); }\n"
        "  return rc; }\n"
        "FERRY_TASK(.name = \"forker\", .driver = drive,\n"
        "           .functions = FERRY_FUNCTIONS({\"spawn\", spawn}));\n";

Test(e2e_worker, what_a_task_forks_is_gone_after_shutdown)
{
    e2e_start(2);
    char *so = e2e_build_module("forker", forker_src);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", so, NULL);
    E2E_EXPECT(&r, 0);
    free(so);
    pid_t kids[2] = {0, 0};
    const char *p = r.out;
    for (int i = 0; i < 2; i++) {
        p = strstr(p, "child ");
        cr_assert(p, "no child pid printed:\n%s", r.out);
        kids[i] = (pid_t)atoi(p + 6);
        p += 6;
        cr_assert(kids[i] > 0 && e2e_proc_alive(kids[i]), "child %d is not running",
                  (int)kids[i]);
    }
    e2e_run_fini(&r);
    e2e_shutdown_leaves_nothing();
    for (int i = 0; i < 2; i++)
        cr_assert(!e2e_proc_alive(kids[i]), "child %d survived", (int)kids[i]);
}

/* A worker killed by SIGKILL cannot kill what its tasks forked: the
 * supervisor adopts it and does. */
Test(e2e_worker, what_a_task_forks_is_gone_when_its_worker_is_killed)
{
    e2e_start(1);
    char *so = e2e_build_module("forker", forker_src);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", so, NULL);
    E2E_EXPECT(&r, 0);
    free(so);
    const char *p = strstr(r.out, "child ");
    cr_assert(p, "no child pid printed:\n%s", r.out);
    pid_t kid = (pid_t)atoi(p + 6);
    e2e_run_fini(&r);
    cr_assert(kid > 0 && e2e_proc_alive(kid), "child %d is not running", (int)kid);
    pid_t worker = e2e_worker_pid_file(0);
    cr_assert(worker > 0 && kill(worker, SIGKILL) == 0);
    cr_assert(e2e_wait_new_worker(0, worker, 10000) > 0, "the worker was not restarted");
    /* Gone and reaped: no process, not even a zombie, by that pid. */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d", (int)kid);
    for (int i = 0; i < 100 && access(path, F_OK) == 0; i++)
        usleep(50000);
    cr_assert(access(path, F_OK) != 0, "child %d of the killed worker is still there%s",
              (int)kid, e2e_proc_alive(kid) ? ", running" : " (a zombie)");
    e2e_shutdown_leaves_nothing();
}

/* ---- finding 10: training sessions have an owner -------------------------- */

static int train_call(cluster *cl, const cluster_module *m, const char *fn,
                      ProtobufCMessage *msg)
{
    ferry_bytes_t in = {0}, out = {0};
    in.len = protobuf_c_message_get_packed_size(msg);
    in.data = malloc(in.len ? in.len : 1);
    cr_assert(in.data);
    protobuf_c_message_pack(msg, in.data);
    int rc = cluster_call(cl, m, 0, fn, &in, &out);
    free(in.data);
    cluster_free_bytes(&out);
    return rc;
}

static int begin(cluster *cl, const cluster_module *m, uint64_t session, const char *who,
                 uint32_t idle_ms)
{
    Ferry__TrainBegin b = FERRY__TRAIN_BEGIN__INIT;
    b.session = session;
    b.epochs = 2;
    b.submitter = (char *)who;
    b.idle_ms = idle_ms;
    return train_call(cl, m, "ferry.train.begin", &b.base);
}

static int epoch(cluster *cl, const cluster_module *m, uint64_t session)
{
    Ferry__TrainEpoch e = FERRY__TRAIN_EPOCH__INIT;
    e.session = session;
    return train_call(cl, m, "ferry.train.epoch", &e.base);
}

static int end(cluster *cl, const cluster_module *m, uint64_t session)
{
    Ferry__TrainEnd e = FERRY__TRAIN_END__INIT;
    e.session = session;
    return train_call(cl, m, "ferry.train.end", &e.base);
}

Test(e2e_worker, a_second_begin_between_epochs_is_refused_naming_the_owner)
{
    e2e_start(1);
    cluster *cl = e2e_cluster(NULL, 60000);
    cluster_module m;
    load(cl, e2e_task("linreg"), "linreg.so", &m);
    const uint64_t a = 0xa11ce, b = 0xb0b;
    cr_assert(begin(cl, &m, a, "owner-A (pid 1)", 0) == 0, "%s", cluster_error(cl));
    cr_assert(epoch(cl, &m, a) == 0, "%s", cluster_error(cl));

    /* Between two epochs of A: B is refused, and told whose it is. */
    cr_assert(begin(cl, &m, b, "intruder-B", 0) != 0, "B replaced A's session");
    const char *why = cluster_error(cl);
    cr_assert(e2e_has(why, "session 00000000000a11ce") && e2e_has(why, "owner-A (pid 1)") &&
                  e2e_has(why, "linreg.so") && e2e_has(why, "between epochs"),
              "%s", why);

    cr_assert(epoch(cl, &m, a) == 0, "A lost its session: %s", cluster_error(cl));
    cr_assert(end(cl, &m, a) == 0, "%s", cluster_error(cl));
    cr_assert(begin(cl, &m, b, "intruder-B", 0) == 0, "%s", cluster_error(cl));
    cr_assert(end(cl, &m, b) == 0, "%s", cluster_error(cl));
    cluster_module_fini(&m);

    /* And the command line, as a user meets it: a run after these works. */
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("linreg"), "--epochs", "1", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    e2e_shutdown_leaves_nothing();
}

Test(e2e_worker, a_session_whose_submitter_is_gone_is_reclaimed)
{
    e2e_start(1);
    cluster *cl = e2e_cluster(NULL, 60000);
    cluster_module m;
    load(cl, e2e_task("linreg"), "linreg.so", &m);
    const uint64_t a = 0xa11ce, b = 0xb0b;
    cr_assert(begin(cl, &m, a, "owner-A", 400) == 0, "%s", cluster_error(cl));
    cr_assert(epoch(cl, &m, a) == 0, "%s", cluster_error(cl));
    cr_assert(begin(cl, &m, b, "B", 0) != 0, "B took a live session");
    /* A says nothing for longer than it said it might idle: it is gone. */
    usleep(700 * 1000);
    cr_assert(begin(cl, &m, b, "B", 0) == 0, "%s", cluster_error(cl));
    cr_assert(epoch(cl, &m, a) != 0, "A's session outlived its reclaim");
    cr_assert(e2e_has(cluster_error(cl), "no training session"), "%s", cluster_error(cl));
    cr_assert(epoch(cl, &m, b) == 0, "%s", cluster_error(cl));
    cr_assert(end(cl, &m, b) == 0, "%s", cluster_error(cl));
    cluster_module_fini(&m);
    e2e_shutdown_leaves_nothing();
}

/* As a user meets it: `ferry submit` killed by SIGKILL in the middle of an
 * epoch on two workers. Its calls are cancelled with its connections, so
 * the sessions are reclaimed by the next begin, and another submit trains
 * at once (well within the 30 s an idle session waits). */
Test(e2e_worker, a_submit_killed_mid_epoch_leaves_its_workers_to_the_next)
{
    e2e_start(2);
    pid_t submit = e2e_spawn("submit", e2e_task("mlp"), "--epochs", "20", NULL);
    bool in_epoch = false;
    for (int i = 0; i < 600 && !in_epoch; i++) {
        e2e_run r;
        e2e_ferry(&r, E2E_CMD_MS, "status", "--json", NULL);
        in_epoch = e2e_has(r.out, "\"oldest_call\":\"Call mlp.so ferry.train.epoch\"");
        e2e_run_fini(&r);
        if (!in_epoch)
            usleep(50000);
    }
    cr_assert(in_epoch, "the training never got to an epoch");
    cr_assert(kill(submit, SIGKILL) == 0);
    cr_assert(waitpid(submit, NULL, 0) == submit);
    double t0 = now_ms();
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("linreg"), "--epochs", "1", NULL);
    double took = now_ms() - t0;
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "done: "), "%s", r.out);
    e2e_run_fini(&r);
    fprintf(stderr, "a submit after the killed one trained in %.0f ms\n", took);
    cr_assert(took < 15000, "the next submit took %.0f ms", took);
    e2e_shutdown_leaves_nothing();
}

Test(e2e_worker, a_cli_submit_is_refused_while_another_trains)
{
    e2e_start(1);
    cluster *cl = e2e_cluster(NULL, 60000);
    cluster_module m;
    load(cl, e2e_task("linreg"), "linreg.so", &m);
    cr_assert(begin(cl, &m, 0x5e55, "ferry submit (pid 4242, user ann, host vm)", 0) == 0,
              "%s", cluster_error(cl));
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("linreg"), "--epochs", "1", NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "this worker is training linreg.so for another submitter") &&
                  e2e_has(r.err, "ferry submit (pid 4242, user ann, host vm)"),
              "%s", r.err);
    e2e_run_fini(&r);
    cr_assert(epoch(cl, &m, 0x5e55) == 0, "%s", cluster_error(cl));
    cr_assert(end(cl, &m, 0x5e55) == 0, "%s", cluster_error(cl));
    cluster_module_fini(&m);
    e2e_shutdown_leaves_nothing();
}
