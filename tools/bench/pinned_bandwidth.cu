// Pinned host <-> device bandwidth, one direction at a time and both at once: the
// physical limit that swapping is measured against. Then how a kernel reaching pinned host
// memory over the bus (zero-copy, as liblms's calls larger than the cache do) shares the link
// with a copy engine's copy in either direction: a kernel reading, queued before the copy and
// after it, and a kernel writing, queued before it. The simulator's link model is calibrated
// from these (sim/calibration.c). Last, whether a copy to the host on one stream passes one
// queued before it on another that still waits for a kernel (the H100's did, on 2026-11-27,
// and the simulator's do since). Then how the two directions share the link: when each copy ends, queued at once;
// one joining the other 2 ms later; and over eight copies each way (the simulator's model of
// it is fitted to the pair's total alone). Prints one JSON object (GB/s and ms, median).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define cudaCheck(call) cuda_check((call), #call, __FILE__, __LINE__)
static void cuda_check(cudaError_t err, const char *what, const char *file, int line)
{
    if (err != cudaSuccess) {
        fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cudaGetErrorString(err));
        exit(1);
    }
}

static int compare_floats(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

enum { REPEATS = 10 };

// The median of REPEATS figures (it sorts them).
static double median(float *figures)
{
    qsort(figures, REPEATS, sizeof figures[0], compare_floats);
    return (figures[REPEATS / 2 - 1] + figures[REPEATS / 2]) / 2;
}
static const size_t BYTES = 256u << 20;

// Median GB/s of REPEATS rounds; each round copies BYTES in each direction asked for.
static double median_gbps(void *host_in, void *host_out, void *dev_in, void *dev_out,
                          int to_device, int to_host, cudaStream_t up, cudaStream_t down)
{
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    float gbps[REPEATS];
    for (int r = 0; r < REPEATS; r++) {
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaEventRecord(start, up));
        cudaCheck(cudaStreamWaitEvent(down, start, 0));
        if (to_device)
            cudaCheck(cudaMemcpyAsync(dev_in, host_in, BYTES, cudaMemcpyHostToDevice, up));
        if (to_host)
            cudaCheck(cudaMemcpyAsync(host_out, dev_out, BYTES, cudaMemcpyDeviceToHost, down));
        cudaEvent_t down_done;
        cudaCheck(cudaEventCreate(&down_done));
        cudaCheck(cudaEventRecord(down_done, down));
        cudaCheck(cudaStreamWaitEvent(up, down_done, 0));
        cudaCheck(cudaEventRecord(stop, up));
        cudaCheck(cudaEventSynchronize(stop));
        cudaCheck(cudaEventDestroy(down_done));
        float ms;
        cudaCheck(cudaEventElapsedTime(&ms, start, stop));
        gbps[r] = (float)((to_device + to_host) * BYTES / (ms * 1e6));
    }
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    return median(gbps);
}

// Reads n floats from host memory mapped into the device (zero-copy) and writes their sum to
// device memory, so that the reads cannot be dropped.
__global__ void read_host(const float4 *host, size_t n4, float *sum)
{
    float acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = host[i];
        acc += v.x + v.y + v.z + v.w;
    }
    if (acc == 12345.0f)
        *sum = acc;
}

// Writes n floats to host memory mapped into the device.
__global__ void write_host(float4 *host, size_t n4)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x)
        host[i] = make_float4(1, 2, 3, (float)i);
}

enum kernel_kind { READS, WRITES };

static void launch_zero_copy(enum kernel_kind kind, void *host_mapped, float *sum, cudaStream_t stream)
{
    if (kind == READS)
        read_host<<<264, 512, 0, stream>>>((const float4 *)host_mapped, BYTES / sizeof(float4), sum);
    else
        write_host<<<264, 512, 0, stream>>>((float4 *)host_mapped, BYTES / sizeof(float4));
    cudaCheck(cudaGetLastError());
}

