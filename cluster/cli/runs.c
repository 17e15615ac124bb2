/* `ferry runs`: the training runs recorded under $FERRY_HOME/runs, oldest
 * first, a line each (or, with --json, one JSON object a line). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cluster/runs/runs.h"
#include "json.h"

static const char usage[] =
    "usage: ferry runs [--json]\n"
    "\n"
    "Lists the training runs recorded under $FERRY_HOME/runs, oldest first: id,\n"
    "status (finished, failed, running, interrupted), task, mode and workers,\n"
    "epochs done, and the last test loss and accuracy. Each run's directory holds\n"
    "run.json (its options) and metrics.jsonl (an event a line); `ferry plot ID`\n"
    "draws them. The records stay after `ferry shutdown`.\n"
    "\n"
    "options:\n"
    "      --json   one JSON object a run\n"
    "  -h, --help   this text\n";

static void print_line(const runs_run *r)
{
    char when[32] = "?";
    time_t t = (time_t)r->began;
    struct tm tm;
    if (localtime_r(&t, &tm))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
    const runs_point *last = r->n ? &r->points[r->n - 1] : NULL;
    printf("%-40s %-11s %s  %-10s %s x%d  epochs %zu/%ld", r->id, r->status, when,
           r->task ? r->task : "?", r->mode ? r->mode : "?", r->workers, r->n, r->epochs);
    if (last) {
        printf("  test_loss %.4f", last->test_loss);
        if (!isnan(last->test_accuracy))
            printf("  test_accuracy %.4f", last->test_accuracy);
    }
    if (r->why)
        printf("  (%s)", r->why);
    printf("\n");
}

static void print_json(const runs_run *r, const char *dir)
{
    printf("{\"id\":");
    json_str(stdout, r->id);
    printf(",\"dir\":");
    json_str(stdout, dir);
    printf(",\"status\":\"%s\",\"task\":", r->status);
    json_str(stdout, r->task ? r->task : "");
    printf(",\"module\":");
    json_str(stdout, r->module ? r->module : "");
    printf(",\"mode\":");
    json_str(stdout, r->mode ? r->mode : "");
    printf(",\"workers\":%d,\"began\":%.3f,\"epochs\":%ld,\"epochs_done\":%zu",
           r->workers, r->began, r->epochs, r->n);
    if (r->n) {
        const runs_point *last = &r->points[r->n - 1];
        printf(",\"test_loss\":%.6g", last->test_loss);
        if (!isnan(last->test_accuracy))
            printf(",\"test_accuracy\":%.6g", last->test_accuracy);
    }
    printf("}\n");
}

int cli_runs(int argc, char **argv)
{
    bool json = false;
    int rc = cli_parse_json_flag(argc, argv, usage, &json);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    if (optind != argc) {
        fputs(usage, stderr);
        return CLI_USAGE;
    }
    home_paths h;
    if (cli_home_init(&h, "runs") != 0)
        return CLI_FAIL;
    char **ids;
    size_t n;
    if (runs_ids(h.dir, &ids, &n) != 0) {
        cli_err("runs", "out of memory");
        return CLI_FAIL;
    }
    if (n == 0 && !json)
        printf("no runs recorded under %s/runs yet (`ferry submit` records each)\n",
               h.dir);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        char dir[4200], err[512] = "";
        snprintf(dir, sizeof dir, "%s/runs/%s", h.dir, ids[i]);
        runs_run r;
        if (runs_load(dir, &r, err, sizeof err) != 0) {
            cli_err("runs", "%s", err); /* one broken record hides no other */
            bad = 1;
            continue;
        }
        if (json)
            print_json(&r, dir);
        else
            print_line(&r);
        runs_run_fini(&r);
    }
    runs_ids_free(ids, n);
    return bad ? CLI_FAIL : CLI_OK;
}
