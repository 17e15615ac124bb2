/* runtime — the worker: its gRPC service, module cache and loader, the
 * executor that runs task functions, and the crash recorder.
 *
 * Where things are (one concept a file):
 *   ping.c        Ping: identity, the one call that needs no token
 *   worker.c      rt_worker: the server, its method table, token check, stats
 *   module.c      rt_module: validate, dlopen, check the descriptor
 *   module_check.c  every pointer of a descriptor bounded by the module
 *   modcache.c    content-addressed module cache of one worker
 *   call.c        Call: run a function on the executor with its ferry_ctx_t,
 *                 the module's own or a built-in one (rt_call_register)
 *   crash.c       crash record: written from a signal handler, read at start
 *   reap.c        the worker as subreaper: nothing a task forks outlives it
 *   sha256.c      SHA-256 of bytes or of a file (OpenSSL's libcrypto)
 *
 * A worker needs no libuv loop: the rpc server's handler pool is the
 * executor. Ping, Stats and Shutdown run inline on the completion-queue
 * thread, so Calls that occupy every pool thread never hold them up;
 * LoadModule and Call queue on the pool. */
#ifndef FERRY_RUNTIME_H
#define FERRY_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <stdint.h>

#include <ferry/task.h>

#include "proto/proto.h"
#include "rpc/rpc.h"

/* ---- identity and Ping ---------------------------------------------------- */

/* The longest crash record (crash.c): what crashed, where, and its frames. */
#define RT_CRASH_TEXT 1536

/* What a worker says about itself. */
typedef struct rt_identity {
    int rank;       /* -1 before the cluster assigns one */
    double started; /* uv_hrtime() / 1e9 at start */
    uint32_t restarts;
    /* The crash recorded before this start, "" if none; and its id. */
    char last_crash[RT_CRASH_TEXT];
    uint64_t crash_id;
    /* The device's description; "": the cpu's (rt_cpu_describe). */
    char device[256];
} rt_identity;

/* Replies to Ping with this process's ferry version, pid, host name, device
 * description, the request's nonce, rank, uptime and last crash. Never
 * blocks: register it with RPC_METHOD_INLINE. `data` may be NULL or an
 * rt_identity. */
void rt_ping_handler(rpc_srv_call *sc, rpc_msg *req, void *data);

/* A one-line description of the CPU this process runs on, e.g.
 * "cpu: AMD EPYC 7B13 (2 cores)". Writes at most len bytes into buf. */
void rt_cpu_describe(char *buf, size_t len);

/* ---- modules -------------------------------------------------------------- */

#define RT_SHA256_HEX 65 /* 64 hex digits + NUL */

/* SHA-256 of `len` bytes as lower-case hex into hex[RT_SHA256_HEX]. */
void rt_sha256_hex(const void *data, size_t len, char hex[RT_SHA256_HEX]);

/* SHA-256 of the first `size` bytes of `fd` (read with pread: its offset
 * does not move) as lower-case hex. 0, FERRY_EIO when the file holds fewer
 * bytes, -errno when a read fails, or FERRY_ENOMEM. */
int rt_sha256_fd(int fd, uint64_t size, char hex[RT_SHA256_HEX]);

/* A loaded task module. */
typedef struct rt_module {
    void *handle;             /* dlopen's */
    const ferry_task_t *task; /* checked: version, size, name */
    char sha256[RT_SHA256_HEX];
    char name[256]; /* the file name the master knows it by */
} rt_module;

/* Loads the shared object at `path`, known to users as `name`: checks that it
 * is an ELF shared object, dlopens it RTLD_NOW | RTLD_LOCAL, finds
 * FERRY_TASK_SYMBOL and checks its version and size. Returns 0, or
 * FERRY_EINVAL with `err` set to a text that names the module and what is
 * wrong ("hello.so: not an ELF shared object", "...: no ferry_task symbol:
 * not a ferry task module", "...: ABI version 99, this ferry speaks 1").
 * `path` must never have been loaded before with other contents (glibc
 * matches by path). */
int rt_module_open(rt_module *m, const char *path, const char *name, char *err,
                   size_t errlen);

/* Writes "NAME: " and the printf-style rest into err; returns FERRY_EINVAL.
 * The form of every refusal of a module, when loading and when checking. */
