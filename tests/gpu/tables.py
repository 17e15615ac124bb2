#!/usr/bin/env python3
"""The README's GPU and scaling tables, in markdown, from the JSON lines a
GPU machine's run brings back (tests/gpu/device.sh): bench/train --device
cuda's lines (ferry against PyTorch on the same GPU), run.sh's training
lines (`ferry submit --json`, tagged with the model and whether steps ran
as CUDA graphs) and scaling.sh's lines (bench/train --sync, bench/allreduce).
Each ratio and accuracy is shown against its target, met or missed.

  tests/gpu/tables.py [--env ENV.log] [--train] [--check] FILE.jsonl...

--env names the machine from the run's env.log (nvidia-smi's line, the
cores); --train prints only the training tables (run.sh's summary);
--check exits 1 when a target shown was missed. Lines that are not JSON
are ignored, so whole logs may be passed.
"""
import argparse
import json
import re
import sys


def read_lines(paths):
    out = []
    for path in paths:
        try:
            f = open(path, encoding="utf-8", errors="replace")
        except OSError as e:
            print("tables.py: %s" % e, file=sys.stderr)
            continue
        with f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    return out


def machine(env_path):
    """One line naming the GPU and the cores, from device.sh's env.log (its
    gpu: and cpu: lines) or run.sh's (nvidia-smi's CSV line)."""
    if not env_path:
        return None
    try:
        text = open(env_path, encoding="utf-8", errors="replace").read()
    except OSError:
        return None
    gpu = cpu = None
    for line in text.splitlines():
        if line.startswith("gpu:"):
            gpu = line[4:].strip()
        elif line.startswith("cpu:"):
            cpu = line[4:].strip()
        elif gpu is None and re.match(r"^[^,]+, [0-9.]+, [0-9]+ MiB$", line):
            gpu = line.strip()
    if gpu:
        m = re.match(r"^([^,]+), ([0-9.]+), ([0-9]+) MiB$", gpu)
        if m:
            gpu = "%s (%d GiB, driver %s)" % (m.group(1), int(m.group(3)) // 1024,
                                               m.group(2))
    parts = [p for p in (gpu, cpu) if p]
    return "; ".join(parts) if parts else None


def rate(v):
    if v is None:
        return "–"
    return "%.1fk" % (v / 1e3) if v < 1e6 else "%.2fM" % (v / 1e6)


class Verdicts:
    """Targets met and missed, for --check."""

    def __init__(self):
        self.missed = 0

    def judge(self, value, line):
        lo, hi = line.get("target_min"), line.get("target_max")
        if value is None or (lo is None and hi is None):
            return ""
        ok = (lo is None or value >= lo) and (hi is None or value <= hi)
        self.missed += not ok
        return "met" if ok else "**missed**"


def target_text(line):
    if line.get("target_min") is not None:
        return "≥ %g" % line["target_min"]
    if line.get("target_max") is not None:
        return "≤ %g" % line["target_max"]
    return ""


def value(line):
    v = line.get("value")
    return v if isinstance(v, (int, float)) else None


