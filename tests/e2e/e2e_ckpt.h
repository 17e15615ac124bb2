/* What the checkpoint tests check after a run was cut short: every
 * checkpoint left in a directory is whole, and a run continues from it. */
#ifndef FERRY_TESTS_E2E_CKPT_H
#define FERRY_TESTS_E2E_CKPT_H

#include <stddef.h>
#include <stdint.h>

/* FERRY_HOME/<name>, made (a static buffer, one of 8 in turn). */
const char *e2e_ckpt_dir_of(const char *name);
/* Writes `len` bytes of `data` to `path`, replacing it. */
void e2e_ckpt_put(const char *path, const void *data, size_t len);
size_t e2e_ckpt_file_size(const char *path);

/* Asserts that `dir` holds a checkpoint and that each one reads back
 * whole (`what` names the moment in a failure). The newest's epochs. */
uint64_t e2e_ckpt_expect_whole(const char *dir, const char *what);

/* `ferry submit linreg --resume dir` for one epoch past `epoch`, of a run
 * of --epochs 100000: asserted to continue from a checkpoint of dir with no
 * warning, to note the --epochs that differ, and to finish. */
void e2e_ckpt_expect_resumes(const char *dir, uint64_t epoch);

#endif
