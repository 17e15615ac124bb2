/* `mpirun -np 4 ferry worker --from-env` over a hostfile of two hosts
 * (h1, h2: 2 slots each) whose remote shell is a local agent (it drops the
 * host and runs the command here), with `ferry start --attach 4` finding
 * the ranks through a FERRY_HOME they share; then a sync and an async
 * training and a shutdown that ends mpirun. The scenario runs as a bash
 * script in a process group of its own, killed when the test ends. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tcommon.h"

static char dir[64];
static pid_t group;

static void cleanup(void)
{
    if (group > 0) {
        kill(-group, SIGKILL);
        waitpid(group, NULL, 0);
        group = 0;
    }
    if (dir[0])
        tcom_rm_tree(dir);
    dir[0] = '\0';
}

TestSuite(mpi, .fini = cleanup, .timeout = 300);

static void write_file(const char *name, const char *text, mode_t mode)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    cr_assert(fd >= 0, "%s", path);
    cr_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

static bool on_path(const char *prog)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

/* Runs `script` with bash in dir, in its own process group; its output. */
static char *run(const char *script, int timeout_s)
{
    write_file("scenario.sh", script, 0700);
    char out[128];
    snprintf(out, sizeof out, "%s/scenario.out", dir);
    group = fork();
    cr_assert(group >= 0);
    if (group == 0) {
        setpgid(0, 0);
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        if (chdir(dir) != 0)
            _exit(127);
        execlp("bash", "bash", "scenario.sh", (char *)NULL);
        _exit(127);
    }
    setpgid(group, group);
    int status = 0;
    for (int i = 0; i < timeout_s * 10 && waitpid(group, &status, WNOHANG) == 0; i++)
        usleep(100000);
    FILE *f = fopen(out, "r");
    cr_assert(f);
    static char text[1 << 18];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* A port free now and outside the kernel's ephemeral range (32768 up),
 * where another process's outgoing connection could take it before rank
 * 0 binds it. */
static int fixed_port(void)
{
    srand((unsigned)getpid());
    for (int i = 0; i < 1000; i++) {
        int port = 20000 + rand() % 12000, fd;
        if (tcom_listen(port, &fd) == port) {
            close(fd);
            return port;
        }
    }
    cr_assert_fail("no free port in 20000..31999");
    return 0;
}

Test(mpi, mpirun_ranks_on_two_hosts_become_a_cluster_that_trains)
{
    if (!on_path("mpirun"))
        tcom_skip_missing("openmpi-bin", "mpirun");
    snprintf(dir, sizeof dir, "/tmp/ferry-mpi-XXXXXX");
    cr_assert(mkdtemp(dir));
    write_file("hosts", "h1 slots=2\nh2 slots=2\n", 0600);
    /* Open MPI's remote shell: `agent HOST COMMAND...`, run here. */
    write_file("agent", "#!/bin/sh\nshift\nexec sh -c \"$*\"\n", 0700);
    char home[128], token[80];
    snprintf(home, sizeof home, "%s/home", dir);
    cr_assert(mkdir(home, 0700) == 0);
    unsigned char raw[32];
    FILE *r = fopen("/dev/urandom", "r");
    cr_assert(r && fread(raw, 1, sizeof raw, r) == sizeof raw);
    fclose(r);
    for (int i = 0; i < 32; i++)
        sprintf(token + 2 * i, "%02x", raw[i]);
    strcat(token, "\n");
    write_file("home/token", token, 0600);
    char script[4096];
    /* Rank 0 serves the rendezvous there; the others join it. */
    int rdv = fixed_port();
    snprintf(script, sizeof script,
             "export FERRY_HOME=%s PMIX_MCA_gds=hash\n"
             "F=%s; T=%s\n"
             "mpirun --allow-run-as-root --hostfile hosts -np 4 --mca plm_rsh_agent "
             "$PWD/agent -x FERRY_RENDEZVOUS=127.0.0.1:%d $F worker --from-env "
             "--listen 127.0.0.1:0 > mpirun.out 2>&1 &\n"
             "mpi=$!\n"
             "$F start --attach 4 --timeout-ms 120000 || { kill $mpi; cat mpirun.out; "
             "exit 1; }\n"
             "$F status --rendezvous 127.0.0.1:%d > /dev/null || echo 'rendezvous "
             "failed'\n"
             "$F submit $T/linreg.so --epochs 1 --json || echo 'sync failed'\n"
             "$F submit $T/linreg.so --epochs 1 --mode async --json || echo 'async "
             "failed'\n"
             "$F shutdown\n"
             "wait $mpi; echo \"mpirun: $?\"\n"
             "cat mpirun.out\n",
             home, getenv("FERRY_TEST_BIN"), getenv("FERRY_TEST_TASKS"), rdv, rdv);
    char *out = run(script, 240);
    cr_assert(strstr(out, "4 worker(s) ready"), "%s", out);
    cr_expect(strstr(out, "\"mode\":\"sync\""), "%s", out);
    cr_expect(strstr(out, "\"mode\":\"async\""), "%s", out);
    cr_expect(!strstr(out, "failed"), "%s", out);
    cr_expect(strstr(out, "4 worker(s) stopped"), "%s", out);
    cr_expect(strstr(out, "mpirun: 0"), "mpirun did not end with the workers:\n%s", out);
    for (int i = 0; i < 4; i++) {
        char line[80];
        snprintf(line, sizeof line, "rank %d of 4 from Open MPI", i);
        cr_expect(strstr(out, line), "%s:\n%s", line, out);
        snprintf(line, sizeof line, "rank %d joined the rendezvous at 127.0.0.1:%d", i, rdv);
        cr_expect(i == 0 || strstr(out, line), "%s:\n%s", line, out);
    }
}
