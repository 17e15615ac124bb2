/* `ferry shutdown`: every worker finishes or cancels its calls and exits,
 * the supervisor follows, nothing of the cluster is left running, and its
 * state is removed (logs stay). Harmless when nothing runs. */
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "cli.h"

static const char usage[] =
    "usage: ferry shutdown [--grace-ms MS]\n"
    "\n"
    "Stops every worker of the cluster running under $FERRY_HOME, then its\n"
    "supervisor, and removes the cluster's state (the logs stay in\n"
    "$FERRY_HOME/logs). Calls still running get the grace period, then are\n"
    "cancelled. Workers an earlier cluster left running (its supervisor\n"
    "died) are stopped too, found by the pids it recorded. Running it when\n"
    "no cluster runs is harmless.\n"
    "\n"
    "options:\n"
    "      --grace-ms MS  time calls in flight get before they are cancelled\n"
    "                     (default: the cluster's shutdown_grace_ms, "
    "5000)\n" CLI_REMOTE_HELP "  -h, --help         this text\n"
    "  -V, --version      ferry's version\n";

static void clean_state(const home_paths *h, const conf_cluster *conf)
{
    home_forget_cluster(h);
    /* A token file the config named is the user's; the generated one is
     * the cluster's and dies with it. */
    if (!conf || !conf->token_file || strcmp(conf->token_file, h->token) == 0)
        unlink(h->token);
}

/* How long the supervisor gets to exit on its own: it exits once its
 * workers have (a Slurm step's daemon, once the step has); one with none
 * waits for a signal. */
static double supervisor_wait(const home_paths *h, size_t n_local, long grace)
{
    return n_local || cli_slurm_step_running(h) ? (double)grace + 3000 : 0;
}

/* `ferry shutdown --rendezvous`: Shutdown to every worker of the world. */
static int remote_shutdown(long grace_ms)
{
    home_paths h;
    cli_running r;
    if (cli_home_init(&h, "shutdown") || cli_remote_open(&r, &h, "shutdown"))
        return CLI_FAIL;
    size_t n = cluster_size(r.cl);
    int rc = cluster_shutdown_all(r.cl, (uint32_t)(grace_ms >= 0 ? grace_ms : 5000));
    if (rc)
        cli_err("shutdown", "%s", cluster_error(r.cl));
    else
        printf("%zu worker(s) stopped (the world of the rendezvous at %s)\n", n,
               cli_remote_address());
    cli_running_close(&r);
    return rc ? CLI_FAIL : CLI_OK;
}

int cli_shutdown(int argc, char **argv)
{
    static const struct option opts[] = {{"grace-ms", required_argument, NULL, 'g'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    long grace = -1;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'g') {
            if (!base_parse_long(optarg, 0, 3600000, &grace)) {
                cli_err("shutdown",
                        "--grace-ms: expected milliseconds 0..3600000, got '%s'", optarg);
                return CLI_USAGE;
            }
        } else if (c == 'h') {
            fputs(usage, stdout);
            return CLI_OK;
        } else {
            fputs(usage, stderr);
            return CLI_USAGE;
        }
    }
    if (optind < argc) {
        cli_err("shutdown", "unexpected argument '%s'", argv[optind]);
        return CLI_USAGE;
    }
    if (cli_remote_given())
        return remote_shutdown(grace);
    home_paths h;
    if (cli_home_init(&h, "shutdown"))
        return CLI_FAIL;
    cli_running r;
    if (cli_running_open(&r, &h, "shutdown", true, true) != 0) {
        if (conf_lock_held(h.dir)) {
            /* A `ferry start` that died before it wrote the state: its
             * supervisor wrote its own pid first thing. */
            long sup = 0;
            home_read_number(h.supervisor_pid, 1, INT32_MAX, &sup);
            if (!cli_stop_supervisor(&h, (pid_t)sup, 0)) {
                cli_err("shutdown",
                        "a cluster holds the lock in %s, its state is missing and its "
                        "supervisor (pid %ld) could not be stopped",
                        h.dir, sup);
                return CLI_FAIL;
            }
            clean_state(&h, NULL);
            fprintf(stderr,
                    "ferry shutdown: stopped a cluster whose state was missing\n");
            return CLI_OK;
        }
        /* No state, no supervisor: workers it left may still run. */
        int ranks[CONF_MAX_WORKERS];
        pid_t left[CONF_MAX_WORKERS];
        size_t k = cli_leftovers(&h, ranks, left, CONF_MAX_WORKERS);
        if (k) {
            char list[2048];
            cli_leftovers_list(ranks, left, k, list, sizeof list);
            fprintf(stderr,
                    "ferry shutdown: stopping workers an earlier cluster left: %s\n",
                    list);
            if (cli_leftovers_stop(left, k, (double)(grace >= 0 ? grace : 5000)) < k) {
                cli_err("shutdown", "some of them could not be stopped");
                return CLI_FAIL;
            }
        }
        clean_state(&h, NULL);
        fprintf(stderr, "ferry shutdown: no cluster is running under FERRY_HOME=%s\n",
                h.dir);
        return CLI_OK;
    }
    if (grace < 0)
        grace = r.conf.shutdown_grace_ms;

    /* The workers this host's supervisor started, by the pids it recorded
     * (never a pid a Ping names: anything may answer on a port), to make
     * sure they are gone at the end. */
    size_t n = cluster_size(r.cl), n_local = 0;
    pid_t pids[n ? n : 1];
    for (size_t i = 0; i < n; i++) {
        char path[CLI_FILE_MAX], dir[CLI_FILE_MAX];
        long pid = 0;
        home_worker_file(&h, (int)i, "pid", path, sizeof path);
        home_worker_dir(&h, (int)i, dir, sizeof dir);
        bool ours = r.conf.workers[i].local && !r.conf.workers[i].attach;
        n_local += ours;
        pids[i] = ours && home_read_number(path, 1, INT32_MAX, &pid) &&
                          home_is_worker_of((pid_t)pid, dir)
                      ? (pid_t)pid
                      : 0;
    }

    int status = CLI_OK;
    /* Before the workers go: a submit they fail under must find it. */
    cli_shutdown_mark(&h);
    if (cluster_shutdown_all(r.cl, (uint32_t)grace))
        fprintf(stderr, "ferry shutdown: %s; stopping the rest by signal\n",
                cluster_error(r.cl));
    pid_t sup = r.conf.supervisor_pid;
    bool gone = cli_stop_supervisor(&h, sup, supervisor_wait(&h, n_local, grace));
    for (size_t i = 0; i < n; i++) {
        double end = base_mono_ms() + 2000;
        while (home_pid_alive(pids[i]) && base_mono_ms() < end)
            usleep(10000);
        if (home_pid_alive(pids[i])) {
            fprintf(stderr, "ferry shutdown: worker %zu (pid %d) still runs: SIGKILL\n",
                    i, (int)pids[i]);
            kill(pids[i], SIGKILL);
        }
    }
    if (!gone) {
        cli_err("shutdown", "the supervisor (pid %d) did not exit", (int)sup);
        status = CLI_FAIL;
    } else {
        clean_state(&h, &r.conf);
        printf("%zu worker(s) stopped\n", n);
    }
    cli_running_close(&r);
    return status;
}
