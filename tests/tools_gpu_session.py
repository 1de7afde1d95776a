#!/usr/bin/env python3
"""tools/gpu-session.sh where there is no GPU: bad arguments get exit 2 and a message naming
them; a session over a build without the GPU tests says so for each, runs lms-bench, which finds
no GPU, writes its logs, skips the traced run for want of lms-bench's results, and ends within
its time. With results there, the traced run gets the first cifar10_full row's batch and cap."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tests"))
from tools_tap import done, is_equal, ok, plan, run, scratch  # noqa: E402

SCRIPT = os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tools", "gpu-session.sh")


def read(path):
    return open(path).read() if os.path.exists(path) else ""


def not_built(text):
    """The tests a session's log reports as not built."""
    return sum(1 for line in text.splitlines() if line.startswith("=== ") and "not built" in line)


plan(12)
tmp = scratch()
code, _, err = run([SCRIPT, os.path.join(tmp, "out")])
ok(code == 2 and "usage" in err, "no times: exit 2 and the usage", err)
code, _, err = run([SCRIPT, os.path.join(tmp, "out"), "1m", "60"])
ok(code == 2 and "whole seconds" in err, "a time that is not whole seconds: exit 2, saying so", err)
code, _, err = run([SCRIPT, os.path.join(tmp, "out"), "10", "60"], env=dict(os.environ, LMS_BUILD_DIR=os.path.join(tmp, "none")))
ok(code == 2 and "LMS_BUILD_DIR" in err, "a build that is not there: exit 2, naming LMS_BUILD_DIR", err)

empty = os.path.join(tmp, "empty-build")
os.makedirs(os.path.join(empty, "tests"))
out = os.path.join(tmp, "session")
began = time.monotonic()
code, said, err = run([SCRIPT, out, "20", "40"], env=dict(os.environ, LMS_BUILD_DIR=empty))
took = time.monotonic() - began
is_equal(code, 0, "a session with nothing to run ends with status 0")
check = read(os.path.join(out, "check.log"))
ok(not_built(check) == 6 and not_built(said) == 6,
   "each of the 6 GPU tests is reported not built, in check.log and in the summary", said + err)
bench = read(os.path.join(out, "bench.log"))
ok("=== lms-bench: exit" in bench and took < 40, f"lms-bench ran, its log written, within the 40 s ({took:.1f} s)", bench)
traced = read(os.path.join(out, "trace.log"))
ok("traced run: not run, no cifar10_full row" in traced and "traced run: not run" in said,
   "the traced run is skipped without lms-bench's results, and the summary says so", traced + said)

# A trainer that says how it was run, and results of an earlier lms-bench call: the traced run.
fake = os.path.join(tmp, "fake-build")
os.makedirs(os.path.join(fake, "tests"))
os.makedirs(os.path.join(fake, "trainer"))
trainer = os.path.join(fake, "trainer", "lms-trainer")
with open(trainer, "w") as f:
    f.write('#!/bin/sh\necho "trace=$LMS_TRACE exclude=$LMS_EXCLUDE_MB policy=$LMS_POLICY uses=$LMS_TRACE_USES args=$*"\n'
            # What its parent (timeout) was given: liblms preloaded there too opens the trace first.
            'echo "parent=$(tr "\\0" "\\n" < /proc/$PPID/environ | grep -c ^LD_PRELOAD=)"\n')
os.chmod(trainer, 0o755)
alone = os.path.join(fake, "trainer", "bench-cifar10")
with open(alone, "w") as f:
    f.write('#!/bin/sh\necho "batches=$BENCH_BATCHES flags=$BENCH_TRAINER_FLAGS iterations=$1"\n')
os.chmod(alone, 0o755)
out = os.path.join(tmp, "traced")
os.makedirs(os.path.join(out, "bench"))
with open(os.path.join(out, "bench", "results.json"), "w") as f:
    f.write('{"machine": {"total_mib": 81079}, "cifar10": {"cap_mib": 8192, "rows": [{"batch": 14924}]}, '
            '"settings": {"LMS_POLICY": "lookahead", "LMS_PIECE_MB": "256", "LMS_MAP_EVICTED": "0"}}')
code, said, err = run([SCRIPT, out, "5", "75"], env=dict(os.environ, LMS_BUILD_DIR=fake))
traced = read(os.path.join(out, "trace.log"))
ok(code == 0 and f"trace={os.path.join(out, 'trace.json')} exclude=72887 policy=lookahead uses=1 " in traced
   and "--model cifar10_full --batch 14924 --iters 26 --warmup 20" in traced,
   "the traced run is the first cifar10_full row's, under the same cap and settings, its trace in OUTDIR",
   traced + err)
ok("parent=0" in traced, "liblms is preloaded into the trainer alone, not into the timeout that runs it "
   "(on the H100 timeout's liblms opened the trace file first, and the trainer's refused to overwrite it)", traced)
ok("=== traced cifar10_full at batch 14924: exit 0" in said, "the summary gives its exit status", said)
ok("batches=14924 16383 16384 flags= iterations=30" in said
   and "batches=16384 flags=--workspace-limit 4096 iterations=30" in said and "=== the trainer alone: exit 0" in said,
   "then the trainer alone at batches 14924, 16383 and 16384, and at 16384 with a 4 GiB workspace", said)
code, said, err = run([SCRIPT, os.path.join(tmp, "session-2"), "5", "75"], env=dict(os.environ, LMS_BUILD_DIR=empty))
ok("=== the trainer alone: not run (under a minute left" in said,
   "the trainer alone is not run without bench-cifar10 in the build, and the summary says so", said)
done()
