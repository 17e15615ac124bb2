/* cluster/supervisor — the daemon `ferry start` leaves behind: spawns the
 * local workers, restarts crashed or wedged ones (backing off when one
 * crashes in a loop), holds the cluster lock, and stops them all on
 * SIGTERM or once every worker has stopped.
 *
 * Where things are:
 *   supervisor.c  spawning, exits, restarts and their back-off, signals
 *   sv_crash.c    what an exit was: a stop asked for, or a crash and its record
 *   sv_live.c     the liveness ping that finds wedged or stopped workers
 *   sv_orphans.c  what a killed worker's tasks left: adopted, killed, reaped
 *   logfile.c     logs that rotate at a size */
#ifndef FERRY_CLUSTER_SUPERVISOR_H
#define FERRY_CLUSTER_SUPERVISOR_H

#include <stdbool.h>
#include <stddef.h>

#include "cluster/home/home.h"
#include "config/config.h"

/* A worker the supervisor runs on this host. */
typedef struct sv_local {
    int rank;
    char host[256]; /* no brackets */
    int port;       /* 0: the worker picks one and writes it to its port file */
} sv_local;

typedef struct sv_opts {
    const home_paths *home;
    const char *exe;        /* absolute path of the ferry executable */
    const char *token_file; /* handed to every worker */
    const sv_local *workers;
    size_t n_workers;
    int threads;
    const char *device; /* every worker's --device */
    bool bind_cores;    /* each worker to its share of this process's CPUs
                           (--bind-to core) */
    int lock_fd;        /* the cluster lock, inherited; held until exit */
    /* Liveness timeout, restart back-off, message limit, log rotation. */
    const conf_cluster *conf;
} sv_opts;

/* Runs in the process `ferry start` forked: spawns every worker of
 * o->workers (logs under logs/), restarts every worker that exits without
 * being asked to stop or stops answering pings (backing off when it crashes
 * in a loop), leaves one that fails at its start, and returns once every
 * worker has stopped (after `ferry shutdown`) or on SIGTERM, after stopping
 * them. Returns the process exit status. */
int sv_supervise(const sv_opts *o);

#endif
