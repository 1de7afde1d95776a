/* The simulated GPU's clocks: virtual time in nanoseconds, the same on every machine and
 * every run, priced by the constants of calibration.h.
 *
 * Work is scheduled when it is queued, not when the host thread that runs it gets to it:
 * an operation starts once its stream's previous work has ended, the events it waits for
 * have been reached and the engine it needs is free, and it ends after its modelled
 * duration. Each device has one compute engine (kernels, device-to-device copies and
 * memsets, one at a time: real kernels may overlap, the model does not) and a copy engine
 * per direction. The host clock advances by the modelled cost of each driver call, and
 * calls that wait move it to the completion time of what they wait for; the host's own
 * computing between calls is not counted, so that results do not depend on the machine. */
#ifndef LMS_SIM_TIMING_H
#define LMS_SIM_TIMING_H

#include "sim/calibration.h"

#include <stdint.h>

typedef uint64_t sim_ns;

/* A copy overlaps the other direction's last copy, itself in at most four pieces of
 * constant rate, so it has at most eight. */
#define SIM_COPY_SEGMENTS 8

typedef enum sim_engine {
    SIM_ENGINE_COMPUTE,
    SIM_ENGINE_H2D,
    SIM_ENGINE_D2H,
    SIM_ENGINE_COUNT
} sim_engine;

/* One device's engines. */
typedef struct sim_timeline {
    sim_ns free_at[SIM_ENGINE_COUNT];
    sim_ns busy_ns[SIM_ENGINE_COUNT];
    /* The rates of the last copy scheduled in each direction (H2D, D2H) over time, so that
     * a copy in the other direction that overlaps it shares the link. */
    struct sim_copy_profile {
        int count;
        struct { double start, end, rate; } segment[SIM_COPY_SEGMENTS];
    } last_copy[2];
} sim_timeline;

/* The calibration in force (the H100's). */
const sim_calibration *sim_calibration_now(void);

/* Schedules duration_ns of work on the compute engine no earlier than ready; returns the
 * end, and the start in *start. */
sim_ns sim_timeline_compute(sim_timeline *t, sim_ns ready, double duration_ns, sim_ns *start);

/* Schedules a copy of `bytes` on a copy engine (SIM_ENGINE_H2D or _D2H) at `rate` when it
 * has the link to itself. Where it overlaps the last copy scheduled in the other direction,
 * it gets what that one leaves of the bidirectional bandwidth: the copy scheduled first
 * keeps its rate. Returns the end, and the start in *start. */
sim_ns sim_timeline_copy(sim_timeline *t, sim_engine engine, sim_ns ready, double bytes,
                         double rate, sim_ns *start);

/* A kernel's duration: the roofline of its operations and device bytes at the calibrated
 * efficiency, and its bytes in host-located memory at the zero-copy rate, whichever is
 * longest, and no shorter than the shortest kernel. */
double sim_kernel_ns(double flops, double device_bytes, double host_bytes);

#endif
