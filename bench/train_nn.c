/* bench/train — layer list against hand-written model, round by round: an
 * epoch of each, the order swapped every round, so that the ratio of a
 * round compares two epochs that saw the same machine (on a shared one,
 * what matters). The ratio reported is the median of the rounds'. */
#include <stdio.h>
#include <string.h>

#include <cblas.h>

#include "stats.h"
#include "train_nn.h"
#include "train_run.h"

#define TARGET_MLP 0.97
#define TARGET_CNN 0.95
#define MAX_ROUNDS 16

typedef struct pair {
    const char *model, *nn_so, *hand_so;
    bench_run_opts o;
    int rounds, threads;
    double target;
} pair;

/* One epoch of `so`: its samples/s, or -1. */
static double epoch(const char *so, const bench_run_opts *o)
{
    bench_run r;
    memset(&r, 0, sizeof r);
    if (bench_ferry_train(so, o, NULL, NULL, &r) != 0 || r.epochs != 1)
        return -1;
    return r.samples_per_s[0];
}

static int measure(const pair *p)
{
    double nn[MAX_ROUNDS], hand[MAX_ROUNDS], ratio[MAX_ROUNDS];
    openblas_set_num_threads(p->threads);
    for (int r = 0; r < p->rounds; r++) {
        bool nn_first = r % 2 == 1;
        double a = epoch(nn_first ? p->nn_so : p->hand_so, &p->o);
        double b = epoch(nn_first ? p->hand_so : p->nn_so, &p->o);
        if (a < 0 || b < 0)
            bench_die("bench/train: %s: an epoch failed", p->model);
        nn[r] = nn_first ? a : b;
        hand[r] = nn_first ? b : a;
        ratio[r] = nn[r] / hand[r];
        bench_log("  %s round %d: layers %.0f samples/s, hand-written %.0f: %.3f",
                  p->model, r + 1, nn[r], hand[r], ratio[r]);
    }
    openblas_set_num_threads(1);
    char params[256];
    snprintf(params, sizeof params,
             "\"model\":\"%s\",\"batch\":%d,\"threads\":%d,\"train_samples\":%zu,"
             "\"rounds\":%d",
             p->model, p->o.batch, p->threads, p->o.train_samples, p->rounds);
    bench_summary s = bench_summarize(nn, (size_t)p->rounds);
    bench_emit("samples_per_s", s.median, "samples/s", &s, "\"impl\":\"ferry-layers\",%s",
               params);
    s = bench_summarize(hand, (size_t)p->rounds);
    bench_emit("samples_per_s", s.median, "samples/s", &s, "\"impl\":\"ferry-hand\",%s",
               params);
    /* The step alone, call by call: the figure the machine's load moves
     * least. */
    bench_summary step;
    double nn_ms, hand_ms;
    openblas_set_num_threads(p->threads);
    if (bench_nn_steps(p->nn_so, p->hand_so, p->o.batch, p->rounds * 10, &step, &nn_ms,
                       &hand_ms) != 0)
        bench_die("bench/train: %s: the step comparison failed", p->model);
    openblas_set_num_threads(1);
    bench_emit("layers_vs_hand_step_speed", step.median, "ratio", &step,
               "\"impl\":\"ferry\",%s,\"layers_ms\":%.3f,\"hand_ms\":%.3f", params, nn_ms,
               hand_ms);
    bench_log(
        "  %s loss_grad alone, %d pairs: layers %.3f ms, hand-written %.3f ms: %.3f "
        "(%.3f..%.3f)",
        p->model, p->rounds * 10, nn_ms, hand_ms, step.median, step.min, step.max);
    s = bench_summarize(ratio, (size_t)p->rounds);
    bench_emit("layers_vs_hand_samples_per_s", s.median, "ratio", &s,
               "\"impl\":\"ferry\",%s,\"target_min\":%g", params, p->target);
    bool ok = s.median >= p->target;
    bench_log("%-32s %7.3f  (target_min %g, rounds %.3f..%.3f) %s",
              strcmp(p->model, "mlp") == 0 ? "mlp layers_vs_hand" : "cnn layers_vs_hand",
              s.median, p->target, s.min, s.max, ok ? "met" : "MISSED");
    return ok ? 0 : 1;
}

int bench_train_nn(const bench_nn_cfg *c)
{
    pair mlp = {.model = "mlp",
                .nn_so = c->mlp_so,
                .hand_so = c->mlp_hand_so,
                .o = {.epochs = 1,
                      .batch = 128,
                      .lr = 0.05f,
                      .momentum = 0.9f,
                      .seed = 1,
                      .train_samples = c->quick ? 10000 : 0,
                      .test_samples = 1000},
                .rounds = c->quick ? 2 : 6,
                .threads = 1,
                .target = TARGET_MLP};
    pair cnn = {.model = "cnn",
                .nn_so = c->cnn_so,
                .hand_so = c->cnn_hand_so,
                .o = {.epochs = 1,
                      .batch = 128,
                      .lr = 0.05f,
                      .momentum = 0.9f,
                      .seed = 1,
                      .train_samples = c->quick ? 1000 : 6000,
                      .test_samples = 500},
                .rounds = c->quick ? 2 : 4,
                .threads = c->cnn_threads,
                .target = TARGET_CNN};
    bench_log("layer lists against the hand-written models: %s against %s", c->mlp_so,
              c->mlp_hand_so);
    int missed = measure(&mlp);
    if (c->cnn_on) {
        bench_log("  and %s against %s, %d BLAS threads", c->cnn_so, c->cnn_hand_so,
                  c->cnn_threads);
        missed += measure(&cnn);
    }
    return missed;
}
