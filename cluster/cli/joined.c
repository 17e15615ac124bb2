/* A training run that grows: which workers the running cluster has now
 * (`ferry start --add` appends them to its state), and the line that says
 * one was taken in. */
#include <stdio.h>

#include "cli.h"

bool cli_joined_worker(const home_paths *h, int worker, char *target, size_t len)
{
    /* A rendezvous world is not this home's cluster. */
    if (!h || cli_remote_given())
        return false;
    conf_cluster conf;
    char err[CONF_ERR_LEN];
    conf_defaults(&conf);
    if (conf_load(&conf, h->state, err, sizeof err) != 0) {
        conf_fini(&conf);
        return false; /* shut down meanwhile: nothing joined */
    }
    bool has = worker >= 0 && (size_t)worker < conf.n_workers;
    if (has)
        has = (size_t)snprintf(target, len, "%s", conf.workers[worker].address) < len;
    conf_fini(&conf);
    return has;
}

void cli_say_joined(FILE *f, int worker, const char *target, int epoch, const char *from,
                    int workers)
{
    fprintf(f,
            "worker %d (%s) joined: taken in after epoch %d; every rank continues from "
            "%s on %d workers, the global batch sliced over them\n",
            worker, target, epoch, from, workers);
    fflush(f);
}
