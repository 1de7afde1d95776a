#!/usr/bin/env python3
"""cifar10_full's forward loss and every weight gradient against PyTorch's, on the same
weights and inputs. Runs only where PyTorch and a GPU exist; skips with the reason otherwise.

How: a CIFAR-10 binary batch of random images is written; the trainer runs one iteration on
it with lr 1, momentum 0, weight decay 0, so its snapshot (trainer/snapshot.h) holds
history = lr_mult * gradient and weights = initial - history. PyTorch rebuilds the initial
weights, runs Caffe's cifar10_full (ceil pooling, within-channel LRN) and compares."""
import os
import struct
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"1..0 # SKIP PyTorch is not installed ({e})")
    sys.exit(0)
if not torch.cuda.is_available():
    print("1..0 # SKIP PyTorch finds no CUDA GPU")
    sys.exit(0)

BATCH = 16
trainer = os.path.join(os.environ["LMS_BUILD_DIR"], "trainer", "lms-trainer")


def read_snapshot(path):
    data = open(path, "rb").read()
    assert data[:8] == b"LMSSNAP\0", "bad magic"
    version, nparams = struct.unpack_from("<II", data, 8)
    at, params = 56, {}
    for _ in range(nparams):
        name = data[at:at + 24].rstrip(b"\0").decode()
        which, *shape = struct.unpack_from("<I5i", data, at + 24)
        count = 1
        for s in shape:
            count *= s
        at += 48
        values = torch.frombuffer(bytearray(data[at:at + 4 * count]), dtype=torch.float32)
        history = torch.frombuffer(bytearray(data[at + 4 * count:at + 8 * count]), dtype=torch.float32)
        at += 8 * count
        params[(name, "bias" if which else "weight")] = (values, history, shape)
    return params


def caffe_ave_pool(x):  # divides by the window clipped to the input, as Caffe does without padding
    ones = torch.ones_like(x[:1, :1])
    return (F.avg_pool2d(x, 3, 2, ceil_mode=True, divisor_override=1) /
            F.avg_pool2d(ones, 3, 2, ceil_mode=True, divisor_override=1))


def lrn_within(x):  # 1 + alpha / 9 * sum of squares over 3x3, zero padded; ^ -beta
    return x * (1 + 5e-5 * F.avg_pool2d(x * x, 3, 1, padding=1, count_include_pad=True)) ** -0.75


def cifar10_full(x, p):
    x = F.conv2d(x, p["conv1.weight"], p["conv1.bias"], padding=2)
    x = F.relu(F.max_pool2d(x, 3, 2, ceil_mode=True))
    x = lrn_within(x)
    x = F.relu(F.conv2d(x, p["conv2.weight"], p["conv2.bias"], padding=2))
    x = lrn_within(caffe_ave_pool(x))
    x = F.relu(F.conv2d(x, p["conv3.weight"], p["conv3.bias"], padding=2))
    x = caffe_ave_pool(x)
    return F.linear(x.flatten(1), p["ip1.weight"], p["ip1.bias"])


def main():
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    tests = []
    with tempfile.TemporaryDirectory() as work:
        g = torch.Generator().manual_seed(3)
        pixels = torch.randint(0, 256, (BATCH, 3072), generator=g, dtype=torch.uint8)
        labels = torch.randint(0, 10, (BATCH,), generator=g, dtype=torch.uint8)
        with open(os.path.join(work, "data_batch_1.bin"), "wb") as f:
            for i in range(BATCH):
                f.write(bytes([labels[i].item()]) + pixels[i].numpy().tobytes())
        run = subprocess.run([trainer, "train", "--model", "cifar10_full", "--batch", str(BATCH), "--iters", "1",
                              "--lr", "1", "--momentum", "0", "--weight-decay", "0", "--test-interval", "0",
                              "--display", "1", "--strict-fp32", "--data", "cifar10:" + work, "--snapshot-prefix",
                              os.path.join(work, "one")], capture_output=True, text=True)
        if run.returncode != 0:
            print("1..1\nnot ok 1 - the trainer runs one iteration on the GPU")
            sys.stderr.write(run.stderr)
            return 1
        loss_line = [l for l in run.stderr.splitlines() if "] Iteration 0 (" in l][0]
        trainer_loss = float(loss_line.rsplit("loss = ", 1)[1])
        snap = read_snapshot(os.path.join(work, "one_iter_1.snap"))

    lr_mult = {"weight": 1.0, "bias": 2.0}
    params, grads = {}, {}
    for (layer, which), (values, history, shape) in snap.items():
        key = f"{layer}.{which}"
        initial = values + history
        if which == "bias":
            initial = initial.reshape(-1)
        elif layer == "ip1":
            initial = initial.reshape(shape[0], shape[1])
        else:  # n, c, d == 1, h, w
            initial = initial.reshape(shape[0], shape[1], shape[3], shape[4])
        params[key] = initial.cuda().requires_grad_()
        grads[key] = (history / lr_mult[which]).reshape(params[key].shape)

    x = ((pixels.float() - 128.0).reshape(BATCH, 3, 32, 32)).cuda()
    loss = F.cross_entropy(cifar10_full(x, params), labels.long().cuda())
    loss.backward()
    tests.append((abs(loss.item() - trainer_loss) <= 1e-4 * abs(loss.item()),
                  f"forward loss: trainer {trainer_loss:.7g}, PyTorch {loss.item():.7g}"))
    for key, p in params.items():
        ref = p.grad.cpu()
        err = ((grads[key] - ref).abs().max() / ref.abs().max().clamp_min(1e-20)).item()
        tests.append((err <= 1e-3, f"{key} gradient: relative error {err:.2g}"))

    print(f"1..{len(tests)}")
    for i, (good, what) in enumerate(tests, 1):
        print(f"{'ok' if good else 'not ok'} {i} - {what}")
    return 0 if all(good for good, _ in tests) else 1


sys.exit(main())
