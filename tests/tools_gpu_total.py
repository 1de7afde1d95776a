#!/usr/bin/env python3
"""tools/gpu-total-mib.py, which gives make demo the device's memory as the driver counts it,
on the simulated GPU: the H100's 81079 MiB (nvidia-smi says 81559), a device shaped smaller,
and a clear error where there is no driver to load."""
import os
import sys

sys.path.insert(0, os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tests"))
from tools_tap import done, is_equal, ok, plan, run, scratch  # noqa: E402

SCRIPT = os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tools", "gpu-total-mib.py")
SIM = os.path.join(os.environ.get("LMS_BUILD_DIR", "build"), "sim")
base = {k: v for k, v in os.environ.items() if not k.startswith(("LMS_SIM_", "LD_LIBRARY_PATH"))}
base["LMS_SIM_LOG"] = os.devnull

plan(3)
if os.environ.get("SANITIZE") in ("address", "thread"):
    # The simulator built with that sanitizer cannot be loaded into an uninstrumented Python.
    for n in range(1, 4):
        print(f"ok {n} # skip the {os.environ['SANITIZE']} build's simulator does not load into Python")
    sys.exit(0)
code, out, err = run([sys.executable, SCRIPT], env=dict(base, LD_LIBRARY_PATH=SIM, LMS_SIM_DEVICE="h100"))
is_equal((code, out.strip()), (0, "81079"), "the simulated H100: the driver's 81079 MiB")
code, out, err = run([sys.executable, SCRIPT],
                     env=dict(base, LD_LIBRARY_PATH=SIM, LMS_SIM_DEVICE="h100", LMS_SIM_CAPACITY_MB="16"))
is_equal((code, out.strip()), (0, "16"), "a device shaped with 16 MiB: 16")
code, out, err = run([sys.executable, SCRIPT], env=dict(base, LD_LIBRARY_PATH=scratch()), cwd=scratch())
ok(code != 0 and "libcuda.so.1" in err if code else out.strip().isdigit(),
   "without a driver it exits non-zero naming libcuda.so.1 (a machine with a driver prints its count)",
   out + err)
done()
