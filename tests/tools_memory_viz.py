#!/usr/bin/env python3
"""lms-trace export --memory-viz read by PyTorch's own torch.cuda._memory_viz: its text
summaries and its HTML viewers take the snapshot of a scripted trace, which has live
segments, swaps, frees and an out-of-memory error. Skips where torch is not installed (it is
not a dependency of liblms)."""
import importlib.util
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tests"))
from tools_tap import LMS_TRACE, done, is_equal, ok, plan, run, scratch, workload  # noqa: E402

if importlib.util.find_spec("torch") is None:
    print("1..0 # SKIP torch is not installed")
    sys.exit(0)
import pickle  # noqa: E402

from torch.cuda import _memory_viz  # noqa: E402

plan(6)
tmp = scratch()
trace, snapshot = os.path.join(tmp, "run.json"), os.path.join(tmp, "run.pickle")
workload(trace, "--uses", "--dump-signal", "USR1")       # the last allocation stays live
code, out, err = run([LMS_TRACE, "export", "--memory-viz", trace, "-o", snapshot])
is_equal(code, 0, "export" + (f": {err}" if err else ""))
data = pickle.load(open(snapshot, "rb"))
summary = _memory_viz.segsum(data)
ok("segments: 1" in summary and "total_allocated: 256.0MiB" in summary, "segsum reads the live segment", summary)
text = _memory_viz.trace(data)
ok("cudaMalloc" in text and "del " in text and "OutOfMemoryError" in text, "trace replays allocations, frees and the OOM", text[:800])
ok("segment_unmap" in text and "segment_map" in text, "and shows the swaps as segments unmapped and mapped", text[:800])
html = _memory_viz.trace_plot(data)
ok(html.lstrip().startswith("<!DOCTYPE html>") and "snapshot.pickle" in html, "trace_plot makes the HTML viewer")
plot = getattr(_memory_viz, "segment_plot", None)
ok(plot is None or "snapshot.pickle" in plot(data), "segment_plot too, where this torch has it")
done()
