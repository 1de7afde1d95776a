/* CUDA graphs made by stream capture: the allocations that the captured launches, copies
 * and memsets used are remembered per capturing stream, then per graph and per executable
 * graph; cuGraphLaunch makes them all resident and holds them for the launch. Graphs built
 * node by node (cuGraphAdd*Node) are not followed: their kernels reach evicted memory
 * through the host-mapped fallback. */
#ifndef LMS_PRELOAD_GRAPHS_H
#define LMS_PRELOAD_GRAPHS_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

/* Whether work issued to stream now goes into a capture. */
int lms_graph_capturing(CUstream stream);
/* A captured call on stream used these allocations (their base addresses); uses_any: it may
 * use any allocation (a launch whose parameters could not be read). */
void lms_graph_captured(CUstream stream, const uint64_t *addrs, size_t count, int uses_any);
void lms_graph_capture_ended(CUstream stream, CUgraph graph);
void lms_graph_instantiated(CUgraph graph, CUgraphExec exec);
/* Calls fn(ctx, addr) for each allocation exec's launches use; returns whether they may use
 * any allocation. */
int lms_graph_each_use(CUgraphExec exec, void (*fn)(void *ctx, uint64_t addr), void *ctx);
void lms_graph_forget(const void *graph_or_exec);
/* Around fork (preload/fork.c): take and give back the lock of the use sets. */
void lms_graphs_fork_lock(void);
void lms_graphs_fork_unlock(void);

#endif
