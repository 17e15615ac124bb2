/* bench/multihost — what running across hosts costs, on hosts that are
 * network namespaces of this machine (tests/multihost/mhnet.h): MHB_RANKS
 * hosts that run one rank each, and one more, MHB_LAUNCHER, that runs the
 * launchers (mpirun), all joined by veth pairs through a bridge.
 *
 * The benchmark is a table of sections (multihost.c); each prints its own
 * JSON lines, a skip line with the reason for what cannot run, and its
 * targets through mhb_target(). */
#ifndef FERRY_BENCH_MULTIHOST_H
#define FERRY_BENCH_MULTIHOST_H

#include <limits.h>
#include <stdbool.h>

#include "allreduce_plan.h"
#include "mhnet.h"

#define MHB_RANKS    3
#define MHB_LAUNCHER MHB_RANKS
/* The slow link: netem on this rank's host, as its packets leave it. */
#define MHB_NETEM_HOST 1
#define MHB_NETEM      "delay 5ms loss 1%"
/* The same link with neither: forwarding alone, where it is emulated. */
#define MHB_NETEM_NONE "delay 0ms loss 0%"

typedef struct mhb_ctx {
    bool quick;
    const char *why;        /* set: the hosts could not be made, and this says why */
    mh_net net;             /* up unless `why` */
    char bin_dir[PATH_MAX]; /* build/bench: the helpers' programs */
    char tmp[256];          /* a directory for this run's files */
    int missed;             /* targets missed, every section */
} mhb_ctx;

/* Prints a target line: metric = v (a ratio) against target_min `want`,
 * with `params` (JSON members); counts a miss. */
void mhb_target(mhb_ctx *c, const char *metric, double v, double want,
                const char *params);

/* Half of ferry's repetitions of `plan` on MHB_RANKS ranks, one a host
 * (allreduce_ranks.h's ar_ferry_half), speaking TLS with the certificates
 * in `tls_dir` (NULL: plain text). Returns 0, or an error with `err`. */
int mhb_ferry_half(mhb_ctx *c, const ar_plan *plan, int half, const char *tls_dir,
                   double secs[AR_MAX_SIZES][AR_MAX_REPS], char *err, size_t len);

/* The sections. */
void mhb_allreduce(mhb_ctx *c);
void mhb_tls(mhb_ctx *c);

#endif
