#!/bin/sh
# The real NCCL under liblms on the real GPU (make check-gpu): each case of lms_nccl_gpu_check
# (tests/lms_nccl_gpu.c), a collective or a grouped send and receive on one rank, runs in a
# process of its own under LD_PRELOAD with a 1 GiB cache, its 64 MiB input evicted just
# before the call: the result is the host model's, and liblms's statistics show the input
# copied back in. Each case runs with evicted buffers mapped in host memory (the default) and
# unmapped, where a kernel reaching one faults (the program says why both are needed). Skips,
# with its reason, where no GPU is usable or NCCL does not load.
build=${LMS_BUILD_DIR:-build}
program=$build/tests/lms_nccl_gpu_check
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "1..0 # SKIP no usable NVIDIA GPU (nvidia-smi -L failed)"
    exit 0
fi
why=$("$program" probe)
case $?,$why in
0,*) ;;
1,?*) echo "1..0 # SKIP $why"; exit 0 ;;
*) echo "1..1"; echo "not ok 1 - $program probe (NCCL's loading) failed"; exit 1 ;;
esac
for v in $(env | sed -n 's/^\(LMS_[A-Z0-9_]*\)=.*/\1/p'); do
    case $v in LMS_BUILD_DIR | LMS_SOURCE_DIR) ;; *) unset "$v" ;; esac
done
# The driver's total, which LMS_EXCLUDE_MB is taken from (nvidia-smi's is larger).
total=$("$build/tests/lms_gpu_check" total-mib) || { echo "1..1"; echo "not ok 1 - lms_gpu_check total-mib failed"; exit 1; }
# Room for NCCL's own buffers beside a call's two. Measured on the H100 (NCCL 2 for CUDA 13):
# its own take about 390 MiB, so that a 512 MiB cache left a call's two 64 MiB buffers no room,
# and liblms ran the call with them in host memory (correct, but nothing copied back in).
cache=1024
preload=$build/preload/liblms.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$program" list >"$work/cases"
echo "1..$(($(wc -l <"$work/cases") * 2))"
n=0
failed=0
while read -r name what; do
    for mapped in 1 0; do
        n=$((n + 1))
        stats=$work/$name.$mapped.json
        env LD_PRELOAD="$preload" LMS_EXCLUDE_MB=$((total - cache)) LMS_MAP_EVICTED=$mapped LMS_STATS=json \
            LMS_STATS_FILE="$stats" "$program" "$name" >"$work/out" 2>"$work/log"
        status=$?
        input=$(sed -n 's/^input_bytes \([0-9]*\)$/\1/p' "$work/out")
        copied=$(sed -n 's/.*"swapped_in":{"count":[0-9]*,"bytes":\([0-9]*\).*/\1/p' "$stats" 2>/dev/null)
        about="$what, its input evicted, LMS_MAP_EVICTED=$mapped"
        if [ $status -eq 0 ] && [ -n "$input" ] && [ "${copied:-0}" -ge "$input" ]; then
            echo "ok $n - $about: the host model's result, $copied bytes swapped in"
        else
            echo "not ok $n - $about (exit $status; ${copied:-no} bytes swapped in, at least ${input:-?} expected)"
            cat "$work/log" "$stats" 2>/dev/null | tail -n 20 | sed 's/^/# /'
            failed=1
        fi
    done
done <"$work/cases"
exit $failed
