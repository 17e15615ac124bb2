/* A training run that grows: which workers the running cluster has now
 * (`ferry start --add` appends them to its state), and the line that says
 * one was taken in. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* The state as last read: a run asks about each worker slot past its
 * cluster at every checkpoint, and the file changes only when an add
 * replaces it (a new file: base_write_atomic renames one over it). */
static struct {
    bool loaded;
    char path[HOME_PATH_MAX];
    struct stat st;
    conf_cluster conf;
} seen;

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* The state of h, read again only when its file changed; NULL when there
 * is none (shut down meanwhile: nothing joined). */
static const conf_cluster *state_of(const home_paths *h)
{
    struct stat st;
    if (stat(h->state, &st) != 0)
        return NULL;
    if (seen.loaded && strcmp(seen.path, h->state) == 0 && same_file(&seen.st, &st))
        return &seen.conf;
    if (seen.loaded)
        conf_fini(&seen.conf);
    seen.loaded = false;
    char err[CONF_ERR_LEN];
    conf_defaults(&seen.conf);
    if (conf_load(&seen.conf, h->state, err, sizeof err) != 0) {
        conf_fini(&seen.conf);
        return NULL;
    }
    seen.loaded = true;
    seen.st = st;
    snprintf(seen.path, sizeof seen.path, "%s", h->state);
    return &seen.conf;
}

bool cli_joined_worker(const home_paths *h, int worker, char *target, size_t len)
{
    /* A rendezvous world is not this home's cluster. */
    if (!h || cli_remote_given())
        return false;
    const conf_cluster *conf = state_of(h);
    bool has = conf && worker >= 0 && (size_t)worker < conf->n_workers;
    if (has)
        has = (size_t)snprintf(target, len, "%s", conf->workers[worker].address) < len;
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
