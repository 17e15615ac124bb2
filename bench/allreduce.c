/* bench/allreduce — ferry's all-reduce of float32 buffers between
 * local rank processes, against two baselines in the same run:
 *
 *   ferry    one forked process per rank, each with its own rpc_server,
 *            rt_hub and rt_comm (bench/allreduce_ranks.c, _rank.c)
 *   openmpi  MPI_Allreduce over TCP loopback (bench/mpi_allreduce under
 *            mpirun, btl tcp,self on lo), built only where meson found MPI
 *   gloo     torch.distributed.all_reduce, gloo backend
 *            (bench/allreduce_gloo.py under Debian's /usr/bin/python3)
 *   tcp      the same all-reduce over bare loopback sockets
 *            (bench/tcp_allreduce): not a peer but a reference, no framing
 *            and no RPC; a target above all of these asks for more than
 *            this machine gave any implementation over TCP in the run
 *   grpc     2, 4 or 8 ranks: the exchange (and its rounds) over gRPC-core
 *            unary calls, one a chunk, with one completion-queue thread a
 *            process (bench/grpc_allreduce): what an RPC per chunk allows
 *            here, and so what ferry's threads and checks cost
 *   grpc_stream  the same over one bidirectional stream a partner, opened
 *            once (grpc_allreduce --stream): the cheapest way gRPC offers
 *            to move a chunk, so what a design without a call per chunk
 *            could gain here
 *
 * With --tls DIR, ferry runs twice more per rank count, its ranks speaking
 * mutual TLS (certificates from tests/tls/mkcerts.sh DIR), interleaved
 * with the plain runs (plain, TLS, baselines, TLS, plain), and a ratio line
 * says what TLS keeps of plain text's bus bandwidth.
 *
 * For each rank count: half of ferry's repetitions, the two baselines, the
 * other half; then the targets as ratio lines of bus bandwidth. A baseline that cannot
 * run prints a skip line with its reason and never fails the bench. JSON lines on stdout,
 * text on stderr. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allreduce_ext.h"
#include "allreduce_plan.h"
#include "allreduce_ranks.h"
#include "runtime/collective/collective.h"
#include "stats.h"

#ifndef BENCH_GLOO_SCRIPT
#define BENCH_GLOO_SCRIPT "bench/allreduce_gloo.py"
#endif
#ifndef BENCH_MPIRUN
#define BENCH_MPIRUN "/usr/bin/mpirun"
#endif

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

/* The targets: ferry's bus bandwidth over each baseline's, at
 * these sizes. */
#define TARGET_VS_OPENMPI 1.0
#define TARGET_VS_GLOO    1.5
static const size_t target_sizes[] = {1 * MiB, 16 * MiB, 64 * MiB};

enum { IMPL_FERRY, IMPL_MPI, IMPL_GLOO, IMPL_TCP, IMPL_GRPC, IMPL_GRPC_STREAM, N_IMPLS };
static const char *const impl_name[N_IMPLS] = {"ferry", "openmpi", "gloo",
                                               "tcp",   "grpc",    "grpc_stream"};

