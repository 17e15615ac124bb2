/* What `ferry start` and `ferry start --add` wait for and then print: the
 * ports of workers that pick their own, every worker answering, one line
 * for each new worker. Each wait gives up at its deadline or when the
 * caller's check says why it should. */
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "cli.h"
#include "cluster/supervisor/supervisor.h"

#define POLL_MS 10

static double now_ms(void)
{
    return (double)uv_hrtime() / 1e6;
}

int cli_start_wait_ports(const cli_start_wait *w, sv_local *local, size_t n)
{
    for (;;) {
        size_t missing = n; /* the first worker whose port is not known */
        for (size_t i = 0; i < n; i++) {
            if (!local[i].port) {
                char path[CLI_FILE_MAX];
                long port;
                home_worker_file(w->h, local[i].rank, "port", path, sizeof path);
                if (home_read_number(path, 1, 65535, &port))
                    local[i].port = (int)port;
            }
            if (!local[i].port && missing == n)
                missing = i;
        }
        if (missing == n)
            return 0;
        int rc = w->gave_up(w->data);
        if (rc)
            return rc;
        if (now_ms() > w->deadline) {
            cli_err("start",
                    "%sworker %d did not bind a port within the timeout (see %s)",
                    w->what, local[missing].rank, w->h->logs);
            return FERRY_ETIMEDOUT;
        }
        usleep(POLL_MS * 1000);
    }
}

int cli_start_wait_ready(const cli_start_wait *w, cluster *cl)
{
    for (;;) {
        double left = w->deadline - now_ms();
        int rc = cluster_wait_ready_from(cl, w->from,
                                         left < 200 ? (left > 1 ? (int64_t)left : 1) : 200);
        if (rc == 0)
            return 0;
        int why = w->gave_up(w->data);
        if (why)
            return why;
        if (now_ms() >= w->deadline) {
            /* Each wait above was a slice: the error names the whole. */
            const char *e = cluster_error(cl), *which = strchr(e, ';');
            cli_err("start",
                    "%snot every worker answered within %lld ms (--timeout-ms)%s",
                    w->what, w->timeout_ms, which ? which : "");
            return rc;
        }
    }
}

int cli_start_report(cluster *cl, size_t from, double t0)
{
    const cluster_worker *w = NULL;
    int rc = cluster_survey(cl, true, &w);
    size_t n = cluster_size(cl);
    /* An add answers for its own workers: a failure of an older one (the
     * survey names the first in rank order) is not the add's. */
    bool own_answered = w != NULL;
    for (size_t i = from; own_answered && i < n; i++)
        own_answered = w[i].ping && w[i].stats;
    if (from && own_answered)
        rc = 0;
    /* A start that fails prints no worker lines: they would read as a
     * cluster that runs, and start is about to stop it. */
    if (rc) {
        cli_err("start", "%s%s", from ? "--add: " : "", cluster_error(cl));
        return rc;
    }
    for (size_t i = from; w && i < n; i++)
        printf("worker %d  %s  pid %d  %s\n", w[i].rank, w[i].target, w[i].ping->pid,
               w[i].ping->device);
    if (from)
        printf("%zu worker(s) added: the cluster has %zu\n", n - from, n);
    else
        printf("%zu worker(s) ready in %.2f s\n", n, (now_ms() - t0) / 1e3);
    return 0;
}
