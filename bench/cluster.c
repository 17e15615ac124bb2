/* bench/cluster — the cluster lifecycle and the Cluster API on loopback:
 *
 *   start      `ferry start 4` until every worker answers (s)
 *   ship       a 1 MiB and a 16 MiB module to 4 workers (ms), and again
 *              once they have it (content-addressed: nothing is sent)
 *   calls      N small calls on 4 workers through cluster_call_any (many in
 *              flight on each worker's one connection) against the same
 *              calls made one by one (cluster_call): the multiplexing gain
 *
 * then the targets as their own lines. Runs the real `ferry` next to
 * this program in the build tree, under a private FERRY_HOME. JSON lines on
 * stdout, text on stderr. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster/cluster.h"
#include "config/config.h"
#include "stats.h"

#define N_WORKERS 4

typedef struct bench_cfg {
    int start_reps;
    int ship_reps;
    int call_reps;
    size_t calls;
} bench_cfg;

static char ferry_bin[4096], hello_so[4096], home[256];

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: cluster [--quick] [--help]\n"
        "\n"
        "Benchmarks the ferry cluster on 127.0.0.1 with %d local workers and prints\n"
        "one JSON object per line on stdout: `ferry start %d` until all answer (s),\n"
        "shipping a 1 MiB and a 16 MiB module to every worker (ms), and 10,000 small\n"
        "calls through the Cluster's work queue against the same calls one by one\n"
        "(calls/s), then the targets. Runs build/ferry under a temporary\n"
        "FERRY_HOME; progress goes to stderr.\n"
        "\n"
        "  --quick   fewer repetitions and calls (a smoke run)\n"
        "  --help    this text\n",
        N_WORKERS, N_WORKERS);
}

/* Runs `ferry args...` with output to stderr (ours), and waits. */
static int run_ferry(const char *const *args)
{
    const char *argv[16] = {ferry_bin};
    int n = 1;
    for (; args[n - 1] && n < 15; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        bench_die("fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(2, 1); /* stdout is for JSON lines only */
        execv(ferry_bin, (char *const *)argv);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int start_cluster(void)
{
    const char *args[] = {"start", "4", "--base-port", "0", NULL};
    return run_ferry(args);
}

static void shutdown_cluster(void)
{
    const char *args[] = {"shutdown", "--grace-ms", "1000", NULL};
    run_ferry(args);
}

static double seconds_since(uint64_t t0)
{
    return (double)(bench_now_ns() - t0) / 1e9;
}

static void *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        bench_die("cannot open %s: %s (build it first)", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    void *buf = malloc(*len);
    if (!buf || fread(buf, 1, *len, f) != *len)
        bench_die("cannot read %s", path);
    fclose(f);
    return buf;
}

static cluster *open_cluster(void)
{
    char state[512], err[CONF_ERR_LEN] = "", token[CONF_TOKEN_LEN + 1];
    snprintf(state, sizeof state, "%s/cluster.ini", home);
    conf_cluster c;
    conf_defaults(&c);
    if (conf_load(&c, state, err, sizeof err))
        bench_die("cluster state: %s", err);
    if (conf_token_read(c.token_file, token, sizeof token, err, sizeof err))
        bench_die("token: %s", err);
    const char *targets[N_WORKERS];
    for (size_t i = 0; i < N_WORKERS && i < c.n_workers; i++)
        targets[i] = c.workers[i].address;
    cluster_opts o = {.token = token, .call_timeout_ms = 60000, .heartbeat_ms = -1};
    cluster *cl;
    if (cluster_create(targets, c.n_workers, &o, &cl))
        bench_die("cannot connect to the cluster");
    conf_fini(&c);
    if (cluster_wait_ready(cl, 10000))
        bench_die("%s", cluster_error(cl));
    return cl;
}

static void bench_start(const bench_cfg *cfg, bench_summary *out)
{
    double v[16];
    int n = 0;
    for (int r = 0; r < cfg->start_reps; r++) {
        uint64_t t0 = bench_now_ns();
        if (start_cluster() != 0)
            bench_die("ferry start 4 failed");
        v[n++] = seconds_since(t0);
        shutdown_cluster();
        bench_log("start %d: %.3f s", r, v[n - 1]);
    }
    *out = bench_summarize(v, (size_t)n);
    bench_emit("start_ready_s", out->median, "s", out, "\"workers\":%d", N_WORKERS);
}

/* A module of exactly `size` bytes: hello.so with distinct padding after it
 * (the loader ignores bytes past the ELF's sections), so every repetition
 * is new content that must really travel. */
static void *padded_module(const void *so, size_t so_len, size_t size, uint64_t seed)
{
    unsigned char *m = malloc(size);
    if (!m || size < so_len)
        bench_die("module of %zu bytes", size);
    memcpy(m, so, so_len);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = so_len; i < size; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        m[i] = (unsigned char)x;
    }
    return m;
}

static void bench_ship(cluster *cl, const bench_cfg *cfg, const void *so, size_t so_len)
{
    static const size_t sizes[] = {1u << 20, 16u << 20};
    for (size_t s = 0; s < 2; s++) {
        double fresh[16], cached[16];
        for (int r = 0; r < cfg->ship_reps; r++) {
            void *m =
                padded_module(so, so_len, sizes[s], (uint64_t)(s * 100 + (size_t)r));
            cluster_module cm = {0};
            uint64_t t0 = bench_now_ns();
            if (cluster_load_module(cl, "padded.so", m, sizes[s], &cm))
                bench_die("ship: %s", cluster_error(cl));
            fresh[r] = seconds_since(t0) * 1e3;
            if (cm.shipped != N_WORKERS)
                bench_die("shipped to %d workers, expected %d", cm.shipped, N_WORKERS);
            cluster_module_fini(&cm);
            t0 = bench_now_ns();
            if (cluster_load_module(cl, "padded.so", m, sizes[s], &cm))
                bench_die("ship again: %s", cluster_error(cl));
            cached[r] = seconds_since(t0) * 1e3;
            cluster_module_fini(&cm);
            free(m);
        }
        bench_summary f = bench_summarize(fresh, (size_t)cfg->ship_reps);
        bench_summary c = bench_summarize(cached, (size_t)cfg->ship_reps);
        bench_emit("ship_module_ms", f.median, "ms", &f, "\"bytes\":%zu,\"workers\":%d",
                   sizes[s], N_WORKERS);
        bench_emit("ship_module_cached_ms", c.median, "ms", &c,
                   "\"bytes\":%zu,\"workers\":%d", sizes[s], N_WORKERS);
        bench_log("ship %zu MiB to %d workers: %.1f ms (again: %.2f ms)", sizes[s] >> 20,
                  N_WORKERS, f.median, c.median);
    }
}

static void bench_calls(cluster *cl, const bench_cfg *cfg, const void *so, size_t so_len,
                        bench_summary *one, bench_summary *many)
{
    cluster_module m = {0};
    if (cluster_load_module(cl, "hello.so", so, so_len, &m))
        bench_die("load hello.so: %s", cluster_error(cl));
    ferry_bytes_t *out = calloc(cfg->calls, sizeof *out);
    double v1[16], vn[16];
    for (int r = 0; r < cfg->call_reps; r++) {
        uint64_t t0 = bench_now_ns();
        for (size_t i = 0; i < cfg->calls; i++) {
            if (cluster_call(cl, &m, (int)(i % N_WORKERS), "hello", NULL, &out[i]))
                bench_die("call: %s", cluster_error(cl));
        }
        v1[r] = (double)cfg->calls / seconds_since(t0);
        for (size_t i = 0; i < cfg->calls; i++)
            cluster_free_bytes(&out[i]);

        t0 = bench_now_ns();
        if (cluster_call_any(cl, &m, "hello", cfg->calls, NULL, out, 0))
            bench_die("call_any: %s", cluster_error(cl));
        vn[r] = (double)cfg->calls / seconds_since(t0);
        for (size_t i = 0; i < cfg->calls; i++)
            cluster_free_bytes(&out[i]);
        bench_log("calls %d: one by one %.0f/s, work queue %.0f/s", r, v1[r], vn[r]);
    }
    *one = bench_summarize(v1, (size_t)cfg->call_reps);
    *many = bench_summarize(vn, (size_t)cfg->call_reps);
    bench_emit("calls_per_s_one_by_one", one->median, "calls/s", one,
               "\"calls\":%zu,\"workers\":%d,\"inflight\":1", cfg->calls, N_WORKERS);
    bench_emit("calls_per_s_work_queue", many->median, "calls/s", many,
               "\"calls\":%zu,\"workers\":%d,\"inflight_per_worker\":16", cfg->calls,
               N_WORKERS);
    free(out);
    cluster_module_fini(&m);
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    (void)st, (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

static void find_build_files(void)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        bench_die("cannot find this executable");
    self[n] = '\0';
    char *bench_dir = dirname(self); /* build/bench */
    snprintf(ferry_bin, sizeof ferry_bin, "%.4000s/../ferry", bench_dir);
    snprintf(hello_so, sizeof hello_so, "%.4000s/../tasks/hello.so", bench_dir);
    if (access(ferry_bin, X_OK) != 0)
        bench_die("no ferry executable at %s (build it first)", ferry_bin);
}

int main(int argc, char **argv)
{
    bench_set_name("cluster");
    bench_cfg cfg = {.start_reps = 5, .ship_reps = 5, .call_reps = 3, .calls = 10000};
    if (bench_quick_option(argc, argv, usage))
        cfg = (bench_cfg){.start_reps = 2, .ship_reps = 2, .call_reps = 1, .calls = 2000};
    find_build_files();
    snprintf(home, sizeof home, "/tmp/ferry-bench-XXXXXX");
    if (!mkdtemp(home))
        bench_die("mkdtemp: %s", strerror(errno));
    setenv("FERRY_HOME", home, 1);
    size_t so_len;
    void *so = read_all(hello_so, &so_len);

    bench_summary start, one, many;
    bench_start(&cfg, &start);
    if (start_cluster() != 0)
        bench_die("ferry start 4 failed");
    cluster *cl = open_cluster();
    bench_ship(cl, &cfg, so, so_len);
    bench_calls(cl, &cfg, so, so_len, &one, &many);
    cluster_destroy(cl);
    shutdown_cluster();
    nftw(home, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(so);

    bench_emit("start_ready_s_vs_target", start.median, "s", NULL,
               "\"workers\":%d,\"target_max\":1", N_WORKERS);
    double gain = many.median / one.median;
    bench_emit("calls_work_queue_vs_one_by_one", gain, "ratio", NULL,
               "\"calls\":%zu,\"target_min\":3", cfg.calls);
    bench_log("start_ready_s %.3f (target_max 1) %s; work queue / one by one %.2f "
              "(target_min 3) %s",
              start.median, start.median <= 1.0 ? "met" : "MISSED", gain,
              gain >= 3.0 ? "met" : "MISSED");
    return 0;
}
