/* tests/runtime — the shared fixture. */
#include "rth.h"
#include "tcommon.h"
#include "proto/raw.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

rth R;

/* ---- files ---------------------------------------------------------------- */

char *rth_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            buf = realloc(buf, (cap *= 2) + 1);
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

const char *rth_module(const char *name)
{
    static char ring[8][1024];
    static int next;
    const char *dir = getenv("FERRY_TEST_MODULES");
    cr_assert(dir && dir[0], "FERRY_TEST_MODULES is not set (run through meson test)");
    char *p = ring[next++ % 8];
    snprintf(p, sizeof ring[0], "%s/%s", dir, name);
    return p;
}

const char *rth_token_file(void)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/token", R.dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(fd >= 0, "token file: %s", strerror(errno));
    cr_assert(write(fd, RTH_TOKEN "\n", sizeof RTH_TOKEN) == (ssize_t)sizeof RTH_TOKEN);
    close(fd);
    return path;
}

/* ---- fixture -------------------------------------------------------------- */

void rth_setup_dir(void)
{
    memset(&R, 0, sizeof R);
    snprintf(R.dir, sizeof R.dir, "/tmp/ferry-rt-XXXXXX");
    cr_assert(mkdtemp(R.dir), "mkdtemp: %s", strerror(errno));
    snprintf(R.state, sizeof R.state, "%s/state", R.dir);
}

void rth_start_worker(rt_worker_opts *o)
{
    if (!o->listen)
        o->listen = "127.0.0.1:0";
    if (!o->state_dir)
        o->state_dir = R.state;
    if (!o->token)
        o->token = RTH_TOKEN;
    if (!o->threads)
        o->threads = 8;
    int rc = rt_worker_create(o, &R.worker);
    cr_assert(rc == 0, "rt_worker_create: %s", ferry_err_name(rc));
    R.port = rt_worker_port(R.worker);
    cr_assert(R.port > 0 && R.port < 65536);
    rth_connect(R.port);
}

void rth_connect(int port)
{
    if (!R.client)
        rth_open_client();
    R.port = port;
    snprintf(R.target, sizeof R.target, "127.0.0.1:%d", R.port);
    rpc_channel_opts good = {.token = RTH_TOKEN};
    rpc_channel_opts wrong = {.token = "0123456789abcdef0123456789abcdef"
                                       "0123456789abcdef0123456789abcdee"};
    cr_assert(rpc_channel_create(R.client, R.target, &good, &R.ch) == 0);
    cr_assert(rpc_channel_create(R.client, R.target, NULL, &R.ch_none) == 0);
    cr_assert(rpc_channel_create(R.client, R.target, &wrong, &R.ch_wrong) == 0);
}

void rth_open_client(void)
{
    cr_assert(uv_loop_init(&R.loop) == 0);
    R.loop_open = true;
    int rc = rpc_client_create(&R.loop, &R.client);
    cr_assert(rc == 0, "rpc_client_create: %s", ferry_err_name(rc));
}

void rth_setup(void)
{
    rth_setup_dir();
    rth_open_client();
    rt_worker_opts o = {.rank = 2};
    rth_start_worker(&o);
}

void rth_disconnect(void)
{
    rpc_channel **chs[] = {&R.ch, &R.ch_none, &R.ch_wrong};
    for (size_t i = 0; i < 3; i++) {
        if (*chs[i])
            rpc_channel_destroy(*chs[i]);
        *chs[i] = NULL;
    }
}

static int release_all(void)
{
    rth_disconnect();
    if (R.client)
        rpc_client_close(R.client);
    R.client = NULL;
    int rc = 0;
    if (R.loop_open)
        uv_run(&R.loop, UV_RUN_DEFAULT);
    rt_worker_destroy(R.worker, 0);
    R.worker = NULL;
    rpc_buf_trim();
    if (R.loop_open) {
        rc = uv_loop_close(&R.loop);
        if (rc != 0)
            uv_print_all_handles(&R.loop, stderr);
        else
            R.loop_open = false;
    }
    tcom_rm_tree(R.dir);
    R.dir[0] = '\0';
    return rc;
}

void rth_finish(void)
{
    int rc = release_all();
    R.finished = true;
    cr_assert(rc == 0, "uv_loop_close: %s (a handle was left open)", uv_err_name(rc));
    tcom_assert_no_leaks();
}

