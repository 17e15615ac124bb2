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
 *
 *     [workers]
 *     worker = 127.0.0.1:7100     ; one line per worker, in rank order
 *     worker = gpu-host-2:7100
 *
 *     [state]                     ; written by `ferry start` only
 *     supervisor_pid = 4242
 *
 * The running cluster's state, $FERRY_HOME/cluster.ini, is itself such a
 * file: every worker's resolved address plus [state]. Mistakes are reported
 * as "FILE:LINE: what was expected". */
#ifndef FERRY_CONFIG_H
#define FERRY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ferry/error.h>

/* One worker of the cluster file. */
typedef struct conf_worker {
    char *address; /* "host:port" as written ("[::1]:7100" for IPv6) */
    char *host;    /* "127.0.0.1", "::1" (no brackets) */
    int port;
    bool local; /* host is a loopback address or "localhost" */
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
    conf_worker *workers; /* rank order */
    size_t n_workers;
    int supervisor_pid; /* [state]; 0 when absent */
} conf_cluster;

#define CONF_DEFAULT_BASE_PORT 7100
#define CONF_ERR_LEN           512

/* Fills `c` with the defaults above and no workers. */
void conf_defaults(conf_cluster *c);

/* Parses `path` over the values already in `c` (call conf_defaults first).
 * Returns 0, FERRY_ENOENT when the file cannot be opened, or FERRY_EINVAL
 * with `err` set to "PATH:LINE: <what was expected>" for a mistake: an
 * unknown section or key, a value that is not a number in range, a worker
 * address that is not host:port, a duplicate worker. */
int conf_load(conf_cluster *c, const char *path, char *err, size_t errlen);

/* Writes `c` (every field, workers and [state]) to `path` atomically (temp
 * file + rename), mode 0600. Returns 0 or -errno. */
int conf_save(const conf_cluster *c, const char *path);

/* Appends a worker at "host:port". Returns 0, or FERRY_EINVAL with `err` set
 * when the address is not host:port with a port in 1..65535. */
int conf_add_worker(conf_cluster *c, const char *address, char *err, size_t errlen);

/* Frees what `c` holds and zeroes it. */
void conf_fini(conf_cluster *c);

/* Splits "host:port", "[v6]:port" into host (no brackets) and port. Returns
 * 0 or FERRY_EINVAL. */
int conf_split_address(const char *address, char *host, size_t hostlen, int *port);

/* True for 127.0.0.0/8, ::1 and "localhost". */
bool conf_is_loopback(const char *host);

/* ---- FERRY_HOME ----------------------------------------------------------- */

/* The directory that holds a cluster's state: $FERRY_HOME, else ~/.ferry.
 * Writes it into buf. Returns 0, or FERRY_ENAMETOOLONG-like FERRY_ERANGE when
 * it does not fit, FERRY_ENOENT when neither FERRY_HOME nor HOME is set. */
int conf_home(char *buf, size_t len);

/* Joins home and a relative path ("logs/worker-0.log") into buf. Returns 0
 * or FERRY_ERANGE. */
int conf_home_path(char *buf, size_t len, const char *home, const char *rel);

/* Creates `dir` and its parents with `mode` (existing ones are kept).
 * Returns 0 or -errno. */
int conf_mkdirs(const char *dir, unsigned mode);

/* The cluster lock, $FERRY_HOME/lock: held (flock) by the supervisor of the
 * running cluster for its whole life. conf_lock_take() returns an open fd
 * holding it, or FERRY_EBUSY when another process holds it. conf_lock_held()
 * tells whether some process holds it now (a cluster is running). */
int conf_lock_take(const char *home);
bool conf_lock_held(const char *home);

/* ---- the cluster token ---------------------------------------------------- */

#define CONF_TOKEN_LEN 64 /* hex characters */

/* Writes a new random token (getrandom, 32 bytes as 64 hex characters) to
 * `path` with mode 0600, replacing any old one. Returns 0 or -errno. */
int conf_token_create(const char *path);

/* Reads the token at `path` into buf (at least CONF_TOKEN_LEN + 1 bytes).
 * Returns 0, FERRY_ENOENT, FERRY_EACCES with `err` set when the file is
 * readable by group or others (like ssh, ferry refuses a shared secret that
 * is not secret), or FERRY_EINVAL when it holds no token. */
int conf_token_read(const char *path, char *buf, size_t len, char *err, size_t errlen);

#endif
