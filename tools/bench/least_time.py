"""The least time one iteration of a run can take on the simulated GPU when its allocations do
not all fit the cap: a bound that no schedule of copies and uses in host memory beats, however
well it knows the future. liblms's figures are measured against it.

The bytes-only ceilings (each byte past the cap moved once out and once in, or Belady's least
traffic, at the link's bidirectional bandwidth) ignore when the bytes may move: an allocation
can only be out while no kernel needs it, its copy out starts after its last use, and its copy
in must end before its next one. This bound keeps those rules and the model's rates, and
relaxes everything else in the schedule's favour, so it is a true lower bound of the model:

- The run's own kernels, in order, over one iteration of its timeline (LMS_SIM_TIMELINE), each
  priced as the simulated GPU prices it (sim/timing.c) from the operations and the bytes per
  pointer the timeline records: the roofline of its operations and of its bytes in device
  memory, no shorter than the model's shortest kernel, and its bytes in host memory at the
  zero-copy rate, over the link beside the copies.
- Between two kernels a gap, as long as the schedule likes, in which only copies run.
- Memory is counted at the end of each kernel and each gap: what the cached allocations (the
  trace's) keep on the device, at most the cap. Within one, copies out and in may overlap
  freely; bytes are fluid (no pieces, no 2 MiB granularity).
- Each phase carries at most its length times each direction's rate, and both together at
  most the rate they carry while they overlap (the report's link_gbps); a kernel's bytes in
  host memory take their share of both, as in the model. The model gives a copy queued beside
  one the other way what that one leaves: with --evictions-first the copies to the host keep
  their rate and those to the device get the rest, as where every eviction is queued before
  the restore its room is for (the H100 keeps its copies to the host near 51 GB/s whichever
  was queued first); without it the two share the overlap as the schedule likes, as the model
  allows where some restores are queued first.
- A kernel needs the pieces liblms makes resident for it (the trace's uses) and the spans its
  cost reaches. If they fit the cap, it runs with all of them on the device, as liblms runs
  it; if not, with the rest in host memory, priced where its cost reaches them. Within an
  allocation, bytes in host memory lie where the schedule likes (each allocation is cut
  where the pieces and spans begin and end).
- The iteration repeats: it ends with the bytes where it started. (Any schedule over several
  iterations averages to one such: the program is linear.)
- The host's own time (launches, driver calls) and the program's own copies and memsets are
  not counted.

It is a linear program, solved by COIN-OR's clp (Debian's coinor-clp)."""

import bisect
import collections
import json
import os
import shutil
import subprocess
import tempfile


class NoBound(Exception):
    """The bound cannot be had; the message says why."""


# One kernel of the iteration: its operations and the spans its cost reaches, [(pointer, span,
# bytes, written)] (the timeline's); the spans liblms makes resident for it, [(start, end)]
# (the trace's); and how long the run waited before it and ran it, in ms (the timeline's).
Kernel = collections.namedtuple("Kernel", "name flops reaches needs waited_ms ran_ms")


def _events(path, what):
    try:
        with open(path) as f:
            events = json.load(f)
    except OSError as e:
        raise NoBound(f"{path}: {e.strerror or e}") from e
    except json.JSONDecodeError as e:
        raise NoBound(f"{path}: not a {what} (JSON: {e.msg} at line {e.lineno})") from e
    events = events.get("traceEvents") if isinstance(events, dict) else events
    if not isinstance(events, list):
        raise NoBound(f"{path}: not a {what} (expected a JSON array of trace events)")
    return events


def _window_of(events, marker, iterations, path):
    """The events of the last whole iteration, sorted by time, and the times it starts and the
    next one does: each of the run's iterations starts as many kernels named `marker`."""
    events = sorted(events, key=lambda e: float(e["ts"]))
    starts = [i for i, e in enumerate(events) if e.get("name") == marker]
    if not starts or len(starts) % iterations:
        raise NoBound(f"{path}: {len(starts)} kernels named '{marker}' do not divide into {iterations} iterations")
    every = len(starts) // iterations
    if len(starts) < 2 * every:
        raise NoBound(f"{path}: fewer than two iterations")
    lo, hi = starts[-2 * every], starts[-every]
    return events[lo:hi], float(events[lo]["ts"]), float(events[hi]["ts"])


