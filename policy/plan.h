/* The swap plan of a learned iteration: which uses of an allocation are its last before
 * Belady's choice, replayed on the iteration under a capacity, evicts it. Evicting there, as
 * soon as the use has been queued, moves no more bytes than Belady's choice made at the last
 * moment, and the memory is free long before a restore needs it: the copies out overlap
 * compute instead of standing between a restore and the kernel that waits for it.
 *
 * The replay runs the iteration twice from an empty device, so that the second pass starts
 * from the first's end, as every iteration after the first does; the plan is the second's. A
 * step needs all its allocations at once; one that needs more than the capacity evicts every
 * other and overfills: liblms then leaves some in host memory, and the plan evicts nothing. */
#ifndef LMS_POLICY_PLAN_H
#define LMS_POLICY_PLAN_H

#include "policy/iteration.h"

#include <stdint.h>

typedef struct lms_plan {
    uint8_t *evicts;     /* per use, in the iteration's positions order: evicted after it;
                            NULL until the plan is made */
    uint64_t capacity;   /* bytes it was made for */
    int overfilled;      /* a step needs more than the capacity */
} lms_plan;

/* Replays the iteration with capacity bytes; bytes[u] is the size of the allocation of
 * it->uses[u]. Returns 0 when memory is short (the plan is then empty). */
int lms_plan_make(lms_plan *plan, const lms_iteration *it, const uint64_t *bytes, uint64_t capacity);
/* Whether the allocation whose uses are `uses` is evicted after its use at `position`: never
 * when a step overfills, where which allocations stay in host memory decides the traffic. */
int lms_plan_evicts_after(const lms_plan *plan, const lms_iteration *it, const lms_iteration_uses *uses,
                          uint64_t position);
/* Whether the plan was made and no step overfills. */
int lms_plan_applies(const lms_plan *plan);
void lms_plan_free(lms_plan *plan);

#endif