void rth_teardown(void)
{
    if (!R.finished)
        release_all();
}

/* ---- calls ---------------------------------------------------------------- */

int rth_call(rpc_channel *ch, rpc_call *call, const char *method,
             const ProtobufCMessage *head, const void *payload, size_t len)
{
    /* On the heap: the hardening tests send heads far beyond a proto_raw. */
    size_t head_len = head ? protobuf_c_message_get_packed_size(head) : 0;
    uint8_t *packed = malloc(head_len + 1);
    cr_assert(packed);
    if (head)
        protobuf_c_message_pack(head, packed);
    rpc_msg_out out = {
        .head_bytes = packed, .head_len = head_len, .payload = payload, .payload_len = len};
    memset(call, 0, sizeof *call);
    int rc = rpc_call_start(ch, call, method, &out, RTH_CALL_TIMEOUT, NULL);
    free(packed);
    cr_assert(rc == 0, "rpc_call_start(%s): %s", method, ferry_err_name(rc));
    return rpc_call_wait(call);
}

int rth_call_head(rpc_channel *ch, rpc_call *call, const char *method, proto_bytes *head,
                  const void *payload, size_t len)
{
    rpc_msg_out out = {.head_bytes = head->data,
                       .head_len = head->len,
                       .payload = payload,
                       .payload_len = len};
    memset(call, 0, sizeof *call);
    int rc = rpc_call_start(ch, call, method, &out, RTH_CALL_TIMEOUT, NULL);
    proto_bytes_fini(head);
    cr_assert(rc == 0, "rpc_call_start(%s): %s", method, ferry_err_name(rc));
    return rpc_call_wait(call);
}

static void copy_err(const rpc_call *call, char *err, size_t errlen)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", call->errmsg ? call->errmsg : "");
}

int rth_load(rpc_channel *ch, const char *name, const char *sha, bool send_bytes,
             proto_load_module_reply **reply, char *err, size_t errlen)
{
    size_t len = 0;
    char *bytes = rth_read_file(rth_module(name), &len);
    cr_assert(bytes, "cannot read module %s", rth_module(name));
    char hex[RT_SHA256_HEX];
    rt_sha256_hex(bytes, len, hex);
    proto_load_module_req req = {.sha256 = (char *)(sha ? sha : hex),
                                 .name = (char *)name};
    proto_bytes head;
    cr_assert(proto_load_module_req_pack(&req, &head) == 0);
    rpc_call call;
    int rc = rth_call_head(ch, &call, PROTO_METHOD_LOAD_MODULE, &head,
                           send_bytes ? bytes : NULL, send_bytes ? len : 0);
    free(bytes);
    copy_err(&call, err, errlen);
    if (reply)
        *reply = NULL;
    if (rc == 0 && reply) {
        int urc =
            proto_load_module_reply_unpack(call.reply.head, call.reply.head_len, reply);
        cr_assert(urc == 0, "reply is not a LoadModuleReply");
    }
    rpc_call_fini(&call);
    return rc;
}

void rth_load_faulty(char sha[RT_SHA256_HEX])
{
    size_t len = 0;
    char *bytes = rth_read_file(rth_module("faulty.so"), &len);
    cr_assert(bytes);
    rt_sha256_hex(bytes, len, sha);
    free(bytes);
    char err[1024];
    int rc = rth_load(R.ch, "faulty.so", sha, true, NULL, err, sizeof err);
    cr_assert(rc == 0, "loading faulty.so: %s: %s", ferry_err_name(rc), err);
}

int rth_invoke(rpc_channel *ch, const char *sha, const char *fn, const char *arg,
               char **out, char *err, size_t errlen)
{
    proto_call_req req = {
        .sha256 = (char *)sha, .function = (char *)fn, .rank = 2, .world_size = 4};
    proto_bytes head;
    cr_assert(proto_call_req_pack(&req, &head) == 0);
    rpc_call call;
    int rc =
        rth_call_head(ch, &call, PROTO_METHOD_CALL, &head, arg, arg ? strlen(arg) : 0);
    copy_err(&call, err, errlen);
    if (out) {
        *out = NULL;
        if (rc == 0 && call.reply.payload) {
            *out = malloc(call.reply.payload_len + 1);
            memcpy(*out, call.reply.payload, call.reply.payload_len);
            (*out)[call.reply.payload_len] = '\0';
        }
    }
    if (rc == 0) {
        proto_call_reply *m = NULL;
        cr_assert(proto_call_reply_unpack(call.reply.head, call.reply.head_len, &m) == 0,
                  "reply is not a CallReply");
        cr_assert(m->elapsed_s >= 0);
        proto_free(m);
    }
    rpc_call_fini(&call);
    return rc;
}

