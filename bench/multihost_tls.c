/* bench/multihost — what TLS costs across hosts: ferry's all-reduce of
 * 16 MiB on the hosts' plain links, with mutual TLS on every connection
 * (certificates naming the hosts' addresses, made by tests/tls/mkcerts.sh)
 * and without, a quarter of the repetitions at a time, alternated, so that
 * a machine that speeds up or slows down moves both sides; then each side's
 * CPU time and the cipher's floor under TLS's cost (multihost_tls_floor.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "allreduce_ranks.h"
#include "multihost.h"
#include "multihost_tls_floor.h"
#include "stats.h"

#ifndef BENCH_MKCERTS
#define BENCH_MKCERTS "tests/tls/mkcerts.sh"
#endif

#define MiB              ((size_t)1 << 20)
#define TARGET_TLS_RATIO 0.85 /* TLS costs 15% at most */

static void skip(const char *why)
{
    bench_emit("busbw_tls_over_plain", NAN, "ratio", NULL,
               "\"ranks\":%d,\"bytes\":%zu,\"skipped\":\"%s\"", MHB_RANKS, 16 * MiB, why);
    bench_log("tls      skipped: %s", why);
}

/* CPU seconds this process's reaped children used: after a half, its ranks. */
static double children_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* Certificates for the hosts' addresses in c->tmp/certs. */
static int make_certs(mhb_ctx *c, char *dir, size_t len)
{
    char san[256] = "", cmd[1024];
    for (int r = 0; r < MHB_RANKS; r++) {
        size_t n = strlen(san);
        snprintf(san + n, sizeof san - n, "%sIP:%s", r ? "," : "", c->net.addr[r]);
    }
    snprintf(dir, len, "%s/certs", c->tmp);
    snprintf(cmd, sizeof cmd, "SAN='%s' sh '%s' '%s' >/dev/null", san, BENCH_MKCERTS, dir);
    return system(cmd) == 0 ? 0 : -1;
}

void mhb_tls(mhb_ctx *c)
{
    if (c->why) {
        skip(c->why);
        return;
    }
    char dir[512], err[1024];
    if (make_certs(c, dir, sizeof dir) != 0) {
        skip("tests/tls/mkcerts.sh could not make the certificates (openssl?)");
        return;
    }
    /* Two halves a side, alternated: plain, TLS, plain, TLS. */
    int reps = c->quick ? 4 : 8;
    ar_plan plan = {.n = 1, .step = {{16 * MiB, reps, 1}}};
    static double plain[AR_MAX_SIZES][AR_MAX_REPS], tls[AR_MAX_SIZES][AR_MAX_REPS];
    /* Each half's warm-ups count among the all-reduces. */
    mhb_tls_run run = {
        .ranks = MHB_RANKS, .bytes = 16 * MiB, .allreduces = reps + 2 * AR_WARMUP};
    for (int half = 0; half < 2; half++) {
        double t0 = children_cpu_s();
        int rc = mhb_ferry_half(c, &plan, half, NULL, plain, err, sizeof err);
        double t1 = children_cpu_s();
        rc = rc ? rc : mhb_ferry_half(c, &plan, half, dir, tls, err, sizeof err);
        run.plain_cpu_s += t1 - t0;
        run.tls_cpu_s += children_cpu_s() - t1;
        if (rc != 0) {
            skip(err);
            return;
        }
    }
    double p = ar_report("ferry", MHB_RANKS, &plan.step[0], plain[0], "\"link\":\"plain\"");
    double t = ar_report("ferry_tls", MHB_RANKS, &plan.step[0], tls[0], "\"link\":\"plain\"");
    char params[96];
    snprintf(params, sizeof params, "\"ranks\":%d,\"bytes\":%zu", MHB_RANKS, 16 * MiB);
    mhb_target(c, "busbw_tls_over_plain", t / p, TARGET_TLS_RATIO, params);
    run.plain_busbw = p;
    run.tls_busbw = t;
    mhb_tls_floor(&run);
}
