#!/bin/sh
# Training throughput of cifar10_full on the GPU at the batch sizes of the project's goal
# (PyTorch eager on an H100: 134k, 275k and 281k images/s at 1024, 4096 and 16384). Prints
# one line per batch size, with the cuDNN workspace the trainer kept for its convolutions.
# Usage: bench-cifar10.sh [ITERATIONS] (default 200). BENCH_BATCHES gives other batch sizes
# (default "1024 4096 16384"), BENCH_TRAINER_FLAGS more flags for the trainer (for example
# "--workspace-limit 4096").
set -eu
trainer="${LMS_BUILD_DIR:-$(dirname "$0")/..}/trainer/lms-trainer"
iters=${1:-200}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for batch in ${BENCH_BATCHES:-1024 4096 16384}; do
    # shellcheck disable=SC2086 # the flags are words
    "$trainer" train --model cifar10_full --batch "$batch" --iters "$iters" --display 0 --test-interval 0 \
        --snapshot-prefix "$work/bench" ${BENCH_TRAINER_FLAGS:-} 2>"$work/log" || { cat "$work/log" >&2; exit 1; }
    rate=$(sed -n 's/.*Optimization Done: .*: \([^ ]*\) images\/s.*/\1/p' "$work/log")
    workspace=$(sed -n 's/.*cuDNN workspace: \([0-9]*\) bytes.*/; cuDNN workspace \1 bytes/p' "$work/log")
    echo "cifar10_full batch $batch${BENCH_TRAINER_FLAGS:+ ($BENCH_TRAINER_FLAGS)}: $rate images/s ($iters iterations, synthetic data$workspace)"
done
