#!/bin/sh
# Downloads MNIST for the trainer: fetch-mnist.sh [DIR] (default data/mnist), then train with
# --data mnist:DIR. Needs curl or wget, gunzip and network access (not exercised by the test
# suite, which has no network).
set -eu
dir=${1:-data/mnist}
base=${MNIST_URL:-https://storage.googleapis.com/cvdf-datasets/mnist}
mkdir -p "$dir"
fetch() {
    if command -v curl >/dev/null; then curl -fL --retry 3 -o "$2" "$1"
    elif command -v wget >/dev/null; then wget -O "$2" "$1"
    else echo "fetch-mnist: error: needs curl or wget" >&2; exit 1; fi
}
for pair in train-images-idx3-ubyte:47040016 train-labels-idx1-ubyte:60008 \
            t10k-images-idx3-ubyte:7840016 t10k-labels-idx1-ubyte:10008; do
    name=${pair%%:*}
    want=${pair##*:}
    echo "fetch-mnist: downloading $base/$name.gz"
    fetch "$base/$name.gz" "$dir/$name.gz.part"
    gunzip -c "$dir/$name.gz.part" >"$dir/$name.part"
    rm -f "$dir/$name.gz.part"
    size=$(wc -c <"$dir/$name.part")
    if [ "$size" -ne "$want" ]; then
        rm -f "$dir/$name.part"
        echo "fetch-mnist: error: $name has $size bytes, expected $want" >&2
        exit 1
    fi
    mv "$dir/$name.part" "$dir/$name"
done
echo "fetch-mnist: MNIST is in $dir; train with: lms-trainer train --model lenet --data mnist:$dir"
