/* The swap plan of a learned iteration (see plan.h). */
#include "policy/plan.h"

#include "policy/heap.h"
#include "policy/mix.h"

#include <stdlib.h>

/* An allocation in the replay. */
typedef struct replayed {
    lms_heap_node node;  /* key: the time of its next use (of its use now, while its step is
                            replayed); first: see replayed_of */
    size_t cursor;       /* the index in its positions of its next use */
    size_t last_use;     /* the index in the iteration's positions of its latest use */
    uint64_t used_at;    /* the replay's step of its latest use */
    int resident;
} replayed;

static replayed *replayed_of(lms_heap_node *node) { return (replayed *)node; }

/* When the replay's step t ends: t counts steps from the first pass's start. */
static double end_of(const lms_plan_times *times, uint64_t length, uint64_t t)
{
    return (double)(t / length) * (double)times->end_ns[length - 1] + (double)times->end_ns[t % length];
}

/* The victim when step `now` needs room: Belady's (the heap's first), unless times are known
 * and it has not been idle long enough (by the end of step now) for its copy out; then the one
 * needed furthest ahead of those that have, if any (walking the heap in its order). Those step
 * now uses are keyed now and never chosen. */
static replayed *victim(const lms_heap *resident, lms_heap_walk *walk, const replayed *r, const uint64_t *bytes,
                        uint64_t now, uint64_t length, const lms_plan_times *times)
{
    replayed *furthest = replayed_of(resident->nodes[0]);
    if (!times || !lms_heap_walk_start(walk, resident))
        return furthest;
    double end = end_of(times, length, now);
    for (lms_heap_node *n; (n = lms_heap_walk_next(walk)) && n->key > now;) {
        replayed *v = replayed_of(n);
        if (end - end_of(times, length, v->used_at) >= times->idle_copies * (double)bytes[v - r] * times->copy_ns_per_byte)
            return v;
    }
    return furthest;
}

void lms_plan_free(lms_plan *plan)
{
    free(plan->evicts);
    *plan = (lms_plan){ 0 };
}

/* Where a replay marks its evictions: in the iterations from `first`, `period` of them, each
 * eviction at the victim's last use, in the plan's copy for the iteration of that use. */
typedef struct marks {
    uint8_t *evicts;   /* NULL: the replay looks for its cycle and marks nothing */
    uint64_t first, period;
    size_t id_count;
} marks;

/* Evicts victims until `used` bytes fit the capacity; those step `now` uses are keyed `now`,
 * and stay, all of them, though they overfill it. Returns the bytes still resident. */
static uint64_t evict_victims(lms_plan *plan, replayed *r, lms_heap *resident, lms_heap_walk *walk,
                              const uint64_t *bytes, uint64_t used, uint64_t now, uint64_t length,
                              const lms_plan_times *times, const marks *m, uint64_t *fingerprint)
{
    uint64_t pass = now / length;
    while (used > plan->capacity && resident->count && resident->nodes[0]->key > now) {
        replayed *v = victim(resident, walk, r, bytes, now, length, times);
        lms_heap_remove(resident, &v->node);
        v->resident = 0;
        used -= bytes[v - r];
        *fingerprint -= lms_mix64(v->node.tie);
        if (m->evicts && pass >= m->first && pass < m->first + m->period) {
            /* Its last use is in this iteration or the one before, which may precede the
             * cycle: the cycle's last iteration stands for it. */
            uint64_t copy = (v->used_at / length + m->period - m->first) % m->period;
            m->evicts[copy * m->id_count + v->last_use] = 1;
        }
    }
    return used;
}

/* Whether the replay's iteration `pass` ended with the allocations resident that an earlier
 * one ended with (by their fingerprints in `ended`); if so, sets m's cycle. */
static int cycle_ends(const uint64_t *ended, uint64_t pass, marks *m)
{
    for (uint64_t earlier = 0; earlier < pass; earlier++)
        if (ended[earlier] == ended[pass]) {
            m->first = earlier + 1;
            m->period = pass - earlier;
            return 1;
        }
    return 0;
}

/* Replays the iteration from an empty device. Looking for the cycle (m->evicts NULL), it stops
 * at the first iteration that ends with the allocations resident that an earlier one ended
 * with, and sets m->first and m->period: from then on the replay repeats itself. Marking, it
 * replays up to the cycle's end. Returns 0 when memory is short. */
