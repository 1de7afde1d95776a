/* Dispatch from the policy interface to the policy chosen by name. */
#include "policy/policy_impl.h"

#include <string.h>

static const lms_policy_ops *const policies[] = { &lms_policy_lru_ops, &lms_policy_lookahead_ops };

const char *const lms_policy_names[] = { "lru", "lookahead", NULL };

lms_policy *lms_policy_create(const char *name)
{
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++)
        if (strcmp(policies[i]->name, name) == 0) {
            lms_policy *policy = policies[i]->create();
            if (policy)
                policy->ops = policies[i];
            return policy;
        }
    return NULL;
}

void lms_policy_destroy(lms_policy *policy)
{
    if (policy)
        policy->ops->destroy(policy);
}

const char *lms_policy_name(const lms_policy *policy) { return policy->ops->name; }

void lms_policy_created(lms_policy *policy, lms_alloc_id id, size_t bytes)
{
    policy->ops->created(policy, id, bytes);
}

void lms_policy_freed(lms_policy *policy, lms_alloc_id id) { policy->ops->freed(policy, id); }

void lms_policy_used(lms_policy *policy, lms_alloc_id id, uint64_t step)
{
    policy->ops->used(policy, id, step);
}

void lms_policy_evicted(lms_policy *policy, lms_alloc_id id) { policy->ops->evicted(policy, id); }

void lms_policy_restored(lms_policy *policy, lms_alloc_id id) { policy->ops->restored(policy, id); }

size_t lms_policy_choose_victims(lms_policy *policy, size_t bytes,
                                 int (*keep)(void *ctx, lms_alloc_id id), void *ctx,
                                 lms_alloc_id *victims, size_t max)
{
    return policy->ops->choose_victims(policy, bytes, keep, ctx, victims, max);
}

int lms_policy_predicts(const lms_policy *policy) { return policy->ops->predicts(policy); }

int lms_policy_at_iteration_start(const lms_policy *policy)
{
    return policy->ops->at_iteration_start ? policy->ops->at_iteration_start(policy) : 0;
}

uint64_t lms_policy_period(const lms_policy *policy)
{
    return policy->ops->period ? policy->ops->period(policy) : 0;
}

uint64_t lms_policy_reuse_after_next(const lms_policy *policy, lms_alloc_id id)
{
    return policy->ops->reuse_after_next ? policy->ops->reuse_after_next(policy, id) : UINT64_MAX;
}

size_t lms_policy_prefetch(lms_policy *policy, uint64_t next_step, lms_alloc_id *restore, size_t max)
{
    return policy->ops->prefetch(policy, next_step, SIZE_MAX, SIZE_MAX, restore, max);
}

size_t lms_policy_prefetch_within(lms_policy *policy, uint64_t next_step, size_t room, size_t window,
                                  lms_alloc_id *restore, size_t max)
{
    return policy->ops->prefetch(policy, next_step, room, window, restore, max);
}

size_t lms_policy_evict_after_step(lms_policy *policy, size_t capacity, lms_alloc_id *victims, size_t max)
{
    return policy->ops->evict_after_step ? policy->ops->evict_after_step(policy, capacity, victims, max) : 0;
}

int lms_policy_plans(const lms_policy *policy)
{
    return policy->ops->plans ? policy->ops->plans(policy) : 0;
}

double lms_policy_room_to_keep(const lms_policy *policy)
{
    return policy->ops->room_to_keep ? policy->ops->room_to_keep(policy) : 0;
}

size_t lms_policy_steps_to_time(lms_policy *policy, uint64_t *generation)
{
    *generation = 0;
    return policy->ops->steps_to_time ? policy->ops->steps_to_time(policy, generation) : 0;
}

void lms_policy_step_times(lms_policy *policy, uint64_t generation, const uint64_t *took_ns, size_t count,
                           double copy_ns_per_byte)
{
    if (policy->ops->step_times)
        policy->ops->step_times(policy, generation, took_ns, count, copy_ns_per_byte);
}

uint64_t lms_policy_iteration_begins(lms_policy *policy)
{
    return policy->ops->iteration_begins ? policy->ops->iteration_begins(policy) : 0;
}

void lms_policy_iteration_took(lms_policy *policy, uint64_t ordinal, uint64_t ns)
{
    if (policy->ops->iteration_took)
        policy->ops->iteration_took(policy, ordinal, ns);
}

int lms_policy_plan_chosen(lms_policy *policy, char *line, size_t size)
{
    return policy->ops->plan_chosen ? policy->ops->plan_chosen(policy, line, size) : 0;
}
