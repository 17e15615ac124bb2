/* bench/train — PyTorch, the baseline: bench/train_torch.py in a child
 * process, one JSON object per epoch on its stdout. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "stats.h"
#include "train_child.h"
#include "train_run.h"

/* Reads the script's epoch lines (or its "skipped" line) and waits for it. */
static int read_epochs(bench_proc *p, const char *python, const char *script,
                       const bench_run_opts *o, bench_run *out)
{
    char line[4096];
    while (fgets(line, sizeof line, p->out)) {
        if (strstr(line, "\"skipped\"")) {
            bench_json_string(line, "skipped", out->skipped, sizeof out->skipped);
            continue;
        }
        int e = out->epochs;
        double sps = bench_json_number(line, "samples_per_s");
        if (e >= BENCH_MAX_EPOCHS || !(sps > 0))
            continue;
        out->samples_per_s[e] = sps;
        out->train_s[e] = bench_json_number(line, "train_s");
        out->wall_s[e] = out->train_s[e] + bench_json_number(line, "eval_s");
        out->train_loss[e] = bench_json_number(line, "train_loss");
        out->test_accuracy[e] = bench_json_number(line, "test_accuracy");
        out->samples = (size_t)bench_json_number(line, "samples");
        char version[64], gpu[128];
        bench_json_string(line, "torch", version, sizeof version);
        bench_json_string(line, "gpu", gpu, sizeof gpu);
        if (gpu[0])
            snprintf(out->device, sizeof out->device, "torch %s, %s", version, gpu);
        else
            snprintf(out->device, sizeof out->device, "torch %s, %d thread(s)", version,
                     (int)bench_json_number(line, "threads"));
        out->epochs = e + 1;
        bench_log(
            "  torch  epoch %d: %7.0f samples/s  train %.2f s  wall %.2f s  loss %.4f  "
            "test accuracy %.4f",
            e + 1, sps, out->train_s[e], out->wall_s[e], out->train_loss[e],
            out->test_accuracy[e]);
    }
    int code = bench_proc_wait(p);
    if (out->skipped[0])
        return 0;
    if (code != 0 || out->epochs != o->epochs) {
        bench_log("bench/train: %s %s exited %d after %d of %d epochs", python, script,
                  code, out->epochs, o->epochs);
        return -1;
    }
    return 0;
}

int bench_pytorch_train(const char *python, const char *script, int threads,
                        const bench_run_opts *o, bench_run *out)
{
    memset(out, 0, sizeof *out);
    if (access(python, X_OK) != 0) {
        snprintf(out->skipped, sizeof out->skipped, "no %s: %s", python, strerror(errno));
        return 0;
    }
    if (access(script, R_OK) != 0) {
        bench_log("bench/train: cannot read %s: %s", script, strerror(errno));
        return -1;
    }
    char a[6][32], omp[48], blas[48];
    snprintf(a[0], sizeof a[0], "%d", o->epochs);
    snprintf(a[1], sizeof a[1], "%d", o->batch);
    snprintf(a[2], sizeof a[2], "%g", (double)o->lr);
    snprintf(a[3], sizeof a[3], "%g", (double)o->momentum);
    snprintf(a[4], sizeof a[4], "%d", threads);
    snprintf(a[5], sizeof a[5], "%zu", o->train_samples);
    snprintf(omp, sizeof omp, "OMP_NUM_THREADS=%d", threads);
    snprintf(blas, sizeof blas, "OPENBLAS_NUM_THREADS=%d", threads);
    char *argv[] = {(char *)python,    (char *)script, "--epochs",  a[0],
                    "--batch",         a[1],           "--lr",      a[2],
                    "--momentum",      a[3],           "--threads", a[4],
                    "--train-samples", a[5],           NULL};
    /* Debian's site-packages, not a virtual environment's or the user's. */
    const char *env[] = {omp, blas, "PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE=1",
                         NULL};
    bench_proc p;
    int rc = bench_proc_start(&p, argv, env);
    if (rc) {
        bench_log("bench/train: cannot start %s: %s", python, strerror(-rc));
        return -1;
    }
    return read_epochs(&p, python, script, o, out);
}

int bench_pytorch_gpu_train(const char *python, const char *script, const char *model,
                            bool amp, const bench_run_opts *o, bench_run *out)
{
    memset(out, 0, sizeof *out);
    if (access(python, X_OK) != 0) {
        snprintf(out->skipped, sizeof out->skipped, "no %s: %s", python, strerror(errno));
        return 0;
    }
    if (access(script, R_OK) != 0) {
        bench_log("bench/train: cannot read %s: %s", script, strerror(errno));
        return -1;
    }
    char a[4][32];
    snprintf(a[0], sizeof a[0], "%d", o->epochs);
    snprintf(a[1], sizeof a[1], "%d", o->batch);
    snprintf(a[2], sizeof a[2], "%g", (double)o->lr);
    snprintf(a[3], sizeof a[3], "%g", (double)o->momentum);
    char *argv[] = {(char *)python, (char *)script, "--model", (char *)model,
                    "--epochs",     a[0],           "--batch", a[1],
                    "--lr",         a[2],           "--momentum", a[3],
                    amp ? "--amp" : NULL,           NULL};
    /* The interpreter's own site-packages (a GPU machine's torch is often
     * pip-installed), but not a stray PYTHONPATH. */
    const char *env[] = {"PYTHONPATH", "PYTHONHOME", NULL};
    bench_proc p;
    int rc = bench_proc_start(&p, argv, env);
    if (rc) {
        bench_log("bench/train: cannot start %s: %s", python, strerror(-rc));
        return -1;
    }
    return read_epochs(&p, python, script, o, out);
}
