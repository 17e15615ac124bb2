#!/usr/bin/env python3
"""tests/readme — README.md as a test, printing TAP.

What it checks:

- Every shell block (```sh) runs, in the README's order, as one bash script
  per block with `set -e`, in a fresh FERRY_HOME and a fresh working
  directory shared by all blocks; a block fails on a non-zero exit or when
  a line its commands promise (PROMISES below) is missing from its output.
  A block whose first line is "# skipped by tests/readme: REASON" is
  skipped with that reason; setup commands (bash .ci/install-deps, meson
  setup/compile/test) are dropped from a block, since the test runs inside
  the build it was built in, and a line left empty is skipped.
- What a block runs is adapted, never its meaning: `build/` is this build
  tree; `export FERRY_HOME=...` is the test's own; `ferry start N` without
  a port gets `--base-port B` and every 127.0.0.1:71NN (and
  `--metrics-port 71NN`) becomes B+NN, where
  B is the first of eight free ports the test found (so it never meets
  another cluster on 7100..); `--epochs N` becomes `--epochs 1` and a
  training that names none gets it; trainings on Fashion-MNIST get
  `--data` with a cut of it (4,096 training and 1,024 test samples).
  `pkg-config ... ferry` finds this build tree's ferry.pc.
- Every C block (```c) builds as c_blocks.py says (compiled with -Wall
  -Wextra -Werror against the build tree's ferry.pc, a module linked as
  one); one that begins with a comment naming a file ("/* demo.c */") is
  written there for the shell blocks after it.
- Every error message the README quotes (an inline code span of three or
  more words that is not a command, or a ("double-quoted") sentence) is in
  QUOTES with the test that produces it, and that test exists and checks
  the quote's fragment: a new quote without a test fails here.
- README.md and every `--help` text speak to users: no issue numbers or
  talk of work in progress (BANNED).

Environment (meson sets it): FERRY_TEST_SOURCE, FERRY_TEST_BUILD,
FERRY_TEST_PKGCONFIG (the build's meson-uninstalled directory); optional
FERRY_TEST_FMNIST (default /usr/share/datasets/fashion-mnist).
"""
import gzip
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from c_blocks import blocks, build  # noqa: E402

SRC = os.environ["FERRY_TEST_SOURCE"]
BUILD = os.environ["FERRY_TEST_BUILD"]
PCDIR = os.environ["FERRY_TEST_PKGCONFIG"]
FMNIST = os.environ.get("FERRY_TEST_FMNIST", "/usr/share/datasets/fashion-mnist")
BLOCK_TIMEOUT_S = 900

SKIP_MARK = "# skipped by tests/readme:"
SETUP = re.compile(r"^\s*(bash \.ci/install-deps|meson (setup|compile|test))\b")

# Output a block must contain when one of its commands matches: what the
# README says that command prints or does.
PROMISES = [
    (r"ferry start \d+", [r"\d+ worker\(s\) ready"]),
    (r"ferry start --config", [r"2 worker\(s\) ready"]),
    # The DEVICE column whole: the BLAS version and thread count come last.
    (r"ferry status\s*$", [r"RANK +ADDRESS", r"OpenBLAS \d+\.\d+\.\d+ \(\d+ threads?\)"]),
    (r"ferry status --json", [r'"running":true']),
    (r"hello\.so", [r"rank 3  pid \d+  host \S+  device cpu"]),
    (r"matmul\.so -- 256 16", [r"16 calls on 4 workers, 16 verified, 0 failed"]),
    (r"sleep\.so -- \d+ &", [r"slots 1/4 busy \(oldest: Call sleep\.so sleep, \d+ s\)",
                             r"slept \d+ ms on 4 workers at once"]),
    (r"ferry shutdown", [r"\d+ worker\(s\) stopped"]),
    (r"mlp\.so --mode sync --epochs",
     [r"epoch 1/1 .*test_accuracy 0\.\d+ .*all-reduce \d+% of a step"]),
    (r"submit .*--json", [r'"params_sha256":"[0-9a-f]{64}"']),
    (r"linreg\.so", [r"epoch 1/1 .*test_mse \d\S* +weight_error \d"]),
    (r"--mode async", [r"pushes \d+  staleness \d+/\d+/\d+"]),
    (r"--mode single", [r"training mlp on worker 0"]),
    (r"demo\.so -- 1\.5", [r"worker 1: 2\.5 squared is 6\.25"]),
    (r"softmax\.so", [r"training softmax in sync mode on 2 workers",
                      r"done: test_loss \S+  test_accuracy 0\.\d+"]),
]

