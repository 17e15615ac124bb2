/* bench/hardening — how fast ferry stays responsive under abuse, on
 * loopback: the timing claims whose tests check only that the answer came.
 *
 *   decode   Pings on a connection that carries a request whose lz4 payload
 *            decodes to 1 GiB, to a method served on the completion-queue
 *            thread (tests/rpc/test-big.c)
 *   refuse   a real `ferry worker`'s refusal of tokenless 1 GiB lz4 bombs
 *            and of the same bytes sent to Ping (tests/runtime/test-hardening.c)
 *   flood    that worker's Ping p99 while two tokenless clients send bombs
 *            in a loop, against its p99 without them, and its peak RSS
 *            (tests/e2e/test-hardening-net.c)
 *   restart  how soon `ferry start`'s supervisor restarts each of a worker's
 *            first three crashes, which it does at once
 *            (tests/e2e/test-hardening-ops.c)
 *
 * JSON lines on stdout, each target on its own line with the figure it
 * bounds ("target_max" or "target_min") and whether it was met on
 * stderr. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lz4frame.h>

#include "config/config.h"
#include "ferry.pb-c.h"
#include "rpc/rpc.h"
#include "runtime/collective/collective.h"
#include "runtime/runtime.h"
#include "stats.h"
#include "train_child.h"
#include "proto/raw.h"

#define GIB ((size_t)1 << 30)

static char ferry_bin[4096], dir[256];
static int missed;
static uint8_t *bomb;
static size_t bomb_len;

static const char *const guarded[] = {PROTO_METHOD_LOAD_MODULE, PROTO_METHOD_CALL,
                                      PROTO_METHOD_STATS, PROTO_METHOD_SHUTDOWN,
                                      PROTO_METHOD_REDUCE_CHUNK};
#define N_GUARDED (sizeof guarded / sizeof guarded[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: hardening [--quick] [--help]\n"
               "\n"
               "Times ferry on 127.0.0.1 under abuse and prints one JSON object per\n"
               "line on stdout, then its targets: Pings during the decode of a 1 GiB\n"
               "lz4 request, a worker's refusal of tokenless 1 GiB lz4 bombs, its Ping\n"
               "p99 and peak RSS while two clients send them, and how soon a crashed\n"
               "worker is restarted. Runs build/ferry under a temporary FERRY_HOME.\n"
               "\n"
               "  --quick   shorter floods and fewer repetitions (a smoke run)\n"
               "  --help    this text\n");
}

/* A target's own line: the figure it bounds, and whether it was met. */
static void target(const char *metric, double value, const char *unit, bool is_min,
                   double bound)
{
    const char *key = is_min ? "target_min" : "target_max";
    bool ok = is_min ? value >= bound : value <= bound;
    missed += !ok;
    bench_emit(metric, value, unit, NULL, "\"%s\":%g", key, bound);
    bench_log("%-30s %9.2f %-5s (%s %g) %s", metric, value, unit, key, bound,
              ok ? "met" : "MISSED");
}

static double ms_since(uint64_t t0)
{
    return (double)(bench_now_ns() - t0) / 1e6;
}

/* A LoadModuleRequest whose payload is an lz4 frame of 1 GiB of zeros
 * (~4 MB), declared as such: what a tokenless client could send. */
static void make_bomb(void)
{
    LZ4F_preferences_t prefs = {
        .frameInfo = {.blockSizeID = LZ4F_max4MB, .contentSize = GIB}};
    size_t cap = LZ4F_compressFrameBound(GIB, &prefs);
    uint8_t *frame = malloc(cap), *zeros = calloc(1, GIB); /* read, never written */
    if (!frame || !zeros)
        bench_die("out of memory");
    size_t n = LZ4F_compressFrame(frame, cap, zeros, GIB, &prefs);
    if (LZ4F_isError(n))
        bench_die("lz4: %s", LZ4F_getErrorName(n));
    free(zeros);
    Ferry__PayloadInfo info = FERRY__PAYLOAD_INFO__INIT;
    info.codec = FERRY__CODEC__CODEC_LZ4;
    info.raw_size = GIB;
    Ferry__LoadModuleRequest req = FERRY__LOAD_MODULE_REQUEST__INIT;
    req.payload_info = &info;
    req.payload = (ProtobufCBinaryData){.len = n, .data = frame};
    bomb_len = ferry__load_module_request__get_packed_size(&req);
    bomb = malloc(bomb_len);
    if (!bomb)
        bench_die("out of memory");
    ferry__load_module_request__pack(&req, bomb);
    free(frame);
}

