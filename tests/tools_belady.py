#!/usr/bin/env python3
"""The bench's Belady replay (tools/bench/belady.py) on scripted traces: what it must move on a
loop larger than the cap, pieces as liblms splits them or split finer, steps that alone need more
than the cap (some of their pieces used in host memory), and no figure where the trace left some
of a launch's uses out."""
import json
import os
import sys

SOURCE = os.environ.get("LMS_SOURCE_DIR", ".")
sys.path.insert(0, os.path.join(SOURCE, "tests"))
sys.path.insert(0, os.path.join(SOURCE, "tools", "bench"))
from tools_tap import done, is_equal, plan, scratch  # noqa: E402
import belady  # noqa: E402

MIB = 1 << 20
plan(9)
tmp = scratch()


def trace(name, allocations, steps, piece=0, left_out=0):
    """allocations: {address: bytes}; steps: lists of the addresses each launch uses; left_out:
    how many more uses the first launch had than it lists (as liblms's trace says of a launch
    with too many to list)."""
    events = [{"ph": "M", "name": "lms.settings", "args": {"piece_bytes": piece}}]
    events += [{"ph": "i", "name": "alloc", "args": {"addr": hex(a), "bytes": b, "cached": True}}
               for a, b in allocations.items()]
    events += [{"ph": "i", "name": "k", "cat": "launch", "args": {"uses": [hex(a) for a in step]}} for step in steps]
    if left_out:
        events[len(allocations) + 1]["args"]["uses_left_out"] = left_out
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(events, f)
    return path


# Four 2 MiB allocations used in turn, twice, in room for three: after the first fill (which
# leaves out the one used last), two misses, each a copy out and a copy in.
loop = {0x1000000 * (i + 1): 2 * MIB for i in range(4)}
order = list(loop)
cycle = trace("cycle.json", loop, [[a] for a in order * 2])
is_equal(belady.traffic(cycle, 6 * MIB), 4 * 2 * MIB,
         "a loop of four in room for three: two misses after the first fill, each out and in")
is_equal(belady.traffic(cycle, 8 * MIB), 0, "in room for all four: nothing moves")
# One allocation of 5 MiB in 2 MiB pieces (2, 2 and 1 padded to 2) beside a 2 MiB one, used in
# turn in room for 6 MiB: the other's use evicts one piece, which comes back next in its place;
# whole, the allocation would go out and back in (12 MiB) for the other's 4.
pieces = [0x1000000, 0x1200000, 0x1400000]  # a launch's uses name every piece, as liblms's trace does
split = trace("pieces.json", {0x1000000: 5 * MIB, 0x2000000: 2 * MIB},
              [pieces, [0x2000000], pieces], piece=2 * MIB)
is_equal(belady.traffic(split, 6 * MIB), 4 * 2 * MIB, "pieces move alone: one piece out and back, the other in and out")
# In room for 4 MiB each use of the 6 MiB allocation needs more than the cap. The first finds
# two pieces resident and uses the third in host memory (2 MiB); the other's use evicts a piece
# and brings the other in (4); the last finds one piece resident and uses two in host memory
# (4): the other, needed never again, is not evicted for pieces needed never again either.
is_equal(belady.traffic(split, 4 * MIB), 10 * MIB, "a step needing more than the cap uses in host memory what does not fit")
# Three 2 MiB pieces used together in room for two, beside a 2 MiB allocation. The step larger
# than the cap finds one piece resident, beside the other allocation: it brings back the piece
# needed next, in the room of the other allocation, needed later (2 MiB out, 2 in), and uses
# the third in host memory (2). The other comes back at its use, in the room of the piece
# needed never again (2 out, 2 in).
a1, a2, a3, other = 0x1000000, 0x1200000, 0x1400000, 0x2000000
room = trace("room.json", {a1: 6 * MIB, other: 2 * MIB},
             [[a1, other], [a1, a2, a3], [a2], [other]], piece=2 * MIB)
is_equal(belady.traffic(room, 4 * MIB), 10 * MIB,
         "a step larger than the cap brings back a piece where one needed later than it is resident")
# An 8 MiB allocation beside a 2 MiB one, used in turn in room for 8 MiB, traced in pieces of 4
# MiB: the other's use evicts a 4 MiB piece, which comes back next in its place. Replayed in 2
# MiB pieces, a 2 MiB piece goes out and comes back instead, as if traced so.
coarse = trace("coarse.json", {0x1000000: 8 * MIB, 0x2000000: 2 * MIB},
               [[0x1000000, 0x1400000], [0x2000000], [0x1000000, 0x1400000]], piece=4 * MIB)
is_equal(belady.traffic(coarse, 8 * MIB), 2 * 4 * MIB + 2 * 2 * MIB, "in the trace's pieces: 4 MiB out and in, 2 in and out")
is_equal(belady.traffic(coarse, 8 * MIB, 2 * MIB), 4 * 2 * MIB, "in pieces split finer than the trace's: 2 MiB each way, twice")
is_equal(belady.traffic(cycle, 6 * MIB, 1 * MIB), 4 * 2 * MIB, "no piece is split below the VMM granularity")
# A launch whose uses the trace did not all list: the replay cannot know what it needed.
partial = trace("partial.json", loop, [[a] for a in order * 2], left_out=3)
is_equal(belady.traffic(partial, 6 * MIB), None, "a launch with uses left out of the trace has no Belady figure")
done()
