/* tests/runtime — what a client without the token can do to a worker, and
 * what a malformed or hostile request gets (issue 11, findings 1, 3 and 4):
 *
 *   - a request whose lz4 payload claims 1 GiB is refused UNAUTHENTICATED
 *     from its metadata, at once, without the worker allocating it (a flood
 *     of them is tests/e2e/test-hardening-net.c);
 *   - tokenless garbage is UNAUTHENTICATED, malformed requests with the
 *     token INVALID_ARGUMENT;
 *   - 10,000 refusals make a few summary lines, not 10,000;
 *   - a hostile module name reaches the log and error texts escaped.
 *
 * The first runs `ferry worker` (rt_worker_main) in a forked child, so that
 * its memory can be read in /proc/PID/status. */
#include "rth.h"

#include "ferry.pb-c.h"
#include "tcommon.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lz4frame.h>

#include "runtime/collective/collective.h"
#include "proto/raw.h"

static pid_t worker_pid;

static void teardown(void)
{
    if (worker_pid > 0) {
        kill(worker_pid, SIGKILL);
        rth_reap(worker_pid);
        worker_pid = 0;
    }
    rth_teardown();
}

TestSuite(rt_hardening, .init = rth_setup_dir, .fini = teardown, .timeout = 120);
TestSuite(rt_hardening_inproc, .init = rth_setup, .fini = rth_teardown, .timeout = 120);

/* ---- a request whose lz4 payload claims 1 GiB -------------------------------- */

#define BOMB_RAW ((size_t)1 << 30)

static uint8_t *bomb;
static size_t bomb_len;

static size_t put_varint(uint8_t *b, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    return n;
}

/* The whole message as it goes on the wire: PayloadInfo {LZ4, 1 GiB}, then a
 * real lz4 frame of 1 GiB of zeros (~4 MB), as ferry's codec writes it. */
static void make_bomb(void)
{
    if (bomb)
        return;
    const size_t block = (size_t)4 << 20;
    LZ4F_preferences_t prefs = {
        .frameInfo = {.blockSizeID = LZ4F_max4MB, .contentSize = BOMB_RAW},
    };
    size_t bound = LZ4F_compressBound(block, &prefs);
    size_t cap = ((size_t)8 << 20) + bound;
    uint8_t *frame = malloc(cap);
    uint8_t *zeros = calloc(1, block);
    cr_assert(frame && zeros);
    LZ4F_cctx *cctx;
    cr_assert(!LZ4F_isError(LZ4F_createCompressionContext(&cctx, LZ4F_VERSION)));
    size_t n = LZ4F_compressBegin(cctx, frame, cap, &prefs);
    cr_assert(!LZ4F_isError(n));
    for (size_t done = 0; done < BOMB_RAW; done += block) {
        cr_assert(cap - n >= bound);
        size_t k = LZ4F_compressUpdate(cctx, frame + n, cap - n, zeros, block, NULL);
        cr_assert(!LZ4F_isError(k));
        n += k;
    }
    size_t k = LZ4F_compressEnd(cctx, frame + n, cap - n, NULL);
    cr_assert(!LZ4F_isError(k));
    n += k;
    LZ4F_freeCompressionContext(cctx);
    free(zeros);

    bomb = malloc(n + 64);
    size_t p = 0;
    uint8_t info[16];
    size_t il = 0;
    info[il++] = 1 << 3 | 0; /* codec = LZ4 (1) */
    info[il++] = 1;
    info[il++] = 2 << 3 | 0; /* raw_size */
    il += put_varint(info + il, BOMB_RAW);
    bomb[p++] = 14 << 3 | 2;
    p += put_varint(bomb + p, il);
    memcpy(bomb + p, info, il);
    p += il;
    bomb[p++] = 15 << 3 | 2;
    p += put_varint(bomb + p, n);
    memcpy(bomb + p, frame, n);
    p += n;
    bomb_len = p;
    free(frame);
}

/* Sends `len` bytes as the whole request of `method` on `ch`; returns the
 * result and the time it took in *ms. */
static int send_raw(rpc_channel *ch, const char *method, const void *bytes, size_t len,
                    double *ms, char *err, size_t errlen)
{
    rpc_msg_out out = {.head_bytes = bytes, .head_len = len};
    rpc_call call;
    memset(&call, 0, sizeof call);
    uint64_t t0 = uv_hrtime();
    int rc = rpc_call_start(ch, &call, method, &out, RTH_CALL_TIMEOUT, NULL);
    cr_assert(rc == 0, "rpc_call_start(%s): %s", method, ferry_err_name(rc));
    rc = rpc_call_wait(&call);
    if (ms)
        *ms = (double)(uv_hrtime() - t0) / 1e6;
    if (err && errlen)
        snprintf(err, errlen, "%s", call.errmsg ? call.errmsg : "");
    rpc_call_fini(&call);
    return rc;
}

