/* The kernels of the trainer's module for the simulated GPU, and their parameters: the
 * contract between the backend that launches them (sim_backend.c) and the module that runs
 * them (sim_kernels.c, built as trainer_sim_kernels.so; see sim/sim_module.h).
 *
 * Every kernel takes a by-value struct of shapes and hyper-parameters, then the device
 * pointers it touches, and nothing else: liblms scans launch parameters for pointers into
 * its allocations and makes each one it finds resident for the call, so a pointer passed
 * without need would only inflate what must fit.
 *
 *   layer kernels:  (SimLayerArgs, float *...)    the pointers their table entry lists
 *   gather:         (SimGatherArgs, float *dst, const uint8_t *src)
 *   sgd_update:     (SimSgdArgs, float *data, const float *diff, float *history) */
#ifndef TRAINER_SIM_KERNEL_TABLE_H
#define TRAINER_SIM_KERNEL_TABLE_H

#include <stdint.h>
#include "trainer/layer.h"

/* The tensors a layer kernel may see: bottom, second bottom, top, weights, bias, the
 * layer's private buffer (layer.h's aux: max pooling's argmax, LRN's scale, the softmax) and
 * the convolutions' workspace, one the backend keeps for them all as the GPU backend keeps
 * cuDNN's (no shape: the kernels here need none of it). A role is a slot's data or diff. */
enum { SIM_SLOT_X, SIM_SLOT_X2, SIM_SLOT_Y, SIM_SLOT_W, SIM_SLOT_B, SIM_SLOT_AUX, SIM_SLOT_WS, SIM_SLOTS };
#define SIM_DATA(slot) (2 * (slot))
#define SIM_DIFF(slot) (2 * (slot) + 1)
#define SIM_ROLE_SLOT(role) (((role) & SIM_ROLE_MASK) / 2)
#define SIM_ROLE_IS_DIFF(role) ((role) & 1)
#define SIM_ROLE_MASK 0xff
/* Flag: the pointer is passed only when the bottom has a diff (NULL otherwise), for what
 * only the gradient with respect to the bottom reads. */
#define SIM_IF_X_DIFF 0x100

#define X_DATA SIM_DATA(SIM_SLOT_X)
#define X_DIFF SIM_DIFF(SIM_SLOT_X)
#define X2_DATA SIM_DATA(SIM_SLOT_X2)
#define X2_DIFF SIM_DIFF(SIM_SLOT_X2)
#define Y_DATA SIM_DATA(SIM_SLOT_Y)
#define Y_DIFF SIM_DIFF(SIM_SLOT_Y)
#define W_DATA SIM_DATA(SIM_SLOT_W)
#define W_DIFF SIM_DIFF(SIM_SLOT_W)
#define B_DATA SIM_DATA(SIM_SLOT_B)
#define B_DIFF SIM_DIFF(SIM_SLOT_B)
#define AUX_DATA SIM_DATA(SIM_SLOT_AUX)
#define AUX_DIFF SIM_DIFF(SIM_SLOT_AUX) /* the Dice loss's per-class sums (2 per class) */
#define WS_DATA SIM_DATA(SIM_SLOT_WS)

#define SIM_ANY_METHOD (-1)

/* K(name, layer type, backward, pooling method or SIM_ANY_METHOD, pointer roles...): what
 * each pass of each layer reads and writes, as the reference layers of cpu_layers.h do. */
