"""The least swap traffic of a run, by Belady's rule, from its liblms trace.

The bench's physical ceiling assumes that every byte past the cap goes out and comes back once
an iteration, which no policy can do when consecutive steps need most of the memory in turn.
This replays the trace's launches (LMS_TRACE_USES=1) with knowledge of the whole future: each
step's allocations (or pieces, as the trace's settings split them) must be resident, and room
is made by evicting the resident one needed furthest ahead, which moves the fewest pieces when
pieces are alike (Belady's MIN). Every eviction counts a copy out and every return a copy in,
as in liblms; small allocations are left out of the cap, so the figure is a lower bound for a
policy that moves what liblms moves. `python3 belady.py TRACE CAP_MIB` prints it.
"""
import json
import sys

GRANULARITY = 2 << 20  # the VMM granularity liblms pads to


def _pieces(addr, size, piece):
    """(address, padded bytes) of each piece of an allocation, as liblms splits it."""
    step = piece or size
    return [(addr + offset, -(-min(step, size - offset) // GRANULARITY) * GRANULARITY)
            for offset in range(0, size, step)]


def traffic(trace_path, cap_bytes):
    """Bytes copied out and in after the first fill, by Belady's rule on the trace's launches;
    None when a step needs more than the cap at once (liblms then leaves some of its pieces in
    host memory for the kernel to use there, which this does not model)."""
    with open(trace_path) as f:
        events = json.load(f)
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    piece = next((e["args"].get("piece_bytes", 0) for e in events if e.get("name") == "lms.settings"), 0)
    size, order, steps = {}, {}, []
    for e in events:
        if e.get("name") == "alloc" and e["args"].get("cached"):
            for addr, padded in _pieces(int(e["args"]["addr"], 16), e["args"]["bytes"], piece):
                size[addr] = padded
                order[addr] = len(order)  # ties go by allocation order: addresses vary between runs
        elif e.get("cat") == "launch":
            steps.append([a for a in map(lambda x: int(x, 16), e["args"]["uses"]) if a in size])
    never = len(steps)
    # next_use[i][a]: the step after i that uses a again.
    next_use, later = [None] * len(steps), {}
    for i in range(len(steps) - 1, -1, -1):
        next_use[i] = {a: later.get(a, never) for a in steps[i]}
        for a in steps[i]:
            later[a] = i
    upcoming = {a: later.get(a, never) for a in size}
    resident, used, moved = set(size), sum(size.values()), 0

    def make_room(need, keep):
        nonlocal used, moved
        while used + need > cap_bytes:
            victim = max((a for a in resident if a not in keep), key=lambda a: (upcoming[a], order[a]), default=None)
            if victim is None:
                return
            resident.discard(victim)
            used -= size[victim]
            moved += size[victim]

    make_room(0, set())
    moved = 0  # the first fill is not per-iteration traffic
    for i, step in enumerate(steps):
        keep = set(step)
        if sum(size[a] for a in keep) > cap_bytes:
            return None
        for a in step:
            if a not in resident:
                make_room(size[a], keep)
                resident.add(a)
                used += size[a]
                moved += size[a]
        upcoming.update(next_use[i])
    return moved


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: belady.py TRACE CAP_MIB")
    moved = traffic(sys.argv[1], int(sys.argv[2]) << 20)
    print("a step needs more than the cap" if moved is None else moved)
