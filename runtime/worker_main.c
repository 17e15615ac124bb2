/* `ferry worker`: one worker daemon in the foreground.
 *
 * Exit status: 0 after Shutdown, SIGTERM or SIGINT; 1 when it cannot start
 * (no token, state directory); 2 for a usage mistake; 3 when the port is in
 * use, so that a launcher can tell that case apart without parsing text; 4
 * when its listener stopped accepting connections (gRPC 1.51 gives up for
 * good once file descriptors ran out), so that a supervisor restarts it; 5
 * when it is wedged: a call cancelled --wedge-grace-ms ago still holds its
 * executor slot (a function that ignores cancellation), so that a supervisor
 * restarts it; the crash record says which call. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <ferry/ferry.h>

#include "config/config.h"
#include "runtime/device/device.h"
#include "runtime_int.h"

enum {
    EXIT_OK = RT_EXIT_OK,
    EXIT_FAIL = RT_EXIT_FAIL,
    EXIT_USAGE = RT_EXIT_USAGE,
    EXIT_PORT_IN_USE = RT_EXIT_PORT_IN_USE,
    EXIT_DEAF = RT_EXIT_DEAF,
    EXIT_WEDGED = RT_EXIT_WEDGED,
};

/* A call cancelled this long ago that still runs wedges the worker. */
#define WEDGE_GRACE_MS 60000

/* The listener is probed this often; this many failed probes in a row (each
 * given PROBE_TIMEOUT_MS) and the worker exits to be restarted. */
#define PROBE_EVERY_MS   2000
#define PROBE_TIMEOUT_MS 2000
#define PROBE_FAILURES   3

/* SIGTERM and SIGINT give calls in flight this long, as a Shutdown with the
 * default grace would. */
#define STOP_GRACE_MS 5000
/* A function that ignores cancellation must not keep the process alive:
 * this long after the grace ends, the worker exits regardless. */
#define STUCK_EXTRA_MS 5000

static const char usage[] =
    "usage: ferry worker --listen ADDR [options]\n"
    "\n"
    "Runs one worker daemon in the foreground until a Shutdown call, SIGTERM\n"
    "or SIGINT. It serves Ping to anyone and every other call only with the\n"
    "cluster token.\n"
    "\n"
    "options:\n"
    "  -l, --listen ADDR      address to listen on: 127.0.0.1:7100, [::1]:7100;\n"
    "                         port 0 picks a free one (see --port-file)\n"
    "  -s, --state-dir DIR    private state: module cache, crash record\n"
    "                         (default: $FERRY_HOME/workers/PORT)\n"
    "  -k, --token-file FILE  the cluster token, mode 0600 (default: $FERRY_HOME/token)\n"
    "  -r, --rank N           this worker's rank in the cluster (default: -1, none)\n"
    "  -t, --threads N        executor threads (default 0: two per core, at least 4)\n"
    "  -d, --device DEV       cpu, cuda, cuda:N or auto (default: auto: the first\n"
    "                         GPU when one is visible, else the cpu)\n"
    "      --restarts N       how often a supervisor restarted this worker\n"
    "  -p, --port-file FILE   once listening, write the bound port to FILE\n"
    "      --wedge-grace-ms MS  a call still running this long after it was\n"
    "                         cancelled wedges the worker: it exits (status 5)\n"
    "                         to be restarted (default 60000; 0: never)\n"
    "      --parent-pid PID   exit (as on SIGTERM) when process PID, the parent\n"
    "                         that started this worker, is gone\n"
    "      --max-message-bytes N  largest payload of one call (default 1 GiB)\n"
    "      --max-module-bytes N   largest module LoadModule takes (default: the\n"
    "                         message limit)\n"
    "      --cpus LIST        run on these CPUs only (taskset -c's form: 0-3,8);\n"
    "                         every thread the worker starts inherits it\n"
    "  -h, --help             this text\n"
    "  -V, --version          ferry's version\n"
    "\n"
    "Before a deliberate exit (Shutdown, SIGTERM, SIGINT) it writes the file\n"
    "`stopped` in its state directory: any other exit is a crash to a supervisor.\n"
    "\n"
    "Exit status: 0 after Shutdown or a signal, 1 when it cannot start,\n"
    "2 for a usage mistake, 3 when the port is in use, 4 when it stopped\n"
    "accepting connections (file descriptors ran out), 5 when a cancelled call\n"
    "never returned (see --wedge-grace-ms): restart it.\n"
    "\n"
    "Environment: FERRY_HOME (default ~/.ferry) holds the default state and token.\n";

