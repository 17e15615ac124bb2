#!/usr/bin/python3
"""bench/train's PyTorch baseline: the MLP 784-256-128-10 (ReLU, softmax
cross-entropy) trained on Fashion-MNIST with SGD, the way bench/train trains
ferry's tasks/mlp.

Run with Debian's python3-torch (/usr/bin/python3), one thread: bench/train
sets OMP_NUM_THREADS and OPENBLAS_NUM_THREADS (torch's float32 products go
through OpenBLAS) and this script calls torch.set_num_threads.

Prints one JSON object per line on stdout: one per epoch
  {"epoch":1,"samples":60000,"train_s":...,"samples_per_s":...,
   "train_loss":...,"test_accuracy":...,"eval_s":...}
where train_s times the training steps only (batch gather, forward,
backward, optimizer step), not the evaluation; or, when torch or numpy cannot
be imported or the data cannot be read, one line {"skipped":"why"} and exit
status 3.
"""
import argparse
import copy
import json
import sys
import time

from fmnist_torch import load, skip


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-samples", type=int, default=0,
                    help="train on the first N samples only (0: all)")
    ap.add_argument("--warmup-steps", type=int, default=20,
                    help="untimed steps on a copy of the model first")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()

    try:
        import numpy as np
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except Exception as e:  # ImportError, or a broken install
        skip("%s cannot import torch and numpy: %s" % (sys.executable, e))

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    try:
        x_train, y_train = load(a.data_dir, True, np, torch)
        x_test, y_test = load(a.data_dir, False, np, torch)
    except (OSError, ValueError) as e:
        skip("cannot read Fashion-MNIST: %s" % e)
    if a.train_samples > 0:
        x_train, y_train = x_train[:a.train_samples], y_train[:a.train_samples]

    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                          nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    gen = torch.Generator().manual_seed(a.seed)
    n = len(x_train)

    # The first steps of a process pay for allocator growth and OpenBLAS's
    # buffers; a copy takes them, so the trained model's run is untouched.
    spare = copy.deepcopy(model)
    spare_opt = torch.optim.SGD(spare.parameters(), lr=a.lr, momentum=a.momentum)
    for i in range(a.warmup_steps):
        at = (i * a.batch) % max(1, n - a.batch)
        spare_opt.zero_grad(set_to_none=True)
        F.cross_entropy(spare(x_train[at:at + a.batch]), y_train[at:at + a.batch]).backward()
        spare_opt.step()
    del spare, spare_opt

    for epoch in range(1, a.epochs + 1):
        model.train()
        loss_sum = 0.0
        t0 = time.perf_counter()
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n, a.batch):
            idx = perm[i:i + a.batch]
            xb, yb = x_train[idx], y_train[idx]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(idx)
        train_s = time.perf_counter() - t0

        model.eval()
        right = 0
        with torch.no_grad():
            for i in range(0, len(x_test), 1000):
                out = model(x_test[i:i + 1000])
                right += int((out.argmax(1) == y_test[i:i + 1000]).sum())
        eval_s = time.perf_counter() - t0 - train_s
        print(json.dumps({
            "epoch": epoch,
            "samples": n,
            "train_s": train_s,
            "samples_per_s": n / train_s,
            "train_loss": loss_sum / n,
            "test_accuracy": right / len(x_test),
            "eval_s": eval_s,
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
        }, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
