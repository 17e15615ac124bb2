/* The supervisor: the one process `ferry start` leaves behind besides the
 * workers. It spawns the local workers on a libuv loop, copies their output
 * into rotating logs, and restarts every worker that exits without being
 * asked to (see sv_crash.c) or stops answering (sv_live.c). A worker that
 * fails right at its start (a port taken, a bad option) is left: restarting
 * would fail the same way. Crashes in a row are restarted at once at first,
 * then after a delay that doubles up to a cap: a crash loop is slowed, never
 * given up on, and `ferry status` says so from workers/<rank>/restarts. It
 * holds the cluster lock until every worker is gone, so that `ferry status`
 * and a second `ferry start` can tell that a cluster runs. Each worker gets
 * --parent-pid: it exits when the supervisor dies, so a SIGKILLed
 * supervisor leaves nothing running. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "supervisor_int.h"

/* A worker that ignores SIGTERM this long gets SIGKILL. */
#define STOP_KILL_MS 5000

static void write_start_error(const home_paths *h, const char *text)
{
    /* The first failure is the one `ferry start` reports. */
    int fd = open(h->start_error, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    ssize_t unused = write(fd, text, strlen(text));
    (void)unused;
    close(fd);
}

static bool restarts_pending(const supervisor *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        if (sv->w[i].waiting)
            return true;
    return false;
}

static void maybe_finish(supervisor *sv)
{
    if (sv->finished || sv->running > 0 || restarts_pending(sv))
        return;
    sv->finished = true;
    uv_close((uv_handle_t *)&sv->sigterm, NULL);
    uv_close((uv_handle_t *)&sv->sigint, NULL);
    uv_close((uv_handle_t *)&sv->kill_timer, NULL);
    sv_grow_stop(sv);
    for (size_t i = 0; i < sv->n; i++)
        uv_close((uv_handle_t *)&sv->w[i].restart_timer, NULL);
    sv_live_stop(sv);
}

static void cancel_restarts(supervisor *sv)
{
    for (size_t i = 0; i < sv->n; i++) {
        if (sv->w[i].waiting) {
            uv_timer_stop(&sv->w[i].restart_timer);
            sv->w[i].waiting = false;
        }
    }
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

/* ---- the workers' output ---------------------------------------------- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    static char chunk[65536];
    (void)suggested;
    buf->base = chunk;
    buf->len = sizeof chunk;
}

static void close_output(sv_worker *w)
{
    if (!w->out)
        return;
    uv_read_stop((uv_stream_t *)w->out);
    uv_close((uv_handle_t *)w->out, free_handle);
    w->out = NULL;
}

static void on_output(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    sv_worker *w = s->data;
    if (n > 0)
        sv_logfile_write(&w->log, buf->base, (size_t)n);
    else if (n < 0 && w->out == (uv_pipe_t *)s)
        close_output(w);
}

/* Copies what the exited run left in its pipe, so that its last words are
 * in the log before anything reads them. */
static void drain_output(sv_worker *w)
{
    uv_os_fd_t fd;
    if (!w->out || uv_fileno((uv_handle_t *)w->out, &fd) != 0)
        return;
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        sv_logfile_write(&w->log, buf, (size_t)n);
}

/* ---- exits and restarts ------------------------------------------------ */

static void on_restart_timer(uv_timer_t *t)
{
    sv_worker *w = t->data;
    w->waiting = false;
    if (w->sv->stopping || sv_spawn(w) != 0)
        maybe_finish(w->sv);
}

/* How long to wait before the restart of a crash that is number `streak` in
 * a row: none for the first few, then restart_backoff_ms doubling up to
 * restart_backoff_max_ms. */
static uint64_t backoff_ms(const supervisor *sv, int streak)
{
    if (streak <= SV_RESTART_AT_ONCE)
        return 0;
    uint64_t d = (uint64_t)sv->o->conf->restart_backoff_ms;
    uint64_t cap = (uint64_t)sv->o->conf->restart_backoff_max_ms;
    for (int i = SV_RESTART_AT_ONCE + 1; i < streak && d < cap; i++)
        d *= 2;
    return d < cap ? d : cap;
}

static void restart_after_crash(sv_worker *w, int64_t status, int signo)
{
    supervisor *sv = w->sv;
    uint64_t now = uv_now(&sv->loop);
    if (w->streak == 0 || now - w->last_crash_ms > SV_STREAK_MS) {
        w->streak = 0;
        w->streak_start_ms = now;
    }
    w->streak++;
    w->last_crash_ms = now;

    home_restarts r = {.crashes = w->streak,
                      .window_ms = (int64_t)(now - w->streak_start_ms)};
    sv_record_crash(w, status, signo, r.last_crash, sizeof r.last_crash);
    uint64_t delay = backoff_ms(sv, w->streak);
    r.next_try_ms = delay ? base_wall_ms() + (int64_t)delay : 0;
    home_restarts_write(sv->o->home, w->rank, &r);
    w->restarts++;
    if (delay) {
        char loop[160];
        home_restarts_describe(&r, base_wall_ms(), loop, sizeof loop);
        sv_log(sv, "worker %d crashed: %s; %s", w->rank, r.last_crash, loop);
        w->waiting = true;
        uv_timer_start(&w->restart_timer, on_restart_timer, delay, 0);
        return;
    }
    sv_log(sv, "worker %d crashed: %s; restarting it (restart %u)", w->rank, r.last_crash,
           w->restarts);
    if (sv_spawn(w) != 0)
        maybe_finish(sv);
}

static void on_exit_(uv_process_t *proc, int64_t status, int signo)
{
    sv_worker *w = proc->data;
    supervisor *sv = w->sv;
    w->running = false;
    sv->running--;
    w->proc = NULL;
    uv_close((uv_handle_t *)proc, free_handle);
    drain_output(w);
    close_output(w);
    sv_orphans_kill(sv, w->rank);
    if (!w->port) {
        char path[HOME_FILE_MAX];
        long port;
        home_worker_file(sv->o->home, w->rank, "port", path, sizeof path);
        if (sv_became_ready(w) && home_read_number(path, 1, 65535, &port))
            w->port = (int)port;
    }

    if (sv->stopping) {
        sv_log(sv, "worker %d exited (status %d, signal %d): stopping", w->rank,
               (int)status, signo);
        maybe_finish(sv);
        return;
    }
    /* Asked to stop, it is not restarted however it ended: a worker whose
     * calls ignored the cancellation exits with status 1 at the end of the
     * grace, and that is still the stop someone wanted. */
    if (sv_asked_to_stop(w)) {
        sv_log(sv, "worker %d stopped as asked (status %d, signal %d)", w->rank,
               (int)status, signo);
        /* The last of a `ferry shutdown`: a crash-looping worker's pending
         * restart would outlive its cluster. */
        if (sv->running == 0)
            cancel_restarts(sv);
        maybe_finish(sv);
        return;
    }
    if (signo == 0 && !w->silent_ms && !sv_became_ready(w)) {
        char line[400], text[600];
        sv_last_log_line(w, line, sizeof line);
        snprintf(text, sizeof text, "worker %d exited with status %d: %s", w->rank,
                 (int)status, line[0] ? line : "(its log is empty)");
        sv_log(sv, "%s; not restarting it", text);
        write_start_error(sv->o->home, text);
        w->given_up = true;
        maybe_finish(sv);
        return;
    }
    restart_after_crash(w, status, signo);
}

static int open_output(sv_worker *w, int *child_end)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -errno;
    uv_pipe_t *p = calloc(1, sizeof *p);
    if (!p || uv_pipe_init(&w->sv->loop, p, 0) != 0) {
        free(p);
        close(fds[0]);
        close(fds[1]);
        return FERRY_ENOMEM;
    }
    p->data = w;
    if (uv_pipe_open(p, fds[0]) != 0 ||
        uv_read_start((uv_stream_t *)p, on_alloc, on_output) != 0) {
        uv_close((uv_handle_t *)p, free_handle);
        close(fds[1]);
        return FERRY_EIO;
    }
    w->out = p;
    *child_end = fds[1];
    return 0;
}

/* Worker w's share of the CPUs this supervisor may run on (what `ferry
 * start` was started with: a taskset or cpuset is kept), as mpirun binds
 * ranks to cores: on 2 vCPUs, 2 workers training in sync mode each on a
 * CPU of its own ran 15% faster than unbound, 4 (two a CPU) 20%. Not the
 * default: on a shared VM a bound worker cannot leave a vCPU the host
 * stalls, and its heartbeat misses with it. False when not binding. */
static bool worker_cpus(const sv_worker *w, char *buf, size_t len)
{
    const supervisor *sv = w->sv;
    cpu_set_t avail, mine;
    if (!sv->o->bind_cores || sched_getaffinity(0, sizeof avail, &avail) != 0)
        return false;
    conf_cpus_share(&avail, (size_t)(w - sv->w), sv->n, &mine);
    return CPU_COUNT(&mine) > 0 && conf_cpus_format(buf, len, &mine)[0];
}

/* A run's directory (made and marked as the supervisor's), its stop file
 * forgotten, and its log open. Returns 0 or an error (logged). */
static int prepare_run(sv_worker *w, char *dir, size_t len)
{
    supervisor *sv = w->sv;
    const home_paths *h = sv->o->home;
    const conf_cluster *conf = sv->o->conf;
    home_worker_dir(h, w->rank, dir, len);
    char mark[HOME_FILE_MAX];
    home_worker_file(h, w->rank, HOME_WORKER_MARK, mark, sizeof mark);
    if (conf_mkdirs(dir, 0700) != 0)
        sv_log(sv, "worker %d: cannot create %s", w->rank, dir);
    else if (access(mark, F_OK) != 0 && base_write_atomic(mark, "", 0, false) != 0)
        sv_log(sv, "worker %d: cannot mark %s as its own", w->rank, dir);
    sv_forget_stop(w);
    if (w->log.fd >= 0)
        return 0;
    char log[HOME_FILE_MAX];
    snprintf(log, sizeof log, "%s/worker-%d.log", h->logs, w->rank);
    int rc = sv_logfile_open(&w->log, log, conf->log_max_bytes, conf->log_keep, false);
    if (rc)
        sv_log(sv, "worker %d: cannot open its log %s: %s", w->rank, log,
               ferry_strerror(rc));
    return rc;
}

/* Appends the cluster's TLS options to a worker's command line at `at`
 * (7 slots at most); returns the next free slot. */
static size_t tls_args(const conf_cluster *conf, char **args, size_t at)
{
    const char *opt[] = {"--tls-cert", "--tls-key", "--tls-ca"};
    char *file[] = {conf->tls_cert, conf->tls_key, conf->tls_ca};
    for (size_t i = 0; i < 3; i++) {
        if (file[i]) {
            args[at++] = (char *)opt[i];
            args[at++] = file[i];
        }
    }
    if (conf->insecure)
        args[at++] = "--insecure";
    return at;
}

int sv_spawn(sv_worker *w)
{
    supervisor *sv = w->sv;
    const home_paths *h = sv->o->home;
    const conf_cluster *conf = sv->o->conf;
    char listen[300], rank[16], restarts[16], threads[16], dir[HOME_FILE_MAX],
        port_file[HOME_FILE_MAX], parent[16], max_msg[24], max_mod[24], wedge[24],
        cpus[256], metrics[300];
    /* A restarted worker keeps its address, so the master's channel to it
     * reconnects by itself. */
    conf_format_address(listen, sizeof listen, w->host, w->port);
    snprintf(rank, sizeof rank, "%d", w->rank);
    snprintf(restarts, sizeof restarts, "%u", w->restarts);
    snprintf(threads, sizeof threads, "%d", sv->o->threads);
    snprintf(parent, sizeof parent, "%d", (int)getpid());
    snprintf(max_msg, sizeof max_msg, "%" PRId64, conf->max_message_bytes);
    snprintf(max_mod, sizeof max_mod, "%" PRId64, conf->max_module_bytes);
    snprintf(wedge, sizeof wedge, "%" PRId64, conf->wedge_grace_ms);
    home_worker_file(h, w->rank, "port", port_file, sizeof port_file);
    int rc = prepare_run(w, dir, sizeof dir);
    if (rc)
        return rc;
    int fd = -1;
    rc = open_output(w, &fd);
    if (rc) {
        sv_log(sv, "worker %d: no pipe for its output: %s", w->rank, ferry_strerror(rc));
        return rc;
    }
    /* Room after the fixed ones for --cpus, --metrics, the --tls-* and
     * --insecure. */
    char *args[40] = {(char *)sv->o->exe,
                      "worker",
                      "--listen",
                      listen,
                      "--rank",
                      rank,
                      "--state-dir",
                      dir,
                      "--token-file",
                      (char *)sv->o->token_file,
                      "--port-file",
                      port_file,
                      "--restarts",
                      restarts,
                      "--threads",
                      threads,
                      "--device",
                      (char *)sv->o->device,
                      "--parent-pid",
                      parent,
                      "--max-message-bytes",
                      max_msg,
                      "--max-module-bytes",
                      max_mod,
                      "--wedge-grace-ms",
                      wedge};
    size_t at = 0;
    while (args[at])
        at++;
    if (worker_cpus(w, cpus, sizeof cpus)) {
        args[at++] = "--cpus";
        args[at++] = cpus;
    }
    if (conf->metrics_port) { /* worker r on the port after r-1's */
        conf_format_address(metrics, sizeof metrics, w->host,
                            conf->metrics_port + w->rank);
        args[at++] = "--metrics";
        args[at++] = metrics;
    }
    at = tls_args(conf, args, at);
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_IGNORE},
        {.flags = UV_INHERIT_FD, .data.fd = fd},
        {.flags = UV_INHERIT_FD, .data.fd = fd},
    };
    uv_process_options_t po = {
        .exit_cb = on_exit_,
        .file = sv->o->exe,
        .args = args,
        .stdio_count = 3,
        .stdio = stdio,
    };
    uv_process_t *proc = calloc(1, sizeof *proc);
    if (!proc) {
        close(fd);
        close_output(w);
        return FERRY_ENOMEM;
    }
    proc->data = w;
    /* Read before the fork: the child may write its files before this
     * thread runs again after uv_spawn (a busy machine), and a port file
     * that looked older than its run was never read, so the worker was
     * never pinged and was killed as silent. The coarse clock is the one
     * file times come from: a precise reading could be later than the
     * mtime of a file written after it. */
    struct timespec spawned_at;
    clock_gettime(CLOCK_REALTIME_COARSE, &spawned_at);
    rc = uv_spawn(&sv->loop, proc, &po);
    close(fd);
    if (rc) {
        sv_log(sv, "worker %d: cannot start %s: %s", w->rank, sv->o->exe,
               uv_strerror(rc));
        /* uv_spawn leaves a handle to close even when it fails. */
        uv_close((uv_handle_t *)proc, free_handle);
        close_output(w);
        return rc;
    }
    w->proc = proc;
    w->running = true;
    w->spawned_at = spawned_at;
    sv->running++;
    sv_live_spawned(w);
    /* What `ferry shutdown` checks is gone, rather than a pid a Ping claims. */
    char pid_file[HOME_FILE_MAX];
    home_worker_file(h, w->rank, "pid", pid_file, sizeof pid_file);
    home_write_number(pid_file, proc->pid);
    sv_log(sv, "worker %d started: pid %d, listening on %s", w->rank, proc->pid, listen);
    return 0;
}

