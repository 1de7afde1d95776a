"""Predicted data-parallel scaling (lms-bench's scaling stage): one GPU's iteration, timed on
the simulated H100, plus the gradient all-reduce that N GPUs add to it, from a model of NCCL's
ring and hierarchical all-reduce. Weak scaling: each GPU keeps its batch. Efficiency at N GPUs
is one GPU's iteration time over the N-GPU one.

Assumptions, with their sources (figures as published; none is measured here):
  NVLink 4, H100 SXM5: 900 GB/s per GPU both ways together, 450 GB/s each way (NVIDIA H100
    Tensor Core GPU datasheet).
  PCIe Gen5 x16: 64 GB/s each way (PCI-SIG's 32 GT/s per lane; the H100 PCIe datasheet's
    128 GB/s counts both ways).
  InfiniBand NDR: one ConnectX-7 port of 400 Gb/s per GPU, 50 GB/s each way (the DGX H100's
    eight 400 Gb/s ports for its eight GPUs, NVIDIA DGX H100 user guide); 8 GPUs per node.
  Latencies: NCCL's own cost model (src/graph/tuning.cc, ring algorithm, Simple protocol, as
    NCCL 2.x gives them; they move between releases): 8.4 us per call, and per ring step
    3.4 us over NVLink, 5.7 us over PCIe, 14 us over the network.
  Overlap: gradients are all-reduced in buckets of 25 MiB (PyTorch DDP's bucket_cap_mb) as
    backward produces them, so all but the last bucket can hide under backward; the share of
    the iteration that is backward is the simulator's (lms-trainer time).
  The all-reduce's bytes through the GPU's PCIe link (all of them on PCIe cards; the
    inter-node part with NVLink, since GPUDirect RDMA reaches the NIC through that link) share
    it with liblms's swaps: they are exposed in the share of the iteration the swaps keep the
    link busy.

Where the model stops being trustworthy: latency-bound all-reduces (small gradients, small
batches: the per-step latencies are NCCL's estimates, not this fabric's), more than 2 nodes
(NCCL switches to trees and NVLS/SHARP, which this ring model does not price), PCIe switches
shared by two GPUs and a NIC, stragglers and jitter (every rank waits for the slowest at every
all-reduce), and host memory bandwidth shared by 8 GPUs that all swap at once (each is
modelled alone on its PCIe link).
"""

GIB = 1 << 30
FABRICS = {
    # name: (bytes/s each way inside a node, per-step latency inside a node (s), through PCIe)
    "NVLink": (450e9, 3.4e-6, False),
    "PCIe": (64e9, 5.7e-6, True),
}
NET_BYTES = 50e9          # InfiniBand NDR, one 400 Gb/s port per GPU
NET_STEP = 14e-6
CALL = 8.4e-6
PCIE_BYTES = 64e9
GPUS_PER_NODE = 8
BUCKET = 25 << 20
GPU_COUNTS = (1, 2, 4, 8, 16)
DDL = {4: 0.98, 16: 0.92}  # IBM DDL with TFLMS (seed 001)


def ring(byte_count, ranks, rate, step):
    """A ring all-reduce of byte_count over ranks: reduce-scatter then all-gather."""
    if ranks < 2:
        return 0.0
    return 2 * (ranks - 1) / ranks * byte_count / rate + 2 * (ranks - 1) * step


def allreduce(byte_count, gpus, fabric):
    """Seconds of one all-reduce, and the bytes of it that cross the GPU's PCIe link."""
    rate, step, through_pcie = FABRICS[fabric]
    if gpus < 2:
        return 0.0, 0.0
    local = min(gpus, GPUS_PER_NODE)
    nodes = gpus // local
    inside = ring(byte_count, local, rate, step)
    shard = byte_count / local  # each GPU's share after the node's reduce-scatter
    between = ring(shard, nodes, NET_BYTES, NET_STEP)
    pcie_bytes = (2 * (local - 1) / local * byte_count if through_pcie else 0.0) + \
        (2 * (nodes - 1) / nodes * shard if nodes > 1 else 0.0)
    return CALL + inside + between, pcie_bytes


def efficiency(iteration_s, backward_share, gradient_bytes, gpus, fabric, pcie_busy):
    """One GPU's iteration time over that of gpus GPUs, and the seconds the all-reduce adds."""
    whole, pcie_bytes = allreduce(gradient_bytes, gpus, fabric)
    if gpus < 2:
        return 1.0, 0.0
    last, _ = allreduce(min(gradient_bytes, BUCKET), gpus, fabric)
    exposed = max(last, whole - backward_share * iteration_s)
    exposed = max(exposed, pcie_bytes / PCIE_BYTES * pcie_busy)
    return iteration_s / (iteration_s + exposed), exposed
