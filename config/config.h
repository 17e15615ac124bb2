/* config — the cluster file, FERRY_HOME and the cluster token.
 *
 * A cluster file is INI (parsed with inih):
 *
 *     [cluster]
 *     listen = 127.0.0.1          ; host local workers listen on
 *     base_port = 7100            ; first local worker's port; 0: each picks a free one
 *     token_file = /path/token    ; default: $FERRY_HOME/token
 *     call_timeout_ms = 60000
 *     ping_timeout_ms = 1000
 *     heartbeat_ms = 1000         ; 0: no heartbeat
 *     start_timeout_ms = 10000
 *     shutdown_grace_ms = 5000
 *     threads = 0                 ; executor threads per worker; 0: default
 *     liveness_timeout_ms = 30000 ; a worker silent this long is killed and
 *                                 ; restarted; 0: never
 *     restart_backoff_ms = 1000   ; first delay once a worker crash-loops
 *     restart_backoff_max_ms = 60000 ; the delay doubles up to this
 *     max_message_bytes = 1073741824 ; largest payload of one call
 *     max_module_bytes = 268435456   ; largest task module
 *     log_max_bytes = 10485760    ; a log is rotated past this size
 *     log_keep = 3                ; rotated logs kept (NAME.log.1 is newest)
 *     wedge_grace_ms = 60000      ; a call still running this long after its
 *                                 ; cancellation wedges its worker: restarted;
 *                                 ; 0: never
 *     metrics_port = 0            ; worker r serves Prometheus metrics on this
 *                                 ; port + r, on `listen`'s host; 0: none
 *     stall_warn_ms = 60000       ; a training that makes no progress this long
 *                                 ; is reported, rank by rank; 0: never
 *     stall_abort_ms = 0          ; ... and ended this long; 0: never
 *     tls_cert = /path/cert.pem   ; TLS on every connection: this certificate,
 *     tls_key = /path/key.pem     ; its key,
 *     tls_ca = /path/ca.pem       ; the CA of the cluster (mutual TLS)
 *     insecure = 0                ; 1: plain text off loopback without a warning
 *
 *     [workers]
 *     worker = 127.0.0.1:7100     ; one line per worker, in rank order
 *     worker = gpu-host-2:7100    ; not loopback: run there, waited for here
 *     worker = gpu[3-4]:7100      ; a host list (Slurm's syntax): one worker a host
 *     attach = 127.0.0.1:7200     ; run by someone else (`ferry worker`): waited for
 *
 *     [state]                     ; written by `ferry start` only
 *     supervisor_pid = 4242
 *
 * The running cluster's state, $FERRY_HOME/cluster.ini, is itself such a
 * file: every worker's resolved address plus [state]. Mistakes are reported
 * as "FILE:LINE: what was expected". */
#ifndef FERRY_CONFIG_H
#define FERRY_CONFIG_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ferry/error.h>

#include "base/base.h"

/* One worker of the cluster file. */
typedef struct conf_worker {
    char *address; /* "host:port" as written ("[::1]:7100" for IPv6) */
    char *host;    /* "127.0.0.1", "::1" (no brackets) */
    int port;
    bool local;  /* host is a loopback address or "localhost" */
    bool attach; /* listed with `attach =`: never started by `ferry start` */
    int line;    /* the cluster file's line that listed it; 0: not from a file */
} conf_worker;

typedef struct conf_cluster {
    char *listen;     /* default "127.0.0.1" */
    int base_port;    /* default CONF_DEFAULT_BASE_PORT */
    char *token_file; /* NULL: $FERRY_HOME/token */
    int64_t call_timeout_ms;
    int64_t ping_timeout_ms;
    int64_t heartbeat_ms;
    int64_t start_timeout_ms;
    int64_t shutdown_grace_ms;
    int threads;
    int64_t liveness_timeout_ms; /* 0: no liveness check */
    int64_t restart_backoff_ms;
    int64_t restart_backoff_max_ms;
    int64_t max_message_bytes;
    int64_t max_module_bytes;
    int64_t log_max_bytes;
    int log_keep;
    int64_t wedge_grace_ms; /* 0: a wedged worker is left running */
    int metrics_port;       /* worker r's metrics on metrics_port + r; 0: none */
    int64_t stall_warn_ms;  /* a stalled training reported; 0: never */
    int64_t stall_abort_ms; /* ... and ended; 0: never */
    char *tls_cert, *tls_key, *tls_ca; /* PEM files, absolute; NULL: not given */
    int insecure;         /* 1: workers listen off loopback in plain text quietly */
    conf_worker *workers; /* rank order */
    size_t n_workers;
    int supervisor_pid; /* [state]; 0 when absent */
} conf_cluster;

#define CONF_DEFAULT_BASE_PORT 7100
#define CONF_ERR_LEN           512
/* At most this many workers in one cluster: a typo ("1100") must not start
 * a thousand processes. */
