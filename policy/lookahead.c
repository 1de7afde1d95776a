/* lookahead: Belady's choice on the learned iteration; LRU until there is one.
 *
 * Training repeats the same launches every iteration, so the steps the policy is told of (a
 * launch, copy or memset, and the allocations lms_policy_used says it used) repeat too. The
 * policy fingerprints each step's set of allocations and finds the period (period.h); then it
 * records one more iteration as it happens (iteration.h) and, from then on, knows when each
 * allocation is needed next. It evicts the resident allocation needed furthest in the future
 * (first those the iteration never uses, least recently used first) and names the evicted
 * ones needed soonest for prefetching. Each step is checked against the iteration: one that
 * uses fewer allocations than it should means the sequence changed (a test phase, the last
 * partial batch, another model), and the policy falls back to LRU until it has learned the new
 * one. A step that uses all it should and more is still the iteration's: liblms counts every
 * pointer-sized word of a launch's parameters that names an allocation, and on the H100 cuDNN's
 * split-K reduction sometimes carried its preceding kernel's input in a word it does not read
 * (a stray use). The LRU policy it falls back to is told of everything all along.
 *
 * Its plan (plan.h) evicts each allocation right after its last use before Belady's choice
 * would. Once the caller has timed the iteration's steps on the device, it also tries plans
 * that take victims idle long enough for their copy out, then the fastest so far with no
 * room kept free ahead of restores, one after another, times an iteration of each, and keeps
 * the fastest: which is best depends on the run, and only the device knows how its copies
 * and kernels overlap.
 *
 * Time is counted in records, the steps seen (from 1): the caller's step numbers may skip.
 * An allocation's key is the record of its next use, or for one the iteration never uses
 * NEVER_BASE and more, the larger the longer it has been idle; the resident ones are kept in
 * a heap by key, furthest first, the evicted ones soonest first. */
#include "policy/policy_impl.h"

#include "policy/fenwick.h"
#include "policy/heap.h"
#include "policy/idmap.h"
#include "policy/iteration.h"
#include "policy/mix.h"
#include "policy/period.h"
#include "policy/plan.h"
#include "policy/victims.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NEVER_BASE ((uint64_t)1 << 63)

typedef struct entry {
    lms_heap_node node;          /* key (see above) and tie (the id); first: see entry_of */
    lms_alloc_id id;
    size_t bytes;
    int resident;
    int ahead;                   /* restored and not used since: brought back ahead of need */
    uint64_t counted;            /* the last record that counted it */
    uint64_t touched;            /* the last record it was created, used or restored in */
    const lms_iteration_uses *uses;  /* while the iteration is known; NULL: it never uses it */
} entry;

enum state { LEARNING, RECORDING, KNOWN };  /* LEARNING is 0: where a policy starts */

/* The candidate plans after Belady's: a victim must have been idle for this many copies of
 * its bytes, in the second iteration from an empty device or from Belady's cycle (plan.h).
 * Measured on the simulated H100: which wins depends on the run (1 at cifar10_full 1.1x, 0.5
 * at 1.2x, Belady's at 1.45x; 1 from Belady's cycle at 2x and unet3d 208^3), so each run
 * times them all. The third, from Belady's cycle, made the trial 2-3 iterations longer: in
 * bench-sim's runs it keeps its plan 18-20 iterations from the start. */
static const struct idle_rule {
    double copies;
    int from_cycle;
} IDLE_RULES[] = { { 0.5, 0 }, { 1, 0 }, { 1, 1 } };
/* The last candidate is the fastest of those again, with no room kept free ahead of its
 * restores (lms_policy_room_to_keep). Measured on the simulated H100 (2026-11-27): that room
 * was worth 4 % at cifar10_full 1.1x and 2 % at 2x, and cost 4 % at unet3d 240^3 and under
 * 1 % at cifar10_full 4x and 8x and unet3d 208^3, whose restores wait less for room than for
 * the link. */
