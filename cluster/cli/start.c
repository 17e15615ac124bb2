/* `ferry start N`: a token, a supervisor that runs the local workers, and a
 * wait until every worker (local or listed remote) answers Ping. Ctrl-C,
 * SIGTERM or SIGHUP while it waits stops what it started. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "cli.h"
#include "cluster/supervisor/supervisor.h"
#include "rpc/rpc.h"
#include "runtime/device/device.h"

static const char usage[] =
    "usage: ferry start [N] [options]\n"
    "       ferry start --add K [--timeout-ms MS]\n"
    "\n"
    "Starts N local worker daemons (or the workers a config file lists), waits\n"
    "until every one answers, prints one line per worker and exits. A supervisor\n"
    "stays behind: it restarts a worker that crashes, exits unasked or stops\n"
    "answering, and the workers exit if it dies. Stop it all with\n"
    "`ferry shutdown`. Interrupted (Ctrl-C, SIGTERM), start stops what it\n"
    "started. N is at most 256 (a cluster's most workers).\n"
    "\n"
    "options:\n"
    "  -c, --config FILE     cluster file (INI): workers, timeouts, token file,\n"
    "                        liveness timeout, restart back-off, message and\n"
    "                        module limits, log rotation, the wedge grace (see\n"
    "                        the README)\n"
    "  -p, --base-port P     first worker's port; worker i listens on P+i\n"
    "                        (default 7100; 0: each worker picks a free port)\n"
    "  -l, --listen HOST     address local workers listen on (default 127.0.0.1)\n"
    "  -t, --threads N       executor threads per worker (default: 2 per core)\n"
    "  -d, --device DEV      what local workers compute on: cpu, cuda, cuda:N or\n"
    "                        auto (default: auto: a GPU when one is visible)\n"
    "      --timeout-ms MS   give up when the workers do not answer in time\n"
    "                        (default 10000)\n"
    "      --bind-to WHAT    none (default, as torchrun): the scheduler places\n"
    "                        the workers; core: each local worker runs on its\n"
    "                        own share of the CPUs start may use, as mpirun\n"
    "                        binds ranks (round robin when workers outnumber\n"
    "                        CPUs): faster, but a worker whose CPUs stall\n"
    "                        cannot move\n"
    "      --slurm           inside a Slurm allocation (sbatch, salloc): one\n"
    "                        worker a task of the allocation (N: that many),\n"
    "                        started with srun on its node's address; they end\n"
    "                        with the job. FERRY_HOME must be on a disk every\n"
    "                        node sees\n"
    "      --attach N        wait for N workers an engine started with\n"
    "                        `ferry worker --from-env` (mpirun) to record where\n"
    "                        they listen in FERRY_HOME, then run them as a cluster\n"
    "      --metrics-port P  worker i serves Prometheus metrics at\n"
    "                        http://HOST:P+i/metrics, HOST the one workers\n"
    "                        listen on (default 0: none)\n"
    "      --tls-cert FILE   TLS on every connection (workers, peers, the\n"
    "                        commands that follow): the certificate each worker\n"
    "                        and this host's commands show (PEM)\n"
    "      --tls-key FILE    its private key (PEM)\n"
    "      --tls-ca FILE     the CA that signed the certificates: workers take\n"
    "                        only clients that show one it signed (mutual TLS)\n"
    "      --insecure        workers listen off loopback in plain text without\n"
    "                        the warning\n"
    "      --add K           K more local workers for the cluster that runs\n"
    "                        under FERRY_HOME, with its settings; each picks a\n"
    "                        free port. A sync training with --min-workers and\n"
    "                        --checkpoint-dir takes them in at its next\n"
    "                        checkpoint\n"
    "  -h, --help            this text\n"
    "  -V, --version         ferry's version\n"
    "\n"
    "The commands that follow under the same FERRY_HOME (status, submit,\n"
    "shutdown, ...) use the TLS files start was given.\n"
    "\n"
    "Environment: FERRY_HOME (default ~/.ferry) holds the cluster's state, logs\n"
    "and token.\n";

/* The signal that interrupted start; 0: none. */
static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
    interrupted = sig;
}

