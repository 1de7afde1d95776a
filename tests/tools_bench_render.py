#!/usr/bin/env python3
"""lms-bench's report of a real GPU's run: docs/benchmarks/results.md is what lms-bench renders
from docs/benchmarks/results.json, and a figure that pinned_bandwidth measures is said once it
is there (a copy to the host passing, or not, one that waits for a kernel on another stream;
how copies in both directions share the link)."""
import importlib.machinery
import importlib.util
import json
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tests"))
from tools_tap import done, is_equal, ok, plan, timeline_slice  # noqa: E402

SOURCE = os.environ.get("LMS_SOURCE_DIR", ".")
loader = importlib.machinery.SourceFileLoader("lms_bench", os.path.join(SOURCE, "tools", "bench", "lms-bench"))
spec = importlib.util.spec_from_loader("lms_bench", loader)
bench = importlib.util.module_from_spec(spec)
loader.exec_module(bench)

plan(18)
with open(os.path.join(SOURCE, "docs", "benchmarks", "results.json")) as f:
    results = json.load(f)
with open(os.path.join(SOURCE, "docs", "benchmarks", "results.md")) as f:
    committed = f.read()
is_equal(bench.markdown(results), committed, "results.md is lms-bench's rendering of results.json")
simulator = bench.simulated_results()
bench.simulated_results = lambda: dict(simulator, settings=dict(results["settings"], LMS_PIECE_MB="64"))
ok(f"(docs/benchmarks/sim.json). They ran with `LMS_PIECE_MB=64` where this run had {results['settings']['LMS_PIECE_MB']}.\n"
   in bench.markdown(results), "where the simulator's rows ran with other settings, the report names them")
bench.simulated_results = lambda: dict(simulator, settings=results["settings"])
ok("They ran with" not in bench.markdown(results), "with the same settings, it says nothing of them")
bench.simulated_results = lambda: simulator
results["machine"]["bandwidth"].update({"bytes": 256 << 20, "d2h_gbps": 55.0,
                                        "d2h_past_waiting_copy_ms": [20.01, 24.9, 4.93]})
said = bench.markdown(results)
ok("A copy to the host queued on a second stream behind one that waits for a kernel ended at 4.93 ms "
   "(the kernel at 20.01, the waiting copy at 24.90; a copy alone takes 4.88)." in said,
   "with the waiting-copy figures, the report says when each copy and the kernel ended", said[:2000])
del results["machine"]["bandwidth"]["d2h_past_waiting_copy_ms"]
ok("second stream" not in bench.markdown(results), "without them, it says nothing of it")
results["machine"]["bandwidth"].update({"bidirectional_ends_ms": [5.74, 5.24], "bidirectional_staggered_ms": [7.1, 5.5],
                                        "bidirectional_sustained_gbps": 97.2})
said = bench.markdown(results)
ok("One copy each way, queued together: the one to the device ended at 5.74 ms, the one to the host at 5.24; "
   "the one to the device queued 2 ms into the other: 7.10 and 5.50; eight copies each way of half the size, "
   "queued in turn: 97.2 GB/s in all." in said,
   "with the figures of copies both ways, the report says when each ended and what many carried", said[:2000])
del results["machine"]["bandwidth"]["bidirectional_ends_ms"]
ok("each way" not in bench.markdown(results), "without them, it says nothing of it")
results["cifar10"].pop("losses_identical", None)
results["cifar10"]["losses_not_compared"] = "cifar10_full: layer conv1: no cuDNN algorithm fits"
said = bench.markdown(results)
ok("(--deterministic): not compared, a run failed: cifar10_full: layer conv1: no cuDNN algorithm fits" in said
   and "DIFFERENT" not in said, "runs that failed are said to have failed, not to differ", said[-1500:])

# On the H100 the 21-iteration run learned the loop once more than the 26-iteration one and
# moved more: their difference, -0.43 GB an iteration, is no measurement of the timed iterations.
shorter = {"swapped_out": {"count": 900, "bytes": 25 * 10**9}, "swapped_in": {"count": 890, "bytes": 24 * 10**9},
           "stalls": {"count": 300, "ns": 9 * 10**9}}
longer = {"swapped_out": {"count": 910, "bytes": 24 * 10**9}, "swapped_in": {"count": 900, "bytes": 24 * 10**9},
          "stalls": {"count": 280, "ns": 8 * 10**9}}
minimum = 3568866720
bench.PLATFORM.timed = 5  # BENCH_ITERS=5: four iterations between the runs
row = bench.timed_iterations(longer, shorter, minimum)
ok(row["bytes_swapped"] is None and "liblms_per_iteration" not in row
   and "took different paths" in row.get("bytes_swapped_unmeasured", ""),
   "on a GPU, a difference below the minimum is no figure, and says why", str(row))