#define ROOMLESS (1 + sizeof IDLE_RULES / sizeof *IDLE_RULES)
#define CANDIDATES (ROOMLESS + 1)
/* The room kept free while the policy predicts, as a share of the capacity. Measured on the
 * simulated H100 (cifar10_full at 1.1x to 12x the cap and unet3d at 1.6x to 8x, in 256 MiB
 * pieces without LMS_MAP_EVICTED): without a plan an eighth did best of 1/4 to 1/16, 3 to
 * 18 % faster than none. A plan frees memory as soon as the last use before an eviction is
 * queued, and keeping more free then costs copies for no more overlap: a twentieth did best
 * of 1/8 to 1/32 (with this trial; 1 % faster than a sixteenth at cifar10_full 2x and unet3d
 * 272^3, the same elsewhere). */
#define ROOM_SHARE (1.0 / 8)
#define ROOM_SHARE_PLANNED (1.0 / 20)

typedef struct lookahead {
    lms_policy base;
    lms_policy *lru;
    lms_idmap by_id;             /* id -> entry */
    size_t resident_bytes, ahead_bytes;
    /* The step being told of: its caller's number, its record, its allocations (each once). */
    uint64_t step, record;
    lms_alloc_id *ids;
    size_t id_count, id_cap;
    size_t strays;               /* of id_count, those the known iteration does not use there */
    uint64_t fingerprint;        /* the sum of its ids' hashes: any order gives the same */
    lms_period period;
    enum state state;
    uint64_t length;             /* the period, from RECORDING on */
    uint64_t start;              /* the record of the iteration's position 0 */
    lms_iteration iteration;
    /* While the iteration is known: */
    lms_heap resident, evicted;
    lms_fenwick resident_by_use; /* resident bytes by the record of their next use, mod 2 length */
    lms_heap_walk walk;
    lms_plan plan;               /* made for the capacity the caller asks with */
    uint64_t plan_from;          /* the iteration (see iteration_of) its cycle starts at */
    uint64_t generation;         /* counts the iterations learned */
    uint64_t timed_from;         /* the record from which the caller measures steps */
    uint64_t *end_ns;            /* per position, from the iteration's start: when its step
                                    ends on the device with none waiting; NULL until measured */
    double copy_ns_per_byte;
    /* Once times are known, each candidate plan (trial 0: Belady's; then one per IDLE_RULES;
     * then ROOMLESS) runs from an iteration's start, and the iterations of its cycle after that
     * one are timed; the fastest on average is kept. Iterations are counted by their starts
     * told of. */
    size_t trial;                /* the candidate in use */
    size_t fastest;              /* of those before ROOMLESS: the one ROOMLESS plans as */
    int choosing;                /* trials remain to be timed */
    int chosen;                  /* all were timed, and the choice not yet reported */
    uint64_t starts, trial_from; /* iteration starts so far; the one the trial's plan began at */
    uint64_t trial_ns[CANDIDATES];  /* the trial's iterations timed so far, in all; then
                                       their average */
    uint64_t trial_timed;           /* how many */
    uint64_t belady_period;         /* the iterations in the cycle of Belady's plan */
} lookahead;

static entry *entry_of(lms_heap_node *node) { return (entry *)node; }

static entry *find(const lookahead *lk, lms_alloc_id id)
{
    const lms_idmap_slot *s = lms_idmap_find(&lk->by_id, id);
    return s ? (entry *)(uintptr_t)s->value : NULL;
}

/* Walks the entries: start with *at = 0. */
static entry *next_entry(const lookahead *lk, size_t *at)
{
    const lms_idmap_slot *s = lms_idmap_next(&lk->by_id, at);
    return s ? (entry *)(uintptr_t)s->value : NULL;
}

static uint64_t position(const lookahead *lk, uint64_t record)
{
    return (record + lk->length - lk->start) % lk->length;
}

/* The iterations since the known one was recorded, to the one `record` is in. */
static uint64_t iteration_of(const lookahead *lk, uint64_t record)
{
    return (record - lk->start) / lk->length;
}

/* The record of e's next use that has not happened yet: its use in the record being told of
 * counts as done once counted. */
static uint64_t next_use(const lookahead *lk, const entry *e)
{
    if (!e->uses)
        return UINT64_MAX - e->touched;
    uint64_t from = e->counted == lk->record ? lk->record : lk->record - 1;
    int used_here;
    return from + lms_iteration_until_next(&lk->iteration, e->uses, position(lk, from), &used_here);
}

/* ---- the bookkeeping of a known iteration ---- */

static size_t use_slot(const lookahead *lk, uint64_t key) { return key % (2 * lk->length); }

/* Resident predicted keys lie from the record being told of to one iteration past it, so
 * 2 length slots hold them apart. */