/* ---- a worker process -------------------------------------------------------- */

typedef struct wjob {
    char *argv[16];
    char storage[16][600];
    int argc;
} wjob;

static wjob WJ;

static rlim_t worker_nofile; /* 0: the test's own limit */

static int run_worker(void *arg)
{
    wjob *j = arg;
    if (worker_nofile) {
        struct rlimit r = {worker_nofile, worker_nofile};
        if (setrlimit(RLIMIT_NOFILE, &r) != 0)
            return 99;
    }
    return rt_worker_main(j->argc, j->argv);
}

static void wargs(const char *first, ...)
{
    memset(&WJ, 0, sizeof WJ);
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a; a = va_arg(ap, const char *)) {
        snprintf(WJ.storage[WJ.argc], sizeof WJ.storage[0], "%s", a);
        WJ.argv[WJ.argc] = WJ.storage[WJ.argc];
        WJ.argc++;
    }
    va_end(ap);
}

static rth_child_out worker_out;

/* `ferry worker` on 127.0.0.1:0 in a child; returns its port. */
static int start_worker_process(void)
{
    char state[512], port_file[512];
    snprintf(state, sizeof state, "%s/state", R.dir);
    snprintf(port_file, sizeof port_file, "%s/port", R.dir);
    wargs("worker", "--listen", "127.0.0.1:0", "--state-dir", state, "--token-file",
          rth_token_file(), "--port-file", port_file, "--threads", "4", "--device", "cpu",
          NULL);
    worker_pid = rth_spawn(run_worker, &WJ, &worker_out);
    for (int i = 0; i < 3000; i++) {
        char *text = rth_read_file(port_file, NULL);
        if (text) {
            int port = atoi(text);
            free(text);
            cr_assert(port > 0 && port < 65536, "port file holds %d", port);
            return port;
        }
        int status;
        if (waitpid(worker_pid, &status, WNOHANG) == worker_pid) {
            worker_pid = 0;
            char *err = rth_read_file(worker_out.err, NULL);
            cr_assert_fail("the worker exited (status %d) before listening: %s", status,
                           err ? err : "");
        }
        usleep(10000);
    }
    cr_assert_fail("the worker never wrote its port file");
    return -1;
}

/* A field of /proc/PID/status in KiB ("VmRSS", "VmHWM"). */
static long proc_kib(pid_t pid, const char *field)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    char *text = rth_read_file(path, NULL);
    cr_assert(text, "cannot read %s", path);
    const char *p = strstr(text, field);
    cr_assert(p, "%s has no %s", path, field);
    long v = strtol(p + strlen(field) + 1, NULL, 10);
    free(text);
    return v;
}

static void stop_worker_process(void)
{
    cr_assert(worker_pid > 0);
    kill(worker_pid, SIGTERM);
    int status = rth_reap(worker_pid);
    worker_pid = 0;
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the worker ended with status %d", status);
}

static const char *const guarded[] = {PROTO_METHOD_LOAD_MODULE, PROTO_METHOD_CALL,
                                      PROTO_METHOD_STATS, PROTO_METHOD_SHUTDOWN,
                                      PROTO_METHOD_REDUCE_CHUNK};
#define N_GUARDED (sizeof guarded / sizeof guarded[0])

