/* CUDA graphs: what the work of each capture, graph and executable graph uses.
 *
 * A capture is known by its id (cuStreamGetCaptureInfo), which every stream it forks shares:
 * the allocations its captured launches, copies and memsets used go to the capture, then to
 * the graph cuStreamEndCapture makes. At instantiation (every form) and at cuGraphExecUpdate,
 * the executable graph gets its graph's set and what reading the graph's nodes finds
 * (wrappers.c); cuGraphLaunch makes them all resident and holds them for the launch. A
 * swappable allocation freed by cuMemFreeAsync in a capture is freed when its graph runs. */
#ifndef LMS_PRELOAD_GRAPHS_H
#define LMS_PRELOAD_GRAPHS_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

/* A range the graph's work touches, or one word of a kernel's parameters (bytes 1): whatever
 * allocation holds it at launch is used. */
typedef struct lms_graph_ref {
    uint64_t addr;
    size_t bytes;
} lms_graph_ref;

/* Whether work issued to stream now goes into a capture. */
int lms_graph_capturing(CUstream stream);
/* A captured call on stream used these allocations (their base addresses); uses_any: it may
 * use any allocation (a launch whose parameters could not be read). */
void lms_graph_captured(CUstream stream, const uint64_t *addrs, size_t count, int uses_any);
/* A swappable allocation freed on a capturing stream: the graph frees it when it runs.
 * Returns 0 when stream does not capture (it is freed now). */
int lms_graph_captured_free(CUstream stream, uint64_t addr);

/* cuStreamBeginCapture on stream succeeded. */
void lms_graph_capture_begun(CUstream stream);
/* Before cuStreamEndCapture: the capture that ending stream's would end (0: none). */
uint64_t lms_graph_capture_of(CUstream stream);
/* That capture has ended; graph is what it made (NULL: nothing). */
void lms_graph_capture_ended(uint64_t capture, CUgraph graph);
/* Whether a capture begun through liblms is under way: then nothing liblms does may wait for
 * a whole context (the driver refuses, and invalidates the capture). */
int lms_graph_captures_under_way(void);

/* Whether graph was made by stream capture: its copies and memsets were seen then. */
int lms_graph_made_by_capture(CUgraph graph);
/* exec (new, or updated from graph) uses what graph's set holds, and refs; uses_any: reading
 * graph found work that may use any allocation. */
void lms_graph_instantiated(CUgraph graph, CUgraphExec exec, const lms_graph_ref *refs, size_t count,
                            int uses_any);
/* Calls fn(ctx, ref) for each reference of exec's work; returns whether it may use any
 * allocation. */
int lms_graph_each_use(CUgraphExec exec, void (*fn)(void *ctx, const lms_graph_ref *ref), void *ctx);
/* Hands out (malloc'd, the caller frees) the allocations exec frees when it runs, once. */
size_t lms_graph_take_frees(CUgraphExec exec, uint64_t **addrs);
void lms_graph_forget(const void *graph_or_exec);
/* Around fork (preload/fork.c): take and give back the lock of the use sets. */
void lms_graphs_fork_lock(void);
void lms_graphs_fork_unlock(void);

#endif
