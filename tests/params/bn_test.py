#!/usr/bin/env python3
"""tests/params — batch normalisation's running statistics in a saved file,
printing TAP.

On a cluster of 2 local workers in sync mode (its own FERRY_HOME, free
ports), `ferry submit bn_cnn.so --save F` trains a small CNN with
BatchNorm2d and BatchNorm1d layers for an epoch, and then:

1. F holds each batch normalisation's running_mean, running_var and
   num_batches_tracked beside its weight and bias, under exactly the names
   of a torch.nn model's state_dict (num_batches_tracked in float32, where
   PyTorch's is int64).
2. The same model in PyTorch takes F with load_state_dict(strict=True)
   (dense weights transposed: ferry stores them [in][out]) and, in eval
   mode, gets the run's test accuracy within 0.1 point.
3. `ferry predict --local` with F reproduces the run's test accuracy: it
   normalises with the saved running statistics.
4. A file without one of the running statistics is refused, naming it.

Environment (meson sets it): FERRY_TEST_BUILD, FERRY_TEST_BN_MODULE;
optional FERRY_TEST_FMNIST (default /usr/share/datasets/fashion-mnist).
"""
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import params_test as common  # noqa: E402  (its readers and runners)
from ptap import run  # noqa: E402

MODULE = os.environ["FERRY_TEST_BN_MODULE"]
WANT = ["conv.weight", "conv.bias", "bn1.weight", "bn1.bias", "bn1.running_mean",
        "bn1.running_var", "bn1.num_batches_tracked", "fc1.weight", "fc1.bias",
        "bn2.weight", "bn2.bias", "bn2.running_mean", "bn2.running_var",
        "bn2.num_batches_tracked", "fc2.weight", "fc2.bias"]


def torch_model():
    import torch
    import torch.nn.functional as F

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 8, 3, padding=1)
            self.bn1 = torch.nn.BatchNorm2d(8)
            self.fc1 = torch.nn.Linear(8 * 14 * 14, 32)
            self.bn2 = torch.nn.BatchNorm1d(32)
            self.fc2 = torch.nn.Linear(32, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.bn1(self.conv(x))), 2)
            return self.fc2(F.relu(self.bn2(self.fc1(x.flatten(1)))))

    return Net()


def write_safetensors(path, tensors):
    """`tensors` (name -> float32 array) as safetensors, by the format alone."""
    header, blob = {}, b""
    for name, a in tensors.items():
        data = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)


def main():
    report = common.report
    home = tempfile.mkdtemp(prefix="ferry-bn-")
    saved = os.path.join(home, "bn.safetensors")
    try:
        r = common.ferry(home, "start", "2", "--base-port", "0", timeout=120)
        if r.returncode != 0:
            report(False, "a cluster of 2 starts", r.stderr)
            return
        run, _ = common.submit_json(home, MODULE, "--mode", "sync", "--epochs", "1",
                                    "--save", saved)
        acc = run["test_accuracy"]
        t, _ = common.read_safetensors(saved)
        report(sorted(t) == sorted(WANT),
               "the file holds the running statistics beside the parameters by "
               "state_dict name", repr(sorted(t)))
        ok = all(t[b + ".running_var"].shape == (n,) and t[b + ".running_mean"].shape ==
                 (n,) and t[b + ".num_batches_tracked"].shape == () and
                 t[b + ".num_batches_tracked"] > 0 and (t[b + ".running_var"] > 0).all()
                 for b, n in (("bn1", 8), ("bn2", 32)))
        report(ok, "their shapes are PyTorch's, num_batches_tracked a scalar that counted",
               repr({k: (v.shape, float(v.ravel()[0])) for k, v in t.items()
                     if "running" in k or "tracked" in k}))

        x, y = common.test_set()
        try:
            import torch
        except ImportError:
            torch = None
        if torch is None:
            report(True, "PyTorch's load_state_dict takes the file # SKIP no PyTorch")
        else:
            model = torch_model()
            state = {}
            for name, a in t.items():
                if name.startswith("fc") and name.endswith(".weight"):
                    a = a.T  # ferry's dense weights are [in][out]
                state[name] = torch.from_numpy(np.array(a))  # a writable copy
            keys = model.load_state_dict(state, strict=True)
            model.eval()
            with torch.no_grad():
                logits = model(torch.from_numpy(x.reshape(-1, 1, 28, 28)))
            t_acc = float((logits.argmax(1).numpy() == y).mean())
            report(not keys.missing_keys and not keys.unexpected_keys and
                   abs(t_acc - acc) <= 0.001,
                   "PyTorch's load_state_dict takes the file and gets the run's test "
                   "accuracy in eval mode",
                   "torch %.4f, the run %.4f, %r" % (t_acc, acc, keys))

        r = common.ferry(home, "predict", MODULE, "--params", saved, "--local", "--json",
                         "--out", os.path.join(home, "pred.csv"))
        got = json.loads(r.stdout).get("test_accuracy", -1) if r.returncode == 0 else -1
        report(abs(got - acc) <= 0.001,
               "predict --local normalises with the saved statistics: the run's accuracy",
               "exit %d, accuracy %s vs the run's %.4f\n%s" %
               (r.returncode, got, acc, r.stderr[-1500:]))

        stripped = os.path.join(home, "stripped.safetensors")
        write_safetensors(stripped, {k: v for k, v in t.items()
                                     if k != "bn2.running_var"})
        r = common.ferry(home, "predict", MODULE, "--params", stripped, "--local")
        report(r.returncode == 1 and
               "they have no tensor 'bn2.running_var' (the model's is 32)" in r.stderr,
               "a file without a running statistic is refused, naming it",
               "exit %d\n%s" % (r.returncode, r.stderr[-1500:]))
    finally:
        common.ferry(home, "shutdown", timeout=120)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    run(common.TAP, 5, main)