static void set_interrupts(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Ctrl-C, SIGTERM or a hang-up while start waits must not leave a
 * supervisor and its workers behind: the handlers only note the signal and
 * every wait checks it. No SA_RESTART: a sleep ends at once. */
static void catch_interrupts(void)
{
    set_interrupts(on_interrupt);
}

/* The child must not keep start's handlers: the supervisor takes its own. */
static void default_interrupts(void)
{
    set_interrupts(SIG_DFL);
}

static bool say_interrupted(void)
{
    if (!interrupted)
        return false;
    cli_err("start", "interrupted by SIG%s: stopping what it started",
            sigabbrev_np(interrupted));
    return true;
}

typedef struct start_args {
    long n; /* -1: not given */
    const char *config;
    long base_port; /* -1: not given */
    const char *listen;
    long threads;
    long timeout_ms;
    const char *device;
    bool bind_cores; /* --bind-to core */
    long metrics_port; /* -1: not given */
    bool slurm;        /* --slurm */
    long attach;       /* --attach N; -1: not given */
    const char *tls[3]; /* --tls-cert, --tls-key, --tls-ca; NULL: not given */
    bool insecure;
    long add; /* --add K; -1: not given */
} start_args;

/* Workers an engine starts say where they are: options that place them
 * do not apply. */
static bool engine_mixed(const start_args *a)
{
    if (!(a->slurm || a->attach > 0) ||
        !(a->config || a->listen || a->base_port >= 0 || (a->slurm && a->attach > 0)))
        return false;
    cli_err("start", "--slurm and --attach take no --config, --listen or --base-port, "
                     "nor each other: the workers say where they are");
    return true;
}

/* Added workers run as the cluster's first ones do: nothing else applies. */
static bool add_mixed(const start_args *a)
{
    if (a->add < 0 ||
        !(a->n >= 0 || a->config || a->listen || a->base_port >= 0 || a->threads >= 0 ||
          a->device || a->bind_cores || a->metrics_port >= 0 || a->slurm ||
          a->attach > 0 || a->tls[0] || a->tls[1] || a->tls[2] || a->insecure))
        return false;
    cli_err("start", "--add K takes only --timeout-ms: the added workers run with the "
                     "running cluster's settings");
    return true;
}

/* "-1" is a number given as N, not an option: says so. */
static bool negative_n(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        long ignored;
        if (argv[i][0] == '-' && base_parse_long(argv[i], LONG_MIN, -1, &ignored) &&
            (i == 1 || argv[i - 1][0] != '-' || strchr(argv[i - 1], '='))) {
            cli_err("start", "N: expected a number of workers 1..%d, got '%s'",
                    CONF_MAX_WORKERS, argv[i]);
            return true;
        }
    }
    return false;
}

/* N, the operand after the options (optind), and nothing after it. */
static int parse_n(int argc, char **argv, start_args *a)
{
    if (optind < argc && !base_parse_long(argv[optind++], 1, CONF_MAX_WORKERS, &a->n)) {
        long big;
        if (base_parse_long(argv[optind - 1], CONF_MAX_WORKERS + 1, LONG_MAX, &big))
            cli_err("start", "N: %s workers is over the cap: a cluster has at most %d",
                    argv[optind - 1], CONF_MAX_WORKERS);
        else
            cli_err("start", "N: expected a number of workers 1..%d, got '%s'",
                    CONF_MAX_WORKERS, argv[optind - 1]);
        return CLI_USAGE;
    }
    if (optind < argc) {
        cli_err("start", "unexpected argument '%s'", argv[optind]);
        return CLI_USAGE;
    }
    return 0;
}

