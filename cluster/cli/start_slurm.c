/* `ferry start --slurm` and `ferry start --attach N`: workers that an
 * engine starts, one a task, each recording where it listens in
 * FERRY_HOME/workers/<rank>/ (`ferry worker --from-env` does), and a start
 * that waits for those records before it waits for the workers to answer.
 *
 * With --slurm, start itself runs the engine: a daemon (the cluster's
 * supervisor as far as status and shutdown see) runs one `srun` step of
 * the allocation's tasks, each task bound to its node's address as
 * slurmctld knows it (NodeAddr: node names need not resolve) on a port it
 * binds and then records, so that no two workers can collide on a port.
 * The daemon ends with the step; stopped, it cancels the step. Every node
 * must see FERRY_HOME (the token and the records are there). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "cli.h"

/* The variable that hands each task the node addresses: "n1=10.0.0.1,...". */
#define ADDRS_VAR "FERRY_SLURM_ADDRS"
/* The step's id ("JOB.STEP"), written by its tasks: what the daemon cancels. */
#define STEP_FILE "slurm-step"

static void step_file(const home_paths *h, char *buf, size_t len)
{
    snprintf(buf, len, "%s/" STEP_FILE, h->dir);
}

/* ---- start's side: how many, and where ---------------------------------- */

/* The allocation's tasks: SLURM_NTASKS, or one a node as srun's default. */
static int slurm_tasks(long *n)
{
    const char *v = getenv("SLURM_NTASKS");
    const char *var = "SLURM_NTASKS";
    if (!v) {
        v = getenv("SLURM_JOB_NUM_NODES");
        var = "SLURM_JOB_NUM_NODES";
    }
    if (!v || !base_parse_long(v, 1, CONF_MAX_WORKERS, n)) {
        cli_err("start", "--slurm: %s%s%s: expected 1..%d tasks; or give N", var,
                v ? "=" : " is not set", v ? v : "", CONF_MAX_WORKERS);
        return CLI_USAGE;
    }
    return 0;
}

/* `scontrol show node -o LIST`: one line a node, "NodeName=n1 ... NodeAddr=
 * 127.0.1.1 ...", into "n1=127.0.1.1,n2=...". Returns a string to free, or
 * NULL (said). */
static char *node_addresses(const char *nodes)
{
    int fds[2];
    if (pipe(fds) != 0) {
        cli_err("start", "--slurm: pipe: %s", strerror(errno));
        return NULL;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execlp("scontrol", "scontrol", "show", "node", "-o", nodes, (char *)NULL);
        fprintf(stderr, "ferry start: cannot run scontrol: %s\n", strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    FILE *f = pid > 0 ? fdopen(fds[0], "r") : NULL;
    if (!f)
        close(fds[0]);
    size_t cap = 4096, used = 0;
    char *out = calloc(cap, 1), line[8192];
    int found = 0;
    while (f && out && fgets(line, sizeof line, f)) {
        char name[256], addr[256];
        const char *n = strstr(line, "NodeName="), *a = strstr(line, " NodeAddr=");
        if (!n || !a || sscanf(n, "NodeName=%255s", name) != 1 ||
            sscanf(a, " NodeAddr=%255s", addr) != 1)
            continue;
        size_t need = used + strlen(name) + strlen(addr) + 3;
        if (need > cap) {
            char *bigger = realloc(out, cap = need * 2);
            if (!bigger) {
                free(out);
                out = NULL;
                break;
            }
            out = bigger;
        }
        used += (size_t)sprintf(out + used, "%s%s=%s", used ? "," : "", name, addr);
        found++;
    }
    if (f)
        fclose(f);
    int status = 0;
    if (pid > 0)
        waitpid(pid, &status, 0);
    if (!out || !found || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        cli_err("start",
                "--slurm: `scontrol show node -o %s` gave no node addresses (is "
                "scontrol installed, and slurmctld reachable?)",
                nodes);
        free(out);
        return NULL;
    }
    return out;
}

int cli_slurm_plan(conf_cluster *conf, long n, bool slurm, char **addrs)
{
    *addrs = NULL;
    if (slurm) {
        const char *nodes = getenv("SLURM_JOB_NODELIST");
        if (!getenv("SLURM_JOB_ID") || !nodes) {
            cli_err("start", "--slurm: not inside a Slurm allocation (SLURM_JOB_ID and "
                             "SLURM_JOB_NODELIST are not set): run it in an sbatch "
                             "script or a salloc shell");
            return CLI_USAGE;
        }
        if (getenv("SLURM_STEP_ID") && getenv("SLURM_PROCID")) {
            cli_err("start", "--slurm: this is a task of a step already: run it once, "
                             "from the batch script, not under srun");
            return CLI_USAGE;
        }
        int rc;
        if (n < 0 && (rc = slurm_tasks(&n)))
            return rc;
        if (!(*addrs = node_addresses(nodes)))
            return CLI_FAIL;
    }
    for (long i = 0; i < n; i++) {
        /* Placeholders, replaced by what each worker records. */
        char addr[32], err[CONF_ERR_LEN];
        snprintf(addr, sizeof addr, "127.0.0.1:%ld", i + 1);
        if (conf_add_worker(conf, addr, err, sizeof err)) {
            cli_err("start", "%s", err);
            return CLI_FAIL;
        }
        /* Started elsewhere: waited for, never signalled by pid. */
        conf->workers[i].local = false;
        conf->workers[i].attach = true;
    }
    return 0;
}

void cli_daemon_io(const char *log)
{
    setsid();
    int null = open("/dev/null", O_RDONLY);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (null >= 0)
        dup2(null, 0);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
    }
    if (null > 2)
        close(null);
    if (fd > 2)
        close(fd);
}

/* ---- the daemon that runs the step ---------------------------------------- */

static volatile sig_atomic_t stop_asked;

static void on_stop(int sig)
{
    stop_asked = sig;
}

/* srun, with each task's output in logs/worker-<rank>.log. */
static void exec_srun(const home_paths *h, const cli_slurm_launch_opts *o)
{
    char ntasks[32], out[CLI_FILE_MAX + 32], threads[16];
    snprintf(ntasks, sizeof ntasks, "--ntasks=%zu", o->n);
    snprintf(out, sizeof out, "--output=%s/worker-%%t.log", h->logs);
    snprintf(threads, sizeof threads, "%d", o->threads);
    const char *argv[16];
    int k = 0;
    argv[k++] = "srun";
    argv[k++] = ntasks;
    argv[k++] = out;
    argv[k++] = "--input=none";
    argv[k++] = "--kill-on-bad-exit=0";
    argv[k++] = o->exe;
    argv[k++] = "start";
    argv[k++] = "--slurm-task";
    argv[k++] = threads;
    argv[k++] = o->device;
    argv[k] = NULL;
    setenv(ADDRS_VAR, o->addrs, 1);
    execvp("srun", (char **)argv);
    fprintf(stderr, "ferry start: cannot run srun: %s\n", strerror(errno));
    _exit(127);
}

/* Cancels the step the tasks recorded; without a record, srun is told to
 * stop it (it forwards SIGTERM to every task). */
static void end_step(const home_paths *h, pid_t srun)
{
    char path[CLI_FILE_MAX], step[64] = "";
    step_file(h, path, sizeof path);
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(step, sizeof step, f))
            step[0] = '\0';
        fclose(f);
        step[strcspn(step, "\n")] = '\0';
    }
    if (step[0]) {
        fprintf(stderr, "ferry: cancelling step %s\n", step);
        pid_t pid = fork();
        if (pid == 0) {
            execlp("scancel", "scancel", step, (char *)NULL);
            _exit(127);
        }
        if (pid > 0)
            waitpid(pid, NULL, 0);
    }
    kill(srun, SIGTERM);
}