typedef struct cfg {
    bool quick, mpi_on, gloo_on, tcp_on, grpc_on;
    int ranks[4], n_ranks;
    size_t chunk_bytes;
    ar_plan plan;
    const char *python, *gloo_script, *mpirun;
    const char *tls_dir; /* --tls: NULL, none */
    char mpi_bin[PATH_MAX], tcp_bin[PATH_MAX], grpc_bin[PATH_MAX];
    int deadline_s;
    /* busbw[impl][ranks index][step], GB/s; NaN: not measured */
    double busbw[N_IMPLS][4][AR_MAX_SIZES];
    char skipped[N_IMPLS][4][256];
} cfg;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: allreduce [--quick] [--chunk-bytes N] [--ranks 2,4] [--plan SPEC]\n"
        "                 [--no-mpi] [--no-gloo] [--no-tcp] [--no-grpc] [--python PATH]\n"
        "                 [--mpirun PATH] [--tls DIR] [--help]\n"
        "\n"
        "Times ferry's all-reduce (float32, in place: the exchange on 2 ranks,\n"
        "exchange rounds up to 1 MiB and the ring above on 4) of 4 KiB, 64 KiB, 1 MiB,\n"
        "16 MiB and 64 MiB on 2 and 4 local rank processes over 127.0.0.1 (half\n"
        "the repetitions before the baselines, half after), Open MPI's\n"
        "MPI_Allreduce over TCP loopback, gloo's (torch.distributed), the same\n"
        "all-reduce over bare loopback sockets (tcp: what TCP itself moves here)\n"
        "and, on 2, 4 or 8 ranks, the exchange and its rounds over gRPC-core\n"
        "calls with one thread a process (grpc: what an RPC per chunk allows\n"
        "here) and over one gRPC stream a partner (grpc_stream: what gRPC\n"
        "allows without a call per chunk) on the same sizes, and prints one\n"
        "JSON object per line on stdout:\n"
        "time_us, algbw and busbw (GB/s; busbw = algbw x 2(n-1)/n) as medians of\n"
        "the repetitions with min/max, then busbw_vs_openmpi and busbw_vs_gloo\n"
        "with their targets, busbw_vs_tcp, busbw_vs_grpc, busbw_vs_grpc_stream,\n"
        "and\n"
        "targets_need_vs_best_tcp: the bus bandwidth the targets ask for over\n"
        "the most any TCP implementation moved in the run (above 1: more than\n"
        "any reached on this machine).\n"
        "Progress goes to stderr.\n"
        "\n"
        "  --quick          64 KiB, 1 MiB and 16 MiB, fewer repetitions (CI, < 1 min)\n"
        "  --chunk-bytes N  ferry's chunk size (default: the runtime's, %zu)\n"
        "  --ranks LIST     rank counts, comma-separated, 2 to %d (default 2,4)\n"
        "  --plan SPEC      sizes as BYTES:REPS:ITERS,... instead of the defaults\n"
        "  --no-mpi         skip Open MPI\n"
        "  --no-gloo        skip gloo\n"
        "  --no-tcp         skip the plain-TCP reference\n"
        "  --no-grpc        skip the gRPC floors (unary and stream)\n"
        "  --python P       the interpreter with torch (default /usr/bin/python3)\n"
        "  --mpirun PATH    Open MPI's mpirun (default %s; a relocated copy\n"
        "                   needs OPAL_PREFIX)\n"
        "  --tls DIR        also time ferry with mutual TLS, the certificates in DIR\n"
        "                   (made by tests/tls/mkcerts.sh DIR)\n"
        "  --help           this text\n",
        RT_COMM_DEFAULT_CHUNK, AR_MAX_RANKS, BENCH_MPIRUN);
}

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    if (end == s || *end || v == 0)
        bench_die("bad size '%s'", s);
    return (size_t)v;
}

static void parse_ranks(const char *s, cfg *c)
{
    c->n_ranks = 0;
    for (char *end; *s; s = *end ? end + 1 : end) {
        long n = strtol(s, &end, 10);
        if (end == s || (*end && *end != ',') || n < 2 || n > AR_MAX_RANKS ||
            c->n_ranks == 4)
            bench_die("--ranks takes up to 4 counts of 2 to %d", AR_MAX_RANKS);
        c->ranks[c->n_ranks++] = (int)n;
    }
}

