#!/usr/bin/env python3
"""The fault sweep: every driver entry point liblms calls fails once, at each of its calls in a
reference workload (tests/fault_workload.c), with CUDA_ERROR_OUT_OF_MEMORY and with
CUDA_ERROR_UNKNOWN, with host-located VMM on and off, on one device and on two, under the LRU
policy; and, on one device with host VMM, under LMS_POLICY=lookahead with the workload's
training-like loop (--loop), long enough for the policy to learn it, time its steps and choose
between its plans.

The entry points are those of liblms's real-driver table (preload/hooks.h, real_driver.h). A
fault-free run of each configuration counts their calls (the simulator's LMS_SIM_CALLS); then the
workload runs once per (entry point, n, error, configuration) with LMS_SIM_FAIL=ENTRY:n:ERROR.
Outcomes:

  recovered     the fault was injected, no program call saw an error, all data right
  clean error   exactly one program call returned an error, its retry worked, all data right
  not reached   the run made fewer calls of the entry point than the fault-free one
and failures:
  crash         a signal, a sanitizer report, or no final line
  hang          past the per-run timeout
  mismatch      data read back differs from the host model
  persisting    a call failed again when retried (the fault had been cleared)
  many errors   more than one program call saw an error for one fault

TAP: one test per configuration's fault-free run and one per entry point; then the counts,
and for each failure the command that reproduces it. --sampled runs a deterministic subset
(make test): a few calls of each entry point, spread over errors and configurations; fewer
in sanitizer builds (SANITIZE set). Without it, everything (make check-faults)."""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
import time

