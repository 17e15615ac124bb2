/* The real `ferry worker --from-env`, run with an environment of the
 * test's making: --print's JSON, a refusal's message and status, and a
 * worker that serves with the rank its launcher gave it. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tchild.h"
#include "tcommon.h"
#include "tlaunch.h"

static char OUT[8192], ERR[8192];

T_TEST(print, prints_what_an_srun_step_says_as_json)
{
    char *argv[] = {"ferry", "worker", "--from-env", "--print", NULL};
    char *env[] = {"SLURM_JOB_ID=42",
                   "SLURM_STEP_ID=0",
                   "SLURM_PROCID=3",
                   "SLURM_LOCALID=1",
                   "SLURM_STEP_NUM_TASKS=8",
                   "SLURM_STEP_NODELIST=rack[1-2]-n[01-02]",
                   "SLURM_STEP_RESV_PORTS=20000-20003",
                   NULL};
    int status = t_run(argv, env, OUT, sizeof OUT, ERR, sizeof ERR);
    cr_expect_eq(status, 0, "status %d: %s", status, ERR);
    cr_expect_str_eq(OUT, "{\"launcher\":\"slurm\",\"rank\":3,\"world_size\":8,"
                          "\"local_rank\":1,\"host\":\"rack1-n01\",\"port\":20000,"
                          "\"rank_from\":\"SLURM_PROCID\",\"world_size_from\":"
                          "\"SLURM_STEP_NUM_TASKS\",\"address_from\":"
                          "\"SLURM_STEP_NODELIST, SLURM_STEP_RESV_PORTS\"}\n");
    cr_expect_str_eq(ERR, "");
}

T_TEST(print, a_contradiction_stops_it_with_status_1_naming_the_variables)
{
    char *argv[] = {"ferry", "worker", "--from-env", "--print", NULL};
    char *env[] = {"RANK=4", "WORLD_SIZE=4", "MASTER_ADDR=h", "MASTER_PORT=1", NULL};
    int status = t_run(argv, env, OUT, sizeof OUT, ERR, sizeof ERR);
    cr_expect_eq(status, 1);
    cr_expect_str_eq(OUT, "");
    cr_expect_str_eq(ERR, "ferry worker: torchrun: RANK=4 is not below WORLD_SIZE=4\n");
}

T_TEST(print, options_that_do_not_go_together_are_usage_mistakes)
{
    char *env[] = {"FERRY_RANK=0", "FERRY_WORLD_SIZE=1", "FERRY_RENDEZVOUS=h:1", NULL};
    char *alone[] = {"ferry", "worker", "--print", NULL};
    cr_expect_eq(t_run(alone, env, OUT, sizeof OUT, ERR, sizeof ERR), 2);
    cr_expect(strstr(ERR, "--print goes with --from-env"), "%s", ERR);
    char *both[] = {"ferry", "worker", "--from-env", "--rank", "1", "--print", NULL};
    cr_expect_eq(t_run(both, env, OUT, sizeof OUT, ERR, sizeof ERR), 2);
    cr_expect(strstr(ERR, "--rank and --from-env both give the rank"), "%s", ERR);
    char *no_listen[] = {"ferry", "worker", "--from-env", NULL};
    cr_expect_eq(t_run(no_listen, env, OUT, sizeof OUT, ERR, sizeof ERR), 2);
    cr_expect(strstr(ERR, "--listen ADDR is required"), "%s", ERR);
    cr_expect_str_eq(OUT, "");
}

static bool wait_file(const char *path, int ms)
{
    struct stat st;
    for (int waited = 0; waited < ms; waited += 20) {
        if (stat(path, &st) == 0 && st.st_size > 0)
            return true;
        usleep(20000);
    }
    return false;
}

static pid_t worker = 0;

static void stop_worker(void)
{
    tcom_reap(&worker);
    t_teardown();
}

/* Its first line names the launcher; it then listens as rank 1. */
Test(print, a_worker_serves_with_the_rank_its_launcher_gave, .init = t_setup,
     .fini = stop_worker)
{
    char token[300], port_file[300], state[300], errp[300];
    snprintf(token, sizeof token, "%s/token", T_DIR);
    snprintf(port_file, sizeof port_file, "%s/port", T_DIR);
    snprintf(state, sizeof state, "%s/state", T_DIR);
    snprintf(errp, sizeof errp, "%s/stderr", T_DIR);
    cr_assert_eq(conf_token_create(token), 0);
    const char *bin = getenv("FERRY_TEST_BIN");
    cr_assert(bin);
    char *argv[] = {"ferry",       "worker",      "--from-env", "--listen",
                    "127.0.0.1:0", "--port-file", port_file,    "--token-file",
                    token,         "--state-dir", state,        NULL};
    char *env[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                   "FERRY_RENDEZVOUS=127.0.0.1:7100", NULL};
    worker = tcom_fork();
    if (worker == 0) {
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (e < 0 || dup2(e, 2) < 0)
            _exit(126);
        execve(bin, argv, env);
        _exit(127);
    }
    cr_assert(wait_file(port_file, 20000), "the worker never listened");
    cr_assert_eq(kill(worker, SIGTERM), 0);
    int status;
    cr_assert_eq(waitpid(worker, &status, 0), worker);
    worker = 0;
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    FILE *f = fopen(errp, "r");
    cr_assert(f);
    size_t n = fread(ERR, 1, sizeof ERR - 1, f);
    ERR[n] = '\0';
    fclose(f);
    const char *first =
        "ferry worker: rank 1 of 2 from Open MPI (OMPI_COMM_WORLD_RANK, "
        "OMPI_COMM_WORLD_SIZE); rank 0 at 127.0.0.1:7100 (FERRY_RENDEZVOUS)\n";
    cr_expect(strncmp(ERR, first, strlen(first)) == 0, "the first line: %s", ERR);
    cr_expect(strstr(ERR, "ferry worker rank 1 listening on 127.0.0.1:"), "%s", ERR);
    cr_expect(strstr(ERR, "ferry worker rank 1 stopped"), "%s", ERR);
    tcom_assert_no_leaks();
}