static void parse_args(int argc, char **argv, cfg *c)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--quick") == 0)
            c->quick = true;
        else if (strcmp(a, "--chunk-bytes") == 0 && i + 1 < argc)
            c->chunk_bytes = parse_size(argv[++i]);
        else if (strcmp(a, "--ranks") == 0 && i + 1 < argc)
            parse_ranks(argv[++i], c);
        else if (strcmp(a, "--plan") == 0 && i + 1 < argc) {
            if (ar_plan_parse(argv[++i], &c->plan) != 0)
                bench_die("bad --plan '%s' (BYTES:REPS:ITERS,...)", argv[i]);
        } else if (strcmp(a, "--no-mpi") == 0)
            c->mpi_on = false;
        else if (strcmp(a, "--no-gloo") == 0)
            c->gloo_on = false;
        else if (strcmp(a, "--no-tcp") == 0)
            c->tcp_on = false;
        else if (strcmp(a, "--no-grpc") == 0)
            c->grpc_on = false;
        else if (strcmp(a, "--python") == 0 && i + 1 < argc)
            c->python = argv[++i];
        else if (strcmp(a, "--mpirun") == 0 && i + 1 < argc)
            c->mpirun = argv[++i];
        else if (strcmp(a, "--tls") == 0 && i + 1 < argc)
            c->tls_dir = argv[++i];
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "allreduce: unknown argument '%s'\n", a);
            usage(stderr);
            exit(2);
        }
    }
    /* Iterations per repetition keep a repetition of a small buffer well
     * above the cost of its barrier; big buffers take one each. */
    static const ar_step full[] = {{4 * KiB, 15, 20},
                                   {64 * KiB, 15, 10},
                                   {1 * MiB, 15, 3},
                                   {16 * MiB, 10, 1},
                                   {64 * MiB, 7, 1}};
    static const ar_step quick[] = {{64 * KiB, 7, 5}, {1 * MiB, 7, 2}, {16 * MiB, 5, 1}};
    c->deadline_s = c->quick ? 60 : 240;
    if (c->plan.n) /* --plan */
        return;
    const ar_step *p = c->quick ? quick : full;
    c->plan.n = c->quick ? 3 : 5;
    memcpy(c->plan.step, p, sizeof c->plan.step[0] * (size_t)c->plan.n);
}

/* build/bench/allreduce -> build/REL */
static void build_path(char *out, const char *rel)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        bench_die("cannot find this executable");
    self[n] = '\0';
    snprintf(out, PATH_MAX, "%.3800s/%s", dirname(dirname(self)), rel);
}

static void skip_line(cfg *c, int impl, int ri, const char *why)
{
    ar_json_safe(c->skipped[impl][ri], sizeof c->skipped[impl][ri], why);
    bench_emit("busbw", NAN, "GB/s", NULL,
               "\"impl\":\"%s\",\"ranks\":%d,\"skipped\":\"%s\"", impl_name[impl],
               c->ranks[ri], c->skipped[impl][ri]);
    bench_log("%-8s %d ranks: skipped: %s", impl_name[impl], c->ranks[ri], why);
}

static size_t chunk_of(const cfg *c)
{
    return c->chunk_bytes ? c->chunk_bytes : RT_COMM_DEFAULT_CHUNK;
}

/* Half of ferry's repetitions (allreduce_ranks.h): one half runs before the
 * baselines and one after. */
static void run_ferry_half(cfg *c, int ri, int half, bool tls,
                           double secs[AR_MAX_SIZES][AR_MAX_REPS])
{
    ar_ferry_opts o = {
        .world = c->ranks[ri],
        .chunk_bytes = c->chunk_bytes,
        .timeout_ms = 20000,
        .deadline_s = c->deadline_s,
        .tls_dir = tls ? c->tls_dir : NULL,
    };
    char err[512] = "";
    if (ar_ferry_half(&c->plan, &o, half, secs, err, sizeof err) != 0)
        bench_die("ferry on %d ranks failed: %s", o.world, err);
}

static void report_ferry(cfg *c, int ri, double secs[AR_MAX_SIZES][AR_MAX_REPS])
{
    char extra[64];
    snprintf(extra, sizeof extra, "\"chunk_bytes\":%zu", chunk_of(c));
    for (int s = 0; s < c->plan.n; s++)
        c->busbw[IMPL_FERRY][ri][s] =
            ar_report("ferry", c->ranks[ri], &c->plan.step[s], secs[s], extra);
}

