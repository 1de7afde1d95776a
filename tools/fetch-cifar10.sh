#!/bin/sh
# Downloads the CIFAR-10 binary version for the trainer: fetch-cifar10.sh [DIR] (default
# data/cifar10), then train with --data cifar10:DIR. Needs curl or wget and network access
# (not exercised by the test suite, which has neither).
set -eu
dir=${1:-data/cifar10}
url=https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-cifar10: downloading $url"
if command -v curl >/dev/null; then curl -fL --retry 3 -o "$tmp/cifar.tar.gz" "$url"
elif command -v wget >/dev/null; then wget -O "$tmp/cifar.tar.gz" "$url"
else echo "fetch-cifar10: error: needs curl or wget" >&2; exit 1; fi
tar -xzf "$tmp/cifar.tar.gz" -C "$tmp"
for f in data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin data_batch_5.bin test_batch.bin; do
    size=$(wc -c <"$tmp/cifar-10-batches-bin/$f")
    if [ "$size" -ne 30730000 ]; then
        echo "fetch-cifar10: error: $f has $size bytes, expected 30730000 (10000 records of 3073)" >&2
        exit 1
    fi
    mv "$tmp/cifar-10-batches-bin/$f" "$dir/$f"
done
echo "fetch-cifar10: CIFAR-10 is in $dir; train with: lms-trainer train --model cifar10_full --data cifar10:$dir"
