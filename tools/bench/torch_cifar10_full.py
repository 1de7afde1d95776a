#!/usr/bin/env python3
"""Caffe's cifar10_full in PyTorch eager: the peer liblms is measured against.

Modes:
  ideal        the batch on the whole card, nothing special
  save_on_cpu  activations saved to pinned host memory (torch.autograd.graph.save_on_cpu)
Both honour --cap-gib (torch.cuda.set_per_process_memory_fraction). Run `ideal` under
LD_PRELOAD=liblms.so to measure PyTorch unmodified under the library.

Prints one JSON object: images_per_s, the losses of every iteration, peak memory.
Exit status 3 means out of memory, so that a caller can search for the largest batch."""
import argparse
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class CaffeLRNWithinChannel(nn.Module):
    """Caffe's LRN with norm_region WITHIN_CHANNEL: x / (1 + alpha * mean(x^2 over k x k))^beta."""

    def __init__(self, size=3, alpha=5e-5, beta=0.75):
        super().__init__()
        self.size, self.alpha, self.beta = size, alpha, beta

    def forward(self, x):
        mean_square = F.avg_pool2d(x * x, self.size, stride=1, padding=(self.size - 1) // 2,
                                   count_include_pad=True)
        return x * (1 + self.alpha * mean_square).pow(-self.beta)


class Cifar10Full(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 32, 5, padding=2)
        self.conv3 = nn.Conv2d(32, 64, 5, padding=2)
        self.ip1 = nn.Linear(64 * 4 * 4, 10)
        self.norm = CaffeLRNWithinChannel()
        for layer, std in ((self.conv1, 1e-4), (self.conv2, 1e-2), (self.conv3, 1e-2), (self.ip1, 1e-2)):
            nn.init.normal_(layer.weight, std=std)
            nn.init.zeros_(layer.bias)

    def forward(self, x):
        x = self.norm(F.relu(F.max_pool2d(self.conv1(x), 3, 2, ceil_mode=True)))
        x = self.norm(F.avg_pool2d(F.relu(self.conv2(x)), 3, 2, ceil_mode=True))
        x = F.avg_pool2d(F.relu(self.conv3(x)), 3, 2, ceil_mode=True)
        return self.ip1(x.flatten(1))


def parameter_groups(model):
    """Caffe's solver: weight decay 0.004, and decay_mult 250 on ip1's weights."""
    ip1_weight = [model.ip1.weight]
    others = [p for p in model.parameters() if p is not model.ip1.weight]
    return [{"params": others, "weight_decay": 0.004}, {"params": ip1_weight, "weight_decay": 0.004 * 250}]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("ideal", "save_on_cpu"), default="ideal")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--cap-gib", type=float, default=0, help="per-process memory cap, 0 for none")
    parser.add_argument("--deterministic", action="store_true")
    args = parser.parse_args()
    if args.batch <= 0 or args.iters <= args.warmup:
        parser.error("--batch must be positive and --iters greater than --warmup")

    torch.manual_seed(1)
    if args.deterministic:
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.use_deterministic_algorithms(True)
    else:
        torch.backends.cudnn.benchmark = True
    device = torch.device("cuda")
    if args.cap_gib:
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(args.cap_gib * 2**30 / total, device)

    model = Cifar10Full().to(device)
    solver = torch.optim.SGD(parameter_groups(model), lr=0.001, momentum=0.9)
    generator = torch.Generator(device=device).manual_seed(2)
    images = torch.randn(args.batch, 3, 32, 32, device=device, generator=generator)
    labels = torch.randint(0, 10, (args.batch,), device=device, generator=generator)

    losses = []
    try:
        for it in range(args.iters):
            if it == args.warmup:
                torch.cuda.synchronize()
                start = time.perf_counter()
            solver.zero_grad(set_to_none=True)
            if args.mode == "save_on_cpu":
                with torch.autograd.graph.save_on_cpu(pin_memory=True):
                    loss = F.cross_entropy(model(images), labels)
            else:
                loss = F.cross_entropy(model(images), labels)
            loss.backward()
            solver.step()
            losses.append(loss.item())
        torch.cuda.synchronize()
    except torch.cuda.OutOfMemoryError as error:
        print(json.dumps({"batch": args.batch, "mode": args.mode, "oom": str(error).splitlines()[0]}))
        return 3
    seconds = time.perf_counter() - start
    print(json.dumps({
        "batch": args.batch, "mode": args.mode, "cap_gib": args.cap_gib,
        "images_per_s": args.batch * (args.iters - args.warmup) / seconds,
        "losses": losses, "peak_bytes": torch.cuda.max_memory_allocated(device),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
