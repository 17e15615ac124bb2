#!/usr/bin/env python3
"""tests/dashboard — `ferry dashboard` in a real headless browser
(Debian's chromium): the page loads, its table shows every worker, and the
newest run's loss curve grows while the run trains (the page's DOM read at
two moments, the second also saved as a screenshot). TAP."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "params"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "metrics"))
from ptap import BUILD, FERRY, Tap, run  # noqa: E402  (the TAP lines tests/params prints)
from watch_test import cluster_env  # noqa: E402  (a FERRY_HOME of its own)

TAP = Tap()
report = TAP.report
MLP = os.path.join(BUILD, "tasks", "mlp.so")
DATA = os.environ.get("FERRY_TEST_FMNIST", "/usr/share/datasets/fashion-mnist")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def browse(url, profile, shot=None):
    """The page's DOM once its script has run for a few (virtual) seconds;
    with `shot`, a screenshot of it into that file."""
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--user-data-dir=" + profile, "--virtual-time-budget=4000",
            "--window-size=1200,900"]
    args += ["--screenshot=" + shot] if shot else ["--dump-dom"]
    r = subprocess.run(args + [url], capture_output=True, text=True, timeout=120)
    return r.stdout, r.returncode, r.stderr


def state(url):
    with urllib.request.urlopen(url + "state.json", timeout=10) as f:
        return json.load(f)


def recorded(url, what="points"):
    """The newest run's epochs (or loss curve's points) as the dashboard has them."""
    run_ = state(url).get("run") or {}
    return len(run_.get(what) or [])


def wait_for(cond, seconds):
    end = time.time() + seconds
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.5)
    return False


def loss_points(dom):
    m = re.search(r'<svg id="loss"[^>]*data-points="(\d+)"', dom)
    return int(m.group(1)) if m else -1


def ranks(dom):
    return sorted(set(int(r) for r in re.findall(r'<tr data-rank="(\d+)"', dom)))


def stop(p):
    if p and p.poll() is None:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main():
    home, env, ferry = cluster_env("ferry-dashboard-")
    profile = os.path.join(home, "chromium")
    board = train = None
    try:
        bad, none = ferry("dashboard", "--port", "70000"), ferry("dashboard")
        report(bad.returncode == 2 and "expected a port from 0 to 65535" in bad.stderr and
               none.returncode == 1 and none.stderr,
               "a port out of range, and no cluster to show, are refused",
               bad.stderr + none.stderr)
        r = ferry("start", "2", "--base-port", "0")
        if r.returncode:
            report(False, "a cluster of 2 starts", r.stderr)
            return
        board = subprocess.Popen([FERRY, "dashboard", "--port", "0"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = board.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:\d+/", line)
        report(m is not None, "the dashboard says where it serves", line)
        if not m:
            return
        url = m.group(0)
        # Far more epochs than the test waits for: it is stopped once seen.
        train = subprocess.Popen([FERRY, "submit", MLP, "--epochs", "100", "--data", DATA,
                                  "-q"], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        if not wait_for(lambda: recorded(url) >= 1, 240):
            report(False, "the run's first epoch is recorded", json.dumps(state(url)))
            return
        first, rc, err = browse(url, profile)
        n1 = loss_points(first)
        report(rc == 0 and ranks(first) == [0, 1] and "ferry dashboard" in first,
               "the page loads in chromium and shows both workers",
               "exit %d ranks %r\n%s\n%s" % (rc, ranks(first), err[-2000:], first[:3000]))
        grown = wait_for(lambda: recorded(url, "steps") > n1, 300)
        second, rc, err = browse(url, profile)
        n2 = loss_points(second)
        report(grown and rc == 0 and 0 < n1 < n2 and "100 epochs, running" in second,
               "the loss curve grows while the run trains",
               "points %d then %d (exit %d)\n%s" % (n1, n2, rc, err[-2000:]))
        shot = os.path.join(home, "dashboard.png")
        _, rc, err = browse(url, profile, shot)
        size = os.path.getsize(shot) if os.path.exists(shot) else 0
        with open(shot, "rb") if size else open(os.devnull, "rb") as f:
            magic = f.read(8)
        report(rc == 0 and magic == b"\x89PNG\r\n\x1a\n" and size > 10000,
               "a screenshot of the page is a PNG", "exit %d, %d bytes\n%s" % (rc, size, err))
        stop(board)
        report(board.returncode == 0, "Ctrl-C stops the dashboard",
               "exit %r: %s" % (board.returncode, board.stderr.read()))
    finally:
        stop(train)
        stop(board)
        ferry("shutdown")
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    run(TAP, 6, main)
