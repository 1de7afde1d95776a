/* The trainer's own CUDA kernels, for what cuDNN and cuBLAS do not do the way Caffe does:
 * ceil-rounded pooling, within-channel LRN, leaky ReLU, dropout, concat, the losses, batch
 * gathering and the SGD update. Each mirrors its CPU reference in cpu_*.c. All launch on
 * `stream` and never synchronise; none uses atomics, so results are deterministic. A launch
 * that fails (the runtime, or liblms, refusing it) ends the program with the kernel's name. */
#ifndef TRAINER_GPU_KERNELS_H
#define TRAINER_GPU_KERNELS_H

#include <cuda_runtime.h>
#include <stdint.h>
#include "trainer/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

void gpu_pool_forward(const Layer *l, const Tensor *x, Tensor *y, cudaStream_t stream);
void gpu_pool_backward(const Layer *l, Tensor *x, const Tensor *y, cudaStream_t stream);
void gpu_lrn_forward(Layer *l, const Tensor *x, Tensor *y, cudaStream_t stream);
void gpu_lrn_backward(const Layer *l, Tensor *x, const Tensor *y, cudaStream_t stream);
void gpu_relu_forward(const Layer *l, const Tensor *x, Tensor *y, cudaStream_t stream);
void gpu_relu_backward(const Layer *l, Tensor *x, const Tensor *y, cudaStream_t stream);
void gpu_dropout_forward(const Layer *l, uint64_t seed, long iter, int index, const Tensor *x, Tensor *y,
                         cudaStream_t stream);
void gpu_dropout_backward(const Layer *l, uint64_t seed, long iter, int index, Tensor *x, const Tensor *y,
                          cudaStream_t stream);
void gpu_concat_forward(const Tensor *a, const Tensor *b, Tensor *y, cudaStream_t stream);
void gpu_concat_backward(const Layer *l, Tensor *a, Tensor *b, const Tensor *y, cudaStream_t stream);
/* Losses, from the probabilities in l->aux (cuDNN's softmax). */
void gpu_softmax_loss_forward(Layer *l, const Tensor *label, Tensor *y, cudaStream_t stream);
void gpu_softmax_loss_backward(const Layer *l, Tensor *x, const Tensor *label, cudaStream_t stream);
void gpu_dice_loss_forward(Layer *l, const Tensor *label, Tensor *y, cudaStream_t stream);
void gpu_dice_loss_backward(const Layer *l, Tensor *x, const Tensor *label, cudaStream_t stream);
/* y[n][c][s] = bias[c] */
void gpu_broadcast_bias(float *y, const float *bias, int n, int c, size_t spatial, cudaStream_t stream);
/* sum[c] = sum over n and s of x[n][c][s] */
void gpu_channel_sum(float *sum, const float *x, int n, int c, size_t spatial, cudaStream_t stream);
void gpu_gather(float *dst, const uint8_t *src, size_t item_size, long first, int batch, long count, float offset,
                float scale, cudaStream_t stream);
void gpu_sgd_update(float *w, const float *g, float *h, size_t count, float lr, float momentum, float decay,
                    cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
