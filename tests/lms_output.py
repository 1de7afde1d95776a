#!/usr/bin/env python3
"""liblms's output on a small workload over the simulated GPU: the log lines (allocate with
its figures, evict, restore, the options at start-up), the exit statistics as JSON and as a
table, the trace file (swaps, evictions with reasons, launch uses with kernel names), the NVTX
ranges around swaps (seen by tests/nvtx_counter.so, as Nsight Systems would see them), and the
dump of live allocations before an out-of-memory error."""
import json
import os
import re
import subprocess
import sys
import tempfile

build = os.environ.get("LMS_BUILD_DIR", "build")
workload = os.path.join(build, "tests", "lms_workload")
nvtx_counter = os.path.abspath(os.path.join(build, "tests", "nvtx_counter.so"))
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


def run(*args, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("LMS_", "NVTX_"))}
    full.update({"LMS_THRESHOLD_KB": "64", "LMS_EXCLUDE_MB": "0", "LMS_SIM_CAPACITY_MB": "16",
                 "LMS_SIM_CONTEXT_RESERVE_MB": "0", "LMS_SIM_KERNEL_RESERVE_MB": "0"})
    full.update(env)
    return subprocess.run([workload, *args], env=full, capture_output=True, text=True, timeout=120)


def trace_events(path):
    with open(path) as f:
        trace = json.load(f)
    return trace["traceEvents"] if isinstance(trace, dict) else trace


