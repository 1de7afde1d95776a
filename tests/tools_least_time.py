#!/usr/bin/env python3
"""The bench's bound on the fastest schedule (tools/bench/least_time.py) on scripted runs whose
answers follow from the model by hand: everything fits (the kernels' own times), two kernels
that each need what the other keeps out (the copies between them, both ways at the overlap
rate), one kernel larger than the cap (the rest read in host memory at the zero-copy rate), and
clear refusals of runs it cannot bound."""
import json
import os
import sys

SOURCE = os.environ.get("LMS_SOURCE_DIR", ".")
sys.path.insert(0, os.path.join(SOURCE, "tests"))
sys.path.insert(0, os.path.join(SOURCE, "tools", "bench"))
import tools_tap  # noqa: E402
from tools_tap import done, is_equal, ok, plan, scratch  # noqa: E402
import least_time  # noqa: E402

GB = 10**9
plan(11)
tmp = scratch()
# The simulated H100's figures, as its report gives them.
LINK = {"h2d": 55.0, "d2h": 55.0, "bidirectional": 93.7, "overlap": 92.4}
KERNELS = {"fp32_flops": 494.7e12, "hbm_bytes": 2880e9, "kernel_efficiency": 0.1866, "kernel_min_ns": 3000,
           "zero_copy_bytes": 51.6e9, "zero_copy_direction_load": 55.0 / 51.6, "zero_copy_read_request_load": 0.957}
FLOPS_PER_MS = KERNELS["fp32_flops"] * KERNELS["kernel_efficiency"] * 1e-3


def run(name, allocations, loop, iterations=3, cached=True, uses=True):
    """Writes a run's trace, timeline and report: allocations {address: bytes}; loop, the
    iteration's kernels [(name, flops, [(address, bytes read, bytes written)])], each reaching
    and using its allocations whole; returns their paths."""
    trace = [{"ph": "M", "name": "lms.settings", "args": {"uses": uses, "piece_bytes": 0}}]
    trace += [{"ph": "i", "name": "alloc", "ts": 0, "args": {"addr": hex(a), "bytes": n, "cached": cached}}
              for a, n in allocations.items()]
    timeline, t = [], 1.0
    for _ in range(iterations):
        for kernel, flops, reaches in loop:
            trace.append({"ph": "i", "cat": "launch", "name": kernel, "ts": t,
                          "args": {"uses": [hex(a) for a, _, _ in reaches]}})
            timeline.append({"ph": "X", "pid": 0, "tid": 0, "name": kernel, "ts": t, "dur": 1.0,
                             "args": {"flops": flops, "reaches": [[hex(a), allocations[a], r + w, w]
                                                                  for a, r, w in reaches]}})
            t += 1
    paths = [os.path.join(tmp, f"{name}.{what}.json") for what in ("trace", "timeline", "report")]
    for path, events in zip(paths, (trace, timeline, {"link_gbps": LINK, "kernels": KERNELS})):
        with open(path, "w") as f:
            json.dump(events, f)
    return paths


def least_ms(paths, cap_bytes, iterations=3):
    return least_time.least_time(*paths, cap_bytes, "first", iterations)["ns"] / 1e6


def near(got, expected, name):
    ok(abs(got - expected) < 1e-6 * expected, name, f"got {got!r}, expected {expected!r}")


# Two allocations of 1 GB, each the only one of a compute-bound kernel of 10 ms.
a, b = 0x100000000, 0x200000000
pair = {a: GB, b: GB}
alternating = [("first", 10 * FLOPS_PER_MS, [(a, GB, 0)]), ("second", 10 * FLOPS_PER_MS, [(b, GB, 0)])]
near(least_ms(run("roomy", pair, alternating), 2 * GB), 20.0, "both fit: the kernels' own 10 ms each")
# In room for one, each kernel needs its allocation resident and the other out by its start:
# after each kernel 1 GB goes out and 1 GB comes in, overlapping, at 92.4 GB/s together.
tight = run("tight", pair, alternating)
near(least_ms(tight, GB), 20.0 + 2 * (2 * GB / 92.4e9 * 1e3),
     "in room for one: between the kernels, 1 GB each way at the overlap rate")
