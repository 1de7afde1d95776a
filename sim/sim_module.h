/* A module for the simulated GPU: what a cubin is to the real driver.
 *
 * On the simulated GPU a module is a host shared object. cuModuleLoad(path) (or
 * cuModuleLoadData with the path as its image, or cuLibraryLoadFromFile) dlopens it and reads
 * the table it exports under the name SIM_MODULE_SYMBOL; cuModuleGetFunction and
 * cuLibraryGetKernel then hand out handles to the kernels the table names. A kernel is a
 * host function run on the stream's worker thread, with its parameters laid out as its
 * sizes say (C alignment rules, as sim.h describes for registered kernels).
 *
 * The cost function tells the timing model what a launch costs: its floating-point
 * operations, and the bytes it reads and writes through each pointer parameter, so that bytes
 * in host-located memory can be priced at the zero-copy rate, each in its direction; and the
 * span each pointer reaches, which the simulator checks where the GPU would fault. It is
 * called on the host at launch with the launch's parameters; it must not touch device memory
 * (in timing-only mode nothing is ever there). NULL prices the kernel as an empty launch.
 *
 * A module knows nothing of liblms, and the simulator nothing of any module's contents. */
#ifndef LMS_SIM_MODULE_H
#define LMS_SIM_MODULE_H

#include "sim/sim.h"

#include <stddef.h>

/* A module defines its table as `const sim_module sim_module_table = {SIM_MODULE_ABI, ...};`
 * (extern "C" in C++). The name is not the type's: C and C++ refuse a variable named like a
 * typedef in the same scope. */
#define SIM_MODULE_SYMBOL "sim_module_table"
#define SIM_MODULE_ABI 3
#define SIM_MAX_KERNEL_PARAMS 32

typedef struct sim_kernel_cost {
    double flops;                          /* fp32 operations */
    double bytes[SIM_MAX_KERNEL_PARAMS];   /* bytes read and written through parameter i */
    double written[SIM_MAX_KERNEL_PARAMS]; /* of those, the bytes written: in host memory they
                                              cross the link away from the device, the rest
                                              towards it */
    double extent[SIM_MAX_KERNEL_PARAMS];  /* the span parameter i reaches, from the pointer:
                                              when the kernel's turn comes, all of it must be
                                              memory the kernel may touch, or it faults as on
                                              the GPU (an allocation's later handles, unmapped
                                              while the kernel was queued); 0: its first byte */
} sim_kernel_cost;

typedef void (*sim_cost_fn)(const sim_launch *launch, sim_kernel_cost *cost);

typedef struct sim_module_kernel {
    const char *name;
    sim_kernel_fn fn;
    int param_count;                       /* at most SIM_MAX_KERNEL_PARAMS */
    const size_t *param_sizes;
    sim_cost_fn cost;
} sim_module_kernel;

typedef struct sim_module {
    unsigned abi;                          /* SIM_MODULE_ABI */
    int kernel_count;
    const sim_module_kernel *kernels;
} sim_module;

#endif
