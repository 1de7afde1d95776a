/* A binary heap of nodes that know their slot in it, so that any node can leave in O(log n),
 * and a walk through the nodes in heap order that leaves the heap as it is (a policy's
 * answers must not change its state).
 *
 * Nodes are ordered by key, then by tie: the largest first or the smallest first, as the heap
 * was set up. The caller embeds an lms_heap_node in its own records. */
#ifndef LMS_POLICY_HEAP_H
#define LMS_POLICY_HEAP_H

#include <stddef.h>
#include <stdint.h>

#define LMS_HEAP_OUT SIZE_MAX   /* the slot of a node in no heap */

typedef struct lms_heap_node {
    uint64_t key, tie;
    size_t slot;
} lms_heap_node;

typedef struct lms_heap {
    lms_heap_node **nodes;
    size_t count, cap;
    int largest_first;
} lms_heap;

/* Returns 0 when memory is short: the node then stays out (slot LMS_HEAP_OUT). */
int lms_heap_push(lms_heap *heap, lms_heap_node *node);
/* The node's key changed: moves it to its place; nothing happens when it is out. */
void lms_heap_update(lms_heap *heap, lms_heap_node *node);
/* Takes the node out; nothing happens when it is out already. */
void lms_heap_remove(lms_heap *heap, lms_heap_node *node);
/* Takes every node out; keeps the memory. */
void lms_heap_clear(lms_heap *heap);
void lms_heap_free(lms_heap *heap);

/* The walk keeps its frontier (the nodes next in order) in memory of its own, kept between
 * walks. */
typedef struct lms_heap_walk {
    const lms_heap *heap;
    lms_heap_node **frontier;  /* the nodes that may come next: a heap in the same order */
    size_t count, cap;
} lms_heap_walk;

/* Starts a walk over the heap. Returns 0 when memory is short. */
int lms_heap_walk_start(lms_heap_walk *walk, const lms_heap *heap);
/* The next node in order; NULL at the end. */
lms_heap_node *lms_heap_walk_next(lms_heap_walk *walk);
void lms_heap_walk_free(lms_heap_walk *walk);

#endif
