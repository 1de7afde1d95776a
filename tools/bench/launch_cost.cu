// Host cost of one kernel launch, in ns: the figure the launch hook adds to.
// Prints one JSON object. The kernel takes a device pointer, so that a hook that scans
// parameters for allocations has one to find, as in real programs.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define cudaCheck(call) cuda_check((call), #call, __FILE__, __LINE__)
static void cuda_check(cudaError_t err, const char *what, const char *file, int line)
{
    if (err != cudaSuccess) {
        fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cudaGetErrorString(err));
        exit(1);
    }
}

__global__ void touch(float *data, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        data[i] += 1.0f;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
    int launches = argc > 1 ? atoi(argv[1]) : 200000;
    if (launches <= 0) {
        fprintf(stderr, "launch_cost: launches must be a positive number, got '%s'\n", argv[1]);
        return 2;
    }
    float *data;
    cudaCheck(cudaMalloc(&data, 4 << 20)); // above the default threshold: a swappable allocation
    cudaCheck(cudaMemset(data, 0, 4 << 20));
    for (int i = 0; i < 1000; i++)
        touch<<<1, 32>>>(data, 32);
    cudaCheck(cudaDeviceSynchronize());

    // Launch in batches so the queue never fills and blocks the host.
    const int batch = 1000;
    double enqueue_ns = 0;
    for (int done = 0; done < launches; done += batch) {
        double start = now_ns();
        for (int i = 0; i < batch; i++)
            touch<<<1, 32>>>(data, 32);
        enqueue_ns += now_ns() - start;
        cudaCheck(cudaDeviceSynchronize());
    }
    cudaCheck(cudaGetLastError());
    float check;
    cudaCheck(cudaMemcpy(&check, data, sizeof check, cudaMemcpyDeviceToHost));
    int rounds = (launches + batch - 1) / batch * batch;
    if (check != (float)(1000 + rounds)) {
        fprintf(stderr, "launch_cost: data[0] is %g after %d launches, expected %d\n", check, rounds + 1000, rounds + 1000);
        return 1;
    }
    printf("{\"launches\": %d, \"ns_per_launch\": %.1f}\n", rounds, enqueue_ns / rounds);
    cudaCheck(cudaFree(data));
    return 0;
}
