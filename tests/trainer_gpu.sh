#!/bin/sh
# The trainer on the GPU (make check-gpu; skips without one): unet3d at 16^3, whose deepest
# level is 1x1x1, trains; batches cut into pieces for cuDNN give the losses of whole batches
# and of the CPU; the algorithm search allocates no copies of the data; under liblms with a
# cache smaller than the SGD update of alexnet's fc6 (three 144 MiB buffers), the run either
# ends with the weights of a run without liblms or stops naming the launch it was refused,
# never silently wrong; with 2 GPUs, the 2 ranks --gpu 0,1 starts average their gradients with
# NCCL, under liblms too, and print the losses of one rank at their combined batch (skipped,
# saying why, with fewer GPUs or without MPI). Runs are --strict-fp32 --deterministic, so that
# they repeat exactly.
set -u
. "$LMS_SOURCE_DIR/tests/trainer_tap.sh"

for v in $(env | sed -n 's/^\(LMS_[A-Z0-9_]*\)=.*/\1/p'); do
    case $v in LMS_BUILD_DIR | LMS_SOURCE_DIR) ;; *) unset "$v" ;; esac
done
"$trainer" train --model lenet --iters 1 --display 0 --test-interval 0 --snapshot-prefix probe 2>probe.log
if grep -q "no CUDA GPU available" probe.log; then
    echo "1..0 # SKIP $(sed -n 's/^lms-trainer: error: //p' probe.log | head -n 1)"
    exit 0
fi
echo "1..9"
liblms=$LMS_BUILD_DIR/preload/liblms.so

# "ITER LOSS" for every displayed iteration of a log.
losses() { sed -n 's/.*] Iteration \([0-9]*\) (.*loss = \(.*\)$/\1 \2/p' "$1"; }
# close A B: the same iterations, each loss within a relative 1e-4 of the other's.
close() {
    losses "$1" >a.txt
    losses "$2" >b.txt
    [ -s a.txt ] && [ "$(wc -l <a.txt)" -eq "$(wc -l <b.txt)" ] &&
        paste a.txt b.txt | awk '{ d = $2 - $4; if ($1 != $3 || d * d > 1e-8 * $4 * $4) bad = 1 } END { exit bad }'
}
train() { # LOG FLAGS...: a run that displays every iteration; fails, showing the log's end, unless it exits 0
    log=$1
    shift
    "$trainer" train --display 1 --test-interval 0 "$@" 2>"$log" && return 0
    tail -n 4 "$log" | sed 's/^/# /'
    return 1
}
gpu="--strict-fp32 --deterministic"

unet="--model unet3d --size 16 --batch 3 --iters 2 --snapshot-prefix unet"
train unet_cpu.log $unet --cpu && train unet.log $unet $gpu && close unet_cpu.log unet.log
report $? "unet3d at 16^3 (down to 1x256x1x1x1, 5-D throughout) trains on the GPU with the CPU's losses"
train unet_pieces.log $unet $gpu --cudnn-batch 2 && close unet.log unet_pieces.log
report $? "unet3d with cuDNN's calls in pieces of 2 and 1 volumes: the losses of whole batches"

cifar="--model cifar10_full --batch 64 --iters 4 --snapshot-prefix cifar"
train cifar_cpu.log $cifar --cpu && train cifar.log $cifar $gpu && close cifar_cpu.log cifar.log
report $? "cifar10_full on the GPU: the CPU's losses"
train cifar_pieces.log $cifar $gpu --cudnn-batch 24 && close cifar.log cifar_pieces.log
report $? "cifar10_full with cuDNN's calls in pieces of 24, 24 and 16 images: the losses of whole batches"

# The search times the algorithms on the net's own buffers and one workspace within the limit
# (64 MiB): the peak is the net (its allocations rounded up to liblms's 2 MiB), the data set
# (13 MiB), that workspace and cuBLAS's and the libraries' own (256 MiB allowed for these), not
# the 0.5 GiB more that copies of conv1's output alone would take at this batch.
"$trainer" info --model cifar10_full --batch 4096 >info.txt
net=$(sed -n 's/^  total: *\([0-9]*\) bytes.*/\1/p' info.txt)
count=$(sed -n 's/.*one cudaMalloc per tensor (\([0-9]*\) allocations.*/\1/p' info.txt)
LD_PRELOAD=$liblms LMS_STATS=json "$trainer" train --model cifar10_full --batch 4096 --iters 1 --display 0 \
    --test-interval 0 --workspace-limit 64 --snapshot-prefix search 2>search.log
status=$?
peak=$(sed -n 's/.*"peak_demanded":\([0-9]*\).*/\1/p' search.log)
[ $status -eq 0 ] && [ -n "$net" ] && [ -n "$count" ] && [ -n "$peak" ] &&
    [ "$peak" -le $((net + (2 * count + 13 + 64 + 256) * 1024 * 1024)) ]
