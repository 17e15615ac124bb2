#!/usr/bin/env python3
"""tests/gpu/tables.py on a small run of made-up lines, of each kind a GPU
machine's run brings back: the machine named from env.log, each ratio and
accuracy against its target (met, missed, or skipped with the reason),
graphs on against off, the scaling tables, and --check's exit status. TAP."""
import json
import os
import subprocess
import sys
import tempfile

TABLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tables.py")


def bench(metric, value, unit, **kw):
    return dict(bench="train", metric=metric, value=value, unit=unit, **kw)


GPU = [
    bench("samples_per_s", 400000.0, "samples/s", impl="ferry", model="mlp", batch=128,
          precision="fp32", epochs=5),
    bench("samples_per_s", 200000.0, "samples/s", impl="pytorch", model="mlp", batch=128,
          precision="fp32", epochs=5),
    bench("ferry_vs_pytorch_samples_per_s", 2.0, "ratio", impl="ferry", model="mlp",
          batch=128, precision="fp32", epochs=5, target_min=1.5),
    bench("test_accuracy", 0.8901, "fraction", impl="ferry", model="mlp", batch=128,
          precision="fp32", epochs=5, target_min=0.88),
    bench("ferry_vs_pytorch_samples_per_s", 1.1, "ratio", impl="ferry", model="resnet",
          batch=1024, precision="fp32", epochs=5, target_min=1.2),
    bench("ferry_vs_pytorch_amp_samples_per_s", None, "ratio", impl="ferry", model="cnn",
          batch=128, precision="bf16", epochs=5, target_min=1.2,
          skipped="no GPU visible: no CUDA device"),
]
TRAIN = [
    dict(model="resnet", graphs=1, accuracy_target_min=0.92, task="resnet", precision="tf32",
         workers=1, epochs=10, batch=128, test_accuracy=0.9251, samples_per_s=150000.0),
    dict(model="cnn", graphs=1, accuracy_target_min=0.90, task="cnn", precision="bf16",
         workers=1, epochs=5, batch=128, test_accuracy=0.8870, samples_per_s=90000.0),
    dict(model="cnn", graphs=1, task="cnn", precision="fp32", workers=1, epochs=5,
         batch=1024, test_accuracy=0.86, samples_per_s=300000.0),
    dict(model="resnet", graphs=0, task="resnet", precision="tf32", workers=1, epochs=10,
         batch=128, test_accuracy=0.9249, samples_per_s=50000.0),
]
SCALING = [
    bench("samples_per_s", 20000.0, "samples/s", impl="ferry", model="mlp", workers=1),
    bench("samples_per_s", 70000.0, "samples/s", impl="ferry", model="mlp", workers=4),
    bench("samples_per_s", 30000.0, "samples/s", impl="ddp", model="mlp", workers=4),
    bench("sync_speedup", 3.5, "ratio", workers=4, vs_workers=1, vs="ferry", target_min=3.2),
    dict(bench="allreduce", metric="busbw", value=1.5, unit="GB/s", impl="ferry", ranks=4,
         bytes=16 << 20),
    dict(bench="allreduce", metric="busbw", value=2.5, unit="GB/s", impl="mpi", ranks=4,
         bytes=16 << 20),
    dict(bench="allreduce", metric="ferry_over_mpi_busbw", value=0.6, unit="ratio",
         ranks=4, bytes=16 << 20, target_min=1.0),
]
ENV = "== 2026-11-28\ngpu: NVIDIA H200, 580.159.03, 143771 MiB\ncpu: Intel Xeon, 16 cores\n"

n = 0


def ok(cond, what, detail=""):
    global n
    n += 1
    print("%sok %d - %s" % ("" if cond else "not ", n, what))
    if not cond:
        print("  # " + detail.replace("\n", "\n  # "))


def run(*args):
    p = subprocess.run([sys.executable, TABLES] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def write(path, rows, noise=""):
    with open(path, "w") as f:
        f.write(noise)
        for r in rows:
            f.write(json.dumps(r) + "\n")


def row(out, *cells):
    """The first table row holding every cell."""
    for line in out.splitlines():
        if line.startswith("|") and all(c in line for c in cells):
            return line
    return ""


def main():
    print("1..14")
    d = tempfile.mkdtemp(prefix="ferry-tables-")
    env, gpu, train, scaling = (os.path.join(d, f) for f in
                                ("env.log", "bench.jsonl", "train.jsonl", "scaling.jsonl"))
    with open(env, "w") as f:
        f.write(ENV)
    write(gpu, GPU, noise="bench/train: not JSON\n{broken\n")
    write(train, TRAIN)
    write(scaling, SCALING)

    rc, out = run("--env", env, gpu, train, scaling)
    ok(rc == 0, "without --check a missed target is shown, not an error", out)
    ok("NVIDIA H200 (140 GiB, driver 580.159.03); Intel Xeon, 16 cores" in out,
       "the machine is named from env.log", out)
    ok(row(out, "| mlp | 128 | fp32 |", "400.0k", "200.0k", "2.00x", "≥ 1.5", "met"),
       "a ratio met, with both sides' samples/s", out)
    ok(row(out, "| resnet | 1024 | fp32 |", "1.10x", "≥ 1.2", "**missed**"),
       "a ratio missed", out)
    ok(row(out, "| cnn | 128 | bf16 |", "(AMP)", "skipped: no GPU visible"),
       "a skipped ratio keeps its reason", out)
    ok(row(out, "| mlp | fp32 | 0.8901 | ≥ 0.88 | met |"), "bench's accuracy target", out)
    ok(row(out, "| resnet | tf32 | 128 | 10 | 0.9251 | ≥ 0.92 | met |"),
       "a training run's accuracy against its target", out)
    ok(row(out, "| cnn | bf16 | 128 | 5 | 0.8870 | ≥ 0.9 | **missed** |"),
       "a training run's accuracy missed", out)
    ok(row(out, "| resnet | 128 | tf32 | 150.0k | 50.0k | 3.00x |"), "graphs on against off",
       out)
    ok(row(out, "| ferry | 20.0k |", "70.0k") and row(out, "| ddp | – |", "30.0k"),
       "samples/s by workers, ferry and DDP", out)
    ok(row(out, "| mpi, 4 ranks | 2.50 |") and "16 MiB" in out,
       "all-reduce bus bandwidth by ranks and size", out)
    ok(row(out, "ferry_over_mpi_busbw (ranks 4, bytes 16 MiB)", "0.600", "**missed**"),
       "a scaling target missed", out)

    rc, out = run("--train", "--check", train)
    ok(rc == 1 and "Scaling" not in out and "1 target(s) missed" in out,
       "--train --check: the training tables only, exit 1 for the CNN's miss", out)
    write(train, [r for r in TRAIN if r["model"] != "cnn" or r["batch"] != 128])
    rc, out = run("--train", "--check", train)
    ok(rc == 0, "--check exits 0 when every target was met", out)


if __name__ == "__main__":
    main()
