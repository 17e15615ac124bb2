#!/usr/bin/env python3
"""tests/params — `ferry predict` on new samples, printing TAP.

On a cluster of 2 local workers (its own FERRY_HOME, free ports), the
bundled MLP trains on a CSV with string labels and saves its parameters:

1. the file keeps how the run saw its data: the normalisation numpy
   computes from the training file, the class names in index order, the
   sample shape;
2. `ferry predict --data` on a CSV of new rows without a label column, on
   worker 0 and with --local, writes each row's class by name and
   probabilities equal to numpy's forward pass with the saved tensors and
   the saved normalisation; so does an .npy of the samples alone and an
   .npz with x alone;
3. predict on the run's test file, and on the held-out split of a run
   that split its file (--test-split), reproduces the run's accuracy;
4. refused, each with its message: samples of another shape than the
   model's (an .npy, a CSV); a file saved without the normalisation (as an
   earlier ferry wrote it) on data that is not the run's, while on the
   run's own data it still predicts; no --data for a run on a user's file;
   --test-split on data the run did not train on.

Environment (meson sets it): FERRY_TEST_BUILD.
"""
import json
import os
import shutil
import struct
import tempfile

import numpy as np

from ptap import BUILD, Tap, ferry, read_safetensors, run

MLP = os.path.join(BUILD, "tasks", "mlp.so")
NAMES = ["iris setosa", "iris versicolor", "iris virginica"]
DATA_KEYS = ["normalize", "norm_shift", "norm_scale", "class_names", "input", "outputs"]

TAP = Tap()
report = TAP.report


def write_without_data_meta(src, dst):
    """The file as a ferry that kept nothing of the data wrote it."""
    with open(src, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    for k in DATA_KEYS:
        del header["__metadata__"][k]
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b[8 + n:])


def make(rng, n):
    """Three classes in 4 features of very different scales."""
    y = rng.integers(0, 3, n)
    x = rng.normal(size=(n, 4)) * [1.0, 20.0, 0.01, 300.0] + [5.0, -40.0, 0.3, 1000.0]
    x[:, 0] += 2.5 * y
    x[:, 1] -= 50.0 * y
    x[:, 3] += 400.0 * (y == 2)
    return x.astype(np.float32), y


def write_csv(path, x, y=None, cols=("a", "b", "c", "d")):
    with open(path, "w") as f:
        f.write(",".join(cols) + ("" if y is None else ",label") + "\n")
        for i, row in enumerate(x):
            f.write(",".join(repr(float(v)) for v in row))
            f.write("" if y is None else ",%s" % NAMES[y[i]])
            f.write("\n")