Test(rt_hardening, a_tokenless_lz4_bomb_is_refused_without_allocating)
{
    make_bomb();
    int port = start_worker_process();
    rth_connect(port);
    cr_assert(rth_ping(R.ch_none, NULL) == 0);
    long hwm0 = proc_kib(worker_pid, "VmHWM:"), rss0 = proc_kib(worker_pid, "VmRSS:");

    double worst = 0;
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < N_GUARDED; i++) {
            double ms;
            char err[512];
            int rc =
                send_raw(R.ch_none, guarded[i], bomb, bomb_len, &ms, err, sizeof err);
            cr_assert(rc == FERRY_EUNAUTH, "%s: %s (%s), expected UNAUTHENTICATED",
                      guarded[i], ferry_err_name(rc), err);
            cr_assert(strstr(err, "missing cluster token"), "%s: %s", guarded[i], err);
            worst = ms > worst ? ms : worst;
        }
    }
    /* Ping needs no token, so its request is read: it is capped small. */
    double ping_ms;
    char err[512];
    int rc =
        send_raw(R.ch_none, PROTO_METHOD_PING, bomb, bomb_len, &ping_ms, err, sizeof err);
    cr_assert(rc == FERRY_EMSGSIZE, "Ping with the bomb: %s (%s)", ferry_err_name(rc),
              err);
    cr_assert(rth_ping(R.ch_none, NULL) == 0, "the worker no longer answers Ping");

    long hwm1 = proc_kib(worker_pid, "VmHWM:"), rss1 = proc_kib(worker_pid, "VmRSS:");
    fprintf(stderr,
            "lz4 bomb (%zu bytes on the wire, 1 GiB declared): slowest refusal %.1f ms, "
            "Ping %.1f ms; worker peak RSS %ld -> %ld KiB, RSS %ld -> %ld KiB\n",
            bomb_len, worst, ping_ms, hwm0, hwm1, rss0, rss1);
    /* Each refusal came within RTH_CALL_TIMEOUT (the codes above): the
     * liveness bound. How soon is bench/hardening's (tokenless_bomb_refused_max,
     * bomb_to_ping_refused_max); decoding the bomb would take 1 GiB. */
    cr_assert(hwm1 - hwm0 < 64 * 1024, "the worker's peak RSS grew by %ld KiB",
              hwm1 - hwm0);

    rth_disconnect();
    stop_worker_process();
}

/* ---- file descriptors ---------------------------------------------------------- */

/* Finding 2: idle connections exhaust the worker's descriptors; gRPC 1.51's
 * listener then fails accept() with EMFILE and never accepts again, even
 * once they are closed. The worker notices that its own port no longer
 * answers and exits with status 4, for its supervisor to restart it. */
Test(rt_hardening, a_worker_whose_listener_died_of_emfile_exits_to_be_restarted,
     .timeout = 90)
{
    worker_nofile = 128;
    int port = start_worker_process();
    worker_nofile = 0;
    enum { CONNS = 300 };
    int fds[CONNS];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < CONNS; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert(fds[i] >= 0, "socket: %s", strerror(errno));
        /* The kernel completes the handshake from the backlog either way. */
        connect(fds[i], (struct sockaddr *)&a, sizeof a);
    }
    /* Until it holds all 128: its next accept() fails with EMFILE. */
    int open_fds = tcom_wait_open_fds(worker_pid, 128, 10000);
    cr_assert(open_fds >= 128, "the worker holds %d descriptors, not its 128", open_fds);
    for (int i = 0; i < CONNS; i++)
        close(fds[i]);

    /* The flood is over; the worker must not stay alive and deaf. */
    int status = 0;
    pid_t got = 0;
    for (int i = 0; i < 300 && got == 0; i++) {
        got = waitpid(worker_pid, &status, WNOHANG);
        if (got == 0)
            usleep(100 * 1000);
    }
    char *log = rth_read_file(worker_out.err, NULL);
    fprintf(stderr, "worker log after %d idle connections with 128 descriptors:\n%s",
            CONNS, log ? log : "");
    cr_assert(got == worker_pid, "the worker is still running 30 s after the flood");
    worker_pid = 0;
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 4,
              "the worker ended with status %d, expected exit status 4", status);
    cr_assert(log && strstr(log, "no longer accepts connections"), "log: %s",
              log ? log : "");
    free(log);
}

/* ---- garbage, with and without the token ------------------------------------- */

typedef struct garbage {
    const char *what;
    uint8_t bytes[32];
    size_t len;
    int with_token; /* the result with the token */
} garbage;

static const garbage junk[] = {
    {"16 bytes of 0xff",
     {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
      0xff, 0xff},
     16,
     FERRY_EINVAL},
    {"a payload longer than the message",
     {15 << 3 | 2, 0x80, 0x80, 0x04, 1, 2, 3},
     7,
     FERRY_EINVAL},
    {"an unknown codec", {14 << 3 | 2, 2, 1 << 3, 9, 15 << 3 | 2, 1, 0}, 7, FERRY_EINVAL},
    {"a field of wire type 7", {1 << 3 | 7, 0}, 2, FERRY_EINVAL},
    /* PayloadInfo {LZ4, 2^40}: over any limit */
    {"a payload declared at 1 TiB",
     {14 << 3 | 2, 9, 1 << 3, 1, 2 << 3, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 15 << 3 | 2,
      1, 0},
     14,
     FERRY_EMSGSIZE},
};