// Median GB/s of REPEATS rounds of the zero-copy kernel moving BYTES, and of a BYTES copy
// queued at the same moment on another stream (direction: 1 to the device, -1 to the host, 0
// none), before the kernel when copy_first, each timed from the common start to its own end.
static void zero_copy_gbps(enum kernel_kind kind, void *host_mapped, void *host_copy, void *dev, float *sum,
                           int direction, int copy_first, cudaStream_t kernel_stream, cudaStream_t copy_stream,
                           double *kernel_gbps, double *copy_gbps)
{
    float kernel[REPEATS], copy[REPEATS];
    for (int r = 0; r < REPEATS; r++) {
        cudaEvent_t start, kernel_done, copy_done;
        cudaCheck(cudaEventCreate(&start));
        cudaCheck(cudaEventCreate(&kernel_done));
        cudaCheck(cudaEventCreate(&copy_done));
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaEventRecord(start, kernel_stream));
        cudaCheck(cudaStreamWaitEvent(copy_stream, start, 0));
        for (int turn = 0; turn < 2; turn++) {
            if (turn == copy_first)
                launch_zero_copy(kind, host_mapped, sum, kernel_stream);
            else if (direction > 0)
                cudaCheck(cudaMemcpyAsync(dev, host_copy, BYTES, cudaMemcpyHostToDevice, copy_stream));
            else if (direction < 0)
                cudaCheck(cudaMemcpyAsync(host_copy, dev, BYTES, cudaMemcpyDeviceToHost, copy_stream));
        }
        cudaCheck(cudaEventRecord(kernel_done, kernel_stream));
        cudaCheck(cudaEventRecord(copy_done, copy_stream));
        cudaCheck(cudaDeviceSynchronize());
        float ms;
        cudaCheck(cudaEventElapsedTime(&ms, start, kernel_done));
        kernel[r] = (float)(BYTES / (ms * 1e6));
        cudaCheck(cudaEventElapsedTime(&ms, start, copy_done));
        copy[r] = direction ? (float)(BYTES / (ms * 1e6)) : 0;
        cudaCheck(cudaEventDestroy(start));
        cudaCheck(cudaEventDestroy(kernel_done));
        cudaCheck(cudaEventDestroy(copy_done));
    }
    *kernel_gbps = median(kernel);
    *copy_gbps = median(copy);
}

// The zero-copy figures, as JSON members: the kernel alone, then [kernel, copy] beside a copy
// to the device and to the host (named "after" where the copy was queued first).
static void print_zero_copy(enum kernel_kind kind, int copy_first, void *host_mapped, void *host_in,
                            void *host_out, void *dev_in, void *dev_out, float *sum, cudaStream_t up,
                            cudaStream_t down)
{
    const char *name = kind == READS ? "read" : "write", *order = copy_first ? "after" : "with";
    double alone, unused, with_h2d, h2d_beside, with_d2h, d2h_beside;
    if (!copy_first) {
        zero_copy_gbps(kind, host_mapped, host_in, dev_in, sum, 0, 0, up, down, &alone, &unused);
        printf(", \"zero_copy_%s_gbps\": %.1f", name, alone);
    }
    zero_copy_gbps(kind, host_mapped, host_in, dev_in, sum, 1, copy_first, up, down, &with_h2d, &h2d_beside);
    zero_copy_gbps(kind, host_mapped, host_out, dev_out, sum, -1, copy_first, up, down, &with_d2h, &d2h_beside);
    printf(", \"zero_copy_%s_%s_h2d_gbps\": [%.1f, %.1f], \"zero_copy_%s_%s_d2h_gbps\": [%.1f, %.1f]", name,
           order, with_h2d, h2d_beside, name, order, with_d2h, d2h_beside);
}

// Spins for ns nanoseconds of the device's global timer: work of a known length.
__global__ void spin(unsigned long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    while (now - start < ns);
}

enum { SPIN_MS = 20, MAX_ENDS = 3 };

