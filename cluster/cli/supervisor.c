/* The supervisor: the one process `ferry start` leaves behind besides the
 * workers. It spawns the local workers on a libuv loop and restarts one
 * that a signal killed (a task module crashed it, or someone sent SIGKILL)
 * or that exited with an error after it had been up (a task called exit());
 * one that fails right at its start (a port taken, a bad option) is left:
 * restarting would fail the same way. It holds the cluster lock until every
 * worker is gone, so that `ferry status` and a second `ferry start` can tell
 * that a cluster runs. Exit status 0 is a worker's answer to Shutdown or
 * SIGTERM: never restarted. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "cli.h"

/* More restarts than this within RESTART_WINDOW_S is a crash loop: stop. */
#define RESTART_BURST    5
#define RESTART_WINDOW_S 30.0
/* A worker that ignores SIGTERM this long gets SIGKILL. */
#define STOP_KILL_MS 5000

typedef struct sv_worker {
    /* One handle per run: a handle is only free after its close callback,
     * and a restart cannot wait for that. */
    uv_process_t *proc;
    int rank;
    int port; /* the bound port, once known (asked 0: from its port file) */
    char host[256];
    uint32_t restarts;
    double window_start;        /* start of the current restart burst */
    struct timespec spawned_at; /* wall clock, to compare with file times */
    int burst;
    bool running;
    struct supervisor *sv;
} sv_worker;

typedef struct supervisor {
    uv_loop_t loop;
    uv_signal_t sigterm, sigint;
    uv_timer_t kill_timer;
    const cli_supervisor_opts *o;
    sv_worker *w;
    size_t n;
    size_t running;
    bool stopping;
} supervisor;

static double now_s(void)
{
    return (double)uv_hrtime() / 1e9;
}

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    time_t t = time(NULL);
    struct tm tm;
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", localtime_r(&t, &tm));
    fprintf(stderr, "%s supervisor[%d]: ", stamp, (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}

/* The last non-empty line of a worker's log: usually why it exited. */
static void last_log_line(const cli_home *h, int rank, char *buf, size_t len)
{
    char path[CLI_FILE_MAX];
    snprintf(path, sizeof path, "%s/worker-%d.log", h->logs, rank);
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0])
            snprintf(buf, len, "%s", line);
    }
    fclose(f);
}

static int read_port_file(const cli_home *h, int rank)
{
    char path[CLI_FILE_MAX];
    cli_worker_file(h, rank, "port", path, sizeof path);
    long port;
    return cli_read_number(path, 1, 65535, &port) ? (int)port : 0;
}

/* Whether this run of the worker got as far as listening: it writes its
 * port file once bound. One that did not failed to start. */
static bool became_ready(const sv_worker *w)
{
    char path[CLI_FILE_MAX];
    struct stat st;
    cli_worker_file(w->sv->o->home, w->rank, "port", path, sizeof path);
    if (stat(path, &st) != 0)
        return false;
    return st.st_mtim.tv_sec > w->spawned_at.tv_sec ||
           (st.st_mtim.tv_sec == w->spawned_at.tv_sec &&
            st.st_mtim.tv_nsec >= w->spawned_at.tv_nsec);
}

