#!/usr/bin/env python3
"""lms-trace on scripted traces (tests/trace_workload.c): summary figures (how the process
ended, stalls, the dumps' largest allocations, call sites by file and line), a well-formed SVG
with its markers, a PyTorch memory snapshot that loads and follows the schema, tune's replay
and its headroom, traces cut anywhere (killed by SIGKILL), standard input, --help and
--version, and clear errors for bad traces."""
import os
import pickle
import re
import shutil
import signal
import sys
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tests"))
from tools_tap import LMS_TRACE, done, is_equal, ok, plan, run, scratch, workload  # noqa: E402

MiB = 1 << 20
plan(81)
tmp = scratch()
trace = os.path.join(tmp, "run.json")
code, err = workload(trace, "--uses")
is_equal(code, 0, "the workload writes a trace" + (f": {err}" if err else ""))
source = open(os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tests", "trace_workload.c")).read().splitlines()


def line_of(text):
    """The line number of the workload's source line holding text."""
    return next(i + 1 for i, l in enumerate(source) if text in l)


SITE_A = f"site_a (tests/trace_workload.c:{line_of('void site_a(void)')})"
SITE_B = f"site_b (tests/trace_workload.c:{line_of('void site_b(void)')})"
SITE_C = f"site_c (tests/trace_workload.c:{line_of('void site_c(void)')})"


def lms_trace(*args, **kwargs):
    return run([LMS_TRACE, *args], **kwargs)


# summary: the figures of the script.
code, out, err = lms_trace("summary", trace)
is_equal(code, 0, "summary succeeds" + (f": {err}" if err else ""))
lines = out.splitlines()


def line(prefix, text=None):
    found = [l for l in (text or out).splitlines() if l.startswith(prefix)]
    return re.sub(r"\s+", " ", found[0]).strip() if found else None


ok(re.fullmatch(r"trace of trace_workload \(pid \d+\), liblms [\d.]+: policy lru, mode swap, threshold 1000.0 KiB",
                line("trace of") or ""), "summary names the program, the library's version and the settings", line("trace of"))
is_equal(line("ended"), "ended at exit", "how the process ended")
is_equal(line("allocations"), "allocations 4 (640.0 MiB), 4 freed", "allocations")
is_equal(line("GPU 0 memory"), "GPU 0 memory 1.0 GiB, soft limit 512.0 MiB (512.0 MiB left out)",
         "the device, its soft limit and what was left out of the cache")
is_equal(line("GPU 0 peak demanded"), "GPU 0 peak demanded 640.0 MiB of soft limit 512.0 MiB (125.0 %)",
         "peak demanded against the soft limit")
is_equal(line("GPU 0 peak resident"), "GPU 0 peak resident 640.0 MiB", "peak resident")
is_equal(line("GPU 0 peak host"), "GPU 0 peak host 512.0 MiB", "peak host")
is_equal(line(" "), "count bytes time bandwidth", "the swap figures have column headers")
is_equal(line("swapped out"), "swapped out 2 512.0 MiB 20.000 ms 25.0 GiB/s", "swapped out: count, bytes, time, bandwidth")
is_equal(line("swapped in"), "swapped in 1 256.0 MiB 5.000 ms 50.0 GiB/s", "swapped in")
ok(re.fullmatch(r"restore stalls 1 2\.000 ms [\d.]+ % of the run", line("restore stalls") or ""),
   "restore stalls: count, time and share of the run", line("restore stalls"))
is_equal(line("evictions"), "evictions 2 (demand 2)", "evictions by reason")
is_equal(line("out of memory"), "out of memory 1 (largest request 1.0 GiB)", "out-of-memory events")
dump = out.split("\ndump 1 (oom)")[1].split("\n\n")[0] if "\ndump 1 (oom)" in out else ""
rows = [re.sub(r"\s+", " ", l.strip()) for l in dump.splitlines()[2:]]
ok(re.match(r" at [\d.]+ ms: 4 live allocations, 640\.0 MiB \(384\.0 MiB resident, 256\.0 MiB in host memory\)", dump)
   and rows == [f"256.0 MiB 0 resident {SITE_A}", f"256.0 MiB 0 host {SITE_B}", f"128.0 MiB 0 resident {SITE_C}",
                f"4.0 KiB 0 resident {SITE_C}"], "the out-of-memory dump: its largest allocations, resident or not", dump)
by_bytes = out.split("top call sites by bytes allocated")[1].split("top call sites by swap traffic")[0]
sites = [re.sub(r"\s+", " ", l.strip()) for l in by_bytes.strip().splitlines()[1:]]
is_equal(sites, [f"256.0 MiB 1 {SITE_A}", f"256.0 MiB 1 {SITE_B}", f"128.0 MiB 2 {SITE_C}"],
         "top call sites by bytes, by function, file and line")
by_swaps = out.split("top call sites by swap traffic")[1]
sites = [re.sub(r"\s+", " ", l.strip()) for l in by_swaps.strip().splitlines()[1:]]
is_equal(sites, [f"512.0 MiB 2 {SITE_A}", f"256.0 MiB 1 {SITE_B}"], "top call sites by swap traffic")

# The program's file changed since the run: the names recorded, never wrong lines.
moved = os.path.join(tmp, "moved.json")
text = open(trace).read()
open(moved, "w").write(re.sub(r'"build_id":"[0-9a-f]+"', '"build_id":"00ff"', text))
code, out, err = lms_trace("summary", moved)
sites = out.split("top call sites by bytes allocated")[1].split("\n")[2]
ok(code == 0 and "site_a+0x" in sites and "trace_workload.c" not in out, "another build of the program: sites as recorded", sites)

# How the process ended: a signal, or a cut (SIGKILL) anywhere in the file.
termed = os.path.join(tmp, "termed.json")
code, _ = workload(termed, "--die-by", "TERM")
code, out, err = lms_trace("summary", termed)
is_equal(line("ended", out), f"ended killed by SIGTERM (signal {int(signal.SIGTERM)}); liblms wrote the trace's end",
         "summary says the process died of a signal")
killed = os.path.join(tmp, "killed.json")
code, _ = workload(killed, "--die-by", "KILL", "--repeat", "200")
code, out, err = lms_trace("summary", killed)
ok(code == 0 and re.search(r"warning: the trace is cut: it ends at byte \d+ of \d+, after \d+ whole events, [\d.]+ s "
                           r"into the run, without liblms's end event: the process was killed \(SIGKILL\)", out)
   and int(re.search(r"allocations\s+(\d+)", out)[1]) > 100, "a trace of a process killed by SIGKILL is read, and said cut", out[:600] + err)
cuts = []
for cut_at in (len(text) // 3, len(text) // 2, len(text) - 60, text.index('"ph":"X"') + 9):
    cut = os.path.join(tmp, "cut.json")
    open(cut, "w").write(text[:cut_at])
    code, out, err = lms_trace("summary", cut)
    whole = re.search(r"ends at byte (\d+) of (\d+)", out)
    cuts.append(code == 0 and whole and int(whole[2]) == cut_at and text[int(whole[1]) - 1] == "}")
ok(all(cuts), "a trace cut anywhere: read up to its last whole event, and where it ends said", cuts)
open(cut, "w").write(text.rstrip().rstrip("]"))
code, out, err = lms_trace("summary", cut)
ok(code == 0 and "warning" not in out and "ended                at exit" in out,
   "a trace whose closing bracket alone is missing is whole", out[:300] + err)
open(cut, "w").write(text[:len(text) // 2])
code, out, err = lms_trace("plot", cut, "-o", os.path.join(tmp, "cut.svg"))
ok(code == 0 and "trace cut here" in open(os.path.join(tmp, "cut.svg")).read(), "plot marks where a cut trace stops", err)
code, out, err = lms_trace("tune", cut)
ok(code == 0 and "warning: the trace is cut" in out, "tune warns that the trace is cut", out[:300] + err)

# plot: well-formed, self-contained SVG with the four series, the markers and the strips.
svg = os.path.join(tmp, "run.svg")
code, out, err = lms_trace("plot", trace, "-o", svg)
is_equal(code, 0, "plot succeeds" + (f": {err}" if err else ""))
root = ET.parse(svg).getroot()
NS = "{http://www.w3.org/2000/svg}"
is_equal(root.tag, NS + "svg", "the plot parses as XML with an svg root")
polylines = list(root.iter(NS + "polyline"))
colors = [p.get("stroke") for p in polylines]
is_equal(sorted(colors), sorted(["#d95f02", "#1b9e77", "#7570b3", "#e7298a"]), "four series: demanded, resident, host, soft limit")
widths = {p.get("stroke"): float(p.get("stroke-width")) for p in polylines}
ok(colors.index("#e7298a") == 3 and widths["#e7298a"] < widths["#1b9e77"] < widths["#d95f02"],
   "the soft limit is drawn last and thinnest, resident over demanded: none hides another", widths)
texts = [t.text or "" for t in root.iter(NS + "text")]
ok({"demanded", "resident", "host", "soft limit", "swap out", "swap in", "stalls", "GPU 0", "out of memory", "dump",
    "device memory (MiB)", "time since the trace started (ms)"} <= set(texts), "legend, strips, markers and axes are labelled", texts)
titles = [t.text for t in root.iter(NS + "title")]
ok("out of memory" in titles and "dump of live allocations" in titles, "out-of-memory errors and dumps are marked", titles)
frame = next(r for r in root.iter(NS + "rect") if r.get("class") == "frame")
ticks = [t for t in root.iter(NS + "text") if t.get("class") == "xtick"]
width = float(frame.get("width"))
ok(ticks and all(float(t.get("x")) <= width and (float(t.get("x")) < width - 30 or t.get("text-anchor") == "end")
                 for t in ticks), "no tick past the frame, and a label at its edge ends inside it",
   [(t.get("x"), t.text) for t in ticks])
ok(any(r.get("fill-opacity") for r in root.iter(NS + "rect")), "swap activity is drawn")
body = open(svg).read()
ok("href" not in body and "<script" not in body, "the SVG refers to nothing outside itself")
is_equal(sorted(n for n in os.listdir(tmp) if "tmp" in n), [], "no temporary file is left behind")
capped = os.path.join(tmp, "capped.json")
workload(capped, "--max-mb", "1", "--repeat", "400")
code, out, err = lms_trace("plot", capped, "-o", svg)
ok(code == 0 and "recording stopped (LMS_TRACE_MAX_MB)" in open(svg).read(), "plot marks a truncated trace", err)

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
is_equal(actions[:8] + actions[8:12] + actions[-3:], ["segment_alloc", "alloc"] * 4 + ["segment_unmap", "segment_unmap",
         "segment_map", "oom", "free_requested", "free_completed", "segment_free"],
         "actions in order: evictions unmap the segment, a swap in maps it again")
ok(all({"action", "addr", "size", "stream", "frames", "time_us"} <= e.keys() for e in entries),
   "trace entries carry addr, size, stream, frames, time_us")
ok(all(abs(e["time_us"] / 1e6 - time.time()) < 3600 for e in entries), "times from the epoch", entries[0]["time_us"])
first = entries[1]
is_equal((first["addr"], first["size"], first["stream"]), (0x7f0000000000, 256 * MiB, 0x1000), "an alloc's figures")
is_equal(first["frames"][0], {"filename": "tests/trace_workload.c", "line": line_of("void site_a(void)"), "name": "site_a"},
         "frames are {filename, line, name} with the line of the call")
frees = [e for e in entries if e["action"] == "free_requested"]
ok(frees and all(any(f["name"] == "run_once" for f in e["frames"]) for e in frees), "frees carry their frames", frees[:1])
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
   and any(f["name"] == "site_a" for f in block["frames"]), "its block", block)
code, out, err = lms_trace("export", "--memory-viz", killed, "-o", snap)
ok(code == 0 and "warning: the trace is cut" in err, "export warns when the trace is cut", err)

# tune: the replay of the recorded settings gives the recorded traffic; the headroom stays.
code, out, err = lms_trace("tune", trace, "--threshold-kb", "1000", "--exclude-mb", "512", "--policy", "lru")
row = [re.sub(r"\s+", " ", l) for l in out.splitlines() if l.startswith("lru ")]
is_equal(row, ["lru 1000 KiB 512 MiB 512.0 MiB 256.0 MiB 2 1 5.000 0"],
         "tune predicts the recorded run's swap traffic at its settings" + (f": {err}" if err else ""))
ok("KB " not in out and " MB " not in out and "GB/s" not in out, "tune's units are binary and shown", out)
code, out, err = lms_trace("tune", trace)
rec = [l for l in out.splitlines() if l.startswith("recommended:")]
is_equal(rec, ["recommended: LMS_POLICY=lru LMS_THRESHOLD_KB=16384 LMS_EXCLUDE_MB=256 (predicted swap traffic 0 B, stall 0.000 ms)"],
         "tune recommends the setting with least traffic and most headroom")
excludes = {int(m) for m in re.findall(r"^\S+\s+\d+ KiB\s+(\d+) MiB", out, re.M)}
ok(min(excludes) == 64 and "headroom: at least 64 MiB stays out of the cache" in out and "CUDA context" in out,
   "by default the grid keeps headroom (1/16 of this 1 GiB device) and says why", (excludes, out[-400:]))
code, out, err = lms_trace("tune", trace, "--exclude-mb", "0,512", "--policy", "lru")
ok("LMS_EXCLUDE_MB=0 " in out, "an exclude given with --exclude-mb is tried as given", out[-300:])
plain = os.path.join(tmp, "plain.json")
workload(plain)
code, out, err = lms_trace("tune", plain)
ok(code == 1 and "LMS_TRACE_USES=1" in err, "tune on a trace without uses says what is missing", err)
left_out = os.path.join(tmp, "left_out.json")
open(left_out, "w").write(re.sub(r'("cat":"launch".*?"uses":\[[^\]]*\])', r'\1,"uses_left_out":3', text, count=1))
code, out, err = lms_trace("tune", left_out)
ok(code == 1 and re.search(r"launch at step \d+ leaves 3 of its uses out", err) and "LMS_PIECE_MB" in err,
   "tune refuses a trace that left some of a launch's uses out, and says what to do", err)
code, out, err = lms_trace("tune", trace, "--policy", "nosuch")
ok(code == 2 and "nosuch" in err and "lru" in err and "lookahead" in err, "tune names an unknown policy", err)
code, out, err = lms_trace("tune", trace, "--threshold-kb", "1000", "--exclude-mb", "512")
rows = {l.split()[0]: re.sub(r"\s+", " ", l).split(" ", 1)[1] for l in out.splitlines() if re.match(r"(lru|lookahead) ", l)}
is_equal(sorted(rows), ["lookahead", "lru"], "tune replays every policy by default")
is_equal(rows.get("lookahead"), rows.get("lru"), "a run that never repeats: lookahead predicts what LRU does")
code, out, err = lms_trace("tune", trace, "--policy", "lookahead", "--threshold-kb", "1000", "--exclude-mb", "512")
rows = [l for l in out.splitlines() if re.match(r"(lru|lookahead) ", l)]
ok(code == 0 and len(rows) == 1 and rows[0].startswith("lookahead "), "--policy picks the policies replayed", out + err)

# Standard input, --help, --version.
code, out, err = lms_trace("summary", "-", input=text)
ok(code == 0 and "allocations          4 (640.0 MiB)" in out, "summary reads standard input with -", err)
code, out, err = lms_trace("plot", "-", "-o", svg, input=text)
ok(code == 0 and ET.parse(svg).getroot().tag == NS + "svg", "plot reads standard input twice over", err)
for command in ("summary", "plot", "export", "tune"):
    code, out, err = lms_trace(command, "--help")
    ok(code == 0 and out.startswith(f"usage: lms-trace {command}") and "standard input" in out and not err,
       f"{command} --help", out + err)
code, out, err = lms_trace("--help")
ok(code == 0 and all(c in out for c in ("summary", "plot", "export", "tune")), "lms-trace --help lists the commands", out)
code, out, err = lms_trace("--version")
ok(code == 0 and re.fullmatch(r"lms-trace \(liblms\) \d+\.\d+\.\d+\n", out), "lms-trace --version", out)

# Traces of version 1 (the object form) are still read.
v1 = os.path.join(tmp, "v1.json")
events = text.strip().rstrip("]").split("\n,")
settings = re.search(r'"args":(\{.*\})\}$', events[0].lstrip("["))[1]
open(v1, "w").write('{"otherData":' + settings.replace('"version":2', '"version":1') + ',"traceEvents":[\n'
                    + "\n,".join(events[1:]) + "\n]}\n")
code, out, err = lms_trace("summary", v1)
ok(code == 0 and "ended                at exit" in out and "allocations          4" in out, "a version 1 trace", err)

# Bad input: one clear error naming the file, and the offset for bad JSON.
code, out, err = lms_trace("summary", os.path.join(tmp, "absent.json"))
ok(code == 1 and "absent.json" in err, "a missing file is named", err)
bad = os.path.join(tmp, "bad.json")
open(bad, "w").write(text.replace('"ph":"X"', '"ph":X', 1))
code, out, err = lms_trace("summary", bad)
offset = text.index('"ph":"X"') + 5
ok(code == 1 and f"bad.json: offset {offset}: expected a value" in err, "malformed JSON: the exact offset", err)
open(bad, "w").write(text[:100])
code, out, err = lms_trace("summary", bad)
ok(code == 1 and "bad.json: offset 100" in err, "a trace cut inside its settings: nothing to read, said where", err)
other = os.path.join(tmp, "other.json")
open(other, "w").write('{"traceEvents":[]}')
code, out, err = lms_trace("summary", other)
ok(code == 1 and "not a liblms trace" in err, "a trace from another program is recognised", err)
open(other, "w").write('[{"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"x"}}]')
code, out, err = lms_trace("summary", other)
ok(code == 1 and "not a liblms trace" in err, "an array trace from another program too", err)
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