second = least_time.least_time(*tight, GB, "first", 3)["kernels"][1]
ok(second["name"] == "second" and abs(second["gap_ms"] - 2 * GB / 92.4e9 * 1e3) < 1e-6 and
   abs(second["out_gb"] - 1) < 1e-6 and abs(second["in_gb"] - 1) < 1e-6 and second["ran_ms"] == 1e-3,
   "kernel by kernel: the gap before the second and what it copies, beside the run's own times", second)
# With the copies to the host first, as liblms queues the eviction that frees a restore's room:
# the copy out keeps its 55 GB/s beside the copy in, which gets what the overlap leaves (37.4),
# and moves the rest alone at 55: 1.32 GB's time at 55 between the kernels.
evictions_first = least_time.least_time(*tight, GB, "first", 3, evictions_first=True)["ns"] / 1e6
near(evictions_first, 20.0 + 2 * (1 + (55.0 - (92.4 - 55.0)) / 55.0) * GB / 55e9 * 1e3,
     "copies to the host first: the copy in gets what the copy out leaves of the overlap, then 55 alone")
code, out, err = tools_tap.run([sys.executable, os.path.join(SOURCE, "tools", "bench", "least_time.py"), *tight,
                                "1024", "first", "3", "--by-kernel"])
# In room for 1024 MiB, 2 GB less that moves each way between the kernels.
moves = 2 * GB - 1024 * 2**20
ok(code == 0 and f"the fastest schedule's {20 + 2 * 2 * moves / 92.4e9 * 1e3:.2f} ms ({4 * moves / GB:.2f} GB copied" in out,
   "least_time.py --by-kernel prints the run's iteration beside the fastest schedule's", out + err)
# One kernel reading 2 GB with no operations, in room for 1 GB: half stays in host memory, read
# at the zero-copy rate (51.6 GB/s) while the rest comes from HBM.
big = {a: 2 * GB}
reading = [("first", 0.0, [(a, 2 * GB, 0)])]
near(least_ms(run("larger", big, reading), GB), GB / 51.6e9 * 1e3,
     "a kernel larger than the cap reads the rest in host memory at the zero-copy rate")
# Allocations liblms does not cache stay on the device, outside the cap.
near(least_ms(run("uncached", pair, alternating, cached=False), GB), 20.0, "uncached allocations are not counted")
try:
    least_ms(run("uneven", pair, alternating), GB, iterations=5)
    ok(False, "a timeline whose iterations do not divide is refused")
except least_time.NoBound as e:
    ok("do not divide into 5 iterations" in str(e), "a timeline whose iterations do not divide is refused", str(e))
try:
    least_ms(run("unused", pair, alternating, uses=False), GB)
    ok(False, "a trace without the launches' uses is refused")
except least_time.NoBound as e:
    ok("LMS_TRACE_USES=1" in str(e), "a trace without the launches' uses is refused", str(e))
paths = run("malformed", pair, alternating)
with open(paths[1]) as f:
    events = json.load(f)
for event in events:
    del event["args"]["reaches"]
with open(paths[1], "w") as f:
    json.dump(events, f)
try:
    least_ms(paths, GB)
    ok(False, "a kernel without the spans it reaches is refused")
except least_time.NoBound as e:
    ok("lacks what it should say" in str(e), "a kernel without the spans it reaches is refused", str(e))
paths = run("missing", pair, alternating)
os.unlink(paths[2])
try:
    least_ms(paths, GB)
    ok(False, "a missing report is refused")
except least_time.NoBound as e:
    is_equal(str(e).split(":")[0], paths[2], "a missing report is refused, named")
done()
