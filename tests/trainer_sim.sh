#!/bin/sh
# trainer --sim: the trainer's driver calls on the simulated GPU (sim/), alone, under
# LD_PRELOAD=liblms.so and under lms-run --sim. Each model prints the CPU's losses digit for
# digit and ends with its snapshot byte for byte, without liblms, and under liblms with its
# cache at 1/2, 1/4, 1/8 and 1/12 of the run's peak demand, and without host VMM at the
# smallest cache that holds the run's largest single call, swapping both ways. A run resumed
# from a snapshot repeats an uninterrupted one; the convolutions share a workspace, as cuDNN's on
# a GPU; 10^4 launches at 4x oversubscription leave no
# unsupported call (nor a leak under ASan); test, time and info work; another libcuda.so.1
# loaded before the trainer starts is refused.
set -u
. "$LMS_SOURCE_DIR/tests/trainer_tap.sh"

# No LMS_ variable from outside: each run sets its own.
for v in $(env | sed -n 's/^\(LMS_[A-Z0-9_]*\)=.*/\1/p'); do
    case $v in LMS_BUILD_DIR | LMS_SOURCE_DIR) ;; *) unset "$v" ;; esac
done
capacity_mb=1024
LMS_SIM_CAPACITY_MB=$capacity_mb LMS_SIM_LOG=$work/sim.log
export LMS_SIM_CAPACITY_MB LMS_SIM_LOG

# liblms is preloaded as users preload it. ASan's runtime has to come first in the process's
# libraries (TSan's may come with liblms, and preloaded into lms-run's shell it crashes it).
liblms=$LMS_BUILD_DIR/preload/liblms.so
lms_run=$LMS_BUILD_DIR/tools/lms-run
runtime=
[ "${SANITIZE:-}" = address ] && runtime=$(gcc -print-file-name=libasan.so)

# "ITER LOSS" for every displayed iteration of a log.
losses() { sed -n 's/.*] Iteration \([0-9]*\) (.*loss = \(.*\)$/\1 \2/p' "$1"; }
# A count or size from liblms's JSON statistics in a log.
lms_stat() { sed -n "s/.*\"$1\":\\({\"count\":\\)\\{0,1\\}\\([0-9]*\\).*/\\2/p" "$2"; }
# The run's losses are the CPU's (cpu.txt), digit for digit, and so are the weights and
# momentum it ends with (its snapshot is the CPU run's, byte for byte); on failure, the log's end.
same_losses() {
    losses "$1" >got.txt
    [ -s cpu.txt ] && cmp -s cpu.txt got.txt && cmp -s cpu_iter_$iterations.snap sim_iter_$iterations.snap &&
        return 0
    tail -n 4 "$1" | sed 's/^/# /'
    return 1
}