report $? "the algorithm search allocates no copies: peak ${peak:-?} B for a net of ${net:-?} B"
# Each convolution says which algorithms it got, with their times and workspaces (conv1 has no
# backward data pass: its bottom, the data, takes no gradient).
[ "$(grep -c '\] layer conv[123]: cuDNN algorithms .*forward [0-9]* (.* ms, .* MB).*backward filter [0-9]* (' search.log)" = 3 ] &&
    ! grep -q 'layer conv1: .*backward data' search.log
report $? "setup names each convolution's algorithms, their times and workspaces"

# fc6's update reads and writes three 144 MiB buffers; the cache holds 400 MiB.
small="--model alexnet --batch 1 --iters 2 --workspace-limit 16 --snapshot-prefix"
train alone.log $small alone $gpu
alone=$?
# The driver's total, which LMS_EXCLUDE_MB is taken from (nvidia-smi's is larger).
total=$("$LMS_BUILD_DIR/tests/lms_gpu_check" total-mib)
LD_PRELOAD=$liblms LMS_EXCLUDE_MB=$((total - 400)) LMS_STATS=json "$trainer" train --display 1 --test-interval 0 \
    $small cached $gpu 2>cached.log
status=$?
refused=$(sed -n 's/.*"out_of_memory":\([0-9]*\).*/\1/p' cached.log)
if [ $status -eq 0 ]; then
    [ $alone -eq 0 ] && [ "${refused:-1}" -eq 0 ] && cmp -s alone_iter_2.snap cached_iter_2.snap
else
    [ $status -eq 1 ] && grep -q "^lms-trainer: CUDA error out of memory launching [a-z_]*kernel" cached.log
fi
report $? "alexnet under a 400 MiB cache: the weights of the run alone, or a refused launch named (exit $status, $(grep -o 'launching [a-z_]*' cached.log || echo 'none refused'))"

# Two ranks that --gpu 0,1 starts (trainer/spawn.c), a GPU each, averaging their gradients with
# NCCL: cifar10_quick at batch 256 each gives the losses of one rank at batch 512, alone and
# under liblms with each rank's cache at half of what a rank of theirs demands at its peak
# (NCCL's buffers included: measured on 2 ranks). Where the trainer cannot start them (one GPU
# visible, no MPI), both tests skip with its reason.
if [ "$(id -u)" -eq 0 ]; then # mpirun refuses root unless told
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
"$trainer" info --model lenet --gpu 0,1 >ranks_probe.txt 2>&1
unable=$(sed -n 's/^lms-trainer: error: \(.*\(is not visible\|built without MPI\|cannot start Open MPI\).*\)/\1/p' \
    ranks_probe.txt | head -n 1)
if [ -n "$unable" ]; then
    for i in 1 2; do
        n=$((n + 1))
        echo "ok $n # SKIP 2 ranks on 2 GPUs: $unable"
    done
else
    # A small cuDNN workspace: the cache is for the net's tensors.
    quick="--model cifar10_quick --iters 10 --workspace-limit 16 $gpu"
    # Without NCCL the ranks would still agree, through host memory: its warning fails the tests.
    nccl_used() { ! grep -q 'the gradients go through host memory' "$1"; }
    train one_rank.log $quick --gpu 0 --batch 512 --snapshot-prefix one_rank
    train nccl.log $quick --gpu 0,1 --batch 256 --snapshot-prefix nccl &&
        close one_rank.log nccl.log && nccl_used nccl.log
    report $? "2 ranks on GPUs 0 and 1 averaging with NCCL at batch 256: the losses of one rank at batch 512"

    LD_PRELOAD=$liblms LMS_THRESHOLD_KB=16 LMS_STATS=json "$trainer" train $quick --gpu 0,1 --batch 256 --iters 1 \
        --display 0 --test-interval 0 --snapshot-prefix peak 2>peak.log
    peak=$(sed -n 's/.*"peak_demanded":\([0-9]*\).*/\1/p' peak.log | sort -n | tail -n 1)
    kib=$((${peak:-0} / 2 / 1024))
    LD_PRELOAD=$liblms LMS_THRESHOLD_KB=16 LMS_STATS=json LMS_EXCLUDE_MB=$((total * 1024 - kib))K \
        train nccl_lms.log $quick --gpu 0,1 --batch 256 --snapshot-prefix nccl_lms &&
        close one_rank.log nccl_lms.log && nccl_used nccl_lms.log
    status=$?
    swapping=$(grep -c '"rank":[01],.*"swapped_out":{"count":[1-9][0-9]*,.*"swapped_in":{"count":[1-9]' nccl_lms.log)
    swapped="$swapping of 2 ranks swapped both ways"
    [ $status -eq 0 ] && [ "$kib" -gt 0 ] && [ "$swapping" -eq 2 ]
    report $? "the same 2 ranks under liblms, each cache at half a rank's peak ($kib KiB): those losses; $swapped"
fi

exit $failed