static void count_resident(lookahead *lk, const entry *e, int sign)
{
    if (e->resident && e->node.key < NEVER_BASE)
        lms_fenwick_add(&lk->resident_by_use, use_slot(lk, e->node.key),
                        sign > 0 ? (uint64_t)e->bytes : 0 - (uint64_t)e->bytes);
}

/* Files e by its next use, in the heap of its kind and the sums (the iteration is known). */
static void index_entry(lookahead *lk, entry *e)
{
    e->node.key = next_use(lk, e);
    lms_heap_push(e->resident ? &lk->resident : &lk->evicted, &e->node); /* else: never chosen */
    count_resident(lk, e, +1);
}

static void unindex_entry(lookahead *lk, entry *e)
{
    count_resident(lk, e, -1);
    lms_heap_remove(e->resident ? &lk->resident : &lk->evicted, &e->node);
}

/* Its next use changed: e moves within its heap and the sums. */
static void refile(lookahead *lk, entry *e)
{
    count_resident(lk, e, -1);
    e->node.key = next_use(lk, e);
    lms_heap_update(e->resident ? &lk->resident : &lk->evicted, &e->node);
    count_resident(lk, e, +1);
}

/* Takes e out of the tallies before its state changes; attach puts it back after. */
static void detach(lookahead *lk, entry *e)
{
    if (e->resident)
        lk->resident_bytes -= e->bytes;
    if (e->ahead)
        lk->ahead_bytes -= e->bytes;
    if (lk->state == KNOWN)
        unindex_entry(lk, e);
}

static void attach(lookahead *lk, entry *e)
{
    if (e->resident)
        lk->resident_bytes += e->bytes;
    if (e->ahead)
        lk->ahead_bytes += e->bytes;
    if (lk->state == KNOWN)
        index_entry(lk, e);
}

/* Bytes of the resident allocations needed from the record being told of to `key`. */
static uint64_t resident_needed_by(const lookahead *lk, uint64_t key)
{
    size_t from = use_slot(lk, lk->record), to = use_slot(lk, key) + 1;
    const lms_fenwick *f = &lk->resident_by_use;
    return from < to ? lms_fenwick_sum(f, to) - lms_fenwick_sum(f, from)
                     : lms_fenwick_sum(f, f->size) - lms_fenwick_sum(f, from) + lms_fenwick_sum(f, to);
}

/* ---- learning ---- */

static void forget_iteration(lookahead *lk)
{
    if (lk->state == KNOWN) {
        lms_heap_clear(&lk->resident);
        lms_heap_clear(&lk->evicted);
        lms_fenwick_free(&lk->resident_by_use);
        size_t at = 0;
        for (entry *e; (e = next_entry(lk, &at));)
            e->uses = NULL;
    }
    lms_plan_free(&lk->plan);
    lms_iteration_clear(&lk->iteration);
    free(lk->end_ns);
    lk->end_ns = NULL;
    lk->trial = 0;
    lk->choosing = lk->chosen = 0;
    lk->state = LEARNING;
}

/* The recorded iteration becomes the known one; the record just closed is its last step. */
static void know_iteration(lookahead *lk)
{
    if (!lms_iteration_index(&lk->iteration) ||
        !lms_fenwick_init(&lk->resident_by_use, 2 * lk->length)) {
        forget_iteration(lk);
        return;
    }
    lk->start = lk->record + 1 - lk->length;
    lk->state = KNOWN;
    lk->generation++;
    size_t at = 0;
    for (entry *e; (e = next_entry(lk, &at));) {
        e->uses = lms_iteration_find(&lk->iteration, e->id);
        index_entry(lk, e);
    }
}

/* The step being told of is complete: check it against the iteration, or learn from it. */
static void close_record(lookahead *lk)
{
    uint64_t confirmed = lms_period_feed(&lk->period, lms_mix64(lk->fingerprint + lk->id_count));
    switch (lk->state) {
    case KNOWN:
        if (lk->id_count - lk->strays != lms_iteration_step_size(&lk->iteration, position(lk, lk->record)))
            forget_iteration(lk);
        return;
    case RECORDING:
        if (confirmed != lk->length || !lms_iteration_add_step(&lk->iteration, lk->ids, lk->id_count))
            forget_iteration(lk);
        else if (lk->iteration.length == lk->length)
            know_iteration(lk);
        return;
    case LEARNING:
        if (confirmed) {
            lk->state = RECORDING;
            lk->length = confirmed;
        }
        return;
    }
}

