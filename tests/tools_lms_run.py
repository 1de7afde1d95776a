#!/usr/bin/env python3
"""tools/lms-run: sets the variables and LD_PRELOAD, finds the library, and passes the
command's arguments and exit status (or signal) through unchanged."""
import os
import shutil
import signal
import sys

sys.path.insert(0, os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tests"))
from tools_tap import LMS_RUN, done, is_equal, ok, plan, run, scratch  # noqa: E402

plan(17)
tmp = scratch()

# A harmless library stands in for liblms.so: the loader preloads it and nothing changes.
libm = next((line.split()[-1] for line in open("/proc/self/maps") if "/libm.so" in line or "/libm-" in line), None)
if libm is None:
    libm = "/lib/x86_64-linux-gnu/libm.so.6"
env = dict(os.environ, LMS_LIBRARY=libm)
env.pop("LD_PRELOAD", None)
for name in ("LMS_THRESHOLD_KB", "LMS_EXCLUDE_MB", "LMS_TRACE", "LMS_TRACE_USES", "LMS_STATS", "LMS_POLICY"):
    env.pop(name, None)

show = ['sh', '-c', 'for v in "$@"; do printf "[%s]\\n" "$v"; done; '
        'printf "%s|%s|%s|%s|%s|%s|%s\\n" "$LD_PRELOAD" "${LMS_THRESHOLD_KB-}" "${LMS_EXCLUDE_MB-}" '
        '"${LMS_TRACE-}" "${LMS_TRACE_USES-}" "${LMS_STATS-}" "${LMS_POLICY-}"', 'sh']

code, out, err = run([LMS_RUN, "--", *show, "two words", "", "'quoted'", "$HOME", "-x"], env=env)
is_equal(code, 0, "runs the command" + (f": {err}" if err else ""))
is_equal(out.splitlines()[:5], ["[two words]", "[]", "['quoted']", "[$HOME]", "[-x]"], "arguments arrive unchanged")
is_equal(out.splitlines()[5], f"{libm}||||||", "only LD_PRELOAD is set without options")

code, out, err = run([LMS_RUN, "--threshold-kb", "64", "--exclude-mb", "2048", "--trace", "t.json", "--uses",
                      "--stats=json", "--policy", "lru", "--", *show], env=env)
is_equal(out.strip(), f"{libm}|64|2048|t.json|1|json|lru", "options become the LMS_ variables")
code, out, err = run([LMS_RUN, "--stats", "--", *show], env=dict(env, LD_PRELOAD="/first.so"))
is_equal(out.strip(), f"/first.so {libm}|||||table|", "liblms goes after what LD_PRELOAD held")

for status in (3, 255):
    code, out, err = run([LMS_RUN, "--", "sh", "-c", f"exit {status}"], env=env)
    is_equal(code, status, f"exit status {status} passes through")
code, out, err = run([LMS_RUN, "--", "sh", "-c", "kill -TERM $$"], env=env)
is_equal(code, -signal.SIGTERM, "death by a signal passes through")
code, out, err = run([LMS_RUN, "--", os.path.join(tmp, "no-such-program")], env=env)
is_equal(code, 127, "a missing command: 127, as the shell gives")

sim_dir = os.path.realpath(os.path.join(os.path.dirname(LMS_RUN), "..", "sim"))
code, out, err = run([LMS_RUN, "--sim", "--", "sh", "-c", 'printf "%s" "$LD_LIBRARY_PATH"'],
                     env=dict(env, LD_LIBRARY_PATH="/elsewhere"))
is_equal(out, sim_dir + ":/elsewhere", "--sim puts the simulated GPU's directory first on LD_LIBRARY_PATH")
code, out, err = run([LMS_RUN, "--sim", "--", "true"], env=dict(env, LMS_SIM_DIR=tmp))
ok(code == 2 and "LMS_SIM_DIR" in err and "libcuda.so.1" in err, "--sim: an LMS_SIM_DIR without the simulator is named", err)

code, out, err = run([LMS_RUN, "--threshold-kb", "12k", "--", "true"], env=env)
ok(code == 2 and "--threshold-kb" in err and "12k" in err, "a bad number is named", err)
code, out, err = run([LMS_RUN, "--frob", "--", "true"], env=env)
ok(code == 2 and "--frob" in err, "an unknown option is named", err)
code, out, err = run([LMS_RUN, "--stats"], env=env)
ok(code == 2 and "no command" in err, "no command", err)
code, out, err = run([LMS_RUN, "--", "true"], env=dict(env, LMS_LIBRARY=os.path.join(tmp, "none.so")))
ok(code == 2 and "LMS_LIBRARY" in err and "none.so" in err, "a missing LMS_LIBRARY is named", err)

# Installed layout: PREFIX/bin/lms-run finds PREFIX/lib/liblms.so.
os.makedirs(os.path.join(tmp, "prefix", "bin"))
os.makedirs(os.path.join(tmp, "prefix", "lib"))
shutil.copy(LMS_RUN, os.path.join(tmp, "prefix", "bin", "lms-run"))
shutil.copy(libm, os.path.join(tmp, "prefix", "lib", "liblms.so"))
no_library = {k: v for k, v in env.items() if k != "LMS_LIBRARY"}
code, out, err = run([os.path.join(tmp, "prefix", "bin", "lms-run"), "--", *show], env=no_library)
is_equal(out.strip(), os.path.join(tmp, "prefix", "lib", "liblms.so") + "||||||", "finds ../lib/liblms.so beside itself")
os.remove(os.path.join(tmp, "prefix", "lib", "liblms.so"))
code, out, err = run([os.path.join(tmp, "prefix", "bin", "lms-run"), "--", "true"], env=no_library)
ok(code == 2 and "LMS_LIBRARY" in err, "no library anywhere: says where it looked", err)
done()