# The error messages the README quotes (the start of each, whitespace
# collapsed), each with the test that produces it and a fragment that test
# checks: (quote start, test file, "suite/name", fragment).
QUOTES = [
    ("worker 2 (127.0.0.1:7102), lost in epoch 3 (killed by SIGKILL", "tests/faults/test-async-loss.c",
     "faults_async/a_killed_worker_without_a_shard_rejoins_and_the_run_finishes",
     "rejoins the async run after epoch"),
    ("worker 0 (127.0.0.1:7100), lost in epoch 5 (killed by SIGKILL", "tests/faults/test-async-loss.c",
     "faults_async/a_killed_shard_holder_is_restored_from_its_checkpoint",
     "the shard it held restored from "),
    ("they have no tensor 'conv1.weight'", "tests/train/test-tensors.c",
     "tensors/a_missing_tensor_is_refused_with_the_models_shape",
     "they have no tensor 'a.bias' (the model's is 5)"),
    ("tensor 'fc1.weight' is 784x64 there", "tests/train/test-tensors.c",
     "tensors/a_shape_that_differs_is_refused_naming_both", "is 2x3 there and 3x2 in the model"),
    ("Push from ipv4:127.0.0.1:40330 for session", "tests/ps/test-refuse.c",
     "ps_refuse/a_push_without_the_sessions_secret", "does not carry the session's secret"),
    ("a chunk from ipv4:127.0.0.1:40330 for session", "tests/e2e/test-chunk-strays.c",
     "e2e_chunk_strays/"
     "a_chunk_without_the_secret_before_rank_1_begins_is_refused_and_the_run_stays_identical",
     "does not carry the session's secret"),
    ("a chunk from ipv4:127.0.0.1:40330 claims to be rank 1's", "tests/e2e/test-chunk-strays.c",
     "e2e_chunk_strays/a_zero_chunk_ahead_is_refused_and_the_run_stays_identical_to_its_twin",
     "claims to be rank 1's"),
    ("… came twice as rank 0's", "tests/collective/test-strays.c",
     "strays/a_zero_chunk_for_a_future_step_changes_nothing_or_fails_naming_its_sender",
     "came twice"),
    ("DOWN (crash loop)", "tests/e2e/test-hardening-ops.c",
     "e2e_ops/a_crash_loop_backs_off_with_a_cap_and_status_says_so", "DOWN (crash loop)"),
    ("crash loop: 7 crashes in", "tests/e2e/test-hardening-ops.c",
     "e2e_ops/a_crash_loop_backs_off_with_a_cap_and_status_says_so", "crashes in"),
    ("slots 2/4 busy, 1 stuck", "tests/e2e/test-status-slots.c",
     "e2e_status_slots/a_call_that_ignores_cancellation_shows_as_stuck", "busy, 1 stuck"),
    ("held by: Call sleep.so spin", "tests/e2e/test-status-slots.c",
     "e2e_status_slots/a_call_that_ignores_cancellation_shows_as_stuck", "held by: "),
    ("Call sleep.so spin for 41 s, cancelled", "tests/e2e/test-status-slots.c",
     "e2e_status_slots/a_call_that_ignores_cancellation_shows_as_stuck", "held by: "),
    ("FILE:LINE: what was expected", "tests/config/test-load.c",
     "conf_load/every_mistake_names_its_file_and_line", ":%d: "),
    ("exited with status N without being asked", "tests/e2e/test-hardening-ops.c",
     "e2e_ops/a_task_that_calls_exit_0_is_a_crash_and_its_worker_is_restarted",
     "without being asked to stop"),
    ("killed by SIGKILL, not by ferry", "tests/e2e/test-hardening-ops.c",
     "e2e_ops/workers_exit_with_their_supervisor_and_a_new_start_shows_no_old_crash",
     "last crash: killed by SIGKILL"),
    ("unresponsive for N s", "tests/e2e/test-hardening-ops.c",
     "e2e_ops/a_stopped_worker_is_killed_and_restarted_after_the_liveness_timeout",
     "unresponsive for"),
    ("demo.so: constructor aborted (SIGABRT)", "tests/e2e/test-hardening-plugin.c",
     "e2e_plugin/a_constructor_that_aborts_is_named_and_submit_survives",
     "constructor aborted"),
    ("demo.so: constructor called exit(0)", "tests/e2e/test-hardening-plugin.c",
     "e2e_plugin/a_constructor_that_calls_exit_0_is_no_success",
     "constructor called exit(0)"),
    ("demo.so: loading did not finish within", "tests/e2e/test-hardening-plugin.c",
     "e2e_plugin/a_constructor_that_hangs_runs_out_of_time_with_what_it_forked",
     "loading did not finish within"),
    ("demo.so: the driver's process died", "tests/e2e/test-hardening-plugin.c",
     "e2e_plugin/a_driver_that_crashes_is_reported_like_a_worker_death",
     "the driver's process died"),
    ("demo.so: the driver called exit(0)", "tests/e2e/test-hardening-plugin.c",
     "e2e_plugin/a_driver_that_calls_exit_0_does_not_succeed", "instead of returning"),
    ("noterm.so: function table entry 1", "tests/e2e/test-hardening-plugin.c",
     "e2e_plugin/a_function_table_without_terminator_is_refused_before_shipping",
     "is not a string in the module"),
    ("module demo.so while loading: signal", "tests/e2e/test-hardening-plugin.c",
     "e2e_plugin/a_worker_that_dies_loading_a_module_names_it_in_its_crash_record",
     "while loading: signal"),
    ("wedged: 4 of 4 executor slots", "tests/e2e/test-hardening-worker.c",
     "e2e_worker/calls_that_ignore_cancellation_are_named_refuse_more_and_wedge_it",
     "wedged: "),
    ("this worker is training mlp.so for another", "tests/e2e/test-hardening-worker.c",
     "e2e_worker/a_cli_submit_is_refused_while_another_trains", "for another submitter"),
    ("epoch 3 failed (sync mode, where rank N", "tests/e2e/test-sync.c",
     "e2e_sync/a_worker_killed_mid_training_fails_the_submit_by_name",
     "every worker stops with the step): worker 1 ("),
    ("rank 1 of session", "tests/collective/test-failure.c",
     "failure/an_aborted_session_stops_its_peer_at_its_next_chunk", "stopped (ECANCELED)"),
    ("no GPU visible", "tests/cuda/test-open.c",
     "cuda_open/an_index_past_the_last_gpu_is_enodev", "no GPU visible"),
    ("worker 1 (127.0.0.1:7101): module faulty.so function segv",
     "tests/cluster/test-failure.c",
     "cluster_failure/a_segfault_is_named_and_the_restarted_worker_serves_again",
     "worker crashed: %s"),
    ("the cluster was shut down (`ferry shutdown`", "tests/e2e/test-shutdown-grace.c",
     "e2e_grace/a_call_runs_for_its_grace_and_the_submit_says_shutdown_first",
     "that is why its calls failed; what they saw:"),
    ("refused 1234 more calls without a valid token", "tests/runtime/test-hardening.c",
     "rt_hardening/ten_thousand_refusals_make_a_few_log_lines", "refused %llu more calls"),
    ("[rank 1] square: info:", "tests/authoring/test-tasklog.c",
     "author_tasklog/a_chatty_task_shows_its_first_lines_and_a_count_of_the_rest",
     "[rank %d] chat: info: chat line 0"),
    ("worker 2 (127.0.0.1:41235) joined: taken in after epoch E", "tests/faults/test-grow.c",
     "faults_grow/a_worker_added_while_training_is_taken_in_at_a_checkpoint",
     ") joined: taken in after epoch"),
]

