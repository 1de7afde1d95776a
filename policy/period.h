/* Finds the period of a stream of steps: how many steps a training loop's iteration takes.
 *
 * The caller feeds one fingerprint per step (a hash of what the step used). Candidate periods
 * come from where the same fingerprint occurred before: its latest occurrences, not only the
 * last one, since a step may recur inside an iteration. Each candidate d counts the steps in a
 * row that equal the step d earlier and is dropped at the first that does not. d is confirmed
 * once that run covers a whole iteration, that is the last d steps are the d before them once
 * more, and at least LMS_PERIOD_MIN_RUN steps, so that a few identical steps in a row do not
 * pass for a loop. Of the confirmed periods the one whose run is longest is the loop's (a
 * burst of short repeats inside an iteration holds only while it lasts), the shortest among
 * equal runs. Fingerprints are kept for the latest steps only, in a ring that grows while
 * nothing is confirmed, up to LMS_PERIOD_MAX steps. */
#ifndef LMS_POLICY_PERIOD_H
#define LMS_POLICY_PERIOD_H

#include "policy/idmap.h"

#include <stddef.h>
#include <stdint.h>

#define LMS_PERIOD_MAX ((uint64_t)1 << 17)   /* the longest period found, in steps */
#define LMS_PERIOD_MIN_RUN 16
#define LMS_PERIOD_CANDIDATES 8              /* periods checked at once */
#define LMS_PERIOD_LOOKBACK 8                /* earlier occurrences of a step that propose one */

typedef struct lms_period_step {
    uint64_t fingerprint;
    uint64_t previous;   /* the step before it with the same fingerprint; UINT64_MAX: none */
} lms_period_step;

typedef struct lms_period_candidate {
    uint64_t period;
    uint64_t run;        /* steps in a row equal to the step `period` earlier */
} lms_period_candidate;

typedef struct lms_period {
    lms_period_step *ring;   /* step i at i % cap, for the latest steps, at most cap */
    uint64_t cap;            /* a power of two */
    uint64_t kept_from;      /* the oldest step the ring holds */
    uint64_t count;          /* steps fed */
    lms_idmap latest;        /* fingerprint -> its latest step still in the ring */
    lms_period_candidate candidates[LMS_PERIOD_CANDIDATES];
    size_t candidate_count;
    uint64_t confirmed;      /* what the last feed returned */
} lms_period;

/* A zeroed lms_period is ready to use. */
void lms_period_free(lms_period *period);

/* Feeds the next step. Returns the confirmed period that has held longest, 0 while there is
 * none. */
uint64_t lms_period_feed(lms_period *period, uint64_t fingerprint);

#endif
