#!/usr/bin/env python3
"""tests/metrics — `ferry submit`'s progress bar: on a pseudo-terminal a
bar with the share done, samples/s and an ETA is drawn and redrawn on the
last line, with the epoch lines above it; into a pipe, the plain lines and
no bar. TAP."""
import os
import pty
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "params"))
from ptap import BUILD, FERRY, Tap, run  # noqa: E402  (the TAP lines tests/params prints)
from watch_test import cluster_env, read_until  # noqa: E402  (the watch test's helpers)

TAP = Tap()
report = TAP.report
MLP = os.path.join(BUILD, "tasks", "mlp.so")
DATA = os.environ.get("FERRY_TEST_FMNIST", "/usr/share/datasets/fashion-mnist")
ARGS = ["submit", MLP, "--epochs", "2", "--data", DATA, "-q"]


def on_terminal(env, seconds):
    """What `ferry submit` writes to a new pseudo-terminal, and its exit."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(FERRY, [FERRY, *ARGS], env)
    shown = read_until(fd, lambda text: False, seconds)  # until it closes the terminal
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return shown, os.waitstatus_to_exitcode(status)


def main():
    home, env, ferry = cluster_env("ferry-progress-")
    try:
        r = ferry("start", "2", "--base-port", "0")
        if r.returncode:
            report(False, "a cluster of 2 starts", r.stderr)
            return
        shown, code = on_terminal(env, 300)
        bars = [b for b in shown.split("\r\x1b[K") if b.startswith("epoch ") and "ETA" in b]
        report(code == 0 and len(bars) >= 3, "the bar is drawn and redrawn on a terminal",
               "exit %r, %d bars\n%r" % (code, len(bars), shown[-3000:]))
        timed = [b for b in bars if "samples/s" in b and "ETA --:--" not in b and
                 "- samples/s" not in b]
        report(any(" 50%" in b for b in timed) and "epoch 1/2  loss" in shown and
               "done: test_loss" in shown,
               "after an epoch it shows the rate and the time left, epoch lines above",
               "\n".join(bars[-5:]))
        r = ferry(*ARGS)
        report(r.returncode == 0 and "ETA" not in r.stdout and "\x1b" not in r.stdout and
               "epoch 2/2  loss" in r.stdout,
               "into a pipe the lines are plain and there is no bar", r.stdout + r.stderr)
    finally:
        ferry("shutdown")
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    run(TAP, 3, main)
