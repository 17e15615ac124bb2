/* Helpers for the end-to-end tests of training runs. */
#include <dirent.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "cluster/cluster.h"
#include "ferry.pb-c.h"
#include "rpc/rpc.h"
#include "runtime/collective/coll_int.h"
#include "config/config.h"
#include "e2e.h"
#include "e2e_train.h"
#include "proto/raw.h"

void e2e_expect_option_errors(const char *const (*bad)[3], size_t n)
{
    for (size_t i = 0; i < n; i++) {
        e2e_run r;
        e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("linreg"), bad[i][0], bad[i][1],
                  NULL);
        E2E_EXPECT(&r, 2);
        cr_assert(e2e_has(r.err, bad[i][2]), "%s %s:\n%s", bad[i][0], bad[i][1], r.err);
        e2e_run_fini(&r);
    }
}

double e2e_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void e2e_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* The number after "\"key\":" in a JSON text; NAN if absent. */
double e2e_json_number(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *at = strstr(json, pat);
    return at ? strtod(at + strlen(pat), NULL) : NAN;
}

/* Whether the JSON text has "\"key\":\"value\"" (or a bare value: true). */
bool e2e_json_is(const char *json, const char *key, const char *value, bool quoted)
{
    char pat[128];
    snprintf(pat, sizeof pat, quoted ? "\"%s\":\"%s\"" : "\"%s\":%s", key, value);
    return e2e_has(json, pat);
}

/* Worker `rank`'s address, from the cluster's state file. */
void e2e_worker_address(int rank, char *buf, size_t len)
{
    conf_cluster c;
    char state[600], err[CONF_ERR_LEN] = "";
    snprintf(state, sizeof state, "%s/cluster.ini", e2e_home);
    conf_defaults(&c);
    cr_assert(conf_load(&c, state, err, sizeof err) == 0, "%s: %s", state, err);
    cr_assert((size_t)rank < c.n_workers);
    snprintf(buf, len, "%s", c.workers[rank].address);
    conf_fini(&c);
}

/* The cluster's token. */
void e2e_cluster_token(char *buf, size_t len)
{
    conf_cluster c;
    char state[600], err[CONF_ERR_LEN] = "";
    snprintf(state, sizeof state, "%s/cluster.ini", e2e_home);
    conf_defaults(&c);
    cr_assert(conf_load(&c, state, err, sizeof err) == 0, "%s: %s", state, err);
    int rc = conf_token_read(c.token_file, buf, len, err, sizeof err);
    conf_fini(&c);
    cr_assert(rc == 0, "token: %s", err);
}

/* The output files of the next ferry command this test starts: e2e.c
 * numbers each command's out-N and err-N, next to FERRY_HOME, in the order
 * it starts them (the child creates them, so call this before the start:
 * every earlier command's files exist by then). */
void e2e_next_outputs(char out[600], char err[600])
{
    char home[600];
    snprintf(home, sizeof home, "%s", e2e_home);
    const char *dir = dirname(home);
    DIR *d = opendir(dir);
    cr_assert(d, "cannot list %s", dir);
    int newest = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        int n;
        char tail;
        if (sscanf(de->d_name, "err-%d%c", &n, &tail) == 1 && n > newest)
            newest = n;
    }
    closedir(d);
    snprintf(out, 600, "%s/out-%d", dir, newest + 1);
    snprintf(err, 600, "%s/err-%d", dir, newest + 1);
}

/* Waits up to ms for the file at `path` to contain `needle`. */
bool e2e_wait_for_text(const char *path, const char *needle, int ms)
{
    double end = e2e_now_ms() + ms;
    do {
        char *text = e2e_slurp(path);
        bool found = e2e_has(text, needle);
        free(text);
        if (found)
            return true;
        e2e_sleep_ms(50);
    } while (e2e_now_ms() < end);
    return false;
}

/* Waits up to ms for `pid` (our child) to exit; its exit status, 128+N for
 * signal N, or -1 if it still runs. */
int e2e_wait_exit(pid_t pid, int ms)
{
    double end = e2e_now_ms() + ms;
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (e2e_now_ms() > end)
            return -1;
        e2e_sleep_ms(10);
    }
}

/* Waits up to ms until `ferry status --json` succeeds with no call in
 * flight on any of the `n` workers (a worker that was stopped finishes, or
 * fails, the step it was in first). */
bool e2e_wait_idle(int n, int ms)
{
    double end = e2e_now_ms() + ms;
    do {
        e2e_run r;
        e2e_ferry(&r, E2E_CMD_MS, "status", "--json", NULL);
        int idle = 0;
        for (const char *p = r.out; (p = strstr(p, "\"in_flight\":0,")); p++)
            idle++;
        bool ok = r.status == 0 && idle == n;
        e2e_run_fini(&r);
        if (ok)
            return true;
        e2e_sleep_ms(200);
    } while (e2e_now_ms() < end);
    return false;
}

void e2e_load_module(cluster *cl, const char *path, const char *name, cluster_module *m)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s", path);
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    rewind(f);
    void *bytes = malloc(len ? len : 1);
    cr_assert(bytes && fread(bytes, 1, len, f) == len, "%s: a short read", path);
    fclose(f);
    int rc = cluster_load_module(cl, name, bytes, len, m);
    free(bytes);
    cr_assert(rc == 0, "loading %s: %s", name, cluster_error(cl));
}

int e2e_exchange_chunk(rpc_channel *ch, uint64_t session, const uint8_t *secret,
                       uint64_t step, uint32_t chunk, uint64_t count,
                       const float *payload, size_t floats, char *msg, size_t msglen)
{
    Ferry__ReduceChunkRequest req = FERRY__REDUCE_CHUNK_REQUEST__INIT;
    req.job = session;
    req.step = step;
    req.phase = RT_PHASE_EX; /* a world of 2 exchanges */
    req.chunk = chunk;
    req.from_rank = 1;
    req.count = count;
    req.elem = FERRY__ELEM__ELEM_F32;
    if (secret) {
        req.secret.data = (uint8_t *)secret;
        req.secret.len = RT_COMM_SECRET_BYTES;
    }
    proto_raw out_head = proto_raw_pack(&req.base);
    rpc_msg_out out = {.head_bytes = out_head.data,
                       .head_len = out_head.len,
                       .payload = payload,
                       .payload_len = floats * sizeof(float),
                       .codec = RPC_CODEC_RAW};
    return e2e_call_raw(ch, PROTO_METHOD_REDUCE_CHUNK, &out, msg, msglen);
}

int e2e_call_raw(rpc_channel *ch, const char *method, const rpc_msg_out *out, char *msg,
                 size_t msglen)
{
    rpc_call call = {0};
    int rc = rpc_call_start(ch, &call, method, out, 10000, NULL);
    cr_assert(rc == 0, "rpc_call_start: %s", ferry_err_name(rc));
    rc = rpc_call_wait(&call);
    snprintf(msg, msglen, "%s", call.errmsg ? call.errmsg : "");
    rpc_call_fini(&call);
    return rc;
}