static int run_daemon(const home_paths *h, const cli_slurm_launch_opts *o)
{
    char pidbuf[32];
    snprintf(pidbuf, sizeof pidbuf, "%ld\n", (long)getpid());
    base_write_atomic(h->supervisor_pid, pidbuf, strlen(pidbuf), false);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    pid_t srun = fork();
    if (srun == 0) {
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        exec_srun(h, o);
    }
    if (srun < 0) {
        char why[256];
        int n = snprintf(why, sizeof why, "cannot fork srun: %s\n", strerror(errno));
        base_write_atomic(h->start_error, why, (size_t)n, false);
        return 1;
    }
    fprintf(stderr, "ferry: srun (pid %ld) runs %zu worker(s)\n", (long)srun, o->n);
    int status = 0;
    bool ended = false;
    double kill_at = 0;
    for (;;) {
        pid_t got = waitpid(srun, &status, WNOHANG);
        if (got == srun)
            break;
        if (stop_asked && !ended) {
            ended = true;
            end_step(h, srun);
            kill_at = base_mono_ms() + 6000;
        }
        if (ended && base_mono_ms() > kill_at) {
            kill(srun, SIGKILL);
            kill_at = base_mono_ms() + 1e9;
        }
        usleep(20000);
    }
    char path[CLI_FILE_MAX];
    step_file(h, path, sizeof path);
    unlink(path);
    fprintf(stderr, "ferry: the step ended (srun: %s %d)\n",
            WIFEXITED(status) ? "status" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return 0;
}

pid_t cli_slurm_launch(const home_paths *h, const cli_slurm_launch_opts *o)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* As the supervisor: its own session, its output in a log, the lock
     * (inherited) held until the step ends. */
    char log[CLI_FILE_MAX];
    snprintf(log, sizeof log, "%s/slurm.log", h->logs);
    cli_daemon_io(log);
    _exit(run_daemon(h, o));
}

/* ---- each task: its node's address, then `ferry worker --from-env` -------- */

/* NAME's address in "n1=a,n2=b" into buf. */
static bool lookup(const char *map, const char *name, char *buf, size_t len)
{
    size_t nl = strlen(name);
    for (const char *p = map; p && *p;) {
        const char *end = strchr(p, ',');
        size_t item = end ? (size_t)(end - p) : strlen(p);
        if (item > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
            snprintf(buf, len, "%.*s", (int)(item - nl - 1), p + nl + 1);
            return true;
        }
        p = end ? end + 1 : NULL;
    }
    return false;
}

