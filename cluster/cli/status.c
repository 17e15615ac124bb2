/* `ferry status`: one row per worker, from a Ping and a Stats call to each. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "json.h"

static const char usage[] =
    "usage: ferry status [--json]\n"
    "\n"
    "Shows every worker of the cluster running under $FERRY_HOME: rank, address,\n"
    "pid, device, calls served, calls in flight, uptime and health. Exits 1 when\n"
    "no cluster runs or a worker does not answer.\n"
    "\n"
    "options:\n"
    "      --json     one JSON object instead of the table\n"
    "  -h, --help     this text\n"
    "  -V, --version  ferry's version\n";

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

static void health_text(const cluster_worker *w, char *buf, size_t len)
{
    if (!w->ping)
        snprintf(buf, len, "DOWN");
    else if (w->ping->restarts)
        snprintf(buf, len, "ok (restarted %ux)", w->ping->restarts);
    else
        snprintf(buf, len, "ok");
}

static void print_table(const cluster_worker *w, size_t n)
{
    printf("%-4s  %-21s  %-7s  %-34s  %8s  %9s  %7s  %s\n", "RANK", "ADDRESS", "PID",
           "DEVICE", "CALLS", "IN FLIGHT", "UPTIME", "HEALTH");
    for (size_t i = 0; i < n; i++) {
        char up[32] = "-", health[64], pid[16] = "-", calls[24] = "-", inflight[16] = "-";
        health_text(&w[i], health, sizeof health);
        if (w[i].ping) {
            format_uptime(w[i].ping->uptime_s, up, sizeof up);
            snprintf(pid, sizeof pid, "%d", w[i].ping->pid);
        }
        if (w[i].stats) {
            snprintf(calls, sizeof calls, "%llu",
                     (unsigned long long)w[i].stats->calls_served);
            snprintf(inflight, sizeof inflight, "%u", w[i].stats->in_flight);
        }
        printf("%-4d  %-21s  %-7s  %-34.34s  %8s  %9s  %7s  %s\n", w[i].rank, w[i].target,
               pid, w[i].ping ? w[i].ping->device : "-", calls, inflight, up, health);
        if (w[i].ping && w[i].ping->last_crash && w[i].ping->last_crash[0])
            printf("      last crash: %s\n", w[i].ping->last_crash);
    }
}

static void print_json(const cli_home *h, const cluster_worker *w, size_t n)
{
    printf("{\"ferry_home\":");
    json_str(stdout, h->dir);
    printf(",\"workers\":[");
    for (size_t i = 0; i < n; i++) {
        char health[64];
        health_text(&w[i], health, sizeof health);
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
        printf(",\"health\":");
        json_str(stdout, health);
        printf("}");
    }
    printf("]}\n");
}

int cli_status(int argc, char **argv)
{
    bool json;
    int rc = cli_parse_json_flag(argc, argv, usage, &json);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    if (optind < argc) {
        cli_err("status", "unexpected argument '%s'", argv[optind]);
        return CLI_USAGE;
    }
    cli_home h;
    cli_running r;
    if (cli_home_init(&h, "status") || cli_running_open(&r, &h, "status", false, false))
        return CLI_FAIL;
    const cluster_worker *w = NULL;
    rc = cluster_survey(r.cl, true, &w);
    size_t n = cluster_size(r.cl);
    if (w && json)
        print_json(&h, w, n);
    else if (w)
        print_table(w, n);
    if (rc)
        cli_err("status", "%s", cluster_error(r.cl));
    cli_running_close(&r);
    return rc ? CLI_FAIL : CLI_OK;
}