print("1..30")
with tempfile.TemporaryDirectory() as tmp:
    trace_path = os.path.join(tmp, "run.json")
    p = run(LMS_LOG_LEVEL="3", LMS_STATS="json", LMS_TRACE=trace_path, LMS_TRACE_USES="1")
    ok(p.returncode == 0, "the workload's data survives evictions (status %d)" % p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    # 1 MiB of 16 MiB demanded (6%), its 2 MiB handle allocated (12%), 14 MiB available (87%).
    ok(any(re.match(r"\[LMS:0\] allocate: size=1048576 \[count=1 demanded=6% allocated=12% "
                    r"available=87%\] ptr=0x[0-9a-f]+$", l) for l in lines),
       "the first allocate line carries count, demanded, allocated and available", p.stderr)
    ok(any(l.startswith("[LMS:0] evict: size=1048576 ") for l in lines), "evictions are logged at level 3, with the requested size")
    ok(any(l.startswith("[LMS:0] restore: size=1048576 ") for l in lines), "restores are logged at level 3, with the requested size")
    stats = [l for l in lines if l.startswith('{"liblms"')]
    ok(len(stats) == 1, "LMS_STATS=json prints one JSON line", p.stderr)
    s = json.loads(stats[0])["liblms"] if stats else {}
    ok(s.get("allocations") == 12 and s["devices"][0]["soft_limit"] == 16 * MiB
       and s["devices"][0]["peak_demanded"] == 12 * MiB,
       "allocations and peak demanded against the soft limit", stats)
    ok(s and s["swapped_out"]["count"] > 0 and s["swapped_in"]["count"] > 0 and s["evictions"]["limit"] > 0
       and s["evictions"]["demand"] > 0 and s["peak_host_pool"] > 0,
       "swaps, evictions by reason and the host pool's peak", stats)
    ok(s and s.get("unscanned_launches") == 0, "every launch's parameters were scanned", stats)

    events = trace_events(trace_path)
    names = [e.get("name") for e in events]
    ok("swap out" in names and "swap in" in names, "the trace holds swaps")
    copied = {d: sum(e["args"]["bytes"] for e in events if e.get("name") == "swap " + d) for d in ("out", "in")}
    ok(s and copied["out"] == s["swapped_out"]["bytes"] and copied["in"] == s["swapped_in"]["bytes"],
       "the statistics count the bytes the trace's swaps copied", (copied, stats))
    reasons = {e["args"]["reason"] for e in events if e.get("name") == "evict"}
    ok(reasons == {"limit", "demand"}, "evictions in the trace carry their reasons", reasons)
    launches = [e for e in events if e.get("cat") == "launch"]
    ok(any(e.get("name") == "add" for e in launches) and any(e.get("name") == "memcpy" for e in launches),
       "launch uses name the kernel (and memcpy)", [e.get("name") for e in launches][:10])

    ok(s and s["devices"][0].get("moved_per_iteration") == [],
       "with no learned iteration (LRU), no iteration's bytes are counted", stats)

    # A loop of 12 kernels over 1 MiB buffers, 4 of which fit: lookahead learns it, and the
    # statistics give what each of its last 16 iterations moved. At least the 8 buffers that do
    # not fit go out and come back every iteration: 16 MiB.
    p = run("loop", LMS_POLICY="lookahead", LMS_STATS="json", LMS_SIM_CAPACITY_MB="8")
    stats = [json.loads(l)["liblms"] for l in p.stderr.splitlines() if l.startswith('{"liblms"')]
    moved = stats[0]["devices"][0].get("moved_per_iteration", []) if stats else []
    ok(p.returncode == 0 and len(moved) == 16 and len(set(moved)) == 1 and 16 * MiB <= moved[0] <= 24 * MiB,
       "a learned loop: the bytes each of its last 16 iterations moved, the same each time (%s)"
       % (moved[:1] or "none"), p.stderr)
    # Once the loop is learned, liblms keeps room free ahead of need: the evictions that do so
    # are counted as such, not as a call's demand, for which a call waits.
    evictions = stats[0].get("evictions", {}) if stats else {}
    ok(evictions.get("room", 0) > 0 and evictions.get("plan", 0) > 0,
       "a learned loop: evictions to keep room free are counted apart from a call's demand", stats)
    p = run("loop", LMS_POLICY="lookahead", LMS_STATS="table", LMS_SIM_CAPACITY_MB="8")
    ok(re.search(r"device 0 +moved [\d.]+ MiB an iteration \(the mean of its last 16 iterations of 12 steps\)", p.stderr),
       "the table gives their mean, and the iteration's length", p.stderr)
    # A short loop learned first (on the H100, cuDNN's algorithm search before the first training
    # step), then the 12-step one for fewer iterations than are kept: only the 12-step loop's
    # iterations count, not a mean over iterations of both lengths.
    p = run("burst-loop", LMS_POLICY="lookahead", LMS_STATS="json", LMS_SIM_CAPACITY_MB="8")
    stats = [json.loads(l)["liblms"] for l in p.stderr.splitlines() if l.startswith('{"liblms"')]
    device = stats[0]["devices"][0] if stats else {}
    moved = device.get("moved_per_iteration", [])
    ok(p.returncode == 0 and device.get("iteration_steps") == 12 and 0 < len(moved) < 10
       and all(16 * MiB <= m <= 24 * MiB for m in moved),
       "after a shorter loop, only the iterations of the one learned last count (%s of %s steps)"
       % (moved, device.get("iteration_steps")), p.stderr)

    p = run(LMS_LOG_LEVEL="1", LMS_STATS="table")
    ok("option LMS_THRESHOLD_KB = 64 KiB (environment)" in p.stderr
       and "option LMS_MODE = swap (default)" in p.stderr, "level 1 logs every option and where it came from",
       p.stderr)
    ok(" statistics, run time " in p.stderr and re.search(r"swapped out\s+\d+\s+[\d.]+ MiB\s+[\d.]+ s", p.stderr),
       "LMS_STATS=table prints the table in binary units", p.stderr)
    p = run()
    ok(p.returncode == 0 and p.stderr == "", "level 0 and no stats: silent", p.stderr)
    p = run("unscanned", LMS_STATS="json")
    stats = [json.loads(l)["liblms"] for l in p.stderr.splitlines() if l.startswith('{"liblms"')]
    ok(p.returncode == 0 and stats and stats[0].get("unscanned_launches") == 1,
       "a launch whose parameters the driver will not describe is counted, and its data survive", p.stderr)
    p = run(LMS_TRACE=trace_path)
    ok(p.returncode == 2 and "LMS_TRACE" in p.stderr, "an existing trace file is never overwritten: status 2",
       p.stderr)

    # NVTX: one range per swap copy, each ended; the swaps out match the statistics.
    p = run(LMS_STATS="json", NVTX_INJECTION64_PATH=nvtx_counter)
    counts = re.search(r"^nvtx liblms: swap out (\d+) swap in (\d+) other (\d+) ended (\d+) unmatched (\d+)$",
                       p.stderr, re.M)
    ok(p.returncode == 0 and counts, "the NVTX tool attaches and reports", p.stderr)
    out_n, in_n, other_n, ended_n, unmatched_n = map(int, counts.groups()) if counts else (0,) * 5
    stats = [json.loads(l)["liblms"] for l in p.stderr.splitlines() if l.startswith('{"liblms"')]
    ok(stats and out_n == stats[0]["swapped_out"]["count"] > 0,
       "one NVTX range per swap out (%d), as many as the statistics count" % out_n, p.stderr)
    ok(stats and 0 < in_n <= stats[0]["swapped_in"]["count"],
       "an NVTX range per swap in that copies (%d)" % in_n, p.stderr)
    ok(other_n == 0 and unmatched_n == 0 and ended_n == out_n + in_n, "every range ended once", p.stderr)

    # Out of memory: the dump goes to stderr even at log level 0, once per interval of retries.
    p = run("oom", LMS_MODE="cap")
    ok(p.returncode == 0, "the out-of-memory workload gets its errors (status %d)" % p.returncode, p.stderr)
    dumps = p.stderr.count("liblms: live allocations (oom):")
    ok(dumps == 2, "one dump for 20 quick retries, one more after the interval (%d)" % dumps, p.stderr)
    ok(p.stderr.count("liblms: 16 live allocations") == 2, "each dump lists the 16 live allocations",
       p.stderr)
    oom_trace = os.path.join(tmp, "oom.json")
    p = run("oom", LMS_MODE="cap", LMS_TRACE=oom_trace)
    events = trace_events(oom_trace) if p.returncode == 0 else []
    dump_reasons = [e["args"]["reason"] for e in events if e.get("name") == "lms.dump"]
    live = [e for e in events if e.get("name") == "lms.live"]
    ok(p.returncode == 0 and dump_reasons == ["oom", "oom"] and len(live) == 32
       and sum(e.get("name") == "oom" for e in events) == 22 and "live allocations" not in p.stderr,
       "with a trace the dumps go into it, every error is an oom event", (p.stderr, dump_reasons, len(live)))
sys.exit(1 if failed else 0)
