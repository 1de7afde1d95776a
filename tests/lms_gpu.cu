// liblms on the real GPU, run under LD_PRELOAD by tests/lms_gpu.sh with LMS_EXCLUDE_MB set so
// that the cache holds a small part of the device. Modes:
//   workload  own kernels, cuBLAS and cuDNN over a working set of at least 4x the soft limit,
//             each result checked against a CPU reference;
//   stress N  the randomized differential test of tests/lms_stress.c with real kernels.
// Exits 0 when every check passes; says what failed on stderr.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define cudaCheck(call) check_cuda((call), #call, __FILE__, __LINE__)
#define cublasCheck(call) check_status((call) != CUBLAS_STATUS_SUCCESS, #call, __FILE__, __LINE__)
#define cudnnCheck(call) check_status((call) != CUDNN_STATUS_SUCCESS, #call, __FILE__, __LINE__)

static void check_cuda(cudaError_t err, const char *what, const char *file, int line)
{
    if (err != cudaSuccess) {
        fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cudaGetErrorString(err));
        exit(1);
    }
}

static void check_status(int failed, const char *what, const char *file, int line)
{
    if (failed) {
        fprintf(stderr, "%s:%d: %s failed\n", file, line, what);
        exit(1);
    }
}

static int failures;
static void expect(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "FAILED: %s\n", what);
        failures++;
    }
}

__global__ void fill(float *x, size_t n, float base)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = base + (float)(i % 1000);
}

__global__ void scale_add(float *x, size_t n, float a, float b)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = a * x[i] + b;
}

__global__ void add_bytes(unsigned char *p, size_t n, int delta)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (unsigned char)(p[i] + delta);
}

// Own kernels: buffers of 128 MiB, together `total` bytes; every one filled, then scaled,
// then spot-checked on the host.
static void own_kernels(size_t total)
{
    const size_t n = (128u << 20) / sizeof(float);
    int count = (int)(total / (128u << 20));
    float **bufs = (float **)calloc((size_t)count, sizeof *bufs);
    for (int i = 0; i < count; i++) {
        cudaCheck(cudaMalloc(&bufs[i], n * sizeof(float)));
        fill<<<264, 256>>>(bufs[i], n, (float)i);
        cudaCheck(cudaGetLastError());
    }
    for (int i = 0; i < count; i++)
        scale_add<<<264, 256>>>(bufs[i], n, 2.0f, 1.0f);
    cudaCheck(cudaDeviceSynchronize());
    int wrong = 0;
    for (int i = 0; i < count; i++) {
        float got[3];
        size_t at[3] = { 0, n / 2 + 7, n - 1 };
        for (int k = 0; k < 3; k++) {
            cudaCheck(cudaMemcpy(&got[k], bufs[i] + at[k], sizeof(float), cudaMemcpyDeviceToHost));
            wrong += got[k] != 2.0f * ((float)i + (float)(at[k] % 1000)) + 1.0f;
        }
        cudaCheck(cudaFree(bufs[i]));
    }
    free(bufs);
    expect(wrong == 0, "own kernels: every checked element is 2 * (i + k % 1000) + 1");
}

// cuBLAS: C_i = A_i * B for matrices of 2048 x 2048, spot-checked against CPU dot products.
static void cublas_gemms(size_t total)
{
    const int d = 2048;
    const size_t bytes = (size_t)d * d * sizeof(float);
    int count = (int)(total / (2 * bytes));
    float *host = (float *)malloc(bytes), *b_host = (float *)malloc(bytes);
    float **a = (float **)calloc((size_t)count, sizeof *a), **c = (float **)calloc((size_t)count, sizeof *c);
    float *b;
    cublasHandle_t h;
    cublasCheck(cublasCreate(&h));
    for (size_t k = 0; k < (size_t)d * d; k++)
        b_host[k] = (float)((k * 7) % 13) / 13.0f;
    cudaCheck(cudaMalloc(&b, bytes));
    cudaCheck(cudaMemcpy(b, b_host, bytes, cudaMemcpyHostToDevice));
    for (int i = 0; i < count; i++) {
        for (size_t k = 0; k < (size_t)d * d; k++)
            host[k] = (float)((k + (size_t)i) % 17) / 17.0f;
        cudaCheck(cudaMalloc(&a[i], bytes));
        cudaCheck(cudaMalloc(&c[i], bytes));
        cudaCheck(cudaMemcpy(a[i], host, bytes, cudaMemcpyHostToDevice));
    }
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i < count; i++)
        cublasCheck(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, d, d, d, &one, a[i], d, b, d, &zero, c[i], d));
    cudaCheck(cudaDeviceSynchronize());
    int wrong = 0;
    for (int i = 0; i < count; i++) {
        int row = (i * 31) % d, col = (i * 17) % d; // column-major: C[row, col] = sum_k A[row, k] B[k, col]
        float got;
        cudaCheck(cudaMemcpy(&got, c[i] + (size_t)col * d + row, sizeof got, cudaMemcpyDeviceToHost));
        double want = 0;
        for (int k = 0; k < d; k++)
            want += (double)((float)(((size_t)k * d + row + (size_t)i) % 17) / 17.0f) *
                    (double)b_host[(size_t)col * d + k];
        wrong += fabs(got - want) > 1e-3 * fabs(want) + 1e-3;
        cudaCheck(cudaFree(a[i]));
        cudaCheck(cudaFree(c[i]));
    }
    cudaCheck(cudaFree(b));
    cublasCheck(cublasDestroy(h));
    free(host), free(b_host), free(a), free(c);
    expect(wrong == 0, "cuBLAS: every checked element of A_i * B matches the CPU");
}

