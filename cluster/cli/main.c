/* `ferry`: one executable for the master's commands and the worker daemon. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <ferry/ferry.h>

#include "cli.h"
#include "runtime/worker_main/worker_main.h"

static const char usage[] =
    "usage: ferry <command> [options]\n"
    "\n"
    "commands:\n"
    "  start N        start N local worker daemons and wait until they answer\n"
    "  status         show every worker: address, pid, device, load, uptime, health\n"
    "  submit MODULE  ship a task module (.so) to every worker and run its driver\n"
    "  check MODULE   check a model's gradient against its loss, on the cpu\n"
    "  predict MODULE run a trained model (--params FILE) over a test set\n"
    "  runs           list the training runs recorded under $FERRY_HOME/runs\n"
    "  plot RUN...    draw runs' loss and accuracy curves (PNG or SVG, gnuplot)\n"
    "  dashboard      serve a live status page of the cluster and its newest run\n"
    "  checkpoint     show FILE: check a training checkpoint and print its header\n"
    "  shutdown       stop every worker and the supervisor; clean the cluster state\n"
    "  worker         run one worker in the foreground (remote hosts, containers)\n"
    "\n"
    "The running cluster lives in $FERRY_HOME (default ~/.ferry): two clusters\n"
    "with different FERRY_HOMEs never interfere. `ferry <command> --help` for\n"
    "each command's options.\n";

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
        bool remote; /* takes --rendezvous */
    } cmds[] = {
        {"start", cli_start, false},       {"status", cli_status, true},
        {"submit", cli_submit, true},      {"check", cli_check, false},
        {"predict", cli_predict, true},    {"shutdown", cli_shutdown, true},
        {"runs", cli_runs, false},         {"plot", cli_plot, false},
        {"worker", rt_worker_main, false}, {"checkpoint", cli_checkpoint, false},
        {"dashboard", cli_dashboard, false},
    };
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 ||
        strcmp(cmd, "help") == 0) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        printf("ferry %s\n", ferry_version());
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        if (strcmp(cmd, cmds[i].name) == 0) {
            for (int a = 2; a < argc && strcmp(argv[a], "--") != 0; a++) {
                if (strcmp(argv[a], "--version") == 0 || strcmp(argv[a], "-V") == 0) {
                    printf("ferry %s\n", ferry_version());
                    return CLI_OK;
                }
            }
            int sub_argc = argc - 1;
            if (cmds[i].remote && cli_remote_take(&sub_argc, argv + 1, cmd) != CLI_OK)
                return CLI_USAGE;
            return cmds[i].run(sub_argc, argv + 1);
        }
    }
    fprintf(stderr, "ferry: unknown command '%s'\n\n%s", cmd, usage);
    return CLI_USAGE;
}
