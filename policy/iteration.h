/* One iteration of a learned sequence of steps: the allocations each step uses, recorded step
 * after step, and then, for each allocation, the steps that use it, so that its next use from
 * any step is a binary search away. Positions are steps within the iteration, 0 to
 * length - 1; after the last comes the first again. */
#ifndef LMS_POLICY_ITERATION_H
#define LMS_POLICY_ITERATION_H

#include "policy/idmap.h"
#include "policy/policy.h"

#include <stdint.h>

#define LMS_ITERATION_MAX_IDS ((size_t)1 << 22) /* uses recorded per iteration, at most */

typedef struct lms_iteration_uses {
    uint32_t *positions;     /* ascending */
    size_t count;
} lms_iteration_uses;

typedef struct lms_iteration {
    lms_alloc_id *ids;       /* step after step */
    size_t id_count, id_cap;
    size_t *first;           /* step s uses ids[first[s]] to ids[first[s + 1] - 1] */
    size_t length, first_cap;
    /* Built by lms_iteration_index: */
    lms_idmap by_id;            /* id -> its index in uses */
    lms_iteration_uses *uses;   /* one per allocation the iteration uses: `distinct` */
    size_t distinct;
    uint32_t *positions;        /* every allocation's positions, one allocation after another */
} lms_iteration;

/* A zeroed lms_iteration is empty. Clearing makes it empty again. */
void lms_iteration_clear(lms_iteration *it);

/* Appends a step that used these allocations (each once). Returns 0 when memory is short or
 * the iteration is too long; the iteration is then unusable until cleared. */
int lms_iteration_add_step(lms_iteration *it, const lms_alloc_id *ids, size_t count);

/* After the last step: indexes the positions of each allocation. Returns 0 when memory is
 * short. */
int lms_iteration_index(lms_iteration *it);

/* How many allocations the step at `position` uses. */
size_t lms_iteration_step_size(const lms_iteration *it, uint64_t position);

/* Where an allocation is used; NULL when the iteration never uses it. */
const lms_iteration_uses *lms_iteration_find(const lms_iteration *it, lms_alloc_id id);

/* The index in uses->positions of the allocation's first use at or after `position`;
 * uses->count when it has none there. */
size_t lms_iteration_first_use(const lms_iteration_uses *uses, uint64_t position);

/* Steps from `position` to the allocation's next use after it: 1 to length (its use at the
 * same position an iteration later). *used_here says whether it is used at `position`. */
uint64_t lms_iteration_until_next(const lms_iteration *it, const lms_iteration_uses *uses,
                                  uint64_t position, int *used_here);

#endif
