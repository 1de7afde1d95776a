#!/bin/sh
# The trainer's command line: bad input gets one clear error, exit status 2, and leaves no
# files behind; --help; info's memory figures against values computed by hand.
set -u
. "$LMS_SOURCE_DIR/tests/trainer_tap.sh"

echo "1..42"

# expect_error "message fragment" args...: exit 2, the fragment on stderr, nothing left behind.
expect_error() {
    fragment=$1
    shift
    "$trainer" "$@" >out.txt 2>err.txt
    status=$?
    grep -qF -- "$fragment" err.txt
    found=$?
    rm -f out.txt err.txt
    left=$(ls -A | grep -v '^keep$' | tr '\n' ' ')
    if [ "$status" -eq 2 ] && [ "$found" -eq 0 ] && [ -z "$left" ]; then
        report 0 "trainer $* fails with exit 2: $fragment"
    else
        report 1 "trainer $* fails with exit 2: $fragment (got exit $status, message found: $found, left: $left)"
    fi
}

expect_error "missing command"
expect_error "unknown command 'frobnicate'" frobnicate --model lenet
expect_error "--model is required" train --cpu
expect_error "unknown model 'nosuch'" train --model nosuch --cpu
expect_error "--batch: expected an integer from 1 to 2147483647, got '0'" train --model lenet --batch 0 --cpu
expect_error "--batch: expected an integer from 1 to 2147483647, got '3000000000'" info --model lenet --batch 3000000000
expect_error "--iters: expected an integer" train --model lenet --iters many --cpu
expect_error "--warmup 4: leaves no iteration to time; give fewer than --iters (4)" train --model lenet --iters 4 --warmup 4 --cpu
expect_error "--warmup applies to train and time, not test" test --model lenet --warmup 1 --weights x.snap --cpu
expect_error "--gpu 0,0: device 0 is listed twice" train --model lenet --gpu 0,0
expect_error "--cudnn-batch: expected an integer from 1 to 2147483647, got '0'" train --model lenet --cudnn-batch 0 --cpu
expect_error "--lr-policy bogus" train --model lenet --lr-policy bogus --cpu
expect_error "--lr-policy step needs --stepsize" train --model lenet --lr-policy step --cpu
expect_error "--size 20: must be a multiple of 16" train --model unet3d --size 20 --cpu
expect_error "--size and --loss apply to unet3d only" train --model lenet --loss ce --cpu
expect_error "test needs --weights" test --model lenet --cpu
expect_error "test: --iters and --test-iters both count the batches; give one" test --model lenet --cpu --iters 2 \
    --test-iters 3 --weights x.snap
expect_error "--resume applies to train only" info --model lenet --resume x.snap
expect_error "unknown option" train --model lenet --frobnicate --cpu
expect_error "expected synthetic, cifar10:DIR or mnist:DIR" train --model lenet --data imagenet --cpu --iters 1
expect_error "no CIFAR-10 training batches" train --model cifar10_quick --data cifar10:"$work/none" --cpu --iters 1
expect_error "cannot open $work/none/train-images-idx3-ubyte" train --model lenet --data mnist:"$work/none" --cpu --iters 1
expect_error "--cpu and --sim exclude each other" train --model lenet --cpu --sim
expect_error "--gpu 3: no such device (the simulated GPU has 1 device)" train --model lenet --sim --gpu 3 --iters 1
LMS_SIM_DIR=$work/none
export LMS_SIM_DIR
expect_error "LMS_SIM_DIR=$work/none: no libcuda.so.1 there" train --model lenet --sim --iters 1
unset LMS_SIM_DIR
LMS_SIM_CAPACITY_MB=lots
export LMS_SIM_CAPACITY_MB
expect_error "LMS_SIM_CAPACITY_MB=lots" train --model lenet --sim --iters 1
unset LMS_SIM_CAPACITY_MB

# The snapshot directory is checked before training: the run stops at once, with nothing logged.
expect_error "--snapshot-prefix $work/none/run: snapshots go in $work/none: No such file or directory" \
    train --model lenet --cpu --iters 1 --snapshot-prefix "$work/none/run"
expect_error "--snapshot-prefix /proc/run: snapshots go in /proc: cannot create a file there" \
    train --model lenet --cpu --iters 1 --snapshot-prefix /proc/run
mkdir keep
: >keep/file
expect_error "--snapshot-prefix keep/file/run: snapshots go in keep/file: not a directory" \
    train --model lenet --cpu --iters 1 --snapshot-prefix keep/file/run
