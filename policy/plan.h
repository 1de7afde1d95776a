/* The swap plan of a learned iteration: which uses of an allocation are its last before
 * Belady's choice, replayed on the iteration under a capacity, evicts it. Evicting there, as
 * soon as the use has been queued, moves no more bytes than Belady's choice made at the last
 * moment, and the memory is free long before a restore needs it: the copies out overlap
 * compute instead of standing between a restore and the kernel that waits for it.
 *
 * Belady's plan replays the iteration again and again from an empty device, until an
 * iteration ends with the allocations resident that an earlier one ended with: from there on
 * the replay repeats itself, in a cycle of one iteration or more. Belady's choice often keeps
 * different ones resident from one iteration to the next (in a loop over four allocations
 * with room for three, a different two each time, in a cycle of three), and moves less than
 * the evictions of any one of those iterations would, repeated every iteration; so the plan
 * keeps the cycle's evictions, an iteration's after another. A plan with times (below) keeps
 * the second iteration's, every iteration: its victims are chosen for how their copies
 * overlap, and the iterations of a cycle overlap them unevenly (on the simulated H100, the
 * cycle of four iterations at cifar10_full 1.1x ran from 199k to 273k images/s, where the
 * second iteration's evictions repeated ran at 280k).
 *
 * A step needs all its allocations at once; one that needs more than the capacity evicts
 * every other and overfills it. liblms then leaves some of them in host memory; the replay
 * counts them all resident through that step, and evicts what the next steps need room from
 * right after it, as ever. Allocations a plan names that liblms left in host memory stay
 * there. On the simulated H100 (cifar10_full at 4x, 8x and 12x the cap, unet3d at 352^3),
 * such runs went 0.9-1.4 % faster with a plan than without it, and moved 0.4-1.6 % less. */
#ifndef LMS_POLICY_PLAN_H
#define LMS_POLICY_PLAN_H

#include "policy/iteration.h"

#include <stdint.h>

/* Iterations replayed to find the cycle. Belady's plan is timed over its whole cycle, so a
 * longer one would lengthen the trial of the plans past the warm-up of a run: on the simulated
 * H100, unet3d at N = 192 found a cycle of 9 with 32 passes, kept its plan at iteration 23
 * instead of 15, and ran 6.4 % slower; with 8, of 14 runs (cifar10_full at 1.1-3x the cap,
 * unet3d at N = 192-272), 3 ran 4.6-8.2 % faster and none slower. */
#define LMS_PLAN_MAX_PASSES 8 /* so a cycle's evictions take at most 7 bytes a use recorded:
                                  28 MiB at LMS_ITERATION_MAX_IDS */

/* When the iteration's steps run, as measured on the device, and how fast a copy goes: with
 * them the replay evicts, of the allocations whose copy out has had time to finish since their
 * last use, the one needed furthest ahead. Belady's victim is often one whose last use has
 * just been queued: the restore that waits for its room then waits for its copy out too, and
 * the kernel for both. One idle long enough frees the room in time, though it may be needed
 * sooner and move more bytes: lookahead times both kinds of plan and keeps the faster.
 *
 * Which iteration's evictions such a plan keeps matters too. The second from an empty device
 * starts from what the rule's first left resident, which no later iteration does; with
 * from_cycle the replay runs Belady's choice up to the first iteration of Belady's cycle and
 * keeps that one's evictions, chosen by the rule from the residents Belady's choice settles
 * on. Neither is better everywhere: on the simulated H100 (128 MiB pieces, 2026-11-27), with
 * victims idle for a copy's time, from_cycle ran cifar10_full at 2x 1.1 % faster and unet3d
 * at 208^3 1.9 %, and cifar10_full at 1.1x 6.2 % slower; lookahead times both.
 *
 * With times the replay also follows the link to the device: each allocation it brings back
 * for a step's use takes its copy's time there, ending before the step starts. While a step
 * runs and the link would idle, it brings back ahead the evicted allocation needed soonest, if
 * that one is needed within LMS_PLAN_RESTORE_AHEAD_COPIES of its copy's time and allocations
 * idle long enough and needed after it leave it room; those are evicted for it, after their
 * last uses, as the plan's. Belady's choice keeps all it can of what the next steps need, and
 * what it must bring back then it brings back in a rush: at cifar10_full 1.1x the cap, the
 * gradient of conv1's output went out when conv1's backward, its last use, had ended, and the
 * next iteration's first convolution waited for its own output to come back into that room
 * (8.8 ms of an iteration of 80.9). Here tensors of pool1's size that the backward pass used
 * earlier make the room during that long kernel, and liblms's prefetch finds it free and
 * brings conv1's output back then (cifar10_full at 1.1x 11.0 % faster). */
/* Measured on the simulated H100 (make bench-sim's runs, 2026-11-28), cifar10_full at 1.1x
 * ran 11.0 % faster with 3 to 5, 6.7 % with 6, 9.4 % with 8, and 1.2 % slower with 2; unet3d at
 * 208^3 the same with 2 to 4, 0.5 % faster with 5 to 8. */
#define LMS_PLAN_RESTORE_AHEAD_COPIES 4
typedef struct lms_plan_times {
    const uint64_t *end_ns;  /* per position: when its step ends, from the iteration's start,
                                with no step waiting; end_ns[length - 1] is the iteration's
                                duration */
    double copy_ns_per_byte; /* a copy between host and device, one way */
    double idle_copies;      /* idle long enough: for this many copies of the victim's bytes */
    int from_cycle;          /* keep the evictions of the first iteration of Belady's cycle,
                                not the second from an empty device (above) */
} lms_plan_times;

typedef struct lms_plan {
    uint8_t *evicts;     /* per iteration of the cycle, per use in the iteration's positions
                            order: evicted after it; NULL until the plan is made */
    uint64_t period;     /* iterations in the cycle */
    uint64_t capacity;   /* bytes it was made for */
} lms_plan;

/* Replays the iteration with capacity bytes; bytes[u] is the size of the allocation of
 * it->uses[u]. With times (may be NULL: Belady's choice alone), the victims are those whose
 * copy out fits in the time since their last use, where there are any, and the replay brings
 * back ahead while the link would idle (above). Returns 0 when memory
 * is short (the plan is then empty). */
int lms_plan_make(lms_plan *plan, const lms_iteration *it, const uint64_t *bytes, uint64_t capacity,
                  const lms_plan_times *times);
/* Whether the allocation whose uses are `uses` is evicted after its use at `position` in the
 * plan's `iteration`th iteration (counted from any one: the cycle starts where the caller
 * starts to count). */
int lms_plan_evicts_after(const lms_plan *plan, const lms_iteration *it, const lms_iteration_uses *uses,
                          uint64_t position, uint64_t iteration);
/* Whether the plan was made. */
int lms_plan_applies(const lms_plan *plan);
void lms_plan_free(lms_plan *plan);

#endif