/* ferry with TLS, and what it keeps of plain text's bus bandwidth. */
static void report_tls(cfg *c, int ri, double secs[AR_MAX_SIZES][AR_MAX_REPS])
{
    char extra[64];
    snprintf(extra, sizeof extra, "\"chunk_bytes\":%zu", chunk_of(c));
    for (int s = 0; s < c->plan.n; s++) {
        double tls =
            ar_report("ferry_tls", c->ranks[ri], &c->plan.step[s], secs[s], extra);
        double v = tls / c->busbw[IMPL_FERRY][ri][s];
        bench_emit("busbw_tls_over_plain", v, "ratio", NULL, "\"ranks\":%d,\"bytes\":%zu",
                   c->ranks[ri], c->plan.step[s].bytes);
        bench_log("%-18s %d ranks %9zu B: %6.3f (TLS costs %.1f%%)",
                  "busbw_tls_over_plain", c->ranks[ri], c->plan.step[s].bytes, v,
                  (1 - v) * 100);
    }
}

/* A baseline's rank count and plan, as its command line takes them. */
static void ext_args(const cfg *c, int ri, char world[16], char plan[512])
{
    snprintf(world, 16, "%d", c->ranks[ri]);
    ar_plan_format(&c->plan, plan, 512);
}

static void run_mpi(cfg *c, int ri)
{
    if (!c->mpi_on) {
        skip_line(c, IMPL_MPI, ri, "--no-mpi");
        return;
    }
    if (access(c->mpi_bin, X_OK) != 0) {
        skip_line(c, IMPL_MPI, ri,
                  "bench/mpi_allreduce not built: meson found no MPI (Debian: "
                  "openmpi-bin libopenmpi-dev, then reconfigure)");
        return;
    }
    if (access(c->mpirun, X_OK) != 0) {
        char why[PATH_MAX + 128];
        snprintf(why, sizeof why, "no Open MPI here: %s: %s (--mpirun names another)",
                 c->mpirun, strerror(errno));
        skip_line(c, IMPL_MPI, ri, why);
        return;
    }
    char np[16], plan[512];
    ext_args(c, ri, np, plan);
    /* TCP on the loopback interface only. */
    char *argv[] = {(char *)c->mpirun,
                    "--allow-run-as-root",
                    "--oversubscribe",
                    "--bind-to",
                    "none",
                    "-np",
                    np,
                    AR_MPI_TCP_ARGS("lo"),
                    c->mpi_bin,
                    "--plan",
                    plan,
                    NULL};
    const char *env[] = {"OMP_NUM_THREADS=1", NULL};
    char why[256];
    if (ar_ext_run(argv, env, c->deadline_s, &c->plan, c->busbw[IMPL_MPI][ri], why,
                   sizeof why) != 0)
        skip_line(c, IMPL_MPI, ri, why);
}

static void run_gloo(cfg *c, int ri)
{
    if (!c->gloo_on) {
        skip_line(c, IMPL_GLOO, ri, "--no-gloo");
        return;
    }
    char world[16], plan[512];
    ext_args(c, ri, world, plan);
    char *argv[] = {(char *)c->python,
                    (char *)c->gloo_script,
                    "--world",
                    world,
                    "--plan",
                    plan,
                    NULL};
    /* Debian's site-packages, not a virtual environment's or the user's. */
    const char *env[] = {"OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "PYTHONPATH",
                         "PYTHONHOME",        "PYTHONNOUSERSITE=1",     NULL};
    char why[256];
    if (ar_ext_run(argv, env, c->deadline_s, &c->plan, c->busbw[IMPL_GLOO][ri], why,
                   sizeof why) != 0)
        skip_line(c, IMPL_GLOO, ri, why);
}

