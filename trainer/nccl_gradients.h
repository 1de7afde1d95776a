/* Gradients averaged over GPU ranks by NCCL, as PyTorch's DistributedDataParallel does it:
 * buckets of about 25 MiB of parameter gradients, each all-reduced (ncclAvg, in place) on a
 * stream of its own as soon as backward has queued its last gradient, so that communication
 * overlaps the layers still to go back through; the update waits for the last bucket. The
 * communicator is bootstrapped over the ranks (trainer/ranks.h): rank 0's NCCL unique id is
 * broadcast to the others.
 *
 * NCCL is loaded when the run starts (libnccl.so.2), into the global scope and called through
 * it, so that a preloaded liblms's NCCL wrappers are the ones called: the trainer builds and
 * runs without NCCL installed, and only a run of several GPU ranks needs it. */
#ifndef TRAINER_NCCL_GRADIENTS_H
#define TRAINER_NCCL_GRADIENTS_H

#include <stddef.h>
#include "trainer/data_parallel.h"

/* On the current CUDA device, whose work runs on compute_stream (a cudaStream_t): the
 * exchange, or NULL with the reason in err (collective). */
const GradientExchange *nccl_gradients_open(void *compute_stream, char *err, size_t errlen);
void nccl_gradients_close(void);

#endif
