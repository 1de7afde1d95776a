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

/* When the replay's step t starts: when the one before it ends. */
static double start_of(const lms_plan_times *times, uint64_t length, uint64_t t)
{
    return t ? end_of(times, length, t - 1) : 0;
}

/* Where a replay marks its evictions: in the iterations from `first`, `period` of them, each
 * eviction at the victim's last use, in the plan's copy for the iteration of that use. */
typedef struct marks {
    uint8_t *evicts;   /* NULL: the replay looks for its cycle and marks nothing */
    uint64_t first, period;
    size_t id_count;
} marks;

/* A replay under way. */
typedef struct replay_state {
    lms_plan *plan;
    const lms_iteration *it;
    const uint64_t *bytes;    /* per allocation, as r */
    replayed *r;
    lms_heap resident;        /* by next use, furthest first */
    lms_heap evicted;         /* by next use, soonest first (those ever resident) */
    lms_heap_walk walk;
    uint64_t used;            /* resident bytes */
    uint64_t fingerprint;     /* of the resident allocations */
    double link_free;         /* with times: when the link to the device has carried the
                                 replay's restores so far */
    marks *m;
} replay_state;

static double copy_ns(const replay_state *s, const lms_plan_times *times, const replayed *v)
{
    return (double)s->bytes[v - s->r] * times->copy_ns_per_byte;
}

/* Whether v has been idle long enough by the end of step now for its copy out. */
static int idle_enough(const replay_state *s, const lms_plan_times *times, const replayed *v, uint64_t now)
{
    uint64_t length = s->it->length;
    return end_of(times, length, now) - end_of(times, length, v->used_at) >= times->idle_copies * copy_ns(s, times, v);
}

/* The victim when step `now` needs room for what is needed at `floor` (now, or later for an
 * allocation brought back ahead): Belady's (the heap's first), unless times are known and it
 * has not been idle long enough; then the one needed furthest ahead of those that have, if any
 * (walking the heap in its order). Only those needed after `floor` are chosen: those step now
 * uses are keyed now. */
static replayed *victim(replay_state *s, uint64_t now, uint64_t floor, const lms_plan_times *times)
{
    replayed *furthest = replayed_of(s->resident.nodes[0]);
    if (!times || !lms_heap_walk_start(&s->walk, &s->resident))
        return furthest;
    for (lms_heap_node *n; (n = lms_heap_walk_next(&s->walk)) && n->key > floor;)
        if (idle_enough(s, times, replayed_of(n), now))
            return replayed_of(n);
    return furthest;
}

void lms_plan_free(lms_plan *plan)
{
    free(plan->evicts);
    *plan = (lms_plan){ 0 };
}

/* Evicts victims needed after `floor` until the resident bytes fit the capacity; those step
 * `now` uses are keyed `now`, and stay, all of them, though they overfill it. An allocation
 * the evicted heap has no memory for is never brought back ahead. */
static void evict_victims(replay_state *s, uint64_t now, uint64_t floor, const lms_plan_times *times)
{
    uint64_t length = s->it->length, pass = now / length;
    const marks *m = s->m;
    while (s->used > s->plan->capacity && s->resident.count && s->resident.nodes[0]->key > floor) {
        replayed *v = victim(s, now, floor, times);
        lms_heap_remove(&s->resident, &v->node);
        lms_heap_push(&s->evicted, &v->node);
        v->resident = 0;
        s->used -= s->bytes[v - s->r];
        s->fingerprint -= lms_mix64(v->node.tie);
        if (m->evicts && pass >= m->first && pass < m->first + m->period) {
            /* Its last use is in this iteration or the one before, which may precede the
             * cycle: the cycle's last iteration stands for it. */
            uint64_t copy = (v->used_at / length + m->period - m->first) % m->period;
            m->evicts[copy * m->id_count + v->last_use] = 1;
        }
    }
}

/* Makes v resident again at step now; brought back for that step's use, its copy ends on the
 * link before the step starts. Returns 0 when memory is short. */
static int bring_back(replay_state *s, replayed *v, uint64_t now, const lms_plan_times *times, int for_use)
{
    if (times && for_use && v->node.slot != LMS_HEAP_OUT) { /* restored, not created */
        double start = start_of(times, s->it->length, now), after = s->link_free + copy_ns(s, times, v);
        s->link_free = after > start ? after : start;
    }
    lms_heap_remove(&s->evicted, &v->node);
    v->resident = 1;
    s->used += s->bytes[v - s->r];
    s->fingerprint += lms_mix64(v->node.tie);
    return lms_heap_push(&s->resident, &v->node);
}

/* The bytes step now could free for what is needed at step t: free room, and allocations
 * needed after t idle long enough to be victims. */
