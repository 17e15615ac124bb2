/* Plugin code run at arm's length by `ferry submit`: the module inspected in
 * a child with a time limit (inspect.c), its driver run in a child whose
 * death is reported like a worker's (drive.c). */
#ifndef FERRY_CLI_PLUGIN_H
#define FERRY_CLI_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>

#include "cli.h"

/* What `submit` needs to know about a module, learnt in the child. */
typedef struct cli_module_info {
    char task[128];
    bool driver, model, classifier;
    uint64_t params;     /* the model's (0: known once it has the data's shape) */
    char functions[512]; /* comma-separated, "(none)" */
} cli_module_info;

/* Loads the module at `path` (absolute) in a child process and checks its
 * descriptor (rt_module_open: ABI, bounds of every pointer), killing the
 * child and everything it forked after timeout_ms. Returns 0 with `info`
 * filled, or a FERRY_E* code with `err` a sentence naming `shown`:
 * "demo.so: constructor aborted (SIGABRT) while loading", "demo.so:
 * constructor called exit(0)", "demo.so: loading did not finish within
 * 10 s", or the loader's refusal. Blocks; call before anything starts
 * threads or gRPC. */
int cli_inspect(const char *path, const char *shown, int timeout_ms, cli_module_info *info,
                char *err, size_t errlen);

/* What the driver's child needs. */
typedef struct cli_drive_opts {
    const home_paths *home;
    const char *path;  /* absolute */
    const char *shown; /* the module's file name */
    const void *bytes; /* the module, shipped by the child */
    size_t len;
    int argc;
    char **argv;
    bool json;
    bool quiet; /* what tasks log on the workers is not shown */
} cli_drive_opts;

/* Runs the module's driver in a child process that connects to the cluster,
 * ships the module and calls the driver, while this process relays its
 * output. Returns the exit status for `submit`: the child's own when the
 * driver returned; CLI_FAIL with a report on stderr when the driver's
 * process died of a signal or called exit() instead of returning (its
 * status or signal, the module and its last lines of output), so that
 * `submit` never exits 0 for it. Blocks; call before gRPC is initialised. */
int cli_drive(const cli_drive_opts *o);

/* "10 s", "2.5 s". */
void cli_describe_limit(char *buf, size_t len, int ms);

/* "SIGSEGV"; a static buffer. */
const char *cli_signal_name(int sig);

#endif
