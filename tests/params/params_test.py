#!/usr/bin/env python3
"""tests/params — what a run learned, read by other tools, printing TAP.

On a cluster of 2 local workers (its own FERRY_HOME, free ports):

1. `ferry submit mlp.so --save F --json` trains, and F is read with numpy
   alone (no ferry code): its header, its tensors and their shapes, its
   metadata; the same MLP computed in numpy from F on the Fashion-MNIST
   test set gets the run's test accuracy within 0.1 point. With PyTorch
   installed, a torch.nn model loaded from F does too. The metadata keeps
   Fashion-MNIST's published normalisation and the model's shape.
2. `--init-from F` with a learning rate too small to move anything starts
   where the first run ended: its first epoch's accuracy is the saved one.
3. `--init-from F` for another model (the CNN) is refused, naming the
   tensor it lacks and the model's shape.
4. `ferry predict mlp.so --params F`, on worker 0 and with --local, writes
   a line a sample (the class, then probabilities that sum to 1) and gets
   the run's test accuracy; with the CNN, it is refused like --init-from.
   On the test images alone (raw pixels, no labels), it gives the same
   classes: the file's normalisation is the run's.

Environment (meson sets it): FERRY_TEST_BUILD; optional FERRY_TEST_FMNIST
(default /usr/share/datasets/fashion-mnist).
"""
import gzip
import json
import os
import shutil
import struct
import tempfile

import numpy as np

from ptap import BUILD, Tap, ferry, read_safetensors, run

FMNIST = os.environ.get("FERRY_TEST_FMNIST", "/usr/share/datasets/fashion-mnist")
MLP = os.path.join(BUILD, "tasks", "mlp.so")
CNN = os.path.join(BUILD, "tasks", "cnn.so")
# Fashion-MNIST's published mean and standard deviation, which the workers
# normalise its pixels with.
MEAN, STD = 0.2860405969887955, 0.3530242445149223

TAP = Tap()
report = TAP.report


def test_set():
    def idx(name):
        with gzip.open(os.path.join(FMNIST, name)) as f:
            data = f.read()
        dims = data[3]
        shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
        return np.frombuffer(data[4 + 4 * dims:], dtype=np.uint8).reshape(shape)
    x = idx("t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32)
    y = idx("t10k-labels-idx1-ubyte.gz").astype(np.int64)
    return (x / 255.0 - MEAN) / STD, y


def mlp_numpy(t, x):
    """The bundled MLP: 784 -> 256 -> 128 -> 10 with ReLU, x @ W + b."""
    h = np.maximum(x @ t["fc1.weight"] + t["fc1.bias"], 0)
    h = np.maximum(h @ t["fc2.weight"] + t["fc2.bias"], 0)
    return h @ t["fc3.weight"] + t["fc3.bias"]


def accuracy_torch(t, x, y):
    import torch
    layers = []
    for i in (1, 2, 3):
        w = t["fc%d.weight" % i]
        lin = torch.nn.Linear(w.shape[0], w.shape[1])
        with torch.no_grad():  # PyTorch keeps a Linear's weight as (out, in)
            lin.weight.copy_(torch.from_numpy(w.T.copy()))
            lin.bias.copy_(torch.from_numpy(t["fc%d.bias" % i].copy()))
        layers += [lin, torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1]).eval()
    with torch.no_grad():
        pred = model(torch.from_numpy(x)).argmax(1).numpy()
    return float((pred == y).mean())


def submit_json(home, *args):
    r = ferry(home, "submit", *args, "--json")
    if r.returncode != 0:
        raise AssertionError("submit %s: exit %d\n%s" % (" ".join(args), r.returncode,
                                                         r.stderr[-2000:]))
    return json.loads(r.stdout), r


