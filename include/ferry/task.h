/* ferry — the task plugin ABI: the one header a task module includes.
 *
 * A task module is a shared object that exports exactly one symbol,
 * `ferry_task` (FERRY_TASK_SYMBOL), a versioned descriptor:
 *
 *     #include <ferry/task.h>
 *     static int square(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out);
 *     static int demo_main(ferry_driver_t *drv);
 *     FERRY_TASK(.name = "demo",
 *                .functions = FERRY_FUNCTIONS({"square", square}),
 *                .driver = demo_main);
 *
 * Build it with `cc -shared -fPIC -fvisibility=hidden $(pkg-config --cflags
 * --libs ferry)`. The module calls back into ferry only through the function
 * tables in the contexts it is handed, never through linked symbols, so it
 * binds to whichever ferry process loaded it (worker or master).
 *
 * Every struct shared across the boundary begins with `uint32_t version,
 * size`; the loader checks both before it touches anything else and refuses a
 * module built for another ABI with an error that names it. */
#ifndef FERRY_TASK_H
#define FERRY_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ferry/device.h>
#include <ferry/error.h>
#include <ferry/model.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change to the structs below. */
#define FERRY_TASK_ABI_VERSION 1u

/* The name of the one symbol a module exports. */
#define FERRY_TASK_SYMBOL "ferry_task"

/* Bytes crossing the boundary: function arguments and results. */
typedef struct ferry_bytes_t {
    void *data;
    size_t len;
} ferry_bytes_t;

/* Log levels for ferry_log(). */
enum { FERRY_LOG_ERROR = 0, FERRY_LOG_WARN = 1, FERRY_LOG_INFO = 2, FERRY_LOG_DEBUG = 3 };

/* ---- worker side: functions ----------------------------------------------- */

typedef struct ferry_ctx_t ferry_ctx_t;

/* What a worker offers the function it runs. Members may be called only from
 * the thread running the function, and only until it returns. */