int rt_module_refuse(char *err, size_t errlen, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Checks that every pointer in the descriptor `t` of the dlopened module
 * `handle` (name, function table and its terminator, driver, model) points
 * into the module's own loaded segments, code where it is code, before
 * anything follows it. Returns 0, or FERRY_EINVAL with `err` naming the
 * module and the pointer ("demo.so: function 'x' points outside the module's
 * code (0x1234)"). rt_module_open() calls it. */
int rt_module_check_descriptor(void *handle, const ferry_task_t *t, const char *name,
                               char *err, size_t errlen);

/* The function `fn` of the module, or NULL. */
ferry_fn_t rt_module_function(const rt_module *m, const char *fn);

/* Writes the names of the module's functions, comma-separated, into buf
 * ("(none)" if it has none). */
void rt_module_list(const rt_module *m, char *buf, size_t len);

/* dlcloses. */
void rt_module_close(rt_module *m);

/* ---- the worker ----------------------------------------------------------- */

typedef struct rt_worker_opts {
    const char *listen;    /* "127.0.0.1:7100"; port 0 picks a free one */
    const char *state_dir; /* private to this worker: cache/, crash record; created */
    const char *token;     /* the cluster token every call but Ping must carry */
    int rank;              /* -1: unknown */
    int threads;           /* executor threads; 0: default */
    size_t max_payload;    /* 0: RPC_DEFAULT_MAX_PAYLOAD */
    size_t max_module;     /* LoadModule's payload limit; 0: max_payload */
    uint32_t restarts;     /* how often the supervisor restarted this worker */
    /* The device its task functions and trainers compute on: "cpu",
     * "cuda", "cuda:N" or "auto" (NULL: "auto"; see rt_device_open). */
    const char *device;
    /* How often refusals (calls without the token) are summarised in the
     * log; 0: every 10 s. */
    int log_interval_ms;
    /* Rank 0 of a launcher's world (`ferry worker --from-env`) keeps its
     * rendezvous: the world's size, and where the launcher says rank 0 is
     * (host:port). 0 and NULL: none. */
    int world_size;
    const char *rendezvous;
    /* The data cache's cap in bytes (`--data-cache-bytes`); 0: 10 GiB. */
    uint64_t data_cache_bytes;
} rt_worker_opts;

typedef struct rt_worker rt_worker;

/* Creates the state directory, reads the last crash record, opens the
 * device, binds and starts serving. Returns 0, FERRY_EADDRINUSE,
 * FERRY_EINVAL (bad address, no token, no state_dir, unknown device),
 * FERRY_ENODEV (the device cannot be used: the reason goes to stderr) or
 * -errno for the state directory. */
int rt_worker_create(const rt_worker_opts *opts, rt_worker **out);

/* The bound port. */
int rt_worker_port(const rt_worker *w);

/* Blocks until a Shutdown call arrived or rt_worker_stop() was called. */
void rt_worker_wait(rt_worker *w);

/* Makes rt_worker_wait() return. Async-signal-safe (a SIGTERM handler may
 * call it). */
void rt_worker_stop(rt_worker *w);

/* Shuts the server down, giving calls in flight `grace_ms` (or the Shutdown
 * call's grace) before cancelling them, closes the modules and frees. NULL
 * is a no-op. */
void rt_worker_destroy(rt_worker *w, int64_t grace_ms);

/* ---- crash records -------------------------------------------------------- */

/* Makes this process a child subreaper, so that whatever a task forks stays
 * its descendant (reap.c). Process-wide: `ferry worker` calls it, and the
 * supervisor, which adopts what a killed worker's tasks left. Returns 0 or
 * -errno. */
int rt_reap_init(void);

/* Kills and reaps every child of this process until none is left (a child
 * killed hands its children to a subreaper). Async-signal-safe. Returns how
 * many it killed. */
int rt_reap_descendants(void);

/* Kills every child of this process but those in keep (the children the
 * caller still runs), round after round, and reaps only those it killed.
 * Returns how many it killed. */
int rt_reap_orphans(const pid_t *keep, size_t n_keep);

/* Installs handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT that
 * write "module M function F: signal N (SIGNAME)" for the call running on the
 * faulting thread to `path`, then die by the same signal. They run on the
 * thread's alternate signal stack where it has one (see rt_crash_mark()).
 * Process-wide: only
 * `ferry worker` calls it. Returns 0 or -errno. */
int rt_crash_install(const char *path);

/* The exit statuses of `ferry worker`. A status that is not one of its own
 * (0 or 1 without a reason in its log, or another number) came from a
 * task's exit(). */
enum {
    RT_EXIT_OK = 0,
    RT_EXIT_FAIL = 1,
    RT_EXIT_USAGE = 2,
    RT_EXIT_PORT_IN_USE = 3,
    RT_EXIT_DEAF = 4,
    RT_EXIT_WEDGED = 5,
};

/* What exit status `status` of a worker means, as a phrase; NULL for 0, 1
 * (any failure, or a task's exit()) and numbers the worker never exits
 * with itself. */
const char *rt_exit_meaning(int status);

/* Writes `text` as the crash record, for an end that is no signal (a wedged
 * worker). Not for signal handlers. After rt_crash_install(). */
void rt_crash_note(const char *text);

/* Marks the calling thread as running `module`/`function` (NULLs: idle);
 * the strings must live until the mark is cleared. A module with a NULL
 * function marks a module being loaded ("module M while loading"): its
 * constructors run then. The first mark on a
 * thread gives it an alternate signal stack, unless it has one, so that a
 * call that overflows its stack is recorded too; it is freed when the thread
 * ends. */
void rt_crash_mark(const char *module, const char *function);

/* Reads and keeps the record at `path` into `id` (last_crash, crash_id).
 * A missing file is no crash. */
void rt_crash_read(const char *path, rt_identity *id);

#endif
