#!/usr/bin/env python3
"""tools/lms-run: an option for every LMS_* variable (from the table the build generates from
liblms's own), --help from the same table, %p in trace names, clear errors; it sets LD_PRELOAD,
finds the library from the build tree, the source tree and an install, and passes the
command's arguments and exit status (or signal) through unchanged."""
import os
import re
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "tests"))
from tools_tap import BUILD, LMS_RUN, done, is_equal, ok, plan, run, scratch  # noqa: E402

plan(34)
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
is_equal(out.strip(), f"{libm}|64|2048|t.%p.json|1|json|lru", "options become the LMS_ variables")

# Every variable in liblms's table has its option, --name VALUE or --name=VALUE.
TABLE = os.path.join(BUILD, "preload", "options.tsv")
variables = [l.split("\t")[0] for l in open(TABLE).read().splitlines()[1:]]
args, expected = [], {}
for i, variable in enumerate(variables):
    flag = "--" + variable[len("LMS_"):].lower().replace("_", "-")
    value = "/t.%p.json" if variable == "LMS_TRACE" else f"v{i}"
    args += [flag, value] if i % 2 else [f"{flag}={value}"]
    expected[variable] = value
code, out, err = run([LMS_RUN, *args, "--", "env"], env=env)
got = dict(l.split("=", 1) for l in out.splitlines() if l.startswith("LMS_"))
is_equal({v: got.get(v) for v in variables}, expected, f"an option for each of liblms's {len(variables)} variables")
code, out, err = run([LMS_RUN, "--help"], env=env)
ok(code == 0 and all(v in out for v in variables) and "--threshold-kb N" in out and "--dump-signal SIGNAL" in out,
   "--help lists every variable's option, from the same table", out)
version = re.search(r'LMS_VERSION "(.*)"', open(os.path.join(os.environ.get("LMS_SOURCE_DIR", "."), "preload", "version.h")).read())[1]
code, out, err = run([LMS_RUN, "--version"], env=env)
is_equal(out, f"lms-run (liblms) {version}\n", "--version")

# Trace names: %p added where there is none, so that no run overwrites another's.
for given, expected in (("run.json", "run.%p.json"), ("dir.d/trace", "dir.d/trace.%p"), ("a/run-%p.json", "a/run-%p.json"),
                        (".hidden", ".hidden.%p")):
    code, out, err = run([LMS_RUN, "--trace", given, "--", *show], env=env)
    is_equal(out.strip().split("|")[3], expected, f"--trace {given} records into {expected}")
code, out, err = run([LMS_RUN, "--trace", os.path.join(tmp, "t.json"), "--", "sh", "-c", "echo $$"], env=env)
is_equal(err, f"lms-run: tracing to {os.path.join(tmp, 't.' + out.strip() + '.json')}\n", "lms-run names the file the command's trace goes to")
code, out, err = run([LMS_RUN, "--uses", "--", "true"], env=env)
ok(code == 2 and "--uses" in err and "--trace" in err, "--uses without --trace is refused", err)
code, out, err = run([LMS_RUN, "--stats", "--", *show], env=dict(env, LD_PRELOAD="/first.so"))
is_equal(out.strip(), f"/first.so {libm}|||||table|", "liblms goes after what LD_PRELOAD held")

for status in (3, 255):
    code, out, err = run([LMS_RUN, "--", "sh", "-c", f"exit {status}"], env=env)
    is_equal(code, status, f"exit status {status} passes through")
code, out, err = run([LMS_RUN, "--", "sh", "-c", "kill -TERM $$"], env=env)
is_equal(code, -signal.SIGTERM, "death by a signal passes through")
code, out, err = run([LMS_RUN, "--", os.path.join(tmp, "no-such-program")], env=env)
is_equal((code, err), (127, f"lms-run: {tmp}/no-such-program: no such file\n"), "a missing program: 127 and one clear line")
code, out, err = run([LMS_RUN, "--", "no-such-command-anywhere", "x"], env=env)
is_equal((code, err), (127, "lms-run: no-such-command-anywhere: command not found\n"), "a command not on PATH: likewise")
code, out, err = run([LMS_RUN, "--", tmp], env=env)
is_equal((code, err), (126, f"lms-run: {tmp}: not an executable file\n"), "a directory: 126")

sim_dir = os.path.realpath(os.path.join(os.path.dirname(LMS_RUN), "..", "sim"))
code, out, err = run([LMS_RUN, "--sim", "--", "sh", "-c", 'printf "%s" "$LD_LIBRARY_PATH"'],
                     env=dict(env, LD_LIBRARY_PATH="/elsewhere"))
is_equal(out, sim_dir + ":/elsewhere", "--sim puts the simulated GPU's directory first on LD_LIBRARY_PATH")
code, out, err = run([LMS_RUN, "--sim", "--", "true"], env=dict(env, LMS_SIM_DIR=tmp))
ok(code == 2 and "LMS_SIM_DIR" in err and "libcuda.so.1" in err, "--sim: an LMS_SIM_DIR without the simulator is named", err)

