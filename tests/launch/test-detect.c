/* launch_detect: each launcher's variables as the multi-host notes give
 * them, and the ferry variables that complete or override them. */
#include <stdlib.h>
#include <string.h>

#include "tlaunch.h"

/* Detects from envp; fails the test on a refusal. */
static launch_info found(char *const *envp)
{
    launch_info li;
    char err[CONF_ERR_LEN] = "";
    cr_assert_eq(launch_detect(envp, &li, err, sizeof err), 0, "%s", err);
    return li;
}

static void expect(const launch_info *li, launch_kind kind, int rank, int world,
                   int local, const char *host, int port)
{
    cr_expect_eq(li->kind, kind, "launcher %s", launch_kind_name(li->kind));
    cr_expect_eq(li->rank, rank);
    cr_expect_eq(li->world_size, world);
    cr_expect_eq(li->local_rank, local);
    cr_expect_str_eq(li->host, host);
    cr_expect_eq(li->port, port);
}

T_TEST(detect, ferry_variables)
{
    char *env[] = {"HOME=/root",         "FERRY_RANK=2",
                   "FERRY_WORLD_SIZE=3", "FERRY_RENDEZVOUS=10.0.0.5:7100",
                   "FERRY_LOCAL_RANK=0", NULL};
    launch_info li = found(env);
    expect(&li, LAUNCH_FERRY, 2, 3, 0, "10.0.0.5", 7100);
    cr_expect_str_eq(li.rank_from, "FERRY_RANK");
    cr_expect_str_eq(li.world_from, "FERRY_WORLD_SIZE");
    cr_expect_str_eq(li.address_from, "FERRY_RENDEZVOUS");
    char *v6[] = {"FERRY_RANK=0", "FERRY_WORLD_SIZE=1", "FERRY_RENDEZVOUS=[::1]:7100",
                  NULL};
    li = found(v6);
    expect(&li, LAUNCH_FERRY, 0, 1, -1, "::1", 7100);
}

/* An srun step of 8 tasks on 4 nodes (srun -N4 -n8) in a bigger job. */
T_TEST(detect, slurm_step_takes_the_steps_node_list_not_the_jobs)
{
    char *env[] = {"SLURM_JOB_ID=42",
                   "SLURM_STEP_ID=0",
                   "SLURM_PROCID=5",
                   "SLURM_LOCALID=1",
                   "SLURM_NODEID=2",
                   "SLURM_NTASKS=8",
                   "SLURM_STEP_NUM_TASKS=8",
                   "SLURM_STEP_NUM_NODES=4",
                   "SLURM_JOB_NODELIST=n[1-6]",
                   "SLURM_NODELIST=n[3-6]",
                   "SLURM_STEP_NODELIST=n[3-6]",
                   "SLURM_STEP_TASKS_PER_NODE=2(x4)",
                   "SLURMD_NODENAME=n5",
                   NULL};
    launch_info li = found(env);
    expect(&li, LAUNCH_SLURM, 5, 8, 1, "n3", 0);
    cr_expect_str_eq(li.rank_from, "SLURM_PROCID");
    cr_expect_str_eq(li.world_from, "SLURM_STEP_NUM_TASKS");
    cr_expect_str_eq(li.address_from, "SLURM_STEP_NODELIST");
}

T_TEST(detect, slurm_compressed_lists_and_reserved_ports)
{
    char *env[] = {"SLURM_JOB_ID=7",
                   "SLURM_STEP_ID=1",
                   "SLURM_PROCID=0",
                   "SLURM_STEP_NUM_TASKS=4",
                   "SLURM_STEP_NODELIST=rack[1-2]-n[01-02]",
                   "SLURM_STEP_RESV_PORTS=20006-20007",
                   NULL};
    launch_info li = found(env);
    expect(&li, LAUNCH_SLURM, 0, 4, -1, "rack1-n01", 20006);
    cr_expect_str_eq(li.address_from, "SLURM_STEP_NODELIST, SLURM_STEP_RESV_PORTS");
    /* Without SLURM_STEP_* (an older srun): the task count and list srun
     * sets for its step. */
    char *old[] = {"SLURM_JOB_ID=7",
                   "SLURM_STEP_ID=1",
                   "SLURM_PROCID=1",
                   "SLURM_NTASKS=2",
                   "SLURM_NODELIST=n[07-08]",
                   "SLURM_STEP_RESV_PORTS=20000",
                   NULL};
    li = found(old);
    expect(&li, LAUNCH_SLURM, 1, 2, -1, "n07", 20000);
    cr_expect_str_eq(li.world_from, "SLURM_NTASKS");
    cr_expect_str_eq(li.address_from, "SLURM_NODELIST, SLURM_STEP_RESV_PORTS");
}