/* Sends the bomb as the whole request of `method`; its time in *ms. */
static int send_bomb(rpc_channel *ch, const char *method, double *ms)
{
    rpc_msg_out out = {.head_bytes = bomb, .head_len = bomb_len};
    rpc_call call = {0};
    uint64_t t0 = bench_now_ns();
    if (rpc_call_start(ch, &call, method, &out, 30000, NULL))
        bench_die("cannot start a call to %s", method);
    int rc = rpc_call_wait(&call);
    *ms = ms_since(t0);
    rpc_call_fini(&call);
    return rc;
}

static int ping(rpc_channel *ch, double *ms)
{
    Ferry__PingRequest req = FERRY__PING_REQUEST__INIT;
    proto_raw out_head = proto_raw_pack(&req.base);
    rpc_msg_out out = {.head_bytes = out_head.data, .head_len = out_head.len};
    rpc_call call = {0};
    uint64_t t0 = bench_now_ns();
    if (rpc_call_start(ch, &call, PROTO_METHOD_PING, &out, 30000, NULL))
        bench_die("cannot start a Ping");
    int rc = rpc_call_wait(&call);
    if (ms)
        *ms = ms_since(t0);
    rpc_call_fini(&call);
    return rc;
}

/* Starts `ferry args...`; its stdout comes to p->out, away from ours. */
static void spawn(bench_proc *p, const char *const *args)
{
    fflush(NULL);
    int rc = bench_proc_start(p, (char *const *)args, NULL);
    if (rc)
        bench_die("cannot start %s: %s", ferry_bin, strerror(-rc));
}

/* `ferry args...` to its end; its exit status. */
static int run_ferry(const char *const *args)
{
    bench_proc p;
    spawn(&p, args);
    char line[512];
    while (fgets(line, sizeof line, p.out))
        fputs(line, stderr);
    return bench_proc_wait(&p);
}

/* A client on `loop` with one channel to `target_s`. */
static rpc_channel *open_channel(uv_loop_t *loop, rpc_client **client, const char *target_s)
{
    rpc_channel *ch;
    if (uv_loop_init(loop) || rpc_client_create(loop, client) ||
        rpc_channel_create(*client, target_s, NULL, &ch))
        bench_die("cannot open a channel to %s", target_s);
    return ch;
}

static void close_channel(uv_loop_t *loop, rpc_client *client, rpc_channel *ch)
{
    rpc_channel_destroy(ch);
    rpc_client_close(client);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
}

/* ---- decode: Pings beside a 1 GiB lz4 request --------------------------- */

static void sink(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)req, (void)data;
    rpc_msg_out reply = {0};
    rpc_srv_reply(sc, &reply);
}

static void big_done(rpc_call *call)
{
    *(bool *)call->data = true;
}

static void bench_decode(int reps)
{
    static const rpc_method methods[] = {
        {"/bench.Big/Sink", sink, NULL, RPC_METHOD_INLINE, 0},
        {PROTO_METHOD_PING, rt_ping_handler, NULL, RPC_METHOD_INLINE, 0},
    };
    rpc_server_opts o = {.listen = "127.0.0.1:0"};
    rpc_server *srv;
    if (rpc_server_create(&o, methods, 2, &srv))
        bench_die("cannot start an rpc server");
    char target_s[64];
    snprintf(target_s, sizeof target_s, "127.0.0.1:%d", rpc_server_port(srv));
    uv_loop_t loop;
    rpc_client *client;
    rpc_channel *ch = open_channel(&loop, &client, target_s);
    uint8_t *zeros = calloc(1, GIB);
    double worst_ratio = 0;
    int fewest = 1 << 30;
    for (int r = 0; r < reps; r++) {
        rpc_msg_out out = {.payload = zeros, .payload_len = GIB, .codec = RPC_CODEC_LZ4};
        rpc_call big = {0};
        bool done = false;
        big.data = &done;
        if (rpc_call_start(ch, &big, "/bench.Big/Sink", &out, 120000, big_done))
            bench_die("cannot start the 1 GiB call");
        uint64_t t0 = bench_now_ns();
        double worst = 0, ms;
        int pings = 0;
        while (!done) {
            if (ping(ch, &ms))
                bench_die("a Ping failed during the decode");
            worst = ms > worst ? ms : worst;
            pings++;
            usleep(5000); /* as a master's heartbeat would */
        }
        double took = ms_since(t0);
        if (big.result)
            bench_die("the 1 GiB call failed: %s", ferry_err_name(big.result));
        rpc_call_fini(&big);
        bench_emit("ping_during_1gib_lz4_decode", worst, "ms", NULL,
                   "\"pings\":%d,\"decode_ms\":%.0f", pings, took);
        worst_ratio = worst / took > worst_ratio ? worst / took : worst_ratio;
        fewest = pings < fewest ? pings : fewest;
    }
    free(zeros);
    close_channel(&loop, client, ch);
    rpc_server_shutdown(srv, 0);
    rpc_server_destroy(srv);
    rpc_buf_trim();
    /* Decoded on the queue thread, one Ping waits out the whole decode and
     * hardly another is answered. */
    target("slowest_ping_vs_1gib_decode", worst_ratio, "ratio", false, 0.6);
    target("pings_during_1gib_decode", fewest, "pings", true, 10);
}

