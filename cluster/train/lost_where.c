/* Where a sync run was when it lost a worker. The lost worker cannot say
 * (a SIGKILL leaves nothing); the ranks that survived can: each worker
 * keeps the record of its last call that stepped as it was when it ended
 * (runtime/where.c, Stats' ended_* fields), and a step that failed or was
 * cancelled because a peer vanished ends in that step, in the phase that
 * waited, naming the rank it waited for. One Stats round after the loss,
 * nothing kept or polled while the run is well. */
#include <stdio.h>
#include <string.h>

#include "train_int.h"

/* Survivor s's record of epoch e: its training call still running, or the
 * one that ended; false when it has none of that epoch. */
static bool record_of(const proto_stats_reply *rep, int e, uint64_t *step,
                      const char **phase, int *waits_for)
{
    size_t n = rep->n_where_module;
    bool lists = rep->n_where_function == n && rep->n_where_phase == n &&
                 rep->n_where_epoch == n && rep->n_where_step == n &&
                 rep->n_where_waits_for == n;
    for (size_t i = 0; lists && i < n; i++)
        if (strncmp(rep->where_function[i], "ferry.train.", 12) == 0 &&
            rep->where_epoch[i] == e && rep->where_step[i]) {
            *step = rep->where_step[i];
            *phase = rep->where_phase[i];
            *waits_for = rep->where_waits_for[i];
            return true;
        }
    if (!rep->ended_function || strncmp(rep->ended_function, "ferry.train.", 12) != 0 ||
        rep->ended_epoch != e || !rep->ended_step)
        return false;
    *step = rep->ended_step;
    *phase = rep->ended_phase ? rep->ended_phase : "";
    *waits_for = rep->ended_waits_for;
    return true;
}

void ct_lost_where(ct_run *run, int e, const bool *lost, cluster_train_lost *out)
{
    const cluster_worker *w;
    cluster_survey(run->cl, true, &w);
    for (int r = 0; r < run->k; r++) {
        out[r].step = 0;
        out[r].phase = "";
        out[r].waited = false;
    }
    for (int s = 0; s < run->k; s++) {
        const proto_stats_reply *rep = w[run->node[s]].stats;
        uint64_t step;
        const char *phase;
        int waits_for;
        if (lost[s] || !rep || !record_of(rep, e, &step, &phase, &waits_for))
            continue;
        for (int r = 0; r < run->k; r++) {
            cluster_train_lost *l = &out[r];
            bool waited = waits_for == r;
            /* One that waited for r says most; else the furthest step. */
            if (!lost[r] || l->waited || (!waited && step <= l->step))
                continue;
            l->step = step;
            l->phase = phase;
            l->waited = waited;
        }
    }
}