# The smallest cache, in bytes, that holds the largest single call of a traced run
# (LMS_TRACE_USES=1): the allocations under the threshold, which stay resident, plus the
# allocations the call uses, in the whole 2 MiB units liblms maps them in.
largest_call() {
    python3 - "$1" <<'EOF'
import json, sys
unit = 2 << 20
size, cached, resident, need = {}, {}, 0, 0
for e in json.load(open(sys.argv[1])):     # the trace is an array of events (docs/trace-format.md)
    a = e.get("args", {})
    if e["name"] == "alloc":
        size[a["addr"]], cached[a["addr"]] = a["bytes"], a["cached"]
        resident += 0 if a["cached"] else a["bytes"]
    elif e["name"] == "free":
        resident -= 0 if cached[a["addr"]] else a["bytes"]
    elif e.get("cat") == "launch":
        need = max(need, resident + sum(-(-size[u] // unit) * unit for u in a["uses"]))
print(need)
EOF
}

# The distinct addresses launches used (LMS_TRACE_USES=1) that start no allocation: pieces of
# split ones (LMS_PIECE_MB).
pieces_used() {
    python3 - "$1" <<'EOF'
import json, sys
events = json.load(open(sys.argv[1]))
starts = {e["args"]["addr"] for e in events if e["name"] == "alloc"}
print(len({u for e in events if e.get("cat") == "launch" for u in e["args"].get("uses", [])} - starts))
EOF
}

# train_sim LOG COMMAND...: the model's run on the simulated GPU, started by COMMAND (env
# and variables, or lms-run). Fails, showing the log's end, unless it exits with 0 (a
# sanitizer that finds something and goes on still changes the status).
train_sim() {
    log=$1
    shift
    rm -f sim_iter_*.snap
    "$@" "$trainer" train $flags --sim --snapshot-prefix sim 2>"$log" && return 0
    tail -n 4 "$log" | sed 's/^/# /'
    return 1
}

# swap_run DESCRIPTION COMMAND...: a run under liblms prints the CPU's losses and swaps both ways,
# or, where the cache is too small for any allocation, uses them in host memory.
swap_run() {
    what=$1
    shift
    train_sim swap.log "$@"
    status=$?
    out=$(lms_stat swapped_out swap.log) in=$(lms_stat swapped_in swap.log) host=$(lms_stat on_host swap.log)
    [ $status -eq 0 ] && same_losses swap.log &&
        { [ "${out:-0}" -gt 0 ] && [ "${in:-0}" -gt 0 ] || [ "${host:-0}" -gt 0 ]; }
    report $? "$what: the CPU's results; swapped out ${out:-?} times, in ${in:-?}; used in host memory ${host:-?} times"
}

# check_model NAME THRESHOLD_KB ITERATIONS FLAGS...: the CPU's results on the simulated GPU,
# alone and under liblms with its cache at 1/2, 1/4, 1/8 and 1/12 of the run's peak demand:
# the calls whose allocations do not fit it at once use some of them in host memory. Sets
# cache_kib (the smallest cache that holds the run's largest call, for the run without host VMM).
check_model() {
    name=$1 threshold=$2 iterations=$3
    shift 3
    flags="--model $name $* --iters $iterations --display 1 --test-interval 0"
    rm -f cpu_iter_*.snap
    "$trainer" train $flags --cpu --snapshot-prefix cpu 2>cpu.log
    losses cpu.log >cpu.txt

    train_sim plain.log env && same_losses plain.log
    report $? "$name $*: --sim prints the CPU's losses and ends with its weights"

    rm -f trace.json
    train_sim whole.log env LD_PRELOAD="$runtime $liblms" LMS_THRESHOLD_KB=$threshold LMS_STATS=json \
        LMS_TRACE=trace.json LMS_TRACE_USES=1 LMS_TRACE_STACK_DEPTH=0
    status=$?
    peak=$(lms_stat peak_demanded whole.log)
    largest=$(largest_call trace.json)
    [ $status -eq 0 ] && same_losses whole.log && [ "${peak:-0}" -gt 0 ] && [ "${largest:-0}" -gt 0 ]
    report $? "$name under LD_PRELOAD=liblms.so, the whole device: the CPU's results (peak demand ${peak:-?} B, largest call ${largest:-?} B)"
    cache_kib=$(( (${largest:-0} + 1023) / 1024 ))

    for share in 2 4 8 12; do
        kib=$((${peak:-0} / share / 1024))
        swap_run "$name, cache at 1/$share of the peak demand ($kib KiB)" \
            env LD_PRELOAD="$runtime $liblms" LMS_THRESHOLD_KB=$threshold LMS_STATS=json \
            LMS_EXCLUDE_MB=$((capacity_mb * 1024 - kib))K
    done
    kib=$((${peak:-0} / 4 / 1024))
    rm -f pieces.json
    swap_run "$name, LMS_PIECE_MB=1 (pieces of the 2 MiB granularity), cache at 1/4 of the peak demand" \
        env LD_PRELOAD="$runtime $liblms" LMS_THRESHOLD_KB=$threshold LMS_STATS=json LMS_PIECE_MB=1 \
        LMS_TRACE=pieces.json LMS_TRACE_USES=1 LMS_TRACE_STACK_DEPTH=0 \
        LMS_EXCLUDE_MB=$((capacity_mb * 1024 - kib))K
    pieces=$(pieces_used pieces.json)
    [ "${pieces:-0}" -gt 0 ]
    report $? "$name, LMS_PIECE_MB=1: calls used ${pieces:-?} pieces past an allocation's first"
    swap_run "$name under lms-run --sim, host VMM off, cache at the largest call ($cache_kib KiB)" \
        env LD_PRELOAD="$runtime" LMS_SIM_HOST_VMM=0 LMS_EXCLUDE_MB=$((capacity_mb * 1024 - cache_kib))K \
        "$lms_run" --sim --threshold-kb "$threshold" --stats=json --
}

# unet3d, the slowest, trains one iteration, its update checked in the snapshot. A sanitizer
# slows the arithmetic: under one, smaller batches, and unet3d only runs the launches of the end.
if [ -n "${SANITIZE:-}" ]; then quick_batch=8 full_batch=8; else quick_batch=34 full_batch=28; fi
check_model lenet 16 2 --batch 16
lenet_cache_kib=$cache_kib
check_model cifar10_quick 1 2 --batch $quick_batch
check_model cifar10_full 1 2 --batch $full_batch
[ -n "${SANITIZE:-}" ] || check_model unet3d 1 1 --size 16 --batch 1

# The lookahead policy learns lenet's iteration, times it and each of its candidate plans on
# the simulated GPU, and keeps the fastest (the log says which): the CPU's losses all along.
iterations=24
flags="--model lenet --batch 16 --iters $iterations --display 1 --test-interval 0"
rm -f cpu_iter_*.snap
"$trainer" train $flags --cpu --snapshot-prefix cpu 2>cpu.log
losses cpu.log >cpu.txt
kib=$((lenet_cache_kib + 1024))
swap_run "lenet, $iterations iterations under LMS_POLICY=lookahead, cache at its largest call and a MiB" \
    env LD_PRELOAD="$runtime $liblms" LMS_THRESHOLD_KB=16 LMS_STATS=json LMS_POLICY=lookahead LMS_LOG_LEVEL=1 \
    LMS_EXCLUDE_MB=$((capacity_mb * 1024 - kib))K
grep -q "plan: kept" swap.log
report $? "and liblms timed the candidate plans: $(sed -n 's/.*plan: \(kept [^(]*\).*/\1/p' swap.log)"
grep -q "policy: learned an iteration of [0-9]* steps" swap.log && grep -q '"iterations_learned":1,' swap.log
report $? "having learned the iteration once: $(sed -n 's/.*policy: \(learned [^:]*\)$/\1/p' swap.log)"

# The convolutions' workspace, kept as the GPU backend's cuDNN keeps one (as the H100's chose:
# the largest convolution's input and output, conv2's 2 x 28x32x16x16 floats; at most
# --workspace-limit), which the launches of the convolutions that need one pass: the peak
# demand under liblms is larger by it, and liblms sees conv2's and conv3's passes use it, not
# conv1's (3 channels in: there the H100's cuDNN took an algorithm that needs none).
workspace_peak() {
    rm -f ws.json
    env LD_PRELOAD="$runtime $liblms" LMS_STATS=json LMS_TRACE=ws.json LMS_TRACE_USES=1 LMS_TRACE_STACK_DEPTH=0 \
        "$trainer" train --model cifar10_full --batch 28 --iters 1 --display 1 --test-interval 0 --sim \
        --snapshot-prefix ws "$@" 2>ws.log
    lms_stat peak_demanded ws.log
}
without=$(workspace_peak --workspace-limit 0)
with=$(workspace_peak)
passes=$(python3 - ws.json <<'EOF'
import json, sys
events = json.load(open(sys.argv[1]))
workspace = [e["args"]["addr"] for e in events if e["name"] == "alloc" and e["args"]["bytes"] == 1835008]
print(sum(1 for e in events if e.get("cat") == "launch" and workspace and workspace[0] in e["args"].get("uses", [])))
EOF
)
grep -q "convolution workspace: 1835008 bytes" ws.log && [ $((${with:-0} - ${without:-0})) -eq 1835008 ] &&
    [ "${passes:-0}" -eq 4 ]
report $? "the simulated backend keeps a convolution workspace ($((${with:-0} - ${without:-0})) bytes of peak demand), used by ${passes:-?} of 6 convolution passes: conv2's and conv3's"

# The workspace is as large as the H100's cuDNN kept for the same nets (2026-11-27, under the
# default 2 GiB limit; the layers' algorithms in the trainer's setup log), within 1 %:
# cifar10_full at batch 14924 and 27136, unet3d at 176^3, 208^3 and 240^3 (where dec0_conv_a's
# algorithm would need 2.65 GB and it took one that needs none).
kept() { # ARGS...: the simulated run's workspace
    env -u LMS_SIM_CAPACITY_MB LMS_SIM_DEVICE=h100 LMS_SIM_EXECUTE=timing-only "$trainer" train "$@" --iters 1 \
        --display 0 --test-interval 0 --sim --snapshot-prefix kept 2>&1 |
        sed -n 's/.*convolution workspace: \([0-9]*\) bytes.*/\1/p'
}
measured="cifar10_full:14924:980517008 cifar10_full:27136:1780842640 unet3d:176:1050642319 unet3d:208:1731692431"
measured="$measured unet3d:240:1771422751"
far=
for m in $measured; do
    model=${m%%:*} rest=${m#*:}; size=${rest%%:*} h100=${rest#*:}
    case $model in
    unet3d) got=$(kept --model unet3d --batch 1 --size "$size") ;;
    *) got=$(kept --model "$model" --batch "$size") ;;
    esac
    awk -v a="${got:-0}" -v b="$h100" 'BEGIN { exit !(a > 0.99 * b && a < 1.01 * b) }' ||
        far="$far; off at $model $size: ${got:-?} against $h100"
done
[ -z "$far" ]
report $? "the simulated workspace is the H100's within 1 % at cifar10_full 14924 and 27136, unet3d 176-240^3$far"

# Snapshots on the simulated GPU under lms-run --sim, swapping, with a test phase: the
# resumed run repeats the uninterrupted one and ends with the same snapshot. The cache has a
# MiB more than lenet's largest call, for the test set's labels.
flags="--model lenet --batch 16 --iters 4 --display 1 --test-interval 2 --test-iters 1"
under_lms_run() {
    env LD_PRELOAD="$runtime" LMS_EXCLUDE_MB=$((capacity_mb * 1024 - lenet_cache_kib - 1024))K \
        "$lms_run" --sim --threshold-kb 16 --stats=json -- "$trainer" "$@"
}
under_lms_run train $flags --sim --snapshot 2 --snapshot-prefix whole 2>whole.log
status=$?
[ $status -eq 0 ] && [ -f whole_iter_2.snap ] && [ -f whole_iter_4.snap ] && [ "$(lms_stat swapped_in whole.log)" -gt 0 ] 2>/dev/null
report $? "lenet under lms-run --sim snapshots at iteration 2 and at the end, swapping (exit $status)"
under_lms_run train $flags --sim --resume whole_iter_2.snap --snapshot-prefix resumed 2>resumed.log
status=$?
losses whole.log | awk '$1 >= 2' >whole.txt
losses resumed.log >resumed.txt
[ $status -eq 0 ] && [ -s resumed.txt ] && cmp -s whole.txt resumed.txt && cmp -s whole_iter_4.snap resumed_iter_4.snap
report $? "the run resumed from iteration 2 repeats the uninterrupted run's losses and final snapshot"

testing="test --model lenet --batch 16 --test-iters 2 --weights whole_iter_4.snap"
"$trainer" $testing --cpu 2>cpu_test.log
under_lms_run $testing --sim 2>sim_test.log
status=$?
strip() { sed -n 's/^[^]]*] \(.*Test net output.*\)/\1/p' "$1"; }
[ $status -eq 0 ] && [ -n "$(strip sim_test.log)" ] && [ "$(strip cpu_test.log)" = "$(strip sim_test.log)" ]
report $? "test --sim under lms-run evaluates the snapshot as the CPU does"

"$trainer" time --model cifar10_full --batch 2 --iters 1 --sim 2>time.log
status=$?
grep -q "norm1	forward: " time.log && grep -q "Average Forward-Backward" time.log
report $((status + $?)) "time --sim reports each layer's forward and backward"

"$trainer" info --model unet3d --size 16 --sim >info_sim.txt 2>&1 &&
    "$trainer" info --model unet3d --size 16 >info.txt && cmp -s info.txt info_sim.txt
report $? "info --sim prints what info prints"

# make bench's throughput script, its batches and flags given, here on the simulated GPU.
BENCH_BATCHES="64 128" BENCH_TRAINER_FLAGS=--sim "$LMS_BUILD_DIR/trainer/bench-cifar10" 2 >bench.txt 2>&1
status=$?
lines=$(grep -c '^cifar10_full batch \(64\|128\) (--sim): [0-9.e+]* images/s (2 iterations, synthetic data)$' bench.txt)
[ $status -eq 0 ] && [ "$lines" -eq 2 ]
report $? "bench-cifar10 runs the batches and trainer flags it is given: $(tr '\n' ' ' <bench.txt)"

# images/s leaves out the warm-up and the snapshots, on the simulated clock as on a GPU: a run
# that snapshots every 4 iterations (lenet's 3.4 MB take about as long as the iterations they
# follow) reports the rate of one that does not, within what restarting the clock costs.
# Kernels not run (timing-only): only the clock counts here.
rate() { # SNAPSHOT_INTERVAL
    rm -f rate_iter_*.snap
    LMS_SIM_EXECUTE=timing-only "$trainer" train --model lenet --batch 256 --iters 13 --display 0 \
        --test-interval 0 --snapshot "$1" --sim --snapshot-prefix rate 2>&1 |
        sed -n 's/.*Optimization Done: 13 iterations; the last 8 in .*: \([^ ]*\) images\/s (5 of warm-up, .*/\1/p'
}
plain=$(rate 0) snapshots=$(rate 4)
awk -v a="$plain" -v b="$snapshots" 'BEGIN { exit !(a > 0 && b > 0.95 * a && b < 1.05 * a) }'
report $? "images/s of the last 8 of 13 iterations, with snapshots every 4 iterations and without: ${snapshots:-?}, ${plain:-?}"

# 10^4 launches with the cache at 1/4 of unet3d's peak demand, kernels not run
# (LMS_SIM_EXECUTE=timing-only): the driver calls are what counts here, and the arithmetic
# would take minutes. A first iteration measures the peak.
churn() { # ITERATIONS VAR=VALUE...
    iterations=$1
    shift
    rm -f churn_iter_*.snap
    env LD_PRELOAD="$runtime $liblms" LMS_SIM_EXECUTE=timing-only LMS_SIM_LOG="$work/churn_sim.log" \
        LMS_THRESHOLD_KB=1 LMS_STATS=json "$@" "$trainer" train --model unet3d --size 16 --batch 1 \
        --iters "$iterations" --display 0 --test-interval 0 --sim --snapshot-prefix churn 2>churn.log
}
churn 1
churn_kib=$(($(lms_stat peak_demanded churn.log) / 4 / 1024))
churn 65 LMS_EXCLUDE_MB=$((capacity_mb * 1024 - churn_kib))K LMS_TRACE=churn.json LMS_TRACE_USES=1 \
    LMS_TRACE_STACK_DEPTH=0
status=$?
launches=$(grep '"cat":"launch"' churn.json | grep -vc '"name":"mem\(set\|cpy\)"')
out=$(lms_stat swapped_out churn.log) in=$(lms_stat swapped_in churn.log)
[ $status -eq 0 ] && [ "$launches" -ge 10000 ] && [ "${out:-0}" -gt 0 ] && [ "${in:-0}" -gt 0 ]
report $? "unet3d, $launches launches under liblms at 4x oversubscription ($churn_kib KiB): exit $status, swapped out ${out:-?} times, in ${in:-?}"
[ ! -s churn_sim.log ]
report $? "they made no call the simulated GPU does not support (LMS_SIM_LOG is empty)"
! grep -q LeakSanitizer churn.log
report $? "and left no leak${SANITIZE:+ ($SANITIZE build)}"

# Another libcuda.so.1 (the toolkit's stub stands in for the NVIDIA driver) loaded by a
# preloaded library before the trainer starts cannot be replaced: refused, nothing written.
stub=${CUDA_HOME:-/usr/local/cuda}/lib64/stubs/libcuda.so
mkdir refused && cd refused || exit 1
if [ -f "$stub" ]; then
    env LD_PRELOAD="$runtime $stub" "$trainer" train --model lenet --sim --iters 1 >out.txt 2>err.txt
    status=$?
    grep -q "another libcuda.so.1 ($stub) was loaded before the trainer started" err.txt &&
        grep -q "lms-run --sim" err.txt
    found=$?
    rm -f out.txt err.txt
    [ $status -eq 2 ] && [ $found -eq 0 ] && [ -z "$(ls -A)" ]
    report $? "a preloaded libcuda.so.1 other than the simulator: exit 2 ($status), pointing at lms-run --sim"
else
    echo "ok $((n = n + 1)) # skip no CUDA stub driver at $stub"
fi
cd "$work" || exit 1

[ ! -s sim.log ]
report $? "no run made a call the simulated GPU does not support (LMS_SIM_LOG is empty)"
echo "1..$n"
exit $failed