def read_trace(trace_path, marker, iterations):
    """From liblms's trace (LMS_TRACE with LMS_TRACE_USES=1): the allocations it caches (and
    may swap) that are live through the last whole iteration, [(address, bytes)] sorted by
    address; and that iteration's kernel launches, [(name, [(start, end)])], each with the
    spans of the allocations' pieces it uses (liblms makes them resident for it)."""
    events = _events(trace_path, "liblms trace")
    settings = next((e.get("args") or {} for e in events if e.get("name") == "lms.settings"), {})
    if not settings.get("uses"):
        raise NoBound(f"{trace_path}: the trace records no launch's uses (LMS_TRACE_USES=1)")
    piece = int(settings.get("piece_bytes") or 0)
    launches, begin, end = _window_of([e for e in events if e.get("cat") == "launch"], marker, iterations, trace_path)
    live = {}
    for e in sorted((e for e in events if e.get("name") in ("alloc", "free") and float(e.get("ts", 0)) < end),
                    key=lambda e: float(e["ts"])):
        args = e.get("args") or {}
        if e["name"] == "alloc" and args.get("cached") and float(e["ts"]) < begin:
            live[int(args["addr"], 16)] = int(args["bytes"])
        elif e["name"] == "free":
            live.pop(int(args.get("addr", "0"), 16), None)
    allocations = sorted(live.items())
    bases = [a for a, _ in allocations]
    kernels = []
    for e in launches:
        if e["name"] in ("memcpy", "memset"):
            continue  # the program's own copies and memsets: not counted
        if (e.get("args") or {}).get("uses_left_out"):
            raise NoBound(f"{trace_path}: the trace left some of a launch's uses out")
        spans = []
        for use in e["args"].get("uses", []):
            address = int(use, 16)
            i = bisect.bisect_right(bases, address) - 1
            if i >= 0 and address < bases[i] + allocations[i][1]:
                limit = bases[i] + allocations[i][1]
                spans.append((address, min(address + piece, limit) if piece else limit))
        kernels.append((e["name"], spans))
    return allocations, kernels


def read_timeline(timeline_path, marker, iterations):
    """The kernels of the last whole iteration on the first device's compute engine, in order:
    [(name, flops, [(pointer, span, bytes, written)], waited_ms, ran_ms)]."""
    ops = sorted((e for e in _events(timeline_path, "timeline")
                  if e.get("ph") == "X" and e.get("pid") == 0 and e.get("tid") == 0), key=lambda e: float(e["ts"]))
    ended = {id(e): float(before["ts"]) + float(before["dur"]) for before, e in zip(ops, ops[1:])}
    window, _, _ = _window_of(ops, marker, iterations, timeline_path)
    kernels = []
    for e in window:
        args = e.get("args") or {}
        if e.get("name", "").startswith(("copy ", "memset ")):
            continue  # the program's own: not counted
        if "flops" not in args:
            raise NoBound(f"{timeline_path}: kernel '{e.get('name')}' carries no cost "
                          "(a simulated GPU older than this bound)")
        start = float(e["ts"])
        kernels.append((e["name"], float(args["flops"]),
                        [(int(p, 16), int(span), float(b), float(w)) for p, span, b, w in args["reaches"]],
                        max(0.0, start - ended.get(id(e), start)) / 1e3, float(e["dur"]) / 1e3))
    return kernels


def iteration(trace_path, timeline_path, marker, iterations):
    """The allocations (read_trace) and the last whole iteration's kernels, as the timeline
    prices them and with the spans liblms makes resident for them: [Kernel]."""
    allocations, launches = read_trace(trace_path, marker, iterations)
    priced = read_timeline(timeline_path, marker, iterations)
    if [n for n, _ in launches] != [k[0] for k in priced]:
        raise NoBound(f"{trace_path} and {timeline_path}: the iteration's kernels differ "
                      f"({len(launches)} launches traced, {len(priced)} kernels on the timeline)")
    return allocations, [Kernel(name, flops, reaches, needs, waited, ran)
                         for (name, flops, reaches, waited, ran), (_, needs) in zip(priced, launches)]


