/* `ferry status`: one row per worker, from a Ping and a Stats call to each,
 * and from the supervisor's account of a worker that is down (a crash
 * loop). With no cluster, it names workers an earlier one left running. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "json.h"

static const char usage[] =
    "usage: ferry status [--json]\n"
    "       ferry status --watch [--interval S]\n"
    "\n"
    "Shows every worker of the cluster running under $FERRY_HOME: rank, address,\n"
    "pid, device, calls served, calls in flight, busy executor slots, uptime and\n"
    "health, and a worker's last crash. A worker with a call running for a second\n"
    "or more, or one cancelled that has not returned (stuck), says so under its\n"
    "row: \"slots 2/4 busy, 1 stuck (oldest: Call sleep.so spin, 12 s)\"; a worker\n"
    "whose stuck calls outlast its wedge grace is restarted. A worker that\n"
    "crashes in a loop is restarted after a growing delay; its row then says\n"
    "\"crash loop: N crashes in T s, next try in S s\".\n"
    "Exits 1 when no cluster runs (naming workers of an earlier cluster that\n"
    "still run) or a worker does not answer.\n"
    "\n"
    "With --watch, a table redrawn every S seconds (default 1) until q or\n"
    "Ctrl-C: each worker's health, what it runs, the epochs and steps it\n"
    "trained and its samples a second over the last epoch, its busy slots, and\n"
    "how long ago it last answered.\n"
    "\n"
    "options:\n"
    "      --json          one JSON object instead of the table\n"
    "  -w, --watch         redraw until q or Ctrl-C\n"
    "      --interval S    seconds between two tables (0.1 to 3600; default "
    "1)\n" CLI_REMOTE_HELP "  -h, --help          this text\n"
    "  -V, --version       ferry's version\n";

static void format_uptime(double s, char *buf, size_t len)
{
    long t = (long)s;
    if (t < 60)
        snprintf(buf, len, "%lds", t);
    else if (t < 3600)
        snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, len, "%ldh%02ldm", t / 3600, (t / 60) % 60);
}

/* A down worker's crash loop, from the supervisor; false if none. */
static bool crash_loop(const home_paths *h, const cluster_worker *w, home_restarts *r)
{
    return !w->ping && home_restarts_read(h, w->rank, r) && r->next_try_ms > 0;
}

/* A call this old gets a line under its worker's row: shorter ones come and
 * go between two looks, and the worker calls a cancelled call stuck after
 * the same second. */
#define OLD_CALL_S 1.0

/* A worker's executor, from Stats (one snapshot, with the oldest call's
 * name) where it answered, else from Ping (the counts, behind no token). */
typedef struct slots_view {
    unsigned slots, busy, stuck, queued;
    double oldest_s;
    const char *oldest;  /* "Call sleep.so spin"; "" if unknown or idle */
    const char *holders; /* every busy slot; "" likewise */
} slots_view;

/* False when the worker reports no slots (it did not answer, or predates
 * them). */
static bool slots_of(const cluster_worker *w, slots_view *v)
{
    const proto_stats_reply *s = w->stats;
    const proto_ping_reply *p = w->ping;
    if (s && s->slots)
        *v = (slots_view){.slots = s->slots,
                          .busy = s->busy_slots,
                          .stuck = s->stuck_calls,
                          .queued = s->queued_calls,
                          .oldest_s = s->oldest_call_s,
                          .oldest = s->oldest_call,
                          .holders = s->slot_holders};
    else if (p && p->slots)
        *v = (slots_view){.slots = p->slots,
                          .busy = p->busy_slots,
                          .stuck = p->stuck_calls,
                          .oldest_s = p->oldest_call_s};
    else
        return false;
    if (!v->oldest)
        v->oldest = "";
    if (!v->holders)
        v->holders = "";
    return true;
}

/* The line under a worker's row, "slots 2/4 busy, 1 stuck, 3 queued
 * (oldest: Call sleep.so spin, 12 s)"; false when nothing is stuck or old. */
static bool slots_line(const slots_view *v, char *buf, size_t len)
{
    if (!v->stuck && !(v->busy && v->oldest_s >= OLD_CALL_S))
        return false;
    char stuck[32] = "", queued[32] = "", oldest[200] = "";
    if (v->stuck)
        snprintf(stuck, sizeof stuck, ", %u stuck", v->stuck);
    if (v->queued)
        snprintf(queued, sizeof queued, ", %u queued", v->queued);
    if (v->busy)
        snprintf(oldest, sizeof oldest, " (oldest: %s%s%.0f s)", v->oldest,
                 *v->oldest ? ", " : "", v->oldest_s);
    snprintf(buf, len, "slots %u/%u busy%s%s%s", v->busy, v->slots, stuck, queued,
             oldest);
    return true;
}