RTH_TEST(rt_hardening_inproc, tokenless_garbage_is_unauthenticated)
{
    rpc_channel *chs[] = {R.ch_none, R.ch_wrong};
    for (size_t c = 0; c < 2; c++)
        for (size_t i = 0; i < N_GUARDED; i++)
            for (size_t j = 0; j < sizeof junk / sizeof junk[0]; j++) {
                char err[512];
                int rc = send_raw(chs[c], guarded[i], junk[j].bytes, junk[j].len, NULL,
                                  err, sizeof err);
                cr_assert(rc == FERRY_EUNAUTH, "%s, %s token: %s: %s (%s)", guarded[i],
                          c ? "wrong" : "no", junk[j].what, ferry_err_name(rc), err);
            }
    proto_stats_reply *s = rth_stats(R.ch);
    cr_assert(s->calls_served == 0 && s->modules_loaded == 0);
    proto_free(s);
}

RTH_TEST(rt_hardening_inproc, a_malformed_request_with_the_token_is_invalid_argument)
{
    /* Shutdown last of all would stop the worker if it were taken. */
    const char *methods[] = {PROTO_METHOD_LOAD_MODULE, PROTO_METHOD_CALL,
                             PROTO_METHOD_STATS,       PROTO_METHOD_REDUCE_CHUNK,
                             PROTO_METHOD_SHUTDOWN,    PROTO_METHOD_PING};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        for (size_t j = 0; j < sizeof junk / sizeof junk[0]; j++) {
            char err[512];
            int rc = send_raw(R.ch, methods[i], junk[j].bytes, junk[j].len, NULL, err,
                              sizeof err);
            cr_assert(rc == junk[j].with_token, "%s: %s: %s (%s), expected %s",
                      methods[i], junk[j].what, ferry_err_name(rc), err,
                      ferry_err_name(junk[j].with_token));
        }
    /* None of them was taken for a Shutdown. */
    cr_assert(rth_ping(R.ch, NULL) == 0);
    proto_stats_reply *s = rth_stats(R.ch);
    proto_free(s);
}

/* ---- the log ------------------------------------------------------------------ */