def segments(allocations, kernels):
    """The allocations cut where the kernels' spans begin and end: [(address, bytes)]; within
    one segment every kernel reaches, and needs, every byte alike."""
    bases = [a for a, _ in allocations]
    cuts = {a: {a, a + n} for a, n in allocations}
    for kernel in kernels:
        for edge in ([e for p, span, _, _ in kernel.reaches for e in (p, p + span)] +
                     [e for span in kernel.needs for e in span]):
            i = bisect.bisect_right(bases, edge) - 1
            if i >= 0 and edge < bases[i] + allocations[i][1]:
                cuts[bases[i]].add(edge)
    return [(lo, hi - lo) for a in bases for lo, hi in zip(sorted(cuts[a]), sorted(cuts[a])[1:])]


class Classes:
    """The segments, those that every kernel treats alike merged (the program is fluid, so
    they behave as one): sizes[c] bytes each, and per kernel k, rates[k] = {c: (bytes read,
    bytes written) per byte of class c}, needed[k] = the classes liblms makes resident for it
    or that it reaches, outside[k] = its bytes outside every segment."""

    def __init__(self, segs, kernels):
        starts = [a for a, _ in segs]

        def within(lo, hi):
            i = bisect.bisect_left(starts, lo)
            while i < len(segs) and segs[i][0] < hi:
                yield i
                i += 1

        per_segment = [[] for _ in segs]  # (k, read, written) per byte, for each kernel that needs it
        self.outside = []
        for k, kernel in enumerate(kernels):
            rates, outside = {}, 0.0
            for pointer, span, moved, written in kernel.reaches:
                inside = 0
                for j in within(pointer, pointer + span):
                    r, w = rates.get(j, (0.0, 0.0))
                    rates[j] = (r + (moved - written) / span, w + written / span)
                    inside += segs[j][1]
                outside += moved * (1 - inside / span)
            needed = {j for lo, hi in kernel.needs for j in within(lo, hi)} | set(rates)
            for j in sorted(needed):
                per_segment[j].append((k,) + rates.get(j, (0.0, 0.0)))
            self.outside.append(outside)
        index, self.sizes = {}, []
        for j, signature in enumerate(map(tuple, per_segment)):
            c = index.setdefault(signature, len(self.sizes))
            if c == len(self.sizes):
                self.sizes.append(0)
            self.sizes[c] += segs[j][1]
        self.rates = [{} for _ in kernels]
        self.needed = [set() for _ in kernels]
        for signature, c in index.items():
            for k, r, w in signature:
                self.needed[k].add(c)
                if r or w:
                    self.rates[k][c] = (r, w)


def _sum(terms):
    """CPLEX LP text of a sum of (coefficient, variable), each variable once."""
    merged = {}
    for coefficient, variable in terms:
        merged[variable] = merged.get(variable, 0.0) + coefficient
    return " + ".join(f"{c!r} {v}" for v, c in merged.items() if c) or None


