#!/bin/sh
# liblms on the real GPU (make check-gpu): own kernels, cuBLAS and cuDNN over four times the
# soft limit, the differential stress test, and compute-sanitizer memcheck on a small case.
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
trap 'rm -f "$log"' EXIT
echo "1..3"
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