# --timeline: the simulator's timeline under --sim; on a GPU, CUPTI's through the driver's
# injection of liblms-timeline.so, found beside lms-run in the build.
timeline_env = 'printf "%s|%s|%s" "${LMS_SIM_TIMELINE-}" "${CUDA_INJECTION64_PATH-}" "${LMS_GPU_TIMELINE-}"'
code, out, err = run([LMS_RUN, "--sim", "--timeline", "tl.json", "--", "sh", "-c", timeline_env], env=env)
is_equal(out, "tl.%p.json||", "--timeline under --sim: LMS_SIM_TIMELINE, with %p")
injection = os.path.join(tmp, "inj", "tools", "liblms-timeline.so")
os.makedirs(os.path.dirname(injection))
shutil.copy(LMS_RUN, os.path.join(tmp, "inj", "tools", "lms-run"))
shutil.copy(libm, injection)
code, out, err = run([os.path.join(tmp, "inj", "tools", "lms-run"), "--timeline=tl.json", "--", "sh", "-c", timeline_env],
                     env=env)
is_equal(out, f"|{injection}|tl.%p.json", "--timeline on a GPU: the injection beside lms-run and LMS_GPU_TIMELINE")
os.remove(injection)
code, out, err = run([os.path.join(tmp, "inj", "tools", "lms-run"), "--timeline", "tl.json", "--", "true"], env=env)
ok(code == 2 and "liblms-timeline.so" in err and "CUPTI" in err, "--timeline on a GPU without liblms-timeline.so: says so", err)

real = dict(env, LMS_LIBRARY=os.path.join(BUILD, "preload", "liblms.so"))
# ASan's runtime goes first, as lms-run keeps it. TSan's is not preloaded: preloaded into
# lms-run's shell it crashes it, and liblms brings it along as its own dependency.
if os.environ.get("SANITIZE") == "address":
    real["LD_PRELOAD"] = subprocess.check_output(["gcc", "-print-file-name=libasan.so"], text=True).strip()
code, out, err = run([LMS_RUN, "--threshold-kb", "12q", "--", "/bin/true"], env=real)
ok(code == 2 and "LMS_THRESHOLD_KB='12q'" in err and "expected" in err, "liblms names a bad value as the command starts", err)
code, out, err = run([LMS_RUN, "--threshold-kb"], env=env)
ok(code == 2 and "--threshold-kb wants a value" in err, "an option without its value", err)
code, out, err = run([LMS_RUN, "--frob", "--", "true"], env=env)
ok(code == 2 and "--frob" in err, "an unknown option is named", err)
code, out, err = run([LMS_RUN, "--stats"], env=env)
ok(code == 2 and "no command" in err, "no command", err)
code, out, err = run([LMS_RUN, "--", "true"], env=dict(env, LMS_LIBRARY=os.path.join(tmp, "none.so")))
ok(code == 2 and "LMS_LIBRARY" in err and "none.so" in err, "a missing LMS_LIBRARY is named", err)

# Build and source layouts: BUILD/tools/lms-run finds BUILD/preload; tools/lms-run finds build/preload.
no_library = {k: v for k, v in env.items() if k != "LMS_LIBRARY"}
for layout, program, library in (("build", "b/tools/lms-run", "b/preload"), ("source", "s/tools/lms-run", "s/build/preload")):
    os.makedirs(os.path.join(tmp, os.path.dirname(program)))
    os.makedirs(os.path.join(tmp, library))
    shutil.copy(LMS_RUN, os.path.join(tmp, program))
    shutil.copy(libm, os.path.join(tmp, library, "liblms.so"))
    shutil.copy(TABLE, os.path.join(tmp, library, "options.tsv"))
    code, out, err = run([os.path.join(tmp, program), "--policy", "lru", "--", *show], env=no_library)
    is_equal(out.strip(), os.path.join(tmp, library, "liblms.so") + "||||||lru", f"from the {layout} tree: its library and options")

# Installed layout: PREFIX/bin/lms-run finds PREFIX/lib/liblms.so.
os.makedirs(os.path.join(tmp, "prefix", "bin"))
os.makedirs(os.path.join(tmp, "prefix", "lib"))
shutil.copy(LMS_RUN, os.path.join(tmp, "prefix", "bin", "lms-run"))
shutil.copy(libm, os.path.join(tmp, "prefix", "lib", "liblms.so"))
code, out, err = run([os.path.join(tmp, "prefix", "bin", "lms-run"), "--", *show], env=no_library)
is_equal(out.strip(), os.path.join(tmp, "prefix", "lib", "liblms.so") + "||||||", "finds ../lib/liblms.so beside itself")
os.remove(os.path.join(tmp, "prefix", "lib", "liblms.so"))
code, out, err = run([os.path.join(tmp, "prefix", "bin", "lms-run"), "--", "true"], env=no_library)
ok(code == 2 and "LMS_LIBRARY" in err, "no library anywhere: says where it looked", err)
done()
