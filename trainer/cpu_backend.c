/* The CPU backend: host memory and the reference layers of cpu_layers.h. */
#include "trainer/backend.h"
#include "trainer/cpu_layers.h"
#include "trainer/net.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static float *cpu_alloc(size_t count)
{
    return calloc(count ? count : 1, sizeof(float));
}

static void cpu_release(float *p)
{
    free(p);
}

static void cpu_copy(float *dst, const float *src, size_t count)
{
    memcpy(dst, src, count * sizeof(float));
}

static uint8_t *cpu_upload_bytes(const uint8_t *host, size_t bytes)
{
    uint8_t *p = malloc(bytes ? bytes : 1);
    if (p) memcpy(p, host, bytes);
    return p;
}

static void cpu_release_bytes(uint8_t *p)
{
    free(p);
}

static void cpu_gather(float *dst, const uint8_t *src, size_t item_size, long first, int batch, long count,
                       float offset, float scale)
{
    for (int b = 0; b < batch; b++) {
        const uint8_t *item = src + (size_t)((first + b) % count) * item_size;
        for (size_t i = 0; i < item_size; i++) dst[b * item_size + i] = (item[i] - offset) * scale;
    }
}

static void cpu_forward(Net *net, Layer *l)
{
    Tensor *x = &net->tensors[l->bottom[0]], *y = &net->tensors[l->top];
    int index = (int)(l - net->layers);
    switch (l->type) {
    case LAYER_CONV: cpu_conv_forward(l, x, y); break;
    case LAYER_DECONV: cpu_deconv_forward(l, x, y); break;
    case LAYER_POOL: cpu_pool_forward(l, x, y); break;
    case LAYER_RELU: cpu_relu_forward(l, x, y); break;
    case LAYER_LRN: cpu_lrn_forward(l, x, y); break;
    case LAYER_IP: cpu_ip_forward(l, x, y); break;
    case LAYER_DROPOUT:
        if (net->train) cpu_dropout_forward(l, net->seed, net->iter, index, x, y);
        break;
    case LAYER_CONCAT: cpu_concat_forward(l, x, &net->tensors[l->bottom[1]], y); break;
    case LAYER_SOFTMAX_LOSS: cpu_softmax_loss_forward(l, x, &net->tensors[l->bottom[1]], y); break;
    case LAYER_DICE_LOSS: cpu_dice_loss_forward(l, x, &net->tensors[l->bottom[1]], y); break;
    }
}

static void cpu_backward(Net *net, Layer *l)
{
    Tensor *x = &net->tensors[l->bottom[0]], *y = &net->tensors[l->top];
    int index = (int)(l - net->layers);
    switch (l->type) {
    case LAYER_CONV: cpu_conv_backward(l, x, y); break;
    case LAYER_DECONV: cpu_deconv_backward(l, x, y); break;
    case LAYER_POOL: cpu_pool_backward(l, x, y); break;
    case LAYER_RELU: cpu_relu_backward(l, x, y); break;
    case LAYER_LRN: cpu_lrn_backward(l, x, y); break;
    case LAYER_IP: cpu_ip_backward(l, x, y); break;
    case LAYER_DROPOUT: cpu_dropout_backward(l, net->seed, net->iter, index, x, y); break;
    case LAYER_CONCAT: cpu_concat_backward(l, x, &net->tensors[l->bottom[1]], y); break;
    case LAYER_SOFTMAX_LOSS: cpu_softmax_loss_backward(l, x, &net->tensors[l->bottom[1]]); break;
    case LAYER_DICE_LOSS: cpu_dice_loss_backward(l, x, &net->tensors[l->bottom[1]]); break;
    }
}

static void cpu_sgd_update(Param *p, float lr, float momentum, float decay)
{
    float *w = p->t.data, *g = p->t.diff, *h = p->history;
    for (size_t i = 0; i < tensor_count(&p->t); i++) {
        h[i] = momentum * h[i] + lr * (g[i] + decay * w[i]);
        w[i] -= h[i];
    }
}

static void cpu_synchronize(void)
{
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

const Backend cpu_backend = {
    .name = "CPU",
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .upload_bytes = cpu_upload_bytes,
    .release_bytes = cpu_release_bytes,
    .gather = cpu_gather,
    .forward = cpu_forward,
    .backward = cpu_backward,
    .sgd_update = cpu_sgd_update,
    .synchronize = cpu_synchronize,
    .seconds = cpu_seconds,
};