def linear_program(classes, kernels, cap_bytes, link, model, evictions_first=False):
    """The program in CPLEX LP form, in GB and ms: minimise the iteration's length. x{c}_{p}:
    the bytes of class c in host memory at the end of phase p; o and i, those copied out and
    in during it; D{p}, its length. evictions_first: see the module's text."""
    gb = 1e-9
    sizes = [n * gb for n in classes.sizes]
    phases = 2 * len(kernels)  # kernel k is phase 2k, the gap after it 2k + 1
    per_ms = {d: link[d] * 1e-3 for d in ("h2d", "d2h", "overlap")}  # GB per ms
    # With evictions first, what one GB/ms out takes of the rate in: (55 - 37.4) / 55.
    beside = (per_ms["h2d"] - (per_ms["overlap"] - per_ms["d2h"])) / per_ms["d2h"]
    zero_copy_per_ms = model["zero_copy_bytes"] * gb * 1e-3
    hbm_per_ms = model["hbm_bytes"] * model["kernel_efficiency"] * gb * 1e-3
    load, request = model["zero_copy_direction_load"], model["zero_copy_read_request_load"]
    lines = ["Minimize", " length: " + " + ".join(f"D{p}" for p in range(phases)), "Subject To"]
    bounds = []

    def x(c, p):
        return f"x{c}_{p % phases}"

    def at_most(name, terms, rate, p):
        if terms:
            lines.append(f" {name}: {_sum(terms + [(-rate, f'D{p}')])} <= 0")

    most = {x(c, p): n for p in range(phases) for c, n in enumerate(sizes)}
    for p in range(phases):
        k, kernel = p // 2, p % 2 == 0
        needed = classes.needed[k] if kernel else set()
        if sum(classes.sizes[c] for c in needed) <= cap_bytes:
            for c in needed:  # the kernel runs with all of them on the device
                most[x(c, p)] = 0.0
        moving = [c for c in range(len(sizes)) if c not in needed]
        for c in range(len(sizes)):
            flow = [(1.0, x(c, p)), (-1.0, x(c, p - 1))]
            if c in moving:
                flow += [(-1.0, f"o{c}_{p}"), (1.0, f"i{c}_{p}")]
            lines.append(f" f{c}_{p}: {_sum(flow)} = 0")
        if sum(sizes) > cap_bytes * gb:
            lines.append(f" m{p}: {_sum([(1.0, x(c, p)) for c in range(len(sizes))])} >= {sum(sizes) - cap_bytes * gb!r}")
        # A kernel's bytes in host memory: those it reads and writes, per byte of a class there.
        rates = classes.rates[k] if kernel else {}
        read = [(r, x(c, p)) for c, (r, _) in rates.items() if r]
        written = [(w, x(c, p)) for c, (_, w) in rates.items() if w]
        out = [(1.0, f"o{c}_{p}") for c in moving]
        into = [(1.0, f"i{c}_{p}") for c in moving]
        at_most(f"d{p}", out + [(load * r, v) for r, v in written] + [(request * r, v) for r, v in read],
                per_ms["d2h"], p)
        at_most(f"h{p}", into + [(load * r, v) for r, v in read], per_ms["h2d"], p)
        at_most(f"b{p}", out + into + read + written, per_ms["overlap"], p)
        if evictions_first:
            at_most(f"e{p}", into + [(beside, v) for _, v in out], per_ms["h2d"], p)
        if kernel:
            flops = kernels[k].flops
            shortest = max(model["kernel_min_ns"], flops / (model["fp32_flops"] * model["kernel_efficiency"]) * 1e9)
            bounds.append(f" D{p} >= {shortest * 1e-6!r}")
            device_bytes = (sum((r + w) * classes.sizes[c] for c, (r, w) in rates.items()) + classes.outside[k]) * gb
            lines.append(f" r{p}: {_sum([(hbm_per_ms, f'D{p}')] + read + written)} >= {device_bytes!r}")
            at_most(f"z{p}", read + written, zero_copy_per_ms, p)
    bounds += [f" {v} <= {n!r}" for v, n in most.items()]
    return "\n".join(lines + ["Bounds"] + bounds + ["End"]) + "\n"


