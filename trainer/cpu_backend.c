/* The CPU backend: host memory and the reference layers of cpu_layers.h. */
#include "trainer/backend.h"
#include "trainer/cpu_layers.h"
#include "trainer/net.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Filled with NaN rather than left as malloc's bytes: a layer that read a buffer before writing
 * it would show in every loss (and in the --sim run's, which must equal these digit for digit),
 * as it might go unnoticed on a GPU, whose fresh memory is often zero. */
static float *cpu_alloc(size_t count)
{
    float *p = malloc((count ? count : 1) * sizeof(float));
    for (size_t i = 0; p && i < count; i++) p[i] = NAN;
    return p;
}

static void cpu_zero(float *p, size_t count)
{
    memset(p, 0, count * sizeof(float));
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

/* The layer's tensors in the net, and where dropout's mask comes from. */
static LayerCall layer_call(Net *net, Layer *l)
{
    return (LayerCall){.x = &net->tensors[l->bottom[0]],
                       .x2 = l->nbottom > 1 ? &net->tensors[l->bottom[1]] : NULL,
                       .y = &net->tensors[l->top],
                       .seed = net->seed,
                       .iter = net->iter,
                       .layer_index = (int)(l - net->layers)};
}

static void cpu_forward(Net *net, Layer *l)
{
    if (l->type == LAYER_DROPOUT && !net->train) return; /* in place: the identity */
    LayerCall c = layer_call(net, l);
    cpu_layer_forward(l, &c);
}

static void cpu_backward(Net *net, Layer *l)
{
    LayerCall c = layer_call(net, l);
    cpu_layer_backward(l, &c);
}

static void cpu_sgd(Param *p, float lr, float momentum, float decay)
{
    cpu_sgd_update(p->t.data, p->t.diff, p->history, tensor_count(&p->t), lr, momentum, decay);
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
    .zero = cpu_zero,
    .upload = cpu_copy,
    .download = cpu_copy,
    .upload_bytes = cpu_upload_bytes,
    .release_bytes = cpu_release_bytes,
    .gather = cpu_gather,
    .forward = cpu_forward,
    .backward = cpu_backward,
    .sgd_update = cpu_sgd,
    .synchronize = cpu_synchronize,
    .seconds = cpu_seconds,
};
