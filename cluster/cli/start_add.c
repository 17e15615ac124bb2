/* `ferry start --add K`: K more local workers for the cluster that runs
 * under FERRY_HOME. Its supervisor starts them (sv_grow.c) with the same
 * token, TLS and limits as the first ones, restarts them as it does those,
 * and `ferry shutdown` stops them with the rest. Each picks a free port;
 * once every one has, they are appended to the cluster's state in one
 * atomic write, where `ferry status` and a sync training that grows
 * (--min-workers, --checkpoint-dir) find them. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <uv.h>

#include "cli.h"
#include "cluster/supervisor/supervisor.h"

static double now_ms(void)
{
    return (double)uv_hrtime() / 1e6;
}

/* Whether this cluster's supervisor can take workers; says why not. */
static bool can_grow(const home_paths *h, const cli_running *r, long k)
{
    if (cli_slurm_step_running(h)) {
        cli_err("start",
                "--add: the cluster under %s runs in a Slurm job: its workers "
                "are the job's tasks",
                h->dir);
        return false;
    }
    if (r->conf.supervisor_pid <= 0 || !home_pid_alive(r->conf.supervisor_pid)) {
        cli_err("start",
                "--add: the cluster's supervisor (pid %d) does not run: "
                "`ferry shutdown`, then `ferry start N`",
                r->conf.supervisor_pid);
        return false;
    }
    if (r->conf.n_workers + (size_t)k > CONF_MAX_WORKERS) {
        cli_err("start", "--add %ld: the cluster has %zu workers and takes at most %d", k,
                r->conf.n_workers, CONF_MAX_WORKERS);
        return false;
    }
    return true;
}

/* Asks the supervisor for workers n..n+k-1, each picking its port. */
static int ask(const home_paths *h, const cli_running *r, size_t n, long k)
{
    char text[CONF_MAX_WORKERS * 300] = "", path[CLI_FILE_MAX];
    size_t len = 0;
    for (long i = 0; i < k; i++) {
        int w = snprintf(text + len, sizeof text - len, "%zu %s 0\n", n + (size_t)i,
                         r->conf.listen);
        if (w < 0 || (size_t)w >= sizeof text - len) {
            cli_err("start", "--add: the listen address %s is too long", r->conf.listen);
            return CLI_FAIL;
        }
        len += (size_t)w;
        /* A port file an earlier worker of that rank left is not this one's. */
        home_worker_file(h, (int)(n + (size_t)i), "port", path, sizeof path);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/%s", h->dir, HOME_GROW_FILE);
    if (base_write_atomic(path, text, len, false) != 0 ||
        kill(r->conf.supervisor_pid, SIGHUP) != 0) {
        cli_err("start", "--add: cannot ask the supervisor (pid %d) through %s: %s",
                r->conf.supervisor_pid, path, strerror(errno));
        unlink(path);
        return CLI_FAIL;
    }
    return 0;
}

/* What ends the waits of an add early: a supervisor that is gone. */
static int gave_up(void *data)
{
    const cli_running *r = data;
    if (home_pid_alive(r->conf.supervisor_pid))
        return 0;
    cli_err("start", "--add: the cluster's supervisor (pid %d) exited",
            r->conf.supervisor_pid);
    return FERRY_EUNAVAIL;
}

/* Appends the new workers whose port is known, in rank order up to the
 * first that is not, to the state and to r->cl. Returns how many. */
static size_t append(cli_running *r, const sv_local *local, long k)
{
    size_t n = r->conf.n_workers;
    for (long i = 0; i < k && local[i].port; i++) {
        char addr[300], err[CONF_ERR_LEN];
        conf_format_address(addr, sizeof addr, home_reach_host(r->conf.listen),
                            local[i].port);
        if (conf_add_worker(&r->conf, addr, err, sizeof err) != 0) {
            cli_err("start", "--add: worker %d at %s: %s", local[i].rank, addr, err);
            break;
        }
        r->conf.workers[r->conf.n_workers - 1].local = true;
        if (cluster_add_worker(r->cl, addr) != 0) {
            cli_err("start", "--add: worker %d at %s: %s", local[i].rank, addr,
                    cluster_error(r->cl));
            break;
        }
    }
    return r->conf.n_workers - n;
}

/* Adds under the grow lock: one --add at a time reads and writes the state. */
static int add_locked(const home_paths *h, long k, long timeout_ms)
{
    cli_running r;
    int rc = cli_running_open(&r, h, "start", true, false);
    if (rc == FERRY_ENOENT)
        cli_err("start",
                "--add: no cluster is running under FERRY_HOME=%s: `ferry start N` "
                "starts one",
                h->dir);
    if (rc)
        return CLI_FAIL;
    size_t n = r.conf.n_workers;
    long long ms = timeout_ms > 0 ? timeout_ms : (long long)r.conf.start_timeout_ms;
    double deadline = now_ms() + (double)ms;
    int status = CLI_FAIL;
    cli_start_wait w = {.h = h,
                        .deadline = deadline,
                        .timeout_ms = ms,
                        .what = "--add: ",
                        .from = n,
                        .gave_up = gave_up,
                        .data = &r};
    sv_local local[CONF_MAX_WORKERS];
    for (long i = 0; i < k; i++)
        local[i] = (sv_local){.rank = (int)(n + (size_t)i)};
    if (can_grow(h, &r, k) && ask(h, &r, n, k) == 0) {
        cli_start_wait_ports(&w, local, (size_t)k);
        size_t got = append(&r, local, k);
        /* What runs is written down, even when some did not come up:
         * shutdown then stops it with the rest. */
        if (got && conf_save(&r.conf, h->state) != 0)
            cli_err("start", "--add: cannot write %s", h->state);
        else if (got == (size_t)k && cluster_size(r.cl) == r.conf.n_workers &&
                 cli_start_wait_ready(&w, r.cl) == 0 && cli_start_report(r.cl, n, 0) == 0)
            status = CLI_OK;
    }
    cli_running_close(&r);
    return status;
}

int cli_start_add(long k, long timeout_ms)
{
    home_paths h;
    if (cli_home_init(&h, "start"))
        return CLI_FAIL;
    char path[CLI_FILE_MAX];
    snprintf(path, sizeof path, "%s/%s", h.dir, HOME_GROW_LOCK);
    int fd = conf_lock_held(h.dir) ? open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600) : -1;
    if (fd < 0) {
        cli_err("start",
                "--add: no cluster is running under FERRY_HOME=%s: `ferry start N` "
                "starts one",
                h.dir);
        return CLI_FAIL;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        cli_err("start", "--add: another `ferry start --add` is adding workers under %s",
                h.dir);
        close(fd);
        return CLI_FAIL;
    }
    int status = add_locked(&h, k, timeout_ms);
    close(fd);
    return status;
}