def main():
    home = tempfile.mkdtemp(prefix="ferry-params-")
    saved = os.path.join(home, "mlp.safetensors")
    try:
        r = ferry(home, "start", "2", "--base-port", "0", timeout=120)
        if r.returncode != 0:
            report(False, "a cluster of 2 starts", r.stderr)
            return
        run, r1 = submit_json(home, MLP, "--epochs", "1", "--save", saved)
        acc = run["test_accuracy"]
        report("saved 6 tensors" in r1.stderr, "--save says what it wrote", r1.stderr[-500:])

        t, meta = read_safetensors(saved)
        want = {"fc1.weight": (784, 256), "fc1.bias": (256,), "fc2.weight": (256, 128),
                "fc2.bias": (128,), "fc3.weight": (128, 10), "fc3.bias": (10,)}
        got = {k: v.shape for k, v in t.items()}
        report(got == want, "numpy reads every tensor with its shape", repr(got))
        report(meta.get("model") == "mlp" and meta.get("ferry_version") and
               abs(float(meta["test_accuracy"]) - acc) < 1e-6,
               "the metadata names the model, ferry's version and the accuracy", repr(meta))
        # Fashion-MNIST's published constants, in the pixels' own units.
        shift = json.loads(meta.get("norm_shift", "[]"))
        scale = json.loads(meta.get("norm_scale", "[]"))
        report(meta.get("normalize") == "fashion-mnist" and len(shift) == 1 and
               len(scale) == 1 and abs(shift[0] - 255 * MEAN) < 1e-4 and
               abs(scale[0] * 255 * STD - 1) < 1e-6 and
               json.loads(meta.get("input", "[]")) == [1, 28, 28] and
               meta.get("outputs") == "10" and json.loads(meta.get("class_names")) == [],
               "the metadata keeps Fashion-MNIST's normalisation and the shape", repr(meta))

        x, y = test_set()
        np_acc = float((mlp_numpy(t, x).argmax(1) == y).mean())
        report(abs(np_acc - acc) <= 0.001,
               "the MLP in numpy from the file gets the run's test accuracy",
               "numpy %.4f, the run %.4f" % (np_acc, acc))
        try:
            import torch  # noqa: F401
            have_torch = True
        except ImportError:
            have_torch = False
        if have_torch:
            t_acc = accuracy_torch(t, x, y)
            report(abs(t_acc - acc) <= 0.001,
                   "the same model in PyTorch from the file gets the run's test accuracy",
                   "torch %.4f, the run %.4f" % (t_acc, acc))
        else:
            report(True, "the same model in PyTorch # SKIP PyTorch is not installed")

        again, _ = submit_json(home, MLP, "--epochs", "1", "--lr", "1e-9",
                               "--schedule", "constant", "--init-from", saved)
        report(abs(again["test_accuracy"] - acc) <= 0.001,
               "--init-from starts where the saved run ended",
               "saved %.4f, after an epoch that moves nothing %.4f"
               % (acc, again["test_accuracy"]))

        r = ferry(home, "submit", CNN, "--epochs", "1", "--init-from", saved)
        report(r.returncode == 1 and
               "they have no tensor 'conv1.weight' (the model's is 16x1x5x5)" in r.stderr,
               "--init-from with another model's file is refused by tensor name",
               "exit %d\n%s" % (r.returncode, r.stderr[-1500:]))

        for where in ([], ["--local"]):
            out = os.path.join(home, "pred%s.csv" % "".join(where))
            r = ferry(home, "predict", MLP, "--params", saved, "--out", out, "--json",
                      *where)
            ok = r.returncode == 0
            summary = json.loads(r.stdout) if ok else {}
            with open(out) if ok else open(os.devnull) as f:
                lines = f.read().splitlines()
            rows = [list(map(float, l.split(","))) for l in lines[1:]]
            ok = ok and lines[0] == "class," + ",".join("p%d" % i for i in range(10))
            ok = ok and len(rows) == 10000 and summary.get("samples") == 10000
            ok = ok and all(abs(sum(row[1:]) - 1) < 1e-4 and
                            int(row[0]) == max(range(10), key=lambda i: row[1 + i])
                            for row in rows)
            right = sum(int(row[0]) == label for row, label in zip(rows, y))
            ok = ok and abs(right / 10000 - acc) <= 0.001
            ok = ok and abs(summary.get("test_accuracy", -1) - acc) <= 0.001
            report(ok, "predict %s reproduces the run's test accuracy" %
                   ("--local" if where else "on worker 0"),
                   "exit %d, accuracy %s vs the run's %.4f\n%s" %
                   (r.returncode, summary.get("test_accuracy"), acc, r.stderr[-1500:]))

        # The test images alone, as raw pixels: normalised with the constants
        # the file keeps, they get the classes the labelled test set got.
        out = os.path.join(home, "images.csv")
        r = ferry(home, "predict", MLP, "--params", saved, "--local", "--data",
                  os.path.join(FMNIST, "t10k-images-idx3-ubyte.gz"), "--out", out, "--json")
        with open(out if r.returncode == 0 else os.devnull) as f:
            classes = [l.split(",")[0] for l in f.read().splitlines()[1:]]
        with open(os.path.join(home, "pred--local.csv")) as f:
            want = [l.split(",")[0] for l in f.read().splitlines()[1:]]
        summary = json.loads(r.stdout) if r.returncode == 0 else {}
        report(len(want) == 10000 and classes == want and summary.get("labelled") is False
               and "test_accuracy" not in summary,
               "predict on the test images alone (raw pixels, no labels) gives the same "
               "classes", "exit %d, %d classes, %d equal\n%s" %
               (r.returncode, len(classes), sum(a == b for a, b in zip(classes, want)),
                r.stderr[-1500:]))

        r = ferry(home, "predict", CNN, "--params", saved, "--local")
        report(r.returncode == 1 and "they have no tensor 'conv1.weight'" in r.stderr,
               "predict with another model's file is refused by tensor name",
               "exit %d\n%s" % (r.returncode, r.stderr[-1500:]))
    finally:
        ferry(home, "shutdown", timeout=120)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    run(TAP, 12, main)
