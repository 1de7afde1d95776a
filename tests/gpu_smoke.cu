// GPU smoke test: a kernel of our own and a cuBLAS call on the real device, each checked
// against a CPU reference. Skips (TAP skip_all) where no device is usable.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>

extern "C" {
#include "tests/tap.h"
}

#define cudaCheck(call) cuda_check((call), #call, __FILE__, __LINE__)
static void cuda_check(cudaError_t err, const char *what, const char *file, int line)
{
    if (err != cudaSuccess)
        bail_out("%s:%d: %s: %s", file, line, what, cudaGetErrorString(err));
}

__global__ void saxpy(int n, float a, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

/* The error of a*x+y relative to the size of its terms, not of its result: the GPU fuses the
 * multiply and the add (one rounding), the CPU rounds twice, and where the terms cancel the
 * result's own size says nothing of the arithmetic (measured on the H100: 5e-6 of a result
 * near zero). */
static float max_relative_error(float a, const float *x, const float *y, const float *got, int n)
{
    float worst = 0;
    for (int i = 0; i < n; i++) {
        float want = a * x[i] + y[i];
        float err = fabsf(got[i] - want) / fmaxf(fabsf(a * x[i]) + fabsf(y[i]), 1e-6f);
        worst = fmaxf(worst, err);
    }
    return worst;
}

static void check_saxpy(void)
{
    const int n = 1 << 20;
    float *x = (float *)malloc(n * sizeof(float)), *y = (float *)malloc(n * sizeof(float));
    float *got = (float *)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) {
        x[i] = (float)(i % 1000) / 7.0f;
        y[i] = (float)(i % 37) - 18.0f;
    }
    float *dx, *dy;
    cudaCheck(cudaMalloc(&dx, n * sizeof(float)));
    cudaCheck(cudaMalloc(&dy, n * sizeof(float)));
    cudaCheck(cudaMemcpy(dx, x, n * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(dy, y, n * sizeof(float), cudaMemcpyHostToDevice));
    saxpy<<<(n + 255) / 256, 256>>>(n, 2.5f, dx, dy);
    cudaCheck(cudaGetLastError());
    cudaCheck(cudaMemcpy(got, dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    float err = max_relative_error(2.5f, x, y, got, n);
    ok(err < 1e-6f, "own kernel: saxpy of %d elements matches the CPU (max relative error %g)", n, err);
    cudaCheck(cudaFree(dx));
    cudaCheck(cudaFree(dy));
    free(x), free(y), free(got);
}

static void check_sgemm(void)
{
    const int m = 256, k = 384, n = 128;
    float *a = (float *)malloc(m * k * sizeof(float)), *b = (float *)malloc(k * n * sizeof(float));
    float *want = (float *)calloc(m * n, sizeof(float)), *got = (float *)malloc(m * n * sizeof(float));
    for (int i = 0; i < m * k; i++)
        a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    for (int i = 0; i < k * n; i++)
        b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
    // Column-major, as cuBLAS: C[m x n] = A[m x k] * B[k x n].
    for (int col = 0; col < n; col++)
        for (int row = 0; row < m; row++) {
            double sum = 0;
            for (int i = 0; i < k; i++)
                sum += (double)a[i * m + row] * b[col * k + i];
            want[col * m + row] = (float)sum;
        }
    float *da, *db, *dc;
    cudaCheck(cudaMalloc(&da, m * k * sizeof(float)));
    cudaCheck(cudaMalloc(&db, k * n * sizeof(float)));
    cudaCheck(cudaMalloc(&dc, m * n * sizeof(float)));
    cudaCheck(cudaMemcpy(da, a, m * k * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(db, b, k * n * sizeof(float), cudaMemcpyHostToDevice));
    cublasHandle_t handle;
    int created = cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS;
    ok(created, "cuBLAS handle created");
    if (created) {
        // Full fp32 so that the comparison with the double-precision reference stays tight.
        cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);
        const float one = 1.0f, zero = 0.0f;
        cublasStatus_t status = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da, m, db, k, &zero, dc, m);
        cudaCheck(cudaMemcpy(got, dc, m * n * sizeof(float), cudaMemcpyDeviceToHost));
        float worst = 0;
        for (int i = 0; i < m * n; i++)
            worst = fmaxf(worst, fabsf(got[i] - want[i]));
        ok(status == CUBLAS_STATUS_SUCCESS && worst < 1e-4f,
           "cuBLAS: sgemm %dx%dx%d matches the CPU (status %d, max absolute error %g)", m, n, k, (int)status, worst);
        cublasDestroy(handle);
    } else {
        skip(1, "no cuBLAS handle");
    }
    cudaCheck(cudaFree(da));
    cudaCheck(cudaFree(db));
    cudaCheck(cudaFree(dc));
    free(a), free(b), free(want), free(got);
}

int main(void)
{
    int devices = 0;
    cudaError_t err = cudaGetDeviceCount(&devices);
    if (err != cudaSuccess || devices == 0)
        plan_skip_all("no CUDA device: %s", err != cudaSuccess ? cudaGetErrorString(err) : "none found");
    plan(3);
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    note("device 0: %s, %zu MiB", prop.name, prop.totalGlobalMem >> 20);
    check_saxpy();
    check_sgemm();
    return exit_status();
}