/* Counts e in the step being told of. Returns 0 when memory for recording it is short. */
static int count_use(lookahead *lk, entry *e)
{
    e->counted = lk->record;
    lk->fingerprint += lms_mix64(e->id);
    lk->id_count++;
    if (lk->state == RECORDING) {
        if (lk->id_count > lk->id_cap) {
            size_t cap = lk->id_cap ? lk->id_cap * 2 : 64;
            lms_alloc_id *grown = realloc(lk->ids, cap * sizeof *grown);
            if (!grown)
                return 0;
            lk->ids = grown;
            lk->id_cap = cap;
        }
        lk->ids[lk->id_count - 1] = e->id;
    } else if (lk->state == KNOWN) {
        int used_here = 0;
        if (e->uses)
            lms_iteration_until_next(&lk->iteration, e->uses, position(lk, lk->record), &used_here);
        lk->strays += !used_here;
    }
    return 1;
}

/* Whether the coming steps are the iteration's: it is known, and the step told of last used
 * all it should (one that used fewer is found out at the latest when the next begins). */
static int predicting(const lookahead *lk)
{
    return lk->state == KNOWN &&
           lk->id_count - lk->strays == lms_iteration_step_size(&lk->iteration, position(lk, lk->record));
}

/* ---- the policy ---- */

static lms_policy *lookahead_create(void)
{
    lookahead *lk = calloc(1, sizeof *lk);
    if (!lk)
        return NULL;
    if (!(lk->lru = lms_policy_create("lru"))) {
        free(lk);
        return NULL;
    }
    lk->resident.largest_first = 1; /* the victims: needed furthest ahead first */
    return &lk->base;
}

static void lookahead_destroy(lms_policy *policy)
{
    lookahead *lk = (lookahead *)policy;
    forget_iteration(lk);
    size_t at = 0;
    for (entry *e; (e = next_entry(lk, &at));)
        free(e);
    lms_idmap_free(&lk->by_id);
    lms_heap_free(&lk->resident);
    lms_heap_free(&lk->evicted);
    lms_heap_walk_free(&lk->walk);
    lms_period_free(&lk->period);
    free(lk->ids);
    lms_policy_destroy(lk->lru);
    free(lk);
}

static void lookahead_created(lms_policy *policy, lms_alloc_id id, size_t bytes)
{
    lookahead *lk = (lookahead *)policy;
    lms_policy_created(lk->lru, id, bytes);
    entry *e = find(lk, id);
    if (e) {
        detach(lk, e);
    } else {
        if (!(e = calloc(1, sizeof *e)) || !lms_idmap_put(&lk->by_id, id, (uintptr_t)e)) {
            free(e);
            return; /* untracked: never chosen as a victim, which is safe */
        }
        e->id = e->node.tie = id;
        e->node.slot = LMS_HEAP_OUT;
        if (lk->state == KNOWN)
            e->uses = lms_iteration_find(&lk->iteration, id);
    }
    e->bytes = bytes;
    e->resident = 1;
    e->ahead = 0;
    e->touched = lk->record;
    attach(lk, e);
}

static void lookahead_freed(lms_policy *policy, lms_alloc_id id)
{
    lookahead *lk = (lookahead *)policy;
    lms_policy_freed(lk->lru, id);
    entry *e = find(lk, id);
    if (!e)
        return;
    detach(lk, e);
    lms_idmap_remove(&lk->by_id, id);
    free(e);
}

static void lookahead_used(lms_policy *policy, lms_alloc_id id, uint64_t step)
{
    lookahead *lk = (lookahead *)policy;
    lms_policy_used(lk->lru, id, step);
    entry *e = find(lk, id);
    if (!e)
        return; /* not an allocation the policy manages: not part of the sequence */
    if (lk->record == 0 || step != lk->step) {
        if (lk->record)
            close_record(lk);
        lk->step = step;
        lk->record++;
        lk->id_count = lk->strays = 0;
        lk->fingerprint = 0;
    }
    if (e->counted == lk->record)
        return;
    if (!count_use(lk, e))
        forget_iteration(lk);
    if (e->ahead)
        lk->ahead_bytes -= e->bytes;
    e->ahead = 0;
    e->touched = lk->record;
    if (lk->state == KNOWN)
        refile(lk, e);
}

