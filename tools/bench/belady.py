"""The least swap traffic of a run, by Belady's rule, from its liblms trace.

The bench's physical ceiling assumes that every byte past the cap goes out and comes back once
an iteration, which no policy can do when consecutive steps need most of the memory in turn.
This replays the trace's launches (LMS_TRACE_USES=1) with knowledge of the whole future: each
step's allocations (or pieces, as the trace's settings split them) must be resident, and room
is made by evicting the resident one needed furthest ahead, which moves the fewest pieces when
pieces are alike (Belady's MIN). Every eviction counts a copy out and every return a copy in,
as in liblms; small allocations are left out of the cap, so the figure is a lower bound for a
policy that moves what liblms moves. A step that alone needs more than the cap is run as liblms
runs such a call: the pieces it finds resident stay, what fits comes back, and the rest is used
in host memory, each such piece counted once, as liblms counts it; there the figure is Belady's
choice made liblms's way, no longer a bound (where it brings a piece back, leaving that piece in
host memory can move less).

With a finer piece size than the trace's, each of the trace's pieces is split further and a
launch that used it uses all of its parts. A kernel reaches its whole allocation that way in
liblms too; only a copy or memset over part of a piece is taken as using all of it. In 2 MiB
pieces (VMM's granularity, the finest liblms moves) that is, where no step needs more than the
cap, the least traffic of any policy that keeps every byte.
`python3 belady.py TRACE CAP_MIB [PIECE_MIB]` prints it.
"""
import heapq
import json
import sys

GRANULARITY = 2 << 20  # the VMM granularity liblms pads to


def _pieces(addr, size, piece):
    """(address, padded bytes) of each piece of size bytes at addr, in pieces of piece bytes."""
    step = piece or size
    return [(addr + offset, -(-min(step, size - offset) // GRANULARITY) * GRANULARITY)
            for offset in range(0, size, step)]


def read_events(trace_path):
    """The trace's events, to replay more than once without reading it again."""
    with open(trace_path) as f:
        events = json.load(f)
    return events.get("traceEvents", []) if isinstance(events, dict) else events


def traffic(trace_path, cap_bytes, piece_bytes=0):
    """Bytes copied out and in after the first fill, and used in host memory by steps larger
    than the cap, by Belady's rule on the trace's launches, in the trace's pieces or in finer
    ones of piece_bytes; None when the trace left some of a launch's uses out (it lists a
    limited number per launch)."""
    return traffic_of(read_events(trace_path), cap_bytes, piece_bytes)


def traffic_of(events, cap_bytes, piece_bytes=0):
    """traffic, on events read_events gave."""
    piece = next((e["args"].get("piece_bytes", 0) for e in events if e.get("name") == "lms.settings"), 0)
    finer = -(-piece_bytes // GRANULARITY) * GRANULARITY if piece_bytes and (not piece or piece_bytes < piece) else 0
    size, parts, steps = {}, {}, []
    for e in events:
        if e.get("name") == "alloc" and e["args"].get("cached"):
            for addr, padded in _pieces(int(e["args"]["addr"], 16), e["args"]["bytes"], piece):
                parts[addr] = []
                for part, part_padded in _pieces(addr, padded, finer):
                    size[part] = part_padded
                    parts[addr].append(part)
        elif e.get("cat") == "launch":
            if e["args"].get("uses_left_out"):
                return None
            steps.append([part for a in map(lambda x: int(x, 16), e["args"]["uses"]) if a in parts
                          for part in parts[a]])
    # Ties go by allocation order (addresses vary between runs): the later one goes first.
    order = {a: i for i, a in enumerate(size)}
    never = len(steps)
    # next_use[i][a]: the step after i that uses a again.
    next_use, later = [None] * len(steps), {}
    for i in range(len(steps) - 1, -1, -1):
        next_use[i] = {a: later.get(a, never) for a in steps[i]}
        for a in steps[i]:
            later[a] = i
    upcoming = {a: later.get(a, never) for a in size}
    resident, used, moved = set(size), sum(size.values()), 0
    # The resident pieces, furthest next use first; an entry whose piece went, or whose next use
    # changed since, is stale and skipped.
    furthest = [(-upcoming[a], -order[a], a) for a in size]
    heapq.heapify(furthest)

    def make_room(need, after):
        """Evicts, the piece needed furthest ahead first, until need fits, but only pieces not
        needed again until after step `after`; returns whether it fits."""
        nonlocal used, moved
        while used + need > cap_bytes:
            while furthest and (furthest[0][2] not in resident or -furthest[0][0] != upcoming[furthest[0][2]]):
                heapq.heappop(furthest)
            if not furthest or -furthest[0][0] <= after:
                return False
            victim = heapq.heappop(furthest)[2]
            resident.discard(victim)
            used -= size[victim]
            moved += size[victim]
        return True

    make_room(0, -1)
    moved = 0  # the first fill is not per-iteration traffic
    for i, step in enumerate(steps):
        fits = sum(size[a] for a in set(step)) <= cap_bytes
        # A step larger than the cap: liblms runs such a call with the pieces it finds resident,
        # brings back what fits and leaves the rest in host memory for the kernel to use there.
        # Each piece not resident moves once either way; one comes back where the room is free or
        # held by pieces needed after its own next use, those needed soonest first.
        missing = step if fits else sorted(set(step) - resident, key=lambda a: (next_use[i][a], -order[a]))
        for a in missing:
            if a in resident:
                continue
            moved += size[a]
            if make_room(size[a], i if fits else next_use[i][a]):
                resident.add(a)
                used += size[a]
        upcoming.update(next_use[i])
        for a in next_use[i]:
            heapq.heappush(furthest, (-upcoming[a], -order[a], a))
    return moved


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: belady.py TRACE CAP_MIB [PIECE_MIB]")
    moved = traffic(sys.argv[1], int(sys.argv[2]) << 20, int(sys.argv[3]) << 20 if len(sys.argv) == 4 else 0)
    print("no figure: the trace left some of a launch's uses out"
          if moved is None else moved)
