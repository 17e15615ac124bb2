#!/usr/bin/env python3
"""tests/shipdata — `ferry submit --ship-data`: a data file goes to the
workers in chunks under the cluster's message limit and the run trains on
their copies; a second run sends nothing; a worker that lost its copy alone
gets it again; --ship-data without a data file is refused. TAP."""
import glob
import os
import re
import shutil
import socket
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "params"))
from ptap import BUILD, Tap, ferry, run  # noqa: E402

TAP = Tap()
report = TAP.report
MLP = os.path.join(BUILD, "tasks", "mlp.so")


def main():
    home = tempfile.mkdtemp(prefix="ferry-ship-")
    try:
        data = os.path.join(home, "blobs.npz")
        rng = np.random.default_rng(3)
        x = rng.normal(size=(40000, 16)).astype("f4")
        np.savez(data, x=x, y=(x[:, 0] + x[:, 1] > 0).astype("i8"))
        conf = os.path.join(home, "cluster.ini")
        ports = []
        for _ in range(2):
            with socket.socket() as so:
                so.bind(("127.0.0.1", 0))
                ports.append(so.getsockname()[1])
        with open(conf, "w") as f:
            f.write("[cluster]\nmax_message_bytes = 4194304\n\n[workers]\n" +
                    "".join("worker = 127.0.0.1:%d\n" % p for p in ports))
        r = ferry(home, "start", "--config", conf)
        report(r.returncode == 0, "a cluster of 2 whose messages are at most 4 MiB starts",
               r.stderr)
        train = ["submit", MLP, "--data", data, "--ship-data", "--epochs", "1"]
        r = ferry(home, *train)
        report(r.returncode == 0 and re.search(r"shipped blobs\.npz \(\d+\.\d MiB\) to 2 of 2 workers", r.stderr)
               and "done:" in r.stdout,
               "the file goes to both workers in chunks and the run trains on their copies",
               r.stdout[-1500:] + r.stderr[-1500:])
        copies = glob.glob(os.path.join(home, "workers", "*", "data", "*", "blobs.npz"))
        same = all(open(c, "rb").read() == open(data, "rb").read() for c in copies)
        report(len(copies) == 2 and same, "each worker keeps the same bytes under its digest",
               "%s" % copies)
        r = ferry(home, *train)
        report(r.returncode == 0 and "shipped" not in r.stderr and "done:" in r.stdout,
               "a second run sends nothing", r.stderr[-1500:])
        shutil.rmtree(os.path.dirname(copies[1]))
        r = ferry(home, *train)
        report(r.returncode == 0 and "to 1 of 2 workers" in r.stderr,
               "a worker that lost its copy alone gets it again", r.stderr[-1500:])
        r = ferry(home, "submit", MLP, "--data", data, "--test-data", data,
                  "--ship-data", "--epochs", "1")
        report(r.returncode == 0 and "shipped" not in r.stderr,
               "--test-data naming the same file ships nothing twice",
               r.stderr[-1500:])
        r = ferry(home, "submit", MLP, "--ship-data", "--epochs", "1")
        report(r.returncode == 2 and "--ship-data sends what --data" in r.stderr,
               "--ship-data without a data file is refused", r.stderr[-1500:])
    finally:
        ferry(home, "shutdown")
        shutil.rmtree(home, ignore_errors=True)


run(TAP, 7, main)
