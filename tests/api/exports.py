#!/usr/bin/env python3
"""tests/api exports — <ferry/ferry.h> declares what libferry.so exports.

The functions the shared library exports (nm -D) and the functions the
public headers declare (every prototype that is not static inline) are the
same set, and each is reached from <ferry/ferry.h>: a program that includes
that one header can call everything the library offers, and the header
promises nothing the library lacks. <ferry/nn.h> is the layer library's,
libferry-nn.a, which a module links into itself: the archive defines every
function it declares. Prints TAP.

Environment (meson sets it): FERRY_TEST_LIBFERRY (the built libferry.so),
FERRY_TEST_LIBFERRY_NN (the built libferry-nn.a), FERRY_TEST_INCLUDE
(include/ of the source tree).
"""
import os
import re
import subprocess

LIB = os.environ["FERRY_TEST_LIBFERRY"]
LIB_NN = os.environ["FERRY_TEST_LIBFERRY_NN"]
# Headers of the static layer library, not of libferry.so.
ARCHIVE_HEADERS = {"nn.h"}
INC = os.environ["FERRY_TEST_INCLUDE"]

# A prototype at the start of a line: a return type, then ferry_<name>( .
PROTO = re.compile(r"^(?!static\b|typedef\b|#)[A-Za-z_][\w \t\*]*?\b(ferry_\w+)\s*\(", re.M)
INCLUDE = re.compile(r'^#include <ferry/(\w+\.h)>', re.M)


def exported():
    out = subprocess.run(["nm", "-D", "--defined-only", "--format=posix", LIB],
                         check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        name, kind = line.split()[:2]
        if kind != "A":  # A: the version node, FERRY_0
            names.add(name.split("@")[0])
    return names


def archive_defined():
    out = subprocess.run(["nm", "--defined-only", "--format=posix", LIB_NN],
                         check=True, capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines()
            if len(line.split()) > 1 and line.split()[1] == "T"}


def text(header):
    with open(os.path.join(INC, "ferry", header), encoding="utf-8") as f:
        return re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)


def declared(headers):
    return {m.group(1) for h in headers for m in PROTO.finditer(text(h))}


def reached(header, seen):
    if header in seen or not os.path.exists(os.path.join(INC, "ferry", header)):
        return seen  # version.h is generated into the build tree: no prototypes
    seen.add(header)
    for inc in INCLUDE.findall(text(header)):
        reached(inc, seen)
    return seen


def main():
    headers = sorted(h for h in os.listdir(os.path.join(INC, "ferry"))
                     if h.endswith(".h") and h not in ARCHIVE_HEADERS)
    lib, decl = exported(), declared(headers)
    from_ferry_h = declared(reached("ferry.h", set()))
    nn_decl, nn_lib = declared(sorted(ARCHIVE_HEADERS)), archive_defined()
    checks = [
        ("libferry exports a function", bool(lib), sorted(lib)),
        ("every exported name is declared in a public header", lib <= decl,
         sorted(lib - decl)),
        ("every declared function is exported", decl <= lib, sorted(decl - lib)),
        ("<ferry/ferry.h> reaches every declared function", decl <= from_ferry_h,
         sorted(decl - from_ferry_h)),
        ("libferry-nn.a defines every function <ferry/nn.h> declares",
         bool(nn_decl) and nn_decl <= nn_lib, sorted(nn_decl - nn_lib)),
    ]
    print("1..%d" % len(checks))
    for i, (name, ok, names) in enumerate(checks, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
        if not ok:
            print("# %s" % ", ".join(names) if names else "# none")
    print("# exported: %s" % ", ".join(sorted(lib)))


main()
