/* LRU: the resident allocation used least recently goes first.
 *
 * Resident allocations sit on a list from least to most recently used (creation and
 * restore count as a use); evicted ones are off the list until restored. */
#include "policy/policy_impl.h"

#include "policy/idmap.h"
#include "policy/victims.h"

#include <stdlib.h>

typedef struct lru_entry {
    lms_alloc_id id;
    size_t bytes;
    int resident;
    struct lru_entry *older, *newer; /* neighbours on the resident list */
} lru_entry;

typedef struct lru_policy {
    lms_policy base;
    lms_idmap by_id;    /* every live allocation: id -> entry */
    lru_entry *oldest;  /* resident list, least recently used first */
    lru_entry *newest;
} lru_policy;

static void unlink_entry(lru_policy *lru, lru_entry *e)
{
    if (e->older) e->older->newer = e->newer; else lru->oldest = e->newer;
    if (e->newer) e->newer->older = e->older; else lru->newest = e->older;
    e->older = e->newer = NULL;
}

static void push_newest(lru_policy *lru, lru_entry *e)
{
    e->older = lru->newest;
    e->newer = NULL;
    if (lru->newest) lru->newest->newer = e; else lru->oldest = e;
    lru->newest = e;
}

static lru_entry *find(lru_policy *lru, lms_alloc_id id)
{
    const lms_idmap_slot *s = lms_idmap_find(&lru->by_id, id);
    return s ? (lru_entry *)(uintptr_t)s->value : NULL;
}

static lms_policy *lru_create(void)
{
    lru_policy *lru = calloc(1, sizeof *lru);
    return lru ? &lru->base : NULL;
}

static void lru_destroy(lms_policy *policy)
{
    lru_policy *lru = (lru_policy *)policy;
    size_t at = 0;
    for (const lms_idmap_slot *s; (s = lms_idmap_next(&lru->by_id, &at));)
        free((lru_entry *)(uintptr_t)s->value);
    lms_idmap_free(&lru->by_id);
    free(lru);
}

static void lru_created(lms_policy *policy, lms_alloc_id id, size_t bytes)
{
    lru_policy *lru = (lru_policy *)policy;
    lru_entry *e = find(lru, id);
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e || !lms_idmap_put(&lru->by_id, id, (uintptr_t)e)) {
            free(e);
            return; /* untracked: never chosen as a victim, which is safe */
        }
        e->id = id;
    } else if (e->resident) {
        unlink_entry(lru, e);
    }
    e->bytes = bytes;
    e->resident = 1;
    push_newest(lru, e);
}

static void lru_freed(lms_policy *policy, lms_alloc_id id)
{
    lru_policy *lru = (lru_policy *)policy;
    lru_entry *e = find(lru, id);
    if (!e)
        return;
    if (e->resident)
        unlink_entry(lru, e);
    lms_idmap_remove(&lru->by_id, id);
    free(e);
}

static void lru_used(lms_policy *policy, lms_alloc_id id, uint64_t step)
{
    (void)step;
    lru_policy *lru = (lru_policy *)policy;
    lru_entry *e = find(lru, id);
    if (!e || !e->resident)
        return;
    unlink_entry(lru, e);
    push_newest(lru, e);
}

static void lru_evicted(lms_policy *policy, lms_alloc_id id)
{
    lru_policy *lru = (lru_policy *)policy;
    lru_entry *e = find(lru, id);
    if (!e || !e->resident)
        return;
    unlink_entry(lru, e);
    e->resident = 0;
}

static void lru_restored(lms_policy *policy, lms_alloc_id id)
{
    lru_policy *lru = (lru_policy *)policy;
    lru_entry *e = find(lru, id);
    if (!e || e->resident)
        return;
    e->resident = 1;
    push_newest(lru, e);
}

static size_t lru_choose_victims(lms_policy *policy, size_t bytes,
                                 int (*keep)(void *ctx, lms_alloc_id id), void *ctx,
                                 lms_alloc_id *victims, size_t max)
{
    lru_policy *lru = (lru_policy *)policy;
    lms_victims v = lms_victims_start(bytes, keep, ctx, victims, max);
    for (lru_entry *e = lru->oldest; e && lms_victims_wanted(&v); e = e->newer)
        lms_victims_offer(&v, e->id, e->bytes);
    return v.count;
}

static size_t lru_prefetch(lms_policy *policy, uint64_t next_step, size_t room, size_t window,
                           lms_alloc_id *restore, size_t max)
{
    (void)policy; (void)next_step; (void)room; (void)window; (void)restore; (void)max;
    return 0;
}

static int lru_predicts(const lms_policy *policy)
{
    (void)policy;
    return 0;
}

const lms_policy_ops lms_policy_lru_ops = {
    .name = "lru",
    .create = lru_create,
    .destroy = lru_destroy,
    .created = lru_created,
    .freed = lru_freed,
    .used = lru_used,
    .evicted = lru_evicted,
    .restored = lru_restored,
    .choose_victims = lru_choose_victims,
    .prefetch = lru_prefetch,
    .predicts = lru_predicts,
};