static void health_text(const home_paths *h, const cluster_worker *w, char *buf, size_t len)
{
    home_restarts r;
    if (crash_loop(h, w, &r))
        snprintf(buf, len, "DOWN (crash loop)");
    else if (!w->ping)
        snprintf(buf, len, "DOWN");
    else if (w->ping->restarts)
        snprintf(buf, len, "ok (restarted %ux)", w->ping->restarts);
    else
        snprintf(buf, len, "ok");
}

/* The widest DEVICE column: a text from the wire is cut there. */
#define DEVICE_MAX 120

static void print_table(const home_paths *h, const cluster_worker *w, size_t n)
{
    /* As wide as the longest device: its BLAS version and thread count come
     * last and are what tells two workers apart. */
    int dw = 6;
    for (size_t i = 0; i < n; i++)
        if (w[i].ping && (int)strlen(w[i].ping->device) > dw)
            dw = (int)strlen(w[i].ping->device);
    if (dw > DEVICE_MAX)
        dw = DEVICE_MAX;
    printf("%-4s  %-21s  %-7s  %-*s  %8s  %9s  %5s  %7s  %s\n", "RANK", "ADDRESS", "PID", dw,
           "DEVICE", "CALLS", "IN FLIGHT", "SLOTS", "UPTIME", "HEALTH");
    for (size_t i = 0; i < n; i++) {
        char up[32] = "-", health[64], pid[16] = "-", calls[24] = "-", inflight[16] = "-";
        char busy[32] = "-", line[400];
        slots_view v;
        bool has_slots = slots_of(&w[i], &v);
        if (has_slots)
            snprintf(busy, sizeof busy, "%u/%u", v.busy, v.slots);
        health_text(h, &w[i], health, sizeof health);
        if (w[i].ping) {
            format_uptime(w[i].ping->uptime_s, up, sizeof up);
            snprintf(pid, sizeof pid, "%d", w[i].ping->pid);
        }
        if (w[i].stats) {
            snprintf(calls, sizeof calls, "%llu",
                     (unsigned long long)w[i].stats->calls_served);
            snprintf(inflight, sizeof inflight, "%u", w[i].stats->in_flight);
        }
        printf("%-4d  %-21s  %-7s  %-*.*s  %8s  %9s  %5s  %7s  %s\n", w[i].rank,
               w[i].target, pid, dw, dw, w[i].ping ? w[i].ping->device : "-", calls, inflight,
               busy, up, health);
        if (has_slots && slots_line(&v, line, sizeof line)) {
            printf("      %s\n", line);
            /* Which calls are stuck, each with its age and when it was
             * cancelled: what the operator would otherwise dig out of the
             * worker's log before the wedge grace restarts it. */
            if (v.stuck && *v.holders)
                printf("      held by: %s\n", v.holders);
        }
        home_restarts r;
        if (crash_loop(h, &w[i], &r)) {
            char loop[160];
            home_restarts_describe(&r, base_wall_ms(), loop, sizeof loop);
            printf("      %s\n      last crash: %s\n", loop, r.last_crash);
        } else if (w[i].ping && w[i].ping->last_crash && w[i].ping->last_crash[0]) {
            printf("      last crash: %s\n", w[i].ping->last_crash);
        }
    }
}

static void print_json(const home_paths *h, const cluster_worker *w, size_t n)
{
    printf("{\"ferry_home\":");
    json_str(stdout, h->dir);
    printf(",\"running\":true,\"workers\":[");
    for (size_t i = 0; i < n; i++) {
        char health[64];
        health_text(h, &w[i], health, sizeof health);
        printf("%s{\"rank\":%d,\"address\":", i ? "," : "", w[i].rank);
        json_str(stdout, w[i].target);
        printf(",\"alive\":%s", w[i].ping ? "true" : "false");
        if (w[i].ping) {
            printf(",\"pid\":%d,\"host\":", w[i].ping->pid);
            json_str(stdout, w[i].ping->hostname);
            printf(",\"device\":");
            json_str(stdout, w[i].ping->device);
            printf(",\"version\":");
            json_str(stdout, w[i].ping->version);
            printf(",\"uptime_s\":%.3f,\"restarts\":%u,\"last_crash\":",
                   w[i].ping->uptime_s, w[i].ping->restarts);
            json_str(stdout, w[i].ping->last_crash);
        }
        if (w[i].stats)
            printf(",\"calls_served\":%llu,\"calls_failed\":%llu,\"in_flight\":%u,"
                   "\"modules_loaded\":%u",
                   (unsigned long long)w[i].stats->calls_served,
                   (unsigned long long)w[i].stats->calls_failed, w[i].stats->in_flight,
                   w[i].stats->modules_loaded);
        slots_view v;
        if (slots_of(&w[i], &v)) {
            printf(",\"slots\":%u,\"busy_slots\":%u,\"stuck_calls\":%u,\"oldest_call_s\":"
                   "%.3f",
                   v.slots, v.busy, v.stuck, v.oldest_s);
            /* The names come with Stats only: absent rather than "" when the
             * worker answered a Ping but not Stats. */
            if (w[i].stats && w[i].stats->slots) {
                printf(",\"oldest_call\":");
                json_str(stdout, v.oldest);
                printf(",\"queued_calls\":%u,\"slot_holders\":", v.queued);
                json_str(stdout, v.holders);
            }
        }
        home_restarts r;
        if (crash_loop(h, &w[i], &r)) {
            char loop[160];
            home_restarts_describe(&r, base_wall_ms(), loop, sizeof loop);
            printf(
                ",\"crash_loop\":{\"crashes\":%d,\"window_s\":%.1f,\"next_try_s\":%.1f,"
                "\"text\":",
                r.crashes, (double)r.window_ms / 1e3,
                r.next_try_ms > base_wall_ms()
                    ? (double)(r.next_try_ms - base_wall_ms()) / 1e3
                    : 0.0);
            json_str(stdout, loop);
            printf(",\"last_crash\":");
            json_str(stdout, r.last_crash);
            printf("}");
        }
        printf(",\"health\":");
        json_str(stdout, health);
        printf("}");
    }
    printf("]}\n");
}