sv_worker *sv_add_worker(supervisor *sv, const sv_local *l)
{
    sv_worker *w = &sv->w[sv->n++];
    w->sv = sv;
    w->rank = l->rank;
    w->port = l->port;
    w->log.fd = -1;
    snprintf(w->host, sizeof w->host, "%s", l->host);
    uv_timer_init(&sv->loop, &w->restart_timer);
    w->restart_timer.data = w;
    return w;
}

static void on_kill_timer(uv_timer_t *t)
{
    supervisor *sv = t->data;
    for (size_t i = 0; i < sv->n; i++) {
        if (sv->w[i].running) {
            sv_log(sv, "worker %d ignored SIGTERM for %d ms: SIGKILL", sv->w[i].rank,
                   STOP_KILL_MS);
            uv_process_kill(sv->w[i].proc, SIGKILL);
        }
    }
}

static void on_signal(uv_signal_t *s, int signo)
{
    supervisor *sv = s->data;
    if (sv->stopping)
        return;
    sv->stopping = true;
    sv_log(sv, "signal %d (%s): stopping %zu worker(s)", signo, strsignal(signo),
           sv->running);
    cancel_restarts(sv);
    for (size_t i = 0; i < sv->n; i++)
        if (sv->w[i].running)
            uv_process_kill(sv->w[i].proc, SIGTERM);
    uv_timer_start(&sv->kill_timer, on_kill_timer, STOP_KILL_MS, 0);
    maybe_finish(sv);
}