// cuDNN: 3x3 convolutions of batches of 16 x 32 x 256 x 256 images, spot-checked on the CPU.
static void cudnn_convolutions(size_t total)
{
    const int n = 16, ch = 32, hw = 256, k = 32;
    const size_t image = (size_t)n * ch * hw * hw, bytes = image * sizeof(float);
    int count = (int)(total / (2 * bytes));
    cudnnHandle_t h;
    cudnnCheck(cudnnCreate(&h));
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnCheck(cudnnCreateTensorDescriptor(&xd));
    cudnnCheck(cudnnCreateTensorDescriptor(&yd));
    cudnnCheck(cudnnCreateFilterDescriptor(&wd));
    cudnnCheck(cudnnCreateConvolutionDescriptor(&cd));
    cudnnCheck(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, ch, hw, hw));
    cudnnCheck(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, hw, hw));
    cudnnCheck(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, ch, 3, 3));
    cudnnCheck(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    size_t ws_bytes = 0;
    cudnnCheck(cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, algo, &ws_bytes));
    float w_host[32 * 32 * 9];
    for (int i = 0; i < k * ch * 9; i++)
        w_host[i] = (float)(i % 5) / 5.0f - 0.4f;
    float *w, **x = (float **)calloc((size_t)count, sizeof *x), **y = (float **)calloc((size_t)count, sizeof *y);
    void *ws = NULL;
    cudaCheck(cudaMalloc(&w, sizeof w_host));
    cudaCheck(cudaMemcpy(w, w_host, sizeof w_host, cudaMemcpyHostToDevice));
    if (ws_bytes)
        cudaCheck(cudaMalloc(&ws, ws_bytes));
    for (int i = 0; i < count; i++) {
        cudaCheck(cudaMalloc(&x[i], bytes));
        cudaCheck(cudaMalloc(&y[i], bytes));
        fill<<<264, 256>>>(x[i], image, (float)i);
        scale_add<<<264, 256>>>(x[i], image, 0.001f, 0.0f);
    }
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i < count; i++)
        cudnnCheck(cudnnConvolutionForward(h, &one, xd, x[i], wd, w, cd, algo, ws, ws_bytes, &zero, yd, y[i]));
    cudaCheck(cudaDeviceSynchronize());
    int wrong = 0;
    for (int i = 0; i < count; i++) {
        int b = i % n, o = (i * 5) % k, r = 100 + i % 50, c = 37;
        float got;
        cudaCheck(cudaMemcpy(&got, y[i] + (((size_t)b * k + o) * hw + r) * hw + c, sizeof got, cudaMemcpyDeviceToHost));
        double want = 0;
        for (int ci = 0; ci < ch; ci++)
            for (int dr = -1; dr <= 1; dr++)
                for (int dc = -1; dc <= 1; dc++) {
                    size_t at = (((size_t)b * ch + ci) * hw + (size_t)(r + dr)) * hw + (size_t)(c + dc);
                    float xv = ((float)i + (float)(at % 1000)) * 0.001f;
                    want += (double)xv * w_host[((o * ch + ci) * 3 + (dr + 1)) * 3 + (dc + 1)];
                }
        wrong += fabs(got - want) > 1e-3 * fabs(want) + 1e-3;
        cudaCheck(cudaFree(x[i]));
        cudaCheck(cudaFree(y[i]));
    }
    cudaCheck(cudaFree(w));
    if (ws)
        cudaCheck(cudaFree(ws));
    cudnnDestroyTensorDescriptor(xd), cudnnDestroyTensorDescriptor(yd);
    cudnnDestroyFilterDescriptor(wd), cudnnDestroyConvolutionDescriptor(cd);
    cudnnCheck(cudnnDestroy(h));
    free(x), free(y);
    expect(wrong == 0, "cuDNN: every checked output of the convolutions matches the CPU");
}

