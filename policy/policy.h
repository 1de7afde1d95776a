/* Eviction and prefetch policies, behind one interface.
 *
 * Pure C with no CUDA: the same code decides evictions inside liblms and replays recorded
 * traces in the offline tools (lms-trace tune), so a prediction made offline is exactly
 * what the library would have done. The caller names allocations by any 64-bit id it
 * likes (liblms uses the device address) and tells the policy what happens to them; the
 * policy only ever answers questions. Not thread-safe: the caller serialises. */
#ifndef LMS_POLICY_H
#define LMS_POLICY_H

#include <stddef.h>
#include <stdint.h>

typedef uint64_t lms_alloc_id;
typedef struct lms_policy lms_policy;

/* Names accepted by lms_policy_create, NULL-terminated ("lru" first: the default). */
extern const char *const lms_policy_names[];

/* NULL when the name is unknown. */
lms_policy *lms_policy_create(const char *name);
void lms_policy_destroy(lms_policy *policy);
const char *lms_policy_name(const lms_policy *policy);

/* Life of an allocation. A created allocation is resident. */
void lms_policy_created(lms_policy *policy, lms_alloc_id id, size_t bytes);
void lms_policy_freed(lms_policy *policy, lms_alloc_id id);
/* Launch (or copy, or memset) number `step` used it. Steps never decrease. */
void lms_policy_used(lms_policy *policy, lms_alloc_id id, uint64_t step);
void lms_policy_evicted(lms_policy *policy, lms_alloc_id id);
void lms_policy_restored(lms_policy *policy, lms_alloc_id id);

/* Chooses resident allocations to evict so that at least `bytes` are freed, best victim
 * first, skipping those for which keep(ctx, id) is non-zero (the ones the current call
 * needs). Writes at most `max` ids to victims and returns how many it wrote; fewer bytes
 * than asked means nothing else can go. The policy's state does not change until the
 * caller reports lms_policy_evicted for each victim it really evicted. */
size_t lms_policy_choose_victims(lms_policy *policy, size_t bytes,
                                 int (*keep)(void *ctx, lms_alloc_id id), void *ctx,
                                 lms_alloc_id *victims, size_t max);

/* Evicted allocations worth restoring before step `next_step` needs them, most urgent
 * first; at most `max`. LRU predicts nothing and returns 0. */
size_t lms_policy_prefetch(lms_policy *policy, uint64_t next_step,
                           lms_alloc_id *restore, size_t max);

#endif
