/* Each launcher's variables (Slurm's are in slurm.c): what it sets for
 * every process it starts, read and checked against each other. */
#include <limits.h>
#include <string.h>

#include "launch_int.h"

static int read_ferry(char *const *envp, launch_info *li, char *err, size_t errlen)
{
    int rc = launch_rank_world(envp, "FERRY_RANK", "FERRY_WORLD_SIZE", li, err, errlen);
    if (!rc)
        rc = launch_local_rank(envp, "FERRY_LOCAL_RANK", NULL, li, err, errlen);
    if (!rc && launch_rendezvous(envp, li, err, errlen) == FERRY_ENOENT)
        rc = base_errf(err, errlen, FERRY_EINVAL, "FERRY_RENDEZVOUS is not set");
    return rc;
}

static int read_torchrun(char *const *envp, launch_info *li, char *err, size_t errlen)
{
    int rc = launch_rank_world(envp, "RANK", "WORLD_SIZE", li, err, errlen);
    if (!rc)
        rc = launch_local_rank(envp, "LOCAL_RANK", "LOCAL_WORLD_SIZE", li, err, errlen);
    if (!rc)
        rc = launch_host_port(envp, "MASTER_ADDR", "MASTER_PORT", li, err, errlen);
    return rc;
}

/* Kubeflow Trainer hands torchrun a node's rank and the processes a node
 * runs; ferry runs one worker a node, so only one process a node has a
 * rank of its own here. */
static int read_kubeflow(char *const *envp, launch_info *li, char *err, size_t errlen)
{
    int per_node = 1;
    int rc =
        launch_number(envp, "PET_NPROC_PER_NODE", 1, INT_MAX, &per_node, err, errlen);
    if (rc && rc != FERRY_ENOENT)
        return rc;
    if (per_node != 1)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "PET_NPROC_PER_NODE=%d: ferry runs one worker a node, whose "
                         "rank is PET_NODE_RANK; set it to 1",
                         per_node);
    rc = launch_rank_world(envp, "PET_NODE_RANK", "PET_NNODES", li, err, errlen);
    li->local_rank = 0;
    if (!rc)
        rc =
            launch_host_port(envp, "PET_MASTER_ADDR", "PET_MASTER_PORT", li, err, errlen);
    return rc;
}

static int read_openmpi(char *const *envp, launch_info *li, char *err, size_t errlen)
{
    int rc = launch_rank_world(envp, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", li,
                               err, errlen);
    if (!rc)
        rc = launch_local_rank(envp, "OMPI_COMM_WORLD_LOCAL_RANK",
                               "OMPI_COMM_WORLD_LOCAL_SIZE", li, err, errlen);
    if (rc)
        return rc;
    /* mpirun's PMIx server names the same process: both or neither. */
    int pmix;
    rc = launch_number(envp, "PMIX_RANK", 0, INT_MAX - 1, &pmix, err, errlen);
    if (rc == FERRY_ENOENT)
        return 0;
    if (!rc && pmix != li->rank)
        rc = base_errf(err, errlen, FERRY_EINVAL,
                       "OMPI_COMM_WORLD_RANK=%d but PMIX_RANK=%d", li->rank, pmix);
    return rc;
}

static int read_pmi(char *const *envp, launch_info *li, char *err, size_t errlen)
{
    li->local_rank = -1;
    return launch_rank_world(envp, "PMI_RANK", "PMI_SIZE", li, err, errlen);
}

/* A Job's completions are in its spec, not in the pod's environment: the
 * manifest passes them as FERRY_WORLD_SIZE. */
static int read_indexed_job(char *const *envp, launch_info *li, char *err, size_t errlen)
{
    li->local_rank = 0;
    if (!launch_get(envp, "FERRY_WORLD_SIZE"))
        return base_errf(err, errlen, FERRY_EINVAL,
                         "FERRY_WORLD_SIZE is not set (an Indexed Job does not tell its "
                         "completions: set it to them in the pod's environment)");
    return launch_rank_world(envp, "JOB_COMPLETION_INDEX", "FERRY_WORLD_SIZE", li, err,
                             errlen);
}

static const char *const T_FERRY[] = {"FERRY_RANK", NULL};
static const char *const T_TORCHRUN[] = {"RANK", "WORLD_SIZE", NULL};
static const char *const T_KUBEFLOW[] = {"PET_NODE_RANK", "PET_NNODES", NULL};
static const char *const T_OPENMPI[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                        NULL};
static const char *const T_PMI[] = {"PMI_RANK", "PMI_SIZE", NULL};
/* SLURM_JOB_ID alone (a batch script, salloc's shell) is Slurm too: the
 * reader says that a worker must be started by srun there. */
static const char *const T_SLURM[] = {"SLURM_PROCID", "SLURM_STEP_ID", "SLURM_JOB_ID",
                                      NULL};
static const char *const T_INDEXED_JOB[] = {"JOB_COMPLETION_INDEX", NULL};

const launch_reader LAUNCH_READERS[LAUNCH_KINDS] = {
    [LAUNCH_FERRY] = {LAUNCH_FERRY, "ferry", "ferry's variables", T_FERRY, read_ferry},
    [LAUNCH_TORCHRUN] = {LAUNCH_TORCHRUN, "torchrun", "torchrun", T_TORCHRUN,
                         read_torchrun},
    [LAUNCH_KUBEFLOW] = {LAUNCH_KUBEFLOW, "kubeflow-trainer", "Kubeflow Trainer",
                         T_KUBEFLOW, read_kubeflow},
    [LAUNCH_OPENMPI] = {LAUNCH_OPENMPI, "openmpi", "Open MPI", T_OPENMPI, read_openmpi},
    [LAUNCH_PMI] = {LAUNCH_PMI, "pmi", "PMI", T_PMI, read_pmi},
    [LAUNCH_SLURM] = {LAUNCH_SLURM, "slurm", "Slurm", T_SLURM, launch_read_slurm},
    [LAUNCH_INDEXED_JOB] = {LAUNCH_INDEXED_JOB, "indexed-job", "a Kubernetes Indexed Job",
                            T_INDEXED_JOB, read_indexed_job},
};