static void lookahead_evicted(lms_policy *policy, lms_alloc_id id)
{
    lookahead *lk = (lookahead *)policy;
    lms_policy_evicted(lk->lru, id);
    entry *e = find(lk, id);
    if (!e || !e->resident)
        return;
    detach(lk, e);
    e->resident = e->ahead = 0;
    attach(lk, e);
}

static void lookahead_restored(lms_policy *policy, lms_alloc_id id)
{
    lookahead *lk = (lookahead *)policy;
    lms_policy_restored(lk->lru, id);
    entry *e = find(lk, id);
    if (!e || e->resident)
        return;
    detach(lk, e);
    e->resident = e->ahead = 1;
    e->touched = lk->record;
    attach(lk, e);
}

static size_t lookahead_choose_victims(lms_policy *policy, size_t bytes,
                                       int (*keep)(void *ctx, lms_alloc_id id), void *ctx,
                                       lms_alloc_id *victims, size_t max)
{
    lookahead *lk = (lookahead *)policy;
    if (!predicting(lk) || !lms_heap_walk_start(&lk->walk, &lk->resident))
        return lms_policy_choose_victims(lk->lru, bytes, keep, ctx, victims, max);
    lms_victims v = lms_victims_start(bytes, keep, ctx, victims, max);
    for (lms_heap_node *n; lms_victims_wanted(&v) && (n = lms_heap_walk_next(&lk->walk));)
        lms_victims_offer(&v, entry_of(n)->id, entry_of(n)->bytes);
    return v.count;
}

static size_t lookahead_prefetch(lms_policy *policy, uint64_t next_step, size_t room, size_t window,
                                 lms_alloc_id *restore, size_t max)
{
    (void)next_step; /* the answer is for the steps after the last one told of */
    lookahead *lk = (lookahead *)policy;
    if (!predicting(lk) || !lms_heap_walk_start(&lk->walk, &lk->evicted))
        return 0;
    /* Restoring e displaces the resident allocations needed after it (and those never
     * needed): what is needed up to its use, e included, must fit in room + resident. */
    uint64_t budget = room > UINT64_MAX - lk->resident_bytes ? UINT64_MAX : room + lk->resident_bytes;
    uint64_t listed = 0;
    size_t count = 0;
    for (lms_heap_node *n; count < max && (n = lms_heap_walk_next(&lk->walk));) {
        entry *e = entry_of(n);
        if (n->key >= NEVER_BASE)
            break;
        uint64_t needed = resident_needed_by(lk, n->key) + listed + e->bytes;
        if (needed > budget || lk->ahead_bytes + listed + e->bytes > window)
            break;
        restore[count++] = e->id;
        listed += e->bytes;
    }
    return count;
}

/* The plan is made again when the capacity falls below the one it was made for, or rises past
 * it by more than a sixteenth: not on every small allocation the caller makes. */
static int plan_fits(const lms_plan *plan, size_t capacity)
{
    return plan->evicts && capacity <= plan->capacity + plan->capacity / 16 && capacity >= plan->capacity;
}

/* The candidate whose plan the one in use makes. */
static size_t planned_as(const lookahead *lk)
{
    return lk->trial == ROOMLESS ? lk->fastest : lk->trial;
}

static int make_plan(lookahead *lk, size_t capacity)
{
    uint64_t *bytes = calloc(lk->iteration.distinct ? lk->iteration.distinct : 1, sizeof *bytes);
    if (!bytes)
        return 0;
    size_t at = 0;
    for (entry *e; (e = next_entry(lk, &at));)
        if (e->uses)
            bytes[e->uses - lk->iteration.uses] = e->bytes;
    size_t as = planned_as(lk);
    const struct idle_rule rule = as ? IDLE_RULES[as - 1] : (struct idle_rule){ 0, 0 };
    const lms_plan_times times = { lk->end_ns, lk->copy_ns_per_byte, rule.copies, rule.from_cycle };
    int made = lms_plan_make(&lk->plan, &lk->iteration, bytes, capacity, as ? &times : NULL);
    lk->plan_from = iteration_of(lk, lk->record);
    free(bytes);
    return made;
}