"$trainer" train --model lenet --cpu --iters 1 --snapshot-prefix /proc/run >/dev/null 2>err.txt
! grep -q "Iteration" err.txt
report $? "a snapshot prefix that cannot be written stops the run before its first iteration"
expect_error "--snapshot-prefix $(printf '%0200d' 0)...: too long" \
    train --model lenet --cpu --iters 1 --snapshot-prefix "$(printf '%04100d' 0)"

# info refuses batches beyond any machine (64 TiB) instead of printing petabytes, and says
# which batch fits: cifar10_full takes 618620 bytes per image, so 2^46 / 618620.
expect_error "--batch 2000000000: cifar10_full would need more than 64 TiB, more than any GPU and its host's memory hold together (batch 113750427 at most fits)" \
    info --model cifar10_full --batch 2000000000
expect_error "--batch 1: unet3d would need more than 64 TiB" info --model unet3d --size 4096 --batch 1


# A snapshot of another model is refused, and the run leaves nothing.
"$trainer" train --model lenet --cpu --batch 2 --iters 1 --test-interval 0 --display 0 --snapshot-prefix keep/lenet 2>/dev/null

# test honours --iters (batches to evaluate, as caffe test -iterations) and logs each batch.
"$trainer" test --model lenet --cpu --batch 2 --iters 3 --weights keep/lenet_iter_1.snap 2>test.log
status=$?
[ "$(grep -c '] Batch [1-3]/3 ([0-9.]*%): accuracy = [0-9.e-]*, loss = [0-9.e-]*$' test.log)" -eq 3 ] &&
    grep -q 'Batch 3/3 (100.0%)' test.log && grep -q "Test net output #0: accuracy" test.log
report $((status + $?)) "test --iters 3: three batches, each with its progress, then the averages"
rm -f test.log err.txt
expect_error "snapshot of model lenet, not cifar10_quick" train --model cifar10_quick --cpu --batch 2 --iters 2 \
    --resume keep/lenet_iter_1.snap

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "ok $((n = n + 1)) # skip a GPU is present"
else
    expect_error "no CUDA GPU available" train --model lenet --iters 1
fi

"$trainer" --help >out.txt 2>&1
status=$?
grep -q "usage: lms-trainer train|test|time|info" out.txt && grep -q -- "--sim " out.txt &&
    grep -q -- "--strict-fp32 " out.txt && grep -q "cuDNN workspace, one buffer all convolutions share" out.txt
report $((status + $?)) "--help prints the usage, --sim, --strict-fp32 and the shared workspace's cap included, and exits 0"

# lenet at batch 64, by hand (floats): tensors with data and diff: conv1 64*20*24*24, pool1
# 64*20*12*12, conv2 64*50*8*8, pool2 64*50*4*4, ip1 64*500 (relu1 in place), ip2 64*10;
# data only: input 64*784, label 64, loss 1, softmax probabilities 64*10, and the argmax of
# both max poolings (an int32 per output).
activations=$(( (2 * (64*20*24*24 + 64*20*12*12 + 64*50*8*8 + 64*50*4*4 + 64*500 + 64*10) + 64*784 + 64 + 1 + 64*10 + 64*20*12*12 + 64*50*4*4) * 4 ))
params=$(( (20*1*5*5 + 20 + 50*20*5*5 + 50 + 500*800 + 500 + 10*500 + 10) * 4 ))
"$trainer" info --model lenet --batch 64 >out.txt
grep -q "activations: $activations bytes" out.txt
report $? "info: lenet activations at batch 64 are $activations bytes"
grep -q "total:       $((activations + 3 * params)) bytes" out.txt
report $? "info: lenet total at batch 64 is $((activations + 3 * params)) bytes (weights, gradients, history)"
grep -q "Parameters: 431080" out.txt
report $? "info: lenet has Caffe's 431080 parameters"

# cifar10_full at batch 100: conv1 32x32x32, pool1 / norm1 / conv2 32x16x16, pool2 / norm2 32x8x8,
# conv3 64x8x8, pool3 64x4x4, ip1 10 with diffs; input 3x32x32, label, loss; LRN scales of norm1
# and norm2, the argmax of pool1 (max; pool2 and pool3 average) and the probabilities without.
per_image=$(( 2 * (32*32*32 + 3 * 32*16*16 + 2 * 32*8*8 + 64*8*8 + 64*4*4 + 10) + 3*32*32 + 1 + 32*16*16 + 32*8*8 + 32*16*16 + 10 ))
"$trainer" info --model cifar10_full --batch 100 >out.txt
grep -q "activations: $(( (100 * per_image + 1) * 4 )) bytes" out.txt
report $? "info: cifar10_full activations at batch 100 are $(( (100 * per_image + 1) * 4 )) bytes"
grep -q "Parameters: 89578" out.txt
report $? "info: cifar10_full has Caffe's 89578 parameters"
exit $failed
