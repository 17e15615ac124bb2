/* tests/slurm's fixture: a local Slurm cluster of 4 nodes (local-slurm.sh:
 * slurmctld and four slurmd on 127.0.1.1-4, every file in a temp
 * directory), a FERRY_HOME for the job, batch jobs run to their end, and
 * everything stopped by pid when the test ends, pass or fail. */
#ifndef FERRY_TESTS_SLURM_H
#define FERRY_TESTS_SLURM_H

#include <stdbool.h>

/* The test's directory (the cluster's files, FERRY_HOME at home/). */
extern char TS_DIR[];

/* Starts the cluster, or skips the test saying why (not root, no slurmd). */
void ts_up(void);
/* Stops it and removes TS_DIR: the fixture's .fini. */
void ts_down(void);

/* Runs `script` (bash, with FERRY, TASKS and FERRY_HOME set) as a batch job
 * of `nodes` nodes (sbatch --wait), within timeout_s; returns its output
 * (stdout and stderr), a string to free. */
char *ts_batch(int nodes, const char *script, int timeout_s);

/* Runs a shell command with SLURM_CONF set; its output, to free. */
char *ts_sh(const char *cmd);

/* Whether the output `out` holds `line`. */
bool ts_has(const char *out, const char *text);

#endif