longer["swapped_in"]["bytes"] += 20 * 10**9
row = bench.timed_iterations(longer, shorter, minimum)
ok(row["bytes_swapped"] == 19 * 10**9 / 4 and row["liblms_per_iteration"]["stalls"]["count"] == -5,
   "above it, the difference per timed iteration is the figure", str(row))
longer["swapped_in"]["bytes"] -= 20 * 10**9
longer["devices"] = [{"device": 0, "moved_per_iteration": [9 * 10**9, 7 * 10**9, 6 * 10**9, 7 * 10**9, 6 * 10**9, 7 * 10**9]}]
row = bench.timed_iterations(longer, shorter, minimum)
ok(row["bytes_swapped"] == 6.5 * 10**9 and row["bytes_swapped_how"] == "counted" and "liblms_per_iteration" not in row,
   "liblms's own count of its last learned iterations, as many as the timed ones less one, is the figure, "
   "whatever the two runs' difference", str(row))
said = bench.markdown(dict(results, cifar10=dict(results["cifar10"], rows=[
    dict(results["cifar10"]["rows"][0], bytes_swapped_how="counted"),
    dict(results["cifar10"]["rows"][1], bytes_swapped_how="difference")])))
ok("liblms's own count over its last learned iterations" in said
   and f"{results['cifar10']['rows'][1]['bytes_swapped'] / 1e9:.2f} (difference) |" in said
   and f"{results['cifar10']['rows'][0]['bytes_swapped'] / 1e9:.2f} |" in said,
   "the report says which rows liblms counted and which are the difference", said[:3000])
row = dict(results["cifar10"]["rows"][0], bytes_swapped=None, link_share=None,
           bytes_swapped_unmeasured="the runs took different paths")
results["cifar10"]["rows"][0] = row
said = bench.markdown(results)
ok("moved bytes not measured: the runs took different paths" in said and not bench.consistency_errors(results),
   "the report says so, and it is no inconsistency", said[:3000])
# A GPU run's engines, from its device timeline: four iterations of 1000 us, each starting the
# trainer's gather kernel twice; in each, kernels busy 400 us, a copy in over 200-700 and one
# out over 500-900, the host waiting 600-800. With five timed iterations the last four whole
# ones count; here three of four are whole (BENCH_ITERS=4).
X = timeline_slice
events = []
for i in range(4):
    t = 1000 * i
    events += [X(0, 0, "_Z13gather_kernelIjEv", t, 5), X(0, 0, "_Z13gather_kernelIjEv", t + 5, 5),
               X(0, 0, "conv", t + 10, 390), X(0, 1, "copy", t + 200, 500, 10**9), X(0, 2, "copy", t + 500, 400, 10**9),
               X(1000, 0, "host waits", t + 600, 200)]
timeline = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"bench-render-timeline-{os.getpid()}.json")
with open(timeline, "w") as f:
    json.dump(events, f)
bench.PLATFORM.timed = 4
engines = bench.PLATFORM.timeline_engines(timeline, 4)
ok(engines and [round(engines[k], 6) for k in ("compute", "h2d", "d2h", "host_waits", "copying_without_kernel")]
   == [0.4, 0.5, 0.4, 0.2, 0.5], "a GPU run's busy shares come from its timeline's whole timed iterations", engines)
ok(bench.PLATFORM.timeline_engines(timeline, 3) is None and bench.PLATFORM.timeline_engines(timeline + ".none", 4) is None,
   "none where the gather kernels do not divide into the iterations, or there is no timeline", "")
os.remove(timeline)
said = bench.markdown(dict(results, cifar10=dict(results["cifar10"], rows=[dict(results["cifar10"]["rows"][0], engines=engines)])))
ok("| compute / h2d / d2h busy | host waits |" in said and "| 40.0 % / 50.0 % / 40.0 % | 20.0 % |" in said,
   "the report gives the measured row's busy shares, as the simulator's", said[-3000:])
fast = results["cifar10"]["rows"][1]
slower = dict(fast, fastest_images_per_s=fast["images_per_s"] * 0.99)
errors = bench.consistency_errors(dict(results, cifar10=dict(results["cifar10"], rows=[slower]), unet3d={}))
ok(any(f"is above the fastest schedule's {slower['fastest_images_per_s']:.0f}" in e for e in errors),
   "a row faster than the fastest schedule is an inconsistency", errors)
bench.PLATFORM.simulated = True
row = bench.timed_iterations(dict(longer, swapped_in={"count": 0, "bytes": 0}), shorter, minimum)
ok(row["bytes_swapped"] < 0, "on the simulator, whose runs are deterministic, it stays a figure (for consistency_errors)")
bench.PLATFORM.simulated = False
done()
