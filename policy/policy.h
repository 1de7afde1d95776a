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

/* Names accepted by lms_policy_create, NULL-terminated ("lru" first: the default).
 *   lru        the resident allocation used least recently goes first
 *   lookahead  learns the sequence of steps a training loop repeats, then evicts what is
 *              needed furthest in the future, names what to prefetch, and plans which
 *              allocations to evict right after a step (plan.h), keeping of its candidate
 *              plans the one the device runs fastest once timed; LRU until it has learned one,
 *              and again from a step that differs until it has relearned */
extern const char *const lms_policy_names[];

/* NULL when the name is unknown. */
lms_policy *lms_policy_create(const char *name);
void lms_policy_destroy(lms_policy *policy);
const char *lms_policy_name(const lms_policy *policy);

/* Life of an allocation. A created allocation is resident. */
void lms_policy_created(lms_policy *policy, lms_alloc_id id, size_t bytes);
void lms_policy_freed(lms_policy *policy, lms_alloc_id id);
/* Launch (or copy, or memset) number `step` used it. Steps never decrease. lookahead learns
 * from the set each step uses, so tell it all of a step's uses before asking for victims or
 * prefetches for a later step (until then it answers as LRU). */
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

/* Whether the policy knows what the steps after the last one it was told of will use: its
 * victims are then those needed furthest ahead. lookahead knows once it has learned the
 * iteration, until a step differs; lru never does. */
int lms_policy_predicts(const lms_policy *policy);

/* Whether the step told of last is the first of the iteration the policy knows, while it
 * predicts (lru never knows one): where the caller counts one iteration's work as done. */
int lms_policy_at_iteration_start(const lms_policy *policy);

/* The length in steps of the iteration the policy knows, 0 while it knows none (lru never does):
 * it changes when the policy learns a sequence, and falls to 0 when a step departs from it. */
uint64_t lms_policy_period(const lms_policy *policy);

/* Steps from the step after the one told of last (the call about to use `id`) to the
 * allocation's use after that one, in the learned iteration: how soon it is needed again once
 * that call is done. UINT64_MAX where the policy cannot tell (lru, no iteration known, an
 * allocation not in it). */
uint64_t lms_policy_reuse_after_next(const lms_policy *policy, lms_alloc_id id);

/* Evicted allocations worth restoring before step `next_step` needs them, most urgent
 * first; at most `max`. LRU predicts nothing and returns 0; lookahead names those the steps
 * after the last one it was told of need within one iteration, soonest needed first. */
size_t lms_policy_prefetch(lms_policy *policy, uint64_t next_step,
                           lms_alloc_id *restore, size_t max);

/* The resident allocations whose use in the step told of last is, in the learned iteration
 * replayed with Belady's choice in `capacity` bytes, their last before that choice evicts
 * them: evicting them as soon as that step's work is queued moves no more bytes than evicting
 * them when room is needed, and the room is there before any restore waits for it. lookahead
 * while it predicts; none otherwise. At most `max`. */
size_t lms_policy_evict_after_step(lms_policy *policy, size_t capacity, lms_alloc_id *victims, size_t max);

/* Whether lms_policy_evict_after_step names victims at all: the plan it made last applies. */
int lms_policy_plans(const lms_policy *policy);

/* The share of the capacity to keep free after each step, by evicting ahead what
 * lms_policy_choose_victims names: restores then find room at once, and their copies overlap
 * the kernels before the call that needs them. 0: none. lookahead asks for an eighth while it
 * predicts, a twentieth with a plan, and none with the plan its trial found faster so; LRU,
 * which evicts what is soon needed again, for none. */
double lms_policy_room_to_keep(const lms_policy *policy);

/* The device's timing of the learned iteration, for lookahead's plan (plan.h): how many steps,
 * from the next one told of on, the policy wants the times of (the iteration's length), or 0
 * when it wants none: it does not predict, or has the times of the iteration it knows.
 * *generation names that iteration. The caller measures that many steps in a row on the
 * device, each from when its work starts to when it ends (leaving out what it waits for), and
 * gives them with lms_policy_step_times. */
size_t lms_policy_steps_to_time(lms_policy *policy, uint64_t *generation);
/* Their times (ns, in order) and a copy's time per byte between host and device, one way, as
 * measured. Ignored unless `count` steps were asked for `generation`, the iteration known
 * now. From then on the plan uses them. */
void lms_policy_step_times(lms_policy *policy, uint64_t generation, const uint64_t *took_ns, size_t count,
                           double copy_ns_per_byte);

/* With the times, lookahead has candidate plans (plan.h) and keeps the fastest, timed on the
 * device: whether the step told of last begins the learned iteration while it times them,
 * as its ordinal (from 1; 0: not a start, or nothing to time). The caller marks when that
 * step's work starts on the device, and gives the time from one start to the next, with the
 * first's ordinal, once both marks have passed. */
uint64_t lms_policy_iteration_begins(lms_policy *policy);
void lms_policy_iteration_took(lms_policy *policy, uint64_t ordinal, uint64_t ns);
/* Once, right after the candidates have been timed and one kept: writes which, and each one's
 * time, into line (for the caller's log) and returns 1; else 0. */
int lms_policy_plan_chosen(lms_policy *policy, char *line, size_t size);

/* How far ahead to prefetch: lms_policy_prefetch's answer, cut before the first allocation
 * that would pass either limit, for a caller that restores the answer in order, making room
 * for each with lms_policy_choose_victims.
 *   room    device memory (bytes) free for restores now. Beyond it a restore displaces
 *           resident allocations, and only those needed after every allocation named so far
 *           (or never) may go; lms_policy_choose_victims names those first, so nothing needed
 *           sooner than what comes back is evicted for it.
 *   window  bytes brought back ahead of need: those restored and not used since, and those
 *           named. Going further ahead than the copies need to hide behind compute fills the
 *           memory with what is needed soon and evicts more: on a training loop in 40% of
 *           its memory, a window of four allocations takes every restore off the steps for 5%
 *           more copies, no window costs twice the copies.
 * The policy counts every allocation it was told of: give each device a policy of its own. */
size_t lms_policy_prefetch_within(lms_policy *policy, uint64_t next_step, size_t room,
                                  size_t window, lms_alloc_id *restore, size_t max);

#endif
