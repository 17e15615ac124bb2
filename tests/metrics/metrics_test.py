#!/usr/bin/env python3
"""tests/metrics — a cluster started with --metrics-port serves each
worker's figures on port P + rank; scraped with curl while a sync run
trains, every line parses as Prometheus' text format (prometheus_client's
own parser), the counters grow, and the training figures add up after
the run. TAP on stdout."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "params"))
from ptap import BUILD, FERRY, Tap, run  # noqa: E402  (the TAP lines tests/params prints)

TAP = Tap()
report = TAP.report
MLP = os.path.join(BUILD, "tasks", "mlp.so")
DATA = os.environ.get("FERRY_TEST_FMNIST", "/usr/share/datasets/fashion-mnist")


def free_ports(n):
    """n consecutive free ports on 127.0.0.1 (bound, then let go)."""
    for _ in range(50):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        base = s.getsockname()[1]
        s.close()
        if base + n > 65535:
            continue
        socks = []
        try:
            for i in range(n):
                t = socket.socket()
                t.bind(("127.0.0.1", base + i))
                socks.append(t)
            return base
        except OSError:
            continue
        finally:
            for t in socks:
                t.close()
    raise RuntimeError("no %d consecutive free ports" % n)


def scrape(port, path="/metrics"):
    r = subprocess.run(["curl", "-sS", "-w", "\n%{http_code}", "--max-time", "10",
                        "http://127.0.0.1:%d%s" % (port, path)],
                       capture_output=True, text=True, timeout=30)
    body, _, code = r.stdout.rpartition("\n")
    return int(code or 0), body


def families(text):
    """name -> (type, samples) by the reference parser, which raises on any
    line it cannot read."""
    return {f.name: (f.type, f.samples) for f in text_string_to_metric_families(text)}


def value(fams, name, sample, **labels):
    for s in fams[name][1]:
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


def main():
    home = tempfile.mkdtemp(prefix="ferry-metrics-")
    env = dict(os.environ, FERRY_HOME=home, OPENBLAS_NUM_THREADS="1")
    ferry = lambda *a, **k: subprocess.run([FERRY, *a], env=env, capture_output=True,  # noqa: E731
                                           text=True, timeout=k.get("timeout", 120))
    try:
        r = ferry("start", "2", "--base-port", "65535", "--metrics-port", "65535")
        report(r.returncode == 2 and "ports 65535..65536 do not fit" in r.stderr,
               "a metrics port whose workers' ports pass 65535 is refused", r.stderr)
        port = free_ports(2)
        r = ferry("start", "2", "--base-port", "0", "--metrics-port", str(port))
        if r.returncode:
            report(False, "a cluster of 2 starts with metrics", r.stderr)
            return
        train = subprocess.Popen([FERRY, "submit", MLP, "--epochs", "2", "--data", DATA,
                                  "-q"], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        texts, problems = [], []
        deadline = time.time() + 300
        while train.poll() is None and time.time() < deadline:
            for rank in (0, 1):
                code, body = scrape(port + rank)
                if code != 200:
                    problems.append("rank %d: HTTP %d" % (rank, code))
                texts.append((rank, body))
            time.sleep(0.5)
        out, _ = train.communicate(timeout=60)
        report(train.returncode == 0, "a sync run trains while it is scraped", out)
        parsed = []
        for rank, text in texts:
            try:
                parsed.append((rank, families(text)))
            except Exception as e:  # the parser's refusal of a line
                problems.append("rank %d: %r" % (rank, e))
        report(len(parsed) >= 4 and not problems,
               "every scrape during training parses as Prometheus text (%d of them)"
               % len(parsed), "\n".join(problems[:5]))
        want = {"ferry_rpc_calls": "counter", "ferry_rpc_call_seconds": "histogram",
                "ferry_rpc_received_bytes": "counter", "ferry_executor_slots": "gauge",
                "ferry_device_memory_bytes": "gauge", "ferry_train_steps": "counter",
                "ferry_train_samples_per_second": "gauge", "ferry_uptime_seconds": "gauge"}
        fams = parsed[-1][1] if parsed else {}
        got = {k: fams[k][0] for k in want if k in fams}
        report(got == want, "the families: calls, latency, bytes, slots, memory, training",
               "got %r" % got)

        chunks = [value(f, "ferry_rpc_calls", "ferry_rpc_calls_total",
                        method="/ferry.Worker/ReduceChunk", code="OK")
                  for rank, f in parsed if rank == 1]
        report(len(chunks) >= 2 and chunks[-1] > chunks[0] >= 0,
               "rank 1's all-reduce chunk calls grow while it trains", repr(chunks))

        code, body = scrape(port)
        f = families(body)
        epochs = value(f, "ferry_train_epochs", "ferry_train_epochs_total", rank="0")
        samples = value(f, "ferry_train_samples", "ferry_train_samples_total", rank="0")
        count = value(f, "ferry_rpc_call_seconds", "ferry_rpc_call_seconds_count",
                      method="/ferry.Worker/Call")
        calls = sum(s.value for s in f["ferry_rpc_calls"][1]
                    if s.labels.get("method") == "/ferry.Worker/Call")
        report(epochs == 2 and samples == 60000 and count == calls,
               "after the run: 2 epochs, rank 0's half of 2 x 60000 samples, a latency "
               "for every call", "epochs %r samples %r count %r calls %r"
               % (epochs, samples, count, calls))
        code, body = scrape(port, "/other")
        report(code == 404, "any other path is 404", "%d %s" % (code, body))
        ferry("shutdown")
        code, _ = scrape(port)
        report(code == 0, "nothing serves once the cluster is shut down", str(code))
    finally:
        ferry("shutdown")
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    run(TAP, 8, main)