static size_t count_lines(const char *log, const char *needle)
{
    size_t n = 0;
    for (const char *p = log; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* The refusals a log accounts for: the first has a line of its own; the
 * rest are summed up in summaries. */
static unsigned long long refusals_logged(const char *log)
{
    unsigned long long logged = 0;
    for (const char *p = log; (p = strstr(p, "refused ")); p++) {
        unsigned long long k;
        if (sscanf(p, "refused %llu more calls", &k) == 1)
            logged += k;
        else if (strncmp(p, "refused " PROTO_METHOD_STATS " from ",
                         strlen("refused " PROTO_METHOD_STATS " from ")) == 0)
            logged += 1;
    }
    return logged;
}

Test(rt_hardening, ten_thousand_refusals_make_a_few_log_lines)
{
    rth_open_client();
    rt_worker_opts o = {.rank = 1, .log_interval_ms = 1000};
    rth_capture_start();
    rth_start_worker(&o);
    enum { TOTAL = 10000, INFLIGHT = 64 };
    Ferry__StatsRequest req = FERRY__STATS_REQUEST__INIT;
    proto_raw out_head = proto_raw_pack(&req.base);
    rpc_msg_out out = {.head_bytes = out_head.data, .head_len = out_head.len};
    rpc_call calls[INFLIGHT];
    rpc_call *ptrs[INFLIGHT];
    uint64_t t0 = uv_hrtime();
    size_t refused = 0;
    for (size_t done = 0; done < TOTAL; done += INFLIGHT) {
        size_t k = TOTAL - done < INFLIGHT ? TOTAL - done : INFLIGHT;
        for (size_t i = 0; i < k; i++) {
            memset(&calls[i], 0, sizeof calls[i]);
            ptrs[i] = &calls[i];
            cr_assert(rpc_call_start(R.ch_none, &calls[i], PROTO_METHOD_STATS, &out,
                                     RTH_CALL_TIMEOUT, NULL) == 0);
        }
        rpc_call_wait_all(ptrs, k);
        for (size_t i = 0; i < k; i++) {
            refused += calls[i].result == FERRY_EUNAUTH;
            rpc_call_fini(&calls[i]);
        }
    }
    double secs = (double)(uv_hrtime() - t0) / 1e9;
    cr_assert(refused == TOTAL, "%zu of %d refused", refused, TOTAL);
    /* The last summary is due within 2 s: wait until the log accounts for
     * every refusal, or 10 s pass. */
    for (uint64_t end = uv_hrtime() + 10 * (uint64_t)1000000000;
         uv_hrtime() < end; usleep(20 * 1000)) {
        char *so_far = rth_capture_peek();
        unsigned long long n = refusals_logged(so_far);
        free(so_far);
        if (n >= TOTAL)
            break;
    }
    char *log = rth_capture_end();
    size_t lines = count_lines(log, "\n"), refusal_lines = count_lines(log, "refused ");
    unsigned long long logged = refusals_logged(log);
    fprintf(stderr,
            "%d tokenless calls in %.2f s: %zu log lines (%zu about refusals), "
            "%llu refusals accounted for\n",
            TOTAL, secs, lines, refusal_lines, logged);
    cr_assert(refusal_lines >= 2, "no summary of the refusals:\n%s", log);
    cr_assert(refusal_lines <= (size_t)secs + 4, "%zu refusal lines in %.1f s:\n%.2000s",
              refusal_lines, secs, log);
    cr_assert(logged == TOTAL, "the log accounts for %llu refusals, not %d:\n%s", logged,
              TOTAL, log);
    cr_assert(strstr(log, "127.0.0.1"), "the peer is not named:\n%s", log);
    cr_assert(strstr(log, "missing cluster token"), "the reason is not named:\n%s", log);
    free(log);
}

/* True when `s` holds a byte a terminal would act on. */
static bool has_control(const char *s)
{
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\n') || *s == 0x7f)
            return true;
    return false;
}

RTH_TEST(rt_hardening_inproc, a_hostile_module_name_is_escaped_in_the_log_and_errors)
{
    size_t len = 0;
    char *bytes = rth_read_file(rth_module("faulty.so"), &len);
    cr_assert(bytes);
    char sha[RT_SHA256_HEX];
    rt_sha256_hex(bytes, len, sha);
    size_t name_len = 100 * 1024;
    char *name = malloc(name_len + 1);
    const char *evil = "\x1b[2J\x1b[31mred\r\nferry worker: FAKE line\x07";
    memset(name, 'A', name_len);
    memcpy(name, evil, strlen(evil));
    name[name_len] = '\0';

    Ferry__LoadModuleRequest req = FERRY__LOAD_MODULE_REQUEST__INIT;
    req.sha256 = sha;
    req.name = name;
    rth_capture_start();
    rpc_call call;
    int rc = rth_call(R.ch, &call, PROTO_METHOD_LOAD_MODULE, &req.base, bytes, len);
    rpc_call_fini(&call);
    /* Bytes that do not hash to the digest: the error names the module. */
    char bad_sha[RT_SHA256_HEX];
    memcpy(bad_sha, sha, sizeof bad_sha);
    bad_sha[0] = bad_sha[0] == '0' ? '1' : '0';
    req.sha256 = bad_sha;
    int bad_rc = rth_call(R.ch, &call, PROTO_METHOD_LOAD_MODULE, &req.base, bytes, len);
    char *errmsg = strdup(call.errmsg ? call.errmsg : "");
    rpc_call_fini(&call);
    /* A function name from the wire, quoted in the error. */
    char fn_err[2048];
    int fn_rc = rth_invoke(R.ch, sha, "\x1b]0;pwned\x07\nno such", NULL, NULL, fn_err,
                           sizeof fn_err);
    char *log = rth_capture_end();
    free(bytes);
    free(name);

    cr_assert(rc == 0, "LoadModule under a hostile name: %s", ferry_err_name(rc));
    cr_assert(bad_rc == FERRY_ECORRUPT, "%s: %s", ferry_err_name(bad_rc), errmsg);
    cr_assert(fn_rc == FERRY_ENOENT, "%s: %s", ferry_err_name(fn_rc), fn_err);
    fprintf(stderr, "log: %.400s\nerror: %.300s\nerror: %.300s\n", log, errmsg, fn_err);
    cr_assert(strstr(log, "\\x1b[2J\\x1b[31mred\\x0d\\x0aferry worker: FAKE line\\x07"),
              "the name is not escaped in the log:\n%.2000s", log);
    cr_assert(!has_control(log), "a control byte reached the log:\n%.2000s", log);
    cr_assert(!strstr(log, "\nferry worker: FAKE"), "the name forged a log line");
    cr_assert(strstr(log, "(102400 bytes)"), "the name is not cut:\n%.2000s", log);
    cr_assert(strlen(log) < 4096, "%zu bytes of log for two loads", strlen(log));
    cr_assert(strstr(errmsg, "\\x1b[2J"), "error text: %s", errmsg);
    cr_assert(!has_control(errmsg) && !strchr(errmsg, '\n'), "error text: %s", errmsg);
    cr_assert(strlen(errmsg) < 1024, "%zu bytes of error text", strlen(errmsg));
    cr_assert(!has_control(fn_err) && !strchr(fn_err, '\n'), "error text: %s", fn_err);
    free(errmsg);
    free(log);
}
