/* `ferry dashboard [--port P]`: one web page on loopback with the
 * cluster's table and the newest run's curves, refreshed live.
 *
 * The page (dashboard_page.c) polls /state.json, which this process
 * rebuilds once a second from a survey of the workers (their pings and
 * stats, as `ferry status` reads them) and the newest run's record under
 * $FERRY_HOME/runs (what `ferry runs` lists). The survey runs on this
 * thread; libmicrohttpd's thread only hands out the last JSON built, under
 * a mutex. */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "cli.h"
#include "cluster/runs/runs.h"

static const char usage[] =
    "usage: ferry dashboard [--port P]\n"
    "\n"
    "Serves a status page on http://127.0.0.1:P/ (P 0, the default: a free\n"
    "port, printed) until Ctrl-C: every worker (address, device, what it runs,\n"
    "epoch and step, samples/s, last heartbeat) and the newest run's loss and\n"
    "accuracy curves, refreshed every second. /state.json is what the page\n"
    "draws.\n"
    "\n"
    "  -p, --port P   the port on 127.0.0.1 (default 0: any free one)\n";

extern const char cli_dashboard_page[];

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
    stop_signal = sig;
}

typedef struct board {
    pthread_mutex_t mu;
    char *state; /* the last /state.json, malloc'd */
} board;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             char *body, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_len, void **con)
{
    (void)version, (void)upload, (void)upload_len, (void)con;
    board *b = cls;
    if (strcmp(method, "GET") != 0)
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "only GET\n",
                     MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/") == 0)
        return reply(c, MHD_HTTP_OK, "text/html; charset=utf-8",
                     (char *)cli_dashboard_page, MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/state.json") != 0)
        return reply(c, MHD_HTTP_NOT_FOUND, "text/plain",
                     "ferry serves / and /state.json\n", MHD_RESPMEM_PERSISTENT);
    pthread_mutex_lock(&b->mu);
    char *body = strdup(b->state ? b->state : "{}");
    pthread_mutex_unlock(&b->mu);
    if (!body)
        return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", "out of memory\n",
                     MHD_RESPMEM_PERSISTENT);
    return reply(c, MHD_HTTP_OK, "application/json", body, MHD_RESPMEM_MUST_FREE);
}