# Words for the people building ferry, not for its users.
BANNED = [r"\bissues?\b", r"they owe", r"has landed", r"grows with what",
          r"work in progress", r"\bTODO\b"]

COMMANDS = ("ferry ", "build/", "bench/", "meson ", "-", "K =", "cc ", "tests/", "bash ", "# ")

results = []


def report(ok, name, why="", skip=None):
    n = len(results) + 1
    results.append(ok)
    if skip is not None:
        print(f"ok {n} - {name} # SKIP {skip}", flush=True)
        return
    print(f"{'ok' if ok else 'not ok'} {n} - {name}", flush=True)
    for line in why.rstrip().splitlines()[-60:]:
        print(f"# {line}", flush=True)


def free_base():
    """The first of eight consecutive free loopback ports."""
    rng = random.Random(os.getpid())
    for _ in range(200):
        base = rng.randrange(20000, 60000, 10)
        socks = []
        try:
            for p in range(base, base + 8):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            pass
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no eight free ports in a row")


def small_fmnist(dst):
    """A cut of Fashion-MNIST, in its own file names: the first 4,096
    training and 1,024 test samples."""
    os.makedirs(dst, exist_ok=True)
    for stem, n in (("train", 4096), ("t10k", 1024)):
        for kind, magic, sample in (("images-idx3", 0x803, 784), ("labels-idx1", 0x801, 1)):
            name = f"{stem}-{kind}-ubyte.gz"
            with gzip.open(os.path.join(FMNIST, name), "rb") as f:
                data = f.read()
            head = 16 if sample == 784 else 8
            out = struct.pack(">II", magic, n)
            if sample == 784:
                out += struct.pack(">II", 28, 28)
            out += data[head:head + n * sample]
            with gzip.open(os.path.join(dst, name), "wb") as f:
                f.write(out)


