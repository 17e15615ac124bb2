#!/usr/bin/env python3
"""Writes a C file defining `const char NAME[]` as the bytes of a text file
(the dashboard's page, compiled into the ferry executable)."""
import sys

src, name, out = sys.argv[1:4]
text = open(src, encoding="utf-8").read()
with open(out, "w", encoding="utf-8") as f:
    f.write("/* Generated from %s: do not edit. */\n" % src.split("/")[-1])
    f.write("const char %s[] =\n" % name)
    for line in text.splitlines(True):
        f.write('    "%s"\n' % line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n"))
    f.write(";\n")
