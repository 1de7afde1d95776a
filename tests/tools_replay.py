#!/usr/bin/env python3
"""lms-trace tune against the library itself: liblms on the simulated GPU records one run
of tests/lms_workload (twelve 1 MiB buffers on a 16 MiB device); tune replays it through the
same policy code for other settings; each prediction must equal the swap traffic liblms
really produces when run at that setting."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tests"))
from tools_tap import BUILD, LMS_TRACE, done, is_equal, ok, plan, run, scratch  # noqa: E402

PROGRAM = os.path.join(BUILD, "tests", "lms_workload")
if not os.access(PROGRAM, os.X_OK):
    print(f"1..0 # SKIP {PROGRAM} is not built (liblms on the simulator)")
    sys.exit(0)

SETTINGS = [(64, 0), (64, 2), (64, 6), (1024, 4), (2048, 0)]   # (LMS_THRESHOLD_KB, LMS_EXCLUDE_MB)
plan(3 + 2 * len(SETTINGS))
tmp = scratch()


def record(threshold_kb, exclude_mb, name="run"):
    path = os.path.join(tmp, f"{name}-t{threshold_kb}-e{exclude_mb}.json")
    # The driver's own memory (the context's, kernels' first launches) is left out: tune
    # replays liblms's decisions, not the driver's out-of-memory answers below its limit.
    env = dict(os.environ, LMS_SIM_CAPACITY_MB="16", LMS_SIM_CONTEXT_RESERVE_MB="0",
               LMS_SIM_KERNEL_RESERVE_MB="0", LMS_THRESHOLD_KB=str(threshold_kb),
               LMS_EXCLUDE_MB=str(exclude_mb), LMS_TRACE=path, LMS_TRACE_USES="1")
    code, out, err = run([PROGRAM], env=env)
    return code, err, path


def mib(n):
    return f"{n / (1 << 20):.1f} MiB" if n else "0 B"


code, err, recording = record(64, 0, "recording")
is_equal(code, 0, "lms_workload runs under liblms with a trace" + (f": {err}" if err else ""))
events = json.load(open(recording))["traceEvents"]
ok(any(e.get("cat") == "launch" for e in events), "the library recorded its launches and copies")
thresholds = ",".join(str(t) for t in sorted({t for t, _ in SETTINGS}))
excludes = ",".join(str(e) for e in sorted({e for _, e in SETTINGS}))
code, out, err = run([LMS_TRACE, "tune", recording, "--threshold-kb", thresholds, "--exclude-mb", excludes])
is_equal(code, 0, "tune replays the recording" + (f": {err}" if err else ""))
predicted = {}
for line in out.splitlines():
    row = re.match(r"lru\s+(\d+)\s+(\d+)\s+(\S+ \S+)\s+(\S+ \S+)\s", line)
    if row:
        predicted[(int(row[1]), int(row[2]))] = (row[3], row[4])

for threshold_kb, exclude_mb in SETTINGS:
    code, err, path = record(threshold_kb, exclude_mb)
    swaps = [e for e in json.load(open(path))["traceEvents"] if e["ph"] == "X"]
    actual = (mib(sum(e["args"]["bytes"] for e in swaps if e["name"] == "swap out")),
              mib(sum(e["args"]["bytes"] for e in swaps if e["name"] == "swap in")))
    is_equal(code, 0, f"run at LMS_THRESHOLD_KB={threshold_kb} LMS_EXCLUDE_MB={exclude_mb}")
    is_equal(predicted.get((threshold_kb, exclude_mb)), actual,
             f"tune predicts its swap traffic (out, in) {actual}")
done()
