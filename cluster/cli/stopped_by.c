/* Why a submit's calls failed when the operator shut the cluster down
 * under it: its workers vanish mid-call, and all the master itself can see
 * is a lost connection or a ping that went unanswered. `ferry shutdown`
 * leaves the time it began in $FERRY_HOME/shutdown-at (kept after the
 * state is gone), and a submit that fails checks it. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "cli.h"

static void path_of(const home_paths *h, char *buf, size_t len)
{
    snprintf(buf, len, "%s/shutdown-at", h->dir);
}

int cli_shutdown_mark(const home_paths *h)
{
    char path[CLI_FILE_MAX];
    path_of(h, path, sizeof path);
    return home_write_number(path, (long)base_wall_ms());
}

static bool said;

static void explain(const home_paths *h, const char *cmd, int64_t since_ms, bool first)
{
    char path[CLI_FILE_MAX];
    long at;
    path_of(h, path, sizeof path);
    if (said || !home_read_number(path, 1, INT64_MAX, &at) || at < since_ms)
        return;
    said = true;
    time_t s = (time_t)(at / 1000);
    struct tm tm;
    char when[32];
    strftime(when, sizeof when, "%H:%M:%S", localtime_r(&s, &tm));
    /* Not through cli_err: this may be its preface. */
    fprintf(
        stderr,
        "ferry %s: the cluster was shut down (`ferry shutdown` at %s) while this ran: "
        "that is why its calls failed%s\n",
        cmd, when, first ? "; what they saw:" : "");
}

void cli_shutdown_explain(const home_paths *h, const char *cmd, int64_t since_ms)
{
    explain(h, cmd, since_ms, false);
}

void cli_shutdown_explain_before(const home_paths *h, const char *cmd, int64_t since_ms)
{
    explain(h, cmd, since_ms, true);
}

static void explain_first(void *arg)
{
    const cli_shutdown_watch *w = arg;
    explain(w->h, w->cmd, w->since_ms, true);
}

void cli_shutdown_explain_first(cli_shutdown_watch *w)
{
    cli_err_preface(explain_first, w);
}
