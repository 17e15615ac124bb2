/* bench/multihost — figures across hosts, each host a network namespace of
 * this machine joined to the others by a veth pair through a bridge
 * (multihost.h). The sections, in order:
 *
 *   allreduce  ferry's all-reduce bus bandwidth at 1, 16 and 64 MiB on 3
 *              ranks a host each, against Open MPI's over the same links in
 *              the same run, on plain links and with netem (5 ms, 1% loss)
 *              on one rank's link (emulated in user space where the kernel
 *              has no netem qdisc); target >= 1.0x at 16 and 64 MiB
 *   tls        the same all-reduce of 16 MiB with mutual TLS on every link
 *              against plain text, alternated: target >= 0.85 (TLS costs
 *              15% at most)
 *
 * A further figure that needs the hosts is one more row of sections[].
 * JSON lines on stdout, text on stderr; where the hosts cannot be made
 * (not root, no iproute2) every section prints a skip line with the reason,
 * and the benchmark still exits 0. */
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "multihost.h"
#include "stats.h"

static const struct {
    const char *name;
    void (*run)(mhb_ctx *c);
} sections[] = {
    {"allreduce", mhb_allreduce},
    {"tls", mhb_tls},
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: multihost [--quick] [--help]\n"
            "\n"
            "Makes %d hosts as network namespaces of this machine (root, iproute2),\n"
            "joined by veth pairs through a bridge: %d run one rank each, one runs\n"
            "mpirun. Then, on them:\n"
            "  allreduce  ferry's all-reduce (float32, in place) of 1, 16 and 64 MiB\n"
            "             on %d ranks against Open MPI's MPI_Allreduce (TCP) over the\n"
            "             same links, on plain links and with netem (%s) on\n"
            "             rank %d's link: time_us, algbw, busbw (medians, min/max)\n"
            "             and busbw_vs_openmpi, target >= 1.0 at 16 and 64 MiB; on a\n"
            "             kernel without the netem qdisc the slow link is emulated in\n"
            "             user space (lossy-link, a TAP-to-TAP forwarder), slower,\n"
            "             for both sides alike: each line's \"netem\" says which,\n"
            "             and the \"forwarded\" rows (no delay, no loss) what its\n"
            "             forwarding alone costs\n"
            "  tls        the same ferry all-reduce of 16 MiB with mutual TLS on every\n"
            "             link, alternated with plain text: busbw_tls_over_plain,\n"
            "             target >= 0.85 (TLS costs 15%% at most)\n"
            "Prints one JSON object per line on stdout, progress on stderr.\n"
            "\n"
            "  --quick   1 and 16 MiB, fewer repetitions (CI)\n"
            "  --help    this text\n",
            MHB_RANKS + 1, MHB_RANKS, MHB_RANKS, MHB_NETEM, MHB_NETEM_HOST);
}

void mhb_target(mhb_ctx *c, const char *metric, double v, double want, const char *params)
{
    bool ok = v >= want;
    c->missed += !ok;
    bench_emit(metric, v, "ratio", NULL, "%s,\"target_min\":%g", params, want);
    bench_log("%-18s %s: %6.3f  (target_min %g) %s", metric, params, v, want,
              ok ? "met" : "MISSED");
}

int main(int argc, char **argv)
{
    bench_set_name("multihost");
    static mhb_ctx c;
    c.quick = bench_quick_option(argc, argv, usage);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        bench_die("cannot find this executable");
    self[n] = '\0';
    snprintf(c.bin_dir, sizeof c.bin_dir, "%s", dirname(self));
    snprintf(c.tmp, sizeof c.tmp, "/tmp/ferry-bench-multihost-XXXXXX");
    if (!mkdtemp(c.tmp))
        bench_die("mkdtemp: %s", strerror(errno));

    uint64_t t0 = bench_now_ns();
    static char why[1024];
    if (mh_unavailable(why, sizeof why) == MH_CAN_RUN &&
        mh_net_up(&c.net, MHB_RANKS + 1, why, sizeof why) == 0)
        bench_log("multihost: %d hosts: %s..%s on " MH_SUBNET ".0/24", c.net.n,
                  c.net.ns[0], c.net.ns[c.net.n - 1]);
    else
        c.why = why;
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) {
        bench_log("== %s", sections[i].name);
        sections[i].run(&c);
    }
    mh_net_down(&c.net);
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", c.tmp);
    if (system(rm) != 0)
        bench_log("multihost: could not remove %s", c.tmp);
    bench_log("bench/multihost: %d target(s) missed; %.1f s", c.missed,
              (double)(bench_now_ns() - t0) * 1e-9);
    return 0;
}
