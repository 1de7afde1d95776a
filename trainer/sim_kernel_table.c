/* The layer kernels of sim_kernel_table.h, as data. */
#include "trainer/sim_kernel_table.h"

#include <stddef.h>

#define SIM_KERNEL_SPEC(kernel, layer_type, is_backward, pool_method, ...)                          \
    [SIM_KERNEL_##kernel] = {.name = #kernel, .type = layer_type, .backward = is_backward,          \
                             .method = pool_method,                                               \
                             .nroles = SIM_COUNT_ROLES(__VA_ARGS__),                               \
                             .roles = {__VA_ARGS__}},
const SimKernelSpec sim_layer_kernels[SIM_LAYER_KERNEL_COUNT] = {SIM_LAYER_KERNELS(SIM_KERNEL_SPEC)};
#undef SIM_KERNEL_SPEC

const SimKernelSpec *sim_layer_kernel(const Layer *l, int backward)
{
    for (const SimKernelSpec *k = sim_layer_kernels; k < sim_layer_kernels + SIM_LAYER_KERNEL_COUNT; k++)
        if (k->type == l->type && k->backward == backward &&
            (k->method == SIM_ANY_METHOD || k->method == (int)l->p.pool.method))
            return k;
    return NULL; /* every type has both passes in the table */
}
