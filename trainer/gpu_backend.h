/* The GPU backend: cuDNN convolutions and softmax, cuBLAS inner products, and the trainer's own
 * kernels for pooling (Caffe's ceil windows), LRN, losses and the SGD update. Every tensor is
 * one cudaMalloc; nothing is allocated or synchronised per iteration. Plain C interface,
 * implemented in CUDA C. */
#ifndef TRAINER_GPU_BACKEND_H
#define TRAINER_GPU_BACKEND_H

#include <stddef.h>
#include "trainer/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct GpuOptions {
    int deterministic;      /* only cuDNN algorithms that give bit-identical results run by run */
    int strict_fp32;        /* no TF32 tensor-core math: CUDNN_FMA_MATH, CUBLAS_PEDANTIC_MATH */
    size_t workspace_limit; /* bytes: the cap on the one cuDNN workspace all convolutions share */
    int max_images;         /* images per cuDNN call at most; 0: as many as cuDNN takes */
} GpuOptions;

/* Selects CUDA device `device` and creates the stream and the cuDNN and cuBLAS handles.
 * Returns the backend, or NULL with the reason (no GPU, no such device) in err. */
const Backend *gpu_backend_open(int device, const GpuOptions *opt, char *err, size_t errlen);
/* The CUDA devices this process sees; 0 where there is no GPU or driver. */
int gpu_backend_device_count(void);
/* The stream the open backend queues its work on (a cudaStream_t), for others' work to follow. */
void *gpu_backend_stream(void);

/* The backend's prepare and teardown, which need no GPU: each convolution's and softmax's cuDNN
 * descriptors for the net's shapes, one rank for the whole net (4-D, or 5-D for volumes), with
 * batches cut into pieces that cuDNN's legacy API accepts (batch_pieces.h). Returns 0, or -1
 * with the reason (a single image too large for cuDNN, a shape cuDNN refuses) in err. Tests
 * call them without a device; libcudnn checks descriptors on the host. */
int gpu_backend_prepare(struct Net *net, const GpuOptions *opt, char *err, size_t errlen);
void gpu_backend_teardown(struct Layer *layer);

#ifdef __cplusplus
}
#endif

#endif
