/* bench/multihost — all-reduce across hosts: bench/allreduce's ferry ranks
 * (allreduce_ranks.h), each joined to a host's network namespace and
 * listening on its address, against Open MPI (bench/mpi_allreduce) started
 * by mpirun on the launcher's host, one rank a host, over the same links:
 * half of ferry's repetitions, Open MPI, the other half; on plain links,
 * then with netem on one rank's link. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allreduce_ext.h"
#include "allreduce_plan.h"
#include "allreduce_ranks.h"
#include "multihost.h"
#include "stats.h"

#ifndef BENCH_MPIRUN
#define BENCH_MPIRUN "/usr/bin/mpirun"
#endif

#define MiB               ((size_t)1 << 20)
#define TARGET_VS_OPENMPI 1.0

/* Both sides' figures of one kind of link; the repetitions are fewer where
 * netem's losses make each all-reduce slow. */
typedef struct link_kind {
    const char *name;
    const char *netem; /* NULL: plain */
    bool user_space_only; /* measured where the slow link is emulated */
    ar_step full[3], quick[2];
} link_kind;

static const link_kind links[] = {
    {"plain",
     NULL,
     false,
     {{1 * MiB, 15, 3}, {16 * MiB, 10, 1}, {64 * MiB, 7, 1}},
     {{1 * MiB, 5, 2}, {16 * MiB, 5, 1}}},
    {"netem",
     MHB_NETEM,
     false,
     {{1 * MiB, 7, 1}, {16 * MiB, 5, 1}, {64 * MiB, 3, 1}},
     {{1 * MiB, 3, 1}, {16 * MiB, 3, 1}}},
    /* The emulated slow link's machinery without its delay and loss: what
     * forwarding in user space alone costs against the plain rows. */
    {"forwarded",
     MHB_NETEM_NONE,
     true,
     {{1 * MiB, 15, 3}, {16 * MiB, 10, 1}, {64 * MiB, 7, 1}},
     {{1 * MiB, 5, 2}, {16 * MiB, 5, 1}}},
};

/* The sizes with a target; 1 MiB gets its ratio without one. */
static bool has_target(size_t bytes)
{
    return bytes == 16 * MiB || bytes == 64 * MiB;
}

static void skip(const char *impl, const link_kind *l, const char *why)
{
    char safe[512];
    ar_json_safe(safe, sizeof safe, why);
    bench_emit("busbw", NAN, "GB/s", NULL,
               "\"impl\":\"%s\",\"ranks\":%d,\"link\":\"%s\",\"skipped\":\"%s\"", impl,
               MHB_RANKS, l->name, safe);
    bench_log("%-8s %s links: skipped: %s", impl, l->name, why);
}

/* mpirun's remote shell and host file: a host name is a namespace's, and
 * "logging in" to it is `ip netns exec`, with the host's name as the
 * hostname its daemon sees (with this machine's name on every daemon,
 * mpirun now and then waited for ever for one of them to call back). */
static int write_mpi_files(mhb_ctx *c, char agent[300], char hosts[300])
{
    snprintf(agent, 300, "%s/netns-rsh", c->tmp);
    snprintf(hosts, 300, "%s/hostfile", c->tmp);
    FILE *a = fopen(agent, "w"), *h = fopen(hosts, "w");
    if (a)
        fprintf(
            a,
            "#!/bin/sh\n"
            "# mpirun's remote shell for hosts that are network namespaces\n"
            "host=$1\n"
            "shift\n"
            "exec %s netns exec \"$host\" unshare --uts /bin/sh -c \"hostname $host && "
            "$*\"\n",
            c->net.ip);
    for (int r = 0; h && r < MHB_RANKS; r++)
        fprintf(h, "%s slots=1\n", c->net.ns[r]);
    int bad = (!a || fclose(a) != 0) | (!h || fclose(h) != 0);
    return bad || chmod(agent, 0755) != 0 ? -1 : 0;
}

static void run_mpi(mhb_ctx *c, const char *extra, const ar_plan *plan,
                    double busbw[AR_MAX_SIZES], const char **why, char *buf, size_t len)
{
    char bin[PATH_MAX + 32], agent[300], hosts[300], np[8], spec[512];
    snprintf(bin, sizeof bin, "%s/mpi_allreduce", c->bin_dir);
    *why = NULL;
    if (access(bin, X_OK) != 0 || access(BENCH_MPIRUN, X_OK) != 0) {
        *why = "bench/mpi_allreduce not built, or no mpirun: meson found no MPI (Debian: "
               "openmpi-bin libopenmpi-dev, then reconfigure)";
        return;
    }
    if (write_mpi_files(c, agent, hosts) != 0) {
        snprintf(buf, len, "cannot write mpirun's files in %s: %s", c->tmp,
                 strerror(errno));
        *why = buf;
        return;
    }
    snprintf(np, sizeof np, "%d", MHB_RANKS);
    ar_plan_format(plan, spec, sizeof spec);
    /* TCP between the hosts' addresses, as bench/allreduce has it; every
     * daemon started from mpirun's host (no tree of remote shells). The
     * "hosts" share this machine's cores, as --oversubscribe would have
     * them: a rank waiting yields its core (as ferry's threads sleep)
     * rather than spinning on it. */
    const char *cmd[] = {BENCH_MPIRUN,
                         "--allow-run-as-root",
                         "--bind-to",
                         "none",
                         "-np",
                         np,
                         "--hostfile",
                         hosts,
                         "--mca",
                         "plm_rsh_agent",
                         agent,
                         "--mca",
                         "plm_rsh_no_tree_spawn",
                         "1",
                         "--mca",
                         "mpi_yield_when_idle",
                         "1",
                         AR_MPI_TCP_ARGS(MH_SUBNET ".0/24"),
                         bin,
                         "--plan",
                         spec,
                         "--name",
                         "multihost",
                         "--extra",
                         extra,
                         NULL};
    const char *argv[64];
    if (!mh_argv(&c->net, MHB_LAUNCHER, cmd, argv, 64)) {
        *why = "mpirun's command line is too long";
        return;
    }
    const char *env[] = {"OMP_NUM_THREADS=1", "PMIX_MCA_gds=hash", NULL};
    if (ar_ext_run((char *const *)argv, env, c->quick ? 300 : 900, plan, busbw, buf,
                   len) != 0)
        *why = buf;
}