/* Local workers share this host's cores: each OpenBLAS left to its default
 * starts a thread per core, and N workers in sync mode would then run N x
 * cores threads that preempt each other (and the all-reduce) at every
 * product. Unless the user chose, each worker gets its share. The workers
 * inherit this environment. */
static void share_blas_threads(size_t workers)
{
    if (getenv("OPENBLAS_NUM_THREADS") || workers == 0)
        return;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long share = cores > 0 ? cores / (long)workers : 1;
    char v[32];
    snprintf(v, sizeof v, "%ld", share > 0 ? share : 1);
    setenv("OPENBLAS_NUM_THREADS", v, 0);
}

int sv_supervise(const sv_opts *o)
{
    supervisor sv = {.o = o};
    /* First, so that a `ferry start` interrupted before it wrote the
     * cluster state still leaves a way to stop this process. */
    home_write_number(o->home->supervisor_pid, getpid());
    char log[HOME_FILE_MAX];
    snprintf(log, sizeof log, "%s/supervisor.log", o->home->logs);
    sv_logfile_open(&sv.log, log, o->conf->log_max_bytes, o->conf->log_keep, true);
    /* Room for workers `ferry start --add` adds: a worker's handles never move. */
    sv.w = calloc(SV_MAX_WORKERS, sizeof *sv.w);
    if (!sv.w || uv_loop_init(&sv.loop) != 0) {
        free(sv.w);
        sv_logfile_close(&sv.log);
        return EXIT_FAILURE;
    }
    share_blas_threads(o->n_workers);
    sv_orphans_adopt(&sv);
    uv_signal_init(&sv.loop, &sv.sigterm);
    uv_signal_init(&sv.loop, &sv.sigint);
    uv_timer_init(&sv.loop, &sv.kill_timer);
    sv.sigterm.data = sv.sigint.data = sv.kill_timer.data = &sv;
    uv_signal_start(&sv.sigterm, on_signal, SIGTERM);
    uv_signal_start(&sv.sigint, on_signal, SIGINT);
    for (size_t i = 0; i < o->n_workers && i < SV_MAX_WORKERS; i++)
        sv_add_worker(&sv, &o->workers[i]);
    sv_grow_start(&sv);
    char err[600];
    if (home_tls_use(o->conf, err, sizeof err)) /* its pings speak as the workers */
        sv_log(&sv, "%s", err);
    sv_live_start(&sv);
    sv_log(&sv, "supervising %zu local worker(s)", sv.n);
    for (size_t i = 0; i < sv.n; i++) {
        if (sv_spawn(&sv.w[i]) != 0) {
            char text[300];
            snprintf(text, sizeof text, "worker %d: cannot start %s", sv.w[i].rank,
                     o->exe);
            write_start_error(o->home, text);
            on_signal(&sv.sigterm, SIGTERM);
            break;
        }
    }
    uv_run(&sv.loop, UV_RUN_DEFAULT);
    sv_orphans_kill(&sv, -1);
    int rc = uv_loop_close(&sv.loop);
    sv_log(&sv, "all workers stopped; exiting%s", rc ? " (loop not empty)" : "");
    for (size_t i = 0; i < sv.n; i++)
        sv_logfile_close(&sv.w[i].log);
    sv_logfile_close(&sv.log);
    free(sv.w);
    close(o->lock_fd);
    return EXIT_SUCCESS;
}
