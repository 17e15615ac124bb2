/* What a killed worker's tasks leave behind.
 *
 * A worker kills what its tasks forked when it ends (runtime/reap.c), but
 * a worker killed by SIGKILL (the liveness check's kill, the OOM killer,
 * an operator) cannot. The supervisor is a child subreaper too, so those
 * orphans, even a task's setsid() daemon, become its children instead of
 * init's; after every worker exit it kills and reaps every child that is
 * not a running worker, and once more when the last worker has stopped.
 * A restart or a shutdown thus leaves nothing of a task running. */
#include <errno.h>
#include <string.h>

#include "runtime/runtime.h"
#include "supervisor_int.h"

void sv_orphans_adopt(supervisor *sv)
{
    int rc = rt_reap_init();
    if (rc)
        sv_log(sv, "cannot become a child subreaper (%s): what a killed worker's tasks "
                   "forked goes to init",
               strerror(-rc));
}

void sv_orphans_kill(supervisor *sv, int rank)
{
    pid_t keep[CONF_MAX_WORKERS];
    size_t n = 0;
    for (size_t i = 0; i < sv->n && n < CONF_MAX_WORKERS; i++)
        if (sv->w[i].proc)
            keep[n++] = (pid_t)sv->w[i].proc->pid;
    int killed = rt_reap_orphans(keep, n);
    if (killed == 0)
        return;
    if (rank >= 0)
        sv_log(sv, "worker %d: killed %d process(es) its tasks had forked", rank, killed);
    else
        sv_log(sv, "killed %d process(es) the workers' tasks had forked", killed);
}
