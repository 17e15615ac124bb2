/* Slurm: a worker is one task of an srun step. Rank 0 is on the first
 * host of the step's node list, which is not the job's: a 2-node step in
 * a 4-node job gets n[1-2] against n[1-4]. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "launch_int.h"

/* The first port of SLURM_STEP_RESV_PORTS ("20000-20001", "20000,20005"). */
static int reserved_port(const char *v, int *port, char *err, size_t errlen)
{
    long p = 0;
    size_t i = 0;
    while (v[i] >= '0' && v[i] <= '9' && i < 6)
        p = p * 10 + (v[i++] - '0');
    if (i == 0 || p < 1 || p > 65535 || (v[i] && v[i] != '-' && v[i] != ','))
        return base_errf(err, errlen, FERRY_EINVAL,
                         "SLURM_STEP_RESV_PORTS='%s': expected ports such as 20000-20003",
                         v);
    *port = (int)p;
    return 0;
}

static int absent_ok(int rc)
{
    return rc == FERRY_ENOENT ? 0 : rc;
}

/* The step's hosts: their count against the step's nodes and tasks, the
 * first as rank 0's host. */
static int step_hosts(char *const *envp, launch_info *li, char *err, size_t errlen)
{
    const char *var = "SLURM_STEP_NODELIST";
    const char *list = launch_get(envp, var);
    if (!list) {
        /* srun sets both to the step's list; SLURM_JOB_NODELIST is the job's. */
        var = "SLURM_NODELIST";
        list = launch_get(envp, var);
    }
    if (!list)
        return base_errf(err, errlen, FERRY_EINVAL, "SLURM_STEP_NODELIST is not set");
    conf_hosts hosts;
    char why[CONF_ERR_LEN];
    if (conf_hostlist_expand(list, &hosts, why, sizeof why))
        return base_errf(err, errlen, FERRY_EINVAL, "%s: %s", var, why);
    /* Absent, the step's node count and this node's index say nothing. */
    int n = (int)hosts.n, nodes = n, node = 0;
    int rc = absent_ok(
        launch_number(envp, "SLURM_STEP_NUM_NODES", 1, INT_MAX, &nodes, err, errlen));
    if (!rc)
        rc = absent_ok(
            launch_number(envp, "SLURM_NODEID", 0, INT_MAX, &node, err, errlen));
    if (rc)
        goto out;
    if (nodes != n)
        rc = base_errf(err, errlen, FERRY_EINVAL,
                       "SLURM_STEP_NUM_NODES=%d but %s='%s' names %d host(s)", nodes, var,
                       list, n);
    else if (n > li->world_size)
        rc = base_errf(err, errlen, FERRY_EINVAL,
                       "%s='%s' names %d hosts for %s=%d task(s)", var, list, n,
                       li->world_from, li->world_size);
    else if (node >= n)
        rc =
            base_errf(err, errlen, FERRY_EINVAL,
                      "SLURM_NODEID=%d but %s='%s' names %d host(s)", node, var, list, n);
    if (!rc) {
        /* conf_hostlist_expand() names no host longer than li->host holds. */
        snprintf(li->host, sizeof li->host, "%s", hosts.names[0]);
        snprintf(li->address_from, sizeof li->address_from, "%s", var);
    }
out:
    conf_hosts_fini(&hosts);
    return rc;
}

int launch_read_slurm(char *const *envp, launch_info *li, char *err, size_t errlen)
{
    /* A batch script runs once, on the first node: every worker started
     * from it directly would be rank 0 of a world of its own. */
    if (!launch_get(envp, "SLURM_STEP_ID"))
        return base_errf(
            err, errlen, FERRY_EINVAL,
            "SLURM_STEP_ID is not set: this runs in a Slurm job but not in a "
            "step of it (a batch script, salloc's shell); start the workers "
            "with srun");
    const char *world_var = launch_get(envp, "SLURM_STEP_NUM_TASKS")
                                ? "SLURM_STEP_NUM_TASKS"
                                : "SLURM_NTASKS";
    if (!launch_get(envp, world_var))
        return base_errf(err, errlen, FERRY_EINVAL, "SLURM_STEP_NUM_TASKS is not set");
    int rc = launch_rank_world(envp, "SLURM_PROCID", world_var, li, err, errlen);
    if (!rc)
        rc = launch_local_rank(envp, "SLURM_LOCALID", NULL, li, err, errlen);
    if (!rc)
        rc = step_hosts(envp, li, err, errlen);
    const char *ports = launch_get(envp, "SLURM_STEP_RESV_PORTS");
    li->port = 0;
    if (!rc && ports && !(rc = reserved_port(ports, &li->port, err, errlen))) {
        size_t used = strlen(li->address_from);
        snprintf(li->address_from + used, sizeof li->address_from - used,
                 ", SLURM_STEP_RESV_PORTS");
    }
    return rc;
}