static json_t *number(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *workers_json(const cluster_worker *w, size_t n, const int64_t *last_ok)
{
    json_t *a = json_array();
    int64_t now = base_wall_ms();
    for (size_t i = 0; i < n; i++) {
        const proto_stats_reply *s = w[i].stats;
        const char *running = !s ? "-"
                              : s->busy_slots && s->oldest_call && *s->oldest_call
                                  ? s->oldest_call
                                  : "idle";
        json_array_append_new(
            a,
            json_pack("{s:i, s:s, s:s, s:s, s:s, s:I, s:I, s:o, s:o}", "rank", w[i].rank,
                      "address", w[i].target, "health", w[i].ping ? "ok" : "down",
                      "device", w[i].ping ? w[i].ping->device : "-", "running", running,
                      "epochs", (json_int_t)(s ? s->train_epochs : 0), "steps",
                      (json_int_t)(s ? s->train_steps : 0), "samples_per_s",
                      number(s ? s->train_samples_per_s : NAN), "heartbeat_s_ago",
                      last_ok[i] ? json_real((double)(now - last_ok[i]) / 1e3)
                                 : json_null()));
    }
    return a;
}

/* The newest run's record, or null when there is none (or it cannot be
 * read: its error then says why). */
static json_t *run_json(const char *home)
{
    char dir[4200], err[512];
    runs_run r;
    if (runs_find(home, "last", dir, sizeof dir, err, sizeof err) != 0)
        return json_null();
    if (runs_load(dir, &r, err, sizeof err) != 0)
        return json_pack("{s:s}", "error", err);
    json_t *epochs = json_array(), *steps = json_array();
    for (size_t i = 0; i < r.n; i++) {
        const runs_point *p = &r.points[i];
        json_array_append_new(
            epochs,
            json_pack("{s:i, s:I, s:o, s:o, s:o, s:o}", "epoch", (int)p->epoch, "step",
                      (json_int_t)p->step, "wall_s", number(p->wall_s), "train_loss",
                      number(p->train_loss), "test_loss", number(p->test_loss),
                      "test_accuracy", number(p->test_accuracy)));
    }
    for (size_t i = 0; i < r.n_steps; i++)
        json_array_append_new(steps, json_pack("{s:I, s:o, s:o}", "step",
                                               (json_int_t)r.steps[i].step, "wall_s",
                                               number(r.steps[i].wall_s), "loss",
                                               number(r.steps[i].loss)));
    json_t *j = json_pack("{s:s, s:s?, s:s?, s:s?, s:i, s:I, s:s, s:o, s:o}", "id", r.id,
                          "task", r.task, "mode", r.mode, "device", r.device, "workers",
                          r.workers, "epochs", (json_int_t)r.epochs, "status", r.status,
                          "points", epochs, "steps", steps);
    runs_run_fini(&r);
    return j;
}

static int parse(int argc, char **argv, int *port)
{
    static const struct option opts[] = {{"port", required_argument, NULL, 'p'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    *port = 0;
    optind = 1;
    int c;
    long v;
    while ((c = getopt_long(argc, argv, "hp:", opts, NULL)) != -1) {
        if (c == 'p' && base_parse_long(optarg, 0, 65535, &v)) {
            *port = (int)v;
        } else if (c == 'p') {
            cli_err("dashboard", "--port: expected a port from 0 to 65535, got '%s'",
                    optarg);
            return CLI_USAGE;
        } else if (c == 'h') {
            fputs(usage, stdout);
            return -1;
        } else {
            fputs(usage, stderr);
            return CLI_USAGE;
        }
    }
    if (optind < argc) {
        cli_err("dashboard", "unexpected argument '%s'", argv[optind]);
        return CLI_USAGE;
    }
    return 0;
}

/* Rebuilds the state every second until a signal. */
static void serve(board *b, cli_running *r, const home_paths *h)
{
    size_t n = cluster_size(r->cl);
    int64_t *last_ok = calloc(n ? n : 1, sizeof *last_ok);
    if (!last_ok)
        return;
    while (!stop_signal) {
        const cluster_worker *w = NULL;
        cluster_survey(r->cl, true, &w);
        int64_t now = base_wall_ms();
        for (size_t i = 0; w && i < n; i++)
            if (w[i].ping)
                last_ok[i] = now;
        json_t *st = json_pack(
            "{s:s, s:f, s:o, s:o}", "home", h->dir, "time", (double)now / 1e3, "workers",
            w ? workers_json(w, n, last_ok) : json_array(), "run", run_json(h->dir));
        char *text = st ? json_dumps(st, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(st);
        if (text) {
            pthread_mutex_lock(&b->mu);
            free(b->state);
            b->state = text;
            pthread_mutex_unlock(&b->mu);
        }
        struct timespec tick = {.tv_sec = 1};
        nanosleep(&tick, NULL); /* a signal ends it early */
    }
    free(last_ok);
}

int cli_dashboard(int argc, char **argv)
{
    int port, rc = parse(argc, argv, &port);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    home_paths h;
    cli_running r;
    if (cli_home_init(&h, "dashboard"))
        return CLI_FAIL;
    if (cli_running_open(&r, &h, "dashboard", false, false))
        return CLI_FAIL;
    board b = {.mu = PTHREAD_MUTEX_INITIALIZER};
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
                         (uint16_t)port, NULL, NULL, on_request, &b, MHD_OPTION_SOCK_ADDR,
                         (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, 16u,
                         MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!d) {
        cli_err("dashboard", "cannot serve on 127.0.0.1:%d (in use?)", port);
        cli_running_close(&r);
        return CLI_FAIL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("ferry dashboard: http://127.0.0.1:%u/ (Ctrl-C to stop)\n",
           info ? (unsigned)info->port : (unsigned)port);
    fflush(stdout);
    struct sigaction sg = {.sa_handler = on_stop}, old_int, old_term;
    sigemptyset(&sg.sa_mask);
    sigaction(SIGINT, &sg, &old_int);
    sigaction(SIGTERM, &sg, &old_term);
    stop_signal = 0;
    serve(&b, &r, &h);
    MHD_stop_daemon(d);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    free(b.state);
    cli_running_close(&r);
    return CLI_OK;
}
