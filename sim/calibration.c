/* The timing model's constants for an H100 80GB HBM3 (SXM5, 132 SMs, PCIe gen5 x16), from
 * the measurements in shared/GPU-FACTS.md (2026-11-22, driver 580.159.04, medians of 10
 * runs at 256 MiB unless said otherwise). Figures marked "datasheet" were not measured on
 * the machine; those marked "assumed" are neither measured nor published, and are chosen
 * to be of the right order. Change the version whenever a figure changes: benchmark
 * results carry it. */
#include "sim/calibration.h"

#define GB 1e9
#define TB 1e12
#define MIB (1024.0 * 1024.0)
#define US 1e3
#define MS 1e6

const sim_calibration sim_calibration_h100 = {
    .version = "h100-2026-11-28",

    .pinned_h2d = 55.0 * GB,            /* measured: pinned host -> device */
    .pinned_d2h = 55.0 * GB,            /* measured: device -> pinned host */
    .pinned_bidirectional = 93.7 * GB,  /* measured: 46.8 + 51.2, two streams */
    /* Measured on the H100 in liblms's own traffic: three device timelines of cifar10_full
     * swapping at 1.1x and 2x (lms-run --timeline, 2026-11-27). Copies of 64-256 MiB that ran
     * wholly beside one the other way moved, at the median, 51.0-51.7 GB/s to the host and
     * 37.6-44.3 to the device: 89.3, 92.4 and 95.3 in all. The model gives both directions
     * together the middle figure. The H100 keeps its copies to the host near 51.4 whichever
     * was queued first, and those to the device get the rest (pinned_bandwidth's pairs: the
     * copy to the host ends at 5.22 ms on two days, the one to the device at 5.90 and 6.91);
     * the model, whose times are fixed at enqueue, lets the copy queued first keep its 55 and
     * gives the other the rest, 37.4. Until 2026-11-26 this was 100.6, fitted so that a pair
     * queued together moved the 93.7 GB/s of GPU-FACTS.md: more than the two directions
     * carried together while they overlapped in every measurement since (85.0-95.7 GB/s;
     * a pair queued together, 77.7-91.0 in all; eight copies each way, 77.4-95.0). */
    .pinned_overlap = 92.4 * GB,
    .pageable_h2d = 7.5 * GB,           /* measured */
    .pageable_d2h = 9.7 * GB,           /* measured */
    .d2d_copy = 1311 * GB,              /* measured: cuMemcpyDtoD (2622 GB/s read + write) */
    .memset_rate = 2880 * GB,           /* measured: a kernel writing device memory */
    .copy_latency_ns = 2 * US,          /* assumed */

    .fp32_flops = 494.7 * TB,           /* datasheet: TF32 tensor cores, dense (convolutions
                                           allow TF32, as PyTorch's do) */
    .hbm_bytes = 2880 * GB,             /* measured: a kernel reading / writing device memory */
    .zero_copy_bytes = 51.6 * GB,       /* measured: 50.8 read, 52.4 write, host-located VMM */
    /* How a kernel reaching host memory shares the link with the copy engines, from a kernel
     * reading 256 MiB of pinned host memory and a 256 MiB copy queued behind it on another
     * stream (tools/bench/pinned_bandwidth.cu; docs/benchmarks/results.json, 2026-11-26). A
     * copy to the device ends 10.17 ms after both start, as if it had waited for the kernel
     * (5.3 ms) and then run alone: the kernel fills its direction (modelled end 10.08 ms). A
     * copy to the host ends at 9.55 ms: while the kernel reads, it gets about 5.6 GB/s of its
     * direction. The measured kernel slows to 38.1 GB/s beside the copy to the device; the
     * model's, queued first, keeps its rate. Writes are assumed to take the same share of
     * their direction, and posted, none of the other's. */
    .zero_copy_direction_load = 55.0 / 51.6,  /* fitted: the direction's 55 GB/s at 51.6 */
    .zero_copy_read_request_load = 0.957,     /* fitted: (55 - 5.6) / 51.6 */
    /* Fitted: the trainer's cifar10_full alone at batch 14924 runs the 211.6 k images/s it ran
     * on the H100 (docs/benchmarks/results.json, 2026-11-28; 212.5 k the day before). Until
     * then it was fitted to PyTorch eager's 281 k at batch 16384 (GPU-FACTS.md), a faster
     * program than the trainer: the simulated trainer ran a third faster than the real one,
     * and unet3d at 208^3 64 % faster (make bench-sim's calibration stage compares them). */
    .kernel_efficiency = 0.1406,
    .kernel_min_ns = 3 * US,            /* assumed: the shortest kernel, launch latency included */

    .launch_ns = 4 * US,                /* measured: host enqueue cost of a launch; copies,
                                           memsets and event records assumed the same */
    .call_ns = 0.5 * US,                /* assumed: any other call */
    /* VMM calls, measured at 2 MiB and 256 MiB. */
    .mem_alloc = {47 * US, 2 * MIB, 117 * US, 256 * MIB}, /* assumed: create + map + access */
    /* Measured: reserving 256 GiB to 4 TiB takes microseconds; the cost stops growing with the
     * size somewhere past 256 MiB (assumed: there). */
    .vmm_reserve = {1.7 * US, 2 * MIB, 18 * US, 256 * MIB, 18 * US},
    .vmm_create_device = {15 * US, 2 * MIB, 33 * US, 256 * MIB},
    .vmm_create_host = {0.25 * MS, 2 * MIB, 50 * MS, 256 * MIB},
    .vmm_map = {1.3 * US, 2 * MIB, 3.4 * US, 256 * MIB},
    .vmm_set_access_device = {31 * US, 2 * MIB, 81 * US, 256 * MIB},
    .vmm_set_access_host = {31 * US, 2 * MIB, 2.75 * MS, 256 * MIB}, /* measured 2.4-3.1 ms at
                                           256 MiB; at 2 MiB assumed as for device memory */
    .vmm_unmap = {21 * US, 2 * MIB, 65 * US, 256 * MIB},
    .vmm_release = {15 * US, 2 * MIB, 281 * US, 256 * MIB},
    /* Pinned host memory, measured at 256 MiB only; assumed proportional below. */
    .host_alloc = {1.02 * MS, 2 * MIB, 130 * MS, 256 * MIB},
    .host_free = {0.32 * MS, 2 * MIB, 41 * MS, 256 * MIB},
    .host_register = {0.11 * MS, 2 * MIB, 14.5 * MS, 256 * MIB},
};

double sim_sized_ns(const sim_sized_cost *cost, double bytes)
{
    double slope = (cost->ns_large - cost->ns_small) / (cost->bytes_large - cost->bytes_small);
    double ns = cost->ns_small + slope * (bytes - cost->bytes_small);
    if (cost->ns_most > 0 && ns > cost->ns_most)
        return cost->ns_most;
    return ns > cost->ns_small ? ns : cost->ns_small;
}
