#!/usr/bin/env python3
"""TLS through the `ferry` command, on loopback only, TAP on stdout.

Certificates are made at test time by mkcerts.sh (openssl). One TLS cluster
of 2 workers (`ferry start 2 --tls-*`) runs for the whole file under its own
FERRY_HOME; the refusals are driven by `ferry start --config` files that
attach to one of its workers (or to an `openssl s_server` holding an
expired certificate, or to a plain-text cluster) with other TLS files.
Everything started here is stopped at the end, failures included.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

FERRY = os.environ["FERRY_TEST_BIN"]
TASKS = os.environ["FERRY_TEST_TASKS"]
HERE = os.path.dirname(os.path.abspath(__file__))
SANITIZER_WORDS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")

TMP = tempfile.mkdtemp(prefix="ferry-tls-")
CERTS = os.path.join(TMP, "certs")
HOME = os.path.join(TMP, "home")  # the TLS cluster's
PLAIN_HOME = os.path.join(TMP, "plain")  # a plain-text cluster's
started = []  # (home) of clusters to shut down; s_server processes
servers = []


def cert(name):
    return os.path.join(CERTS, name)


def tls_args(crt, key, ca):
    out = []
    if crt:
        out += ["--tls-cert", cert(crt), "--tls-key", cert(key)]
    if ca:
        out += ["--tls-ca", cert(ca)]
    return out


def ferry(args, home, timeout=120, check=False):
    env = dict(os.environ, FERRY_HOME=home)
    p = subprocess.run([FERRY] + args, env=env, capture_output=True, text=True,
                       timeout=timeout)
    for word in SANITIZER_WORDS:
        assert word not in p.stderr, f"ferry {args}: sanitizer report:\n{p.stderr}"
    if check:
        assert p.returncode == 0, f"ferry {args}: exit {p.returncode}\n{p.stderr}"
    return p


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def workers_of(home):
    with open(os.path.join(home, "cluster.ini")) as f:
        return [l.split("=", 1)[1].split(";")[0].strip() for l in f
                if l.startswith("worker")]


def attach_file(name, address, token_home):
    """A cluster file with one attached worker and the token of token_home."""
    path = os.path.join(TMP, name + ".ini")
    with open(path, "w") as f:
        f.write(f"[cluster]\ntoken_file = {token_home}/token\n"
                f"[workers]\nattach = {address}\n")
    return path


def start_attached(name, address, extra, token_home=HOME):
    """`ferry start --config` attached to `address`: expected to fail."""
    ini = attach_file(name, address, token_home)
    home = os.path.join(TMP, "h-" + name)
    p = ferry(["start", "--config", ini, "--timeout-ms", "3000"] + extra, home)
    if p.returncode == 0:  # it must not have come up; stop it if it did
        ferry(["shutdown"], home)
    return p


# ---- the tests ---------------------------------------------------------------

def test_a_tls_cluster_starts_trains_and_stops():
    p = ferry(["start", "2", "--base-port", "0"] +
              tls_args("server.pem", "server.key", "ca.pem"), HOME, check=True)
    started.append(HOME)
    assert "2 worker(s) ready" in p.stdout, p.stdout
    with open(os.path.join(HOME, "cluster.ini")) as f:
        ini = f.read()
    for key in ("tls_cert = ", "tls_key = ", "tls_ca = "):
        assert key in ini, ini
    # status and submit are not told again: the home's settings say TLS.
    p = ferry(["status", "--json"], HOME, check=True)
    assert '"running":true' in p.stdout.replace(" ", ""), p.stdout
    p = ferry(["submit", os.path.join(TASKS, "linreg.so"), "--epochs", "1", "--json"],
              HOME, timeout=300, check=True)
    run = json.loads(p.stdout.strip().splitlines()[-1])
    assert run["mode"] == "sync" and run["workers"] == 2, run
    assert run["params_identical"] is True, run
    # Async: the parameter shards' calls go worker to worker too.
    p = ferry(["submit", os.path.join(TASKS, "linreg.so"), "--epochs", "1", "--mode",
               "async", "--json"], HOME, timeout=300, check=True)
    run = json.loads(p.stdout.strip().splitlines()[-1])
    assert run["mode"] == "async" and run["workers"] == 2, run
    # A module's driver runs in a process of its own: it speaks TLS too.
    p = ferry(["submit", os.path.join(TASKS, "hello.so")], HOME, check=True)
    assert "rank 1" in p.stdout, p.stdout


def test_the_workers_speak_tls_with_the_certificate_given():
    # openssl's own client: the handshake (mutual) succeeds, TLS 1.2 or 1.3.
    host_port = workers_of(HOME)[0]
    p = subprocess.run(["openssl", "s_client", "-connect", host_port, "-CAfile",
                        cert("ca.pem"), "-cert", cert("client.pem"), "-key",
                        cert("client.key"), "-verify_return_error", "-brief"],
                       input="", capture_output=True, text=True, timeout=30)
    assert "Verification: OK" in p.stderr, p.stderr
    assert "Protocol version: TLSv1." in p.stderr, p.stderr


def test_a_wrong_ca_is_refused_by_name():
    p = start_attached("wrong-ca", workers_of(HOME)[0],
                       tls_args("other.pem", "other.key", "other-ca.pem"))
    assert p.returncode != 0
    assert "the worker's certificate is not signed by the CA given (--tls-ca)" in \
        p.stderr, p.stderr


def test_an_expired_worker_certificate_is_refused_by_name():
    port = free_port()
    s = subprocess.Popen(["openssl", "s_server", "-accept", f"127.0.0.1:{port}",
                          "-cert", cert("expired.pem"), "-key", cert("expired.key"),
                          "-quiet"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    servers.append(s)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            break
        except OSError:
            time.sleep(0.05)
    p = start_attached("expired-worker", f"127.0.0.1:{port}",
                       tls_args("client.pem", "client.key", "ca.pem"))
    assert p.returncode != 0
    assert "the worker's certificate has expired (valid until Jan  2 00:00:00 2020 GMT)" \
        in p.stderr, p.stderr


def test_an_expired_certificate_of_ones_own_is_refused_before_anything_starts():
    home = os.path.join(TMP, "h-expired-own")
    p = ferry(["start", "1", "--base-port", "0"] +
              tls_args("expired.pem", "expired.key", "ca.pem"), home)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "this certificate has expired (valid until Jan  2 00:00:00 2020 GMT)" in \
        p.stderr, p.stderr
    assert not os.path.exists(os.path.join(home, "cluster.ini"))
    w = subprocess.run([FERRY, "worker", "--listen", "127.0.0.1:0", "--token-file",
                        os.path.join(HOME, "token")] +
                       tls_args("expired.pem", "expired.key", "ca.pem"),
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, FERRY_HOME=home))
    assert w.returncode == 1, (w.returncode, w.stderr)
    assert "has expired" in w.stderr and "listening" not in w.stderr, w.stderr


def test_a_plain_text_client_is_told_the_worker_speaks_tls():
    p = start_attached("plain-client", workers_of(HOME)[0], [])
    assert p.returncode != 0
    assert "it likely speaks TLS and this client does not" in p.stderr, p.stderr


def test_mutual_tls_refuses_a_client_without_a_certificate():
    p = start_attached("no-client-cert", workers_of(HOME)[0],
                       tls_args(None, None, "ca.pem"))
    assert p.returncode != 0
    assert "asks for a client certificate (mutual TLS) and this client has none" in \
        p.stderr, p.stderr


def test_a_tls_client_is_told_a_plain_text_worker_does_not_speak_tls():
    ferry(["start", "1", "--base-port", "0"], PLAIN_HOME, check=True)
    started.append(PLAIN_HOME)
    p = start_attached("tls-client", workers_of(PLAIN_HOME)[0],
                       tls_args("client.pem", "client.key", "ca.pem"),
                       token_home=PLAIN_HOME)
    assert p.returncode != 0
    assert "the worker does not speak TLS; this client does" in p.stderr, p.stderr


def test_tls_still_needs_the_token():
    other = os.path.join(TMP, "other-token")
    os.makedirs(other, exist_ok=True)
    ferry(["start", "1", "--base-port", "0"], other, check=True)  # makes a token
    ferry(["shutdown"], other, check=True)
    p = start_attached("wrong-token", workers_of(HOME)[0],
                       tls_args("client.pem", "client.key", "ca.pem"), token_home=other)
    assert p.returncode != 0
    assert "UNAUTHENTICATED" in p.stderr, p.stderr


def test_plain_text_off_loopback_warns_unless_insecure():
    # 192.0.2.1 (TEST-NET-1) is no address of this host: the worker warns
    # as it starts, then cannot bind it. Nothing listens beyond loopback.
    home = os.path.join(TMP, "h-warn")
    base = [FERRY, "worker", "--listen", "192.0.2.1:0", "--token-file",
            os.path.join(HOME, "token")]
    env = dict(os.environ, FERRY_HOME=home)
    w = subprocess.run(base, capture_output=True, text=True, timeout=60, env=env)
    assert w.returncode != 0, w.stderr
    assert "warning: listening on 192.0.2.1 without TLS" in w.stderr, w.stderr
    q = subprocess.run(base + ["--insecure"], capture_output=True, text=True, timeout=60,
                       env=env)
    assert q.returncode == w.returncode, q.stderr
    assert "without TLS" not in q.stderr, q.stderr
    # `ferry start` says it too, before it finds that it cannot listen there.
    start = ["start", "1", "--listen", "192.0.2.1", "--base-port", str(free_port()),
             "--timeout-ms", "3000"]
    p = ferry(start, home)
    assert p.returncode != 0, p.stderr
    assert "warning: workers listen on 192.0.2.1 without TLS" in p.stderr, p.stderr
    q = ferry(start + ["--insecure"], home)
    assert q.returncode == p.returncode and "without TLS" not in q.stderr, q.stderr
    # Loopback, and TLS anywhere, are quiet: the cluster's workers said nothing.
    with open(os.path.join(HOME, "logs", "worker-0.log")) as f:
        assert "without TLS" not in f.read()
    with open(os.path.join(PLAIN_HOME, "logs", "worker-0.log")) as f:
        assert "without TLS" not in f.read()


def test_tls_options_that_contradict_are_usage_mistakes():
    home = os.path.join(TMP, "h-usage")
    p = ferry(["start", "1", "--tls-ca", cert("ca.pem")], home)
    assert p.returncode == 2 and "--tls-cert" in p.stderr, p.stderr
    p = ferry(["start", "1", "--insecure"] + tls_args("server.pem", "server.key", None),
              home)
    assert p.returncode == 2 and "contradict" in p.stderr, p.stderr
    p = ferry(["start", "1", "--tls-cert", cert("ca.key"), "--tls-key", cert("ca.key")],
              home)
    assert p.returncode == 2 and "not PEM" in p.stderr, p.stderr


def test_shutdown_under_tls_stops_the_cluster():
    p = ferry(["shutdown"], HOME, check=True)
    started.remove(HOME)
    assert "2 worker(s) stopped" in p.stdout, p.stdout
    p = ferry(["status"], HOME)
    assert "no cluster is running" in p.stderr, p.stderr
    # The workers and the supervisor wrote their sanitizer reports (in
    # sanitizer builds) to their logs.
    logs = os.path.join(HOME, "logs")
    for name in os.listdir(logs):
        with open(os.path.join(logs, name), errors="replace") as f:
            text = f.read()
        for word in SANITIZER_WORDS:
            assert word not in text, f"{name}: {word}:\n{text[-4000:]}"


TESTS = [v for k, v in list(globals().items()) if k.startswith("test_")]


def main():
    if not shutil.which("openssl"):
        print("1..0 # SKIP the openssl command is missing (Debian package openssl)")
        return 0
    subprocess.run(["sh", os.path.join(HERE, "mkcerts.sh"), CERTS], check=True)
    print(f"1..{len(TESTS)}", flush=True)
    failed = 0
    try:
        for i, t in enumerate(TESTS, 1):
            t0 = time.time()
            try:
                t()
                print(f"ok {i} - {t.__name__} ({time.time() - t0:.1f} s)", flush=True)
            except Exception:
                failed += 1
                print(f"not ok {i} - {t.__name__}", flush=True)
                for line in traceback.format_exc().splitlines():
                    print("# " + line, flush=True)
    finally:
        for s in servers:
            s.send_signal(signal.SIGTERM)
            s.wait(10)
        for home in started:
            ferry(["shutdown"], home)
        shutil.rmtree(TMP, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
