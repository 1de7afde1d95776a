/* Period finding (see period.h). */
#include "policy/period.h"

#include <stdlib.h>

#define NONE UINT64_MAX
#define FIRST_CAP 256

void lms_period_free(lms_period *p)
{
    lms_idmap_free(&p->latest);
    free(p->ring);
    *p = (lms_period){ 0 };
}

static int in_ring(const lms_period *p, uint64_t step) { return step != NONE && step >= p->kept_from; }

/* Doubles the ring, keeping the steps it holds. Returns 0 when memory is short. */
static int grow(lms_period *p)
{
    uint64_t cap = p->cap ? p->cap * 2 : FIRST_CAP;
    lms_period_step *ring = malloc(cap * sizeof *ring);
    if (!ring)
        return 0;
    for (uint64_t i = p->kept_from; i < p->count; i++)
        ring[i & (cap - 1)] = p->ring[i & (p->cap - 1)];
    free(p->ring);
    p->ring = ring;
    p->cap = cap;
    return 1;
}

/* Makes room for the next step: the oldest goes when the ring is full, and leaves the table
 * if it is its fingerprint's latest. */
static void forget_oldest(lms_period *p)
{
    if (p->count - p->kept_from < p->cap)
        return;
    uint64_t oldest = p->kept_from++, fingerprint = p->ring[oldest & (p->cap - 1)].fingerprint;
    const lms_idmap_slot *latest = lms_idmap_find(&p->latest, fingerprint);
    if (latest && latest->value == oldest)
        lms_idmap_remove(&p->latest, fingerprint);
}

static void propose(lms_period *p, uint64_t period)
{
    for (size_t i = 0; i < p->candidate_count; i++)
        if (p->candidates[i].period == period)
            return;
    if (p->candidate_count < LMS_PERIOD_CANDIDATES)
        p->candidates[p->candidate_count++] = (lms_period_candidate){ period, 1 };
}

uint64_t lms_period_feed(lms_period *p, uint64_t fingerprint)
{
    /* Only a search needs a longer history; without memory for it, the ring wraps as it is. */
    if (p->count >= p->cap && p->cap < LMS_PERIOD_MAX && !p->confirmed)
        grow(p);
    if (p->cap == 0)
        return 0;
    uint64_t step = p->count, mask = p->cap - 1;
    for (size_t i = 0; i < p->candidate_count;) {
        lms_period_candidate *c = &p->candidates[i];
        if (p->ring[(step - c->period) & mask].fingerprint == fingerprint) {
            c->run++;
            i++;
        } else {
            *c = p->candidates[--p->candidate_count];
        }
    }
    forget_oldest(p);
    lms_idmap_slot *latest = lms_idmap_find(&p->latest, fingerprint);
    p->ring[step & mask] = (lms_period_step){ fingerprint, latest ? latest->value : NONE };
    if (latest)
        latest->value = step;
    else
        lms_idmap_put(&p->latest, fingerprint, step); /* short of memory: proposes less */
    p->count++;
    uint64_t earlier = p->ring[step & mask].previous;
    for (int n = 0; n < LMS_PERIOD_LOOKBACK && in_ring(p, earlier); n++) {
        propose(p, step - earlier);
        earlier = p->ring[earlier & mask].previous;
    }
    /* Of the confirmed, the one that has held longest: a burst inside the iteration (a
     * convolution in thousands of tiles) repeats with a short period only while it lasts, and
     * the iteration's own period has held through it; among equals, the shortest, since every
     * multiple of a period holds as long as it does. */
    p->confirmed = 0;
    uint64_t longest = 0;
    for (size_t i = 0; i < p->candidate_count; i++) {
        const lms_period_candidate *c = &p->candidates[i];
        uint64_t needed = c->period > LMS_PERIOD_MIN_RUN ? c->period : LMS_PERIOD_MIN_RUN;
        if (c->run >= needed && (c->run > longest || (c->run == longest && c->period < p->confirmed))) {
            p->confirmed = c->period;
            longest = c->run;
        }
    }
    return p->confirmed;
}
