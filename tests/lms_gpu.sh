#!/bin/sh
# liblms on the real GPU (make check-gpu): own kernels, cuBLAS and cuDNN over four times the
# soft limit, the differential stress test, compute-sanitizer memcheck on a small case, and
# the device's timeline of the first (lms-run --timeline, through CUPTI).
# Skips, with its reason, where no GPU is usable.
build=${LMS_BUILD_DIR:-build}
program=$build/tests/lms_gpu_check
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "1..0 # SKIP no usable NVIDIA GPU (nvidia-smi -L failed)"
    exit 0
fi
total=$("$program" total-mib) || { echo "1..1"; echo "not ok 1 - $program total-mib failed"; exit 1; }
limit=1024
export LMS_EXCLUDE_MB=$((total - limit)) LMS_SOFT_LIMIT_MB=$limit LMS_STATS=table
preload=$build/preload/liblms.so
log=$(mktemp)
timeline_dir=$(mktemp -d)
trap 'rm -rf "$log" "$timeline_dir"' EXIT
echo "1..4"
n=0
check() {
    what=$1; shift
    n=$((n + 1))
    if "$@" >"$log" 2>&1; then echo "ok $n - $what"; else echo "not ok $n - $what"; sed 's/^/# /' "$log" | tail -n 40; fi
}
check "own kernels, cuBLAS and cuDNN over 4x the ${limit} MiB soft limit match the CPU" \
    env LD_PRELOAD="$preload" "$program" workload
# 8 MiB: four 2 MiB handles for about five live swappable allocations.
LMS_EXCLUDE_MB=$((total - 8)) LMS_THRESHOLD_KB=4 \
    check "differential stress, 10^5 operations, 8 MiB soft limit" env LD_PRELOAD="$preload" "$program" stress 100000
if command -v compute-sanitizer >/dev/null 2>&1; then
    # The sanitizer adds its own library to the program's LD_PRELOAD: give it ours to extend.
    LMS_EXCLUDE_MB=$((total - 8)) LMS_THRESHOLD_KB=4 LD_PRELOAD="$preload" \
        check "compute-sanitizer memcheck finds no error on a small case" \
        compute-sanitizer --tool memcheck --error-exitcode 1 "$program" stress 2000
else
    n=$((n + 1)); echo "ok $n # SKIP compute-sanitizer is not installed"
fi

# The timeline must hold the kernels and both directions' copies that swapping at 4x makes,
# in the simulator's format, which lms-timeline reads.
timeline_holds_swapping() {
    "$build/tools/lms-run" --timeline "$timeline_dir/run.json" -- "$program" workload || return 1
    python3 - "$timeline_dir"/run.*.json <<'PY' || return 1
import json, sys
events = json.load(open(sys.argv[1]))
slices = [e for e in events if e.get("ph") == "X"]
kernels = [e for e in slices if e["pid"] != 1000 and e["tid"] == 0 and not e["name"].startswith(("copy", "memset"))]
copied = {tid: sum(e["args"]["bytes"] for e in slices if e["pid"] != 1000 and e["tid"] == tid) for tid in (1, 2)}
waits = [e for e in slices if e["pid"] == 1000]
print(f"{len(kernels)} kernels, {copied[1]} bytes in, {copied[2]} out, {len(waits)} host waits")
sys.exit(0 if kernels and copied[1] > 0 and copied[2] > 0 and all(e["dur"] >= 0 for e in slices) else 1)
PY
    "$build/tools/lms-timeline" summary "$timeline_dir"/run.*.json
}
if [ -f "$build/tools/liblms-timeline.so" ]; then
    check "the device's timeline (lms-run --timeline) holds the kernels and the copies both ways" \
        timeline_holds_swapping
else
    n=$((n + 1)); echo "ok $n # SKIP liblms-timeline.so is not built (no CUPTI in the CUDA toolkit)"
fi
