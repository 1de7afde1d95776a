/* Layers: what each one computes, its hyper-parameters and its learnable parameters.
 * The arithmetic lives in the backends: cpu_layers.h (the reference) and gpu_backend.h. */
#ifndef TRAINER_LAYER_H
#define TRAINER_LAYER_H

#include <stdint.h>
#include "trainer/tensor.h"

typedef enum LayerType {
    LAYER_CONV,         /* convolution, 2-D or 3-D, grouped, with bias */
    LAYER_DECONV,       /* transposed convolution (learned up-sampling), kernel == stride */
    LAYER_POOL,         /* max or average pooling, output size rounded up as Caffe does */
    LAYER_RELU,         /* rectifier, leaky when negative_slope != 0; may run in place */
    LAYER_LRN,          /* local response normalisation, within or across channels */
    LAYER_IP,           /* inner product (fully connected) */
    LAYER_DROPOUT,      /* inverted dropout, train phase only; may run in place */
    LAYER_CONCAT,       /* concatenation of two tensors along channels */
    LAYER_SOFTMAX_LOSS, /* softmax over channels + mean cross-entropy; also gives accuracy */
    LAYER_DICE_LOSS,    /* softmax over channels + soft Dice loss (1 - mean Dice over classes) */
} LayerType;

typedef enum FillerType { FILL_CONSTANT, FILL_GAUSSIAN, FILL_XAVIER, FILL_MSRA } FillerType;

typedef struct Filler {
    FillerType type;
    float value; /* FILL_CONSTANT: the value; FILL_GAUSSIAN: the standard deviation */
} Filler;

/* A learnable parameter: weights in t.data, their gradient in t.diff, and the momentum
 * history of the solver. */
typedef struct Param {
    Tensor t;
    float *history;
    float lr_mult, decay_mult;
    Filler filler;
} Param;

typedef enum PoolMethod { POOL_MAX, POOL_AVE } PoolMethod;
typedef enum LrnRegion { LRN_ACROSS_CHANNELS, LRN_WITHIN_CHANNEL } LrnRegion;

typedef struct Window { /* a kernel's geometry along depth, height and width */
    int kernel[3], stride[3], pad[3];
} Window;

#ifdef __cplusplus
extern "C" {
#endif

#define LAYER_MAX_BOTTOMS 2

/* Hyper-parameters, by layer type: plain values, so that a backend can pass them by value. */
typedef union LayerParams {
    struct { int out, group; Window win; } conv;   /* CONV and DECONV */
    struct { PoolMethod method; Window win; } pool;
    struct { float negative_slope; } relu;
    struct { LrnRegion region; int size; float alpha, beta, k; } lrn;
    struct { int out; } ip;
    struct { float ratio; } dropout;
} LayerParams;

typedef struct Layer {
    LayerType type;
    char name[24];
    int bottom[LAYER_MAX_BOTTOMS], nbottom; /* indices into net->tensors */
    int top;                                /* == bottom[0] when in place */
    /* Backward adds to this bottom's diff instead of overwriting it: the tensor feeds several
     * layers and another one wrote its diff first. */
    int accumulate[LAYER_MAX_BOTTOMS];
    LayerParams p;
    Param weight, bias;   /* used by CONV, DECONV and IP */
    int nparams;          /* 0 or 2 */
    Tensor aux;           /* private state kept for backward: LRN scale, max pooling's argmax
                             (int32 indices within the channel, in float-sized slots), softmax
                             probabilities; its diff holds per-class Dice terms for DICE_LOSS */
    float loss_weight;    /* loss layers only */
    void *backend_state;  /* descriptors and algorithms of the GPU backend */
} Layer;

const char *layer_type_name(LayerType type);

#ifdef __cplusplus
}
#endif

#endif
