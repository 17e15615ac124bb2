/* hello — the smallest ferry task, and the one to copy.
 *
 * A task is one shared object built from one C file against one header,
 * <ferry/task.h>. It exports exactly one symbol, `ferry_task`, made by
 * FERRY_TASK(): the task's name, the functions workers run, and optionally
 * a driver that runs on the master.
 *
 *   - A function gets a ferry_ctx_t (its rank, the world size, and
 *     ctx->ops: log, cancelled, scratch, result, fail), the argument bytes,
 *     and returns 0 with its result allocated by ctx->ops->result(), or a
 *     FERRY_E* code with `return ctx->ops->fail(ctx, code, "why")`.
 *   - The driver gets a ferry_driver_t: drv->ops->call_all() runs a function
 *     on every worker, call_any() hands many calls to whichever worker is
 *     free, call() targets one rank; each blocks until done. Results are
 *     ferry's: release them with drv->ops->free_bytes(). argv[1..] are the
 *     arguments after `--` on `ferry submit`; drv->json asks for one JSON
 *     object on stdout instead of text.
 *   - A task reaches ferry only through those tables, never through linked
 *     symbols, and keeps everything else static.
 *
 * Build it:
 *
 *     cc -shared -fPIC -fvisibility=hidden my_task.c \
 *        $(pkg-config --cflags --libs ferry) -o my_task.so
 *
 * or with meson:
 *
 *     shared_module('my_task', 'my_task.c', name_prefix: '',
 *                   dependencies: dependency('ferry'),
 *                   gnu_symbol_visibility: 'hidden')
 *
 * and run it:
 *
 *     ferry start 4
 *     ferry submit my_task.so -- arg1 arg2
 *     ferry shutdown
 *
 * This one: every worker answers "hello" with its rank, the world size, its
 * pid, host and device; the driver prints one line per worker, or
 * {"task":"hello","workers":[{"rank":0,...},...]} with --json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ferry/task.h>

#define HOST_LEN   256
#define DEVICE_LEN 128

/* ---- worker side ---------------------------------------------------------- */

/* The reply is text, one "key value" per line: readable in a log, and the
 * same on every host whatever its byte order. */
static int hello(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)in;
    char host[HOST_LEN] = "unknown";
    char text[HOST_LEN + DEVICE_LEN + 128];
    if (gethostname(host, sizeof host) != 0)
        strcpy(host, "unknown");
    host[sizeof host - 1] = '\0';
    /* The device arrives with the device ABI; until then work is on the CPU. */
    const char *device = "cpu";
    int n = snprintf(text, sizeof text,
                     "rank %d\nworld_size %d\npid %d\nhost %s\ndevice %s\n", ctx->rank,
                     ctx->world_size, (int)getpid(), host, device);
    if (n < 0 || (size_t)n >= sizeof text)
        return ctx->ops->fail(ctx, FERRY_EINTERNAL, "hello: reply does not fit");
    char *r = ctx->ops->result(ctx, out, (size_t)n);
    if (!r)
        return ctx->ops->fail(ctx, FERRY_ENOMEM, "hello: no memory for the reply");
    memcpy(r, text, (size_t)n);
    return 0;
}

/* ---- master side ---------------------------------------------------------- */

typedef struct reply {
    int rank, world_size, pid;
    char host[HOST_LEN];
    char device[DEVICE_LEN];
} reply;

static int parse(const ferry_bytes_t *b, reply *r)
{
    char text[HOST_LEN + DEVICE_LEN + 128];
    char *save = NULL;
    int seen = 0;
    if (!b->data || b->len == 0 || b->len >= sizeof text)
        return -1;
    memcpy(text, b->data, b->len);
    text[b->len] = '\0';
    for (char *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *value = strchr(line, ' ');
        if (!value)
            continue;
        *value++ = '\0';
        if (strcmp(line, "rank") == 0 && sscanf(value, "%d", &r->rank) == 1)
            seen |= 1;
        else if (strcmp(line, "world_size") == 0 &&
                 sscanf(value, "%d", &r->world_size) == 1)
            seen |= 2;
        else if (strcmp(line, "pid") == 0 && sscanf(value, "%d", &r->pid) == 1)
            seen |= 4;
        else if (strcmp(line, "host") == 0 && *value)
            seen |= 8 * (snprintf(r->host, sizeof r->host, "%s", value) > 0);
        else if (strcmp(line, "device") == 0 && *value)
            seen |= 16 * (snprintf(r->device, sizeof r->device, "%s", value) > 0);
    }
    return seen == 31 ? 0 : -1;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void print_json(ferry_driver_t *drv, const reply *r, int n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        drv->ops->log(drv, FERRY_LOG_ERROR, "hello: out of memory");
        return;
    }
    fprintf(f, "{\"task\":\"hello\",\"world_size\":%d,\"workers\":[", drv->world_size);
    for (int i = 0; i < n; i++) {
        ferry_worker_info_t info = {0};
        const char *address =
            drv->ops->worker(drv, i, &info) == 0 && info.address ? info.address : "";
        fprintf(f, "%s{\"rank\":%d,\"pid\":%d,\"host\":", i ? "," : "", r[i].rank,
                r[i].pid);
        json_string(f, r[i].host);
        fprintf(f, ",\"device\":");
        json_string(f, r[i].device);
        fprintf(f, ",\"address\":");
        json_string(f, address);
        fputc('}', f);
    }
    fprintf(f, "]}");
    fclose(f);
    if (text)
        drv->ops->print(drv, "%s", text);
    free(text);
}

static int hello_main(ferry_driver_t *drv)
{
    int n = drv->world_size;
    if (n <= 0) {
        drv->ops->log(drv, FERRY_LOG_ERROR, "hello: the cluster has no workers");
        return FERRY_EINVAL;
    }
    ferry_bytes_t *out = calloc((size_t)n, sizeof *out);
    reply *r = calloc((size_t)n, sizeof *r);
    int rc = FERRY_ENOMEM;
    if (!out || !r) {
        drv->ops->log(drv, FERRY_LOG_ERROR, "hello: out of memory");
        goto done;
    }
    rc = drv->ops->call_all(drv, "hello", NULL, out);
    if (rc) {
        drv->ops->log(drv, FERRY_LOG_ERROR, "%s", drv->ops->error(drv));
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (parse(&out[i], &r[i]) != 0 || r[i].rank != i || r[i].world_size != n) {
            drv->ops->log(drv, FERRY_LOG_ERROR,
                          "hello: worker %d sent a reply that is not hello's (%zu bytes)",
                          i, out[i].len);
            rc = FERRY_EPROTO;
            goto done;
        }
    }
    if (drv->json) {
        print_json(drv, r, n);
    } else {
        for (int i = 0; i < n; i++)
            drv->ops->print(drv, "rank %d  pid %d  host %s  device %s", r[i].rank,
                            r[i].pid, r[i].host, r[i].device);
    }
done:
    for (int i = 0; out && i < n; i++)
        if (out[i].data)
            drv->ops->free_bytes(drv, &out[i]);
    free(out);
    free(r);
    return rc;
}

FERRY_TASK(.name = "hello", .functions = FERRY_FUNCTIONS({"hello", hello}),
           .driver = hello_main);
