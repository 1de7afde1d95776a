/* A net: tensors and the layers between them, built by a model definition (models.c),
 * then allocated and run on one backend. Layers run in the order they were added. */
#ifndef TRAINER_NET_H
#define TRAINER_NET_H

#include <stdint.h>
#include "trainer/layer.h"
#include "trainer/backend.h"

#define NET_MAX_TENSORS 128
#define NET_MAX_LAYERS 128

typedef struct Net {
    char model[32];
    int batch;
    Tensor tensors[NET_MAX_TENSORS];
    char tensor_names[NET_MAX_TENSORS][24];
    int ntensors;
    Layer layers[NET_MAX_LAYERS];
    int nlayers;
    int input, label;      /* tensor indices of the data and the labels */
    int loss_layer;        /* layer index of the (last) loss layer */
    float input_scale;     /* preprocessing: (pixel - mean) * input_scale */
    int subtract_mean;
    const Backend *be;     /* NULL until net_setup */
    int train;             /* phase: dropout is active in training only */
    int input_gradient;    /* the input gets a gradient too (gradient checks); set before setup */
    uint64_t seed;         /* dropout masks are a function of (seed, iteration, layer, element) */
    long iter;
} Net;

#ifdef __cplusplus
extern "C" {
#endif

/* Building (shapes are computed here, no memory is allocated). Each returns the index of the
 * new top tensor. Kernel sizes etc. apply to height and width, and to depth when the bottom
 * has d > 1. */
Net *net_new(const char *model, int batch);
int net_add_input(Net *net, int c, int d, int h, int w, int label_spatial);
int net_add_conv(Net *net, const char *name, int bottom, int out, int kernel, int stride, int pad,
                 int group, Filler weight, Filler bias);
int net_add_deconv(Net *net, const char *name, int bottom, int out, int kernel, Filler weight);
int net_add_pool(Net *net, const char *name, int bottom, PoolMethod method, int kernel, int stride,
                 int pad);
int net_add_relu(Net *net, const char *name, int bottom, float negative_slope); /* in place */
int net_add_lrn(Net *net, const char *name, int bottom, LrnRegion region, int size, float alpha,
                float beta);
int net_add_ip(Net *net, const char *name, int bottom, int out, Filler weight, Filler bias);
int net_add_dropout(Net *net, const char *name, int bottom, float ratio); /* in place */
int net_add_concat(Net *net, const char *name, int a, int b);
int net_add_loss(Net *net, const char *name, LayerType type, int bottom); /* against net->label */
Layer *net_layer(Net *net, const char *name);
/* Whether the net works on volumes (3-D kernels), from its input's depth. */
int net_is_volumetric(const Net *net);
/* Learning-rate and decay multipliers of a layer's weight and bias (Caffe's lr_mult etc.). */
void net_set_mults(Net *net, const char *name, float w_lr, float w_decay, float b_lr, float b_decay);

/* Allocates every tensor on the backend (one allocation each), sets the layers up, and fills
 * the parameters from seed. Returns 0, or -1 with a message in err. */
int net_setup(Net *net, const Backend *be, uint64_t seed, char *err, size_t errlen);
void net_free(Net *net);

/* Forward (dropout active when net->train) and backward over all layers, queued on the backend.
 * The loss stays on the backend in the loss layer's top tensor: net_loss reads it, waiting for
 * the device. */
void net_forward(Net *net);
void net_backward(Net *net);
float net_loss(Net *net);

/* Top-1 accuracy and, when dice != NULL, the Dice score per class, of the last forward. */
float net_accuracy(Net *net, float *dice);

/* Memory the net needs, in bytes, by kind. Computed from shapes only; activations stop at
 * SIZE_MAX rather than wrap. */
typedef struct NetMemory {
    size_t activations; /* data and diff of every tensor, layer-private buffers */
    size_t params;      /* weights and biases */
    size_t gradients;
    size_t history;     /* solver momentum */
    size_t count;       /* number of allocations */
} NetMemory;
NetMemory net_memory(const Net *net);
size_t net_param_count(const Net *net);

/* Visits every learnable parameter in a fixed order. */
#define NET_FOR_EACH_PARAM(net, layer, param)                                               \
    for (Layer *layer = (net)->layers; layer < (net)->layers + (net)->nlayers; layer++)    \
        for (Param *param = &layer->weight; layer->nparams && param <= &layer->bias; param++)

#ifdef __cplusplus
}
#endif

#endif