/* Why there is nothing to show, and what of an earlier cluster still runs:
 * its state is never shown as current. */
static void no_cluster(const home_paths *h, bool json)
{
    int ranks[CONF_MAX_WORKERS];
    pid_t pids[CONF_MAX_WORKERS];
    size_t n =
        conf_lock_held(h->dir) ? 0 : cli_leftovers(h, ranks, pids, CONF_MAX_WORKERS);
    char list[2048] = "", why[CLI_PATH_MAX + 2600];
    cli_leftovers_list(ranks, pids, n, list, sizeof list);
    if (conf_lock_held(h->dir))
        snprintf(
            why, sizeof why,
            "a cluster is starting or stopping under FERRY_HOME=%s: its state is not "
            "there (yet)",
            h->dir);
    else if (n)
        snprintf(why, sizeof why,
                 "no cluster is running under FERRY_HOME=%s: its supervisor is gone, but "
                 "%zu of its workers still run: %s; `ferry shutdown` stops them",
                 h->dir, n, list);
    else
        snprintf(
            why, sizeof why,
            "no cluster is running under FERRY_HOME=%s: start one with `ferry start N`",
            h->dir);
    if (json) {
        printf("{\"ferry_home\":");
        json_str(stdout, h->dir);
        printf(",\"running\":false,\"error\":");
        json_str(stdout, why);
        printf(",\"leftover_workers\":[");
        for (size_t i = 0; i < n; i++)
            printf("%s{\"rank\":%d,\"pid\":%d}", i ? "," : "", ranks[i], (int)pids[i]);
        printf("],\"workers\":[]}\n");
    }
    cli_err("status", "%s", why);
}

typedef struct status_args {
    bool json, watch;
    double interval;
} status_args;

static int parse(int argc, char **argv, status_args *a)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"watch", no_argument, NULL, 'w'},
                                         {"interval", required_argument, NULL, 'i'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    *a = (status_args){.interval = 1.0};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "hw", opts, NULL)) != -1) {
        char *end = NULL;
        if (c == 'j') {
            a->json = true;
        } else if (c == 'w') {
            a->watch = true;
        } else if (c == 'i') {
            a->interval = strtod(optarg, &end);
            if (!end || *end || !(a->interval >= 0.1 && a->interval <= 3600)) {
                cli_err("status",
                        "--interval: expected seconds from 0.1 to 3600, got '%s'",
                        optarg);
                return CLI_USAGE;
            }
        } else if (c == 'h') {
            fputs(usage, stdout);
            return -1;
        } else {
            fputs(usage, stderr);
            return CLI_USAGE;
        }
    }
    if (a->json && a->watch) {
        cli_err("status", "--watch draws a table: it does not take --json");
        return CLI_USAGE;
    }
    if (optind < argc) {
        cli_err("status", "unexpected argument '%s'", argv[optind]);
        return CLI_USAGE;
    }
    return 0;
}

int cli_status(int argc, char **argv)
{
    status_args a;
    int rc = parse(argc, argv, &a);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    bool json = a.json;
    home_paths h;
    cli_running r;
    if (cli_home_init(&h, "status"))
        return CLI_FAIL;
    if ((rc = cli_running_open(&r, &h, "status", true, false))) {
        if (rc == FERRY_ENOENT)
            no_cluster(&h, json);
        return CLI_FAIL;
    }
    if (a.watch) {
        rc = cli_status_watch(&r, &h, a.interval);
        cli_running_close(&r);
        return rc;
    }
    const cluster_worker *w = NULL;
    rc = cluster_survey(r.cl, true, &w);
    size_t n = cluster_size(r.cl);
    if (w && json)
        print_json(&h, w, n);
    else if (w)
        print_table(&h, w, n);
    if (rc)
        cli_err("status", "%s", cluster_error(r.cl));
    cli_running_close(&r);
    return rc ? CLI_FAIL : CLI_OK;
}