def solve(program):
    """{name: value} of clp's optimal solution, and the objective."""
    clp = shutil.which("clp")
    if not clp:
        raise NoBound("clp not found (Debian: apt-get install coinor-clp)")
    with tempfile.TemporaryDirectory(prefix="least_time.") as scratch:
        lp, solution = os.path.join(scratch, "iteration.lp"), os.path.join(scratch, "solution")
        with open(lp, "w") as f:
            f.write(program)
        done = subprocess.run([clp, lp, "-solve", "-solution", solution], capture_output=True, text=True)
        try:
            with open(solution) as f:
                status, *rows = f.read().splitlines()
        except OSError:
            status, rows = "", []
    if done.returncode or not status.startswith("Optimal"):
        said = status or (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
        raise NoBound(f"clp found no optimum: {said if isinstance(said, str) else said[0]}")
    values = {}
    for row in rows:
        fields = row.lstrip("* ").split()  # ** marks a value off its bound by rounding
        if len(fields) >= 3:
            values[fields[1]] = float(fields[2])
    return values


def least_time(trace_path, timeline_path, report_path, cap_bytes, marker, iterations, evictions_first=False):
    """{"ns": the least iteration time, "bytes_copied": the bytes its schedule copies out and in,
    "bytes_in_host_memory": those its kernels use there}, per iteration; and "kernels", per
    kernel of the iteration: its name, how long the run waited before it and ran it
    (waited_ms, ran_ms), and how long the fastest schedule does (gap_ms, ms) and what it copies
    meanwhile (out_gb, in_gb). Raises NoBound."""
    try:
        with open(report_path) as f:
            report = json.load(f)
        link, model = report["link_gbps"], report["kernels"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise NoBound(f"{report_path}: no link rates and kernel constants of the simulated GPU ({e})") from e
    try:
        allocations, kernels = iteration(trace_path, timeline_path, marker, iterations)
    except (KeyError, ValueError, TypeError) as e:
        raise NoBound(f"{trace_path} or {timeline_path}: an event lacks what it should say ({e!r})") from e
    classes = Classes(segments(allocations, kernels), kernels)
    values = solve(linear_program(classes, kernels, cap_bytes, link, model, evictions_first))
    phases = 2 * len(kernels)

    def copied(direction, p):
        return sum(values.get(f"{direction}{c}_{p % phases}", 0.0) for c in range(len(classes.sizes)))

    used_on_host = sum((r + w) * values.get(f"x{c}_{2 * k}", 0.0)
                       for k, rates in enumerate(classes.rates) for c, (r, w) in rates.items())
    return {"ns": sum(values.get(f"D{p}", 0.0) for p in range(phases)) * 1e6,
            "bytes_copied": sum(v for name, v in values.items() if name[0] in "oi") * 1e9,
            "bytes_in_host_memory": used_on_host * 1e9,
            "kernels": [{"name": kernel.name, "waited_ms": kernel.waited_ms, "ran_ms": kernel.ran_ms,
                         "gap_ms": values.get(f"D{2 * k - 1 if k else phases - 1}", 0.0),
                         "ms": values.get(f"D{2 * k}", 0.0),
                         "out_gb": copied("o", 2 * k - 1) + copied("o", 2 * k),
                         "in_gb": copied("i", 2 * k - 1) + copied("i", 2 * k)} for k, kernel in enumerate(kernels)]}


def print_by_kernel(least):
    """The run's iteration beside the fastest schedule's, kernel by kernel."""
    print(f"{'kernel':24} {'run: waited':>12} {'ran':>8} {'fastest: gap':>13} {'ran':>8} {'out GB':>7} {'in GB':>7}")
    for k in least["kernels"]:
        print(f"{k['name'][:24]:24} {k['waited_ms']:9.2f} ms {k['ran_ms']:5.2f} ms {k['gap_ms']:10.2f} ms "
              f"{k['ms']:5.2f} ms {k['out_gb']:7.3f} {k['in_gb']:7.3f}")
    run = sum(k["waited_ms"] + k["ran_ms"] for k in least["kernels"])
    print(f"iteration: the run's {run:.2f} ms, the fastest schedule's {least['ns'] / 1e6:.2f} ms "
          f"({least['bytes_copied'] / 1e9:.2f} GB copied, {least['bytes_in_host_memory'] / 1e9:.2f} GB used in host memory)")


def main():
    import argparse
    parser = argparse.ArgumentParser(description="The least time an iteration of a simulated run that swaps can take.")
    parser.add_argument("trace", help="liblms's trace of the run (LMS_TRACE, LMS_TRACE_USES=1)")
    parser.add_argument("timeline", help="the simulated device's timeline of the same run (LMS_SIM_TIMELINE)")
    parser.add_argument("report", help="the simulated device's report of the same run (LMS_SIM_REPORT)")
    parser.add_argument("cap_mib", type=int, help="the cap liblms ran under (its soft limit), in MiB")
    parser.add_argument("marker", help="a kernel each iteration starts as many times (the trainer's: gather)")
    parser.add_argument("iterations", type=int, help="the run's iterations")
    parser.add_argument("--by-kernel", action="store_true",
                        help="print the run's waits and kernels beside the fastest schedule's, kernel by kernel")
    parser.add_argument("--evictions-first", action="store_true",
                        help="copies to the host keep their rate beside those to the device, which get the rest")
    args = parser.parse_args()
    try:
        least = least_time(args.trace, args.timeline, args.report, args.cap_mib << 20, args.marker, args.iterations,
                           args.evictions_first)
    except NoBound as e:
        raise SystemExit(f"least_time.py: {e}")
    if args.by_kernel:
        print_by_kernel(least)
    else:
        print(json.dumps({k: v for k, v in least.items() if k != "kernels"}))


if __name__ == "__main__":
    main()
