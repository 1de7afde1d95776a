/* The trainer's module for the simulated GPU (trainer_sim_kernels.so), opened as the
 * simulator opens it: its table holds every kernel of sim_kernel_table.h once, with a cost
 * function and the parameter layout the backend launches with; every pass of every layer
 * has a kernel; a kernel decodes its parameters; costs follow from the shapes. */
#include "sim/sim_module.h"
#include "tests/tap.h"
#include "trainer/sim_kernel_table.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const sim_module *table;

static const sim_module_kernel *kernel(const char *name)
{
    for (int i = 0; i < table->kernel_count; i++)
        if (!strcmp(table->kernels[i].name, name)) return &table->kernels[i];
    bail_out("the module has no kernel %s", name);
}

static void check_table(void)
{
    is_int(table->abi, SIM_MODULE_ABI, "the table is of ABI %d", SIM_MODULE_ABI);
    is_int(table->kernel_count, SIM_LAYER_KERNEL_COUNT + 2, "it holds the %d layer kernels, gather and sgd_update",
           SIM_LAYER_KERNEL_COUNT);
    int good = 1;
    for (int i = 0; i < SIM_LAYER_KERNEL_COUNT; i++) {
        const SimKernelSpec *spec = &sim_layer_kernels[i];
        const sim_module_kernel *k = kernel(spec->name);
        int layout = k->param_count == 1 + spec->nroles && k->param_sizes[0] == sizeof(SimLayerArgs);
        for (int p = 1; p < k->param_count; p++) layout &= k->param_sizes[p] == sizeof(CUdeviceptr);
        if (!layout || !k->fn || !k->cost) {
            diag("%s: %d parameters, function %p, cost %p", spec->name, k->param_count, (void *)k->fn,
                 (void *)k->cost);
            good = 0;
        }
        for (int j = 0; j < i; j++) good &= strcmp(sim_layer_kernels[j].name, spec->name) != 0;
    }
    ok(good, "each layer kernel, named once, takes its arguments and a pointer per role, with a cost function");
    const sim_module_kernel *gather = kernel(SIM_GATHER_KERNEL), *sgd = kernel(SIM_SGD_KERNEL);
    ok(gather->param_count == 3 && gather->param_sizes[0] == sizeof(SimGatherArgs) && gather->cost &&
           sgd->param_count == 4 && sgd->param_sizes[0] == sizeof(SimSgdArgs) && sgd->cost,
       "gather and sgd_update take their arguments and their pointers, with cost functions");
}

static void check_coverage(void)
{
    int good = 1;
    for (LayerType type = LAYER_CONV; type <= LAYER_DICE_LOSS; type++)
        for (int method = POOL_MAX; method <= (type == LAYER_POOL ? POOL_AVE : POOL_MAX); method++)
            for (int backward = 0; backward < 2; backward++) {
                Layer l = {.type = type, .p.pool.method = (PoolMethod)method};
                const SimKernelSpec *k = sim_layer_kernel(&l, backward);
                good &= k && k->type == type && k->backward == backward;
            }
    ok(good, "every layer type (and pooling method) has a forward and a backward kernel");
}

/* A launch of a layer kernel with these arguments and pointers. */
static sim_launch layer_launch(const SimLayerArgs *args, CUdeviceptr *pointers, void **params, int n)
{
    params[0] = (void *)args;
    for (int i = 0; i < n; i++) params[1 + i] = &pointers[i];
    return (sim_launch){.grid = {1, 1, 1}, .block = {256, 1, 1}, .params = params};
}

static void check_relu_runs(void)
{
    float x[4] = {-2, -1, 0.5f, 3}, y[4] = {0};
    SimLayerArgs args;
    memset(&args, 0, sizeof args);
    memcpy(args.shape[SIM_SLOT_X], (int[5]){1, 4, 1, 1, 1}, sizeof args.shape[0]);
    memcpy(args.shape[SIM_SLOT_Y], (int[5]){1, 4, 1, 1, 1}, sizeof args.shape[0]);
    args.p.relu.negative_slope = 0.5f;
    CUdeviceptr pointers[2] = {(CUdeviceptr)(uintptr_t)x, (CUdeviceptr)(uintptr_t)y}; /* X_DATA, Y_DATA */
    void *params[3];
    sim_launch launch = layer_launch(&args, pointers, params, 2);
    kernel("relu_forward")->fn(&launch);
    ok(y[0] == -1 && y[1] == -0.5f && y[2] == 0.5f && y[3] == 3, "relu_forward reads x and writes y through its pointers");
}

