#!/usr/bin/env python3
"""tests/rendezvous — workers started as an engine starts them (`ferry
worker --from-env`, ranks in any order, each with its own state and no
cluster in FERRY_HOME) meet at rank 0, and `status`, `submit` and
`shutdown --rendezvous` find them there: a world that completes late is
waited for, a contradicting rank is refused, a worker that keeps no world
says so, and a wrong token is refused. TAP."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "params"))
from ptap import BUILD, FERRY, Tap, run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TAP = Tap()
report = TAP.report
HELLO = os.path.join(BUILD, "tasks", "hello.so")


def free_ports(n):
    """n distinct free loopback ports, held until all are found."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class World:
    """Workers of one launcher's world, each started as the engine would."""

    def __init__(self, home, size, token):
        self.home, self.size, self.token = home, size, token
        self.ports = free_ports(size)
        self.rendezvous = "127.0.0.1:%d" % self.ports[0]
        self.procs = {}

    def start(self, rank, world_size=None, extra=()):
        env = dict(os.environ, FERRY_RANK=str(rank),
                   FERRY_WORLD_SIZE=str(world_size or self.size),
                   FERRY_RENDEZVOUS=self.rendezvous, OPENBLAS_NUM_THREADS="1")
        env.pop("FERRY_HOME", None)
        log = open(os.path.join(self.home, "worker-%d.log" % rank), "w")
        self.procs[rank] = subprocess.Popen(
            [FERRY, "worker", "--from-env", "--listen", "127.0.0.1:%d" % self.ports[rank],
             "--token-file", self.token,
             "--state-dir", os.path.join(self.home, "state-%d" % rank), *extra],
            env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def log(self, rank):
        with open(os.path.join(self.home, "worker-%d.log" % rank)) as f:
            return f.read()

    def wait_log(self, rank, text, seconds=30):
        end = time.time() + seconds
        while time.time() < end:
            if text in self.log(rank):
                return True
            time.sleep(0.1)
        return False

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def ferry(home, *args, timeout=300):
    """A command run from a FERRY_HOME that holds no cluster (a driver pod)."""
    env = dict(os.environ, FERRY_HOME=os.path.join(home, "driver"),
               OPENBLAS_NUM_THREADS="1")
    return subprocess.run([FERRY, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def make_token(home, name="token"):
    path = os.path.join(home, name)
    with open(path, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    os.chmod(path, 0o600)
    return path


def late_world(home):
    """Ranks started last to first: status waits for the late ones, then
    lists the world in rank order; submit trains on it; shutdown ends it."""
    w = World(home, 3, make_token(home))
    try:
        w.start(2)
        w.start(0)
        w.wait_log(2, "joined the rendezvous")
        remote = ["--rendezvous", w.rendezvous, "--token-file", w.token]
        status = subprocess.Popen([FERRY, "status", *remote],
                                  env=dict(os.environ, FERRY_HOME=os.path.join(home, "d")),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        w.start(1)
        out, err = status.communicate(timeout=60)
        ranks = [l.split()[:2] for l in out.splitlines()[1:]]
        want = [[str(r), "127.0.0.1:%d" % w.ports[r]] for r in range(3)]
        report(status.returncode == 0 and ranks == want and
               "waiting for rank 1 of 3 to join the rendezvous" in err,
               "status waits for a late rank, then lists the world in rank order",
               "status %d\n%s\n%s" % (status.returncode, out, err))
        report(w.wait_log(1, "joined the rendezvous at " + w.rendezvous) and
               w.wait_log(2, "joined the rendezvous at " + w.rendezvous),
               "each rank past 0 says it joined", w.log(1) + w.log(2))
        r = ferry(home, "submit", HELLO, *remote)
        pids = [l.split()[3] for l in r.stdout.splitlines() if l.startswith("rank ")]
        report(r.returncode == 0 and pids == [str(w.procs[k].pid) for k in range(3)],
               "submit runs a task on every rank of the world it found through rank 0",
               r.stdout[-2000:] + r.stderr[-2000:])
        r = ferry(home, "shutdown", *remote)
        codes = [w.procs[k].wait(30) for k in range(3)]
        report(r.returncode == 0 and codes == [0, 0, 0] and
               "3 worker(s) stopped (the world of the rendezvous" in r.stdout,
               "shutdown --rendezvous stops every worker of the world",
               "%s %s %s %s" % (r.returncode, codes, r.stdout, r.stderr))
    finally:
        w.stop()


def refusals(home):
    """A rank whose world size contradicts rank 0's exits naming both; a
    worker that keeps no world and a wrong token are refused clearly."""
    w = World(home, 2, make_token(home))
    try:
        w.start(0)
        w.start(1, world_size=3)
        code = w.procs[1].wait(60)
        report(code == 1 and "rank 1 says the world has 3 ranks; rank 0 says 2" in w.log(1),
               "a rank whose world contradicts rank 0's exits, naming both", w.log(1))
        w.start(1)
        w.wait_log(1, "listening on")
        r = ferry(home, "status", "--rendezvous", "127.0.0.1:%d" % w.ports[1],
                  "--token-file", w.token, timeout=60)
        report(r.returncode != 0 and "keeps no world" in r.stderr,
               "asking a worker that is not rank 0 says it keeps no world", r.stderr)
        bad = make_token(home, "other-token")
        r = ferry(home, "status", "--rendezvous", w.rendezvous, "--token-file", bad,
                  timeout=60)
        report(r.returncode != 0 and "token" in r.stderr.lower(),
               "a wrong token is refused", r.stderr)
        r = ferry(home, "status", "--token-file", bad)
        report(r.returncode == 2 and "--token-file and --tls-* go with --rendezvous" in
               r.stderr, "--token-file alone is a usage mistake", r.stderr)
    finally:
        w.stop()


def over_tls(home):
    """A world whose workers speak TLS: the command finds it through rank 0
    with the same certificates, and is refused without them."""
    certs = os.path.join(home, "certs")
    subprocess.run(["sh", os.path.join(HERE, "..", "tls", "mkcerts.sh"), certs], check=True,
                   stdout=subprocess.DEVNULL)
    tls = ["--tls-cert", os.path.join(certs, "server.pem"), "--tls-key",
           os.path.join(certs, "server.key"), "--tls-ca", os.path.join(certs, "ca.pem")]
    w = World(os.path.join(home, "tls"), 2, None)
    os.makedirs(w.home)
    w.token = make_token(w.home)
    try:
        w.start(1, extra=tls)
        w.start(0, extra=tls)
        remote = ["--rendezvous", w.rendezvous, "--token-file", w.token]
        r = ferry(home, "status", *remote, *tls, timeout=120)
        report(r.returncode == 0 and len(r.stdout.splitlines()) == 3,
               "a world that speaks TLS is found through rank 0 with its certificates",
               r.stdout + r.stderr)
        r = ferry(home, "status", *remote, timeout=120)
        report(r.returncode != 0 and "TLS" in r.stderr,
               "without them it is refused, saying the worker speaks TLS", r.stderr[-1500:])
        r = ferry(home, "shutdown", *remote, *tls, timeout=120)
        report(r.returncode == 0 and [w.procs[k].wait(30) for k in range(2)] == [0, 0],
               "and stopped the same way", r.stdout + r.stderr)
    finally:
        w.stop()


def main():
    home = tempfile.mkdtemp(prefix="ferry-rdv-")
    try:
        late_world(home)
        refusals(home)
        over_tls(home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


run(TAP, 11, main)