#define CONF_MAX_WORKERS 256
/* The bounds of max_message_bytes (and the top of max_module_bytes, whose
 * floor is 4096): rpc's largest payload (RPC_MAX_PAYLOAD_LIMIT), and a
 * floor that still carries a small model's gradient. */
#define CONF_MAX_BYTES_LIMIT ((int64_t)2047 << 20)
#define CONF_MIN_BYTES_LIMIT ((int64_t)64 << 10)

/* Fills `c` with the defaults above and no workers. */
void conf_defaults(conf_cluster *c);

/* Parses `path` over the values already in `c` (call conf_defaults first).
 * Returns 0, FERRY_ENOENT when the file does not exist (another -errno when
 * it cannot be opened), or FERRY_EINVAL with `err` set to "PATH:LINE: <what
 * was expected>" for a mistake: an unknown section or key, a key set twice, a
 * value that is not a number in range, a worker address that is not
 * host:port, a duplicate worker, more than CONF_MAX_WORKERS workers, a
 * line that is neither `key = value`, a
 * section nor a comment, a line longer than inih reads (199 characters).
 * `err` is set on every failure. On failure `c` is left as it was.
 * Indentation means nothing (inih's continuation lines are not used). The
 * file's [workers], when it lists any, replace the workers in `c`. A
 * relative token_file is taken against the file's directory (and stored
 * absolute). */
int conf_load(conf_cluster *c, const char *path, char *err, size_t errlen);

/* Writes `c` (every field, workers and [state]) to `path` atomically (temp
 * file + fsync + rename), mode 0600. A relative token_file is written as an
 * absolute path (against the current directory). Returns 0 or -errno;
 * FERRY_EINVAL, writing nothing, when a value would not read back the same
 * through conf_load() (out of range, a line end or " ;" in a string). */
int conf_save(const conf_cluster *c, const char *path);

/* Appends a worker at "host:port". Returns 0, or FERRY_EINVAL with `err` set
 * when the address is not host:port with a port in 1..65535, or when `c`
 * already has CONF_MAX_WORKERS. */
int conf_add_worker(conf_cluster *c, const char *address, char *err, size_t errlen);

/* Resolves every worker's host (getaddrinfo) and refuses two entries that
 * reach the same address and port ("localhost:7100" and "127.0.0.1:7100" are
 * one worker): returns FERRY_EINVAL with `err` set to "PATH:LINE: worker 'B'
 * is worker 'A' of line L: both reach ADDR" (PATH: `path`, or "worker N"
 * when the entries come from no file). A host that does not resolve is
 * skipped: it cannot be compared, and waiting for it reports it. Blocks on
 * name resolution. */
int conf_check_aliases(const conf_cluster *c, const char *path, char *err, size_t errlen);

/* Frees what `c` holds and zeroes it. */
void conf_fini(conf_cluster *c);

/* Splits "host:port", "[v6]:port" into host (no brackets) and port. The
 * host is a name, an IPv4 address or (in brackets only) an IPv6 address;
 * the port is 0..65535 (0 is allowed here for "listen on a free port";
 * conf_add_worker() requires 1..65535). Returns 0 or FERRY_EINVAL (also when
 * the host does not fit in hostlen). */
int conf_split_address(const char *address, char *host, size_t hostlen, int *port);

/* The inverse: "host:port", or "[host]:port" for an IPv6 host, into buf.
 * Returns buf. */
char *conf_format_address(char *buf, size_t len, const char *host, int port);

/* True for 127.0.0.0/8, ::1, ::ffff:127.0.0.0/104 and "localhost" (with or
 * without brackets). */
bool conf_is_loopback(const char *host);

/* True for a host that means "every interface" as conf_split_address()
 * gives it: "", "0.0.0.0" or "::". Others cannot reach a listener by it. */
bool conf_is_wildcard(const char *host);

/* ---- host lists ----------------------------------------------------------- */

/* Names, in order; conf_hosts_fini() frees them. */
typedef struct conf_hosts {
    char **names;
    size_t n;
} conf_hosts;

/* At most this many hosts in one list, and in one range of it: Slurm's own
 * cap on a range, and a typo ("n[1-100000]") must not fill memory. */
#define CONF_HOSTLIST_MAX 65536

/* Expands a host list in Slurm's compressed syntax, as `scontrol show
 * hostnames` does: items split by commas (blanks also separate), each a
 * host name or text with bracket groups of numbers and ranges
 * ("n[1-3,07-08]", "rack[1-2]-n[01-02]"); a range keeps its first number's
 * zero padding; duplicates are kept; hosts come in Slurm's order, which for
 * an item of three or more groups is not an odometer's (see hostlist.c).
 * Returns 0 with *out filled (free with conf_hosts_fini), or FERRY_EINVAL
 * with `err` set to "WHAT at character N of host list 'TEXT'" for an
 * unbalanced bracket, a range that runs backwards or has more than
 * CONF_HOSTLIST_MAX hosts, more than that in all, an empty item, text after
 * the last ']' (Slurm refuses it too), a character no host name has, a name
 * longer than 253 characters; FERRY_ENOMEM. *out is untouched on failure. */
