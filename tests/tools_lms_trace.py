#!/usr/bin/env python3
"""lms-trace on scripted traces (tests/trace_workload.c): summary figures, a well-formed SVG,
a PyTorch memory snapshot that loads and follows the schema, tune's replay of the recorded
run, and clear errors for bad or truncated traces."""
import os
import pickle
import re
import shutil
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tests"))
from tools_tap import LMS_TRACE, done, is_equal, ok, plan, run, scratch, workload  # noqa: E402

MiB = 1 << 20
plan(47)
tmp = scratch()
trace = os.path.join(tmp, "run.json")
code, err = workload(trace, "--uses")
is_equal(code, 0, "the workload writes a trace" + (f": {err}" if err else ""))


def lms_trace(*args):
    return run([LMS_TRACE, *args])


# summary: the figures of the script.
code, out, err = lms_trace("summary", trace)
is_equal(code, 0, "summary succeeds" + (f": {err}" if err else ""))
lines = out.splitlines()


def line(prefix):
    found = [l for l in lines if l.startswith(prefix)]
    return re.sub(r"\s+", " ", found[0]) if found else None


is_equal(line("trace of"), f"trace of trace_workload (pid {line('trace of').split('pid ')[1].split(')')[0]}): "
         "policy lru, mode swap, threshold 1000.0 KiB, exclude 512.0 MiB", "summary names the settings")
is_equal(line("allocations"), "allocations 4 (640.0 MiB), 4 freed", "allocations")
is_equal(line("GPU 0 peak demanded"), "GPU 0 peak demanded 640.0 MiB of soft limit 512.0 MiB (125.0 %)",
         "peak demanded against the soft limit")
is_equal(line("GPU 0 peak resident"), "GPU 0 peak resident 640.0 MiB", "peak resident")
is_equal(line("GPU 0 peak host"), "GPU 0 peak host 512.0 MiB", "peak host")
is_equal(line("swapped out"), "swapped out 512.0 MiB in 2 copies, 20.000 ms (26.8 GB/s)", "bytes and time swapped out")
is_equal(line("swapped in"), "swapped in 256.0 MiB in 1 copies, 5.000 ms (53.7 GB/s)", "bytes and time swapped in")
is_equal(line("swap time"), "swap time 25.000 ms", "swap time")
is_equal(line("evictions"), "evictions 2 (demand 2)", "evictions by reason")
is_equal(line("out of memory"), "out of memory 1 (largest request 1.0 GiB)", "out-of-memory events")
by_bytes = out.split("top call sites by bytes allocated")[1].split("top call sites by swap traffic")[0]
sites = [re.sub(r"\s+", " ", l.strip()) for l in by_bytes.strip().splitlines()[1:]]
ok(len(sites) == 4 and sites[0].startswith("256.0 MiB 1 site_a") and sites[1].startswith("256.0 MiB 1 site_b")
   and sites[2].startswith("128.0 MiB 1 site_c") and sites[3].startswith("4.0 KiB 1 site_c"),
   "top call sites by bytes", by_bytes)
by_swaps = out.split("top call sites by swap traffic")[1]
sites = [re.sub(r"\s+", " ", l.strip()) for l in by_swaps.strip().splitlines()[1:]]
ok(len(sites) == 2 and sites[0].startswith("512.0 MiB 2 site_a") and sites[1].startswith("256.0 MiB 1 site_b"),
   "top call sites by swap traffic", by_swaps)

# plot: well-formed, self-contained SVG with the four series and the swap strips.
svg = os.path.join(tmp, "run.svg")
code, out, err = lms_trace("plot", trace, "-o", svg)
is_equal(code, 0, "plot succeeds" + (f": {err}" if err else ""))
root = ET.parse(svg).getroot()
NS = "{http://www.w3.org/2000/svg}"
is_equal(root.tag, NS + "svg", "the plot parses as XML with an svg root")
polylines = root.iter(NS + "polyline")
colors = sorted(p.get("stroke") for p in polylines)
is_equal(colors, sorted(["#d95f02", "#1b9e77", "#7570b3", "#e7298a"]), "four series: demanded, resident, host, soft limit")
texts = [t.text or "" for t in root.iter(NS + "text")]
ok({"demanded", "resident", "host", "soft limit", "swap out", "swap in", "GPU 0"} <= set(texts), "legend, strips and panel are labelled")
ok(any(r.get("fill-opacity") for r in root.iter(NS + "rect")), "swap activity is drawn")
body = open(svg).read()
ok("href" not in body and "<script" not in body, "the SVG refers to nothing outside itself")
is_equal(sorted(n for n in os.listdir(tmp) if "tmp" in n), [], "no temporary file is left behind")

# export --memory-viz: a pickle PyTorch's memory_viz reads.
snap = os.path.join(tmp, "run.pickle")
code, out, err = lms_trace("export", "--memory-viz", trace, "-o", snap)
is_equal(code, 0, "export succeeds" + (f": {err}" if err else ""))
raw = open(snap, "rb").read()
ok(raw[0] == 0x80 and raw[1] <= 4, f"pickle protocol {raw[1]} (4 or lower)")
data = pickle.loads(raw)
is_equal(sorted(data), ["device_traces", "segments"], "snapshot keys")
is_equal(data["segments"], [], "no segments: everything was freed by the end")
entries = data["device_traces"][0]
is_equal(len(data["device_traces"]), 1, "one trace per device")
actions = [e["action"] for e in entries]
is_equal(actions[:2] + actions[8:12] + actions[-3:], ["segment_alloc", "alloc", "oom", "free_requested", "free_completed",
         "segment_free", "free_requested", "free_completed", "segment_free"], "actions in order")
