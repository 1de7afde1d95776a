/* The CPU reference of every layer: plain loops, written to be obviously right rather than
 * fast. The GPU layers are tested against these. Backward functions write the bottom's diff
 * (or add to it when layer->accumulate says so) only when the bottom has one. */
#ifndef TRAINER_CPU_LAYERS_H
#define TRAINER_CPU_LAYERS_H

#include "trainer/layer.h"

/* The trainer is single-threaded: ThreadSanitizer has nothing to find in the convolution and
 * inner-product loops, which hold nearly all of its arithmetic, and would slow the
 * thread-sanitized tests thirtyfold. AddressSanitizer and UBSan still check them. */
#define NO_TSAN __attribute__((no_sanitize("thread")))

void cpu_conv_forward(const Layer *l, const Tensor *x, Tensor *y);
void cpu_conv_backward(Layer *l, Tensor *x, const Tensor *y);
void cpu_deconv_forward(const Layer *l, const Tensor *x, Tensor *y);
void cpu_deconv_backward(Layer *l, Tensor *x, const Tensor *y);
void cpu_pool_forward(const Layer *l, const Tensor *x, Tensor *y);
void cpu_pool_backward(const Layer *l, Tensor *x, const Tensor *y);
void cpu_lrn_forward(Layer *l, const Tensor *x, Tensor *y);
void cpu_lrn_backward(const Layer *l, Tensor *x, const Tensor *y);
void cpu_ip_forward(const Layer *l, const Tensor *x, Tensor *y);
void cpu_ip_backward(Layer *l, Tensor *x, const Tensor *y);
void cpu_relu_forward(const Layer *l, const Tensor *x, Tensor *y);
void cpu_relu_backward(const Layer *l, Tensor *x, const Tensor *y);
/* Dropout masks are rng_hash_uniform(seed, iter, layer_index, element) >= ratio. */
void cpu_dropout_forward(const Layer *l, uint64_t seed, long iter, int layer_index, const Tensor *x, Tensor *y);
void cpu_dropout_backward(const Layer *l, uint64_t seed, long iter, int layer_index, Tensor *x, const Tensor *y);
void cpu_concat_forward(const Layer *l, const Tensor *a, const Tensor *b, Tensor *y);
void cpu_concat_backward(const Layer *l, Tensor *a, Tensor *b, const Tensor *y);
/* Losses: y is the 1-element loss; label holds class indices as floats. */
void cpu_softmax_loss_forward(Layer *l, const Tensor *x, const Tensor *label, Tensor *y);
void cpu_softmax_loss_backward(const Layer *l, Tensor *x, const Tensor *label);
void cpu_dice_loss_forward(Layer *l, const Tensor *x, const Tensor *label, Tensor *y);
void cpu_dice_loss_backward(const Layer *l, Tensor *x, const Tensor *label);

/* One layer's pass, dispatched on its type (cpu_ops.c): what the CPU backend runs, and what
 * the simulated GPU's kernels run (sim_kernels.c). x2 is the second bottom (concat's, or the
 * loss's labels), NULL when there is none. Forward applies dropout's mask, so it is called
 * in training only. */
typedef struct LayerCall {
    Tensor *x, *x2, *y;
    uint64_t seed; /* dropout's mask is a function of (seed, iter, layer_index) */
    long iter;
    int layer_index;
} LayerCall;
void cpu_layer_forward(Layer *l, const LayerCall *c);
void cpu_layer_backward(Layer *l, const LayerCall *c);

/* The backend operations of backend.h that are not layers, on host memory. */
void cpu_gather(float *dst, const uint8_t *src, size_t item_size, long first, int batch, long count,
                float offset, float scale);
void cpu_sgd_update(float *data, const float *diff, float *history, size_t count, float lr, float momentum,
                    float decay);

#endif
