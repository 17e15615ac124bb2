/* `ferry worker --from-env`: the worker's rank from the engine that
 * started it. What the launcher says about the world and rank 0 is
 * reported; the worker serves at --listen as any other.
 *
 * Without --state-dir, its state is FERRY_HOME/workers/<rank>, where it
 * also records the host it is reached at (`host`) and, once listening,
 * its port (`port`): `ferry start --slurm` and `ferry start --attach N`
 * wait for those records, so that workers an engine started on any host
 * that sees FERRY_HOME, each on a port it bound itself, become a cluster. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "launch/launch.h"
#include "wm_int.h"

/* Sets o->state_dir and o->port_file under FERRY_HOME (unless given) and
 * writes the host record. Returns -1 to go on, else the exit status. */
static int record(wm_options *o, int rank)
{
    static char dir[4096], port_file[4096 + 8];
    char home[4096], rel[64], path[4096 + 8], host[256];
    int port;
    if (o->state_dir || !o->listen || conf_home(home, sizeof home) != 0)
        return -1;
    if (conf_split_address(o->listen, host, sizeof host, &port) != 0)
        return -1; /* rt_worker_main says what is wrong with it */
    /* A wildcard listens everywhere: others reach this host by its name. */
    if (conf_is_wildcard(host) && gethostname(host, sizeof host) != 0)
        return -1;
    snprintf(rel, sizeof rel, "workers/%d", rank);
    if (conf_home_path(dir, sizeof dir, home, rel) || conf_mkdirs(dir, 0700)) {
        fprintf(stderr, "ferry worker: cannot create %s/%s\n", home, rel);
        return EXIT_FAIL;
    }
    o->state_dir = dir;
    /* An earlier worker's records must not pass for this one's. */
    static const char *stale[] = {"port", "stopped"};
    for (size_t i = 0; i < sizeof stale / sizeof stale[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, stale[i]);
        unlink(path);
    }
    if (!o->port_file) {
        snprintf(port_file, sizeof port_file, "%s/port", dir);
        o->port_file = port_file;
    }
    size_t len = strlen(host);
    host[len++] = '\n';
    snprintf(path, sizeof path, "%s/host", dir);
    if (base_write_atomic(path, host, len, false) != 0) {
        fprintf(stderr, "ferry worker: cannot write %s\n", path);
        return EXIT_FAIL;
    }
    return -1;
}

/* Rank 0 serves the rendezvous where the launcher says rank 0 is: with
 * --listen's port 0 (each rank its own free port, as one command line for
 * every rank of mpirun has it), rank 0 takes the launcher's port. */
static void rank0_port(wm_options *o, const launch_info *li)
{
    static char listen[300];
    char host[256];
    int port;
    if (li->rank != 0 || li->port <= 0 || !o->listen ||
        conf_split_address(o->listen, host, sizeof host, &port) != 0)
        return;
    if (port == 0) {
        o->listen = conf_format_address(listen, sizeof listen, host, li->port);
    } else if (port != li->port) {
        fprintf(stderr,
                "ferry worker: rank 0 listens on port %d, but the launcher says rank 0 "
                "is at %s:%d: the other ranks cannot join it there\n",
                port, li->host, li->port);
    }
}

int wm_from_env(wm_options *o, char *const *envp)
{
    if (!o->from_env)
        return -1;
    launch_info li;
    char err[CONF_ERR_LEN];
    if (launch_detect(envp, &li, err, sizeof err) != 0) {
        fprintf(stderr, "ferry worker: %s\n", err);
        return EXIT_FAIL;
    }
    if (o->print) {
        char *json = launch_json(&li);
        if (!json) {
            fputs("ferry worker: out of memory\n", stderr);
            return EXIT_FAIL;
        }
        puts(json);
        free(json);
        return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
    }
    char line[512];
    fprintf(stderr, "ferry worker: %s\n", launch_describe(&li, line, sizeof line));
    o->rank = li.rank;
    o->world_size = li.world_size;
    if (li.port > 0)
        conf_format_address(o->rendezvous, sizeof o->rendezvous, li.host, li.port);
    rank0_port(o, &li);
    return record(o, li.rank);
}