static int parse(int argc, char **argv, start_args *a)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"base-port", required_argument, NULL, 'p'},
        {"listen", required_argument, NULL, 'l'},
        {"threads", required_argument, NULL, 't'},
        {"device", required_argument, NULL, 'd'},
        {"timeout-ms", required_argument, NULL, 'T'},
        {"bind-to", required_argument, NULL, 'B'},
        {"metrics-port", required_argument, NULL, 'M'},
        {"slurm", no_argument, NULL, 'S'},
        {"attach", required_argument, NULL, 'A'},
        {"tls-cert", required_argument, NULL, 'C'},
        {"tls-key", required_argument, NULL, 'K'},
        {"tls-ca", required_argument, NULL, 'Z'},
        {"insecure", no_argument, NULL, 'I'},
        {"add", required_argument, NULL, 'a'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *a = (start_args){.n = -1,
                      .base_port = -1,
                      .threads = -1,
                      .timeout_ms = -1,
                      .metrics_port = -1,
                      .attach = -1,
                      .add = -1};
    if (negative_n(argc, argv))
        return CLI_USAGE;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "c:p:l:t:d:h", opts, NULL)) != -1) {
        const char *bad = NULL, *name = "";
        switch (c) {
        case 'c':
            a->config = optarg;
            break;
        case 'p':
            name = "--base-port";
            if (!base_parse_long(optarg, 0, 65535, &a->base_port))
                bad = "a port 0..65535";
            break;
        case 'l':
            a->listen = optarg;
            break;
        case 't':
            name = "--threads";
            if (!base_parse_long(optarg, 0, 1024, &a->threads))
                bad = "0..1024";
            break;
        case 'd':
            name = "--device";
            if (!rt_device_name_ok(optarg))
                bad = "cpu, cuda, cuda:N or auto";
            a->device = optarg;
            break;
        case 'T':
            name = "--timeout-ms";
            if (!base_parse_long(optarg, 1, 86400000, &a->timeout_ms))
                bad = "milliseconds >= 1";
            break;
        case 'M':
            name = "--metrics-port";
            if (!base_parse_long(optarg, 0, 65535, &a->metrics_port))
                bad = "a port 0..65535";
            break;
        case 'B':
            name = "--bind-to";
            if (strcmp(optarg, "core") != 0 && strcmp(optarg, "none") != 0)
                bad = "core or none";
            a->bind_cores = strcmp(optarg, "core") == 0;
            break;
        case 'S':
            a->slurm = true;
            break;
        case 'A':
            name = "--attach";
            if (!base_parse_long(optarg, 1, CONF_MAX_WORKERS, &a->attach))
                bad = "a number of workers 1..256";
            break;
        case 'C':
        case 'K':
        case 'Z':
            a->tls[c == 'C' ? 0 : c == 'K' ? 1 : 2] = optarg;
            break;
        case 'I':
            a->insecure = true;
            break;
        case 'a':
            name = "--add";
            if (!base_parse_long(optarg, 1, CONF_MAX_WORKERS, &a->add))
                bad = "a number of workers 1..256";
            break;
        case 'h':
            fputs(usage, stdout);
            return -1;
        default:
            fputs(usage, stderr);
            return CLI_USAGE;
        }
        if (bad) {
            cli_err("start", "%s: expected %s, got '%s'", name, bad, optarg);
            return CLI_USAGE;
        }
    }
    if (parse_n(argc, argv, a))
        return CLI_USAGE;
    if (engine_mixed(a) || add_mixed(a))
        return CLI_USAGE;
    if (a->n < 0 && !a->config && !a->slurm && a->attach < 0 && a->add < 0) {
        cli_err("start", "how many workers? `ferry start N` (or --config FILE)");
        return CLI_USAGE;
    }
    return 0;
}

/* Reads the small text file at path into buf; false if absent or empty. */
static bool read_text(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return n > 0;
}