static uint64_t room_for(replay_state *s, uint64_t now, uint64_t t, uint64_t wanted, const lms_plan_times *times)
{
    uint64_t room = s->used < s->plan->capacity ? s->plan->capacity - s->used : 0;
    if (room >= wanted || !lms_heap_walk_start(&s->walk, &s->resident))
        return room;
    for (lms_heap_node *n; room < wanted && (n = lms_heap_walk_next(&s->walk)) && n->key > t;)
        if (idle_enough(s, times, replayed_of(n), now))
            room += s->bytes[replayed_of(n) - s->r];
    return room;
}

/* The first step (counted from the first pass's start) that starts at `at` or later. */
static uint64_t step_starting(const lms_plan_times *times, uint64_t length, double at)
{
    double duration = (double)times->end_ns[length - 1];
    uint64_t pass = duration > 0 && at > 0 ? (uint64_t)(at / duration) : 0;
    double within = at - (double)pass * duration;
    size_t lo = 0, hi = length; /* position p starts when p - 1 ends (0 at 0) */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if ((mid ? (double)times->end_ns[mid - 1] : 0) >= within)
            hi = mid;
        else
            lo = mid + 1;
    }
    return pass * length + lo;
}

/* While step now runs and the link to the device would idle, brings back the evicted
 * allocations needed soonest (see plan.h), each into room made from victims needed after it. */
static int restore_ahead(replay_state *s, uint64_t now, const lms_plan_times *times)
{
    uint64_t length = s->it->length;
    double start = start_of(times, length, now), end = end_of(times, length, now);
    if (s->link_free < start)
        s->link_free = start;
    while (s->evicted.count && s->link_free < end) {
        replayed *v = replayed_of(s->evicted.nodes[0]);
        uint64_t t = v->node.key;
        double copy = copy_ns(s, times, v);
        double needed_at = start_of(times, length, t), ahead = LMS_PLAN_RESTORE_AHEAD_COPIES * copy;
        uint64_t after = step_starting(times, length, needed_at + ahead), far = after > t + 1 ? after - 1 : t;
        if (needed_at - s->link_free > ahead || room_for(s, now, far, s->bytes[v - s->r], times) < s->bytes[v - s->r])
            break;
        if (!bring_back(s, v, now, times, 0))
            return 0;
        v->used_at = now; /* not idle: it came back for its use */
        s->link_free += copy;
        evict_victims(s, now, far, times);
    }
    return 1;
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
    replay_state s = { .plan = plan, .it = it, .bytes = bytes, .m = m,
                       .r = calloc(it->distinct ? it->distinct : 1, sizeof *s.r),
                       .resident = { .largest_first = 1 }, .evicted = { .largest_first = 0 } };
    int ok = s.r != NULL;
    for (size_t u = 0; ok && u < it->distinct; u++)
        s.r[u].node.slot = LMS_HEAP_OUT;
    uint64_t ended[LMS_PLAN_MAX_PASSES];
    const uint64_t passes = m->evicts ? m->first + m->period : LMS_PLAN_MAX_PASSES;
    for (uint64_t pass = 0; ok && pass < passes; pass++) {
        for (size_t u = 0; u < it->distinct; u++)
            s.r[u].cursor = 0;
        const lms_plan_times *rule = times && times->from_cycle && pass < m->first ? NULL : times;
        for (uint64_t step = 0; ok && step < it->length; step++) {
            uint64_t now = pass * it->length + step;
            for (size_t i = it->first[step]; ok && i < it->first[step + 1]; i++) {
                replayed *v = &s.r[lms_idmap_find(&it->by_id, it->ids[i])->value];
                v->node.key = now;
                v->node.tie = it->ids[i]; /* ties go as lookahead's own choice breaks them */
                v->used_at = now;
                if (v->resident)
                    lms_heap_update(&s.resident, &v->node);
                else
                    ok = bring_back(&s, v, now, rule, 1);
            }
            evict_victims(&s, now, now, rule);
            for (size_t i = it->first[step]; ok && i < it->first[step + 1]; i++) {
                size_t u = lms_idmap_find(&it->by_id, it->ids[i])->value;
                const lms_iteration_uses *uses = &it->uses[u];
                replayed *v = &s.r[u];
                v->last_use = (size_t)(uses->positions - it->positions) + v->cursor++;
                v->node.key = now - step + (v->cursor < uses->count ? uses->positions[v->cursor]
                                                                    : it->length + uses->positions[0]);
                lms_heap_update(&s.resident, &v->node);
            }
            if (ok && rule)
                ok = restore_ahead(&s, now, rule);
        }
        ended[pass] = s.fingerprint;
        if (!m->evicts && cycle_ends(ended, pass, m))
            break;
    }
    lms_heap_free(&s.resident);
    lms_heap_free(&s.evicted);
    lms_heap_walk_free(&s.walk);
    free(s.r);
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
