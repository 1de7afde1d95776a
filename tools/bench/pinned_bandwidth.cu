// Pinned host <-> device bandwidth, one direction at a time and both at once: the
// physical limit that swapping is measured against. Prints one JSON object (GB/s, median).
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
    qsort(gbps, REPEATS, sizeof gbps[0], compare_floats);
    cudaCheck(cudaEventDestroy(start));
    cudaCheck(cudaEventDestroy(stop));
    return (gbps[REPEATS / 2 - 1] + gbps[REPEATS / 2]) / 2;
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
    printf("{\"bytes\": %zu, \"h2d_gbps\": %.1f, \"d2h_gbps\": %.1f, \"bidirectional_gbps\": %.1f}\n",
           BYTES, h2d, d2h, both);
    return 0;
}