typedef struct ferry_ctx_ops_t {
    uint32_t version, size;
    /* Writes one line to the worker's log, prefixed with task and function. */
    void (*log)(ferry_ctx_t *ctx, int level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    /* True once the caller cancelled, the deadline passed or the worker is
     * shutting down: a long function should stop and return FERRY_ECANCELED. */
    bool (*cancelled)(ferry_ctx_t *ctx);
    /* Scratch memory of at least `len` bytes, 64-byte aligned, valid until
     * the function returns; freed by the worker. NULL when out of memory. */
    void *(*scratch)(ferry_ctx_t *ctx, size_t len);
    /* Allocates the result: sets out->data and out->len and returns
     * out->data (NULL when out of memory). The worker owns and frees it after
     * the reply is sent. Call at most once. */
    void *(*result)(ferry_ctx_t *ctx, ferry_bytes_t *out, size_t len);
    /* Records the text that reaches the master with a failed return; returns
     * `err` so that a function can `return ctx->ops->fail(ctx, err, ...)`. */
    int (*fail)(ferry_ctx_t *ctx, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
} ferry_ctx_ops_t;

/* The context a function receives. Owned by the worker. */
struct ferry_ctx_t {
    uint32_t version, size;
    int rank;             /* this worker's rank in the cluster */
    int world_size;       /* number of workers */
    const char *task;     /* the module's task name */
    const char *function; /* the function being run */
    const ferry_ctx_ops_t *ops;
    ferry_device_t *device; /* the worker's device (see <ferry/device.h>) */
    void *impl;   /* the worker's; do not touch */
};

/* Runs on a worker. `in` holds the argument bytes (possibly empty), valid
 * until the function returns. Returns 0 with the result in `out` (allocated
 * with ctx->ops->result, or left empty), or a negative FERRY_E* code, with a
 * text set by ctx->ops->fail. */
typedef int (*ferry_fn_t)(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out);

typedef struct ferry_function_t {
    const char *name;
    ferry_fn_t fn;
} ferry_function_t;

/* ---- master side: the driver ---------------------------------------------- */

typedef struct ferry_driver_t ferry_driver_t;

/* One worker as the driver sees it. Strings live as long as the driver runs. */
typedef struct ferry_worker_info_t {
    uint32_t version, size;
    int rank;
    const char *address; /* "127.0.0.1:5001" */
    const char *device;  /* "cpu: ..." */
    const char *host;
    int pid;
} ferry_worker_info_t;

/* What the master offers a driver: calls on the cluster the module was
 * shipped to. Every call blocks until done and returns 0 or a FERRY_E* code;
 * on failure, error() gives a text naming the worker, module and function.
 * Results are allocated by ferry: release each with free_bytes(). Called from
 * the driver's thread only. */
typedef struct ferry_driver_ops_t {
    uint32_t version, size;
    /* Runs `function` on worker `rank` with `in` (NULL: no argument). */
    int (*call)(ferry_driver_t *drv, int rank, const char *function,
                const ferry_bytes_t *in, ferry_bytes_t *out);
    /* Runs `function` on every worker at once, in[r] going to rank r (in
     * NULL: no argument for any), and gathers out[r] in rank order. The
     * first failure cancels the calls still running; returns it once every
     * call has ended. */
    int (*call_all)(ferry_driver_t *drv, const char *function, const ferry_bytes_t *in,
                    ferry_bytes_t *out);
    /* Runs `n` calls of `function` on whichever workers are free (a work
     * queue), in[i] -> out[i]. Stops handing out work at the first failure. */
    int (*call_any)(ferry_driver_t *drv, const char *function, size_t n,
                    const ferry_bytes_t *in, ferry_bytes_t *out);
    /* Returns once every worker answers and has no call of this cluster in
     * flight. */
    int (*barrier)(ferry_driver_t *drv);
    void (*free_bytes)(ferry_driver_t *drv, ferry_bytes_t *b);
    /* Text of the last failure on this driver; "" if none. */
    const char *(*error)(ferry_driver_t *drv);
    /* Fills `info` for `rank`; FERRY_EINVAL for a rank out of range. */
    int (*worker)(ferry_driver_t *drv, int rank, ferry_worker_info_t *info);
    /* Prints one line for the user (stdout), or to the log (stderr) with a
     * level; output stays in order with ferry's own. */
    void (*print)(ferry_driver_t *drv, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
    void (*log)(ferry_driver_t *drv, int level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
} ferry_driver_ops_t;

/* The context a driver receives. Owned by the master. */
struct ferry_driver_t {
    uint32_t version, size;
    int world_size;
    int argc; /* the arguments after `--` on `ferry submit`; argv[0] is the module */
    char **argv;
    bool json; /* `--json`: print machine-readable results */
    const ferry_driver_ops_t *ops;
    void *impl; /* the master's; do not touch */
};

/* Runs on the master with the cluster the module was shipped to. Returns 0,
 * or a FERRY_E* code; `ferry submit` exits non-zero then. */
typedef int (*ferry_driver_fn_t)(ferry_driver_t *drv);

/* ---- the descriptor ------------------------------------------------------- */


typedef struct ferry_task_t {
    uint32_t version; /* FERRY_TASK_ABI_VERSION */
    uint32_t size;    /* sizeof(ferry_task_t) */
    const char *name;
    const ferry_function_t *functions; /* ends with {NULL, NULL}; may be NULL */
    ferry_driver_fn_t driver;          /* optional */
    const ferry_model_t *model;        /* optional: makes it trainable (<ferry/model.h>) */
    void *reserved[4];                 /* zero */
} ferry_task_t;

/* A function table for FERRY_TASK's .functions. */
#define FERRY_FUNCTIONS(...) ((const ferry_function_t[]){__VA_ARGS__, {NULL, NULL}})

/* Defines the module's descriptor; the one symbol it exports. */
#define FERRY_TASK(...)                                                                  \
    __attribute__((visibility("default"))) const ferry_task_t ferry_task = {             \
        .version = FERRY_TASK_ABI_VERSION, .size = sizeof(ferry_task_t), __VA_ARGS__}

#ifdef __cplusplus
}
#endif
#endif