class Adapter:
    def __init__(self, home, base, data):
        self.home, self.base, self.data = home, base, data

    def ports(self, line):
        line = re.sub(r"--metrics-port 71(\d\d)\b",
                      lambda m: f"--metrics-port {self.base + int(m.group(1))}", line)
        return re.sub(r"127\.0\.0\.1:71(\d\d)\b",
                      lambda m: f"127.0.0.1:{self.base + int(m.group(1))}", line)

    def command(self, seg):
        seg = re.sub(r"(?<![\w./-])build/", BUILD + "/", seg)
        seg = re.sub(r"\bexport FERRY_HOME=\S+", f"export FERRY_HOME={self.home}", seg)
        if re.search(r"ferry start \d+", seg) and "--base-port" not in seg:
            seg = re.sub(r"(ferry start \d+)", rf"\1 --base-port {self.base}", seg)
        m = re.search(r"ferry submit \S*?(mlp|cnn|linreg|softmax)\.so", seg)
        if m:
            if re.search(r"--epochs \d+", seg):
                seg = re.sub(r"--epochs \d+", "--epochs 1", seg)
            else:
                seg = seg[:m.end()] + " --epochs 1" + seg[m.end():]
            if m.group(1) != "linreg":
                seg = seg[:m.end()] + f" --data {self.data}" + seg[m.end():]
        return self.ports(seg)

    def line(self, line):
        """The line as the test runs it; None to drop it (setup only)."""
        code = re.sub(r"\s+#.*$", "", line)
        if not code.strip() or code.lstrip().startswith("#"):
            return ""
        segs = [s for s in re.split(r"\s*&&\s*", code) if not SETUP.match(s)]
        if not segs:
            return None
        return " && ".join(self.command(s) for s in segs)


def adapt_block(body, ad):
    """(script, commands as the README has them, setup-only line count)."""
    out, cmds, dropped, heredoc = [], [], 0, None
    for line in body.split("\n"):
        if heredoc is not None:
            out.append(ad.ports(line))
            if line.strip() == heredoc:
                heredoc = None
            continue
        m = re.search(r"<<'?(\w+)'?", line)
        got = ad.line(line)
        if got is None:
            dropped += 1
            continue
        if got:
            cmds.append(re.sub(r"\s+#.*$", "", line))
        out.append(got)
        if m:
            heredoc = m.group(1)
    return "\n".join(out), cmds, dropped


