/* bench/train — training runs and what they measured, epoch by epoch:
 * ferry's trainer in this process (train_ferry.c) and PyTorch in a child
 * process (train_pytorch.c), and `ferry submit` end to end (train_submit.c). */
#ifndef FERRY_BENCH_TRAIN_RUN_H
#define FERRY_BENCH_TRAIN_RUN_H

#include <stdbool.h>
#include <stddef.h>

#define BENCH_MAX_EPOCHS 32

typedef struct bench_run_opts {
    const char *device; /* what ferry trains on: NULL or "cpu", "cuda" */
    int precision;      /* ferry's rt_precision (0: fp32) */
    int epochs;
    int batch;
    float lr, momentum;
    unsigned long long seed;
    /* Train on the first train_samples samples only (0: all 60,000), and
     * evaluate on the first test_samples (0: all 10,000): quick runs. */
    size_t train_samples, test_samples;
} bench_run_opts;

typedef struct bench_run {
    int epochs; /* epochs done */
    size_t samples;
    /* per epoch: training steps only, then with the evaluation */
    double samples_per_s[BENCH_MAX_EPOCHS];
    double train_s[BENCH_MAX_EPOCHS];
    double wall_s[BENCH_MAX_EPOCHS];
    double train_loss[BENCH_MAX_EPOCHS];
    double test_accuracy[BENCH_MAX_EPOCHS];
    char device[256]; /* what it ran on, for the log */
    /* Set when the run could not be made at all (pytorch not installed). */
    char skipped[256];
} bench_run;

/* Trains the model of the task module at `so` with ferry's trainer on
 * o->device (NULL: the cpu) in this process, SGD with momentum, at
 * o->precision. The BLAS thread count is the caller's. A device that cannot
 * be opened gives 0 with out->skipped saying why. `between` (NULL: none) runs before the first epoch and after
 * each, outside the timed parts: a baseline measured there sees the same
 * machine as the epochs beside it. Returns 0, or -1 with the reason printed. */
int bench_ferry_train(const char *so, const bench_run_opts *o, void (*between)(void *),
                      void *arg, bench_run *out);

/* Runs `script` (bench/train_torch.py) with the interpreter `python` and
 * `threads` threads (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and
 * torch.set_num_threads) and reads its epochs. Returns 0 with out->skipped
 * set when the interpreter is missing or cannot import torch, 0 with the
 * epochs, or -1 when the script failed otherwise. */
int bench_pytorch_train(const char *python, const char *script, int threads,
                        const bench_run_opts *o, bench_run *out);

/* Runs `script` (bench/train_torch_gpu.py) with `python` on the GPU for
 * `model` ("mlp" or "cnn"), under bfloat16 autocast when `amp`, and reads
 * its epochs. Returns as bench_pytorch_train (out->skipped: no interpreter,
 * no torch, or no GPU). */
int bench_pytorch_gpu_train(const char *python, const char *script, const char *model,
                            bool amp, const bench_run_opts *o, bench_run *out);

/* What `ferry submit MODULE --epochs E --json` reported, and how long the
 * whole command took (connect, ship, load the data, train, evaluate). */
typedef struct bench_submit {
    double command_s;
    double samples_per_s, train_s, wall_s, test_accuracy;
    char device[256];
    char skipped[256]; /* set when it could not be run */
} bench_submit;

/* Starts one local worker with `ferry` (build/ferry) under a private
 * FERRY_HOME, times the submit of the module at `so` with o's epochs,
 * batch, lr, momentum and seed, and shuts the worker down. Returns 0, with
 * out->skipped set when a step failed (the CLI may not train yet). */
int bench_submit_train(const char *ferry, const char *so, const bench_run_opts *o,
                       bench_submit *out);

/* Runs `ferry args...` (NULL-terminated) under FERRY_HOME `home` and waits:
 * the exit status. With `last`, its stdout's last line is kept there;
 * without, its stdout goes to our stderr. */
int bench_run_ferry(const char *ferry, const char *home, const char *const *args,
                    char *last, size_t len);

#endif