/* A reference of this folder's own: `bin [flag] --ranks N --plan SPEC`. */
static void run_reference(cfg *c, int ri, int impl, const char *bin, const char *flag)
{
    char world[16], plan[512];
    ext_args(c, ri, world, plan);
    char *argv[7] = {(char *)bin}, **at = argv + 1;
    if (flag)
        *at++ = (char *)flag;
    *at++ = "--ranks", *at++ = world, *at++ = "--plan", *at++ = plan;
    char why[256];
    if (ar_ext_run(argv, NULL, c->deadline_s, &c->plan, c->busbw[impl][ri], why,
                   sizeof why) != 0)
        skip_line(c, impl, ri, why);
}

static void run_tcp(cfg *c, int ri)
{
    if (!c->tcp_on)
        skip_line(c, IMPL_TCP, ri, "--no-tcp");
    else
        run_reference(c, ri, IMPL_TCP, c->tcp_bin, NULL);
}

static void run_grpc(cfg *c, int ri, int impl)
{
    if (!c->grpc_on)
        skip_line(c, impl, ri, "--no-grpc");
    else if (c->ranks[ri] & (c->ranks[ri] - 1))
        skip_line(c, impl, ri, "the gRPC floor runs 2, 4 or 8 ranks only");
    else
        run_reference(c, ri, impl, c->grpc_bin, impl == IMPL_GRPC_STREAM ? "--stream" : NULL);
}

/* ---- the targets ------------------------------------------------------------ */

static int missed;

static void target(cfg *c, int impl, const char *metric, double want, int ri, int s)
{
    char p[256];
    snprintf(p, sizeof p, "\"ranks\":%d,\"bytes\":%zu,\"chunk_bytes\":%zu", c->ranks[ri],
             c->plan.step[s].bytes, chunk_of(c));
    double base = c->busbw[impl][ri][s];
    if (c->skipped[impl][ri][0] || !(base > 0)) {
        const char *why = c->skipped[impl][ri][0] ? c->skipped[impl][ri] : "no baseline";
        bench_emit(metric, NAN, "ratio", NULL, "%s,\"target_min\":%g,\"skipped\":\"%s\"",
                   p, want, why);
        bench_log("%-18s %d ranks %9zu B: skipped (%s)", metric, c->ranks[ri],
                  c->plan.step[s].bytes, why);
        return;
    }
    double v = c->busbw[IMPL_FERRY][ri][s] / base;
    bool ok = v >= want;
    missed += !ok;
    bench_emit(metric, v, "ratio", NULL, "%s,\"target_min\":%g", p, want);
    bench_log("%-18s %d ranks %9zu B: %6.3f  (target_min %g) %s", metric, c->ranks[ri],
              c->plan.step[s].bytes, v, want, ok ? "met" : "MISSED");
}

/* What the targets ask for at one size against the most any TCP
 * implementation moved in this run (Open MPI, gloo, plain sockets, the
 * gRPC floors): above 1, none of them reached it on this machine, and 1
 * means matching the best. And ferry against plain TCP and the gRPC
 * floors, no target. */
static void against_tcp(cfg *c, int ri, int s)
{
    char p[256];
    snprintf(p, sizeof p, "\"ranks\":%d,\"bytes\":%zu", c->ranks[ri],
             c->plan.step[s].bytes);
    static const struct {
        int impl;
        const char *metric;
    } refs[] = {{IMPL_TCP, "busbw_vs_tcp"},
                {IMPL_GRPC, "busbw_vs_grpc"},
                {IMPL_GRPC_STREAM, "busbw_vs_grpc_stream"}};
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        double ref = c->busbw[refs[i].impl][ri][s];
        if (!c->skipped[refs[i].impl][ri][0] && ref > 0)
            bench_emit(refs[i].metric, c->busbw[IMPL_FERRY][ri][s] / ref, "ratio", NULL,
                       "%s", p);
    }
    double mpi = c->busbw[IMPL_MPI][ri][s], gloo = c->busbw[IMPL_GLOO][ri][s];
    if (!(mpi > 0) || !(gloo > 0)) /* both targets, or none */
        return;
    double need = fmax(TARGET_VS_OPENMPI * mpi, TARGET_VS_GLOO * gloo);
    double best = 0;
    const char *who = "";
    for (int impl = IMPL_MPI; impl < N_IMPLS; impl++)
        if (c->busbw[impl][ri][s] > best) /* NaN: not measured */
            best = c->busbw[impl][ri][s], who = impl_name[impl];
    bench_emit("targets_need_vs_best_tcp", need / best, "ratio", NULL,
               "%s,\"needs_busbw\":%.4g,\"best_busbw\":%.4g,\"best\":\"%s\"", p, need,
               best, who);
    bench_log("%d ranks %9zu B: the targets need %.3f GB/s; the most over TCP here: %.3f "
              "(%s), %.2fx%s",
              c->ranks[ri], c->plan.step[s].bytes, need, best, who, need / best,
              need > best * 1.005 ? ": beyond every TCP implementation measured" : "");
}