static void write_start_error(const cli_home *h, const char *text)
{
    /* The first failure is the one `ferry start` reports. */
    int fd = open(h->start_error, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    ssize_t unused = write(fd, text, strlen(text));
    (void)unused;
    close(fd);
}

static int spawn_worker(sv_worker *w);

static void maybe_finish(supervisor *sv)
{
    if (sv->running > 0)
        return;
    uv_close((uv_handle_t *)&sv->sigterm, NULL);
    uv_close((uv_handle_t *)&sv->sigint, NULL);
    uv_close((uv_handle_t *)&sv->kill_timer, NULL);
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

static void on_exit_(uv_process_t *proc, int64_t status, int signo)
{
    sv_worker *w = proc->data;
    supervisor *sv = w->sv;
    w->running = false;
    sv->running--;
    w->proc = NULL;
    uv_close((uv_handle_t *)proc, free_handle);
    if (!w->port)
        w->port = read_port_file(sv->o->home, w->rank);

    if (sv->stopping || (signo == 0 && status == 0)) {
        logf_("worker %d exited (status %d%s)", w->rank, (int)status,
              sv->stopping ? ", stopping" : "");
        maybe_finish(sv);
        return;
    }
    if (signo == 0 && !became_ready(w)) {
        char line[400], text[600];
        last_log_line(sv->o->home, w->rank, line, sizeof line);
        snprintf(text, sizeof text, "worker %d exited with status %d: %s", w->rank,
                 (int)status, line[0] ? line : "(its log is empty)");
        logf_("%s; not restarting it", text);
        write_start_error(sv->o->home, text);
        maybe_finish(sv);
        return;
    }
    double t = now_s();
    if (t - w->window_start > RESTART_WINDOW_S) {
        w->window_start = t;
        w->burst = 0;
    }
    if (++w->burst > RESTART_BURST) {
        logf_("worker %d died %d times in %.0f s (last: %s %d): giving up on it", w->rank,
              w->burst, RESTART_WINDOW_S, signo ? "signal" : "status",
              signo ? signo : (int)status);
        maybe_finish(sv);
        return;
    }
    w->restarts++;
    logf_("worker %d killed by signal %d (%s): restarting it (restart %u)", w->rank,
          signo, strsignal(signo), w->restarts);
    if (spawn_worker(w) != 0)
        maybe_finish(sv);
}

static int spawn_worker(sv_worker *w)
{
    supervisor *sv = w->sv;
    const cli_home *h = sv->o->home;
    char listen[300], rank[16], restarts[16], threads[16], dir[CLI_FILE_MAX],
        port_file[CLI_FILE_MAX], log[CLI_FILE_MAX];
    /* A restarted worker keeps its address, so the master's channel to it
     * reconnects by itself. */
    conf_format_address(listen, sizeof listen, w->host, w->port);
    snprintf(rank, sizeof rank, "%d", w->rank);
    snprintf(restarts, sizeof restarts, "%u", w->restarts);
    snprintf(threads, sizeof threads, "%d", sv->o->threads);
    cli_worker_dir(h, w->rank, dir, sizeof dir);
    cli_worker_file(h, w->rank, "port", port_file, sizeof port_file);
    snprintf(log, sizeof log, "%s/worker-%d.log", h->logs, w->rank);

    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
        int err = errno;
        logf_("worker %d: cannot open its log %s: %s", w->rank, log, strerror(err));
        return -err;
    }
    char *args[] = {(char *)sv->o->exe,
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
                    NULL};
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
        return FERRY_ENOMEM;
    }
    proc->data = w;
    int rc = uv_spawn(&sv->loop, proc, &po);
    close(fd);
    if (rc) {
        logf_("worker %d: cannot start %s: %s", w->rank, sv->o->exe, uv_strerror(rc));
        /* uv_spawn leaves a handle to close even when it fails. */
        uv_close((uv_handle_t *)proc, free_handle);
        return rc;
    }
    w->proc = proc;
    w->running = true;
    /* The coarse clock is the one file times come from: a precise reading
     * could be later than the mtime of a file written after it. */
    clock_gettime(CLOCK_REALTIME_COARSE, &w->spawned_at);
    sv->running++;
    /* What `ferry shutdown` checks is gone, rather than a pid a Ping claims. */
    char pid_file[CLI_FILE_MAX];
    cli_worker_file(h, w->rank, "pid", pid_file, sizeof pid_file);
    if (conf_mkdirs(dir, 0700) == 0)
        cli_write_number(pid_file, proc->pid);
    logf_("worker %d started: pid %d, listening on %s", w->rank, proc->pid, listen);
    return 0;
}

static void on_kill_timer(uv_timer_t *t)
{
    supervisor *sv = t->data;
    for (size_t i = 0; i < sv->n; i++) {
        if (sv->w[i].running) {
            logf_("worker %d ignored SIGTERM for %d ms: SIGKILL", sv->w[i].rank,
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
    logf_("signal %d (%s): stopping %zu worker(s)", signo, strsignal(signo), sv->running);
    for (size_t i = 0; i < sv->n; i++)
        if (sv->w[i].running)
            uv_process_kill(sv->w[i].proc, SIGTERM);
    uv_timer_start(&sv->kill_timer, on_kill_timer, STOP_KILL_MS, 0);
    if (sv->running == 0)
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

int cli_supervise(const cli_supervisor_opts *o)
{
    supervisor sv = {.o = o};
    /* First, so that a `ferry start` interrupted before it wrote the
     * cluster state still leaves a way to stop this process. */
    cli_write_number(o->home->supervisor_pid, getpid());
    sv.w = calloc(o->n_workers ? o->n_workers : 1, sizeof *sv.w);
    if (!sv.w || uv_loop_init(&sv.loop) != 0) {
        free(sv.w);
        return CLI_FAIL;
    }
    share_blas_threads(o->n_workers);
    uv_signal_init(&sv.loop, &sv.sigterm);
    uv_signal_init(&sv.loop, &sv.sigint);
    uv_timer_init(&sv.loop, &sv.kill_timer);
    sv.sigterm.data = sv.sigint.data = sv.kill_timer.data = &sv;
    uv_signal_start(&sv.sigterm, on_signal, SIGTERM);
    uv_signal_start(&sv.sigint, on_signal, SIGINT);
    for (size_t i = 0; i < o->n_workers; i++) {
        sv_worker *w = &sv.w[sv.n++];
        w->sv = &sv;
        w->rank = o->workers[i].rank;
        w->port = o->workers[i].port;
        w->window_start = now_s();
        snprintf(w->host, sizeof w->host, "%s", o->workers[i].host);
    }
    logf_("supervising %zu local worker(s)", sv.n);
    for (size_t i = 0; i < sv.n; i++) {
        if (spawn_worker(&sv.w[i]) != 0) {
            char text[300];
            snprintf(text, sizeof text, "worker %d: cannot start %s", sv.w[i].rank,
                     o->exe);
            write_start_error(o->home, text);
            on_signal(&sv.sigterm, SIGTERM);
            break;
        }
    }
    uv_run(&sv.loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(&sv.loop);
    logf_("all workers stopped; exiting%s", rc ? " (loop not empty)" : "");
    free(sv.w);
    close(o->lock_fd);
    return CLI_OK;
}