static void check_conv_cost(void)
{
    /* x 2x4x8x8, y 2x6x8x8, 3x3 kernels in 2 groups: weights 6x2x3x3. */
    SimLayerArgs args;
    memset(&args, 0, sizeof args);
    memcpy(args.shape[SIM_SLOT_X], (int[5]){2, 4, 1, 8, 8}, sizeof args.shape[0]);
    memcpy(args.shape[SIM_SLOT_Y], (int[5]){2, 6, 1, 8, 8}, sizeof args.shape[0]);
    memcpy(args.shape[SIM_SLOT_W], (int[5]){6, 2, 1, 3, 3}, sizeof args.shape[0]);
    memcpy(args.shape[SIM_SLOT_B], (int[5]){1, 6, 1, 1, 1}, sizeof args.shape[0]);
    args.p.conv.out = 6;
    args.p.conv.group = 2;
    CUdeviceptr pointers[SIM_MAX_ROLES] = {1, 2, 3, 4, 5};
    void *params[1 + SIM_MAX_ROLES];
    sim_launch launch = layer_launch(&args, pointers, params, 5); /* X_DATA, W_DATA, B_DATA, Y_DATA, WS_DATA */
    sim_kernel_cost cost;
    kernel("conv_forward")->cost(&launch, &cost);
    double flops = 2.0 * 2 * 6 * (4 / 2) * 3 * 3 * 8 * 8; /* 2 N K (C / group) R S P Q */
    ok(cost.flops == flops, "conv_forward: %g flops, 2 N K (C / group) R S P Q = %g", cost.flops, flops);
    ok(cost.bytes[0] == 0 && cost.bytes[1] == 512 * 4 && cost.bytes[2] == 108 * 4 && cost.bytes[3] == 6 * 4 &&
           cost.bytes[4] == 768 * 4,
       "conv_forward: bytes through x, w, b and y are theirs (%g %g %g %g)", cost.bytes[1], cost.bytes[2],
       cost.bytes[3], cost.bytes[4]);
    ok(cost.written[1] == 0 && cost.written[2] == 0 && cost.written[3] == 0 && cost.written[4] == 768 * 4,
       "conv_forward: it writes y alone (%g %g %g %g)", cost.written[1], cost.written[2], cost.written[3],
       cost.written[4]);
    ok(cost.bytes[5] == 0 && cost.written[5] == 0,
       "conv_forward: nothing priced through the workspace (cuDNN's use of it is in the fitted efficiency)");

    pointers[4] = pointers[5] = 0; /* X_DIFF, W_DATA: the bottom takes no gradient */
    pointers[6] = 7;                /* WS_DATA */
    launch = layer_launch(&args, pointers, params, 7);
    kernel("conv_backward")->cost(&launch, &cost);
    ok(cost.flops == 2 * flops && cost.bytes[5] == 0 && cost.bytes[6] == 0 && cost.bytes[7] == 0 &&
           cost.bytes[2] == 768 * 4,
       "conv_backward: twice the flops; nothing through the NULL pointers nor the workspace");
    ok(cost.written[1] == 0 && cost.written[2] == 0 && cost.written[3] == 108 * 4 && cost.written[4] == 6 * 4,
       "conv_backward: it writes the weights' and the bias's gradients, reads x and y's gradient");
}

static void check_other_costs(void)
{
    SimGatherArgs g;
    memset(&g, 0, sizeof g);
    g.item_size = 784;
    g.batch = 16;
    g.count = 4096;
    CUdeviceptr pointers[3] = {1, 2, 3};
    void *params[4] = {&g, &pointers[0], &pointers[1]};
    sim_launch launch = {.params = params};
    sim_kernel_cost cost;
    kernel(SIM_GATHER_KERNEL)->cost(&launch, &cost);
    ok(cost.bytes[1] == 16 * 784 * 4 && cost.written[1] == cost.bytes[1] && cost.bytes[2] == 16 * 784 &&
           cost.written[2] == 0,
       "gather: a batch of floats written, of bytes read");

    SimSgdArgs s;
    memset(&s, 0, sizeof s);
    s.count = 1000;
    params[0] = &s;
    params[3] = &pointers[2];
    kernel(SIM_SGD_KERNEL)->cost(&launch, &cost);
    ok(cost.flops > 0 && cost.bytes[1] == 8000 && cost.bytes[2] == 4000 && cost.bytes[3] == 8000 &&
           cost.written[1] == 4000 && cost.written[2] == 0 && cost.written[3] == 4000,
       "sgd_update: weights and history read and written, gradient read");
}

int main(void)
{
    const char *build = getenv("LMS_BUILD_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/trainer/trainer_sim_kernels.so", build ? build : "build");
    void *object = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!object) bail_out("cannot open %s: %s", path, dlerror());
    if (!(table = dlsym(object, SIM_MODULE_SYMBOL))) bail_out("%s exports no %s", path, SIM_MODULE_SYMBOL);
    plan(14);
    check_table();
    check_coverage();
    check_relu_runs();
    check_conv_cost();
    check_other_costs();
    dlclose(object);
    return exit_status();
}