ok(all({"action", "addr", "size", "stream", "frames", "time_us"} <= e.keys() for e in entries if e["action"] != "oom"),
   "trace entries carry addr, size, stream, frames, time_us")
first = entries[1]
is_equal((first["addr"], first["size"], first["stream"]), (0x7f0000000000, 256 * MiB, 0x1000), "an alloc's figures")
ok(first["frames"] and first["frames"][0] == {"filename": "trace_workload", "line": 0, "name": "site_a+0x61"}
   or first["frames"][0]["name"].startswith("site_a"), "frames are {filename, line, name}", first["frames"][:1])
oom = [e for e in entries if e["action"] == "oom"][0]
is_equal((oom["size"], "device_free" in oom), (1024 * MiB, True), "oom entry")

live_trace = os.path.join(tmp, "live.json")
workload(live_trace, "--dump-signal", "USR1")
code, out, err = lms_trace("export", "--memory-viz", live_trace, "-o", snap)
segments = pickle.load(open(snap, "rb"))["segments"]
ok(code == 0 and len(segments) == 1, "an allocation live at the end is a segment", err)
seg = segments[0]
ok({"address", "total_size", "stream", "segment_type", "allocated_size", "active_size", "blocks", "device"} <= seg.keys()
   and seg["total_size"] == 256 * MiB and seg["segment_type"] == "large", "segment fields", seg.keys())
block = seg["blocks"][0]
ok(block["size"] == 256 * MiB and block["state"] == "active_allocated" and block["address"] == 0x7f0000000000
   and any(f["name"].startswith("site_a") for f in block["frames"]), "its block", block)

# tune: the replay of the recorded settings gives the recorded traffic.
code, out, err = lms_trace("tune", trace, "--threshold-kb", "1000", "--exclude-mb", "512")
row = [re.sub(r"\s+", " ", l) for l in out.splitlines() if l.startswith("lru ")]
is_equal(row, ["lru 1000 512 512.0 MiB 256.0 MiB 2 1 5.000 0"],
         "tune predicts the recorded run's swap traffic at its settings" + (f": {err}" if err else ""))
code, out, err = lms_trace("tune", trace)
rec = [l for l in out.splitlines() if l.startswith("recommended:")]
is_equal(rec, ["recommended: LMS_POLICY=lru LMS_THRESHOLD_KB=16384 LMS_EXCLUDE_MB=256 (predicted swap traffic 0 B, stall 0.000 ms)"],
         "tune recommends the setting with least traffic and most headroom")
plain = os.path.join(tmp, "plain.json")
workload(plain)
code, out, err = lms_trace("tune", plain)
ok(code == 1 and "LMS_TRACE_USES=1" in err, "tune on a trace without uses says what is missing", err)
code, out, err = lms_trace("tune", trace, "--policy", "nosuch")
ok(code == 2 and "nosuch" in err and "lru" in err, "tune names an unknown policy", err)

# Bad input: one clear error naming the file, and the offset for bad JSON.
code, out, err = lms_trace("summary", os.path.join(tmp, "absent.json"))
ok(code == 1 and "absent.json" in err, "a missing file is named", err)
text = open(trace).read()
cut = os.path.join(tmp, "cut.json")
open(cut, "w").write(text[: len(text) // 2])
code, out, err = lms_trace("summary", cut)
ok(code == 1 and "cut.json: offset" in err and "incomplete" in err, "a truncated trace: file, offset and cause", err)
bad = os.path.join(tmp, "bad.json")
open(bad, "w").write(text.replace('"ph":"X"', '"ph":X', 1))
code, out, err = lms_trace("summary", bad)
offset = text.index('"ph":"X"') + 5
ok(code == 1 and f"bad.json: offset {offset}: expected a value" in err, "malformed JSON: the exact offset", err)
killed = os.path.join(tmp, "killed.json")
workload(killed, "--die-by", "KILL")
code, out, err = lms_trace("plot", killed, "-o", os.path.join(tmp, "killed.svg"))
ok(code == 1 and "killed.json" in err and not os.path.exists(os.path.join(tmp, "killed.svg")),
   "the trace of a killed process: an error and no output file", err)
other = os.path.join(tmp, "other.json")
open(other, "w").write('{"traceEvents":[]}')
code, out, err = lms_trace("summary", other)
ok(code == 1 and "not a liblms trace" in err, "a trace from another program is recognised", err)
empty = os.path.join(tmp, "empty.json")
open(empty, "w").close()
code, out, err = lms_trace("summary", empty)
ok(code == 1 and "empty.json: offset 0" in err, "an empty file", err)
copy = os.path.join(tmp, "copy.json")
shutil.copy(trace, copy)
code, out, err = lms_trace("plot", copy, "-o", copy)
ok(code == 1 and open(copy).read() == text, "the output never replaces the trace", err)
code, out, err = lms_trace("frobnicate", trace)
ok(code == 2 and "unknown command" in err, "unknown command", err)
code, out, err = lms_trace("plot", trace)
ok(code == 2 and "-o" in err, "plot without -o", err)
done()
