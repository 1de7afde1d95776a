/* The list a policy's choose_victims fills: candidates offered in the policy's order of
 * eviction, those the caller keeps skipped, until the bytes asked for are covered or the
 * list is full. Shared by lru.c and lookahead.c, which differ only in that order. */
#ifndef LMS_POLICY_VICTIMS_H
#define LMS_POLICY_VICTIMS_H

#include "policy/policy.h"

#include <stdbool.h>

typedef struct lms_victims {
    size_t bytes, freed, count, max;
    int (*keep)(void *ctx, lms_alloc_id id);
    void *ctx;
    lms_alloc_id *ids;
} lms_victims;

static inline lms_victims lms_victims_start(size_t bytes, int (*keep)(void *ctx, lms_alloc_id id), void *ctx,
                                            lms_alloc_id *ids, size_t max)
{
    return (lms_victims){ .bytes = bytes, .max = max, .keep = keep, .ctx = ctx, .ids = ids };
}

/* Whether more candidates are wanted. */
static inline bool lms_victims_wanted(const lms_victims *v)
{
    return v->freed < v->bytes && v->count < v->max;
}

static inline void lms_victims_offer(lms_victims *v, lms_alloc_id id, size_t bytes)
{
    if (v->keep && v->keep(v->ctx, id))
        return;
    v->ids[v->count++] = id;
    v->freed += bytes;
}

#endif
