/* launch_detect refuses to guess: every missing, malformed or
 * contradictory variable is an error that names it. */
#include <string.h>

#include "tlaunch.h"

typedef struct refusal {
    const char *why; /* for the failure message */
    char *env[12];
    const char *message;
} refusal;

#define STEP "SLURM_JOB_ID=9", "SLURM_STEP_ID=0"

static const refusal REFUSALS[] = {
    {"no launcher",
     {"HOME=/root", "PATH=/bin"},
     "no launcher found: none of FERRY_RANK, RANK, PET_NODE_RANK, OMPI_COMM_WORLD_RANK, "
     "PMI_RANK, SLURM_PROCID, JOB_COMPLETION_INDEX is set"},
    {"an empty environment", {NULL}, "no launcher found"},
    {"ferry's size without a rank",
     {"FERRY_WORLD_SIZE=2"},
     "FERRY_WORLD_SIZE is set but no rank is: set FERRY_RANK too"},
    {"ferry's address without a rank",
     {"FERRY_RENDEZVOUS=h:1"},
     "FERRY_RENDEZVOUS is set but no rank is"},
    {"ferry without a size",
     {"FERRY_RANK=0", "FERRY_RENDEZVOUS=h:1"},
     "ferry's variables: FERRY_WORLD_SIZE is not set"},
    {"ferry without an address",
     {"FERRY_RANK=0", "FERRY_WORLD_SIZE=1"},
     "ferry's variables: FERRY_RENDEZVOUS is not set"},
    {"an address without a port",
     {"FERRY_RANK=0", "FERRY_WORLD_SIZE=1", "FERRY_RENDEZVOUS=h"},
     "FERRY_RENDEZVOUS: expected a host name or address and a port from 1 to 65535, got "
     "'h'"},
    {"port 0",
     {"FERRY_RANK=0", "FERRY_WORLD_SIZE=1", "FERRY_RENDEZVOUS=h:0"},
     "got 'h:0'"},
    {"a rank past the world",
     {"RANK=4", "WORLD_SIZE=4", "MASTER_ADDR=h", "MASTER_PORT=1"},
     "torchrun: RANK=4 is not below WORLD_SIZE=4"},
    {"a size without a rank",
     {"WORLD_SIZE=4", "MASTER_ADDR=h", "MASTER_PORT=1"},
     "torchrun: RANK is not set"},
    {"a rank that is no number",
     {"RANK=one", "WORLD_SIZE=4"},
     "torchrun: RANK='one': expected a whole number from 0 up"},
    {"a negative rank",
     {"RANK=-1", "WORLD_SIZE=4"},
     "RANK='-1': expected a whole number"},
    {"a rank with a sign",
     {"RANK=+1", "WORLD_SIZE=4"},
     "RANK='+1': expected a whole number"},
    {"a rank with junk",
     {"RANK=1x", "WORLD_SIZE=4"},
     "RANK='1x': expected a whole number"},
    {"a rank past int",
     {"RANK=99999999999", "WORLD_SIZE=4"},
     "RANK='99999999999': expected a whole number"},
    {"a world of none",
     {"RANK=0", "WORLD_SIZE=0"},
     "WORLD_SIZE='0': expected a whole number from 1 up"},
    {"no port",
     {"RANK=0", "WORLD_SIZE=1", "MASTER_ADDR=h"},
     "torchrun: MASTER_PORT is not set"},
    {"no master",
     {"RANK=0", "WORLD_SIZE=1", "MASTER_PORT=1"},
     "torchrun: MASTER_ADDR is not set"},
    {"a port past 65535",
     {"RANK=0", "WORLD_SIZE=1", "MASTER_ADDR=h", "MASTER_PORT=70000"},
     "MASTER_ADDR, MASTER_PORT: expected a host name or address and a port from 1 to "
     "65535, "
     "got 'h:70000'"},
    {"a host with a blank",
     {"RANK=0", "WORLD_SIZE=1", "MASTER_ADDR=a b", "MASTER_PORT=1"},
     "got 'a b:1'"},
    {"a local rank past the local size",
     {"RANK=0", "WORLD_SIZE=4", "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=h",
      "MASTER_PORT=1"},
     "torchrun: LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"},
    {"Kubeflow with several processes a node",
     {"PET_NODE_RANK=0", "PET_NNODES=2", "PET_NPROC_PER_NODE=4", "PET_MASTER_ADDR=h",
      "PET_MASTER_PORT=1"},
     "Kubeflow Trainer: PET_NPROC_PER_NODE=4: ferry runs one worker a node"},
    {"Kubeflow without nodes",
     {"PET_NODE_RANK=0", "PET_MASTER_ADDR=h", "PET_MASTER_PORT=1"},
     "Kubeflow Trainer: PET_NNODES is not set"},
    {"Open MPI with no address",
     {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2"},
     "Open MPI: no variable says where rank 0 is: set FERRY_RENDEZVOUS=HOST:PORT"},
    {"Open MPI against PMIx",
     {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "PMIX_RANK=0",
      "FERRY_RENDEZVOUS=h:1"},
     "Open MPI: OMPI_COMM_WORLD_RANK=1 but PMIX_RANK=0"},
    {"Open MPI's local rank",
     {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=2",
      "OMPI_COMM_WORLD_LOCAL_SIZE=2", "FERRY_RENDEZVOUS=h:1"},
     "OMPI_COMM_WORLD_LOCAL_RANK=2 is not below OMPI_COMM_WORLD_LOCAL_SIZE=2"},
    {"PMI with no address",
     {"PMI_RANK=0", "PMI_SIZE=2"},
     "PMI: no variable says where rank 0 is"},
    {"PMI without a size",
     {"PMI_RANK=0", "FERRY_RENDEZVOUS=h:1"},
     "PMI: PMI_SIZE is not set"},
    {"a batch script",
     {"SLURM_JOB_ID=9", "SLURM_PROCID=0", "SLURM_NODELIST=n[1-2]"},
     "Slurm: SLURM_STEP_ID is not set: this runs in a Slurm job but not in a step of it"},
    {"a step without its tasks",
     {STEP, "SLURM_PROCID=0", "SLURM_STEP_NODELIST=n1"},
     "Slurm: SLURM_STEP_NUM_TASKS is not set"},
    {"a step without its nodes",
     {STEP, "SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=2"},
     "Slurm: SLURM_STEP_NODELIST is not set"},
    {"only the job's nodes",
     {STEP, "SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=2", "SLURM_JOB_NODELIST=n[1-2]"},
     "Slurm: SLURM_STEP_NODELIST is not set"},
    {"a step without a rank",
     {STEP, "SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_NODELIST=n1"},
     "Slurm: SLURM_PROCID is not set"},
    {"a malformed node list",
     {STEP, "SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_NODELIST=n[1-2"},
     "Slurm: SLURM_STEP_NODELIST: this '[' is not closed at character 2 of host list "
     "'n[1-2'"},
    {"nodes that do not match the list",
     {STEP, "SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=4", "SLURM_STEP_NUM_NODES=2",
      "SLURM_STEP_NODELIST=n[1-3]"},
     "Slurm: SLURM_STEP_NUM_NODES=2 but SLURM_STEP_NODELIST='n[1-3]' names 3 host(s)"},
    {"more nodes than tasks",
     {STEP, "SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_NODELIST=n[1-3]"},
     "Slurm: SLURM_STEP_NODELIST='n[1-3]' names 3 hosts for SLURM_STEP_NUM_TASKS=2 "
     "task(s)"},
    {"a node past the list",
     {STEP, "SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=2", "SLURM_NODEID=2",
      "SLURM_STEP_NODELIST=n[1-2]"},
     "Slurm: SLURM_NODEID=2 but SLURM_STEP_NODELIST='n[1-2]' names 2 host(s)"},
    {"reserved ports that are not",
     {STEP, "SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_NODELIST=n[1-2]",
      "SLURM_STEP_RESV_PORTS=any"},
     "Slurm: SLURM_STEP_RESV_PORTS='any': expected ports such as 20000-20003"},
    {"a Slurm rank past the step",
     {STEP, "SLURM_PROCID=2", "SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_NODELIST=n[1-2]"},
     "Slurm: SLURM_PROCID=2 is not below SLURM_STEP_NUM_TASKS=2"},
    {"an Indexed Job without its size",
     {"JOB_COMPLETION_INDEX=0", "FERRY_RENDEZVOUS=h:1"},
     "a Kubernetes Indexed Job: FERRY_WORLD_SIZE is not set (an Indexed Job does not "
     "tell "
     "its completions"},
    {"an Indexed Job without an address",
     {"JOB_COMPLETION_INDEX=0", "FERRY_WORLD_SIZE=2"},
     "a Kubernetes Indexed Job: no variable says where rank 0 is"},
    {"an index past the completions",
     {"JOB_COMPLETION_INDEX=2", "FERRY_WORLD_SIZE=2", "FERRY_RENDEZVOUS=h:1"},
     "JOB_COMPLETION_INDEX=2 is not below FERRY_WORLD_SIZE=2"},
    {"ferry's size against the launcher's",
     {STEP, "SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=4", "SLURM_STEP_NODELIST=n[1-2]",
      "FERRY_WORLD_SIZE=8"},
     "Slurm: FERRY_WORLD_SIZE=8 but SLURM_STEP_NUM_TASKS=4"},
    {"a malformed ferry size",
     {"RANK=0", "WORLD_SIZE=1", "MASTER_ADDR=h", "MASTER_PORT=1", "FERRY_WORLD_SIZE=x"},
     "torchrun: FERRY_WORLD_SIZE='x': expected a whole number from 1 up"},
    {"two launchers of one world",
     {STEP, "SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_NODELIST=n[1-2]",
      "PMI_RANK=1", "PMI_SIZE=2", "FERRY_RENDEZVOUS=n1:7100"},
     "PMI: PMI_RANK=1 but SLURM_PROCID=0: Slurm around it disagrees on this process's "
     "rank "
     "in a world of 2"},
    {"ferry's rank against Slurm's",
     {STEP, "SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=2", "SLURM_STEP_NODELIST=n[1-2]",
      "FERRY_RANK=1", "FERRY_WORLD_SIZE=2", "FERRY_RENDEZVOUS=n1:7100"},
     "ferry's variables: FERRY_RANK=1 but SLURM_PROCID=0: Slurm around it disagrees"},
};

T_TEST(refuse, every_missing_or_contradictory_variable_is_named)
{
    for (size_t i = 0; i < sizeof REFUSALS / sizeof REFUSALS[0]; i++) {
        const refusal *r = &REFUSALS[i];
        launch_info li;
        memset(&li, 0x5a, sizeof li);
        char err[CONF_ERR_LEN] = "";
        int rc = launch_detect(r->env, &li, err, sizeof err);
        cr_expect_eq(rc, FERRY_EINVAL, "%s: taken", r->why);
        cr_expect(strstr(err, r->message) != NULL, "%s: got '%s', expected '%s'", r->why,
                  err, r->message);
        cr_expect_eq(li.rank, 0x5a5a5a5a, "%s: *out is set only on success", r->why);
    }
}

T_TEST(refuse, a_null_environment_is_one_without_a_launcher)
{
    launch_info li;
    char err[CONF_ERR_LEN];
    cr_expect_eq(launch_detect(NULL, &li, err, sizeof err), FERRY_EINVAL);
    cr_expect(strstr(err, "no launcher found"), "%s", err);
}