int cli_slurm_task(int argc, char **argv)
{
    const char *node = getenv("SLURMD_NODENAME"), *map = getenv(ADDRS_VAR);
    const char *rank_s = getenv("SLURM_PROCID");
    long rank;
    char addr[256];
    if (argc != 4 || !node || !map || !rank_s ||
        !base_parse_long(rank_s, 0, CONF_MAX_WORKERS - 1, &rank)) {
        fprintf(stderr, "ferry start --slurm-task: runs only as a task of the step "
                        "`ferry start --slurm` starts\n");
        return CLI_USAGE;
    }
    if (!lookup(map, node, addr, sizeof addr)) {
        fprintf(stderr, "ferry start: node %s is not among %s=%s\n", node, ADDRS_VAR,
                map);
        return CLI_FAIL;
    }
    home_paths h;
    if (cli_home_init(&h, "start"))
        return CLI_FAIL;
    char dir[CLI_FILE_MAX], mark[CLI_FILE_MAX], path[CLI_FILE_MAX];
    home_worker_dir(&h, (int)rank, dir, sizeof dir);
    home_worker_file(&h, (int)rank, HOME_WORKER_MARK, mark, sizeof mark);
    /* Marked as the supervisor marks its workers': removed at shutdown. */
    if (conf_mkdirs(dir, 0700) != 0 || base_write_atomic(mark, "", 0, false) != 0) {
        fprintf(stderr, "ferry start: cannot create %s\n", dir);
        return CLI_FAIL;
    }
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    if (rank == 0 && job && step) {
        char id[64];
        int n = snprintf(id, sizeof id, "%s.%s\n", job, step);
        step_file(&h, path, sizeof path);
        base_write_atomic(path, id, (size_t)n, false);
    }
    char listen[300];
    conf_format_address(listen, sizeof listen, addr, 0);
    char *wargv[] = {argv[0],     "worker", "--from-env", "--listen", listen,
                     "--threads", argv[2],  "--device",   argv[3],    NULL};
    char exe[CLI_PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return CLI_FAIL;
    exe[len] = '\0';
    fflush(NULL);
    execv(exe, wargv);
    fprintf(stderr, "ferry start: cannot run %s: %s\n", exe, strerror(errno));
    return CLI_FAIL;
}

/* ---- start's wait for the records ------------------------------------------ */

int cli_slurm_wait(const home_paths *h, conf_cluster *conf, pid_t *sup, double deadline,
                   volatile sig_atomic_t *interrupted)
{
    size_t n = conf->n_workers, known = 0;
    bool done[CONF_MAX_WORKERS] = {false};
    while (known < n) {
        for (size_t i = 0; i < n; i++) {
            if (done[i])
                continue;
            char port_path[CLI_FILE_MAX], host_path[CLI_FILE_MAX], stopped[CLI_FILE_MAX];
            char host[300] = "", addr[320];
            long port;
            home_worker_file(h, (int)i, "port", port_path, sizeof port_path);
            home_worker_file(h, (int)i, "host", host_path, sizeof host_path);
            home_worker_file(h, (int)i, "stopped", stopped, sizeof stopped);
            FILE *f;
            if (access(stopped, F_OK) == 0 ||
                !home_read_number(port_path, 1, 65535, &port) ||
                !(f = fopen(host_path, "r")))
                continue;
            bool ok = fgets(host, sizeof host, f) != NULL;
            fclose(f);
            host[strcspn(host, "\n")] = '\0';
            if (!ok || !host[0])
                continue;
            conf_worker *w = &conf->workers[i];
            char *nhost = strdup(host);
            char *naddr = strdup(conf_format_address(addr, sizeof addr, host, (int)port));
            if (!nhost || !naddr) {
                free(nhost);
                free(naddr);
                return FERRY_ENOMEM;
            }
            free(w->host);
            free(w->address);
            w->host = nhost;
            w->address = naddr;
            w->port = (int)port;
            done[i] = true;
            known++;
        }
        if (known == n)
            break;
        if (*interrupted)
            return FERRY_ECANCELED;
        if (*sup > 0 && waitpid(*sup, NULL, WNOHANG) == *sup) {
            *sup = 0;
            cli_err("start",
                    "the workers' srun step (or supervisor) ended before every "
                    "worker listened (see the logs in %s)",
                    h->logs);
            return FERRY_EUNAVAIL;
        }
        if ((double)uv_hrtime() / 1e6 > deadline) {
            cli_err(
                "start",
                "%zu of %zu workers recorded where they listen (in %s/workers/<rank>) "
                "within the timeout (--timeout-ms; logs in %s)",
                known, n, h->dir, h->logs);
            return FERRY_ETIMEDOUT;
        }
        usleep(10000);
    }
    return 0;
}

bool cli_slurm_step_running(const home_paths *h)
{
    char path[CLI_FILE_MAX];
    step_file(h, path, sizeof path);
    return access(path, F_OK) == 0;
}
