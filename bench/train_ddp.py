#!/usr/bin/python3
"""bench/train --sync's baseline: PyTorch DistributedDataParallel (gloo,
one thread a rank) training the MLP 784-256-128-10 on Fashion-MNIST the way
`ferry submit mlp.so --mode sync` trains tasks/mlp: every global batch split
across the ranks, gradients averaged, SGD with momentum and ferry's default
cosine schedule (the learning rate decays to 0 over the run, step by step).

  /usr/bin/python3 bench/train_ddp.py --world N [--epochs E] [--batch 128] ...

starts N worker processes of this script (MASTER_ADDR=127.0.0.1, a free
MASTER_PORT, OMP_NUM_THREADS=1, torch.set_num_threads(1)), each bound to
its share of the CPUs the launcher may use as `ferry start --bind-to core`
binds its workers (--bind-to none: not), and waits for them. Rank 0 evaluates on the whole test set after each epoch and prints one
JSON object a line on stdout:
  {"epoch":1,"samples":60000,"train_s":...,"samples_per_s":...,
   "train_loss":...,"test_accuracy":...,"eval_s":...,"world":N,...}
where train_s times the training steps only (rank 0's: DDP's all-reduce
keeps the ranks in step). When torch cannot be imported or has no gloo, or
the data cannot be read, one line {"skipped":"why"} and exit status 3.
"""
import argparse
import json
import math
import os
import socket
import subprocess
import sys
import time

from fmnist_torch import load, skip


def worker(a):
    if a.cpus:  # first: every thread torch starts inherits it
        os.sched_setaffinity(0, [int(c) for c in a.cpus.split(",")])
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from datetime import timedelta
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    rank, world = a.rank, a.world
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    x_train, y_train = load(a.data_dir, True, np, torch)
    x_test, y_test = load(a.data_dir, False, np, torch)
    if a.train_samples > 0:
        x_train, y_train = x_train[:a.train_samples], y_train[:a.train_samples]

    torch.manual_seed(a.seed)
    model = DDP(nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                              nn.ReLU(), nn.Linear(128, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    n = len(x_train)
    steps_per_epoch = (n + a.batch - 1) // a.batch
    total = steps_per_epoch * a.epochs
    done = 0
    # The same permutation on every rank: each takes its slice of every
    # global batch (DDP averages the slices' gradients: the global mean).
    gen = torch.Generator().manual_seed(a.seed)
    loss_sum = torch.zeros(1, dtype=torch.float64)

    for epoch in range(1, a.epochs + 1):
        model.train()
        loss_sum.zero_()
        t0 = time.perf_counter()
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n, a.batch):
            idx = torch.tensor_split(perm[i:i + a.batch], world)[rank]
            xb, yb = x_train[idx], y_train[idx]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            for g in opt.param_groups:  # ferry's cosine: lr0 at the first step
                g["lr"] = a.lr * 0.5 * (1.0 + math.cos(math.pi * min(done / total, 1.0)))
            opt.step()
            done += 1
            loss_sum += float(loss) * len(idx)
        train_s = time.perf_counter() - t0
        dist.all_reduce(loss_sum)  # outside the timed steps
        if rank != 0:
            continue
        model.eval()
        right = 0
        with torch.no_grad():
            for i in range(0, len(x_test), 1000):
                out = model.module(x_test[i:i + 1000])
                right += int((out.argmax(1) == y_test[i:i + 1000]).sum())
        eval_s = time.perf_counter() - t0 - train_s
        print(json.dumps({
            "epoch": epoch,
            "samples": n,
            "train_s": train_s,
            "samples_per_s": n / train_s,
            "train_loss": float(loss_sum[0]) / n,
            "test_accuracy": right / len(x_test),
            "eval_s": eval_s,
            "world": world,
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
        }, separators=(",", ":")), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def launch(a, argv):
    try:
        import numpy  # noqa: F401
        import torch.distributed as dist
    except Exception as e:  # ImportError, or a broken install
        skip("%s cannot import torch.distributed and numpy: %s" % (sys.executable, e))
    if not dist.is_available() or not dist.is_gloo_available():
        skip("this torch has no gloo backend")
    for f in ("train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz"):
        if not os.access(os.path.join(a.data_dir, f), os.R_OK):
            skip("cannot read %s in %s" % (f, a.data_dir))
    with socket.socket() as s:  # a free port, handed to rank 0's store
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               WORLD_SIZE=str(a.world))
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank", str(r)]
                              + cpus_arg(a, r) + argv, env=dict(env, RANK=str(r)))
             for r in range(a.world)]
    codes = []
    try:
        for p in procs:
            codes.append(p.wait())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(c != 0 for c in codes):
        print("train_ddp: worker exit codes %s" % codes, file=sys.stderr)
        sys.exit(1)


def cpus_arg(a, rank):
    """Rank's share of the launcher's CPUs, as ferry start's supervisor
    computes it (config/cpus.c): consecutive runs, or round robin when the
    ranks outnumber the CPUs."""
    if a.bind_to == "none":
        return []
    cpus = sorted(os.sched_getaffinity(0))
    n = len(cpus)
    if a.world >= n:
        mine = [cpus[rank % n]]
    else:
        base, extra = divmod(n, a.world)
        first = rank * base + min(rank, extra)
        mine = cpus[first:first + base + (rank < extra)]
    return ["--cpus", ",".join(str(c) for c in mine)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128, help="global batch")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-samples", type=int, default=0,
                    help="train on the first N samples only (0: all)")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--bind-to", choices=("core", "none"), default="core",
                    help="bind each rank to its share of the CPUs (default) or not")
    ap.add_argument("--rank", type=int, default=-1, help="(internal) run as this rank")
    ap.add_argument("--cpus", default="", help="(internal) this rank's CPUs")
    a = ap.parse_args()
    if a.rank >= 0:
        worker(a)
    else:
        launch(a, sys.argv[1:])


if __name__ == "__main__":
    main()
