/* `ferry worker`: where its state and token are, the worker's start, its
 * serving until a stop, and the stop. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <ferry/ferry.h>

#include "config/config.h"
#include "runtime/metrics/metrics.h"
#include "wm_int.h"

static int write_port_file(const char *path, int port)
{
    char text[16];
    int len = snprintf(text, sizeof text, "%d\n", port);
    return base_write_atomic(path, text, (size_t)len, false);
}

/* Tells a supervisor this exit was asked for: any other is a crash. */
static void write_stopped(const char *state_dir)
{
    char path[4096 + 16];
    snprintf(path, sizeof path, "%s/stopped", state_dir);
    base_write_atomic(path, "stopped\n", 8, false);
}

/* The state directory and the token file: as given, or under FERRY_HOME.
 * Returns -1 to go on, else the exit status. */
static int locate(const wm_options *o, int port, char *state_dir, char *token_file,
                  size_t len)
{
    char home[4096] = "";
    if ((!o->state_dir || !o->token_file) && conf_home(home, sizeof home) != 0) {
        fputs("ferry worker: no FERRY_HOME or HOME to keep state in: pass --state-dir "
              "and --token-file\n",
              stderr);
        return EXIT_FAIL;
    }
    if (o->state_dir) {
        snprintf(state_dir, len, "%s", o->state_dir);
    } else {
        char rel[64];
        /* Port 0 is no name: a worker asking for any port gets its own. */
        if (port)
            snprintf(rel, sizeof rel, "workers/%d", port);
        else
            snprintf(rel, sizeof rel, "workers/pid-%ld", (long)getpid());
        conf_home_path(state_dir, len, home, rel);
    }
    if (o->token_file)
        snprintf(token_file, len, "%s", o->token_file);
    else
        conf_home_path(token_file, len, home, "token");
    return -1;
}

/* Signals, the parent's watch, the state and the token: everything before
 * the worker is created. Returns -1 to go on, else the exit status. */
static int prepare(const wm_options *o, int port, char *state_dir, char *token,
                   size_t token_len)
{
    int rc;
    if ((rc = wm_install_stop_signals())) {
        fprintf(stderr, "ferry worker: cannot handle SIGTERM: %s\n", ferry_strerror(rc));
        return EXIT_FAIL;
    }
    /* A worker must not outlive the supervisor that restarts it: SIGTERM
     * when the parent dies; a parent already gone before that was set is
     * seen by getppid(). */
    if (o->parent_pid &&
        (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != (pid_t)o->parent_pid)) {
        fprintf(stderr, "ferry worker: its parent (pid %ld) is gone: exiting\n",
                o->parent_pid);
        return EXIT_FAIL;
    }
    char token_file[4096];
    int status = locate(o, port, state_dir, token_file, sizeof token_file);
    if (status >= 0)
        return status;
    char err[CONF_ERR_LEN] = "";
    rc = conf_token_read(token_file, token, token_len, err, sizeof err);
    if (rc) {
        fprintf(stderr, "ferry worker: %s\n", err[0] ? err : ferry_strerror(rc));
        if (rc == FERRY_ENOENT)
            fputs("ferry worker: `ferry start` creates the token; or pass --token-file\n",
                  stderr);
        return EXIT_FAIL;
    }
    return -1;
}

/* Creates the worker. Returns -1 with *out set, else the exit status. */
static int start(const wm_options *o, int port, const char *state_dir, char *token,
                 rt_worker **out)
{
    int rc;
    /* Asked first so that a taken port gets our one line, not gRPC's log. */
    if (port && rpc_listen_probe(o->listen) == FERRY_EADDRINUSE) {
        fprintf(stderr, "ferry worker: port %d is in use (listening on %s)\n", port,
                o->listen);
        return EXIT_PORT_IN_USE;
    }
    rpc_tune_malloc();
    wm_raise_nofile();
    if ((rc = rt_reap_init()))
        fprintf(stderr,
                "ferry worker: not a subreaper (what tasks fork may outlive "
                "it): %s\n",
                ferry_strerror(rc));
    rt_worker_opts wo = {
        .listen = o->listen,
        .state_dir = state_dir,
        .token = token,
        .rank = o->rank,
        .threads = o->threads,
        .restarts = o->restarts,
        .device = o->device,
        .max_payload = (size_t)o->max_message_bytes,
        .max_module = (size_t)o->max_module_bytes,
        .world_size = o->world_size,
        .rendezvous = o->rendezvous[0] ? o->rendezvous : NULL,
        .data_cache_bytes = o->data_cache_bytes,
    };
    rc = rt_worker_create(&wo, out);
    explicit_bzero(token, CONF_TOKEN_LEN + 1);
    if (rc == FERRY_EADDRINUSE) {
        fprintf(stderr, "ferry worker: port %d is in use (listening on %s)\n", port,
                o->listen);
        return EXIT_PORT_IN_USE;
    }
    if (rc == FERRY_EINVAL) {
        fprintf(stderr, "ferry worker: cannot listen on '%s'\n", o->listen);
        return EXIT_USAGE;
    }
    if (rc == FERRY_ENODEV)
        return EXIT_FAIL; /* rt_worker_create said why */
    if (rc) {
        fprintf(stderr, "ferry worker: cannot start (state in %s): %s\n", state_dir,
                ferry_strerror(rc));
        return EXIT_FAIL;
    }
    return -1;
}