static size_t lookahead_evict_after_step(lms_policy *policy, size_t capacity, lms_alloc_id *victims, size_t max)
{
    lookahead *lk = (lookahead *)policy;
    if (!predicting(lk) || (!plan_fits(&lk->plan, capacity) && !make_plan(lk, capacity)))
        return 0;
    uint64_t at = position(lk, lk->record), iteration = iteration_of(lk, lk->record) - lk->plan_from;
    const lms_iteration *it = &lk->iteration;
    size_t count = 0;
    for (size_t i = it->first[at]; i < it->first[at + 1] && count < max; i++) {
        entry *e = find(lk, it->ids[i]);
        if (e && e->resident && e->uses && lms_plan_evicts_after(&lk->plan, it, e->uses, at, iteration))
            victims[count++] = e->id;
    }
    return count;
}

static size_t lookahead_steps_to_time(lms_policy *policy, uint64_t *generation)
{
    lookahead *lk = (lookahead *)policy;
    if (!predicting(lk) || lk->end_ns || !lms_plan_applies(&lk->plan))
        return 0; /* no plan (a step needs more than the capacity): no candidate differs */
    *generation = lk->generation;
    lk->timed_from = lk->record + 1;
    return lk->length;
}

static void lookahead_step_times(lms_policy *policy, uint64_t generation, const uint64_t *took_ns, size_t count,
                                 double copy_ns_per_byte)
{
    lookahead *lk = (lookahead *)policy;
    if (lk->state != KNOWN || generation != lk->generation || count != lk->length || lk->end_ns ||
        !(copy_ns_per_byte > 0) || !(lk->end_ns = calloc(lk->length, sizeof *lk->end_ns)))
        return;
    for (size_t i = 0; i < count; i++)
        lk->end_ns[position(lk, lk->timed_from + i)] = took_ns[i];
    for (size_t p = 1; p < lk->length; p++)
        lk->end_ns[p] += lk->end_ns[p - 1]; /* from durations to ends */
    lk->copy_ns_per_byte = copy_ns_per_byte;
    lk->trial = 0; /* Belady's plan, in use already: timed from the next start */
    lk->trial_from = lk->starts;
    lk->trial_timed = 0;
    memset(lk->trial_ns, 0, sizeof lk->trial_ns);
    lk->choosing = 1;
}

/* Switches to candidate `trial`: its plan is made at the next call for one. */
static void try_plan(lookahead *lk, size_t trial)
{
    lk->trial = trial;
    lk->trial_from = lk->starts;
    lk->trial_timed = 0;
    lms_plan_free(&lk->plan);
}

static uint64_t lookahead_iteration_begins(lms_policy *policy)
{
    lookahead *lk = (lookahead *)policy;
    if (!lk->choosing || !predicting(lk) || position(lk, lk->record) != 0)
        return 0;
    return ++lk->starts;
}

static void lookahead_iteration_took(lms_policy *policy, uint64_t ordinal, uint64_t ns)
{
    lookahead *lk = (lookahead *)policy;
    if (!lk->choosing || ordinal <= lk->trial_from + 1)
        return; /* its plan took over in that iteration, and the next still inherits that one's
                   state: the one after is the first that is all its own */
    lk->trial_ns[lk->trial] += ns;
    if (++lk->trial_timed < lk->plan.period)
        return;
    lk->trial_ns[lk->trial] /= lk->trial_timed;
    if (lk->trial == 0)
        lk->belady_period = lk->trial_timed;
    if (lk->trial + 1 < ROOMLESS) {
        try_plan(lk, lk->trial + 1);
        return;
    }
    if (lk->trial + 1 == ROOMLESS) {
        lk->fastest = 0;
        for (size_t t = 1; t < ROOMLESS; t++)
            if (lk->trial_ns[t] < lk->trial_ns[lk->fastest])
                lk->fastest = t;
        try_plan(lk, ROOMLESS);
        return;
    }
    try_plan(lk, lk->trial_ns[ROOMLESS] < lk->trial_ns[lk->fastest] ? ROOMLESS : lk->fastest);
    lk->choosing = 0;
    lk->chosen = 1;
}

#define FROM_CYCLE " from Belady's cycle"

