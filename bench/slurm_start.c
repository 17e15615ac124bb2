/* bench/slurm_start: `ferry start --slurm` on 4 nodes until every worker
 * answers, timed inside a batch job of a local Slurm cluster (slurmctld and
 * four slurmd on 127.0.1.1-4, tests/slurm/local-slurm.sh), each start
 * followed by a shutdown. JSON lines on stdout; needs root, slurmctld and
 * slurmd (without them, one line says why it was skipped).
 * Run: build/bench/slurm_start [--quick] */
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stats.h"

#define NODES      4
#define TARGET_MAX 3.0 /* seconds */

static void usage(FILE *f)
{
    fputs("usage: slurm_start [--quick]\n"
          "Times `ferry start --slurm` on a local Slurm cluster of 4 nodes, from the\n"
          "command's start until every worker answers, then prints the target line.\n"
          "Needs root, slurmctld and slurmd; runs build/ferry.\n",
          f);
}

static void skip(const char *why)
{
    bench_emit("start_s", NAN, "s", NULL,
               "\"nodes\":%d,\"target_max\":%g,\"skipped\":\"%s\"", NODES, TARGET_MAX,
               why);
    bench_log("skipped: %s", why);
}

static bool on_path(const char *prog)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

/* The batch job's lines "start_ns N" into v; returns how many. */
static size_t read_times(const char *path, double *v, size_t max, bool *failed)
{
    FILE *f = fopen(path, "r");
    size_t n = 0;
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        long long ns;
        if (sscanf(line, "start_ns %lld", &ns) == 1 && n < max)
            v[n++] = (double)ns / 1e9;
        else if (strncmp(line, "start failed", 12) == 0)
            *failed = true;
        else
            fputs(line, stderr);
    }
    if (f)
        fclose(f);
    return n;
}

int main(int argc, char **argv)
{
    bench_set_name("slurm_start");
    int reps = bench_quick_option(argc, argv, usage) ? 3 : 10;
    if (geteuid() != 0)
        return skip("slurmd and slurmctld run as root here"), 0;
    if (!on_path("slurmctld") || !on_path("slurmd") || !on_path("sbatch"))
        return skip("slurmctld, slurmd or sbatch is not installed"), 0;
    char self[1024], ferry[1100];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return 1;
    self[len] = '\0';
    snprintf(ferry, sizeof ferry, "%s/../ferry", dirname(self));

    char dir[] = "/tmp/ferry-bench-slurm-XXXXXX", cmd[16384];
    if (!mkdtemp(dir))
        return 1;
    uint64_t t0 = bench_now_ns();
    snprintf(cmd, sizeof cmd, "%s up %s >&2", BENCH_SLURM_SH, dir);
    int rc = system(cmd);
    double up_s = (double)(bench_now_ns() - t0) / 1e9;
    if (rc == 0) {
        bench_log("a local Slurm cluster of %d nodes up in %.2f s", NODES, up_s);
        snprintf(cmd, sizeof cmd,
                 "cat > %s/job.sh <<'END'\n#!/bin/bash\nexport FERRY_HOME=%s/home\n"
                 "for i in $(seq %d); do\n"
                 "  t0=$(date +%%s%%N)\n"
                 "  %s start --slurm --timeout-ms 60000 >&2 || { echo 'start failed'; "
                 "exit 1; }\n"
                 "  t1=$(date +%%s%%N)\n"
                 "  echo \"start_ns $((t1 - t0))\"\n"
                 "  %s shutdown >&2\n"
                 "done\nEND\n"
                 "SLURM_CONF=%s/slurm.conf timeout 600 sbatch --wait --quiet -N%d "
                 "-o %s/job.out %s/job.sh",
                 dir, dir, reps, ferry, ferry, dir, NODES, dir, dir);
        rc = system(cmd);
    }
    double v[64];
    bool failed = rc != 0;
    char out[64];
    snprintf(out, sizeof out, "%s/job.out", dir);
    size_t n = read_times(out, v, 64, &failed);
    snprintf(cmd, sizeof cmd, "%s down %s; rm -rf %s", BENCH_SLURM_SH, dir, dir);
    if (system(cmd) != 0)
        bench_log("stopping the local Slurm cluster in %s failed", dir);
    if (n == 0) {
        skip(failed ? "the batch job's start failed (see above)"
                    : "the local Slurm cluster did not come up (see above)");
        return 1;
    }
    bench_summary s = bench_summarize(v, n);
    bench_emit("cluster_up_s", up_s, "s", NULL, "\"nodes\":%d", NODES);
    bench_emit("start_s", s.median, "s", &s, "\"nodes\":%d,\"workers\":%d", NODES, NODES);
    bench_emit("start_s_vs_target", s.median, "s", NULL, "\"nodes\":%d,\"target_max\":%g",
               NODES, TARGET_MAX);
    bench_log("ferry start --slurm, %d nodes: %.2f s median (%.2f..%.2f, %d reps); "
              "target < %g s",
              NODES, s.median, s.min, s.max, s.reps, TARGET_MAX);
    return 0;
}