/* The metrics endpoint at `addr` (host:port), said on stderr. */
static int start_metrics(const char *addr, rt_worker *w, const char *who,
                         rt_metrics **out)
{
    char host[256], err[512], where[300];
    int port = 0;
    conf_split_address(addr, host, sizeof host, &port); /* checked when parsed */
    int rc = rt_metrics_start(w, host, port, out, err, sizeof err);
    if (rc)
        fprintf(stderr, "ferry worker: %s\n", err);
    else
        fprintf(stderr, "%s serving metrics at http://%s/metrics\n", who,
                conf_format_address(where, sizeof where, host, rt_metrics_port(*out)));
    return rc;
}

/* Serves until Shutdown or a stop signal, then stops. Returns the exit
 * status. */
static int serve(const wm_options *o, rt_worker *w, const char *state_dir,
                 const char *host)
{
    int rc;
    char crash[4096 + 8];
    snprintf(crash, sizeof crash, "%s/crash", state_dir);
    if ((rc = rt_crash_install(crash)))
        fprintf(stderr, "ferry worker: no crash record (%s): %s\n", crash,
                ferry_strerror(rc));

    int bound = rt_worker_port(w);
    if (o->port_file && (rc = write_port_file(o->port_file, bound))) {
        fprintf(stderr, "ferry worker: cannot write the port file %s: %s\n", o->port_file,
                ferry_strerror(rc));
        rt_worker_destroy(w, 0);
        return EXIT_FAIL;
    }
    /* A worker run by hand (no --rank) belongs to no cluster yet. */
    char who[48] = "ferry worker";
    if (o->rank >= 0)
        snprintf(who, sizeof who, "ferry worker rank %d", o->rank);
    char where[256 + 16];
    fprintf(stderr, "%s listening on %s (pid %ld)\n", who,
            conf_format_address(where, sizeof where, host, bound), (long)getpid());
    if (w->id.last_crash[0])
        fprintf(stderr, "ferry worker: the last run crashed: %s\n", w->id.last_crash);

    rt_metrics *metrics = NULL;
    if (o->metrics && (rc = start_metrics(o->metrics, w, who, &metrics))) {
        rt_worker_destroy(w, 0);
        return EXIT_FAIL;
    }
    static wm_watch wt;
    wm_watch_start(&wt, w, o->wedge_grace_ms);
    /* Ranks past 0 of a launcher's world tell rank 0 where they serve. */
    wm_join join = {.w = w,
                    .who = who,
                    .rendezvous = o->rendezvous,
                    .address = where,
                    .token = w->token,
                    .rank = o->rank,
                    .world_size = o->world_size,
                    .timeout_ms = JOIN_TIMEOUT_MS};
    if (o->rank > 0 && o->rendezvous[0] && wm_join_start(&join) != 0)
        fprintf(stderr, "%s: cannot join the rendezvous at %s: out of threads\n", who,
                o->rendezvous);
    /* A signal that came during start-up left its byte: this returns at
     * once. */
    if (rt_worker_wait_or(w, wm_stop_signal_fd()))
        fprintf(stderr, "%s: stopping on a signal\n", who);
    bool joined = wm_join_stop(&join);
    bool deaf = wm_watch_stop(&wt);
    if (!deaf)
        write_stopped(state_dir);
    wm_stop_deadline(deaf ? 0 : atomic_load(&w->shutdown_grace_ms));
    rt_metrics_stop(metrics); /* its thread reads the worker */
    /* Deaf, nobody can reach the calls in flight: no grace for them. */
    rt_worker_destroy(w, deaf ? 0 : STOP_GRACE_MS);
    int orphans = rt_reap_descendants();
    if (orphans)
        fprintf(stderr, "%s: killed %d process(es) its tasks left\n", who, orphans);
    fprintf(stderr, "%s stopped\n", who);
    return deaf ? EXIT_DEAF : joined ? EXIT_OK : EXIT_FAIL;
}

int rt_worker_main(int argc, char **argv)
{
    wm_options o;
    int status = wm_parse(argc, argv, &o);
    if (status >= 0)
        return status;
    if ((status = wm_from_env(&o, environ)) >= 0)
        return status;

    /* Before any thread is started, so that all of them inherit it. */
    if (o.cpus)
        wm_bind_cpus(o.cpus);
    char host[256];
    int port;
    if (conf_split_address(o.listen, host, sizeof host, &port) != 0)
        return wm_usage_error("--listen: expected host:port or [v6]:port, got '%s'",
                              o.listen);
    if ((status = wm_tls(&o, host)) >= 0)
        return status;
    char state_dir[4096], token[CONF_TOKEN_LEN + 1];
    if ((status = prepare(&o, port, state_dir, token, sizeof token)) >= 0)
        return status;
    rt_worker *w;
    if ((status = start(&o, port, state_dir, token, &w)) >= 0)
        return status;
    return serve(&o, w, state_dir, host);
}
