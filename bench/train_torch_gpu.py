#!/usr/bin/python3
"""bench/train --device cuda's PyTorch baseline: ferry's tasks/mlp
(784-256-128-10), tasks/cnn (conv 5x5 1->16 pad 2, relu, maxpool 2; conv
5x5 16->32 pad 2, relu, maxpool 2; 1568-128-10) or tasks/resnet (conv 3x3
1->16, BN, relu; a basic block of 16; conv 3x3 16->32 stride 4 pad 1, BN,
relu; a basic block of 32; global average pooling; 32-10) trained on
Fashion-MNIST on a GPU with SGD and momentum, eager mode, the whole data set
held on the GPU,
torch.backends.cudnn.benchmark on; --amp runs the steps under bfloat16
autocast (PyTorch AMP).

Prints one JSON object per line on stdout, one per epoch:
  {"epoch":1,"samples":60000,"train_s":...,"samples_per_s":...,
   "train_loss":...,"test_accuracy":...,"eval_s":...,"torch":...,"gpu":...}
where train_s times the training steps only, synchronised (batch gather,
forward, backward, optimizer step); or, when torch cannot be imported, no
GPU is visible or the data cannot be read, one line {"skipped":"why"} and
exit status 3.
"""
import argparse
import copy
import json
import sys
import time

from fmnist_torch import load, skip


def basic_block(nn, ch):
    """He et al.'s basic block, as tasks/resnet.c's BLOCK: conv-BN-ReLU-
    conv-BN, the block's input added, then ReLU (the convolutions with
    biases, as ferry's have). torch.nn is imported late (see main)."""

    class BasicBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(ch, ch, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(ch)
            self.conv2 = nn.Conv2d(ch, ch, 3, padding=1)
            self.bn2 = nn.BatchNorm2d(ch)
            self.relu = nn.ReLU()

        def forward(self, x):
            y = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(y)) + x)

    return BasicBlock()


def build(name, nn):
    if name == "resnet":
        # PyTorch's default initialisation and BatchNorm2d's eps 1e-5 and
        # momentum 0.1 are ferry's (include/ferry/nn.h).
        return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                             basic_block(nn, 16),
                             nn.Conv2d(16, 32, 3, stride=4, padding=1), nn.BatchNorm2d(32),
                             nn.ReLU(), basic_block(nn, 32),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
                             nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(1568, 128), nn.ReLU(), nn.Linear(128, 10))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=("mlp", "cnn", "resnet"), default="mlp")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--amp", action="store_true", help="bfloat16 autocast")
    ap.add_argument("--warmup-steps", type=int, default=30,
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
    if not torch.cuda.is_available():
        skip("torch %s sees no GPU" % torch.__version__)
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(a.seed)
    try:
        x_train, y_train = load(a.data_dir, True, np, torch, (1, 28, 28), dev)
        x_test, y_test = load(a.data_dir, False, np, torch, (1, 28, 28), dev)
    except (OSError, ValueError) as e:
        skip("cannot read Fashion-MNIST: %s" % e)

    model = build(a.model, nn).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    gen = torch.Generator().manual_seed(a.seed)
    n = len(x_train)

    def step(m, o, xb, yb):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.amp):
            loss = F.cross_entropy(m(xb), yb)
        o.zero_grad(set_to_none=True)
        loss.backward()
        o.step()
        return loss.detach()

    # cudnn.benchmark times its algorithms on the first steps of each shape,
    # and the allocator grows: a copy of the model takes them, untimed.
    spare = copy.deepcopy(model)
    spare_opt = torch.optim.SGD(spare.parameters(), lr=a.lr, momentum=a.momentum)
    for i in range(a.warmup_steps):
        at = (i * a.batch) % max(1, n - a.batch)
        step(spare, spare_opt, x_train[at:at + a.batch], y_train[at:at + a.batch])
    last = n - (n // a.batch) * a.batch
    if last:
        step(spare, spare_opt, x_train[:last], y_train[:last])
    torch.cuda.synchronize()
    del spare, spare_opt

    for epoch in range(1, a.epochs + 1):
        model.train()
        perm = torch.randperm(n, generator=gen).to(dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss_sum = torch.zeros((), device=dev)
        for i in range(0, n, a.batch):
            idx = perm[i:i + a.batch]
            loss_sum += step(model, opt, x_train[idx], y_train[idx]) * len(idx)
        torch.cuda.synchronize()
        train_s = time.perf_counter() - t0

        model.eval()
        right = 0
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.amp):
            for i in range(0, len(x_test), 1000):
                out = model(x_test[i:i + 1000])
                right += int((out.argmax(1) == y_test[i:i + 1000]).sum())
        eval_s = time.perf_counter() - t0 - train_s
        print(json.dumps({
            "epoch": epoch,
            "samples": n,
            "train_s": train_s,
            "samples_per_s": n / train_s,
            "train_loss": float(loss_sum) / n,
            "test_accuracy": right / len(x_test),
            "eval_s": eval_s,
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(0),
        }, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