// The differential stress test with real kernels (see tests/lms_stress.c).
static void stress(unsigned long ops)
{
    enum { SLOTS = 16, MAX_BYTES = 6144 };
    static unsigned char model[SLOTS][MAX_BYTES], buf[MAX_BYTES];
    unsigned char *ptr[SLOTS] = { 0 };
    size_t bytes[SLOTS];
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    auto next = [&]() { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; };
    unsigned long mismatches = 0;
    for (unsigned long op = 0; op < ops; op++) {
        int s = (int)(next() % SLOTS);
        unsigned kind = (unsigned)(next() % 100);
        if (!ptr[s]) {
            bytes[s] = 1 + next() % MAX_BYTES;
            cudaCheck(cudaMalloc(&ptr[s], bytes[s]));
            cudaCheck(cudaMemset(ptr[s], 0, bytes[s]));
            memset(model[s], 0, bytes[s]);
            continue;
        }
        size_t off = next() % bytes[s], len = 1 + next() % (bytes[s] - off);
        if (kind < 5) {
            cudaCheck(cudaFree(ptr[s]));
            ptr[s] = NULL;
        } else if (kind < 30) {
            for (size_t i = 0; i < len; i++)
                buf[i] = (unsigned char)next();
            memcpy(model[s] + off, buf, len);
            cudaCheck(cudaMemcpy(ptr[s] + off, buf, len, cudaMemcpyHostToDevice));
        } else if (kind < 55) {
            int delta = (int)(next() % 255) + 1;
            for (size_t i = 0; i < len; i++)
                model[s][off + i] = (unsigned char)(model[s][off + i] + delta);
            add_bytes<<<4, 128>>>(ptr[s] + off, len, delta);
            cudaCheck(cudaGetLastError());
        } else if (kind < 65) {
            unsigned char v = (unsigned char)next();
            memset(model[s] + off, v, len);
            cudaCheck(cudaMemset(ptr[s] + off, v, len));
        } else {
            cudaCheck(cudaMemcpy(buf, ptr[s] + off, len, cudaMemcpyDeviceToHost));
            mismatches += memcmp(buf, model[s] + off, len) != 0;
        }
    }
    for (int s = 0; s < SLOTS; s++)
        if (ptr[s])
            cudaCheck(cudaFree(ptr[s]));
    fprintf(stderr, "stress: %lu operations, %lu mismatched reads\n", ops, mismatches);
    expect(mismatches == 0, "stress: every read matches the host model");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s workload | stress OPS | total-mib\n", argv[0]);
        return 2;
    }
    // The device memory LMS_EXCLUDE_MB is taken from: the driver's total, which on the H100
    // is 480 MiB less than nvidia-smi's (81079 against 81559 MiB, measured).
    if (strcmp(argv[1], "total-mib") == 0) {
        cudaDeviceProp prop;
        cudaCheck(cudaGetDeviceProperties(&prop, 0));
        printf("%zu\n", prop.totalGlobalMem >> 20);
        return 0;
    }
    size_t free_bytes, total;
    cudaCheck(cudaMemGetInfo(&free_bytes, &total));
    if (strcmp(argv[1], "stress") == 0) {
        stress(argc > 2 ? strtoul(argv[2], NULL, 10) : 100000);
    } else {
        // The soft limit comes from the environment (LMS_SOFT_LIMIT_MB, set by the script);
        // every part works on at least four times that much.
        size_t limit = (size_t)strtoull(getenv("LMS_SOFT_LIMIT_MB") ? getenv("LMS_SOFT_LIMIT_MB") : "1024",
                                        NULL, 10) << 20;
        own_kernels(5 * limit);
        cublas_gemms(4 * limit + (256u << 20));
        cudnn_convolutions(4 * limit + (512u << 20));
    }
    return failures ? 1 : 0;
}