static int replay(lms_plan *plan, const lms_iteration *it, const uint64_t *bytes, const lms_plan_times *times,
                  marks *m)
{
    replayed *r = calloc(it->distinct ? it->distinct : 1, sizeof *r);
    lms_heap resident = { .largest_first = 1 };
    lms_heap_walk walk = { 0 };
    int ok = r != NULL;
    for (size_t u = 0; ok && u < it->distinct; u++)
        r[u].node.slot = LMS_HEAP_OUT;
    uint64_t used = 0, fingerprint = 0, ended[LMS_PLAN_MAX_PASSES];
    const uint64_t passes = m->evicts ? m->first + m->period : LMS_PLAN_MAX_PASSES;
    for (uint64_t pass = 0; ok && pass < passes; pass++) {
        for (size_t u = 0; u < it->distinct; u++)
            r[u].cursor = 0;
        const lms_plan_times *rule = times && times->from_cycle && pass < m->first ? NULL : times;
        for (uint64_t s = 0; ok && s < it->length; s++) {
            uint64_t now = pass * it->length + s;
            for (size_t i = it->first[s]; ok && i < it->first[s + 1]; i++) {
                replayed *v = &r[lms_idmap_find(&it->by_id, it->ids[i])->value];
                v->node.key = now;
                v->node.tie = it->ids[i]; /* ties go as lookahead's own choice breaks them */
                v->used_at = now;
                if (v->resident) {
                    lms_heap_update(&resident, &v->node);
                } else {
                    v->resident = 1;
                    used += bytes[v - r];
                    fingerprint += lms_mix64(v->node.tie);
                    ok = lms_heap_push(&resident, &v->node);
                }
            }
            used = evict_victims(plan, r, &resident, &walk, bytes, used, now, it->length, rule, m, &fingerprint);
            for (size_t i = it->first[s]; ok && i < it->first[s + 1]; i++) {
                size_t u = lms_idmap_find(&it->by_id, it->ids[i])->value;
                const lms_iteration_uses *uses = &it->uses[u];
                replayed *v = &r[u];
                v->last_use = (size_t)(uses->positions - it->positions) + v->cursor++;
                v->node.key = now - s + (v->cursor < uses->count ? uses->positions[v->cursor]
                                                                 : it->length + uses->positions[0]);
                lms_heap_update(&resident, &v->node);
            }
        }
        ended[pass] = fingerprint;
        if (!m->evicts && cycle_ends(ended, pass, m))
            break;
    }
    lms_heap_free(&resident);
    lms_heap_walk_free(&walk);
    free(r);
    return ok;
}

int lms_plan_make(lms_plan *plan, const lms_iteration *it, const uint64_t *bytes, uint64_t capacity,
                  const lms_plan_times *times)
{
    lms_plan_free(plan);
    plan->capacity = capacity;
    /* Without a cycle (or with times: see plan.h), the second iteration's evictions, every
     * iteration; from_cycle, those of the first of Belady's cycle. */
    marks m = { .first = 1, .period = 1, .id_count = it->id_count ? it->id_count : 1 };
    int ok = 1;
    if (!times || times->from_cycle)
        ok = replay(plan, it, bytes, NULL, &m); /* finds the cycle */
    if (times)
        m.period = 1;
    plan->period = m.period;
    ok = ok && (m.evicts = plan->evicts = calloc(m.period * m.id_count, 1)) && replay(plan, it, bytes, times, &m);
    if (!ok) {
        lms_plan_free(plan);
        return 0;
    }
    return 1;
}

int lms_plan_applies(const lms_plan *plan)
{
    return plan->evicts != NULL;
}

int lms_plan_evicts_after(const lms_plan *plan, const lms_iteration *it, const lms_iteration_uses *uses,
                          uint64_t position, uint64_t iteration)
{
    if (!lms_plan_applies(plan))
        return 0;
    size_t lo = lms_iteration_first_use(uses, position);
    return lo < uses->count && uses->positions[lo] == position &&
           plan->evicts[iteration % plan->period * it->id_count + (size_t)(uses->positions - it->positions) + lo];
}
