#!/usr/bin/env python3
"""tests/metrics — `ferry status --watch` under a pseudo-terminal: the
table is drawn and redrawn with each worker's training progress, `q`
ends it, and so does SIGINT, with the terminal's modes put back. TAP."""
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "params"))
from ptap import BUILD, FERRY, Tap, run  # noqa: E402  (the TAP lines tests/params prints)

TAP = Tap()
report = TAP.report
MLP = os.path.join(BUILD, "tasks", "mlp.so")
DATA = os.environ.get("FERRY_TEST_FMNIST", "/usr/share/datasets/fashion-mnist")


def cluster_env(prefix):
    """A new FERRY_HOME, the environment that names it, and `ferry` run there."""
    home = tempfile.mkdtemp(prefix=prefix)
    env = dict(os.environ, FERRY_HOME=home, OPENBLAS_NUM_THREADS="1", TERM="xterm")
    ferry = lambda *a: subprocess.run([FERRY, *a], env=env, capture_output=True,  # noqa: E731
                                      text=True, timeout=300)
    return home, env, ferry


def watch(env):
    """`ferry status --watch` on a new pseudo-terminal: (pid, fd)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(FERRY, [FERRY, "status", "--watch", "--interval", "0.2"], env)
    return pid, fd


def rows(text):
    """The workers' rows (ranks 0 and 1) of every table drawn."""
    return [l for l in text.splitlines() if l.split()[:1] in (["0"], ["1"])]


def read_until(fd, done, seconds):
    """What the terminal shows until done(text) (or the time is up)."""
    got, end = b"", time.time() + seconds
    while time.time() < end and not done(got.decode(errors="replace")):
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                got += os.read(fd, 65536)
            except OSError:
                break
    return got.decode(errors="replace")


def ended(pid, seconds):
    """The exit status once it has ended, or None."""
    end = time.time() + seconds
    while time.time() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def main():
    home, env, ferry = cluster_env("ferry-watch-")
    try:
        r = ferry("start", "2", "--base-port", "0")
        if r.returncode:
            report(False, "a cluster of 2 starts", r.stderr)
            return
        r = ferry("submit", MLP, "--epochs", "1", "--data", DATA, "-q")
        if r.returncode:
            report(False, "a sync run trains", r.stdout + r.stderr)
            return

        pid, fd = watch(env)
        shown = read_until(fd, lambda t: len(rows(t)) >= 4, 20)  # two tables at least
        drawn = rows(shown)
        report(shown.count("\x1b[2J") >= 2 and "q or Ctrl-C to quit" in shown and
               len(drawn) >= 4, "the table is drawn on the terminal and redrawn", shown)
        # ranks 0 and 1: ok, idle, 1 epoch of 469 steps (60,000 samples, a global
        # batch of 128 split between them)
        report(all(" ok " in l and " idle " in l and " 1 " in l and " 469 " in l
                   for l in drawn[:2]),
               "each worker's row: healthy, idle, its epoch and steps", "\n".join(drawn))
        during = termios.tcgetattr(fd)[3]
        report(not during & (termios.ICANON | termios.ECHO),
               "keys are read one at a time, not echoed", "lflag %#x" % during)
        os.write(fd, b"q")
        code = ended(pid, 10)
        after = termios.tcgetattr(fd)[3]
        report(code == 0 and after & termios.ICANON and after & termios.ECHO,
               "q ends it and puts the terminal's modes back",
               "exit %r lflag %#x" % (code, after))
        os.close(fd)

        pid, fd = watch(env)
        read_until(fd, lambda t: len(rows(t)) >= 2, 20)
        os.kill(pid, signal.SIGINT)
        code = ended(pid, 10)
        report(code == 0, "SIGINT ends it", "exit %r" % code)
        os.close(fd)
    finally:
        ferry("shutdown")
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    run(TAP, 5, main)