/* The ratios without a target first: the target lines come last. */
static void targets(cfg *c)
{
    for (int pass = 0; pass < 2; pass++)
        for (int ri = 0; ri < c->n_ranks; ri++)
            for (int s = 0; s < c->plan.n; s++)
                for (size_t t = 0; t < sizeof target_sizes / sizeof target_sizes[0]; t++) {
                    if (c->plan.step[s].bytes != target_sizes[t])
                        continue;
                    if (pass == 0) {
                        against_tcp(c, ri, s);
                    } else {
                        target(c, IMPL_MPI, "busbw_vs_openmpi", TARGET_VS_OPENMPI, ri, s);
                        target(c, IMPL_GLOO, "busbw_vs_gloo", TARGET_VS_GLOO, ri, s);
                    }
                }
}

int main(int argc, char **argv)
{
    bench_set_name("allreduce");
    static cfg c = {
        .mpi_on = true,
        .gloo_on = true,
        .tcp_on = true,
        .grpc_on = true,
        .ranks = {2, 4},
        .n_ranks = 2,
        .python = "/usr/bin/python3",
        .gloo_script = BENCH_GLOO_SCRIPT,
        .mpirun = BENCH_MPIRUN,
    };
    parse_args(argc, argv, &c);
    build_path(c.mpi_bin, "bench/mpi_allreduce");
    /* A bundle (tests/gpu/pack.sh) carries the script beside this
     * executable, away from the source tree it was built from. */
    static char gloo[PATH_MAX] = BENCH_GLOO_SCRIPT;
    if (access(gloo, R_OK) != 0) {
        build_path(gloo, "bench/allreduce_gloo.py");
        c.gloo_script = gloo;
    }
    build_path(c.tcp_bin, "bench/tcp_allreduce");
    build_path(c.grpc_bin, "bench/grpc_allreduce");
    uint64_t t0 = bench_now_ns();
    bench_log("allreduce: chunk %zu bytes, %d sizes, ranks %d..%d", chunk_of(&c),
              c.plan.n, c.ranks[0], c.ranks[c.n_ranks - 1]);
    static double secs[AR_MAX_SIZES][AR_MAX_REPS], tls[AR_MAX_SIZES][AR_MAX_REPS];
    for (int ri = 0; ri < c.n_ranks; ri++) {
        run_ferry_half(&c, ri, 0, false, secs);
        if (c.tls_dir)
            run_ferry_half(&c, ri, 0, true, tls);
        run_mpi(&c, ri);
        run_gloo(&c, ri);
        run_tcp(&c, ri);
        run_grpc(&c, ri, IMPL_GRPC);
        run_grpc(&c, ri, IMPL_GRPC_STREAM);
        if (c.tls_dir)
            run_ferry_half(&c, ri, 1, true, tls);
        run_ferry_half(&c, ri, 1, false, secs);
        report_ferry(&c, ri, secs);
        if (c.tls_dir)
            report_tls(&c, ri, tls);
    }
    targets(&c);
    bench_log("bench/allreduce: %d target(s) missed; %.1f s", missed,
              (double)(bench_now_ns() - t0) * 1e-9);
    return 0;
}