/* ---- refuse and flood: a real worker ------------------------------------ */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = calloc(1, 4096);
    size_t n = buf ? fread(buf, 1, 4095, f) : 0;
    fclose(f);
    if (buf && n == 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static long proc_kib(pid_t pid, const char *field)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    char *text = slurp(path), *p = text ? strstr(text, field) : NULL;
    long v = p ? strtol(p + strlen(field) + 1, NULL, 10) : -1;
    free(text);
    return v;
}

/* A tokenless client in a child, sending bombs for `secs` once a byte
 * arrives on `go`; writes how many it sent to `fd`. On two cores it takes
 * only CPU time nothing else wants: an attacker has machines of its own,
 * and the figure is the worker's, not the scheduler's. */
static pid_t bomber(const char *target_s, int go, int fd, int secs)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    char byte;
    struct sched_param none = {0};
    if (read(go, &byte, 1) != 1)
        _exit(0);
    if (sched_setscheduler(0, SCHED_IDLE, &none) && setpriority(PRIO_PROCESS, 0, 19))
        _exit(5);
    uv_loop_t loop;
    rpc_client *c;
    rpc_channel *ch;
    if (uv_loop_init(&loop) || rpc_client_create(&loop, &c) ||
        rpc_channel_create(c, target_s, NULL, &ch))
        _exit(3);
    unsigned long sent = 0;
    double ms;
    for (uint64_t end = bench_now_ns() + (uint64_t)secs * 1000000000u;
         bench_now_ns() < end; sent++)
        if (send_bomb(ch, guarded[sent % N_GUARDED], &ms) != FERRY_EUNAUTH)
            _exit(4);
    dprintf(fd, "%lu\n", sent);
    _exit(0);
}

/* Pings every 5 ms for `secs`, each timed from when it was due, so that a
 * stall counts for every Ping due during it; returns the p99 in ms. */
static double ping_p99(rpc_channel *ch, int secs)
{
    size_t cap = (size_t)secs * 200, n = 0;
    double *lat = malloc(cap * sizeof *lat);
    uint64_t start = bench_now_ns();
    for (; n < cap; n++) {
        uint64_t due = start + n * 5000000u, now = bench_now_ns();
        if (now < due)
            usleep((useconds_t)((due - now) / 1000));
        if (ping(ch, NULL))
            bench_die("a Ping failed");
        lat[n] = (double)(bench_now_ns() - due) / 1e6;
    }
    bench_sort(lat, n);
    double p99 = bench_percentile(lat, n, 99);
    free(lat);
    return p99;
}

