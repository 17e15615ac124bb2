/* Which launcher started this process, and refusing to guess when the
 * environment does not say, or says two things. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "launch_int.h"

const char *launch_kind_name(launch_kind k)
{
    return k > LAUNCH_NONE && k < LAUNCH_KINDS ? LAUNCH_READERS[k].name : "none";
}

const char *launch_kind_title(launch_kind k)
{
    return k > LAUNCH_NONE && k < LAUNCH_KINDS ? LAUNCH_READERS[k].title : "no launcher";
}

static bool present(char *const *envp, const launch_reader *r)
{
    for (const char *const *t = r->triggers; *t; t++)
        if (launch_get(envp, *t))
            return true;
    return false;
}

static int none_found(char *const *envp, char *err, size_t errlen)
{
    char names[512] = "";
    size_t used = 0;
    for (int k = LAUNCH_NONE + 1; k < LAUNCH_KINDS; k++) {
        int n = snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "",
                         LAUNCH_READERS[k].triggers[0]);
        if (n > 0 && (size_t)n < sizeof names - used)
            used += (size_t)n;
    }
    /* FERRY_WORLD_SIZE and FERRY_RENDEZVOUS complete a launcher's variables;
     * alone they give no rank. */
    const char *orphan = launch_get(envp, "FERRY_WORLD_SIZE")   ? "FERRY_WORLD_SIZE"
                         : launch_get(envp, "FERRY_RENDEZVOUS") ? "FERRY_RENDEZVOUS"
                                                                : NULL;
    if (orphan)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "%s is set but no rank is: set FERRY_RANK too, or start the "
                         "worker with a launcher (none of %s is set)",
                         orphan, names);
    return base_errf(err, errlen, FERRY_EINVAL,
                     "no launcher found: none of %s is set (or pass --rank and --listen "
                     "without --from-env)",
                     names);
}

/* FERRY_WORLD_SIZE against the launcher's size; FERRY_RENDEZVOUS over its
 * address, which Open MPI, PMI and an Indexed Job have none of. */
static int complete(char *const *envp, launch_info *li, char *err, size_t errlen)
{
    int world;
    int rc = launch_number(envp, "FERRY_WORLD_SIZE", 1, INT_MAX, &world, err, errlen);
    if (rc && rc != FERRY_ENOENT)
        return rc;
    if (!rc && world != li->world_size)
        return base_errf(err, errlen, FERRY_EINVAL, "FERRY_WORLD_SIZE=%d but %s=%d",
                         world, li->world_from, li->world_size);
    rc = launch_rendezvous(envp, li, err, errlen);
    if (rc != FERRY_ENOENT)
        return rc;
    if (!li->host[0])
        return base_errf(
            err, errlen, FERRY_EINVAL,
            "no variable says where rank 0 is: set FERRY_RENDEZVOUS=HOST:PORT "
            "(rank 0's host and a port) in every worker's environment");
    return 0;
}

/* A launcher started inside another (srun torchrun, mpirun in an
 * allocation) has a world of its own, and the outer launcher's rank is
 * another thing; two that describe a world of the same size describe the
 * same processes, and must agree on which this one is. */
static int cross_check(char *const *envp, const launch_info *li, char *err, size_t errlen)
{
    for (int k = li->kind + 1; k < LAUNCH_KINDS; k++) {
        const launch_reader *r = &LAUNCH_READERS[k];
        launch_info other = {.kind = (launch_kind)k};
        char ignored[CONF_ERR_LEN];
        if (!present(envp, r) || r->read(envp, &other, ignored, sizeof ignored) != 0)
            continue;
        if (other.world_size == li->world_size && other.rank != li->rank)
            return base_errf(err, errlen, FERRY_EINVAL,
                             "%s=%d but %s=%d: %s around it disagrees on this process's "
                             "rank in a world of %d",
                             li->rank_from, li->rank, other.rank_from, other.rank,
                             r->title, li->world_size);
    }
    return 0;
}

int launch_detect(char *const *envp, launch_info *out, char *err, size_t errlen)
{
    int k = LAUNCH_NONE + 1;
    while (k < LAUNCH_KINDS && !present(envp, &LAUNCH_READERS[k]))
        k++;
    if (k == LAUNCH_KINDS)
        return none_found(envp, err, errlen);
    const launch_reader *r = &LAUNCH_READERS[k];
    launch_info li = {.kind = (launch_kind)k, .local_rank = -1};
    char why[CONF_ERR_LEN];
    int rc = r->read(envp, &li, why, sizeof why);
    if (!rc)
        rc = complete(envp, &li, why, sizeof why);
    if (!rc)
        rc = cross_check(envp, &li, why, sizeof why);
    if (rc)
        return base_errf(err, errlen, rc, "%s: %s", r->title, why);
    *out = li;
    return 0;
}