def gpu_table(lines, v):
    """bench/train --device cuda: a row a model, batch and precision."""
    ratios = [l for l in lines if l.get("bench") == "train"
              and str(l.get("metric", "")).startswith("ferry_vs_pytorch")]
    if not ratios:
        return []
    rates = {}
    for l in lines:
        if l.get("bench") == "train" and l.get("metric") == "samples_per_s" \
                and "workers" not in l:
            rates[(l.get("impl"), l.get("model"), l.get("batch"), l.get("precision"))] = value(l)
    accuracy = {}
    for l in lines:
        if l.get("bench") == "train" and l.get("metric") == "test_accuracy" \
                and l.get("impl") == "ferry":
            accuracy[(l.get("model"), l.get("batch"), l.get("precision"))] = l
    out = ["| model | batch | precision | ferry | PyTorch | ferry / PyTorch | target | |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for l in ratios:
        key = (l.get("model"), l.get("batch"), l.get("precision"))
        amp = l["metric"].startswith("ferry_vs_pytorch_amp")
        torch = rates.get(("pytorch_amp" if amp else "pytorch",) + key)
        if l.get("skipped"):
            verdict, ratio = "skipped: %s" % l["skipped"][:80], "–"
        else:
            verdict, ratio = v.judge(value(l), l), "%.2fx" % value(l)
        out.append("| %s | %s | %s | %s | %s%s | %s | %s | %s |" % (
            key[0], key[1], key[2], rate(rates.get(("ferry",) + key)), rate(torch),
            " (AMP)" if amp else "", ratio, target_text(l), verdict))
    acc = [a for a in accuracy.values() if value(a) is not None]
    if acc:
        out.append("")
        out.append("| model | precision | test accuracy, %s epochs at batch 128 | target | |"
                   % acc[0].get("epochs", "?"))
        out.append("| --- | --- | --- | --- | --- |")
        for a in acc:
            out.append("| %s | %s | %.4f | %s | %s |" % (
                a.get("model"), a.get("precision"), value(a), target_text(a),
                v.judge(value(a), a)))
    return out


def train_tables(lines, v):
    """run.sh's `ferry submit --json` lines: accuracy against the targets,
    samples/s, and graphs on against off."""
    runs = [l for l in lines if "graphs" in l and "test_accuracy" in l and "model" in l]
    if not runs:
        return []
    out = ["| model | precision | batch | epochs | test accuracy | target | | samples/s |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        if r["graphs"] != 1:
            continue
        t = {"target_min": r.get("accuracy_target_min")}
        out.append("| %s | %s | %s | %s | %.4f | %s | %s | %s |" % (
            r["model"], r.get("precision", "?"), r.get("batch", "?"), r.get("epochs", "?"),
            r["test_accuracy"], target_text(t), v.judge(r["test_accuracy"], t),
            rate(r.get("samples_per_s"))))
    by = {(r["model"], r.get("batch"), r.get("precision"), r["graphs"]): r for r in runs}
    pairs = [(k, by[k[:3] + (0,)]) for k in by if k[3] == 1 and k[:3] + (0,) in by]
    if pairs:
        out += ["", "| model | batch | precision | graphs on | graphs off | on / off |",
                "| --- | --- | --- | --- | --- | --- |"]
        for k, off in pairs:
            on = by[k].get("samples_per_s")
            o = off.get("samples_per_s")
            out.append("| %s | %s | %s | %s | %s | %s |" % (
                k[0], k[1], k[2], rate(on), rate(o),
                "%.2fx" % (on / o) if on and o else "–"))
    return out


def scaling_tables(lines, v):
    """scaling.sh's lines: samples/s by workers (ferry sync, DDP), all-reduce
    bus bandwidth by ranks and size, and every ratio with its target."""
    out = []
    sync = [l for l in lines if l.get("metric") == "samples_per_s" and "workers" in l
            and value(l) is not None]
    if sync:
        impls = sorted({l.get("impl", "?") for l in sync})
        counts = sorted({l["workers"] for l in sync})
        cell = {(l.get("impl", "?"), l["workers"]): value(l) for l in sync}
        out += ["| samples/s | " + " | ".join("%d" % w for w in counts) + " |",
                "| --- |" + " --- |" * len(counts)]
        for i in impls:
            out.append("| %s | " % i + " | ".join(rate(cell.get((i, w))) for w in counts)
                       + " |")
    bus = [l for l in lines if l.get("bench") == "allreduce" and l.get("metric") == "busbw"
           and value(l) is not None and "bytes" in l]
    if bus:
        sizes = sorted({l["bytes"] for l in bus})
        rows = sorted({(l.get("ranks", 0), l.get("impl", "?")) for l in bus})
        cell = {(l.get("ranks", 0), l.get("impl", "?"), l["bytes"]): value(l) for l in bus}
        out += ["", "| all-reduce, GB/s | " + " | ".join(size(s) for s in sizes) + " |",
                "| --- |" + " --- |" * len(sizes)]
        for rk, i in rows:
            out.append("| %s, %d ranks | " % (i, rk) + " | ".join(
                "%.2f" % cell[(rk, i, s)] if (rk, i, s) in cell else "–" for s in sizes) + " |")
    goals = [l for l in lines if ("target_min" in l or "target_max" in l)
             and (l.get("bench") != "train" or "workers" in l)]
    if goals:
        out += ["", "| figure | value | target | |", "| --- | --- | --- | --- |"]
        for l in goals:
            what = l.get("metric", "?")
            extra = ", ".join("%s %s" % (k, size(l[k]) if k == "bytes" else l[k])
                              for k in ("workers", "vs_workers", "vs", "ranks", "bytes")
                              if k in l)
            if extra:
                what += " (%s)" % extra
            if l.get("skipped"):
                out.append("| %s | – | %s | skipped: %s |" % (what, target_text(l),
                                                                l["skipped"][:80]))
            else:
                out.append("| %s | %.3f | %s | %s |" % (what, value(l) or float("nan"),
                                                        target_text(l), v.judge(value(l), l)))
    return out


def size(b):
    b = int(b)
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return "%d %s" % (b // n, unit)
    return "%d B" % b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", help="the run's env.log: names the machine")
    ap.add_argument("--train", action="store_true", help="the training tables only")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target was missed")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    lines = read_lines(a.files)
    v = Verdicts()
    name = machine(a.env)
    sections = [("Training through `ferry start 1 --device cuda`", train_tables(lines, v))]
    if not a.train:
        # The sync lines of scaling.sh are bench "train" too: kept apart by
        # their "workers".
        gpu = [l for l in lines if "workers" not in l]
        sections = [("ferry against PyTorch eager on the same GPU", gpu_table(gpu, v))] + \
            sections + [("Scaling on CPU workers", scaling_tables(
                [l for l in lines if "graphs" not in l], v))]
    printed = False
    for title, rows in sections:
        if not rows:
            continue
        print("**%s**%s\n" % (title, " (%s)" % name if name else ""))
        print("\n".join(rows))
        print()
        printed = True
    if not printed:
        print("tables.py: no lines with figures in %s" % ", ".join(a.files))
    if a.check and v.missed:
        print("tables.py: %d target(s) missed" % v.missed)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
