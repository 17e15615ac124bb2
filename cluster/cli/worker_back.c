/* What `ferry submit` says when an async run's lost worker comes back:
 * restarted by its supervisor (how the lost process ended, as the
 * supervisor recorded it) and taken back in from the shards' current
 * values (the shard it held restored from a checkpoint), or left out for
 * the rest of the run and why. */
#include <stdio.h>

#include "cli.h"

void cli_say_worker_back(FILE *out, int rank, const char *target, int lost_in,
                         const char *how, bool back, int after, int restart, int max,
                         const char *from)
{
    if (back && from[0])
        fprintf(out,
                "worker %d (%s), lost in epoch %d (%s), restarted by its supervisor: the "
                "shard it held restored from %s; the others run epoch %d again and it "
                "rejoins after it (restart %d of at most %d)\n",
                rank, target, lost_in, how[0] ? how : "no crash record", from, after,
                restart, max);
    else if (back)
        fprintf(out,
                "worker %d (%s), lost in epoch %d (%s), restarted by its supervisor: "
                "rejoins the async run after epoch %d from the shards' current values "
                "(restart %d of at most %d)\n",
                rank, target, lost_in, how[0] ? how : "no crash record", after, restart,
                max);
    else if (restart >= max)
        fprintf(out,
                "worker %d (%s), lost in epoch %d, stays out: the run's %d restart%s "
                "(--max-restarts) are spent\n",
                rank, target, lost_in, max, max == 1 ? "" : "s");
    else
        fprintf(out,
                "worker %d (%s), lost in epoch %d, did not come back: the async run goes "
                "on without it\n",
                rank, target, lost_in);
    fflush(out);
}
