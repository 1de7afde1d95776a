#!/usr/bin/env python3
"""The trace writer (preload/trace.c), through the scripted workload: the file is Chrome Trace
Event JSON in its array form with the fields docs/trace-format.md promises; it is created
safely; it stays under LMS_TRACE_MAX_MB; it is complete after a fatal signal and holds whole
events after SIGKILL; dumps of live allocations."""
import json
import os
import signal
import stat
import sys

sys.path.insert(0, os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tests"))
from tools_tap import done, is_equal, ok, plan, run, scratch, workload, WORKLOAD  # noqa: E402

MiB = 1 << 20
plan(53)
tmp = scratch()


def load(path):
    with open(path) as f:
        return json.load(f)


def named(events, name):
    return [e for e in events if e.get("name") == name]


# One run of the workload, with uses and stacks.
path = os.path.join(tmp, "run.json")
code, err = workload(path, "--uses")
is_equal(code, 0, "the workload runs" + (f": {err}" if err else ""))
events = load(path)
ok(isinstance(events, list), "the array form: a list of events, which viewers read even without its end")
settings = events[0]
is_equal((settings["ph"], settings["name"], settings["args"]["format"], settings["args"]["version"]),
         ("M", "lms.settings", "liblms-trace", 2), "the first event is the settings, a metadata event")
other = settings["args"]
is_equal((other["threshold_bytes"], other["exclude_bytes"], other["policy"], other["uses"]),
         (1000 << 10, 512 * MiB, "lru", True), "the settings of the run")
version = open(os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "preload", "version.h")).read()
ok(f'"{other["liblms"]}"' in version and abs(other["epoch_start_us"] / 1e6 - __import__("time").time()) < 600,
   "the library's version, and the wall-clock time of the trace's start", other)
is_equal(stat.S_IMODE(os.stat(path).st_mode), 0o600, "the trace is created with mode 0600")
ok(all({"ph", "name", "pid", "tid"} <= e.keys() for e in events), "every event has ph, name, pid and tid")
ok(all(isinstance(e["ts"], (int, float)) for e in events if e["ph"] != "M"), "every timed event has a numeric ts")
ok(named(events, "process_name") and named(events, "process_name")[0]["args"]["name"] == "liblms: trace_workload",
   "process name metadata")
threads = {e["args"]["name"] for e in named(events, "thread_name")}
ok({"GPU 0 allocations", "GPU 0 swap out", "GPU 0 swap in"} <= threads, "tracks are named", threads)

allocs = named(events, "alloc")
is_equal([a["args"]["bytes"] for a in allocs], [256 * MiB, 256 * MiB, 128 * MiB, 4096], "four allocations with their sizes")
is_equal([a["args"]["addr"] for a in allocs], ["0x7f0000000000", "0x7f0010000000", "0x7f0020000000", "0x7f0030000000"],
         "addresses as hex strings")
is_equal([a["args"]["cached"] for a in allocs], [True, True, True, False], "cached flag")
ok(all(a["ph"] == "i" and a["args"]["stream"] == "0x1000" and a["args"]["device"] == 0 for a in allocs),
   "allocations are instant events with stream and device")
ok(any("site_a" in f for f in allocs[0]["args"]["frames"]), "the first allocation's stack names site_a", allocs[0]["args"])
ok(any("site_c" in f for f in allocs[2]["args"]["frames"]), "the third allocation's stack names site_c", allocs[2]["args"])
frees = named(events, "free")
is_equal(len(frees), 4, "four frees")
ok(all(any("run_once" in f for f in e["args"]["frames"]) and len(e["args"]["pcs"]) == len(e["args"]["frames"])
       for e in frees), "frees carry their own frames and return addresses", frees[:1])
modules = named(events, "lms.module")
program = [m["args"] for m in modules if m["args"]["path"] == os.path.realpath(WORKLOAD)]
ok(len(program) == 1 and len(program[0]["build_id"]) >= 16 and program[0]["bias"].startswith("0x"),
   "the program's file is described once, with its load bias and build id", [m["args"] for m in modules])
first_module = events.index(modules[0])
ok(all(events.index(a) > first_module for a in named(events, "alloc")), "objects are described before the frames in them")
stalls = named(events, "restore stall")
is_equal([(s["ph"], s["dur"]) for s in stalls], [("X", 2000.0)], "restore stalls are slices of their own")

swaps = [e for e in events if e["ph"] == "X" and e["name"].startswith("swap")]
is_equal([(s["name"], s["args"]["bytes"], s["dur"]) for s in swaps],
         [("swap out", 256 * MiB, 10000.0), ("swap out", 256 * MiB, 10000.0), ("swap in", 256 * MiB, 5000.0)],
         "swaps are X slices with bytes and duration in microseconds")
out_track = [e["tid"] for e in named(events, "thread_name") if e["args"]["name"] == "GPU 0 swap out"]
ok(swaps[0]["tid"] in out_track and swaps[2]["tid"] not in out_track, "swaps out and in on tracks of their own")
is_equal([e["args"]["reason"] for e in named(events, "evict")], ["demand", "demand"], "evictions carry their reason")
ooms = named(events, "oom")
is_equal([(o["args"]["bytes"], o["s"]) for o in ooms], [(1024 * MiB, "p")], "out of memory as a process-wide instant")
counters = [e for e in events if e["ph"] == "C" and e["name"] == "GPU 0 memory"]
is_equal(len(counters), 11, "a counter event after each change")
shares = [e for e in events if e["ph"] == "C" and e["name"] == "GPU 0 demanded % of soft limit"]
is_equal([s["args"]["percent"] for s in shares][:4], [50.0, 100.0, 125.0, 125.0],
         "one track holds demand against the soft limit, as a share of it")
