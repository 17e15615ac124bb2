/* Helpers for the end-to-end tests of training runs (test-sync.c,
 * test-async.c): clocks, the JSON of `ferry submit --json`, a cluster's
 * state, and commands run in the background. */
#ifndef FERRY_TESTS_E2E_TRAIN_H
#define FERRY_TESTS_E2E_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

double e2e_now_ms(void);
void e2e_sleep_ms(int ms);
/* The number after "\"key\":" in a JSON text; NAN if absent. */
double e2e_json_number(const char *json, const char *key);
/* Whether the JSON text has "\"key\":\"value\"" (or a bare value: true). */
bool e2e_json_is(const char *json, const char *key, const char *value, bool quoted);
/* Worker `rank`'s address, from the cluster's state file. */
void e2e_worker_address(int rank, char *buf, size_t len);
/* The cluster's token. */
void e2e_cluster_token(char *buf, size_t len);
/* The output files of the next ferry command this test starts: e2e.c
 * numbers each command's out-N and err-N, next to FERRY_HOME, in the order
 * it starts them (the child creates them, so call this before the start:
 * every earlier command's files exist by then). */
void e2e_next_outputs(char out[600], char err[600]);
/* Waits up to ms for the file at `path` to contain `needle`. */
bool e2e_wait_for_text(const char *path, const char *needle, int ms);
/* Waits up to ms for `pid` (our child) to exit; its exit status, 128+N for
 * signal N, or -1 if it still runs. */
int e2e_wait_exit(pid_t pid, int ms);
/* Waits up to ms until `ferry status --json` succeeds with no call in
 * flight on any of the `n` workers (a worker that was stopped finishes, or
 * fails, the step it was in first). */
bool e2e_wait_idle(int n, int ms);

/* Submits linreg with each option and value of bad[i][0..1] on the running
 * cluster; asserts each is a usage error (exit 2) whose text has bad[i][2]. */
void e2e_expect_option_errors(const char *const (*bad)[3], size_t n);

struct cluster;
struct cluster_module;
/* Loads the module file at `path` onto every worker of `cl` as `name`;
 * asserts it worked. */
void e2e_load_module(struct cluster *cl, const char *path, const char *name,
                     struct cluster_module *m);

/* An exchange chunk of `floats` floats at `payload`, claiming rank 1, for
 * `step` of `session` (chunk `chunk` of a `count`-float collective), with
 * `secret` (the session's RT_COMM_SECRET_BYTES bytes, as its ranks send
 * them; NULL: none, as any client holding the token could send), sent over
 * `ch` (a channel of rpc/, carrying the token); waits. Returns the call's
 * result, its text in msg. */
struct rpc_channel;
struct rpc_msg_out;
/* Calls `method` over `ch` with `out` and waits (10 s at most). Returns the
 * call's result, its text in msg. */
int e2e_call_raw(struct rpc_channel *ch, const char *method, const struct rpc_msg_out *out,
                 char *msg, size_t msglen);
int e2e_exchange_chunk(struct rpc_channel *ch, uint64_t session, const uint8_t *secret,
                       uint64_t step, uint32_t chunk, uint64_t count,
                       const float *payload, size_t floats, char *msg, size_t msglen);

#endif
