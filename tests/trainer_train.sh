#!/bin/sh
# Training in CPU mode on the synthetic data: the loss falls; a run resumed from a snapshot
# reproduces the uninterrupted loss sequence and final snapshot exactly; test and time work;
# every model trains a step.
set -u
. "$LMS_SOURCE_DIR/tests/trainer_tap.sh"
# "ITER LOSS" for every displayed iteration of a log.
losses() { sed -n 's/.*] Iteration \([0-9]*\) (.*loss = \(.*\)$/\1 \2/p' "$1"; }

echo "1..14"

"$trainer" train --model lenet --cpu --batch 8 --iters 20 --display 1 --test-interval 0 --snapshot-prefix fall 2>fall.log
report $? "lenet trains 20 iterations on the CPU"
losses fall.log >fall.txt
awk 'NR <= 5 { first += $2 } NR > 15 { last += $2 } END { exit !(NR == 20 && last < 0.5 * first) }' fall.txt
report $? "the loss falls: mean of the last 5 iterations < half the mean of the first 5 ($(head -1 fall.txt | cut -d' ' -f2) -> $(tail -1 fall.txt | cut -d' ' -f2))"

# Rates leave out the warm-up: the first 5 iterations, or the first half of a shorter run.
warm=$(grep -c '] Iteration [0-4] (warm-up), loss = ' fall.log)
grep -q '] Iteration 5 ([0-9.e+]* iter/s, [0-9.e+]* images/s), loss = ' fall.log &&
    grep -q 'Optimization Done: 20 iterations; the last 15 in .*: [0-9.e+]* images/s (5 of warm-up, tests and snapshots not timed)' fall.log &&
    [ "$warm" -eq 5 ]
report $? "train: iterations 0 to 4 are warm-up ($warm shown so), images/s counts the last 15 of 20"

common="--model cifar10_quick --cpu --batch 2 --iters 6 --display 1 --test-interval 3 --test-iters 1"
"$trainer" train $common --snapshot 3 --snapshot-prefix whole 2>whole.log
status=$?
[ $status -eq 0 ] && [ -f whole_iter_3.snap ] && [ -f whole_iter_6.snap ]
report $? "an uninterrupted run snapshots at iteration 3 and at the end"
"$trainer" train $common --resume whole_iter_3.snap --snapshot-prefix resumed 2>resumed.log
report $? "a run resumes from the snapshot of iteration 3"
grep -q "Resuming from whole_iter_3.snap at iteration 3" resumed.log
report $? "the resumed run says where it starts"
losses whole.log | awk '$1 >= 3' >whole.txt
losses resumed.log >resumed.txt
[ -s resumed.txt ] && cmp -s whole.txt resumed.txt
report $? "the resumed run's losses of iterations 3..5 equal the uninterrupted run's, digit for digit"
cmp -s whole_iter_6.snap resumed_iter_6.snap
report $? "both runs end with byte-identical snapshots"
[ -z "$(ls -A | grep tmp)" ]
report $? "no temporary snapshot files are left"

"$trainer" test --model cifar10_quick --cpu --batch 2 --test-iters 1 --weights whole_iter_6.snap 2>test.log
status=$?
grep -q "Test net output #0: accuracy = " test.log
report $((status + $?)) "test evaluates a snapshot and reports accuracy"

"$trainer" time --model cifar10_full --cpu --batch 2 --iters 1 2>time.log
status=$?
grep -q "norm1	forward: " time.log && grep -q "Average Forward-Backward" time.log
report $((status + $?)) "time reports each layer's forward and backward, cifar10_full"
"$trainer" time --model lenet --cpu --batch 2 --iters 3 2>time.log
status=$?
grep -q "Average Forward-Backward: .* images/s, synchronising after every layer; over 2 passes after 1 of warm-up)" time.log
report $((status + $?)) "time leaves out the first half of a short run as warm-up: 2 of 3 passes timed"
"$trainer" train --model lenet --cpu --batch 2 --iters 8 --warmup 6 --display 1 --test-interval 0 --snapshot-prefix warm 2>warm.log
status=$?
grep -q '] Iteration 5 (warm-up), loss = ' warm.log && grep -q '] Iteration 6 ([0-9.e+]* iter/s' warm.log &&
    grep -q 'Optimization Done: 8 iterations; the last 2 in .* (6 of warm-up' warm.log
report $((status + $?)) "--warmup 6: iterations 0 to 5 are warm-up, images/s counts the last 2 of 8"

"$trainer" train --model unet3d --size 16 --cpu --batch 1 --iters 1 --display 1 --test-interval 0 \
    --snapshot-prefix unet 2>unet.log &&
    "$trainer" test --model unet3d --size 16 --cpu --batch 1 --test-iters 1 --weights unet_iter_1.snap 2>>unet.log
status=$?
grep -q "dice class 2 = " unet.log && losses unet.log | awk '{ if ($2 != $2 + 0 || $2 < 0 || $2 > 1) bad = 1 } END { exit bad }'
report $((status + $?)) "unet3d trains a step on 16^3 volumes with the Dice loss; test reports Dice per class"
exit $failed
