#!/usr/bin/env python3
"""tools/lms-timeline summary: each engine's busy share, the copies' bytes and rates, the time
both copy engines ran at once, copies with no kernel, idle time and the host's waits, per
window between kernels of a name; stalls: the stretches with no kernel, the kernel that ended
each, and what the copies and the host did meanwhile; on timelines made by hand, whose figures
are known, and on one the simulated GPU writes for a run that swaps; clear errors for bad files
and arguments."""
import gzip
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tests"))
from tools_tap import BUILD, done, is_equal, ok, plan, run, scratch, timeline_slice  # noqa: E402

LMS_TIMELINE = os.path.join(BUILD, "tools", "lms-timeline")
WORKLOAD = os.path.join(BUILD, "tests", "lms_workload")
plan(18)
tmp = scratch()


def write(name, events, close=True):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        text = json.dumps(events, indent=0)
        f.write(text if close else text.rstrip().rstrip("]"))
    return path


X = timeline_slice


# Two windows of 1000 us between the kernels named "step". In the first: compute busy 0-400 us,
# a copy in of 1 GB over 200-700, a copy out of 0.5 GB over 500-900; the host waits 600-800.
# The second repeats the first 1000 us later, then one last "step" ends it.
first = [X(0, 0, "step_kernel", 0, 100), X(0, 0, "other", 100, 300), X(0, 1, "copy", 200, 500, 10**9),
         X(0, 2, "copy", 500, 400, 5 * 10**8), X(1000, 0, "host waits", 600, 200)]
second = [dict(e, ts=e["ts"] + 1000) for e in first]
events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}}] + first + second \
    + [X(0, 0, "step_kernel", 2000, 10)]
hand = write("hand.json", events)
code, out, err = run([LMS_TIMELINE, "summary", hand, "--iteration", "step"])
expected_window = ("1.00 ms; busy: compute 40.0%, copies in 50.0% (1.00 GB at 2000.0 GB/s), copies out 40.0% "
                   "(0.50 GB at 1250.0 GB/s); both copy engines 20.0%; copying with no kernel 50.0%; idle 10.0%; "
                   "host waits 20.0%; moved 1.50 GB, 1500.0 GB/s")
is_equal(code, 0, "summary runs" + (f": {err}" if err else ""))
is_equal(out.splitlines(), ["GPU 0: 2 windows from kernels named like 'step'", f"  from 0.00 ms: {expected_window}",
                            f"  from 1.00 ms: {expected_window}", f"  mean: {expected_window}"],
         "a window's shares, bytes, rates while busy, overlap, idle time and host waits, then their mean")
code, out, err = run([LMS_TIMELINE, "summary", hand, "--iteration", "step", "--every", "2"])
ok(code == 0 and "1 window from" in out and "2.00 ms; busy: compute 40.0%" in out,
   "--every 2: one window of two iterations", out + err)
code, out, err = run([LMS_TIMELINE, "summary", hand, "--iteration", "step", "--last", "1"])
ok(code == 0 and out.count("from ") == 2 and "from 1.00 ms" in out and "mean" not in out, "--last 1: the last window alone",
   out + err)
with open(hand, "rb") as f, gzip.open(os.path.join(tmp, "hand.json.gz"), "wb") as z:
    z.write(f.read())
code, out, err = run([LMS_TIMELINE, "summary", os.path.join(tmp, "hand.json.gz"), "--iteration", "step"])
ok(code == 0 and f"  mean: {expected_window}" in out, "a gzip-compressed timeline (as a GPU run's are kept) is read",
   out + err)
code, out, err = run([LMS_TIMELINE, "summary", write("open.json", events, close=False)])
ok(code == 0 and "GPU 0: 1 window, the whole run" in out and "2.01 ms" in out,
   "an array a killed run left open is read; without --iteration the whole run is one window", out + err)

# stalls: in each window no kernel runs from 400 us to the next window's "step" at 1000; the copy
# in moves 0.6 of its 1 GB meanwhile (300 of its 500 us), the copy out all its 0.5 GB, and the
# host waits 200 of the 600 us.
code, out, err = run([LMS_TIMELINE, "stalls", hand, "--iteration", "step", "--last", "2"])
stretch = ["    at 0.40 ms: no kernel for 0.60 ms, until step_kernel; copies in 0.60 GB, out 0.50 GB; host waits 33%",
           "    in all: 0.60 ms, 60.0% of the window, in 1 stretch of at least 0.5 ms"]
is_equal(out.splitlines(), ["GPU 0: 2 windows from kernels named like 'step'", "  from 0.00 ms (1.00 ms):"] + stretch
         + ["  from 1.00 ms (1.00 ms):"] + stretch,
         "stalls: each stretch without a kernel, the kernel that ends it, the copies' bytes and the host's waits in it"
         + (f": {err}" if err else ""))
