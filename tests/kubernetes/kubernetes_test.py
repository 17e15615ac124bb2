#!/usr/bin/env python3
"""tests/kubernetes — deploy/kubernetes/ferry.yaml, checked twice:

- against the Kubernetes schema (kubernetes-models, with unknown keys
  refused: validate.mjs), and a misspelt copy refused;
- run as a cluster would run it, without one: each pod a network namespace
  of its own behind a bridge (in a namespace of its own too), with the
  hostname the Indexed Job gives it, JOB_COMPLETION_INDEX, the Service's
  names (`ferry-workers-i.ferry`) in its hosts file, and the Secret's token
  as a file. The workers run the manifest's command, args and env; the
  driver runs its script (one epoch instead of five) and the workers exit
  0, as their Job's pods must to complete it. The image's paths are the
  build's. TAP. Skips with the reason without root, `ip netns`, node or the
  kubernetes-models package."""
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "params"))
from ptap import BUILD, Tap  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
MANIFEST = os.path.join(SRC, "deploy", "kubernetes", "ferry.yaml")
NODE_MODULES = os.environ.get("FERRY_TEST_NODE_MODULES",
                              "/usr/local/lib/ferry-tests/node_modules")
TAP = Tap()
report = TAP.report
TAG = "fk%d" % (os.getpid() % 100000)  # namespace and link names stay short
SUBNET = "10.%d.%d" % (200 + os.getpid() % 50, os.getpid() // 50 % 250)


def sh(*args, check=True, **kw):
    return subprocess.run(args, check=check, capture_output=True, text=True, **kw)


def skip_reason():
    if os.geteuid() != 0:
        return "not root: network namespaces need it"
    if not shutil.which("ip") or sh("ip", "netns", "list", check=False).returncode:
        return "no `ip netns`"
    if not shutil.which("node"):
        return "no node to run the schema check"
    if not os.path.isdir(os.path.join(NODE_MODULES, "kubernetes-models")):
        return "no kubernetes-models in %s (.ci/install-deps --tests installs it)" % NODE_MODULES
    return None


def validate(path):
    return sh("node", os.path.join(HERE, "validate.mjs"), NODE_MODULES, path, check=False)


def schema_checks(tmp):
    r = validate(MANIFEST)
    report(r.returncode == 0 and r.stdout.count("valid ") == 4,
           "the manifest's four documents are valid Kubernetes objects", r.stdout + r.stderr)
    text = open(MANIFEST).read()
    bad = os.path.join(tmp, "bad.yaml")
    with open(bad, "w") as f:
        f.write(text.replace("subdomain:", "subdomian:").replace(
            "completionMode: Indexed", "completionMode: Indexd"))
    r = validate(bad)
    report(r.returncode == 1 and "subdomian: no such field" in r.stdout and
           "completionMode" in r.stdout,
           "a misspelt key and a wrong enum value are refused", r.stdout + r.stderr)


class Pods:
    """Pod namespaces behind a bridge, all removed by close()."""

    def __init__(self, n):
        self.net = TAG + "-net"
        self.names = [TAG + "-p%d" % i for i in range(n)]
        self.made = []
        sh("ip", "netns", "add", self.net)
        self.made.append(self.net)
        self.ip_net("link", "add", "br0", "type", "bridge")
        self.ip_net("link", "set", "br0", "up")
        for i, ns in enumerate(self.names):
            sh("ip", "netns", "add", ns)
            self.made.append(ns)
            pod, port = "%sa%d" % (TAG, i), "%sb%d" % (TAG, i)
            sh("ip", "-n", ns, "link", "add", pod, "type", "veth", "peer", "name", port,
               "netns", self.net)
            sh("ip", "-n", ns, "link", "set", pod, "name", "eth0")
            sh("ip", "-n", ns, "addr", "add", self.address(i) + "/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            self.ip_net("link", "set", port, "master", "br0")
            self.ip_net("link", "set", port, "up")

    def ip_net(self, *args):
        sh("ip", "-n", self.net, *args)

    def address(self, i):
        return "%s.%d" % (SUBNET, 10 + i)

    def hosts(self, lines):
        """The Service's DNS names, as each pod's /etc/hosts."""
        for ns in self.names:
            os.makedirs("/etc/netns/" + ns, exist_ok=True)
            with open("/etc/netns/%s/hosts" % ns, "w") as f:
                f.write("127.0.0.1 localhost\n" + "".join(lines))

    def popen(self, i, hostname, argv, env, log):
        """argv in pod i, with its hostname (a UTS namespace of its own)."""
        wrapped = ["ip", "netns", "exec", self.names[i], "unshare", "--uts", "sh", "-c",
                   'hostname "$0" && exec "$@"', hostname, *argv]
        return subprocess.Popen(wrapped, env=env, stdout=log, stderr=subprocess.STDOUT)

    def close(self):
        for ns in reversed(self.made):
            sh("ip", "netns", "del", ns, check=False)
            shutil.rmtree("/etc/netns/" + ns, ignore_errors=True)


def as_here(text, tmp, tasks):
    """The image's paths, the Secret's mount and the state's volume, here."""
    return (text.replace("/etc/ferry/token", os.path.join(tmp, "token"))
            .replace("/var/lib/ferry", os.path.join(tmp, "state"))
            .replace("/usr/local/lib/ferry/tasks", tasks))


def container(doc):
    return doc["spec"]["template"]["spec"]["containers"][0]


def emulate(tmp):
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(open(MANIFEST)) if d}
    workers, driver = docs["ferry-workers"], docs["ferry-driver"]
    n = workers["spec"]["completions"]
    service = workers["spec"]["template"]["spec"]["subdomain"]
    with open(os.path.join(tmp, "token"), "w") as f:
        f.write(os.urandom(32).hex())
    os.chmod(os.path.join(tmp, "token"), 0o400)
    tasks = os.path.join(BUILD, "tasks")
    path = BUILD + ":" + os.environ.get("PATH", "/usr/bin:/bin")
    pods = Pods(n + 1)
    procs = []
    try:
        pods.hosts(["%s %s-%d.%s %s-%d\n" % (pods.address(i), "ferry-workers", i, service,
                                             "ferry-workers", i) for i in range(n)])
        c = container(workers)
        argv = [as_here(a, tmp, tasks) for a in c["command"] + c.get("args", [])]
        for i in range(n):
            env = {"PATH": path, "JOB_COMPLETION_INDEX": str(i), "OPENBLAS_NUM_THREADS": "1",
                   "HOME": tmp}
            env.update({e["name"]: as_here(e["value"], tmp, tasks) for e in c["env"]})
            log = open(os.path.join(tmp, "worker-%d.log" % i), "w")
            procs.append(pods.popen(i, "ferry-workers-%d" % i, argv, env, log))
        d = container(driver)
        script = as_here(d["args"][0], tmp, tasks).replace("--epochs 5", "--epochs 1")
        env = {"PATH": path, "HOME": tmp, "FERRY_HOME": os.path.join(tmp, "driver"),
               "OPENBLAS_NUM_THREADS": "1"}
        with open(os.path.join(tmp, "driver.log"), "w") as log:
            drv = pods.popen(n, "ferry-driver", d["command"] + [script], env, log)
            drv.wait(600)
        out = open(os.path.join(tmp, "driver.log")).read()
        report(drv.returncode == 0 and "on %d workers" % n in out and "done:" in out,
               "the driver Job trains on the Indexed Job's workers through the rendezvous",
               out[-3000:])
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(60))
            except subprocess.TimeoutExpired:
                codes.append(None)
        logs = "".join(open(os.path.join(tmp, "worker-%d.log" % i)).read() for i in range(n))
        report(codes == [0] * n, "every worker pod exits 0 once the driver is done",
               "%s\n%s" % (codes, logs[-3000:]))
        report(all("joined the rendezvous at ferry-workers-0.%s:7100" % service in
                   open(os.path.join(tmp, "worker-%d.log" % i)).read() for i in range(1, n)),
               "the ranks past 0 joined rank 0 by its Service name", logs[-3000:])
        report("rank 0 of %d from a Kubernetes Indexed Job" % n in
               open(os.path.join(tmp, "worker-0.log")).read(),
               "each worker says the Indexed Job started it", logs[-2000:])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        pods.close()


def main():
    why = skip_reason()
    if why:
        print("1..0 # SKIP " + why)
        sys.exit(0)
    tmp = tempfile.mkdtemp(prefix="ferry-k8s-")
    try:
        print("1..6")
        schema_checks(tmp)
        emulate(tmp)
    except Exception as e:
        report(False, "the test ran to its end", repr(e))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if TAP.failed else 0)


main()
