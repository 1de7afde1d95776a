#!/usr/bin/env python3
"""make install and make uninstall into a scratch DESTDIR: the programs, the library with its
symbols and debug information, man pages generated from the tables they describe, the
pkg-config file and the documentation; the installed lms-run and lms-trace work; uninstall
removes every file and every directory install created, and no other."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tests"))
from tools_tap import BUILD, done, is_equal, ok, plan, run, scratch  # noqa: E402

SOURCE = os.environ.get("LMS_SOURCE_DIR", ".")
VERSION = re.search(r'LMS_VERSION "(.*)"', open(os.path.join(SOURCE, "preload", "version.h")).read())[1]
plan(15)
tmp = scratch()
dest = os.path.join(tmp, "dest")
os.makedirs(os.path.join(dest, "opt", "lms", "share", "man"))   # there before: uninstall keeps it
PREFIX = "/opt/lms"
root = dest + PREFIX
# The make running this test passes its jobserver in MAKEFLAGS; this make is a separate one.
env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}


def make(target):
    return run(["make", "-s", "-C", SOURCE, target, f"BUILD={BUILD}", f"DESTDIR={dest}", f"PREFIX={PREFIX}",
                f"SANITIZE={os.environ.get('SANITIZE', '')}"], env=env)


code, out, err = make("install")
is_equal(code, 0, "make install" + (f": {err}" if code else ""))
expected = ["bin/lms-run", "bin/lms-trace", "bin/lms-trainer", "lib/liblms.so", "lib/pkgconfig/liblms.pc", "share/liblms/options.tsv",
            "share/doc/liblms/README.md", "share/doc/liblms/trace-format.md", "share/man/man1/lms-run.1",
            "share/man/man1/lms-trace.1", "share/man/man7/liblms.7"]
is_equal([f for f in expected if not os.path.isfile(os.path.join(root, f))], [], "every file is installed")
is_equal(sorted(f for f in os.listdir(os.path.join(root, "bin")) if not f.startswith("lms-")), [],
         "every program in bin is named lms-*: none claims a generic name such as trainer")
sections = run(["readelf", "-S", "-W", os.path.join(root, "lib", "liblms.so"), os.path.join(root, "bin", "lms-trace")])[1]
ok(sections.count(".symtab") == 2 and sections.count(".debug_info") == 2, "nothing stripped: symbols and debug information stay")

variables = [l.split("\t")[0] for l in open(os.path.join(BUILD, "preload", "options.tsv")).read().splitlines()[1:]]
liblms7 = open(os.path.join(root, "share/man/man7/liblms.7")).read()
ok(all(f".B {v}\n" in liblms7 for v in variables) and f"liblms {VERSION}" in liblms7 and f"{PREFIX}/lib/liblms.so" in liblms7,
   "liblms(7): every variable, the version and this installation's paths", liblms7[:400])
run1 = open(os.path.join(root, "share/man/man1/lms-run.1")).read()
flags = ["\\-\\-" + v[len("LMS_"):].lower().replace("_", "\\-") for v in variables]
ok(all(f".BI {f} " in run1 for f in flags), "lms-run(1): an option for every variable", [f for f in flags if f not in run1])
trace1 = open(os.path.join(root, "share/man/man1/lms-trace.1")).read()
ok(all(f".SS {c}\n" in trace1 for c in ("summary", "plot", "export", "tune")) and "usage: lms\\-trace tune" in trace1,
   "lms-trace(1): every command with its --help")
if shutil.which("groff"):
    warnings = [run(["groff", "-man", "-z", "-ww", os.path.join(root, p)])[2]
                for p in ("share/man/man7/liblms.7", "share/man/man1/lms-run.1", "share/man/man1/lms-trace.1")]
    is_equal(warnings, ["", "", ""], "the man pages format without a warning")
else:
    ok(True, "# SKIP groff is not installed")
pc = open(os.path.join(root, "lib/pkgconfig/liblms.pc")).read()
ok(re.search(rf"^Version: {re.escape(VERSION)}$", pc, re.M) and f"prefix={PREFIX}\n" in pc
   and "preload=${libdir}/liblms.so" in pc, "the pkg-config file: version and the library to preload", pc)

code, out, err = run([os.path.join(root, "bin", "lms-run"), "--version"])
is_equal(out, f"lms-run (liblms) {VERSION}\n", "the installed lms-run finds its table")
code, out, err = run([os.path.join(root, "bin", "lms-run"), "--help"])
ok(code == 0 and "--exclude-mb N" in out, "and lists liblms's options", out[:300])
code, out, err = run([os.path.join(root, "bin", "lms-trace"), "--version"])
is_equal(out, f"lms-trace (liblms) {VERSION}\n", "the installed lms-trace")

code, out, err = make("uninstall")
is_equal(code, 0, "make uninstall" + (f": {err}" if code else ""))
left = sorted(os.path.relpath(os.path.join(d, n), dest) for d, dirs, files in os.walk(dest) for n in dirs + files)
is_equal(left, ["opt", "opt/lms", "opt/lms/share", "opt/lms/share/man"],
         "uninstall leaves no file, and no directory but those there before")
code, out, err = make("uninstall")
is_equal(code, 0, "uninstalling twice is harmless")
done()