build = os.environ.get("LMS_BUILD_DIR", "build")
source = os.environ.get("LMS_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
workload = os.path.join(build, "tests", "fault_workload")
sanitized = bool(os.environ.get("SANITIZE"))
ERRORS = ("OUT_OF_MEMORY", "UNKNOWN")
CONFIGS = tuple((vmm, devices, "lru") for vmm in (1, 0) for devices in (1, 2)) + ((1, 1, "lookahead"),)
BASE_ENV = {"LMS_THRESHOLD_KB": "64", "LMS_EXCLUDE_MB": "0", "LMS_SIM_CAPACITY_MB": "6",
            "LMS_SIM_CONTEXT_RESERVE_MB": "0", "LMS_SIM_KERNEL_RESERVE_MB": "0", "LMS_LOG_LEVEL": "0"}
FAILURES = ("crash", "hang", "mismatch", "persisting", "many errors")
# Failures found and not fixed yet, by entry point: reported as TAP TODO, with why.
KNOWN = {}
# Runs of the full sweep that failed before their fix, which the sample always makes too:
# a failed capture query, or capture-mode exchange, during a capture without host VMM.
REGRESSIONS = (("cuStreamIsCapturing", 8, "UNKNOWN", 0, 1, "lru"),
               ("cuThreadExchangeStreamCaptureMode", 67, "UNKNOWN", 0, 1, "lru"),
               ("cuThreadExchangeStreamCaptureMode", 145, "OUT_OF_MEMORY", 0, 2, "lru"))


def base_name(symbol):
    """The simulator's name for an entry point: no _ptds/_ptsz, no _vN suffix."""
    return re.sub(r"_v\d+$", "", re.sub(r"_(ptds|ptsz)$", "", symbol))


def liblms_entry_points():
    """Every driver entry point in liblms's real-driver table, by base name: the hooks and the
    driver functions liblms calls itself."""
    text = ""
    for header in ("hooks.h", "real_driver.h"):
        with open(os.path.join(source, "preload", header)) as f:
            text += f.read()
    names = set(re.findall(r"LMS_HOOK_TWIN\(X, (cu\w+),", text))
    names |= set(re.findall(r"\bX\((cu\w+)[,)]", text))
    if "get_proc_address_v1" in text:
        names.add("cuGetProcAddress")
    return sorted({base_name(n) for n in names})


def config_env(vmm, devices, policy):
    return dict(BASE_ENV, LMS_SIM_HOST_VMM=str(vmm), LMS_SIM_DEVICES=str(devices), LMS_POLICY=policy)


def workload_command(env):
    """The workload, with its loop where the policy is the one that learns loops."""
    return [workload] + (["--loop"] if env["LMS_POLICY"] == "lookahead" else [])


def command(env):
    return " ".join("%s=%s" % kv for kv in sorted(env.items())) + " " + " ".join(workload_command(env))


def run(env, timeout):
    """Runs the workload; returns (outcome fields, calls by entry point)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("LMS_")}
    full.update(env)
    with tempfile.TemporaryDirectory() as tmp:
        full["LMS_SIM_CALLS"] = os.path.join(tmp, "calls")
        try:
            p = subprocess.run(workload_command(env), env=full, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"hang": True}, {}
        calls = {}
        if os.path.exists(full["LMS_SIM_CALLS"]):
            with open(full["LMS_SIM_CALLS"]) as f:
                calls = {name: int(n) for name, n in (line.split() for line in f)}
    done = re.search(r"^done errors=(\d+) persisting=(\d+) mismatches=(\d+)$", p.stdout, re.M)
    sanitizer = re.search(r"ERROR: AddressSanitizer|WARNING: ThreadSanitizer|runtime error:", p.stderr)
    if p.returncode < 0 or not done or sanitizer:
        return {"crash": True, "status": p.returncode, "tail": (p.stderr or p.stdout)[-400:]}, calls
    errors, persisting, mismatches = map(int, done.groups())
    reported = [l for l in p.stdout.splitlines() if l.startswith(("error ", "persisting ", "mismatch "))]
    return {"errors": errors, "persisting": persisting, "mismatches": mismatches,
            "reported": reported}, calls


def classify(result, calls, entry, nth):
    if result.get("hang"):
        return "hang"
    if result.get("crash"):
        return "crash"
    if result["mismatches"]:
        return "mismatch"
    if result["persisting"]:
        return "persisting"
    if result["errors"] > 1:
        return "many errors"
    if calls.get(entry, 0) < nth:
        return "not reached" if result["errors"] == 0 else "many errors"
    return "clean error" if result["errors"] == 1 else "recovered"


def plan_runs(counts, sampled):
    """(entry, nth, error, vmm, devices, policy) for each run, in a fixed order."""
    runs = []
    for e, entry in enumerate(sorted(counts)):
        mine = [(entry, nth, error) + config
                for config, calls in sorted(counts[entry].items())
                for nth in range(1, calls + 1) for error in ERRORS]
        if sampled and len(mine) > sampled:
            # Evenly spaced, first and last included, shifted per entry point so that errors
            # and configurations alternate over the sweep.
            step = (len(mine) - 1) / (sampled - 1) if sampled > 1 else 0
            picks = sorted({min(len(mine) - 1, round(i * step) + (e % 2 if 0 < i < sampled - 1 else 0))
                            for i in range(sampled)})
            picked = [mine[i] for i in picks]
            mine = picked + [r for r in REGRESSIONS if r[0] == entry and r not in picked]
        runs += mine
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sampled", action="store_true", help="a deterministic subset (make test)")
    ap.add_argument("--per-entry", type=int, default=2 if sanitized else 4,
                    help="runs per entry point with --sampled (default %(default)s)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=float, default=120 if sanitized else 30, help="seconds per run")
    args = ap.parse_args()
    started = time.monotonic()
    entries = liblms_entry_points()

    tests = 0
    failed = False

    def ok(cond, what, detail=()):
        nonlocal tests, failed
        tests += 1
        todo = what.endswith(tuple(KNOWN.values()))
        print("%s %d - %s" % ("ok" if cond and not todo else "not ok", tests, what))
        failed |= not cond
        for line in detail:
            print("# " + line)
        sys.stdout.flush()

    counts = {}  # entry -> {(vmm, devices, policy): calls}
    references = []
    for config in CONFIGS:
        env = config_env(*config)
        result, calls = run(env, args.timeout)
        references.append((env, result, calls))
        for entry in entries:
            if calls.get(entry):
                counts.setdefault(entry, {})[config] = calls[entry]
    runs = plan_runs(counts, args.per_entry if args.sampled else 0)
    by_entry = {entry: sum(1 for r in runs if r[0] == entry) for entry in counts}
    print("1..%d" % (len(CONFIGS) + len(by_entry)))
    for env, result, _ in references:
        clean = not result.get("hang") and not result.get("crash") and not any(
            result[k] for k in ("errors", "persisting", "mismatches"))
        ok(clean, "fault-free run, host VMM %s, %s device(s), %s: no error, data right"
           % (env["LMS_SIM_HOST_VMM"], env["LMS_SIM_DEVICES"], env["LMS_POLICY"]),
           [] if clean else [str(result)[:400], "reproduce: " + command(env)])

    def one(r):
        entry, nth, error = r[:3]
        env = dict(config_env(*r[3:]), LMS_SIM_FAIL="%s:%d:%s" % (entry, nth, error))
        result, calls = run(env, args.timeout)
        return r, env, result, classify(result, calls, entry, nth)

    outcomes = {}
    totals = dict.fromkeys(("recovered", "clean error", "not reached") + FAILURES, 0)
    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for r, env, result, outcome in pool.map(one, runs):
            totals[outcome] += 1
            outcomes.setdefault(r[0], []).append(outcome)
            if outcome in FAILURES:
                failures.append((r, env, result, outcome))
    for entry in sorted(by_entry):
        mine = outcomes.get(entry, [])
        bad = [f for f in failures if f[0][0] == entry]
        summary = ", ".join("%d %s" % (mine.count(o), o) for o in totals if mine.count(o))
        detail = []
        for (e, nth, error, vmm, devices, policy), env, result, outcome in bad[:5]:
            detail.append("%s at call %d (%s, host VMM %d, %d device(s), %s): %s"
                          % (outcome, nth, error, vmm, devices, policy,
                             (result.get("reported") or [result.get("tail", "").strip()[-200:]])[:3]))
            detail.append("  reproduce: " + command(env))
        if len(bad) > 5:
            detail.append("... and %d more" % (len(bad) - 5))
        todo = " # TODO " + KNOWN[entry] if bad and entry in KNOWN else ""
        ok(not bad or todo, "%s: %d runs: %s%s" % (entry, len(mine), summary, todo), detail)
    never = [e for e in entries if e not in counts]
    print("# entry points liblms calls that the workload never reaches: %s" % " ".join(never))
    print("# %d runs in %.0f s: %s" % (len(runs), time.monotonic() - started,
                                       ", ".join("%d %s" % (n, o) for o, n in totals.items())))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