# Kernels at 0-100 and 300-400 us, 200 us apart, a copy in of 0.3 GB over 50-350: a stretch of
# 0.2 ms shows at --min-ms 0.2, with two thirds of the copy in it, and not at the default 0.5.
gap = write("gap.json", [X(0, 0, "a", 0, 100), X(0, 0, "b", 300, 100), X(0, 1, "copy", 50, 300, 3 * 10**8)])
code, out, err = run([LMS_TIMELINE, "stalls", gap, "--min-ms", "0.2"])
is_equal(out.splitlines()[1:], ["  from 0.00 ms (0.40 ms):",
                                "    at 0.10 ms: no kernel for 0.20 ms, until b; copies in 0.20 GB, out 0.00 GB; host waits 0%",
                                "    in all: 0.20 ms, 50.0% of the window, in 1 stretch of at least 0.2 ms"],
         "--min-ms 0.2: the stretch between two kernels, with the share of a copy that overlaps it" + (f": {err}" if err else ""))
code, out, err = run([LMS_TIMELINE, "stalls", gap])
ok(code == 0 and "in all: 0.00 ms, 0.0% of the window, in 0 stretches of at least 0.5 ms" in out,
   "at the default 0.5 ms, none", out + err)

# The simulated GPU's timeline of liblms's test program swapping under a 16 MiB device: its
# copies both ways, every byte of them counted.
env = {k: v for k, v in os.environ.items() if not k.startswith("LMS_")}
env.update(LD_LIBRARY_PATH=os.path.join(BUILD, "sim"), LMS_SIM_CAPACITY_MB="16", LMS_SIM_CONTEXT_RESERVE_MB="0",
           LMS_SIM_KERNEL_RESERVE_MB="0", LMS_THRESHOLD_KB="64", LMS_EXCLUDE_MB="0",
           LMS_SIM_TIMELINE=os.path.join(tmp, "sim.json"))
env.pop("LD_PRELOAD", None)
p = subprocess.run([WORKLOAD], env=env, capture_output=True, text=True, timeout=120)
is_equal(p.returncode, 0, "the workload runs on the simulated GPU" + (f": {p.stderr[-2000:]}" if p.returncode else ""))
simulated = json.load(open(os.path.join(tmp, "sim.json")))
copied = [sum(e["args"]["bytes"] for e in simulated if e.get("ph") == "X" and e["pid"] == 0 and e["tid"] == t) for t in (1, 2)]
code, out, err = run([LMS_TIMELINE, "summary", os.path.join(tmp, "sim.json")])
m = re.search(r"copies in [\d.]+% \(([\d.]+) GB at [\d.]+ GB/s\), copies out [\d.]+% \(([\d.]+) GB", out)
ok(code == 0 and m and copied[0] > 0 and copied[1] > 0
   and [m[1], m[2]] == [f"{copied[0] / 1e9:.2f}", f"{copied[1] / 1e9:.2f}"],
   f"the simulated run: its copies both ways ({copied[0]} and {copied[1]} bytes), counted whole", out + err)

# Bad input is named.
code, out, err = run([LMS_TIMELINE, "summary", os.path.join(tmp, "none.json")])
ok(code == 2 and "none.json" in err and "No such file" in err, "a missing file is named", err)
code, out, err = run([LMS_TIMELINE, "summary", write("bad.json", {"x": 1})])
ok(code == 2 and "bad.json: not a timeline" in err, "a file that is not a timeline", err)
with open(os.path.join(tmp, "text.json"), "w") as f:
    f.write("hello\n")
code, out, err = run([LMS_TIMELINE, "summary", os.path.join(tmp, "text.json")])
ok(code == 2 and "text.json: not a timeline (JSON" in err, "a file that is not JSON", err)
with open(os.path.join(tmp, "binary.json"), "wb") as f:
    f.write(bytes(range(128, 256)))
code, out, err = run([LMS_TIMELINE, "summary", os.path.join(tmp, "binary.json")])
ok(code == 2 and "binary.json: not a timeline (not UTF-8 text" in err, "a file that is not text", err)
code, out, err = run([LMS_TIMELINE, "summary", hand, "--iteration", "nothing-like-it"])
ok(code == 2 and "'nothing-like-it'" in err and "found 0" in err, "a kernel name that starts no window", err)
code, out, err = run([LMS_TIMELINE, "summary", hand, "--every", "2"])
ok(code == 2 and "--every" in err and "--iteration" in err, "--every without --iteration", err)
code, out, err = run([LMS_TIMELINE, "stalls", hand, "--min-ms", "0"])
ok(code == 2 and "--min-ms 0: expected a number of milliseconds above 0" in err, "stalls --min-ms 0", err)
done()
