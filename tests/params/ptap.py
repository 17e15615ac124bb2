"""tests/params — what its Python tests share: TAP lines, running the
ferry command in a test's own FERRY_HOME, and a safetensors file read by
the format alone (no ferry code)."""
import json
import os
import struct
import subprocess
import sys

import numpy as np

BUILD = os.environ["FERRY_TEST_BUILD"]
FERRY = os.path.join(BUILD, "ferry")


class Tap:
    """Numbered TAP lines; `failed` counts the "not ok" ones."""

    def __init__(self):
        self.run = 0
        self.failed = 0

    def report(self, ok, name, why=""):
        self.run += 1
        self.failed += not ok
        print(("ok" if ok else "not ok") + " %d - %s" % (self.run, name))
        if not ok:
            for line in why.splitlines():
                print("# " + line)
        sys.stdout.flush()


def ferry(home, *args, timeout=600):
    env = dict(os.environ, FERRY_HOME=home, OPENBLAS_NUM_THREADS="1")
    return subprocess.run([FERRY, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def read_safetensors(path):
    """The file's tensors (name -> array) and metadata, by the format alone."""
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", t
        lo, hi = t["data_offsets"]
        tensors[name] = np.frombuffer(b[base + lo:base + hi], dtype="<f4").reshape(t["shape"])
    return tensors, meta


def run(tap, plan, main):
    """Prints the plan, runs main(), and exits 1 when anything failed (a
    failure of the test itself is one more "not ok")."""
    print("1..%d" % plan)
    try:
        main()
    except Exception as e:
        tap.report(False, "the test ran to its end", repr(e))
    sys.exit(1 if tap.failed else 0)
