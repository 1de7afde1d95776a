/* Measuring the learned iteration on the device (step_times.h). */
#include "preload/step_times.h"

#include "policy/policy.h"
#include "preload/log.h"
#include "preload/options.h"
#include "preload/real_driver.h"

#include <stdlib.h>

/* An iteration longer than this is not measured: its plan stays Belady's. */
#define MAX_STEPS 65536

/* Measurements of one iteration that failed before it is left to Belady's plan. */
#define TRIES 3

static struct measurement {
    uint64_t given_up;     /* the policy's iteration whose measurement broke: not tried again */
    uint64_t generation;   /* the policy's iteration being measured */
    unsigned failed;       /* measurements of it that failed so far */
    size_t wanted;         /* steps asked for; 0: no measurement runs */
    size_t begun, ended;   /* steps whose start, and whose end, are marked */
    size_t read;           /* steps whose times are read */
    CUevent *marks;        /* each step's start, then its end */
    uint64_t *took;        /* the steps' times, as read */
    uint64_t copy_ns;      /* the copy out's, once read; 0 before */
} measuring[LMS_MAX_DEVICES];

static void destroy_events(CUevent *events, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (events[i])
            lms_real.cuEventDestroy_v2(events[i]);
}

static void stop(lms_device *dev, int device, int gone)
{
    struct measurement *m = &measuring[device];
    if (m->marks && !gone)
        destroy_events(m->marks, 2 * m->wanted);
    free(m->marks);
    free(m->took);
    *m = (struct measurement){ .given_up = m->given_up, .generation = m->generation, .failed = m->failed };
    if (!gone && dev->timed_copy.start) {
        CUevent copy[] = { dev->timed_copy.start, dev->timed_copy.end };
        destroy_events(copy, 2);
    }
    dev->timed_copy.wanted = 0;
    dev->timed_copy.start = dev->timed_copy.end = NULL;
    dev->timed_copy.bytes = 0;
}

/* Events made now, in the current context (the calls' streams are there), before the first
 * is recorded: making one costs far more than recording it. */
static int start(lms_device *dev, int device, size_t wanted, uint64_t generation)
{
    struct measurement *m = &measuring[device];
    if (generation != m->generation)
        m->failed = 0;
    m->generation = generation;
    if (wanted > MAX_STEPS || !(m->marks = calloc(2 * wanted, sizeof *m->marks)) ||
        !(m->took = malloc(wanted * sizeof *m->took))) {
        free(m->marks);
        m->marks = NULL;
        return 0;
    }
    m->wanted = wanted;
    CUresult r = lms_real.cuEventCreate(&dev->timed_copy.start, CU_EVENT_DEFAULT);
    if (r == CUDA_SUCCESS)
        r = lms_real.cuEventCreate(&dev->timed_copy.end, CU_EVENT_DEFAULT);
    for (size_t i = 0; r == CUDA_SUCCESS && i < 2 * wanted; i++)
        r = lms_real.cuEventCreate(&m->marks[i], CU_EVENT_DEFAULT);
    if (r != CUDA_SUCCESS) {
        stop(dev, device, 0);
        return 0;
    }
    dev->timed_copy.wanted = 1;
    return 1;
}

void lms_step_times_before_call(lms_device *dev, int device, CUstream stream)
{
    struct measurement *m = &measuring[device];
    if (m->wanted && m->begun < m->wanted &&
        lms_real.cuEventRecord(m->marks[2 * m->begun++], stream) != CUDA_SUCCESS)
        lms_step_times_break(dev, device);
}

void lms_step_times_after_call(lms_device *dev, int device, CUstream stream)
{
    struct measurement *m = &measuring[device];
    if (!m->wanted) {
        uint64_t generation;
        size_t wanted = lms_policy_steps_to_time(dev->policy, &generation);
        if (wanted && generation != m->given_up && !start(dev, device, wanted, generation))
            m->given_up = generation;
        return; /* the measurement begins with the next call */
    }
    if (m->ended < m->begun && lms_real.cuEventRecord(m->marks[2 * m->ended++ + 1], stream) != CUDA_SUCCESS)
        lms_step_times_break(dev, device);
}