/* Fills conf with the workers: the config file's, or N on this host. */
static int plan_workers(conf_cluster *conf, const start_args *a, sv_local **local,
                        size_t *n_local)
{
    bool generated = conf->n_workers == 0;
    if (generated && a->n < 0) {
        cli_err("start",
                "%s lists no workers: add a [workers] section with `worker = host:port` "
                "lines, or give N",
                a->config);
        return CLI_USAGE;
    }
    if (!generated) {
        char err[CONF_ERR_LEN];
        if (conf_check_aliases(conf, a->config, err, sizeof err)) {
            cli_err("start", "%s", err);
            return CLI_USAGE;
        }
    }
    if (generated) {
        for (long i = 0; i < a->n; i++) {
            /* A placeholder port for a worker that picks its own: replaced
             * by the real one before the state is written. */
            int port = conf->base_port ? conf->base_port + (int)i : 1;
            if (port > 65535) {
                cli_err("start", "ports %d..%ld do not fit below 65536", conf->base_port,
                        conf->base_port + a->n - 1);
                return CLI_USAGE;
            }
            char addr[300], err[CONF_ERR_LEN];
            conf_format_address(addr, sizeof addr, home_reach_host(conf->listen), port);
            if (conf_add_worker(conf, addr, err, sizeof err)) {
                cli_err("start", "--listen %s: %s", conf->listen, err);
                return CLI_USAGE;
            }
            /* Started here whatever address it listens on. */
            conf->workers[i].local = true;
        }
    } else if (a->n >= 0 && (size_t)a->n != conf->n_workers) {
        cli_err("start", "%s lists %zu workers but N is %ld", a->config, conf->n_workers,
                a->n);
        return CLI_USAGE;
    } else if (a->listen || a->base_port >= 0) {
        cli_err("start", "%s lists its workers: --listen and --base-port do not apply",
                a->config);
        return CLI_USAGE;
    }
    *local = calloc(conf->n_workers, sizeof **local);
    if (!*local)
        return CLI_FAIL;
    *n_local = 0;
    for (size_t i = 0; i < conf->n_workers; i++) {
        /* Workers elsewhere, or run by someone else, are only waited for. */
        if (!conf->workers[i].local || conf->workers[i].attach)
            continue;
        sv_local *l = &(*local)[(*n_local)++];
        l->rank = (int)i;
        snprintf(l->host, sizeof l->host, "%s",
                 generated ? conf->listen : conf->workers[i].host);
        l->port = generated && !conf->base_port ? 0 : conf->workers[i].port;
    }
    return 0;
}

/* Says which port is taken, before anything starts. */
static int check_ports(const sv_local *local, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!local[i].port)
            continue;
        char addr[300];
        conf_format_address(addr, sizeof addr, local[i].host, local[i].port);
        int rc = rpc_listen_probe(addr);
        if (rc == FERRY_EADDRINUSE) {
            cli_err("start",
                    "port %d (worker %d, %s) is in use: free it, or choose other ports "
                    "with --base-port",
                    local[i].port, local[i].rank, addr);
            return CLI_FAIL;
        }
        if (rc) {
            cli_err("start", "cannot listen on %s (worker %d): %s", addr, local[i].rank,
                    ferry_strerror(rc));
            return CLI_FAIL;
        }
    }
    return 0;
}

/* Old state from a cluster that did not shut down cleanly: its pids, ports,
 * crash records and crash-loop counts must never pass for this cluster's. */
static void clear_state(const home_paths *h)
{
    home_forget_cluster(h);
}

/* Workers whose supervisor died without them (see leftovers.c): named and
 * stopped before anything new starts. */
static int stop_leftovers(const home_paths *h)
{
    int ranks[CONF_MAX_WORKERS];
    pid_t pids[CONF_MAX_WORKERS];
    size_t n = cli_leftovers(h, ranks, pids, CONF_MAX_WORKERS);
    if (!n)
        return 0;
    char list[2048];
    cli_leftovers_list(ranks, pids, n, list, sizeof list);
    fprintf(stderr,
            "ferry start: an earlier cluster's supervisor is gone but %zu of its workers "
            "still run: %s; stopping them\n",
            n, list);
    size_t gone = cli_leftovers_stop(pids, n, 3000);
    if (gone < n) {
        cli_err("start", "%zu of them could not be stopped: see `ferry status`",
                n - gone);
        return CLI_FAIL;
    }
    return 0;
}

static pid_t fork_supervisor(const sv_opts *so)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* The daemon: its own session, so a terminal's hang-up or Ctrl-C does not
     * reach it, and no descriptor of the caller's (a pipe a test reads to
     * its end) kept open. */
    default_interrupts();
    char log[CLI_FILE_MAX];
    snprintf(log, sizeof log, "%s/supervisor.log", so->home->logs);
    cli_daemon_io(log);
    _exit(sv_supervise(so));
}

/* Whether the supervisor has given up: it wrote why, or exited (then it is
 * reaped here and *pid becomes 0: the number may belong to another process
 * soon). */
