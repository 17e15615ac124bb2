/* bench/train --device cuda — ferry against PyTorch eager on the same GPU:
 * tasks/mlp and tasks/cnn at batch 128 and 1024, SGD with momentum, fp32
 * and bf16 (PyTorch AMP; ferry's bf16 where it is built), and tasks/resnet
 * at both batches in fp32, all holding the data on the GPU (PyTorch with
 * cudnn.benchmark on). */
#ifndef FERRY_BENCH_TRAIN_GPU_H
#define FERRY_BENCH_TRAIN_GPU_H

#include <stdbool.h>

typedef struct bench_gpu_cfg {
    bool quick;
    int epochs;
    const char *device;         /* "cuda" or "cuda:N" */
    /* build/tasks/{mlp,cnn}.so; resnet.so is read beside cnn.so */
    const char *mlp_so, *cnn_so;
    const char *python, *script; /* bench/train_torch_gpu.py */
    bool torch_on;
} bench_gpu_cfg;

/* Runs every configuration, prints their lines, then one ratio line per
 * configuration with its target. With no GPU visible, prints one skip line
 * per target with the reason and returns 0. Returns the targets missed. */
int bench_train_gpu(const bench_gpu_cfg *c);

#endif