void lms_step_times_break(lms_device *dev, int device)
{
    struct measurement *m = &measuring[device];
    if (m->wanted) {
        m->given_up = m->generation;
        stop(dev, device, 0);
    }
}

/* ns between two events: the driver gives milliseconds, to about half a microsecond, and
 * CUDA_ERROR_NOT_READY until both have completed. */
static CUresult elapsed_ns(CUevent from, CUevent to, uint64_t *ns)
{
    float ms;
    CUresult r = lms_real.cuEventElapsedTime_v2(&ms, from, to);
    if (r == CUDA_SUCCESS && ms < 0)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *ns = (uint64_t)((double)ms * 1e6 + 0.5);
    return r;
}

/* Iteration starts, while the policy times its candidate plans: the latest two marks. */
static struct iteration_marks {
    CUevent event[2];      /* made with timing on first use */
    uint64_t ordinal[2];
    int latest;            /* the index of the latest mark, if any */
    int marked;            /* there is a latest mark */
    int pending;           /* the time from the other mark to the latest is still to give */
} marks[LMS_MAX_DEVICES];

/* Gives the policy the time between the last two marks, once both have passed. */
static void give_iteration(lms_device *dev, int device)
{
    struct iteration_marks *im = &marks[device];
    uint64_t ns;
    int earlier = 1 - im->latest;
    CUresult r = im->pending ? elapsed_ns(im->event[earlier], im->event[im->latest], &ns) : CUDA_ERROR_NOT_READY;
    if (r == CUDA_ERROR_NOT_READY)
        return;
    if (r == CUDA_SUCCESS)
        lms_policy_iteration_took(dev->policy, im->ordinal[earlier], ns);
    im->pending = 0;
    char line[256];
    if (lms_policy_plan_chosen(dev->policy, line, sizeof line))
        lms_log(LMS_LOG_INFO, device, "plan: %s", line);
}

void lms_step_times_iteration_mark(lms_device *dev, int device, CUstream stream)
{
    uint64_t ordinal = lms_policy_iteration_begins(dev->policy);
    if (!ordinal)
        return;
    struct iteration_marks *im = &marks[device];
    give_iteration(dev, device);
    int next = im->marked ? 1 - im->latest : 0;
    if ((!im->event[next] && lms_real.cuEventCreate(&im->event[next], CU_EVENT_DEFAULT) != CUDA_SUCCESS) ||
        lms_real.cuEventRecord(im->event[next], stream) != CUDA_SUCCESS) {
        im->marked = im->pending = 0; /* the next mark starts afresh */
        return;
    }
    im->pending = im->marked; /* one not given by now is lost: the policy takes a later one */
    im->ordinal[next] = ordinal;
    im->latest = next;
    im->marked = 1;
}

/* Reads the times as their events complete; the program's calls may run on several streams,
 * so the last to be recorded is not always the last to complete. */
void lms_step_times_collect(lms_device *dev, int device)
{
    give_iteration(dev, device);
    struct measurement *m = &measuring[device];
    if (!m->wanted || m->ended < m->wanted || !dev->timed_copy.bytes)
        return;
    CUresult r = m->copy_ns ? CUDA_SUCCESS : elapsed_ns(dev->timed_copy.start, dev->timed_copy.end, &m->copy_ns);
    while (r == CUDA_SUCCESS && m->read < m->wanted) {
        r = elapsed_ns(m->marks[2 * m->read], m->marks[2 * m->read + 1], &m->took[m->read]);
        m->read += r == CUDA_SUCCESS;
    }
    if (r == CUDA_ERROR_NOT_READY)
        return;
    if (r == CUDA_SUCCESS && m->copy_ns > 0)
        lms_policy_step_times(dev->policy, m->generation, m->took, m->wanted,
                              (double)m->copy_ns / (double)dev->timed_copy.bytes);
    else if (++m->failed >= TRIES)
        m->given_up = m->generation;
    stop(dev, device, 0);
}

void lms_step_times_forget(lms_device *dev, int device, int gone)
{
    stop(dev, device, gone);
    measuring[device].given_up = 0;
    struct iteration_marks *im = &marks[device];
    if (!gone)
        destroy_events(im->event, 2);
    *im = (struct iteration_marks){ 0 };
}