def run_block(script, cwd, env):
    full = ("set -e\n"
            "trap 'echo \"tests/readme: this command failed: $BASH_COMMAND\" >&2' ERR\n"
            + script + "\n")
    p = subprocess.Popen(["bash", "-c", full], cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True, text=True)
    try:
        out, _ = p.communicate(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return 124, out + f"\ntests/readme: timed out after {BLOCK_TIMEOUT_S} s"
    return p.returncode, out


def shutdown(env):
    subprocess.run([os.path.join(BUILD, "ferry"), "shutdown", "--grace-ms", "0"], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


def check_quotes(text):
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    found = [" ".join(x.split()) for x in re.findall(r"`([^`]+)`", prose)]
    found = [x for x in found if len(x.split()) >= 3 and not x.startswith(COMMANDS)]
    found += [" ".join(x.split()) for x in re.findall(r'\("([^"]{12,}?)"\)', prose, re.S)]
    problems = []
    for q in found:
        if not any(q.startswith(k) for k, _, _, _ in QUOTES):
            problems.append(f"quoted in the README with no test in QUOTES: {q!r}")
    for start, path, test, fragment in QUOTES:
        if not any(q.startswith(start) for q in found):
            problems.append(f"QUOTES lists {start!r}, which the README no longer quotes")
        try:
            src = open(os.path.join(SRC, path), encoding="utf-8").read()
        except OSError as e:
            problems.append(f"{start!r}: {path}: {e}")
            continue
        suite, name = test.split("/")
        if not re.search(rf"(Test|TEST)\(\s*(?:[^,()]*,\s*)?{suite}\s*,\s*{name}\b", src):
            problems.append(f"{start!r}: {path} has no test {test}")
        if fragment not in src:
            problems.append(f"{start!r}: {path} does not check {fragment!r}")
    return problems


def check_layout(text):
    """The Layout table names every folder that holds product sources, and
    only folders that exist."""
    table = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([^`]+)/` \|", table, re.M))
    have = set()
    for root, dirs, files in os.walk(SRC):
        rel = os.path.relpath(root, SRC)
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
        top = rel.split(os.sep)[0]
        if rel == "." or top in ("tests", "bench", "fuzz", "include", "subprojects"):
            continue
        if any(f.endswith((".c", ".h", ".cu", ".proto")) for f in files):
            have.add(rel.replace(os.sep, "/"))
    # A backend's folders are the device row's (cpu/, cuda/ are named in it).
    have -= {"runtime/device/cpu", "runtime/device/cuda"}
    problems = [f"folder {d}/ holds sources but the Layout table does not name it"
                for d in sorted(have - listed)]
    problems += [f"the Layout table names {d}/, which does not exist"
                 for d in sorted(listed) if not os.path.isdir(os.path.join(SRC, d))]
    return problems


def help_texts():
    """(what, text) of every --help the user can ask for."""
    ferry = os.path.join(BUILD, "ferry")
    runs = [[ferry, "--help"]] + [[ferry, c, "--help"]
                                  for c in ("start", "status", "submit", "shutdown", "worker")]
    for b in ("rpc", "cluster", "train", "allreduce"):
        path = os.path.join(BUILD, "bench", b)
        if os.access(path, os.X_OK):
            runs.append([path, "--help"])
    for cmd in runs:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        yield " ".join(os.path.relpath(c, BUILD) if c.startswith(BUILD) else c
                       for c in cmd), p.stdout + p.stderr


def main():
    text = open(os.path.join(SRC, "README.md"), encoding="utf-8").read()
    work = tempfile.mkdtemp(prefix="ferry-readme-")
    home = os.path.join(work, "home")
    cwd = os.path.join(work, "cwd")
    pc = os.path.join(work, "pkgconfig")
    for d in (home, cwd, pc):
        os.makedirs(d)
    # `pkg-config ferry`, as the README writes it, finds the build tree.
    shutil.copy(os.path.join(PCDIR, "ferry-uninstalled.pc"), os.path.join(pc, "ferry.pc"))
    env = dict(os.environ, FERRY_HOME=home, PKG_CONFIG_PATH=pc)
    try:
        data = os.path.join(work, "fashion-mnist-cut")
        small_fmnist(data)
        ad = Adapter(home, free_base(), data)
        print(f"# FERRY_HOME {home}, working directory {cwd}, ports from {ad.base}",
              flush=True)

        problems = check_quotes(text)
        report(not problems, "every error message the README quotes has a test",
               "\n".join(problems))
        problems = check_layout(text)
        report(not problems, "the Layout table matches the folders", "\n".join(problems))
        said = [f"README.md: {m.group(0)!r}" for b in BANNED
                for m in re.finditer(b, text, re.I)]
        for what, out in help_texts():
            said += [f"{what}: {m.group(0)!r}" for b in BANNED
                     for m in re.finditer(b, out, re.I)]
        report(not said, "the README and every --help speak to users", "\n".join(said))

        for lang, at, body in blocks(text):
            name = f"README.md:{at} ({lang})"
            if lang == "c":
                got = build(body, at, cwd, env)
                if got is None:
                    report(True, name, skip="a fragment: no #include")
                else:
                    report(got[0], f"{name} {got[1]}", got[2])
                continue
            if lang != "sh":
                continue
            first = body.split("\n", 1)[0].strip()
            if first.startswith(SKIP_MARK):
                report(True, name, skip=first[len(SKIP_MARK):].strip())
                continue
            script, cmds, dropped = adapt_block(body, ad)
            if not cmds:
                report(True, name, skip="setup and the test suite: this test runs inside "
                                        "them, in the build it was built in")
                continue
            rc, out = run_block(script, cwd, env)
            missing = [want for pat, wants in PROMISES
                       if any(re.search(pat, c) for c in cmds)
                       for want in wants if not re.search(want, out)]
            why = out
            if rc:
                why += f"\nexit status {rc}"
            if missing:
                why += "\nmissing: " + ", ".join(missing)
            report(rc == 0 and not missing, f"{name} runs as written", why)
            if rc:
                shutdown(env)
    finally:
        try:
            shutdown(env)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"1..{len(results)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
