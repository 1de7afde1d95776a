/* The simulated GPU's driver (sim/), reached as cudart reaches the NVIDIA driver:
 * dlopen("libcuda.so.1"), dlsym of cuGetProcAddress_v2, then cuGetProcAddress_v2 for every
 * entry point. A library preloaded to intercept the driver hands out its wrappers on that
 * path exactly as it does to cudart.
 *
 * The simulator has to be the process's one libcuda.so.1, so that such a library and the
 * trainer talk to the same driver, and the library loads it before main. So the loader must
 * find the simulator first from the start: sim_driver_prepare re-executes the trainer with
 * the simulator's directory leading LD_LIBRARY_PATH, unless it already leads it or the
 * simulator is already loaded (lms-run --sim sets LD_LIBRARY_PATH before the program
 * starts). A libcuda.so.1 other than the simulator already loaded (the NVIDIA driver, loaded
 * by a preloaded library) cannot be replaced: re-executing would leave behind what that
 * library did at start-up (a trace file, say), so the trainer refuses.
 *
 * Where things are (D is the directory of the trainer's executable), as lms-run finds them:
 *   the simulator's libcuda.so.1: $LMS_SIM_DIR, else D/../lib/liblms/sim (installed), else
 *                                 D/../sim (the build tree)
 *   the trainer's kernel module:  D/../lib/liblms/trainer_sim_kernels.so, else
 *                                 D/trainer_sim_kernels.so */
#ifndef TRAINER_SIM_DRIVER_H
#define TRAINER_SIM_DRIVER_H

#include <cuda.h>
#include <stddef.h>

/* The entry points the trainer uses. In the table below each is named as cuda.h names it:
 * a field takes the name and type of what cuda.h's macro makes of it (cuMemAlloc is
 * cuMemAlloc_v2), while #name stays the base name that cuGetProcAddress wants. */
#define SIM_DRIVER_ENTRIES(X)                                                                      \
    X(cuGetErrorName) X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain)     \
    X(cuCtxSetCurrent) X(cuStreamCreate) X(cuStreamSynchronize) X(cuMemAlloc) X(cuMemFree)        \
    X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemsetD32Async) X(cuModuleLoad)                 \
    X(cuModuleGetFunction) X(cuLaunchKernel) X(cuEventCreate) X(cuEventRecord)                    \
    X(cuEventSynchronize) X(cuEventElapsedTime)

typedef struct SimDriver {
#define SIM_DRIVER_FIELD(name) __typeof__(name) *name;
    SIM_DRIVER_ENTRIES(SIM_DRIVER_FIELD)
#undef SIM_DRIVER_FIELD
} SimDriver;

extern SimDriver driver;

/* Makes sure the simulator will be the process's libcuda.so.1, re-executing the program
 * (argv) when needed; sets LMS_SIM_DEVICE=h100 unless it is set. Returns 0, or -1 with the
 * reason in err. */
int sim_driver_prepare(char **argv, char *err, size_t errlen);

/* Loads the simulator, checks that it is one, and resolves every entry point into driver.
 * Returns 0, or -1 with the reason in err. */
int sim_driver_open(char *err, size_t errlen);

/* The path of the trainer's kernel module. Returns 0, or -1 with the reason in err. */
int sim_driver_module_path(char *path, size_t size, char *err, size_t errlen);

/* Ends the process with a message naming the call, its file and line unless result is
 * CUDA_SUCCESS (llm.c's cudaCheck). */
#define CU(call) sim_driver_check((call), #call, __FILE__, __LINE__)
void sim_driver_check(CUresult result, const char *call, const char *file, int line);

#endif