static void bench_worker(int reps, int flood_s)
{
    char token[600], port_file[600], state[600], port_s[16], target_s[64];
    snprintf(token, sizeof token, "%s/token", dir);
    snprintf(port_file, sizeof port_file, "%s/port", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    if (conf_token_create(token))
        bench_die("cannot write a token to %s", token);
    int go[2], counts[2];
    if (pipe2(go, O_CLOEXEC) || pipe2(counts, O_CLOEXEC))
        bench_die("pipe: %s", strerror(errno));
    const char *args[] = {ferry_bin, "worker", "--listen", "127.0.0.1:0", "--token-file",
                          token, "--port-file", port_file, "--state-dir", state, NULL};
    bench_proc worker;
    spawn(&worker, args);
    char *port = NULL;
    for (int i = 0; i < 1000 && !(port = slurp(port_file)); i++)
        usleep(10000);
    if (!port)
        bench_die("the worker never wrote its port");
    snprintf(port_s, sizeof port_s, "%d", atoi(port));
    free(port);
    snprintf(target_s, sizeof target_s, "127.0.0.1:%s", port_s);
    /* Forked before this process starts gRPC. */
    pid_t bombers[2];
    for (int i = 0; i < 2; i++)
        bombers[i] = bomber(target_s, go[0], counts[1], flood_s);
    close(go[0]);
    close(counts[1]);

    uv_loop_t loop;
    rpc_client *client;
    rpc_channel *ch = open_channel(&loop, &client, target_s);
    if (ping(ch, NULL))
        bench_die("the worker does not answer Ping");

    double worst = 0, ms, ping_ms = 0;
    for (int r = 0; r < reps; r++) {
        for (size_t i = 0; i < N_GUARDED; i++) {
            if (send_bomb(ch, guarded[i], &ms) != FERRY_EUNAUTH)
                bench_die("%s took the bomb without a token", guarded[i]);
            worst = ms > worst ? ms : worst;
        }
        if (send_bomb(ch, PROTO_METHOD_PING, &ms) != FERRY_EMSGSIZE)
            bench_die("Ping took the bomb");
        ping_ms = ms > ping_ms ? ms : ping_ms;
    }
    bench_emit("tokenless_bomb_refused_max", worst, "ms", NULL, "\"calls\":%zu",
               reps * N_GUARDED);
    bench_emit("bomb_to_ping_refused_max", ping_ms, "ms", NULL, "\"calls\":%d", reps);

    double quiet = ping_p99(ch, flood_s);
    long hwm0 = proc_kib(worker.pid, "VmHWM:");
    if (write(go[1], "gg", 2) != 2)
        bench_die("cannot start the bombers");
    double loud = ping_p99(ch, flood_s);
    unsigned long sent = 0, k;
    FILE *f = fdopen(counts[0], "r");
    while (f && fscanf(f, "%lu", &k) == 1)
        sent += k;
    for (int i = 0; i < 2; i++) {
        int status;
        waitpid(bombers[i], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status))
            bench_die("a bomber failed (status %d)", status);
    }
    long hwm1 = proc_kib(worker.pid, "VmHWM:");
    bench_emit("ping_p99_quiet", quiet, "ms", NULL, "\"seconds\":%d", flood_s);
    bench_emit("ping_p99_flood", loud, "ms", NULL, "\"seconds\":%d,\"bombs\":%lu", flood_s,
               sent);

    close_channel(&loop, client, ch);
    if (f)
        fclose(f);
    close(go[1]);
    kill(worker.pid, SIGTERM);
    bench_proc_wait(&worker);

    target("tokenless_bomb_refused_max", worst, "ms", false, 1000);
    target("bomb_to_ping_refused_max", ping_ms, "ms", false, 1000);
    target("ping_p99_flood_minus_quiet", loud - quiet, "ms", false, 100);
    target("worker_peak_rss_growth_flood", (double)(hwm1 - hwm0), "KiB", false, 64 * 1024);
}

/* ---- restart: the supervisor's first three restarts ---------------------- */

static pid_t worker_pid(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/home/workers/0/pid", dir);
    char *text = slurp(path);
    pid_t pid = text ? (pid_t)atoi(text) : 0;
    free(text);
    return pid > 0 && kill(pid, 0) == 0 ? pid : 0;
}

static void bench_restart(void)
{
    char home[600];
    snprintf(home, sizeof home, "%s/home", dir);
    setenv("FERRY_HOME", home, 1);
    const char *start[] = {ferry_bin, "start", "1", "--base-port", "0", NULL};
    if (run_ferry(start) != 0)
        bench_die("ferry start 1 failed");
    pid_t pid = worker_pid();
    double worst = 0;
    for (int i = 1; i <= 3 && pid; i++) {
        kill(pid, SIGKILL);
        uint64_t t0 = bench_now_ns();
        pid_t next = 0;
        while (ms_since(t0) < 10000 && ((next = worker_pid()) == 0 || next == pid))
            usleep(2000);
        double ms = ms_since(t0);
        bench_emit("restart_after_crash", ms, "ms", NULL, "\"crash\":%d", i);
        worst = ms > worst ? ms : worst;
        pid = next != pid ? next : 0;
    }
    const char *stop[] = {ferry_bin, "shutdown", NULL};
    run_ferry(stop);
    if (!pid)
        bench_die("a crashed worker was not restarted within 10 s");
    /* Exec and start-up included; the fourth crash in a row would wait
     * restart_backoff_ms (500 by default). */
    target("restart_at_once_max", worst, "ms", false, 450);
}

int main(int argc, char **argv)
{
    bench_set_name("hardening");
    bool quick = bench_quick_option(argc, argv, usage);
    int reps = quick ? 1 : 5, flood_s = quick ? 3 : 10;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        bench_die("cannot find this executable");
    self[n] = '\0';
    snprintf(ferry_bin, sizeof ferry_bin, "%.4000s/../ferry", dirname(self));
    if (access(ferry_bin, X_OK) != 0)
        bench_die("no ferry executable at %s (build it first)", ferry_bin);
    snprintf(dir, sizeof dir, "/tmp/ferry-bench-XXXXXX");
    if (!mkdtemp(dir))
        bench_die("mkdtemp: %s", strerror(errno));
    make_bomb();
    /* The forks first: the worker's bombers before this process starts gRPC. */
    bench_worker(reps, flood_s);
    bench_restart();
    bench_decode(reps);
    free(bomb);
    bench_remove_tree(dir);
    bench_log("bench/hardening: %d target(s) missed", missed);
    return 0;
}