T_TEST(detect, torchrun_and_kubeflow_pytorchjob)
{
    char *env[] = {"RANK=3",
                   "WORLD_SIZE=4",
                   "LOCAL_RANK=1",
                   "LOCAL_WORLD_SIZE=2",
                   "GROUP_RANK=1",
                   "MASTER_ADDR=trainer-master-0",
                   "MASTER_PORT=23456",
                   NULL};
    launch_info li = found(env);
    expect(&li, LAUNCH_TORCHRUN, 3, 4, 1, "trainer-master-0", 23456);
    cr_expect_str_eq(li.address_from, "MASTER_ADDR, MASTER_PORT");
    char *v6[] = {"RANK=0", "WORLD_SIZE=1", "MASTER_ADDR=fe80::1", "MASTER_PORT=1", NULL};
    li = found(v6);
    expect(&li, LAUNCH_TORCHRUN, 0, 1, -1, "fe80::1", 1);
}

T_TEST(detect, kubeflow_trainer)
{
    char *env[] = {"PET_NODE_RANK=1",       "PET_NNODES=2",
                   "PET_NPROC_PER_NODE=1",  "PET_MASTER_ADDR=job-node-0-0.job",
                   "PET_MASTER_PORT=29400", NULL};
    launch_info li = found(env);
    expect(&li, LAUNCH_KUBEFLOW, 1, 2, 0, "job-node-0-0.job", 29400);
    cr_expect_str_eq(li.rank_from, "PET_NODE_RANK");
}

/* Indexed Job pods: the index, and what the manifest adds. */
T_TEST(detect, kubernetes_indexed_job)
{
    char *env[] = {"JOB_COMPLETION_INDEX=2",
                   "HOSTNAME=ferry-2",
                   "FERRY_WORLD_SIZE=4",
                   "FERRY_RENDEZVOUS=ferry-0.ferry-workers:7100",
                   "KUBERNETES_SERVICE_HOST=10.96.0.1",
                   NULL};
    launch_info li = found(env);
    expect(&li, LAUNCH_INDEXED_JOB, 2, 4, 0, "ferry-0.ferry-workers", 7100);
    cr_expect_str_eq(li.rank_from, "JOB_COMPLETION_INDEX");
    cr_expect_str_eq(li.world_from, "FERRY_WORLD_SIZE");
}

/* mpirun -np 4 -x FERRY_RENDEZVOUS=...: ranks 2+2 on two hosts. */
T_TEST(detect, open_mpi_with_the_address_passed_along)
{
    char *env[] = {"OMPI_COMM_WORLD_RANK=3",
                   "OMPI_COMM_WORLD_SIZE=4",
                   "OMPI_COMM_WORLD_LOCAL_RANK=1",
                   "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                   "PMIX_RANK=3",
                   "FERRY_RENDEZVOUS=h1:7100",
                   NULL};
    launch_info li = found(env);
    expect(&li, LAUNCH_OPENMPI, 3, 4, 1, "h1", 7100);
    cr_expect_str_eq(li.rank_from, "OMPI_COMM_WORLD_RANK");
    cr_expect_str_eq(li.address_from, "FERRY_RENDEZVOUS");
}

T_TEST(detect, pmi_as_hydra_or_srun_mpi_pmi2_sets_it)
{
    char *env[] = {"PMI_RANK=1", "PMI_SIZE=2", "PMI_FD=5", "FERRY_RENDEZVOUS=h1:7100",
                   NULL};
    launch_info li = found(env);
    expect(&li, LAUNCH_PMI, 1, 2, -1, "h1", 7100);
    /* srun --mpi=pmi2: PMI's and Slurm's views of one step agree. */
    char *srun[] = {"PMI_RANK=1",
                    "PMI_SIZE=2",
                    "SLURM_JOB_ID=3",
                    "SLURM_STEP_ID=0",
                    "SLURM_PROCID=1",
                    "SLURM_STEP_NUM_TASKS=2",
                    "SLURM_STEP_NODELIST=n[1-2]",
                    "FERRY_RENDEZVOUS=n1:7100",
                    NULL};
    li = found(srun);
    expect(&li, LAUNCH_PMI, 1, 2, -1, "n1", 7100);
}

