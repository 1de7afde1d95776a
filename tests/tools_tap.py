"""TAP for the Python tests of the trace tools (tests/trace_*.py, tests/tools_*.py), and the
helpers they share: where the built programs are, running them, writing scripted traces."""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile

BUILD = os.environ.get("LMS_BUILD_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build")
WORKLOAD = os.path.join(BUILD, "tests", "trace_workload")
LMS_TRACE = os.path.join(BUILD, "tools", "lms-trace")
LMS_RUN = os.path.join(BUILD, "tools", "lms-run")

_count = 0
_failed = 0


def plan(n):
    print(f"1..{n}", flush=True)


def ok(condition, name, detail=None):
    global _count, _failed
    _count += 1
    if not condition:
        _failed += 1
    print(f"{'' if condition else 'not '}ok {_count} - {name}", flush=True)
    if not condition and detail is not None:
        for line in str(detail).splitlines():
            print(f"# {line}", file=sys.stderr, flush=True)
    return condition


def is_equal(got, expected, name):
    return ok(got == expected, name, f"got:      {got!r}\nexpected: {expected!r}")


def timeline_slice(pid, tid, name, ts, dur, nbytes=0):
    """One op of a device timeline (LMS_SIM_TIMELINE's format): a Chrome trace slice."""
    return {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": ts, "dur": dur, "args": {"bytes": nbytes}}


def done():
    sys.exit(1 if _failed else 0)


def run(args, **kwargs):
    """Runs a program; returns (returncode, stdout, stderr) as text."""
    p = subprocess.run(args, capture_output=True, text=True, timeout=120, **kwargs)
    return p.returncode, p.stdout, p.stderr


def scratch():
    """A private directory for the files of one test script, removed when it ends."""
    path = tempfile.mkdtemp(prefix="lms-tools-test-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def workload(path, *options):
    """Writes a scripted trace (tests/trace_workload.c); returns (returncode, stderr)."""
    code, _, err = run([WORKLOAD, path, *options])
    return code, err