int mhb_ferry_half(mhb_ctx *c, const ar_plan *plan, int half, const char *tls_dir,
                   double secs[AR_MAX_SIZES][AR_MAX_REPS], char *err, size_t len)
{
    const char *host[MHB_RANKS];
    int fd[MHB_RANKS];
    int rc = 0;
    for (int r = 0; r < MHB_RANKS; r++) {
        host[r] = c->net.addr[r];
        fd[r] = mh_netns_fd(&c->net, r);
        if (fd[r] < 0 && rc == 0)
            rc = fd[r],
            snprintf(err, len, "host %d's namespace: %s", r, strerror(-fd[r]));
    }
    ar_ferry_opts o = {
        .world = MHB_RANKS,
        .timeout_ms = 60000,
        .deadline_s = c->quick ? 300 : 900,
        .host = host,
        .netns = fd,
        .tls_dir = tls_dir,
    };
    if (rc == 0)
        rc = ar_ferry_half(plan, &o, half, secs, err, len);
    for (int r = 0; r < MHB_RANKS; r++)
        if (fd[r] >= 0)
            close(fd[r]);
    return rc;
}

static void run_link(mhb_ctx *c, const link_kind *l)
{
    ar_plan plan = {.n = c->quick ? 2 : 3};
    memcpy(plan.step, c->quick ? l->quick : l->full,
           sizeof plan.step[0] * (size_t)plan.n);
    char err[1024];
    if (l->netem && mh_netem(&c->net, MHB_NETEM_HOST, l->netem, err, sizeof err) != 0) {
        skip("ferry", l, err);
        skip("openmpi", l, err);
        return;
    }
    /* Both sides cross the same link: the kernel's netem, or lossy-link's
     * where the kernel has none (slower to forward: said in every line). */
    const char *kind = l->netem ? c->net.netem[MHB_NETEM_HOST] : NULL;
    if (l->user_space_only && kind && strcmp(kind, MH_NETEM_KERNEL) == 0) {
        const char *why = "the kernel's netem: no forwarding in user space to measure";
        skip("ferry", l, why);
        skip("openmpi", l, why);
        goto out;
    }
    const char *by = !kind                                ? NULL
                     : strcmp(kind, MH_NETEM_KERNEL) == 0 ? "kernel"
                                                          : "user space";
    char extra[128];
    if (by)
        snprintf(extra, sizeof extra, "\"link\":\"%s\",\"netem\":\"%s\"", l->name, by);
    else
        snprintf(extra, sizeof extra, "\"link\":\"%s\"", l->name);
    bench_log("%s links%s%s%s%s", l->name, l->netem ? ": " : "", l->netem ? l->netem : "",
              kind ? ", " : "", kind ? kind : "");
    static double secs[AR_MAX_SIZES][AR_MAX_REPS];
    double mpi[AR_MAX_SIZES];
    const char *mpi_why;
    char mpi_buf[512];
    if (mhb_ferry_half(c, &plan, 0, NULL, secs, err, sizeof err) != 0)
        goto ferry_failed;
    run_mpi(c, extra, &plan, mpi, &mpi_why, mpi_buf, sizeof mpi_buf);
    if (mpi_why)
        skip("openmpi", l, mpi_why);
    if (mhb_ferry_half(c, &plan, 1, NULL, secs, err, sizeof err) != 0)
        goto ferry_failed;
    for (int s = 0; s < plan.n; s++) {
        double ferry = ar_report("ferry", MHB_RANKS, &plan.step[s], secs[s], extra);
        if (mpi_why)
            continue;
        char p[256];
        snprintf(p, sizeof p, "%s,\"ranks\":%d,\"bytes\":%zu", extra, MHB_RANKS,
                 plan.step[s].bytes);
        if (has_target(plan.step[s].bytes))
            mhb_target(c, "busbw_vs_openmpi", ferry / mpi[s], TARGET_VS_OPENMPI, p);
        else
            bench_emit("busbw_vs_openmpi", ferry / mpi[s], "ratio", NULL, "%s", p);
    }
    goto out;
ferry_failed:
    skip("ferry", l, err);
out:
    if (l->netem && mh_netem(&c->net, MHB_NETEM_HOST, NULL, err, sizeof err) != 0)
        bench_die("cannot take netem off host %d: %s", MHB_NETEM_HOST, err);
}

void mhb_allreduce(mhb_ctx *c)
{
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        if (c->why) {
            skip("ferry", &links[i], c->why);
            skip("openmpi", &links[i], c->why);
            continue;
        }
        run_link(c, &links[i]);
    }
}
