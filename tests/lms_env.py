#!/usr/bin/env python3
"""Each bad LMS_* value ends the process with status 2 and one line naming the variable,
the value and the accepted form, before any device work; good values run. Runs /bin/true
under LD_PRELOAD=liblms.so, as users run programs."""
import os
import subprocess
import sys
import tempfile

build = os.environ.get("LMS_BUILD_DIR", "build")
sanitize = os.environ.get("SANITIZE", "")
preload = [os.path.join(build, "preload", "liblms.so")]
if sanitize in ("address", "thread"):
    runtime = {"address": "libasan.so", "thread": "libtsan.so"}[sanitize]
    preload.insert(0, subprocess.check_output(["gcc", "-print-file-name=" + runtime], text=True).strip())

BAD = [
    ("LMS_THRESHOLD_KB", "abc"), ("LMS_THRESHOLD_KB", "-1"), ("LMS_THRESHOLD_KB", ""),
    ("LMS_THRESHOLD_KB", "99999999999999999999"), ("LMS_THRESHOLD_KB", "18014398509481984"),
    ("LMS_THRESHOLD_KB", "12Q"), ("LMS_THRESHOLD_KB", "4MB"),
    ("LMS_EXCLUDE_MB", "-5"), ("LMS_EXCLUDE_MB", "1.5"), ("LMS_EXCLUDE_MB_0", "x"),
    ("LMS_HOST_LIMIT_MB", ""), ("LMS_HOST_LIMIT_MB", "lots"),
    ("LMS_MODE", "fast"), ("LMS_MODE", ""), ("LMS_LOG_LEVEL", "4"), ("LMS_LOG_LEVEL", "-1"),
    ("LMS_LOG_LEVEL", ""), ("LMS_STATS", "yes"), ("LMS_STATS_FILE", ""), ("LMS_TRACE", ""), ("LMS_POLICY", "fifo"),
    ("LMS_THRESHOLD_KB", "64mb"), ("LMS_DUMP_SIGNAL", "TERM"), ("LMS_DUMP_SIGNAL", "SIGINT"), ("LMS_DUMP_SIGNAL", "15"),
    ("LMS_DUMP_SIGNAL", "NOSUCH"),
]
GOOD = [
    ("LMS_THRESHOLD_KB", "0"), ("LMS_THRESHOLD_KB", "4K"), ("LMS_EXCLUDE_MB", "2G"),
    ("LMS_HOST_LIMIT_MB", "512"), ("LMS_MODE", "cap"), ("LMS_MODE", "off"),
    ("LMS_LOG_LEVEL", "3"), ("LMS_STATS", "json"), ("LMS_POLICY", "lru"), ("LMS_THRESHOLD_KB", "64m"),
    ("LMS_EXCLUDE_MB", "2g"), ("LMS_DUMP_SIGNAL", "USR1"), ("LMS_DUMP_SIGNAL", "SIGUSR2"), ("LMS_DUMP_SIGNAL", "WINCH"),
]

def run(name, value, **more):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LMS_")}
    env["LD_PRELOAD"] = ":".join(preload)
    env[name] = value
    env.update(more)
    return subprocess.run(["/bin/true"], env=env, capture_output=True, text=True, timeout=60)

EXTRA = 8
print("1..%d" % (len(BAD) * 2 + len(GOOD) + EXTRA))
n = 0
failed = False
for name, value in BAD:
    p = run(name, value)
    lines = [l for l in p.stderr.splitlines() if l.startswith("liblms:")]
    n += 1
    good = p.returncode == 2
    failed |= not good
    print("%s %d - %s=%r exits with status 2 (got %d)" % ("ok" if good else "not ok", n, name, value, p.returncode))
    n += 1
    good = len(lines) == 1 and "%s='%s'" % (name, value) in lines[0] and "expected" in lines[0]
    failed |= not good
    print("%s %d - one line names it: %s" % ("ok" if good else "not ok", n, lines[0] if lines else p.stderr.strip()[:200]))
