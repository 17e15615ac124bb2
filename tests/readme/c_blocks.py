#!/usr/bin/env python3
"""tests/readme — README.md's C blocks built, printing TAP.

Each ```c block that is a whole file (it has an #include) is written to a
temporary directory (or, through build(), to the directory readme_test.py
runs the shell blocks in: a block that begins with a comment naming a file,
"/* demo.c */", is written there under that name) and compiled with
-Wall -Wextra -Werror against the in-tree headers (the build tree's ferry.pc).
A block that declares a task (FERRY_TASK) is linked as the shared module a
user builds, with -Wl,-z,defs: a function it uses and never defines (a
`static` one declared but not written, or one no library has) fails here,
not when a worker loads it. A block with no #include is a fragment, skipped.

Before the README, the same build is held to a module that declares a
function it never defines: a check that cannot fail is no check.

Environment (meson sets it): FERRY_TEST_SOURCE, FERRY_TEST_PKGCONFIG.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

FLAGS = ["-std=c17", "-Wall", "-Wextra", "-Werror", "-fPIC"]
# A sanitizer build's layer library (libferry-nn.a) calls its sanitizers'
# runtime: a module linked with -z defs names them as the build does.
SANITIZE = os.environ.get("FERRY_TEST_SANITIZE", "none")
if SANITIZE not in ("", "none"):
    FLAGS.append("-fsanitize=" + SANITIZE)

# A module whose evaluate is declared, used, and never written.
UNDEFINED = """#include <ferry/task.h>
int evaluate(ferry_model_ctx_t *mc, const float *p, const ferry_batch_t *b,
             float *loss, int *correct);
static const ferry_model_t model = {FERRY_MODEL_HEADER, .evaluate = evaluate};
FERRY_TASK(.name = "undefined", .model = &model);
"""


def blocks(text):
    """(language, first line number, body) of each fenced block, in order."""
    out, lang, start, body = [], None, 0, []
    for i, line in enumerate(text.split("\n"), 1):
        if line.startswith("```"):
            if lang is None:
                lang, start, body = line[3:].strip() or "text", i, []
            else:
                out.append((lang, start, "\n".join(body) + "\n"))
                lang = None
        elif lang is not None:
            body.append(line)
    return out


def pc_env(pcdir, work):
    """An environment whose `pkg-config ferry` finds the build tree."""
    pc = os.path.join(work, "pkgconfig")
    os.makedirs(pc, exist_ok=True)
    shutil.copy(os.path.join(pcdir, "ferry-uninstalled.pc"), os.path.join(pc, "ferry.pc"))
    return dict(os.environ, PKG_CONFIG_PATH=pc)


def build(body, at, cwd, env):
    """Builds one block in cwd: (ok, what was done, compiler output), or
    None for a fragment."""
    if "#include" not in body:
        return None
    m = re.match(r"/\* (\w+\.c)", body)
    src = os.path.join(cwd, m.group(1) if m else f"block-{at}.c")
    with open(src, "w") as f:
        f.write(body)

    def pkg(what):
        return subprocess.run(["pkg-config", what, "ferry"], env=env, capture_output=True,
                              text=True, check=True).stdout.split()

    if "FERRY_TASK(" in body:
        what = "builds as a module"
        cmd = (["cc"] + FLAGS + ["-shared", "-fvisibility=hidden", "-Wl,-z,defs", "-o",
                                 src[:-2] + ".so", src] + pkg("--cflags") + pkg("--libs"))
    else:
        what = "compiles"
        cmd = ["cc"] + FLAGS + ["-c", "-o", src[:-2] + ".o", src] + pkg("--cflags")
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode == 0, what, " ".join(cmd) + "\n" + p.stdout + p.stderr


def main():
    src = os.environ["FERRY_TEST_SOURCE"]
    work = tempfile.mkdtemp(prefix="ferry-readme-c-")
    n = 0
    ok_all = True

    def report(ok, name, why="", skip=None):
        nonlocal n, ok_all
        n += 1
        ok_all &= ok
        print(f"{'ok' if ok else 'not ok'} {n} - {name}" + (f" # SKIP {skip}" if skip else ""))
        for line in ("" if ok else why).rstrip().splitlines()[-40:]:
            print(f"# {line}")

    try:
        env = pc_env(os.environ["FERRY_TEST_PKGCONFIG"], work)
        ok, _, why = build(UNDEFINED, 0, work, env)
        report(not ok and "evaluate" in why,
               "a module using a function it never defines does not build", why)
        text = open(os.path.join(src, "README.md"), encoding="utf-8").read()
        for lang, at, body in blocks(text):
            if lang != "c":
                continue
            got = build(body, at, work, env)
            if got is None:
                report(True, f"README.md:{at} (c)", skip="a fragment: no #include")
                continue
            ok, what, why = got
            report(ok, f"README.md:{at} (c) {what}", why)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"1..{n}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