static bool supervisor_failed(const home_paths *h, pid_t *pid, char *why, size_t len)
{
    if (read_text(h->start_error, why, len))
        return true;
    if (*pid > 0 && waitpid(*pid, NULL, WNOHANG) == *pid) {
        *pid = 0;
        if (!read_text(h->start_error, why, len))
            snprintf(why, len, "the supervisor exited (see %s/supervisor.log)", h->logs);
        return true;
    }
    return false;
}

/* What a start holds while it runs, released by cli_start whatever the
 * outcome. */
typedef struct starting {
    start_args a;
    home_paths h;
    conf_cluster conf;
    sv_local *local;
    size_t n_local;
    int lock;
    pid_t sup;
    bool forked;
    cluster *cl;
    char token[CONF_TOKEN_LEN + 1];
    char *addrs; /* --slurm: the nodes' addresses */
} starting;

/* What ends start's waits early: an interrupt, or a supervisor that gave up. */
static int gave_up(void *data)
{
    starting *s = data;
    if (say_interrupted())
        return FERRY_ECANCELED;
    char why[CLI_FILE_MAX + 128];
    if (supervisor_failed(&s->h, &s->sup, why, sizeof why)) {
        cli_err("start", "%s", why);
        return FERRY_EUNAVAIL;
    }
    return 0;
}

/* The TLS files: the options' over the file's, absolute (the supervisor's
 * workers and later commands run elsewhere), read once here so that a
 * mistake stops start before anything runs. Returns 0 or the exit status. */
static int configure_tls(conf_cluster *conf, const start_args *a)
{
    char **field[3] = {&conf->tls_cert, &conf->tls_key, &conf->tls_ca};
    static const char *const opt[3] = {"--tls-cert", "--tls-key", "--tls-ca"};
    for (size_t i = 0; i < 3; i++) {
        if (!a->tls[i])
            continue;
        char *abs = realpath(a->tls[i], NULL);
        if (!abs) {
            cli_err("start", "%s %s: %s", opt[i], a->tls[i], strerror(errno));
            return CLI_USAGE;
        }
        free(*field[i]);
        *field[i] = abs;
    }
    if (a->insecure)
        conf->insecure = 1;
    if (conf->tls_key && !conf->tls_cert) {
        cli_err("start", "--tls-key needs --tls-cert (or tls_cert in the cluster file)");
        return CLI_USAGE;
    }
    if (conf->tls_cert && conf->insecure) {
        cli_err("start", "--insecure and TLS contradict each other: give one");
        return CLI_USAGE;
    }
    char err[600];
    if (home_tls_use(conf, err, sizeof err)) {
        cli_err("start", "%s", err);
        return CLI_USAGE;
    }
    return 0;
}

/* The cluster's configuration: the file's, the options over it, and the
 * workers it plans. Returns 0 or the exit status. */
static int configure(starting *s)
{
    const start_args *a = &s->a;
    conf_cluster *conf = &s->conf;
    char err[CONF_ERR_LEN] = "";
    int rc;
    if (a->config && (rc = conf_load(conf, a->config, err, sizeof err))) {
        cli_err("start", "%s", err[0] ? err : ferry_strerror(rc));
        return CLI_USAGE;
    }
    if (a->base_port >= 0)
        conf->base_port = (int)a->base_port;
    if (a->listen) {
        free(conf->listen);
        conf->listen = strdup(a->listen);
    }
    if (a->threads >= 0)
        conf->threads = (int)a->threads;
    if (a->timeout_ms > 0)
        conf->start_timeout_ms = a->timeout_ms;
    if (a->metrics_port >= 0)
        conf->metrics_port = (int)a->metrics_port;
    if ((rc = configure_tls(conf, a)))
        return rc;
    if (a->slurm || a->attach > 0)
        rc = cli_slurm_plan(conf, a->slurm ? a->n : a->attach, a->slurm, &s->addrs);
    else
        rc = plan_workers(conf, a, &s->local, &s->n_local);
    if (rc)
        return rc;
    /* Only a cluster of attached and remote workers does without one. */
    if (s->n_local && conf->tls_ca && !conf->tls_cert) {
        cli_err("start", "TLS needs the workers' certificate: give --tls-cert and "
                         "--tls-key (or tls_cert and tls_key in the cluster file)");
        return CLI_USAGE;
    }
    /* Each such worker warns in its log too; here the user sees it. */
    for (size_t i = 0; i < s->n_local && !conf->tls_cert && !conf->insecure; i++) {
        if (!conf_is_loopback(s->local[i].host)) {
            fprintf(
                stderr,
                "ferry start: warning: workers listen on %s without TLS: calls, their "
                "data and the cluster token cross the network in plain text (give "
                "--tls-cert, --tls-key and --tls-ca, or --insecure to run so "
                "quietly)\n",
                s->local[i].host);
            break;
        }
    }
    if (conf->metrics_port && conf->metrics_port + (long)conf->n_workers - 1 > 65535) {
        cli_err("start", "--metrics-port %d: ports %d..%ld do not fit below 65536",
                conf->metrics_port, conf->metrics_port,
                conf->metrics_port + (long)conf->n_workers - 1);
        return CLI_USAGE;
    }
    return 0;
}