def forward(t, x):
    """The bundled MLP: dense layers with ReLU between, x @ W + b; softmax."""
    h = x.astype(np.float64)
    i = 1
    while "fc%d.weight" % i in t:
        h = h @ t["fc%d.weight" % i] + t["fc%d.bias" % i]
        if "fc%d.weight" % (i + 1) in t:
            h = np.maximum(h, 0)
        i += 1
    e = np.exp(h - h.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def read_lines(path):
    with open(path) as f:
        lines = f.read().splitlines()
    rows = [l.split(",") for l in lines[1:]]
    return lines[0], [r[0] for r in rows], np.array([[float(v) for v in r[1:]] for r in rows])


def refused(r, text):
    return r.returncode == 1 and text in r.stderr


def main():
    home = tempfile.mkdtemp(prefix="ferry-predict-")
    d = lambda name: os.path.join(home, name)  # noqa: E731
    rng = np.random.default_rng(7)
    xtr, ytr = make(rng, 1500)
    xte, yte = make(rng, 300)
    xnew, _ = make(rng, 40)
    write_csv(d("train.csv"), xtr, ytr)
    write_csv(d("test.csv"), xte, yte)
    write_csv(d("new.csv"), xnew)
    np.save(d("new.npy"), xnew)
    np.savez(d("new.npz"), x=xnew)
    np.save(d("wide.npy"), np.zeros((3, 5), np.float32))
    write_csv(d("narrow.csv"), xnew[:, :3], cols=("a", "b", "c"))
    saved, old = d("mlp.safetensors"), d("old.safetensors")
    try:
        r = ferry(home, "start", "2", "--base-port", "0", timeout=120)
        if r.returncode != 0:
            report(False, "a cluster of 2 starts", r.stderr)
            return
        r = ferry(home, "submit", MLP, "--data", d("train.csv"), "--test-data",
                  d("test.csv"), "--epochs", "4", "--save", saved, "--json", timeout=600)
        if r.returncode != 0:
            report(False, "the MLP trains on a CSV with string labels and saves", r.stderr)
            return
        acc = json.loads(r.stdout)["test_accuracy"]

        t, meta = read_safetensors(saved)
        shift = np.array(json.loads(meta.get("norm_shift", "[]")), np.float32)
        scale = np.array(json.loads(meta.get("norm_scale", "[]")), np.float32)
        x64 = xtr.astype(np.float64)
        ok = (meta.get("normalize") == "standard" and
              json.loads(meta.get("class_names", "[]")) == NAMES and
              json.loads(meta.get("input", "[]")) == [1, 1, 4] and meta.get("outputs") == "3"
              and shift.shape == (4,) and scale.shape == (4,))
        ok = ok and np.allclose(shift, x64.mean(0), rtol=1e-5) and \
            np.allclose(scale, 1 / x64.std(0), rtol=1e-5)
        report(ok, "--save keeps the normalisation numpy computes, the class names and "
               "the shape", repr(meta))

        want = forward(t, (xnew.astype(np.float64) - shift) * scale)
        want_names = [NAMES[i] for i in want.argmax(1)]
        for what, path, where in (("an unlabelled CSV", "new.csv", []),
                                  ("an unlabelled CSV", "new.csv", ["--local"]),
                                  ("an .npy of samples alone", "new.npy", ["--local"]),
                                  ("an .npz with x alone", "new.npz", ["--local"])):
            out = d("pred-%s%s.csv" % (path, "".join(where)))
            r = ferry(home, "predict", MLP, "--params", saved, "--data", d(path), "--out",
                      out, "--json", *where)
            ok, why = r.returncode == 0, r.stderr[-1500:]
            if ok:
                head, cls, p = read_lines(out)
                summary = json.loads(r.stdout)
                ok = (head == "class," + ",".join("p_" + n for n in NAMES) and
                      cls == want_names and p.shape == want.shape and
                      np.abs(p - want).max() < 2e-5 and summary["samples"] == 40 and
                      summary["labelled"] is False and "test_accuracy" not in summary)
                why = "%s\n%s\nmax |p - numpy| %g" % (head, cls[:5], np.abs(p - want).max()
                                                      if p.shape == want.shape else -1)
            report(ok, "predict %s %s: classes by name, numpy's probabilities" %
                   (what, "--local" if where else "on worker 0"), why)

        r = ferry(home, "predict", MLP, "--params", saved, "--data", d("test.csv"),
                  "--out", d("test-pred.csv"), "--json")
        got = json.loads(r.stdout).get("test_accuracy", -1) if r.returncode == 0 else -1
        report(abs(got - acc) < 1e-6, "predict on the run's test file reproduces its "
               "accuracy", "predict %s, the run %s\n%s" % (got, acc, r.stderr[-1500:]))

        r = ferry(home, "predict", MLP, "--params", saved, "--data", d("wide.npy"), "--local")
        report(refused(r, "wide.npy: samples of 1x1x5 (5 numbers), the model takes 1x1x4 "
                       "(4 numbers)"),
               "samples of another shape (an .npy) are refused with both shapes", r.stderr)
        r = ferry(home, "predict", MLP, "--params", saved, "--data", d("narrow.csv"))
        report(refused(r, "narrow.csv: samples of 1x1x2 (2 numbers), the model takes 1x1x4"),
               "a CSV of other columns is refused with both shapes", r.stderr)

        write_without_data_meta(saved, old)
        r = ferry(home, "predict", MLP, "--params", old, "--data", d("new.csv"), "--local")
        report(refused(r, "says nothing of the run's normalisation (an earlier ferry saved "
                       "it), so it predicts only on the run's own data, and %s is not it"
                       % d("new.csv")),
               "a file without the normalisation is refused on other data", r.stderr)
        r = ferry(home, "predict", MLP, "--params", old, "--data", d("train.csv"),
                  "--test-data", d("test.csv"), "--out", d("old-pred.csv"), "--json",
                  "--local")
        got = json.loads(r.stdout).get("test_accuracy", -1) if r.returncode == 0 else -1
        report(abs(got - acc) < 1e-6, "a file without the normalisation still predicts "
               "the run's own test set", "predict %s, the run %s\n%s"
               % (got, acc, r.stderr[-1500:]))

        r = ferry(home, "predict", MLP, "--params", saved, "--local")
        report(refused(r, "the run trained on a file of its own (%s: 1500 samples"
                       % d("train.csv")) and "name the samples to predict with --data"
               in r.stderr, "no --data for a run on a user's file is refused", r.stderr)
        split = d("split.safetensors")
        r = ferry(home, "submit", MLP, "--data", d("train.csv"), "--test-split", "0.2",
                  "--epochs", "2", "--save", split, "--json", timeout=600)
        run_acc = json.loads(r.stdout)["test_accuracy"] if r.returncode == 0 else -2
        r = ferry(home, "predict", MLP, "--params", split, "--data", d("train.csv"),
                  "--test-split", "0.2", "--out", d("split-pred.csv"), "--json")
        got = json.loads(r.stdout).get("test_accuracy", -1) if r.returncode == 0 else -1
        report(abs(got - run_acc) < 1e-6, "predict on the run's held-out split "
               "reproduces its accuracy", "predict %s, the run %s\n%s"
               % (got, run_acc, r.stderr[-1500:]))
        r = ferry(home, "predict", MLP, "--params", split, "--data", d("test.csv"),
                  "--test-split", "0.2", "--local")
        report(refused(r, "%s is not the data the parameters were trained on"
                       % d("test.csv")),
               "--test-split of data the run did not train on is refused", r.stderr)
    finally:
        ferry(home, "shutdown", timeout=120)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    run(TAP, 13, main)
