/* The simulated-GPU backend (trainer --sim): the GPU backend's pattern of driver calls on the
 * simulated GPU of sim/, issued through the CUDA driver API as cudart issues them, so that a
 * library intercepting the driver (liblms) sees what it would see under the GPU backend: one
 * cuMemAlloc per tensor, copies and memsets on one stream, and every operation a
 * cuLaunchKernel of a kernel of the trainer's module (sim_kernel_table.h), whose parameters
 * are the device pointers it touches and its shapes by value. */
#ifndef TRAINER_SIM_BACKEND_H
#define TRAINER_SIM_BACKEND_H

#include <stddef.h>
#include "trainer/backend.h"

/* Makes the simulator the process's libcuda.so.1, which may re-execute the program with argv
 * (sim_driver.h), then selects simulated device `device` and loads the kernels. The
 * convolutions' workspace is kept as the GPU backend's cuDNN keeps one, within
 * workspace_limit bytes (--workspace-limit). Returns the backend, or NULL with the reason in err. */
const Backend *sim_backend_open(char **argv, int device, size_t workspace_limit, char *err, size_t errlen);
/* sim_backend_open's first step alone, for a program that must re-execute before it starts
 * what an exec would break (MPI): 0, or -1 with the reason in err. */
int sim_backend_prepare(char **argv, char *err, size_t errlen);

#endif
