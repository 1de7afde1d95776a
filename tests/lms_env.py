#!/usr/bin/env python3
"""Each bad LMS_* value ends the process with status 2 and one line naming the variable,
the value and the accepted form, before any device work; good values run. Runs /bin/true
under LD_PRELOAD=liblms.so, as users run programs."""
import os
import subprocess
import sys

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
]
GOOD = [
    ("LMS_THRESHOLD_KB", "0"), ("LMS_THRESHOLD_KB", "4K"), ("LMS_EXCLUDE_MB", "2G"),
    ("LMS_HOST_LIMIT_MB", "512"), ("LMS_MODE", "cap"), ("LMS_MODE", "off"),
    ("LMS_LOG_LEVEL", "3"), ("LMS_STATS", "json"), ("LMS_POLICY", "lru"),
]

def run(name, value):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LMS_")}
    env["LD_PRELOAD"] = ":".join(preload)
    env[name] = value
    return subprocess.run(["/bin/true"], env=env, capture_output=True, text=True, timeout=60)

print("1..%d" % (len(BAD) * 2 + len(GOOD)))
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
sys.exit(1 if failed else 0)