static int lookahead_plan_chosen(lms_policy *policy, char *line, size_t size)
{
    lookahead *lk = (lookahead *)policy;
    if (!lk->chosen)
        return 0;
    lk->chosen = 0;
    size_t as = planned_as(lk);
    int n = as ? snprintf(line, size, "kept the plan of victims idle %gx their copy out%s%s", IDLE_RULES[as - 1].copies,
                          IDLE_RULES[as - 1].from_cycle ? FROM_CYCLE : "",
                          lk->trial == ROOMLESS ? ", with no room kept free" : "")
               : snprintf(line, size, "kept Belady's plan%s", lk->trial == ROOMLESS ? " with no room kept free" : "");
    for (size_t t = 0; t < CANDIDATES && n >= 0 && (size_t)n < size; t++) {
        int more;
        if (t == ROOMLESS)
            more = snprintf(line + n, size - (size_t)n, "; with no room kept free %.3f ms", (double)lk->trial_ns[t] / 1e6);
        else if (t)
            more = snprintf(line + n, size - (size_t)n, "%s%gx%s %.3f ms", t == 1 ? "; idle " : ", ",
                            IDLE_RULES[t - 1].copies, IDLE_RULES[t - 1].from_cycle ? FROM_CYCLE : "",
                            (double)lk->trial_ns[t] / 1e6);
        else if (lk->belady_period > 1)
            more = snprintf(line + n, size - (size_t)n, " (iterations timed: Belady's %.3f ms, over its cycle of %llu",
                            (double)lk->trial_ns[0] / 1e6, (unsigned long long)lk->belady_period);
        else
            more = snprintf(line + n, size - (size_t)n, " (iterations timed: Belady's %.3f ms", (double)lk->trial_ns[0] / 1e6);
        n = more < 0 ? more : n + more;
    }
    if (n >= 0 && (size_t)n < size)
        snprintf(line + n, size - (size_t)n, ")");
    return 1;
}

static int lookahead_plans(const lms_policy *policy)
{
    const lookahead *lk = (const lookahead *)policy;
    return predicting(lk) && lms_plan_applies(&lk->plan);
}

static double lookahead_room_to_keep(const lms_policy *policy)
{
    const lookahead *lk = (const lookahead *)policy;
    if (lk->state != KNOWN)
        return 0;
    if (!lookahead_plans(policy))
        return ROOM_SHARE;
    return lk->trial == ROOMLESS ? 0 : ROOM_SHARE_PLANNED;
}

static int lookahead_at_iteration_start(const lms_policy *policy)
{
    const lookahead *lk = (const lookahead *)policy;
    return predicting(lk) && position(lk, lk->record) == 0;
}

static int lookahead_predicts(const lms_policy *policy)
{
    return ((const lookahead *)policy)->state == KNOWN;
}

static uint64_t lookahead_period(const lms_policy *policy)
{
    const lookahead *lk = (const lookahead *)policy;
    return lk->state == KNOWN ? lk->length : 0;
}

static uint64_t lookahead_reuse_after_next(const lms_policy *policy, lms_alloc_id id)
{
    const lookahead *lk = (const lookahead *)policy;
    const entry *e = predicting(lk) ? find(lk, id) : NULL;
    if (!e || !e->uses)
        return UINT64_MAX;
    int used_here;
    return lms_iteration_until_next(&lk->iteration, e->uses, position(lk, lk->record + 1), &used_here);
}

const lms_policy_ops lms_policy_lookahead_ops = {
    .name = "lookahead",
    .create = lookahead_create,
    .destroy = lookahead_destroy,
    .created = lookahead_created,
    .freed = lookahead_freed,
    .used = lookahead_used,
    .evicted = lookahead_evicted,
    .restored = lookahead_restored,
    .choose_victims = lookahead_choose_victims,
    .prefetch = lookahead_prefetch,
    .predicts = lookahead_predicts,
    .at_iteration_start = lookahead_at_iteration_start,
    .period = lookahead_period,
    .reuse_after_next = lookahead_reuse_after_next,
    .evict_after_step = lookahead_evict_after_step,
    .steps_to_time = lookahead_steps_to_time,
    .step_times = lookahead_step_times,
    .iteration_begins = lookahead_iteration_begins,
    .iteration_took = lookahead_iteration_took,
    .plan_chosen = lookahead_plan_chosen,
    .plans = lookahead_plans,
    .room_to_keep = lookahead_room_to_keep,
};
