#!/bin/sh
# make demo on a machine without a GPU: Caffe's cifar10_full trains on the simulated GPU
# (sim/) under liblms, with liblms's cache at about a quarter of what the run holds, so that it
# trains only by swapping; its losses are checked against the trainer's CPU mode, digit for
# digit, and its trace is plotted. Usage: demo-sim.sh BUILD_DIR. DEMO_SIM_BATCH and
# DEMO_SIM_ITERS change the run (default 64 and 4).
set -u
build=${1:?usage: demo-sim.sh BUILD_DIR}
trainer=$build/trainer/lms-trainer
lms_run=$build/tools/lms-run
lms_trace=$build/tools/lms-trace
out=$build/demo
batch=${DEMO_SIM_BATCH:-64}
iters=${DEMO_SIM_ITERS:-4}
flags="--model cifar10_full --batch $batch --iters $iters --display 1 --test-interval 0 --seed 7"
# The simulated device is shaped like the H100 of the project's measurements: 81079 MiB, as
# its driver counts them (LMS_EXCLUDE_MB is taken from that).
LMS_SIM_DEVICE=h100
export LMS_SIM_DEVICE
device_mib=81079
mkdir -p "$out" || exit 1
# This script's own outputs of a previous run (liblms never overwrites a trace).
rm -f "$out/sim-trace.json" "$out/sim-trace.svg" "$out"/*_iter_*.snap

fail() {
    echo "demo: $1" >&2
    exit 1
}
losses() { sed -n 's/.*] Iteration \([0-9]*\) (.*loss = \(.*\)$/\1 \2/p' "$1"; }
# The first few lines of one kind of liblms log line, and how many there were.
show() {
    grep "\] $1: " "$out/sim.log" | head -n 3
    echo "  ... $(grep -c "\] $1: " "$out/sim.log") $1 lines in all"
}

echo "demo: no NVIDIA GPU here, so cifar10_full runs on liblms's simulated GPU (sim/), which runs"
echo "      the CUDA driver API on this machine's memory with the CPU's arithmetic."

# What the run holds at its peak (tensors, weights, the data set on the device), measured by
# liblms in one iteration without a cap; the cache gets a quarter of it.
LMS_STATS=json "$lms_run" --sim -- "$trainer" train --sim $flags --iters 1 --snapshot-prefix "$out/probe" \
    >/dev/null 2>"$out/probe.log" || { tail -n 3 "$out/probe.log" >&2; fail "the probe run failed"; }
peak=$(sed -n 's/.*"peak_demanded":\([0-9]*\).*/\1/p' "$out/probe.log")
[ -n "$peak" ] || fail "no statistics from the probe run (see $out/probe.log)"
cache_kib=$((peak / 4 / 1024))
echo "demo: the run holds $((peak >> 20)) MiB at its peak; liblms's cache: a quarter, $((cache_kib >> 10)) MiB"
echo

echo "demo: the reference, the trainer's CPU mode"
"$trainer" train --cpu $flags --snapshot-prefix "$out/cpu" 2>"$out/cpu.log" || fail "the CPU run failed (see $out/cpu.log)"
echo

echo "demo: under liblms on the simulated GPU: LMS_TRACE=$out/sim-trace.json lms-run --sim --stats"
LMS_LOG_LEVEL=3 LMS_EXCLUDE_MB="$((device_mib * 1024 - cache_kib))K" LMS_TRACE="$out/sim-trace.json" \
    "$lms_run" --sim --stats -- "$trainer" train --sim $flags --snapshot-prefix "$out/sim" 2>"$out/sim.log"
status=$?
grep '\] option ' "$out/sim.log"
show allocate
show evict
show restore
sed -n '/^liblms .*statistics/,$p' "$out/sim.log"
[ $status -eq 0 ] || fail "the run under liblms failed (status $status; see $out/sim.log)"
echo

"$lms_trace" plot "$out/sim-trace.json" -o "$out/sim-trace.svg" || fail "lms-trace plot failed"
losses "$out/cpu.log" >"$out/cpu-losses.txt"
losses "$out/sim.log" >"$out/sim-losses.txt"
[ -s "$out/cpu-losses.txt" ] && cmp -s "$out/cpu-losses.txt" "$out/sim-losses.txt" ||
    fail "the losses differ from the CPU's: compare $out/cpu-losses.txt and $out/sim-losses.txt"
paste -d' ' "$out/cpu-losses.txt" "$out/sim-losses.txt" |
    awk '{ printf "  iteration %s: loss %s on the CPU, %s under liblms\n", $1, $2, $4 }'
echo
swaps=$(sed -n 's/^ *swapped out *\([0-9][0-9]*\) .*/\1/p' "$out/sim.log")
echo "demo: shown: cifar10_full at batch $batch trained $iters iterations through the CUDA driver API"
echo "      with liblms's cache capped at a quarter of what the run holds; liblms evicted tensors to"
echo "      host memory and restored them ${swaps:+($swaps swaps out) }without the trainer knowing, ran the"
echo "      calls larger than the cache with part of their tensors in host memory, and every loss"
echo "      equals the CPU mode's digit for digit. The memory timeline is $out/sim-trace.svg,"
echo "      the trace (for Perfetto or lms-trace) $out/sim-trace.json, the full log $out/sim.log."
