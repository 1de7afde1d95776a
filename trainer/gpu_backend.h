/* The GPU backend: cuDNN convolutions, activations and softmax, cuBLAS inner products, and
 * the trainer's own kernels for pooling (Caffe's ceil windows), within-channel LRN, losses and
 * the SGD update. Every tensor is one cudaMalloc; nothing is allocated or synchronised per
 * iteration. Plain C interface, implemented in CUDA C. */
#ifndef TRAINER_GPU_BACKEND_H
#define TRAINER_GPU_BACKEND_H

#include <stddef.h>
#include "trainer/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Selects CUDA device `device` and creates the cuDNN and cuBLAS handles. With deterministic,
 * only algorithms that give bit-identical results run by run are used. Returns the backend, or
 * NULL with the reason (no GPU, no such device) in err. */
const Backend *gpu_backend_open(int device, int deterministic, size_t workspace_limit, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
