/* The reference layers dispatched on their type, the batch gather and the SGD step: one copy
 * of the arithmetic for the CPU backend and for the simulated GPU's kernels. */
#include "trainer/cpu_layers.h"

void cpu_layer_forward(Layer *l, const LayerCall *c)
{
    switch (l->type) {
    case LAYER_CONV: cpu_conv_forward(l, c->x, c->y); break;
    case LAYER_DECONV: cpu_deconv_forward(l, c->x, c->y); break;
    case LAYER_POOL: cpu_pool_forward(l, c->x, c->y); break;
    case LAYER_RELU: cpu_relu_forward(l, c->x, c->y); break;
    case LAYER_LRN: cpu_lrn_forward(l, c->x, c->y); break;
    case LAYER_IP: cpu_ip_forward(l, c->x, c->y); break;
    case LAYER_DROPOUT: cpu_dropout_forward(l, c->seed, c->iter, c->layer_index, c->x, c->y); break;
    case LAYER_CONCAT: cpu_concat_forward(l, c->x, c->x2, c->y); break;
    case LAYER_SOFTMAX_LOSS: cpu_softmax_loss_forward(l, c->x, c->x2, c->y); break;
    case LAYER_DICE_LOSS: cpu_dice_loss_forward(l, c->x, c->x2, c->y); break;
    }
}

void cpu_layer_backward(Layer *l, const LayerCall *c)
{
    switch (l->type) {
    case LAYER_CONV: cpu_conv_backward(l, c->x, c->y); break;
    case LAYER_DECONV: cpu_deconv_backward(l, c->x, c->y); break;
    case LAYER_POOL: cpu_pool_backward(l, c->x, c->y); break;
    case LAYER_RELU: cpu_relu_backward(l, c->x, c->y); break;
    case LAYER_LRN: cpu_lrn_backward(l, c->x, c->y); break;
    case LAYER_IP: cpu_ip_backward(l, c->x, c->y); break;
    case LAYER_DROPOUT: cpu_dropout_backward(l, c->seed, c->iter, c->layer_index, c->x, c->y); break;
    case LAYER_CONCAT: cpu_concat_backward(l, c->x, c->x2, c->y); break;
    case LAYER_SOFTMAX_LOSS: cpu_softmax_loss_backward(l, c->x, c->x2); break;
    case LAYER_DICE_LOSS: cpu_dice_loss_backward(l, c->x, c->x2); break;
    }
}

void cpu_gather(float *dst, const uint8_t *src, size_t item_size, long first, int batch, long count,
                float offset, float scale)
{
    for (int b = 0; b < batch; b++) {
        const uint8_t *item = src + (size_t)((first + b) % count) * item_size;
        for (size_t i = 0; i < item_size; i++) dst[b * item_size + i] = (item[i] - offset) * scale;
    }
}

void cpu_sgd_update(float *data, const float *diff, float *history, size_t count, float lr, float momentum,
                    float decay)
{
    for (size_t i = 0; i < count; i++) {
        history[i] = momentum * history[i] + lr * (diff[i] + decay * data[i]);
        data[i] -= history[i];
    }
}
