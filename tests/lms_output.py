#!/usr/bin/env python3
"""liblms's output on a small workload over the driver double: the log lines (allocate with
its figures, evict, restore, the options at start-up), the exit statistics as JSON and as a
table, and the trace file (swaps, evictions with reasons, launch uses with kernel names)."""
import json
import os
import re
import subprocess
import sys
import tempfile

build = os.environ.get("LMS_BUILD_DIR", "build")
workload = os.path.join(build, "tests", "lms_workload")
MiB = 1 << 20
count = 0
failed = False


def ok(cond, what, detail=""):
    global count, failed
    count += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", count, what))
    if not cond:
        failed = True
        for line in str(detail).splitlines()[-20:]:
            print("# " + line)


def run(**env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("LMS_")}
    full.update({"LMS_THRESHOLD_KB": "64", "CUDADOUBLE_CAPACITY_MB": "16"})
    full.update(env)
    return subprocess.run([workload], env=full, capture_output=True, text=True, timeout=120)


print("1..14")
with tempfile.TemporaryDirectory() as tmp:
    trace_path = os.path.join(tmp, "run.json")
    p = run(LMS_LOG_LEVEL="3", LMS_STATS="json", LMS_TRACE=trace_path, LMS_TRACE_USES="1")
    ok(p.returncode == 0, "the workload's data survives evictions (status %d)" % p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    # 1 MiB of 16 MiB demanded (6%), its 2 MiB handle allocated (12%), 14 MiB available (87%).
    ok(any(re.match(r"\[LMS:0\] allocate: size=1048576 \[count=1 demanded=6% allocated=12% "
                    r"available=87%\] ptr=0x[0-9a-f]+$", l) for l in lines),
       "the first allocate line carries count, demanded, allocated and available", p.stderr)
    ok(any(l.startswith("[LMS:0] evict: size=2097152 ") for l in lines), "evictions are logged at level 3")
    ok(any(l.startswith("[LMS:0] restore: size=2097152 ") for l in lines), "restores are logged at level 3")
    stats = [l for l in lines if l.startswith('{"liblms"')]
    ok(len(stats) == 1, "LMS_STATS=json prints one JSON line", p.stderr)
    s = json.loads(stats[0])["liblms"] if stats else {}
    ok(s.get("allocations") == 12 and s["devices"][0]["soft_limit"] == 16 * MiB
       and s["devices"][0]["peak_demanded"] == 12 * MiB,
       "allocations and peak demanded against the soft limit", stats)
    ok(s and s["swapped_out"]["count"] > 0 and s["swapped_in"]["count"] > 0 and s["evictions"]["limit"] > 0
       and s["evictions"]["demand"] > 0 and s["peak_host_pool"] > 0,
       "swaps, evictions by reason and the host pool's peak", stats)

    with open(trace_path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = [e.get("name") for e in events]
    ok("swap out" in names and "swap in" in names, "the trace holds swaps")
    reasons = {e["args"]["reason"] for e in events if e.get("name") == "evict"}
    ok(reasons == {"limit", "demand"}, "evictions in the trace carry their reasons", reasons)
    launches = [e for e in events if e.get("cat") == "launch"]
    ok(any(e.get("name") == "add" for e in launches) and any(e.get("name") == "memcpy" for e in launches),
       "launch uses name the kernel (and memcpy)", [e.get("name") for e in launches][:10])

    p = run(LMS_LOG_LEVEL="1", LMS_STATS="table")
    ok("option LMS_THRESHOLD_KB = 65536 bytes (environment)" in p.stderr
       and "option LMS_MODE = swap (default)" in p.stderr, "level 1 logs every option and where it came from",
       p.stderr)
    ok("liblms statistics" in p.stderr and re.search(r"swapped out\s+\d+, [\d.]+ MiB", p.stderr),
       "LMS_STATS=table prints the table in binary units", p.stderr)
    p = run()
    ok(p.returncode == 0 and p.stderr == "", "level 0 and no stats: silent", p.stderr)
    p = run(LMS_TRACE=trace_path)
    ok(p.returncode == 2 and "LMS_TRACE" in p.stderr, "an existing trace file is never overwritten: status 2",
       p.stderr)
sys.exit(1 if failed else 0)