for name, value in GOOD:
    p = run(name, value)
    n += 1
    good = p.returncode == 0
    failed |= not good
    print("%s %d - %s=%r is accepted (status %d)" % ("ok" if good else "not ok", n, name, value, p.returncode))


def check(good, description, got=""):
    global n, failed
    n += 1
    failed |= not good
    print("%s %d - %s" % ("ok" if good else "not ok", n, description))
    if not good:
        print("# got: %r" % got)


def one_error_line(p):
    """The process ended with status 2 and printed exactly one line, liblms's."""
    return p.returncode == 2 and p.stderr.count("\n") == 1 and p.stderr.startswith("liblms: ")


# Control characters are escaped: the one line stays one line, and cannot pass for another.
p = run("LMS_THRESHOLD_KB", "12\nliblms: all is well\x1b[31m\t\\")
check(one_error_line(p) and "LMS_THRESHOLD_KB='12\\nliblms: all is well\\x1b[31m\\t\\\\' is invalid: expected"
      in p.stderr, "a value with a newline, an escape and a tab: one line, escaped as in C", p.stderr)
# A long value is cut, not the message: the accepted form stays on the line.
p = run("LMS_EXCLUDE_MB", "9" * 600)
check(one_error_line(p) and "9" * 120 + "...(600 bytes, cut)' is invalid: expected a whole number of MiB" in p.stderr
      and p.stderr.rstrip().endswith("(e.g. 512, 64M, 2g)"), "a 600-byte value: cut at 120 bytes, said so, "
      "and the expected form kept", p.stderr)

# Lower-case suffixes are the upper-case ones (documented in the option table).
for lower, upper in (("64m", "64M"), ("1g", "1G")):
    shown = [run("LMS_THRESHOLD_KB", v, LMS_LOG_LEVEL="1").stderr for v in (lower, upper)]
    echo = [l for l in shown[0].splitlines() if "LMS_THRESHOLD_KB =" in l]
    check(shown[0] == shown[1] and len(echo) == 1, "LMS_THRESHOLD_KB=%s is %s: %s" % (lower, upper, echo), shown)

# LMS_DUMP_SIGNAL refuses every signal that stops the program, as the error lists them: a dump
# in their place would leave it unable to be stopped.
p = run("LMS_DUMP_SIGNAL", "TERM")
listed = p.stderr.split("(")[-1].split(")")[0].replace("faults:", "").replace(";", ",")
names = [x.strip() for x in listed.split(",")]
refused = [x for x in names if run("LMS_DUMP_SIGNAL", x).returncode == 2 and run("LMS_DUMP_SIGNAL", "SIG" + x).returncode == 2]
check(len(names) == 21 and refused == names and {"TERM", "INT", "HUP", "QUIT", "TSTP", "KILL"} <= set(names),
      "LMS_DUMP_SIGNAL refuses each of the %d signals its error lists, by name and as SIG..." % len(names),
      (names, refused))

# A file that cannot be created ends the process as a bad value does: one line, "liblms: ".
sim = os.path.join(build, "sim")
with tempfile.TemporaryDirectory() as work:
    existing = os.path.join(work, "existing")
    open(existing, "w").close()
    for name, extra in (("LMS_TRACE", {}), ("LMS_STATS_FILE", {"LMS_STATS": "table"})):
        p = run(name, existing, LD_LIBRARY_PATH=sim, **extra)
        check(one_error_line(p) and p.stderr.startswith("liblms: %s=%s: cannot create" % (name, existing)),
              "%s over an existing file: status 2, one line with liblms's prefix" % name, (p.returncode, p.stderr))
    p = run("LMS_TRACE", os.path.join(work, "no", "such\ndir"), LD_LIBRARY_PATH=sim)
    check(one_error_line(p) and "no/such\\ndir: No such file or directory" in p.stderr,
          "a trace path with a newline: one line, escaped", p.stderr)
sys.exit(1 if failed else 0)
