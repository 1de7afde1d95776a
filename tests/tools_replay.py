#!/usr/bin/env python3
"""lms-trace tune against the library itself: liblms on the simulated GPU records one run
of tests/lms_workload (twelve 1 MiB buffers on a 16 MiB device); tune replays it through the
same policy code for other settings; each prediction must equal the swap traffic liblms
really produces when run at that setting. Then the same for a training loop, the trainer on
the simulated GPU in a 24 MiB cache, whose iteration the lookahead policy learns: tune's
prediction for each policy is again what liblms does; and with LMS_PIECE_MB, which splits the
trainer's larger allocations into pieces, each swapped alone, tune splits them as liblms does."""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tests"))
from tools_tap import BUILD, LMS_RUN, LMS_TRACE, done, is_equal, ok, plan, run, scratch  # noqa: E402

PROGRAM = os.path.join(BUILD, "tests", "lms_workload")
TRAINER = os.path.join(BUILD, "trainer", "lms-trainer")
for program in (PROGRAM, TRAINER):
    if not os.access(program, os.X_OK):
        print(f"1..0 # SKIP {program} is not built (liblms on the simulator)")
        sys.exit(0)

SETTINGS = [(64, 0), (64, 2), (64, 6), (1024, 4), (2048, 0)]   # (LMS_THRESHOLD_KB, LMS_EXCLUDE_MB)
H100_MB = 81079
TRAIN_CACHES_MB = [24, 19]          # the trainer's cache: the simulated H100 less LMS_EXCLUDE_MB
plan(3 + 2 * len(SETTINGS) + 3 + 2 * len(TRAIN_CACHES_MB) + 2)
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


def swapped(path):
    """The (out, in) swap traffic a trace recorded, as tune prints it."""
    swaps = [e for e in json.load(open(path)) if e["ph"] == "X"]
    return (mib(sum(e["args"]["bytes"] for e in swaps if e["name"] == "swap out")),
            mib(sum(e["args"]["bytes"] for e in swaps if e["name"] == "swap in")))


def in_bytes(text):
    """tune's "170.0 MiB" in bytes."""
    value, unit = text.split()
    return float(value) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[unit]


def predictions(out):
    """tune's table: {(policy, threshold KB, exclude MB): (swap out, swap in)}."""
    rows = (re.match(r"(lru|lookahead)\s+(\d+) KiB\s+(\d+) MiB\s+(\S+ \S+)\s+(\S+ \S+)\s", line) for line in out.splitlines())
    return {(row[1], int(row[2]), int(row[3])): (row[4], row[5]) for row in rows if row}


code, err, recording = record(64, 0, "recording")
is_equal(code, 0, "lms_workload runs under liblms with a trace" + (f": {err}" if err else ""))
events = json.load(open(recording))
ok(any(e.get("cat") == "launch" for e in events), "the library recorded its launches and copies")
thresholds = ",".join(str(t) for t in sorted({t for t, _ in SETTINGS}))
excludes = ",".join(str(e) for e in sorted({e for _, e in SETTINGS}))
code, out, err = run([LMS_TRACE, "tune", recording, "--threshold-kb", thresholds, "--exclude-mb", excludes])
is_equal(code, 0, "tune replays the recording" + (f": {err}" if err else ""))
predicted = predictions(out)

for threshold_kb, exclude_mb in SETTINGS:
    code, err, path = record(threshold_kb, exclude_mb)
    actual = swapped(path)
    is_equal(code, 0, f"run at LMS_THRESHOLD_KB={threshold_kb} LMS_EXCLUDE_MB={exclude_mb}")
    is_equal(predicted.get(("lru", threshold_kb, exclude_mb)), actual,
             f"tune predicts its swap traffic (out, in) {actual}")


# tune replays what calls need, not the restores liblms makes ahead of need (LMS_PREFETCH): those
# depend on when evictions finish, which a replay without a clock cannot know.
TRAIN_ENV = dict(os.environ, LMS_SIM_DEVICE="h100", LMS_PREFETCH="0")
if os.environ.get("SANITIZE") == "address":   # ASan's runtime has to come first in the process
    TRAIN_ENV["LD_PRELOAD"] = subprocess.check_output(["gcc", "-print-file-name=libasan.so"], text=True).strip()


def train(cache_mb, policy, piece_mb=0):
    """Eight iterations of cifar10_quick under liblms in a cache of cache_mb."""
    path = os.path.join(tmp, f"train-{policy}-{cache_mb}-p{piece_mb}.json")
    code, out, err = run([LMS_RUN, "--sim", "--threshold-kb", "16", "--exclude-mb", str(H100_MB - cache_mb),
                          "--policy", policy, "--trace", path, "--uses", "--",
                          TRAINER, "train", "--model", "cifar10_quick", "--batch", "16", "--iters", "8",
                          "--test-interval", "0", "--display", "0", "--sim",
                          "--snapshot-prefix", os.path.join(tmp, "snapshot")],
                         env=dict(TRAIN_ENV, LMS_PIECE_MB=str(piece_mb)))
    traced = re.search(r"^lms-run: tracing to (.*)$", err, re.M)   # lms-run puts the pid in the name
    return code, err, traced[1] if traced else path


cache_mb = TRAIN_CACHES_MB[0]
code, err, recording = train(cache_mb, "lru")
is_equal(code, 0, f"the trainer runs under liblms in a {cache_mb} MiB cache" + (f": {err}" if code else ""))
code, out, err = run([LMS_TRACE, "tune", recording, "--threshold-kb", "16",
                      "--exclude-mb", ",".join(str(H100_MB - c) for c in TRAIN_CACHES_MB)])
predicted = predictions(out)
lru, lookahead = (predicted.get((p, 16, H100_MB - cache_mb)) for p in ("lru", "lookahead"))
is_equal(lru, swapped(recording), "tune predicts the recorded run's traffic" + (f": {err}" if err else ""))
traffic = [sum(in_bytes(v) for v in p) if p else 0 for p in (lru, lookahead)]
ok(lookahead and traffic[1] < traffic[0], f"lookahead learns the training loop: less traffic predicted ({lookahead} against LRU's {lru})")
for cache_mb in TRAIN_CACHES_MB:
    code, err, path = train(cache_mb, "lookahead")
    actual = swapped(path)
    is_equal(code, 0, f"the trainer runs under LMS_POLICY=lookahead in a {cache_mb} MiB cache" + (f": {err}" if code else ""))
    is_equal(predicted.get(("lookahead", 16, H100_MB - cache_mb)), actual,
             f"tune predicts its swap traffic (out, in) {actual}")

# Pieces of 2 MiB (1 MiB rounded up to the granularity): the trace's uses and swaps name them.
cache_mb = TRAIN_CACHES_MB[0]
code, err, recording = train(cache_mb, "lru", piece_mb=1)
events = json.load(open(recording))
starts = {e["args"]["addr"] for e in events if e["name"] == "alloc"}
pieces = {u for e in events if e.get("cat") == "launch" for u in e["args"].get("uses", [])} - starts
ok(code == 0 and pieces, f"the trainer runs under LMS_PIECE_MB=1 in a {cache_mb} MiB cache, "
   f"its launches using {len(pieces)} pieces past an allocation's start" + (f": {err}" if code else ""))
code, out, err = run([LMS_TRACE, "tune", recording, "--threshold-kb", "16", "--exclude-mb", str(H100_MB - cache_mb),
                      "--policy", "lru"])
is_equal(predictions(out).get(("lru", 16, H100_MB - cache_mb)), swapped(recording),
         "tune splits as liblms does: it predicts the recorded run's traffic" + (f": {err}" if err else ""))
done()
