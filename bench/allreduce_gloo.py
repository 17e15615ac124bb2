#!/usr/bin/python3
"""bench/allreduce's gloo baseline: torch.distributed.all_reduce (SUM,
float32, in place) with the gloo backend over TCP loopback, timed the way
ferry's ranks are timed (bench/allreduce_plan.h) and printed in the same
JSON lines by rank 0.

  /usr/bin/python3 bench/allreduce_gloo.py --world N --plan BYTES:REPS:ITERS,...

starts N worker processes of this script (MASTER_ADDR=127.0.0.1, a free
MASTER_PORT, OMP_NUM_THREADS=1, torch.set_num_threads(1)) and waits for
them. For each buffer size: AR_WARMUP untimed all-reduces, then REPS
repetitions of ITERS all-reduces, each after a barrier; a repetition's time
is the slowest rank's, divided by ITERS. When torch cannot be imported or
has no gloo, prints one line {"skipped":"why"} and exits 3.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

WARMUP = 2  # AR_WARMUP in bench/allreduce_plan.h


def skip(why):
    print(json.dumps({"skipped": why}, separators=(",", ":")), flush=True)
    sys.exit(3)


def parse_plan(s):
    plan = []
    for part in s.split(","):
        b, r, i = (int(x) for x in part.split(":"))
        plan.append((b, r, i))
    return plan


def emit(metric, value, unit, params, lo, hi, reps):
    line = {"bench": "allreduce", "metric": metric, "value": round(value, 4),
            "unit": unit}
    line.update(params)
    line.update({"min": round(lo, 4), "max": round(hi, 4), "reps": reps})
    print(json.dumps(line, separators=(",", ":")), flush=True)


def report(world, nbytes, iters, secs, version):
    secs = sorted(secs)
    n = len(secs)
    med = secs[n // 2] if n % 2 else (secs[n // 2 - 1] + secs[n // 2]) / 2
    p = {"impl": "gloo", "ranks": world, "bytes": nbytes, "iters": iters,
         "torch": version}
    gb = nbytes / 1e9
    bus = 2.0 * (world - 1) / world
    emit("time_us", med * 1e6, "us", p, secs[0] * 1e6, secs[-1] * 1e6, n)
    emit("algbw", gb / med, "GB/s", p, gb / secs[-1], gb / secs[0], n)
    emit("busbw", gb / med * bus, "GB/s", p, gb / secs[-1] * bus, gb / secs[0] * bus, n)
    print("gloo     %d ranks %9d B: %10.1f us  busbw %6.3f GB/s"
          % (world, nbytes, med * 1e6, gb / med * bus), file=sys.stderr)


def worker(a):
    import torch
    import torch.distributed as dist
    from datetime import timedelta

    torch.set_num_threads(1)
    rank, world = a.rank, a.world
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=timedelta(seconds=a.timeout))
    plan = parse_plan(a.plan)
    biggest = max(b for b, _, _ in plan) // 4
    pattern = (torch.arange(biggest, dtype=torch.int64) % 7 + rank + 1).float()
    buf = torch.empty(biggest, dtype=torch.float32)
    slow = torch.zeros(1, dtype=torch.float64)

    def check(n, k):
        idx = list(range(0, n, 4099)) + [n - 1]
        once = world * (world + 1) / 2.0
        for i in idx:
            want = (once + world * (i % 7)) * world ** (k - 1)
            if float(buf[i]) != want:
                raise SystemExit("gloo rank %d: element %d of %d is %g, expected %g"
                                 % (rank, i, n, float(buf[i]), want))

    for nbytes, reps, iters in plan:
        n = nbytes // 4
        view = buf[:n]
        view.copy_(pattern[:n])
        for _ in range(WARMUP):
            dist.all_reduce(view)
        check(n, WARMUP)
        secs = []
        for _ in range(reps):
            view.copy_(pattern[:n])
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(view)
            slow[0] = (time.perf_counter() - t0) / iters
            check(n, iters)
            dist.all_reduce(slow, op=dist.ReduceOp.MAX)
            secs.append(float(slow[0]))
        if rank == 0:
            report(world, nbytes, iters, secs, torch.__version__)
    dist.barrier()
    dist.destroy_process_group()


def launch(a):
    try:
        import torch.distributed as dist
    except Exception as e:  # ImportError, or a broken install
        skip("%s cannot import torch.distributed: %s" % (sys.executable, e))
    if not dist.is_available() or not dist.is_gloo_available():
        skip("this torch has no gloo backend")
    with socket.socket() as s:  # a free port, handed to rank 0's store
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               WORLD_SIZE=str(a.world))
    procs = []
    for r in range(a.world):
        cmd = [sys.executable, os.path.abspath(__file__), "--rank", str(r), "--world",
               str(a.world), "--plan", a.plan, "--timeout", str(a.timeout)]
        procs.append(subprocess.Popen(cmd, env=dict(env, RANK=str(r))))
    codes = []
    try:
        for p in procs:
            codes.append(p.wait(timeout=a.timeout * 4))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    bad = [c for c in codes if c != 0]
    if bad or len(codes) != a.world:
        print("allreduce_gloo: worker exit codes %s" % codes, file=sys.stderr)
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--rank", type=int, default=-1, help="(internal) run as this rank")
    ap.add_argument("--timeout", type=int, default=60,
                    help="seconds a collective may wait for a peer")
    a = ap.parse_args()
    if a.rank >= 0:
        worker(a)
    else:
        launch(a)


if __name__ == "__main__":
    main()
