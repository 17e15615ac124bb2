/* Workers added to a running cluster: `ferry start --add K` writes the
 * new workers into FERRY_HOME/grow ("rank host port" a line, port 0: the
 * worker picks one) and sends SIGHUP; the supervisor starts them as its
 * own, restarted and stopped as the first ones are, and removes the file.
 * The command then waits for their ports and appends them to the
 * cluster's state. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "supervisor_int.h"

static bool supervised(const supervisor *sv, int rank)
{
    for (size_t i = 0; i < sv->n; i++)
        if (sv->w[i].rank == rank)
            return true;
    return false;
}

/* Starts one worker of the request; false when the line is not one. */
static bool take(supervisor *sv, const char *line)
{
    sv_local l = {0};
    if (sscanf(line, "%d %255s %d", &l.rank, l.host, &l.port) != 3 || l.rank < 0 ||
        l.port < 0 || l.port > 65535) {
        sv_log(sv, "%s: not \"rank host port\": %s", HOME_GROW_FILE, line);
        return false;
    }
    if (supervised(sv, l.rank) || sv->n >= SV_MAX_WORKERS) {
        sv_log(sv, "worker %d: not added (%s)", l.rank,
               sv->n >= SV_MAX_WORKERS ? "too many workers" : "it runs already");
        return false;
    }
    sv_worker *w = sv_add_worker(sv, &l);
    sv_log(sv, "worker %d added to the cluster", l.rank);
    if (sv_spawn(w) != 0)
        sv_log(sv, "worker %d: cannot start %s", l.rank, sv->o->exe);
    return true;
}

static void on_hup(uv_signal_t *s, int signo)
{
    (void)signo;
    supervisor *sv = s->data;
    char path[HOME_FILE_MAX];
    snprintf(path, sizeof path, "%s/%s", sv->o->home->dir, HOME_GROW_FILE);
    FILE *f = fopen(path, "r");
    if (!f)
        return; /* a stray SIGHUP: nothing asked */
    char line[512];
    while (!sv->stopping && fgets(line, sizeof line, f))
        take(sv, line);
    if (sv->stopping)
        sv_log(sv, "stopping: the workers %s asks for are not started", path);
    fclose(f);
    unlink(path);
}

void sv_grow_start(supervisor *sv)
{
    uv_signal_init(&sv->loop, &sv->sighup);
    sv->sighup.data = sv;
    uv_signal_start(&sv->sighup, on_hup, SIGHUP);
}

void sv_grow_stop(supervisor *sv)
{
    uv_close((uv_handle_t *)&sv->sighup, NULL);
}