#define SIM_LAYER_KERNELS(K)                                                                           \
    K(conv_forward, LAYER_CONV, 0, SIM_ANY_METHOD, X_DATA, W_DATA, B_DATA, Y_DATA, WS_DATA)            \
    K(conv_backward, LAYER_CONV, 1, SIM_ANY_METHOD, X_DATA, Y_DIFF, W_DIFF, B_DIFF, X_DIFF,            \
      W_DATA | SIM_IF_X_DIFF, WS_DATA)                                                                 \
    K(deconv_forward, LAYER_DECONV, 0, SIM_ANY_METHOD, X_DATA, W_DATA, B_DATA, Y_DATA, WS_DATA)        \
    K(deconv_backward, LAYER_DECONV, 1, SIM_ANY_METHOD, X_DATA, Y_DIFF, W_DIFF, B_DIFF, X_DIFF,        \
      W_DATA | SIM_IF_X_DIFF, WS_DATA)                                                                 \
    K(max_pool_forward, LAYER_POOL, 0, POOL_MAX, X_DATA, AUX_DATA, Y_DATA)                             \
    K(max_pool_backward, LAYER_POOL, 1, POOL_MAX, Y_DIFF, AUX_DATA, X_DIFF)                            \
    K(ave_pool_forward, LAYER_POOL, 0, POOL_AVE, X_DATA, Y_DATA)                                       \
    K(ave_pool_backward, LAYER_POOL, 1, POOL_AVE, Y_DIFF, X_DIFF)                                      \
    K(relu_forward, LAYER_RELU, 0, SIM_ANY_METHOD, X_DATA, Y_DATA)                                     \
    K(relu_backward, LAYER_RELU, 1, SIM_ANY_METHOD, Y_DATA, Y_DIFF, X_DIFF)                            \
    K(lrn_forward, LAYER_LRN, 0, SIM_ANY_METHOD, X_DATA, AUX_DATA, Y_DATA)                             \
    K(lrn_backward, LAYER_LRN, 1, SIM_ANY_METHOD, X_DATA, Y_DATA, Y_DIFF, AUX_DATA, X_DIFF)            \
    K(ip_forward, LAYER_IP, 0, SIM_ANY_METHOD, X_DATA, W_DATA, B_DATA, Y_DATA)                         \
    K(ip_backward, LAYER_IP, 1, SIM_ANY_METHOD, X_DATA, Y_DIFF, W_DIFF, B_DIFF, X_DIFF,                \
      W_DATA | SIM_IF_X_DIFF)                                                                          \
    K(dropout_forward, LAYER_DROPOUT, 0, SIM_ANY_METHOD, X_DATA, Y_DATA)                               \
    K(dropout_backward, LAYER_DROPOUT, 1, SIM_ANY_METHOD, Y_DIFF, X_DIFF)                              \
    K(concat_forward, LAYER_CONCAT, 0, SIM_ANY_METHOD, X_DATA, X2_DATA, Y_DATA)                        \
    K(concat_backward, LAYER_CONCAT, 1, SIM_ANY_METHOD, Y_DIFF, X_DIFF, X2_DIFF)                       \
    K(softmax_loss_forward, LAYER_SOFTMAX_LOSS, 0, SIM_ANY_METHOD, X_DATA, X2_DATA, AUX_DATA, Y_DATA)  \
    K(softmax_loss_backward, LAYER_SOFTMAX_LOSS, 1, SIM_ANY_METHOD, AUX_DATA, X2_DATA, X_DIFF)         \
    K(dice_loss_forward, LAYER_DICE_LOSS, 0, SIM_ANY_METHOD, X_DATA, X2_DATA, AUX_DATA, AUX_DIFF,      \
      Y_DATA)                                                                                          \
    K(dice_loss_backward, LAYER_DICE_LOSS, 1, SIM_ANY_METHOD, AUX_DATA, AUX_DIFF, X2_DATA, X_DIFF)

#define SIM_MAX_ROLES 7
#define SIM_COUNT_ROLES(...) (sizeof((int[]){__VA_ARGS__}) / sizeof(int))

typedef struct SimKernelSpec {
    const char *name;
    LayerType type;
    int backward;
    int method; /* pooling: the method it implements */
    int nroles;
    int roles[SIM_MAX_ROLES];
} SimKernelSpec;

enum {
#define SIM_KERNEL_ENUM(name, ...) SIM_KERNEL_##name,
    SIM_LAYER_KERNELS(SIM_KERNEL_ENUM)
#undef SIM_KERNEL_ENUM
    SIM_LAYER_KERNEL_COUNT
};

extern const SimKernelSpec sim_layer_kernels[SIM_LAYER_KERNEL_COUNT];

/* The kernel of a layer's forward or backward pass. */
const SimKernelSpec *sim_layer_kernel(const Layer *l, int backward);

/* The by-value parameters, zeroed before they are filled so that no stale bytes reach the
 * launch scan. */
typedef struct SimLayerArgs {
    int shape[SIM_SLOTS][5]; /* n, c, d, h, w of each slot; zeros for a slot the layer lacks */
    uint64_t workspace_bytes; /* of the workspace slot, a buffer of bytes */
    LayerParams p;
    int accumulate[LAYER_MAX_BOTTOMS];
    float loss_weight;
    int layer_index;
    uint64_t seed;
    int64_t iter;
} SimLayerArgs;

#define SIM_GATHER_KERNEL "gather"
typedef struct SimGatherArgs { /* backend.h's gather */
    uint64_t item_size;
    int64_t first, count;
    int batch;
    float offset, scale;
} SimGatherArgs;

#define SIM_SGD_KERNEL "sgd_update"
typedef struct SimSgdArgs {
    uint64_t count;
    float lr, momentum, decay;
} SimSgdArgs;

#endif
