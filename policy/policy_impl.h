/* What a policy implements: one table of functions behind lms_policy (see policy.h). */
#ifndef LMS_POLICY_IMPL_H
#define LMS_POLICY_IMPL_H

#include "policy/policy.h"

typedef struct lms_policy_ops {
    const char *name;
    lms_policy *(*create)(void);
    void (*destroy)(lms_policy *policy);
    void (*created)(lms_policy *policy, lms_alloc_id id, size_t bytes);
    void (*freed)(lms_policy *policy, lms_alloc_id id);
    void (*used)(lms_policy *policy, lms_alloc_id id, uint64_t step);
    void (*evicted)(lms_policy *policy, lms_alloc_id id);
    void (*restored)(lms_policy *policy, lms_alloc_id id);
    size_t (*choose_victims)(lms_policy *policy, size_t bytes,
                             int (*keep)(void *ctx, lms_alloc_id id), void *ctx,
                             lms_alloc_id *victims, size_t max);
    size_t (*prefetch)(lms_policy *policy, uint64_t next_step, size_t room, size_t window,
                       lms_alloc_id *restore, size_t max);
    int (*predicts)(const lms_policy *policy);
    int (*at_iteration_start)(const lms_policy *policy);
    uint64_t (*period)(const lms_policy *policy);
    uint64_t (*reuse_after_next)(const lms_policy *policy, lms_alloc_id id);
    int (*plans)(const lms_policy *policy);
    double (*room_to_keep)(const lms_policy *policy);
    size_t (*evict_after_step)(lms_policy *policy, size_t capacity, lms_alloc_id *victims, size_t max);
    size_t (*steps_to_time)(lms_policy *policy, uint64_t *generation);
    void (*step_times)(lms_policy *policy, uint64_t generation, const uint64_t *took_ns, size_t count,
                       double copy_ns_per_byte);
    uint64_t (*iteration_begins)(lms_policy *policy);
    void (*iteration_took)(lms_policy *policy, uint64_t ordinal, uint64_t ns);
    int (*plan_chosen)(lms_policy *policy, char *line, size_t size);
} lms_policy_ops;

/* Every policy's state starts with this header, so lms_policy_* can dispatch. */
struct lms_policy {
    const lms_policy_ops *ops;
};

extern const lms_policy_ops lms_policy_lru_ops;
extern const lms_policy_ops lms_policy_lookahead_ops;

#endif
