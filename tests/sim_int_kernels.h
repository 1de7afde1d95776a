/* Two kernels on one int that sim_streams, sim_per_thread and sim_vmm run on the simulated
 * GPU, with their launchers: slow_store keeps a stream busy for a while, copy_int orders work
 * on two buffers (and shows sim_vmm what a kernel reads). Linked into those tests as
 * tests/sim_int_kernels.o. */
#ifndef LMS_TESTS_SIM_INT_KERNELS_H
#define LMS_TESTS_SIM_INT_KERNELS_H

#include <cuda.h>

/* Set by int_kernels_register, for launches of another form than the launchers'. */
extern CUfunction slow_store_fn, copy_int_fn;

/* Registers both kernels with the simulator, slow_store with a virtual duration as long as
 * its sleep (queries answer from virtual time). Call after cuInit. */
void int_kernels_register(void);
/* slow_store(out, value, delay_ms): sleeps delay_ms, then stores value at out. */
CUresult launch_slow_store(CUstream stream, CUdeviceptr out, int value, int delay_ms);
/* copy_int(dst, src): *dst = *src. */
CUresult launch_copy_int(CUstream stream, CUdeviceptr dst, CUdeviceptr src);
/* The int at p, copied back synchronously; the test stops if the copy fails. */
int read_int(CUdeviceptr p);

#endif