is_equal(max(c["args"]["demanded"] for c in counters), 640 * MiB + 4096, "peak demanded in the counters")
ok(all(c["args"].keys() == {"demanded", "resident", "host", "soft_limit"} for c in counters), "counters carry the four figures")
launches = [e for e in events if e.get("cat") == "launch"]
is_equal([(l["name"], l["args"]["step"], l["args"]["uses"]) for l in launches],
         [("kernel_bc", 0, ["0x7f0010000000", "0x7f0020000000", "0x7f0030000000"]),
          ("kernel_a", 1, ["0x7f0000000000", "0x7f0030000000"])], "launches list the allocations they use")
dump = named(events, "lms.dump")
is_equal([d["args"]["reason"] for d in dump], ["oom"], "the out-of-memory dump is in the trace")
is_equal(sorted(l["args"]["state"] for l in named(events, "lms.live")), ["host", "resident", "resident", "resident"],
         "the dump lists every live allocation with its state")
end = events[-1]
is_equal((end["name"], end["args"]["truncated"], end["args"]["signal"]), ("lms.trace_end", False, 0),
         "the trace ends with lms.trace_end")

# Without LMS_TRACE_USES and without stacks.
path = os.path.join(tmp, "plain.json")
workload(path, "--depth", "0")
events = load(path)
ok(not [e for e in events if e.get("cat") == "launch"], "no launches recorded without LMS_TRACE_USES")
ok(all(a["args"]["frames"] == [] for a in named(events, "alloc")), "no frames with LMS_TRACE_STACK_DEPTH=0")

# Creating the file: never over an existing file or through a link.
with open(os.path.join(tmp, "keep.json"), "w") as f:
    f.write("precious")
code, err = workload(os.path.join(tmp, "keep.json"))
ok(code == 2 and "LMS_TRACE" in err and "never overwritten" in err, "an existing file is refused with a clear error", err)
is_equal(open(os.path.join(tmp, "keep.json")).read(), "precious", "and left as it was")
os.symlink(os.path.join(tmp, "target.json"), os.path.join(tmp, "link.json"))
code, err = workload(os.path.join(tmp, "link.json"))
ok(code == 2 and not os.path.exists(os.path.join(tmp, "target.json")), "a symbolic link is not followed", err)
code, err = workload(os.path.join(tmp, "missing-dir", "t.json"))
ok(code == 2 and "missing-dir" in err, "an impossible path is named in the error", err)
code, _, _ = run([WORKLOAD, os.path.join(tmp, "pid-%p.json")])
ok(code == 0 and any(n.startswith("pid-") and n[4:-5].isdigit() for n in os.listdir(tmp)), "%p becomes the pid")

# LMS_TRACE_MAX_MB.
path = os.path.join(tmp, "capped.json")
code, err = workload(path, "--max-mb", "1", "--repeat", "400", "--uses")
size = os.path.getsize(path)
ok(code == 0 and size <= MiB, f"the trace stays under LMS_TRACE_MAX_MB (1 MiB): {size} bytes", err)
events = load(path)
ok(named(events, "lms.trace_truncated") and events[-1]["args"]["truncated"] is True,
   "a capped trace is valid JSON with a truncation marker")
ok(size > MiB // 2, "and holds events up to the cap")

# A fatal signal: the footer is still written, and the process still dies by it.
path = os.path.join(tmp, "killed.json")
code, err = workload(path, "--die-by", "TERM", "--repeat", "3")
is_equal(code, -signal.SIGTERM, "the workload dies by SIGTERM")
events = load(path)
is_equal((events[-1]["name"], events[-1]["args"]["signal"]), ("lms.trace_end", signal.SIGTERM),
         "the trace of a process killed by SIGTERM is complete")

# SIGKILL: no end, but whole events, which a viewer reads as an array left open.
path = os.path.join(tmp, "sigkill.json")
code, err = workload(path, "--die-by", "KILL", "--repeat", "200")
is_equal(code, -signal.SIGKILL, "the workload dies by SIGKILL")
text = open(path).read()
ok(text.startswith("[{") and not text.rstrip().endswith("]"), "the file is the array left open", text[-200:])
events = json.loads(text.rstrip().rstrip(",") + "]")
ok(events[0]["name"] == "lms.settings" and len(named(events, "alloc")) > 100 and not named(events, "lms.trace_end"),
   "it holds whole events up to the kill", len(events))

# Threads.
path = os.path.join(tmp, "threads.json")
code, err = workload(path, "--threads", "4", "--repeat", "25", "--uses")
events = load(path)
is_equal(len(named(events, "alloc")), 4 * 4 * 25, "four threads at once: every allocation recorded, valid JSON")

# Dumps on a signal.
path = os.path.join(tmp, "dump.json")
code, err = workload(path, "--dump-signal", "USR1")
events = load(path)
dumps = named(events, "lms.dump")
is_equal([d["args"]["reason"] for d in dumps], ["oom", "signal"], "LMS_DUMP_SIGNAL dumps into the trace")
live = [e for e in named(events, "lms.live") if e["args"]["dump"] == dumps[-1]["args"]["dump"]]
ok(len(live) == 1 and live[0]["args"]["bytes"] == 256 * MiB and any("site_a" in f for f in live[0]["args"]["frames"]),
   "the signal dump lists the live allocation with its stack", live)
code, out, err = run([WORKLOAD, "-", "--dump-signal", "SIGUSR1"])
ok(code == 0 and "live allocations (signal)" in err and "268435456" in err and "site_a" in err,
   "without a trace, the dump is a table on stderr", err)
code, out, err = run([WORKLOAD, "-", "--dump-signal", "KILL"])
is_equal(code, 2, "a signal that cannot carry a dump is refused")
done()