// One round of a measurement of when work ends: it records `start` and queues its work,
// recording done[i] where each of its parts ends.
typedef void (*round_queue)(const void *setup, cudaEvent_t start, const cudaEvent_t *done);

// Median ms from the start to each of `count` ends, over REPEATS rounds, each on an idle device.
static void median_ends(round_queue queue, const void *setup, int count, double *ms_out)
{
    float ends[MAX_ENDS][REPEATS];
    for (int r = 0; r < REPEATS; r++) {
        cudaEvent_t start, done[MAX_ENDS];
        cudaCheck(cudaEventCreate(&start));
        for (int i = 0; i < count; i++)
            cudaCheck(cudaEventCreate(&done[i]));
        cudaCheck(cudaDeviceSynchronize());
        queue(setup, start, done);
        cudaCheck(cudaDeviceSynchronize());
        for (int i = 0; i < count; i++) {
            cudaCheck(cudaEventElapsedTime(&ends[i][r], start, done[i]));
            cudaCheck(cudaEventDestroy(done[i]));
        }
        cudaCheck(cudaEventDestroy(start));
    }
    for (int i = 0; i < count; i++)
        ms_out[i] = median(ends[i]);
}

typedef struct past_waiting {
    void *host_first, *host_second, *dev_first, *dev_second;
    cudaStream_t kernel_stream, first, second;
} past_waiting;

// A copy to the host queued on `first` behind a SPIN_MS kernel on kernel_stream, then one
// queued on `second` with nothing to wait for, each BYTES: ends are the kernel's, the first
// copy's and the second's. The second ends near a copy's time where it passes the first, near
// the kernel and two copies' where it waits behind it.
static void queue_past_waiting(const void *setup, cudaEvent_t start, const cudaEvent_t *done)
{
    const past_waiting *p = (const past_waiting *)setup;
    cudaCheck(cudaEventRecord(start, p->kernel_stream));
    cudaCheck(cudaStreamWaitEvent(p->first, start, 0));
    cudaCheck(cudaStreamWaitEvent(p->second, start, 0));
    spin<<<1, 1, 0, p->kernel_stream>>>((unsigned long long)SPIN_MS * 1000000);
    cudaCheck(cudaGetLastError());
    cudaCheck(cudaEventRecord(done[0], p->kernel_stream));
    cudaCheck(cudaStreamWaitEvent(p->first, done[0], 0));
    cudaCheck(cudaMemcpyAsync(p->host_first, p->dev_first, BYTES, cudaMemcpyDeviceToHost, p->first));
    cudaCheck(cudaEventRecord(done[1], p->first));
    cudaCheck(cudaMemcpyAsync(p->host_second, p->dev_second, BYTES, cudaMemcpyDeviceToHost, p->second));
    cudaCheck(cudaEventRecord(done[2], p->second));
}

enum { SUSTAINED_PIECES = 8 };

typedef struct each_way {
    void *host_in, *host_out, *dev_in, *dev_out;
    int pieces;
    unsigned delay_ms;
    cudaStream_t up, down;
} each_way;

// `pieces` copies each way of half of BYTES each (one copy of BYTES when pieces is 1), queued
// in turn, each to the device first; those to the device behind a delay_ms kernel when
// delay_ms is not 0: ends are the last copy to the device's and the last to the host's. How
// the two directions share the link: at once, one joining the other, and over many copies (the
// simulator's model is fitted to the first alone).
static void queue_each_way(const void *setup, cudaEvent_t start, const cudaEvent_t *done)
{
    const each_way *e = (const each_way *)setup;
    size_t piece = e->pieces == 1 ? BYTES : BYTES / 2;
    cudaCheck(cudaEventRecord(start, e->up));
    cudaCheck(cudaStreamWaitEvent(e->down, start, 0));
    if (e->delay_ms) {
        spin<<<1, 1, 0, e->up>>>((unsigned long long)e->delay_ms * 1000000);
        cudaCheck(cudaGetLastError());
    }
    for (int i = 0; i < e->pieces; i++) {
        size_t at = (size_t)(i % 2) * piece;
        cudaCheck(cudaMemcpyAsync((char *)e->dev_in + at, (char *)e->host_in + at, piece,
                                  cudaMemcpyHostToDevice, e->up));
        cudaCheck(cudaMemcpyAsync((char *)e->host_out + at, (char *)e->dev_out + at, piece,
                                  cudaMemcpyDeviceToHost, e->down));
    }
    cudaCheck(cudaEventRecord(done[0], e->up));
    cudaCheck(cudaEventRecord(done[1], e->down));
}

