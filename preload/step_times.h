/* Measuring, on the device, how long each step of the learned iteration takes and how fast a
 * copy out goes, for the policy's plan (policy/plan.h: of the victims whose copy out has had
 * time to finish, the one needed furthest ahead). Once per learned iteration, for as many calls
 * in a row as the policy asks, events with timing go on each call's stream before and after its
 * work, so that a step's time leaves out what it waited for, and the next eviction's copy goes
 * between two more. A call that reaches another device, or is captured, breaks the row: that
 * iteration keeps Belady's plan. Nothing waits for the events: their times are read as they
 * complete, and go to the policy; a measurement whose times cannot be read is made again, up
 * to three times. Then, while the policy runs its candidate plans, an event marks each
 * iteration's start. All under the device's lock. */
#ifndef LMS_PRELOAD_STEP_TIMES_H
#define LMS_PRELOAD_STEP_TIMES_H

#include "preload/swap.h"

#include <cuda.h>

/* Before a call whose allocations are all on dev's device is queued on stream, once the
 * stream waits for their restores: marks its start while a measurement runs. */
void lms_step_times_before_call(lms_device *dev, int device, CUstream stream);
/* After such a call was queued, in the same context: marks its end while a measurement runs,
 * or starts one the policy wants, from the next call on. */
void lms_step_times_after_call(lms_device *dev, int device, CUstream stream);
/* A call reached more than one device, or was captured: a measurement on dev stops (its steps
 * are no longer in a row), and none starts again for the same iteration. */
void lms_step_times_break(lms_device *dev, int device);
/* After the policy was told of a call's uses, before its work is queued on stream: marks the
 * start of the learned iteration while the policy times its candidate plans. */
void lms_step_times_iteration_mark(lms_device *dev, int device, CUstream stream);
/* Reads the times whose events have completed; gives the policy those of a whole measurement,
 * and of an iteration of its candidate plans. */
void lms_step_times_collect(lms_device *dev, int device);
/* The device's context is going (gone: it died, its events with it). */
void lms_step_times_forget(lms_device *dev, int device, int gone);

#endif
