/* Data parallelism over ranks (trainer/ranks.h), as Caffe's multi-GPU solver and PyTorch's
 * DistributedDataParallel do it: every rank holds the whole net and trains on its own share
 * of each global batch (--batch is per rank); the ranks average their gradients before every
 * update, so that their weights stay identical, and only scalars are reduced for display.
 * With one rank every call costs nothing. */
#ifndef TRAINER_DATA_PARALLEL_H
#define TRAINER_DATA_PARALLEL_H

#include "trainer/net.h"

/* The first sample of this rank's share of global batch `index`: the ranks' shares, in rank
 * order, are exactly the batch one rank with batch ranks x net->batch would take. */
long dp_first_sample(const Net *net, long index);
/* Rank 0's weights, solver history and iteration, in every rank. */
void dp_share_state(Net *net, long *iter);
/* A way to average the gradients over the ranks on the device (NCCL on GPUs, as
 * nccl_gradients.h), overlapping backward. Without one they go through host memory once
 * backward is done (CPU, the simulated GPU). */
typedef struct GradientExchange {
    void (*ready)(Net *net, Layer *layer); /* backward has queued the layer's gradients */
    void (*finish)(Net *net);              /* every layer's queued: the update waits for them */
} GradientExchange;
void dp_set_exchange(const GradientExchange *exchange);
/* Backward over every layer, then each parameter's gradient averaged over the ranks. */
void dp_backward(Net *net);
/* The CUDA device of this rank, of the `visible` devices it sees, given --gpu `requested`
 * (collective). Alone on its node, or where each rank on the node sees devices of its own
 * (CUDA_VISIBLE_DEVICES set per rank, as srun --gpus-per-task=1 does), a rank takes
 * `requested`; where the node's ranks share one view, the node's rank r takes requested + r.
 * -1, with the reason in err, on every rank when any node has more ranks than that view has
 * devices. */
int dp_device(int requested, int visible, char *err, size_t errlen);
/* Every rank's value, in every rank: rank r's in all[r], of ranks_count() (collective). */
void dp_gather(double value, double *all);
/* Each value, averaged over the ranks. */
void dp_average(double *values, int n);

#endif