/* FERRY_HOME made ready for a new cluster: its directories, its lock
 * (s->lock), and nothing of an earlier one left. Returns 0 or -1 (said). */
static int claim_home(starting *s)
{
    const home_paths *h = &s->h;
    int rc;
    if ((rc = conf_mkdirs(h->logs, 0700)) || (rc = conf_mkdirs(h->workers, 0700))) {
        if (rc == -ENOTDIR)
            cli_err("start",
                    "FERRY_HOME=%s is not a directory (or a part of that path is a "
                    "file): set FERRY_HOME to a directory",
                    h->dir);
        else
            cli_err("start", "cannot create %s: %s", h->dir, ferry_strerror(rc));
        return -1;
    }
    s->lock = conf_lock_take(h->dir);
    if (s->lock == FERRY_EBUSY) {
        long running = 0;
        home_read_number(h->supervisor_pid, 1, INT32_MAX, &running);
        cli_err("start",
                "a cluster is already running under FERRY_HOME=%s (supervisor pid %ld): "
                "see `ferry status`, or stop it with `ferry shutdown`",
                h->dir, running);
        return -1;
    }
    if (s->lock < 0) {
        cli_err("start", "cannot take the cluster lock in %s: %s", h->dir,
                ferry_strerror(s->lock));
        return -1;
    }
    if (stop_leftovers(h) || check_ports(s->local, s->n_local))
        return -1;
    clear_state(h);
    if (conf_mkdirs(h->workers, 0700) != 0) {
        cli_err("start", "cannot create %s", h->workers);
        return -1;
    }
    return 0;
}

/* The cluster token: the configured file, or a new one under FERRY_HOME,
 * read into s->token. Returns 0 or -1 (said). */
static int take_token(starting *s)
{
    conf_cluster *conf = &s->conf;
    char err[CONF_ERR_LEN] = "";
    int rc;
    /* Workers an engine started already read this home's token. */
    if (s->a.attach > 0 && !conf->token_file && access(s->h.token, F_OK) == 0 &&
        !(conf->token_file = strdup(s->h.token)))
        return -1;
    const char *token_file = conf->token_file ? conf->token_file : s->h.token;
    if (!conf->token_file || access(token_file, F_OK) != 0) {
        if ((rc = conf_token_create(token_file))) {
            cli_err("start", "cannot write the token %s: %s", token_file,
                    ferry_strerror(rc));
            return -1;
        }
    }
    if ((rc = conf_token_read(token_file, s->token, sizeof s->token, err, sizeof err))) {
        cli_err("start", "%s", err[0] ? err : ferry_strerror(rc));
        return -1;
    }
    if (!conf->token_file && !(conf->token_file = strdup(token_file)))
        return -1;
    return 0;
}

