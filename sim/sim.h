/* Test-only controls of the simulated GPU (libcuda.so.1 built from sim/).
 *
 * The simulator implements, on host memory, the part of the driver API that liblms and its
 * tests use, with the real signatures and CUresult codes of cuda.h. These extra entry
 * points let a test shape the "device" and look inside it. A program that links the
 * simulator (directly, or through liblms under LD_PRELOAD) calls them like any function.
 *
 * Configuration is read at cuInit from the environment as well, so that a program run as
 * a child can be set up without code; what the API set before cuInit wins:
 *   LMS_SIM_DEVICES=N            number of devices (default 1)
 *   LMS_SIM_DEVICE=test|h100     the shape of every device (default test: an H100 with
 *                                1024 MiB); the variables below override one field of it
 *   LMS_SIM_NAME=TEXT            device name
 *   LMS_SIM_CAPACITY_MB=N        device memory of each device
 *   LMS_SIM_SMS=N                multiprocessors (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
 *   LMS_SIM_CC=M.m               compute capability, as 9.0
 *   LMS_SIM_ASYNC_ENGINES=N      copy engines (CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT)
 *   LMS_SIM_HOST_VMM=0|1         host-located VMM supported
 *   LMS_SIM_CONTEXT_RESERVE_MB=N device memory the driver takes for each context (test: 2,
 *                                h100: 500, assumed)
 *   LMS_SIM_KERNEL_RESERVE_MB=N  and for each kernel at its first launch in a context (2)
 *   LMS_SIM_EXECUTE=execute|timing-only   timing-only: kernels, copies and memsets are
 *                                checked and ordered but do nothing, and device memory is
 *                                never touched, so it costs no host memory (default execute)
 *   LMS_SIM_LOG=PATH             where unsupported calls and errors are logged (default stderr)
 */
#ifndef LMS_SIM_H
#define LMS_SIM_H

#include <cuda.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A "kernel" is a host function. params[i] points at parameter i, laid out as registered,
 * exactly like the kernelParams array of cuLaunchKernel; for launches through `extra` the
 * simulator points params[i] into the packed buffer. It runs on the stream's worker thread. */
typedef struct sim_launch {
    unsigned grid[3];
    unsigned block[3];
    void **params;
} sim_launch;
typedef void (*sim_kernel_fn)(const sim_launch *launch);

/* Registers a kernel with its parameter sizes; offsets follow C alignment rules (each
 * parameter aligned to its size, up to 8 for sizes that are multiples of 8, 4, 2...).
 * A CUkernel answers cuKernelGetParamInfo / cuKernelGetName (cudart, cuBLAS, cuDNN and
 * PyTorch launch these); a CUfunction answers cuFuncGetParamInfo / cuFuncGetName (from
 * cuModuleGetFunction). Cross use returns CUDA_ERROR_INVALID_HANDLE as the real driver does.
 * Both may be passed to cuLaunchKernel as a CUfunction. */
CUkernel sim_register_kernel(const char *name, sim_kernel_fn fn,
                                    int param_count, const size_t *param_sizes);
CUfunction sim_register_function(const char *name, sim_kernel_fn fn,
                                        int param_count, const size_t *param_sizes);
/* Gives a registered kernel (a CUkernel or CUfunction) a cost function for the timing model
 * (sim_module.h); without one a launch takes the shortest kernel's time. A test kernel that
 * really runs long gives itself the same virtual duration, so that queries, which answer
 * from virtual time, see it running. */
struct sim_kernel_cost;
void sim_set_kernel_cost(const void *kernel, void (*cost)(const sim_launch *launch,
                                                          struct sim_kernel_cost *cost));

/* Device shape; call before cuInit (or use the environment above). A preset ("test",
 * "h100") sets every field of the shape, the others one; an unknown preset is
 * CUDA_ERROR_INVALID_VALUE. Values out of range are ignored. */
CUresult sim_set_device_preset(const char *preset);
void sim_set_device_count(int count);
void sim_set_capacity(int device, size_t bytes);
void sim_set_device_name(const char *name);
void sim_set_sm_count(int count);
void sim_set_compute_capability(int major, int minor);
void sim_set_async_engine_count(int count);
void sim_set_host_vmm(int supported);
/* The device memory the driver holds, out of the capacity: for each context from its creation,
 * and for each kernel from its first launch in a context until it is unloaded or the context
 * goes. cuMemGetInfo's free counts it out; a launch that cannot take it fails with
 * CUDA_ERROR_OUT_OF_MEMORY, as does creating a context. */
void sim_set_context_reserve(size_t bytes);
void sim_set_kernel_reserve(size_t bytes);

typedef enum sim_execution {
    SIM_EXECUTE,     /* kernels run, copies and memsets move bytes */
    SIM_TIMING_ONLY, /* they are checked and ordered, but do nothing */
} sim_execution;
void sim_set_execution(sim_execution mode);

/* Fault injection: the nth call from now (1 = the next) of entry_point (e.g.
 * "cuMemCreate") returns result without doing anything. One pending fault per entry point;
 * a later call replaces it. sim_fail_calls fails `count` calls in a row from the nth
 * (SIM_FAIL_FOR_GOOD: every one until sim_clear_faults), for a failure that persists. */
void sim_fail_call(const char *entry_point, unsigned long nth, CUresult result);
#define SIM_FAIL_FOR_GOOD (~0ul)
void sim_fail_calls(const char *entry_point, unsigned long nth, unsigned long count, CUresult result);
void sim_clear_faults(void);

/* Counters, since start-up. */
unsigned long sim_calls(const char *entry_point); /* calls made to an entry point */
size_t sim_bytes_mapped(void);   /* bytes currently mapped by cuMemMap */
size_t sim_bytes_copied(void);   /* bytes copies have moved (timing-only: would have) */
size_t sim_device_used(int device); /* device bytes the program holds against the capacity */
size_t sim_device_reserved(int device); /* device bytes the driver holds (contexts, kernels) */
unsigned long sim_unsupported_calls(void); /* calls answered NOT_SUPPORTED */

/* Virtual time (the timing model of sim/timing.h), in nanoseconds since start-up: the host
 * clock; how long a device's engine has been busy (0 compute, 1 host-to-device copies,
 * 2 device-to-host copies); when the device's queued work will all be done; and the
 * version of the calibration that priced it. */
unsigned long long sim_host_ns(void);
unsigned long long sim_engine_busy_ns(int device, int engine);
unsigned long long sim_device_done_ns(int device);
const char *sim_calibration_version(void);

#ifdef __cplusplus
}
#endif
#endif
