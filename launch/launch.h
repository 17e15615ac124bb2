/* launch — what the engine that started this process says about it: its
 * rank, the world's size and where rank 0 (or the rendezvous) is, read
 * from the environment that Slurm, torchrun, Kubeflow, a Kubernetes
 * Indexed Job, Open MPI, PMI or ferry's own variables give a process.
 *
 * Pure functions over an environment array ("NAME=value" strings, as
 * `environ` holds them): nothing here reads the process's own environment,
 * so every launcher can be tested without one. Uses base/ and config/
 * (addresses, host lists). */
#ifndef FERRY_LAUNCH_H
#define FERRY_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"

/* In the order detection tries them: a launcher started inside another
 * (torchrun or mpirun in a Slurm allocation, srun in a pod) is found
 * before the one around it. */
typedef enum launch_kind {
    LAUNCH_NONE = 0,
    LAUNCH_FERRY,       /* FERRY_RANK, FERRY_WORLD_SIZE, FERRY_RENDEZVOUS */
    LAUNCH_TORCHRUN,    /* torchrun, Kubeflow's PyTorchJob: RANK, WORLD_SIZE */
    LAUNCH_KUBEFLOW,    /* Kubeflow Trainer: PET_NODE_RANK, PET_NNODES */
    LAUNCH_OPENMPI,     /* mpirun: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE */
    LAUNCH_PMI,         /* MPICH's Hydra, srun --mpi=pmi2: PMI_RANK, PMI_SIZE */
    LAUNCH_SLURM,       /* an srun step: SLURM_PROCID, SLURM_STEP_NUM_TASKS */
    LAUNCH_INDEXED_JOB, /* Kubernetes: JOB_COMPLETION_INDEX */
    LAUNCH_KINDS
} launch_kind;

/* The longest host name (RFC 1035), as config/ takes it. */
#define LAUNCH_HOST_MAX 253
/* The longest list of variable names one value came from. */
#define LAUNCH_FROM_LEN 96

typedef struct launch_info {
    launch_kind kind;
    int rank;                       /* 0 .. world_size - 1 */
    int world_size;                 /* >= 1 */
    int local_rank;                 /* on this host; -1 when the launcher does not say */
    char host[LAUNCH_HOST_MAX + 1]; /* rank 0's, or the rendezvous's */
    int port;                       /* 1..65535; 0 when the launcher gives none */
    /* Which variables said so, for the log and the refusals. */
    char rank_from[LAUNCH_FROM_LEN];
    char world_from[LAUNCH_FROM_LEN];
    char address_from[LAUNCH_FROM_LEN];
} launch_info;

/* The launcher's short name ("slurm", "torchrun", "openmpi", ...), and its
 * name for people ("Slurm", "Open MPI", ...). */
const char *launch_kind_name(launch_kind k);
const char *launch_kind_title(launch_kind k);

/* Finds the first launcher whose variables `envp` holds (NULL-terminated
 * "NAME=value" strings; the first of a repeated NAME counts) and reads it
 * into *out. Refuses to guess: returns FERRY_EINVAL with `err` naming the
 * variables when no launcher is there, when one of its variables is
 * missing or not a number in range (a rank not below the world's size),
 * when two of them contradict each other, when two launchers that describe
 * the same world (the same size) disagree on the rank, and when nothing
 * says where rank 0 is (Open MPI, PMI and an Indexed Job do not:
 * FERRY_RENDEZVOUS=HOST:PORT does). FERRY_RENDEZVOUS, where set, is the
 * address whatever the launcher; FERRY_WORLD_SIZE, where set, must agree
 * with the launcher's size, and is the size of an Indexed Job. Slurm's
 * rank 0 is the first host of the step's node list (SLURM_STEP_NODELIST,
 * never the job's), its port the first of SLURM_STEP_RESV_PORTS (0 without
 * srun --resv-ports). *out is set only on success. */
int launch_detect(char *const *envp, launch_info *out, char *err, size_t errlen);

/* The one log line a worker starts with: "rank 1 of 4 from Slurm
 * (SLURM_PROCID, SLURM_STEP_NUM_TASKS); rank 0 at n1 (SLURM_STEP_NODELIST)".
 * Returns buf. */
char *launch_describe(const launch_info *li, char *buf, size_t len);

/* *li as one line of JSON ({"launcher":"slurm","rank":1,...}): a string
 * to free(), or NULL when out of memory. */
char *launch_json(const launch_info *li);

#endif