/* Forks the supervisor, which takes the lock over. Returns 0 or -1. */
static int launch(starting *s)
{
    char exe[CLI_PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        cli_err("start", "cannot find the ferry executable: %s", strerror(errno));
        return -1;
    }
    exe[len] = '\0';
    sv_opts so = {.home = &s->h,
                  .exe = exe,
                  .token_file = s->conf.token_file,
                  .workers = s->local,
                  .n_workers = s->n_local,
                  .threads = s->conf.threads,
                  .device = s->a.device ? s->a.device : "auto",
                  .bind_cores = s->a.bind_cores,
                  .lock_fd = s->lock,
                  .conf = &s->conf};
    cli_slurm_launch_opts sl = {.exe = exe,
                                .addrs = s->addrs,
                                .device = so.device,
                                .n = s->conf.n_workers,
                                .threads = s->conf.threads};
    s->sup = s->a.slurm ? cli_slurm_launch(&s->h, &sl) : fork_supervisor(&so);
    if (s->sup < 0) {
        cli_err("start", "cannot fork the supervisor: %s", strerror(errno));
        s->sup = 0;
        return -1;
    }
    s->forked = true;
    if (say_interrupted())
        return -1;
    /* From here the supervisor alone holds the lock. */
    close(s->lock);
    s->lock = -1;
    return 0;
}

/* Waits for every worker's port, writes the cluster's state, and waits
 * until each answers. Returns 0 or -1 (said). */
static int come_up(starting *s, double t0)
{
    conf_cluster *conf = &s->conf;
    int rc;
    double deadline = t0 + (double)conf->start_timeout_ms;
    if ((s->a.slurm || s->a.attach > 0) &&
        cli_slurm_wait(&s->h, conf, &s->sup, deadline, &interrupted))
        return -1;
    cli_start_wait w = {.h = &s->h,
                        .deadline = deadline,
                        .timeout_ms = (long long)conf->start_timeout_ms,
                        .what = "",
                        .gave_up = gave_up,
                        .data = s};
    if (cli_start_wait_ports(&w, s->local, s->n_local))
        return -1;
    /* The workers that picked their port are reached there. */
    for (size_t i = 0; i < s->n_local; i++) {
        conf_worker *cw = &conf->workers[s->local[i].rank];
        if (cw->port == s->local[i].port)
            continue;
        char addr[300];
        cw->port = s->local[i].port;
        free(cw->address);
        if (!(cw->address =
                  strdup(conf_format_address(addr, sizeof addr, cw->host, cw->port)))) {
            cli_err("start", "%s", ferry_strerror(FERRY_ENOMEM));
            return -1;
        }
    }
    conf->supervisor_pid = (int)s->sup;
    if ((rc = conf_save(conf, s->h.state))) {
        cli_err("start", "cannot write %s: %s", s->h.state, ferry_strerror(rc));
        return -1;
    }
    if ((rc = cli_cluster_connect(conf, s->token, false, &s->cl))) {
        cli_err("start", "cannot connect to the workers: %s", ferry_strerror(rc));
        return -1;
    }
    if (cli_start_wait_ready(&w, s->cl))
        return -1;
    return cli_start_report(s->cl, 0, t0) ? -1 : 0;
}

int cli_start(int argc, char **argv)
{
    double t0 = (double)uv_hrtime() / 1e6;
    if (argc == 4 && strcmp(argv[1], "--slurm-task") == 0)
        return cli_slurm_task(argc, argv);
    starting s;
    memset(&s, 0, sizeof s);
    int rc = parse(argc, argv, &s.a);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    if (s.a.add > 0)
        return cli_start_add(s.a.add, s.a.timeout_ms);
    if (cli_home_init(&s.h, "start"))
        return CLI_FAIL;
    interrupted = 0;
    catch_interrupts();
    conf_defaults(&s.conf);
    s.lock = -1;
    int status = CLI_FAIL;
    if ((rc = configure(&s)))
        status = rc;
    else if (claim_home(&s) == 0 && take_token(&s) == 0 && launch(&s) == 0 &&
             come_up(&s, t0) == 0)
        status = CLI_OK;
    cluster_destroy(s.cl);
    if (status != CLI_OK && s.forked) {
        cli_stop_supervisor(&s.h, s.sup, 0);
        unlink(s.h.state);
        unlink(s.h.supervisor_pid);
    }
    if (interrupted && status != CLI_OK)
        status = 128 + interrupted;
    if (s.lock >= 0)
        close(s.lock);
    free(s.local);
    free(s.addrs);
    conf_fini(&s.conf);
    explicit_bzero(s.token, sizeof s.token);
    fflush(stdout);
    return status;
}