typedef struct options {
    const char *listen, *state_dir, *token_file, *port_file, *device, *cpus;
    int rank, threads;
    uint32_t restarts;
    long wedge_grace_ms;
    long parent_pid;
    long max_message_bytes;
    long max_module_bytes;
} options;

/* SIGTERM and SIGINT may land on any thread (gRPC's included) at any time,
 * also while main destroys the worker; so the handler touches only a pipe
 * that outlives the worker (it is never closed). Main waits on the worker
 * and on that pipe together. */
static int signal_pipe[2] = {-1, -1};

static void on_stop_signal(int sig)
{
    (void)sig;
    int saved = errno;
    ssize_t n = write(signal_pipe[1], "x", 1);
    (void)n; /* a full pipe already holds a wake-up */
    errno = saved;
}

static int usage_error(const char *fmt, const char *arg)
{
    fputs("ferry worker: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nTry 'ferry worker --help'.\n", stderr);
    return EXIT_USAGE;
}

/* Returns -1 to go on, else the exit status. */
static int parse(int argc, char **argv, options *o)
{
    static const struct option longs[] = {
        {"listen", required_argument, NULL, 'l'},
        {"state-dir", required_argument, NULL, 's'},
        {"token-file", required_argument, NULL, 'k'},
        {"rank", required_argument, NULL, 'r'},
        {"threads", required_argument, NULL, 't'},
        {"device", required_argument, NULL, 'd'},
        {"restarts", required_argument, NULL, 'R'},
        {"port-file", required_argument, NULL, 'p'},
        {"wedge-grace-ms", required_argument, NULL, 'W'},
        {"parent-pid", required_argument, NULL, 'P'},
        {"max-message-bytes", required_argument, NULL, 'M'},
        {"max-module-bytes", required_argument, NULL, 'O'},
        {"cpus", required_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {0},
    };
    *o = (options){.rank = -1, .wedge_grace_ms = WEDGE_GRACE_MS};
    optind = 0; /* GNU: start afresh, whatever parsed argv before */
    opterr = 0;
    int c;
    long v;
    while ((c = getopt_long(argc, argv, ":l:s:k:r:t:d:p:hV", longs, NULL)) != -1) {
        switch (c) {
        case 'l':
            o->listen = optarg;
            break;
        case 's':
            o->state_dir = optarg;
            break;
        case 'k':
            o->token_file = optarg;
            break;
        case 'p':
            o->port_file = optarg;
            break;
        case 'r':
            if (!conf_parse_long(optarg, -1, INT_MAX, &v))
                return usage_error("--rank: expected a number from -1 up, got '%s'",
                                   optarg);
            o->rank = (int)v;
            break;
        case 't':
            if (!conf_parse_long(optarg, 0, 1024, &v))
                return usage_error(
                    "--threads: expected a number from 0 to 1024, got '%s'", optarg);
            o->threads = (int)v;
            break;
        case 'd':
            if (!rt_device_name_ok(optarg))
                return usage_error(
                    "--device: expected cpu, cuda, cuda:N or auto, got '%s'", optarg);
            o->device = optarg;
            break;
        case 'R':
            if (!conf_parse_long(optarg, 0, UINT32_MAX, &v))
                return usage_error("--restarts: expected a number from 0 up, got '%s'",
                                   optarg);
            o->restarts = (uint32_t)v;
            break;
        case 'W':
            if (!conf_parse_long(optarg, 0, 24L * 3600 * 1000, &o->wedge_grace_ms))
                return usage_error(
                    "--wedge-grace-ms: expected a time from 0 to a day, got '%s'", optarg);
            break;
        case 'P':
            if (!conf_parse_long(optarg, 1, INT32_MAX, &o->parent_pid))
                return usage_error("--parent-pid: expected a process id, got '%s'",
                                   optarg);
            break;
        case 'M':
            if (!conf_parse_long(optarg, CONF_MIN_BYTES_LIMIT, CONF_MAX_BYTES_LIMIT,
                                 &o->max_message_bytes))
                return usage_error(
                    "--max-message-bytes: expected 65536 to 2146435072, got '%s'",
                    optarg);
            break;
        case 'O':
            if (!conf_parse_long(optarg, 4096, CONF_MAX_BYTES_LIMIT, &o->max_module_bytes))
                return usage_error(
                    "--max-module-bytes: expected 4096 to 2146435072, got '%s'", optarg);
            break;
        case 'C': {
            cpu_set_t set;
            if (conf_cpus_parse(optarg, &set) != 0)
                return usage_error("--cpus: expected a CPU list such as 0-3,8, got '%s'",
                                   optarg);
            o->cpus = optarg;
            break;
        }
        case 'h':
            fputs(usage, stdout);
            return EXIT_OK;
        case 'V':
            printf("ferry %s\n", ferry_version());
            return EXIT_OK;
        case ':':
            return usage_error("%s needs a value", argv[optind - 1]);
        default:
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if (!o->listen)
        return usage_error("%s", "--listen ADDR is required");
    return -1;
}

static int write_port_file(const char *path, int port)
{
    char text[16];
    int len = snprintf(text, sizeof text, "%d\n", port);
    return conf_write_atomic(path, text, (size_t)len, false);
}

/* Tells a supervisor this exit was asked for: any other is a crash. */
static void write_stopped(const char *state_dir)
{
    char path[4096 + 16];
    snprintf(path, sizeof path, "%s/stopped", state_dir);
    conf_write_atomic(path, "stopped\n", 8, false);
}

static void *stuck_watch(void *arg)
{
    long long ms = *(long long *)arg;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    fprintf(stderr,
            "ferry worker: calls still running %lld ms after the stop; exiting "
            "without them\n",
            ms);
    rt_reap_descendants();
    _exit(EXIT_FAIL);
}

/* Every connection costs a descriptor: take all the kernel allows. */
static void raise_nofile(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

/* Probes the listener (rpc_server_probe) until the worker stops; after
 * PROBE_FAILURES failures in a row it says so and stops the worker, and
 * main exits with EXIT_DEAF. */
typedef struct watch {
    rt_worker *w;
    long wedge_grace_ms;
    pthread_t thread;
    atomic_bool quit, deaf;
} watch;

/* Calls queued behind a pool that every slot's stuck call holds are failed
 * (rpc_server_shed); a call stuck past the grace wedges the worker: nothing
 * can free its thread but the end of the process. The record names what
 * held the slots, and what the tasks forked goes first. */
static void check_slots(watch *wt)
{
    rpc_server_shed(wt->w->srv);
    rpc_slots_info si;
    rpc_server_slots(wt->w->srv, &si);
    if (!wt->wedge_grace_ms || !si.stuck || si.stuck_s * 1000 < wt->wedge_grace_ms)
        return;
    char held[1024], text[1400];
    rpc_server_holders(wt->w->srv, held, sizeof held);
    snprintf(text, sizeof text,
             "wedged: %d of %d executor slots held by calls cancelled up to %.0f s ago "
             "that never returned (%s)",
             si.stuck, si.slots, si.stuck_s, held);
    rt_crash_note(text);
    fprintf(stderr, "ferry worker: %s: exiting to be restarted\n", text);
    rt_reap_descendants();
    _exit(EXIT_WEDGED);
}

static bool nap(watch *wt, int ms)
{
    for (int slept = 0; slept < ms && !atomic_load(&wt->quit); slept += 100) {
        struct timespec ts = {.tv_nsec = 100 * 1000000};
        nanosleep(&ts, NULL);
    }
    return !atomic_load(&wt->quit);
}

static void *listener_watch(void *arg)
{
    watch *wt = arg;
    int failures = 0;
    while (nap(wt, PROBE_EVERY_MS)) {
        check_slots(wt);
        int rc = rpc_server_probe(wt->w->srv, PROBE_TIMEOUT_MS);
        if (rc == 0)
            failures = 0;
        else if (rc == FERRY_EUNAVAIL)
            failures++;
        /* else: no descriptor to probe with; no verdict */
        if (failures >= PROBE_FAILURES) {
            fprintf(stderr,
                    "ferry worker: port %d no longer accepts connections (%d probes of "
                    "%d ms went unanswered; file descriptors ran out?): exiting to be "
                    "restarted\n",
                    rt_worker_port(wt->w), failures, PROBE_TIMEOUT_MS);
            atomic_store(&wt->deaf, true);
            rt_worker_stop(wt->w);
            break;
        }
    }
    return NULL;
}

/* Installs the handlers, then unblocks SIGTERM and SIGINT: a launcher may
 * block them across fork and exec so that none lands (and kills) before
 * the handlers are in place; one that came meanwhile is delivered now.
 * Returns 0 or -errno. */
static int install_stop_signals(void)
{
    /* Both ends non-blocking: the handler must never block, and main only
     * polls the read end. Created once per process, never closed. */
    if (signal_pipe[0] < 0 && pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return -errno;
    char stale[64]; /* an earlier run in this process left its wake-ups */
    while (read(signal_pipe[0], stale, sizeof stale) > 0)
        ;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART; /* a burst of signals must not fail start-up's I/O */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0)
        return -errno;
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    return -pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
}

/* Binds the worker to the CPUs of `list` (checked by parse): a local
 * worker's threads then hand work to each other on its own cores, and do
 * not preempt another worker's. A CPU this process may not use is no
 * reason not to serve: it runs unbound. */
static void bind_cpus(const char *list)
{
    cpu_set_t set;
    conf_cpus_parse(list, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        fprintf(stderr, "ferry worker: cannot bind to CPUs %s: %s; running unbound\n",
                list, strerror(errno));
}

int rt_worker_main(int argc, char **argv)
{
    options o;
    int rc, status = parse(argc, argv, &o);
    if (status >= 0)
        return status;

    /* Before any thread is started, so that all of them inherit it. */
    if (o.cpus)
        bind_cpus(o.cpus);
    char host[256];
    int port;
    if (conf_split_address(o.listen, host, sizeof host, &port) != 0)
        return usage_error("--listen: expected host:port or [v6]:port, got '%s'",
                           o.listen);
    if ((rc = install_stop_signals())) {
        fprintf(stderr, "ferry worker: cannot handle SIGTERM: %s\n", ferry_strerror(rc));
        return EXIT_FAIL;
    }
    /* A worker must not outlive the supervisor that restarts it: SIGTERM
     * when the parent dies; a parent already gone before that was set is
     * seen by getppid(). */
    if (o.parent_pid &&
        (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != (pid_t)o.parent_pid)) {
        fprintf(stderr, "ferry worker: its parent (pid %ld) is gone: exiting\n",
                o.parent_pid);
        return EXIT_FAIL;
    }
    char home[4096] = "", state_dir[4096], token_file[4096];
    if ((!o.state_dir || !o.token_file) && conf_home(home, sizeof home) != 0) {
        fputs("ferry worker: no FERRY_HOME or HOME to keep state in: pass --state-dir "
              "and --token-file\n",
              stderr);
        return EXIT_FAIL;
    }
    if (o.state_dir) {
        snprintf(state_dir, sizeof state_dir, "%s", o.state_dir);
    } else {
        char rel[64];
        /* Port 0 is no name: a worker asking for any port gets its own. */
        if (port)
            snprintf(rel, sizeof rel, "workers/%d", port);
        else
            snprintf(rel, sizeof rel, "workers/pid-%ld", (long)getpid());
        conf_home_path(state_dir, sizeof state_dir, home, rel);
    }
    if (o.token_file)
        snprintf(token_file, sizeof token_file, "%s", o.token_file);
    else
        conf_home_path(token_file, sizeof token_file, home, "token");

    char token[CONF_TOKEN_LEN + 1], err[CONF_ERR_LEN] = "";
    rc = conf_token_read(token_file, token, sizeof token, err, sizeof err);
    if (rc) {
        fprintf(stderr, "ferry worker: %s\n", err[0] ? err : ferry_strerror(rc));
        if (rc == FERRY_ENOENT)
            fputs("ferry worker: `ferry start` creates the token; or pass --token-file\n",
                  stderr);
        return EXIT_FAIL;
    }

    /* Asked first so that a taken port gets our one line, not gRPC's log. */
    if (port && rpc_listen_probe(o.listen) == FERRY_EADDRINUSE) {
        fprintf(stderr, "ferry worker: port %d is in use (listening on %s)\n", port,
                o.listen);
        return EXIT_PORT_IN_USE;
    }
    rpc_tune_malloc();
    raise_nofile();
    if ((rc = rt_reap_init()))
        fprintf(stderr, "ferry worker: not a subreaper (what tasks fork may outlive "
                        "it): %s\n", ferry_strerror(rc));
    rt_worker_opts wo = {
        .listen = o.listen,
        .state_dir = state_dir,
        .token = token,
        .rank = o.rank,
        .threads = o.threads,
        .restarts = o.restarts,
        .device = o.device,
        .max_payload = (size_t)o.max_message_bytes,
        .max_module = (size_t)o.max_module_bytes,
    };
    rt_worker *w;
    rc = rt_worker_create(&wo, &w);
    explicit_bzero(token, sizeof token);
    if (rc == FERRY_EADDRINUSE) {
        fprintf(stderr, "ferry worker: port %d is in use (listening on %s)\n", port,
                o.listen);
        return EXIT_PORT_IN_USE;
    }
    if (rc == FERRY_EINVAL) {
        fprintf(stderr, "ferry worker: cannot listen on '%s'\n", o.listen);
        return EXIT_USAGE;
    }
    if (rc == FERRY_ENODEV)
        return EXIT_FAIL; /* rt_worker_create said why */
    if (rc) {
        fprintf(stderr, "ferry worker: cannot start (state in %s): %s\n", state_dir,
                ferry_strerror(rc));
        return EXIT_FAIL;
    }

    char crash[4096 + 8];
    snprintf(crash, sizeof crash, "%s/crash", state_dir);
    if ((rc = rt_crash_install(crash)))
        fprintf(stderr, "ferry worker: no crash record (%s): %s\n", crash,
                ferry_strerror(rc));

    int bound = rt_worker_port(w);
    if (o.port_file && (rc = write_port_file(o.port_file, bound))) {
        fprintf(stderr, "ferry worker: cannot write the port file %s: %s\n", o.port_file,
                ferry_strerror(rc));
        rt_worker_destroy(w, 0);
        return EXIT_FAIL;
    }
    /* A worker run by hand (no --rank) belongs to no cluster yet. */
    char who[48] = "ferry worker";
    if (o.rank >= 0)
        snprintf(who, sizeof who, "ferry worker rank %d", o.rank);
    char where[sizeof host + 16];
    fprintf(stderr, "%s listening on %s (pid %ld)\n", who,
            conf_format_address(where, sizeof where, host, bound), (long)getpid());
    if (w->id.last_crash[0])
        fprintf(stderr, "ferry worker: the last run crashed: %s\n", w->id.last_crash);

    static watch wt;
    wt = (watch){.w = w, .wedge_grace_ms = o.wedge_grace_ms};
    bool watching = pthread_create(&wt.thread, NULL, listener_watch, &wt) == 0;

    /* A signal that came during start-up left its byte: this returns at
     * once. */
    if (rt_worker_wait_or(w, signal_pipe[0]))
        fprintf(stderr, "%s: stopping on a signal\n", who);
    atomic_store(&wt.quit, true);
    if (watching)
        pthread_join(wt.thread, NULL);
    bool deaf = atomic_load(&wt.deaf);
    if (!deaf)
        write_stopped(state_dir);
    long long grace = deaf ? 0 : atomic_load(&w->shutdown_grace_ms);
    static long long stuck_ms;
    stuck_ms = (grace >= 0 ? grace : STOP_GRACE_MS) + STUCK_EXTRA_MS;
    pthread_t watch;
    if (pthread_create(&watch, NULL, stuck_watch, &stuck_ms) == 0)
        pthread_detach(watch);
    /* Deaf, nobody can reach the calls in flight: no grace for them. */
    rt_worker_destroy(w, deaf ? 0 : STOP_GRACE_MS);
    int orphans = rt_reap_descendants();
    if (orphans)
        fprintf(stderr, "%s: killed %d process(es) its tasks left\n", who, orphans);
    fprintf(stderr, "%s stopped\n", who);
    return deaf ? EXIT_DEAF : EXIT_OK;
}