proto_stats_reply *rth_stats(rpc_channel *ch)
{
    proto_bytes head = {0}; /* StatsRequest is empty */
    rpc_call call;
    int rc = rth_call_head(ch, &call, PROTO_METHOD_STATS, &head, NULL, 0);
    cr_assert(rc == 0, "Stats: %s: %s", ferry_err_name(rc), call.errmsg);
    proto_stats_reply *m = NULL;
    cr_assert(proto_stats_reply_unpack(call.reply.head, call.reply.head_len, &m) == 0);
    rpc_call_fini(&call);
    return m;
}

int rth_ping(rpc_channel *ch, proto_ping_reply **reply)
{
    proto_ping_req req = {.nonce = 77};
    proto_bytes head;
    cr_assert(proto_ping_req_pack(&req, &head) == 0);
    rpc_call call;
    int rc = rth_call_head(ch, &call, PROTO_METHOD_PING, &head, NULL, 0);
    if (reply)
        *reply = NULL;
    if (rc == 0 && reply)
        cr_assert(proto_ping_reply_unpack(call.reply.head, call.reply.head_len, reply) ==
                  0);
    rpc_call_fini(&call);
    return rc;
}

bool rth_stats_until(bool (*pred)(const proto_stats_reply *s, const void *arg),
                     const void *arg)
{
    double end = (double)uv_hrtime() / 1e6 + RTH_POLL_LIMIT_MS;
    for (;;) {
        proto_stats_reply *s = rth_stats(R.ch);
        bool ok = pred(s, arg);
        proto_free(s);
        if (ok)
            return true;
        if ((double)uv_hrtime() / 1e6 > end)
            return false;
        usleep(5000);
    }
}

/* ---- processes and output ------------------------------------------------- */

static int saved_stderr = -1;
static char capture_path[512];

void rth_capture_start(void)
{
    snprintf(capture_path, sizeof capture_path, "%s/stderr.txt", R.dir);
    fflush(stderr);
    int fd = open(capture_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(fd >= 0);
    saved_stderr = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

char *rth_capture_peek(void)
{
    fflush(stderr);
    char *text = rth_read_file(capture_path, NULL);
    return text ? text : strdup("");
}

char *rth_capture_end(void)
{
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    saved_stderr = -1;
    char *text = rth_read_file(capture_path, NULL);
    return text ? text : strdup("");
}

pid_t rth_spawn(int (*fn)(void *arg), void *arg, rth_child_out *paths)
{
    static int n;
    snprintf(paths->out, sizeof paths->out, "%s/child-%d.out", R.dir, n);
    snprintf(paths->err, sizeof paths->err, "%s/child-%d.err", R.dir, n++);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        int fo = open(paths->out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = open(paths->err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fo < 0 || fe < 0)
            _exit(120);
        dup2(fo, STDOUT_FILENO);
        dup2(fe, STDERR_FILENO);
        close(fo);
        close(fe);
        int rc = fn(arg);
        fflush(stdout);
        fflush(stderr);
#ifdef __SANITIZE_ADDRESS__
        if (__lsan_do_recoverable_leak_check() != 0)
            rc = 23; /* LeakSanitizer's own exit status */
#endif
        /* _exit: Criterion's exit handlers belong to the test process. */
        _exit(rc);
    }
    return pid;
}

int rth_reap(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return status;
}

int rth_fork(int (*fn)(void *arg), void *arg, char **out, char **errtext)
{
    rth_child_out paths;
    int status = rth_reap(rth_spawn(fn, arg, &paths));
    if (out)
        *out = rth_read_file(paths.out, NULL);
    if (errtext)
        *errtext = rth_read_file(paths.err, NULL);
    return status;
}