int conf_hostlist_expand(const char *list, conf_hosts *out, char *err, size_t errlen);

/* Frees the names and zeroes *h; NULL is a no-op. */
void conf_hosts_fini(conf_hosts *h);

/* Expands "ADDRESS" into the worker addresses it stands for: itself when it
 * is host:port or [v6]:port, else LIST:PORT with LIST a host list (above),
 * one "host:PORT" a host in the list's order. Returns 0 with *out to
 * conf_hosts_fini(), or FERRY_EINVAL with `why` set ("expected ...", or the
 * host list's own message) and *out untouched. Ports are not checked here:
 * conf_add_worker() does. */
int conf_worker_addresses(const char *address, conf_hosts *out, char *why, size_t whylen);

/* ---- CPU lists ------------------------------------------------------------ */

/* Parses a CPU list, "0-3,8" (taskset -c's form), into `out`. Returns 0 or
 * FERRY_EINVAL (empty, malformed, a range backwards, a CPU past
 * CPU_SETSIZE). */
int conf_cpus_parse(const char *s, cpu_set_t *out);
/* The inverse, ranges folded; whole entries only when buf is short.
 * Returns buf. */
char *conf_cpus_format(char *buf, size_t len, const cpu_set_t *set);
/* Local worker i's CPUs of `avail` among n workers: consecutive runs of
 * avail / n (the first avail % n one more), so that none shares a core;
 * with more workers than CPUs, CPU i mod count (mpirun --bind-to core's
 * round robin). Empty when avail is. */
void conf_cpus_share(const cpu_set_t *avail, size_t i, size_t n, cpu_set_t *out);

/* ---- FERRY_HOME ----------------------------------------------------------- */

/* The directory that holds a cluster's state: $FERRY_HOME, else ~/.ferry.
 * Writes it into buf, absolute (a relative FERRY_HOME is taken against the
 * current directory) and without a trailing '/'. Returns 0, or
 * FERRY_ENAMETOOLONG-like FERRY_ERANGE when it does not fit, FERRY_ENOENT
 * when neither FERRY_HOME nor HOME is set. */
int conf_home(char *buf, size_t len);

/* Joins home and a relative path ("logs/worker-0.log") into buf. Returns 0
 * or FERRY_ERANGE. */
int conf_home_path(char *buf, size_t len, const char *home, const char *rel);

/* Creates `dir` and its parents with `mode` (existing ones are kept).
 * Returns 0 or -errno (-ENOTDIR when a component is not a directory). */
int conf_mkdirs(const char *dir, unsigned mode);

/* The cluster lock, $FERRY_HOME/lock: held (flock) by the supervisor of the
 * running cluster for its whole life. conf_lock_take() creates `home` (0700)
 * if needed and returns an open fd holding it, FERRY_EBUSY when another
 * process (or another open of the file in this one) holds it, or -errno.
 *
 * `ferry start` forks the supervisor, which inherits the fd and so keeps
 * the cluster locked after the command exits; the lock lasts while any
 * process holds that open file. The fd is close-on-exec: the workers the
 * supervisor execs never hold it.
 *
 * conf_lock_held() tells whether some process holds it now (a cluster is
 * running); it probes by taking the lock shared for a moment, so
 * conf_lock_take() retries for a few milliseconds before it says EBUSY. */
int conf_lock_take(const char *home);
bool conf_lock_held(const char *home);

/* ---- the cluster token ---------------------------------------------------- */

#define CONF_TOKEN_LEN 64 /* hex characters */

/* Writes a new random token (getrandom, 32 bytes as 64 hex characters and
 * a newline) to `path` with mode 0600, replacing any old one atomically.
 * The directory must exist. Returns 0 or -errno. */
int conf_token_create(const char *path);

/* Reads the token at `path` into buf (at least CONF_TOKEN_LEN + 1 bytes;
 * FERRY_ERANGE otherwise). Returns 0, FERRY_ENOENT, FERRY_EACCES when the
 * file grants any permission to group or others ("token file X is readable
 * by others (mode 0644): run chmod 600 X"; like ssh, ferry refuses a shared
 * secret that is not secret), or FERRY_EINVAL when it is not a regular file
 * or holds no token (64 hex characters, optionally followed by a newline).
 * `err` is set on every failure. */
int conf_token_read(const char *path, char *buf, size_t len, char *err, size_t errlen);

#endif
