/* The trainer's module for the simulated GPU (trainer_sim_kernels.so): the kernels of
 * sim_kernel_table.h, each a host function that rebuilds the layer from its parameters and
 * runs the CPU reference (cpu_layers.h), so that no arithmetic is written twice. The
 * simulator runs them on its stream threads and prices them with the cost functions: the
 * operations and the bytes through each pointer, estimated from the shapes. */
#include "sim/sim_module.h"
#include "trainer/cpu_layers.h"
#include "trainer/sim_kernel_table.h"

#include <string.h>

/* Parameter i of a launch when it is a device pointer. */
static void *pointer_param(const sim_launch *launch, int i)
{
    CUdeviceptr p;
    memcpy(&p, launch->params[i], sizeof p);
    return (void *)(uintptr_t)p;
}

static double shape_count(const int shape[5])
{
    return (double)shape[0] * shape[1] * shape[2] * shape[3] * shape[4];
}

static Tensor slot_tensor(const SimLayerArgs *a, int slot)
{
    const int *s = a->shape[slot];
    return (Tensor){.n = s[0], .c = s[1], .d = s[2], .h = s[3], .w = s[4]};
}

static void run_layer(const sim_launch *launch, const SimKernelSpec *k)
{
    const SimLayerArgs *a = launch->params[0];
    Tensor t[SIM_SLOTS];
    for (int s = 0; s < SIM_SLOTS; s++) t[s] = slot_tensor(a, s);
    for (int i = 0; i < k->nroles; i++) {
        Tensor *slot = &t[SIM_ROLE_SLOT(k->roles[i])];
        *(SIM_ROLE_IS_DIFF(k->roles[i]) ? &slot->diff : &slot->data) = pointer_param(launch, 1 + i);
    }
    Layer l = {.type = k->type, .p = a->p, .loss_weight = a->loss_weight};
    memcpy(l.accumulate, a->accumulate, sizeof l.accumulate);
    l.weight.t = t[SIM_SLOT_W];
    l.bias.t = t[SIM_SLOT_B];
    l.aux = t[SIM_SLOT_AUX];
    LayerCall c = {.x = &t[SIM_SLOT_X], .x2 = &t[SIM_SLOT_X2], .y = &t[SIM_SLOT_Y],
                   .seed = a->seed, .iter = a->iter, .layer_index = a->layer_index};
    if (k->backward) cpu_layer_backward(&l, &c);
    else cpu_layer_forward(&l, &c);
}

static double window_volume(const Window *w)
{
    return (double)w->kernel[0] * w->kernel[1] * w->kernel[2];
}

/* Floating-point operations of a layer's forward pass, from its shapes. */
static double forward_flops(LayerType type, const SimLayerArgs *a)
{
    double x = shape_count(a->shape[SIM_SLOT_X]), y = shape_count(a->shape[SIM_SLOT_Y]);
    double w = shape_count(a->shape[SIM_SLOT_W]);
    double per_filter = a->shape[SIM_SLOT_W][0] ? w / a->shape[SIM_SLOT_W][0] : 0;
    switch (type) {
    case LAYER_CONV: return 2 * y * per_filter; /* 2 N K (C / group) R S P Q */
    case LAYER_DECONV: return 2 * x * per_filter; /* each input spreads over out * R S outputs */
    case LAYER_IP: return 2 * a->shape[SIM_SLOT_X][0] * w;
    case LAYER_POOL: return y * window_volume(&a->p.pool.win);
    case LAYER_LRN: {
        int size = a->p.lrn.size, volumetric = a->shape[SIM_SLOT_X][2] > 1;
        double window = a->p.lrn.region == LRN_ACROSS_CHANNELS ? size
                        : volumetric                            ? (double)size * size * size
                                                                : (double)size * size;
        return x * (2 * window + 10); /* the window's squares, then a power */
    }
    case LAYER_SOFTMAX_LOSS:
    case LAYER_DICE_LOSS: return 10 * x; /* exponentials and sums */
    case LAYER_CONCAT: return 0;
    case LAYER_RELU:
    case LAYER_DROPOUT: return x;
    }
    return 0;
}

/* Whether a pass writes through a role: forward its top and its private buffer, backward the
 * gradients of its bottoms and weights (the rest it reads). */
static int writes(const SimKernelSpec *k, int role)
{
    int slot = SIM_ROLE_SLOT(role);
    if (!k->backward)
        return slot == SIM_SLOT_Y || slot == SIM_SLOT_AUX;
    return SIM_ROLE_IS_DIFF(role) && slot != SIM_SLOT_Y && slot != SIM_SLOT_AUX;
}