/* srun torchrun: Slurm's rank is the node's, torchrun's the process's; the
 * inner launcher is the one that started the worker. */
T_TEST(detect, a_launcher_inside_another_wins)
{
    char *env[] = {"SLURM_JOB_ID=3",
                   "SLURM_STEP_ID=0",
                   "SLURM_PROCID=1",
                   "SLURM_STEP_NUM_TASKS=2",
                   "SLURM_STEP_NODELIST=n[1-2]",
                   "RANK=5",
                   "WORLD_SIZE=8",
                   "LOCAL_RANK=1",
                   "MASTER_ADDR=n1",
                   "MASTER_PORT=29500",
                   NULL};
    launch_info li = found(env);
    expect(&li, LAUNCH_TORCHRUN, 5, 8, 1, "n1", 29500);
    /* mpirun in an allocation's shell: Slurm's job without a step. */
    char *mpi[] = {"SLURM_JOB_ID=3",           "SLURM_NODELIST=n[1-2]",
                   "OMPI_COMM_WORLD_RANK=2",   "OMPI_COMM_WORLD_SIZE=4",
                   "FERRY_RENDEZVOUS=n1:7100", NULL};
    li = found(mpi);
    expect(&li, LAUNCH_OPENMPI, 2, 4, -1, "n1", 7100);
}

T_TEST(detect, ferry_rendezvous_overrides_a_launchers_address)
{
    char *env[] = {"RANK=1",
                   "WORLD_SIZE=2",
                   "MASTER_ADDR=a",
                   "MASTER_PORT=1",
                   "FERRY_RENDEZVOUS=b:7100",
                   "FERRY_WORLD_SIZE=2",
                   NULL};
    launch_info li = found(env);
    expect(&li, LAUNCH_TORCHRUN, 1, 2, -1, "b", 7100);
    cr_expect_str_eq(li.address_from, "FERRY_RENDEZVOUS");
    char *slurm[] = {"SLURM_JOB_ID=3",
                     "SLURM_STEP_ID=0",
                     "SLURM_PROCID=0",
                     "SLURM_STEP_NUM_TASKS=1",
                     "SLURM_STEP_NODELIST=n1",
                     "FERRY_RENDEZVOUS=127.0.1.1:20006",
                     NULL};
    li = found(slurm);
    expect(&li, LAUNCH_SLURM, 0, 1, -1, "127.0.1.1", 20006);
}

T_TEST(detect, the_first_of_a_repeated_variable_counts_as_getenv_reads_it)
{
    char *env[] = {"FERRY_RANK=1", "FERRY_RANK=9", "FERRY_WORLD_SIZE=2",
                   "FERRY_RENDEZVOUS=h:1", NULL};
    launch_info li = found(env);
    cr_expect_eq(li.rank, 1);
}

T_TEST(detect, the_log_line_and_the_json_say_what_was_found)
{
    char *env[] = {"SLURM_JOB_ID=3",
                   "SLURM_STEP_ID=0",
                   "SLURM_PROCID=1",
                   "SLURM_STEP_NUM_TASKS=4",
                   "SLURM_STEP_NODELIST=n[1-2]",
                   NULL};
    launch_info li = found(env);
    char line[512];
    cr_expect_str_eq(
        launch_describe(&li, line, sizeof line),
        "rank 1 of 4 from Slurm (SLURM_PROCID, SLURM_STEP_NUM_TASKS); rank 0 "
        "at n1, no port (SLURM_STEP_NODELIST)");
    char *json = launch_json(&li);
    cr_assert(json);
    cr_expect_str_eq(json, "{\"launcher\":\"slurm\",\"rank\":1,\"world_size\":4,"
                           "\"local_rank\":null,\"host\":\"n1\",\"port\":null,"
                           "\"rank_from\":\"SLURM_PROCID\",\"world_size_from\":"
                           "\"SLURM_STEP_NUM_TASKS\",\"address_from\":"
                           "\"SLURM_STEP_NODELIST\"}");
    free(json);
    char *v6[] = {"FERRY_RANK=0", "FERRY_WORLD_SIZE=2", "FERRY_RENDEZVOUS=[::1]:7100",
                  NULL};
    li = found(v6);
    cr_expect_str_eq(launch_describe(&li, line, sizeof line),
                     "rank 0 of 2 from ferry's variables (FERRY_RANK, FERRY_WORLD_SIZE); "
                     "rank 0 at [::1]:7100 (FERRY_RENDEZVOUS)");
    cr_expect_str_eq(launch_kind_name(LAUNCH_NONE), "none");
}
