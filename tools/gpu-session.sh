#!/bin/bash
# The GPU checks and benchmarks in a fixed time, from a build made elsewhere: for a GPU
# machine lent for minutes, which may lack the compilers, headers or Open MPI a build needs.
#
#   tools/gpu-session.sh OUTDIR CHECK_SECONDS TOTAL_SECONDS
#
# Runs make check-gpu's tests one by one (each stopped at what is left of CHECK_SECONDS),
# then lms-bench on the real GPU until TOTAL_SECONDS (its stages and factors from BENCH_STAGES,
# BENCH_CIFAR10_FACTORS, BENCH_UNET3D_FACTORS, BENCH_ITERS), then, with a minute left, its first
# cifar10_full run again under LMS_TRACE with the launches' uses: the real run's sequence, for
# tools/bench/belady.py and lms-trace tune to replay here; then, with another minute, the
# trainer alone where its speed fell on the H100 (212 k images/s at batch 14924, 157 k at
# 16384): at 16383 and 16384, where conv1's output reaches 2^31 bytes, and at 16384 with a
# 4 GiB cuDNN workspace. Writes OUTDIR/check.log, OUTDIR/bench.log, lms-bench's results in
# OUTDIR/bench/, OUTDIR/trace.json and OUTDIR/alone.log, and prints a summary last.
# LMS_BUILD_DIR names the build (default build/): `make TRAINER_MPICC= check-gpu` on a machine of
# the GPU machine's processor builds everything it runs (TRAINER_MPICC= where the GPU machine
# has no Open MPI). cuDNN, cuBLAS, NCCL and CUPTI (for the timeline) are taken
# from the loader's path, else from wherever they are installed under /usr, /usr/local or /opt
# (Python packages hold them too).
set -u
if [ $# -ne 3 ]; then
    echo "usage: $0 OUTDIR CHECK_SECONDS TOTAL_SECONDS" >&2
    exit 2
fi
out=$1
case $2$3 in *[!0-9]*) echo "$0: CHECK_SECONDS and TOTAL_SECONDS must be whole seconds" >&2; exit 2 ;; esac
start=$(date +%s)
check_end=$((start + $2))
end=$((start + $3))
source_dir=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${LMS_BUILD_DIR:-$source_dir/build}" 2>/dev/null && pwd) || {
    echo "$0: no build at ${LMS_BUILD_DIR:-$source_dir/build} (LMS_BUILD_DIR)" >&2
    exit 2
}
mkdir -p "$out/bench" || exit 2
export LMS_BUILD_DIR=$build LMS_SOURCE_DIR=$source_dir PYTHONUNBUFFERED=1

for lib in libcudnn.so.9 libcublas.so.13 libnccl.so.2 libcupti.so.13; do
    ldconfig -p 2>/dev/null | grep -q "$lib " && continue
    found=$(find /usr /usr/local /opt -name "$lib" 2>/dev/null | head -n 1)
    [ -n "$found" ] && LD_LIBRARY_PATH="$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export LD_LIBRARY_PATH

left() { echo $(($1 - $(date +%s))); }
{
    echo "$(date) build $build"
    nvidia-smi -L 2>&1 || echo "nvidia-smi lists no GPU"
    for t in gpu_smoke trainer_gpu_layers lms_gpu lms_nccl_gpu trainer_gpu trainer_pytorch; do
        limit=$(left $check_end)
        if [ ! -x "$build/tests/$t.t" ]; then
            echo "=== $t: not built (make check-gpu builds the GPU tests, and skips them without a GPU)"
            continue
        elif [ "$limit" -lt 10 ]; then
            echo "=== $t: not run, out of time"
            continue
        fi
        echo "=== $t (at most ${limit}s)"
        work=$(mktemp -d)
        began=$(date +%s)
        (cd "$work" && timeout -k 5 "$limit" "$build/tests/$t.t")
        echo "=== $t: exit $? in $(($(date +%s) - began))s"
        rm -rf "$work"
    done
} >"$out/check.log" 2>&1

limit=$(left $end)
if [ "$limit" -ge 30 ]; then
    BENCH_OUT="$out/bench" timeout -k 5 $((limit - 5)) "$source_dir/tools/bench/lms-bench" >"$out/bench.log" 2>&1
    echo "=== lms-bench: exit $?" >>"$out/bench.log"
else
    echo "=== lms-bench: not run, out of time" >"$out/bench.log"
fi

# The first cifar10_full row's run, traced: its batch, the cap's exclusion and liblms's settings
# from the results.
traced=$(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print(r["cifar10"]["rows"][0]["batch"], r["machine"]["total_mib"] - r["cifar10"]["cap_mib"],
      *(f"{k}={v}" for k, v in r["settings"].items()))' "$out/bench/results.json" 2>/dev/null)
limit=$(left $end)
if [ -n "$traced" ] && [ "$limit" -ge 60 ]; then
    set -- $traced
    batch=$1 exclude=$2
    shift 2
    work=$(mktemp -d)
    # timeout outside env: liblms preloaded into timeout too would open the trace file first.
    (cd "$work" && timeout -k 5 $((limit - 5)) env "$@" LD_PRELOAD="$build/preload/liblms.so" \
        LMS_EXCLUDE_MB="$exclude" LMS_STATS=json LMS_LOG_LEVEL=1 LMS_TRACE="$out/trace.json" \
        LMS_TRACE_USES=1 LMS_TRACE_MAX_MB=15 "$build/trainer/lms-trainer" train \
        --model cifar10_full --batch "$batch" --iters 26 --warmup 20 --display 1 --test-interval 0 \
        --snapshot-prefix "$work/snap") >"$out/trace.log" 2>&1
    echo "=== traced cifar10_full at batch $batch: exit $?" >>"$out/trace.log"
    rm -rf "$work"
elif [ -n "$traced" ]; then
    echo "=== traced run: not run, out of time" >"$out/trace.log"
else
    echo "=== traced run: not run, no cifar10_full row, or no settings, in lms-bench's results" >"$out/trace.log"
fi

limit=$(left $end)
if [ "$limit" -ge 60 ] && [ -x "$build/trainer/bench-cifar10" ]; then
    {
        BENCH_BATCHES="14924 16383 16384" timeout -k 5 $(((limit - 5) * 2 / 3)) "$build/trainer/bench-cifar10" 30
        BENCH_BATCHES=16384 BENCH_TRAINER_FLAGS="--workspace-limit 4096" timeout -k 5 $(($(left $end) - 5)) \
            "$build/trainer/bench-cifar10" 30
    } >"$out/alone.log" 2>&1
    echo "=== the trainer alone: exit $?" >>"$out/alone.log"
else
    echo "=== the trainer alone: not run (under a minute left, or no bench-cifar10 in the build)" >"$out/alone.log"
fi

grep -E '^(not ok|ok [0-9]+ # (SKIP|skip)|===|1\.\.)' "$out/check.log" | cut -c1-200
tail -n 3 "$out/bench.log" | cut -c1-200
tail -n 1 "$out/trace.log" | cut -c1-200
cut -c1-200 "$out/alone.log"