static void cost_layer(const sim_launch *launch, sim_kernel_cost *cost, const SimKernelSpec *k)
{
    const SimLayerArgs *a = launch->params[0];
    memset(cost, 0, sizeof *cost);
    /* Backward of the layers with weights computes two gradients, each a forward's worth. */
    int twice = k->backward && (k->type == LAYER_CONV || k->type == LAYER_DECONV || k->type == LAYER_IP ||
                                k->type == LAYER_LRN);
    cost->flops = forward_flops(k->type, a) * (twice ? 2 : 1);
    for (int i = 0; i < k->nroles; i++) {
        int role = k->roles[i] & SIM_ROLE_MASK;
        if (!pointer_param(launch, 1 + i)) continue;
        /* cuDNN's traffic through its workspace is in the efficiency the kernels are fitted with. */
        if (role == WS_DATA) {
            cost->extent[1 + i] = (double)a->workspace_bytes;
            continue;
        }
        double values = role == AUX_DIFF ? 2.0 * a->shape[SIM_SLOT_AUX][1]
                                         : shape_count(a->shape[SIM_ROLE_SLOT(role)]);
        cost->extent[1 + i] = values * sizeof(float);
        cost->bytes[1 + i] = values * sizeof(float);
        cost->written[1 + i] = writes(k, role) ? cost->bytes[1 + i] : 0;
    }
}

#define SIM_KERNEL_FUNCTIONS(kernel, ...)                                                          \
    static void kernel##_run(const sim_launch *launch)                                            \
    {                                                                                             \
        run_layer(launch, &sim_layer_kernels[SIM_KERNEL_##kernel]);                                \
    }                                                                                             \
    static void kernel##_cost(const sim_launch *launch, sim_kernel_cost *cost)                    \
    {                                                                                             \
        cost_layer(launch, cost, &sim_layer_kernels[SIM_KERNEL_##kernel]);                         \
    }
SIM_LAYER_KERNELS(SIM_KERNEL_FUNCTIONS)
#undef SIM_KERNEL_FUNCTIONS

static void gather_run(const sim_launch *launch)
{
    const SimGatherArgs *a = launch->params[0];
    cpu_gather(pointer_param(launch, 1), pointer_param(launch, 2), a->item_size, a->first, a->batch, a->count,
               a->offset, a->scale);
}

static void gather_cost(const sim_launch *launch, sim_kernel_cost *cost)
{
    const SimGatherArgs *a = launch->params[0];
    double values = (double)a->batch * a->item_size;
    memset(cost, 0, sizeof *cost);
    cost->flops = 2 * values;
    cost->bytes[1] = cost->written[1] = cost->extent[1] = values * sizeof(float);
    cost->bytes[2] = values;
    /* The items from the first, wrapping round to the source's start past its count. */
    cost->extent[2] = (double)(a->first + a->batch < a->count ? a->first + a->batch : a->count) * a->item_size;
}

static void sgd_run(const sim_launch *launch)
{
    const SimSgdArgs *a = launch->params[0];
    cpu_sgd_update(pointer_param(launch, 1), pointer_param(launch, 2), pointer_param(launch, 3), a->count, a->lr,
                   a->momentum, a->decay);
}

static void sgd_cost(const sim_launch *launch, sim_kernel_cost *cost)
{
    const SimSgdArgs *a = launch->params[0];
    double bytes = (double)a->count * sizeof(float);
    memset(cost, 0, sizeof *cost);
    cost->flops = 6.0 * a->count;
    cost->bytes[1] = 2 * bytes; /* data: read and written */
    cost->bytes[2] = bytes;
    cost->bytes[3] = 2 * bytes; /* history: read and written */
    cost->written[1] = cost->written[3] = bytes;
    cost->extent[1] = cost->extent[2] = cost->extent[3] = bytes;
}

#define P sizeof(CUdeviceptr)
static const size_t layer_params[1 + SIM_MAX_ROLES] = {sizeof(SimLayerArgs), P, P, P, P, P, P, P};
static const size_t gather_params[] = {sizeof(SimGatherArgs), P, P};
static const size_t sgd_params[] = {sizeof(SimSgdArgs), P, P, P};
#undef P

#define SIM_KERNEL_ENTRY(kernel, layer_type, is_backward, pool_method, ...)                        \
    {#kernel, kernel##_run, 1 + SIM_COUNT_ROLES(__VA_ARGS__), layer_params, kernel##_cost},
static const sim_module_kernel kernels[] = {
    SIM_LAYER_KERNELS(SIM_KERNEL_ENTRY)
    {SIM_GATHER_KERNEL, gather_run, 3, gather_params, gather_cost},
    {SIM_SGD_KERNEL, sgd_run, 4, sgd_params, sgd_cost},
};
#undef SIM_KERNEL_ENTRY

const sim_module sim_module_table = { /* SIM_MODULE_SYMBOL */
    .abi = SIM_MODULE_ABI,
    .kernel_count = sizeof kernels / sizeof *kernels,
    .kernels = kernels,
};