int main(void)
{
    void *host_in, *host_out, *dev_in, *dev_out;
    cudaCheck(cudaHostAlloc(&host_in, BYTES, cudaHostAllocDefault));
    cudaCheck(cudaHostAlloc(&host_out, BYTES, cudaHostAllocDefault));
    cudaCheck(cudaMalloc(&dev_in, BYTES));
    cudaCheck(cudaMalloc(&dev_out, BYTES));
    cudaStream_t up, down;
    cudaCheck(cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking));
    cudaCheck(cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking));
    double h2d = median_gbps(host_in, host_out, dev_in, dev_out, 1, 0, up, down);
    double d2h = median_gbps(host_in, host_out, dev_in, dev_out, 0, 1, up, down);
    double both = median_gbps(host_in, host_out, dev_in, dev_out, 1, 1, up, down);
    void *mapped, *mapped_dev;
    float *sum;
    cudaCheck(cudaHostAlloc(&mapped, BYTES, cudaHostAllocMapped));
    cudaCheck(cudaHostGetDevicePointer(&mapped_dev, mapped, 0));
    cudaCheck(cudaMalloc(&sum, sizeof *sum));
    // The device memory as the driver counts it, which LMS_EXCLUDE_MB is taken from: on the
    // H100, 480 MiB less than nvidia-smi's (measured).
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("{\"device_total_bytes\": %zu, \"bytes\": %zu, \"h2d_gbps\": %.1f, \"d2h_gbps\": %.1f, "
           "\"bidirectional_gbps\": %.1f", prop.totalGlobalMem, BYTES, h2d, d2h, both);
    print_zero_copy(READS, 0, mapped_dev, host_in, host_out, dev_in, dev_out, sum, up, down);
    print_zero_copy(READS, 1, mapped_dev, host_in, host_out, dev_in, dev_out, sum, up, down);
    print_zero_copy(WRITES, 0, mapped_dev, host_in, host_out, dev_in, dev_out, sum, up, down);
    cudaStream_t down_again;
    cudaCheck(cudaStreamCreateWithFlags(&down_again, cudaStreamNonBlocking));
    double past[3];
    const past_waiting waiting = { host_out, host_in, dev_out, dev_in, up, down, down_again };
    median_ends(queue_past_waiting, &waiting, 3, past);
    printf(", \"d2h_past_waiting_copy_ms\": [%.2f, %.2f, %.2f]", past[0], past[1], past[2]);
    double at_once[2], joining[2], many[2];
    const each_way pair = { host_in, host_out, dev_in, dev_out, 1, 0, up, down };
    const each_way joined = { host_in, host_out, dev_in, dev_out, 1, 2, up, down };
    const each_way sustained = { host_in, host_out, dev_in, dev_out, SUSTAINED_PIECES, 0, up, down };
    median_ends(queue_each_way, &pair, 2, at_once);
    median_ends(queue_each_way, &joined, 2, joining);
    median_ends(queue_each_way, &sustained, 2, many);
    double many_ms = many[0] > many[1] ? many[0] : many[1];
    printf(", \"bidirectional_ends_ms\": [%.2f, %.2f], \"bidirectional_staggered_ms\": [%.2f, %.2f], "
           "\"bidirectional_sustained_gbps\": %.1f", at_once[0], at_once[1], joining[0], joining[1],
           2.0 * SUSTAINED_PIECES * (BYTES / 2) / (many_ms * 1e6));
    printf("}\n");
    return 0;
}
