/* The simulated GPU's clocks: virtual time in nanoseconds, the same on every machine and
 * every run, priced by the constants of calibration.h.
 *
 * Work is scheduled when it is queued, not when the host thread that runs it gets to it:
 * an operation starts once its stream's previous work has ended, the events it waits for
 * have been reached and the engine it needs is free, and it ends after its modelled
 * duration. Each device has one compute engine (kernels, device-to-device copies and
 * memsets, one at a time: real kernels may overlap, the model does not) and copy engines,
 * which share the PCIe link with the work that reaches host memory: a copy takes what the
 * transfers scheduled before it leave of the link, from when its stream lets it start, so a
 * copy still waiting on its stream holds back none queued after it on another (as measured on
 * the H100, which has three copy engines). The host clock advances by the modelled cost of
 * each driver call, and calls that wait move it to the completion time of what they wait for;
 * the host's own computing between calls is not counted, so that results do not depend on the
 * machine. */
#ifndef LMS_SIM_TIMING_H
#define LMS_SIM_TIMING_H

#include "sim/calibration.h"

#include <stdint.h>

typedef uint64_t sim_ns;

typedef enum sim_engine {
    SIM_ENGINE_COMPUTE,
    SIM_ENGINE_H2D,
    SIM_ENGINE_D2H,
    SIM_ENGINE_COUNT
} sim_engine;

/* What the PCIe link carries from `at` until the next point, of every transfer scheduled there
 * (copies, and work that reaches host memory), towards the device and away from it: bytes per
 * second, and how much of each direction's capacity they take (a copy's bytes take as much;
 * those of work reaching host memory more, calibration.h). */
typedef struct sim_link_point {
    double at;
    double rate[2];      /* H2D, D2H */
    double load[2];      /* in bytes per second of a copy */
} sim_link_point;

/* One device's engines, and its link's load over time: points in time order, the link idle
 * after the last. */
typedef struct sim_timeline {
    sim_ns compute_free_at;
    sim_ns busy_ns[SIM_ENGINE_COUNT];
    sim_link_point *link;
    int link_count, link_cap;
} sim_timeline;

/* The calibration in force (the H100's). */
const sim_calibration *sim_calibration_now(void);

/* Schedules duration_ns of work on the compute engine no earlier than ready; returns the
 * end, and the start in *start. */
sim_ns sim_timeline_compute(sim_timeline *t, sim_ns ready, double duration_ns, sim_ns *start);

/* Schedules a copy of `bytes` towards the device (SIM_ENGINE_H2D) or away from it (_D2H), ready
 * at `ready`, at `rate` when it has the link to itself. Where it overlaps the transfers
 * scheduled before it, it gets what they leave of its direction and of the bidirectional
 * bandwidth: what was scheduled first keeps its rate, and one that takes all of its direction
 * holds it back until it ends. Returns the end, and in *start when it began to move bytes.
 * (Should memory for the link's load run short, a transfer is priced but not recorded: later
 * ones find the link freer.) */
sim_ns sim_timeline_copy(sim_timeline *t, sim_engine engine, sim_ns ready, double bytes,
                         double rate, sim_ns *start);

/* Schedules work on the compute engine that runs duration_ns at least and moves host_bytes
 * over the link at no more than the zero-copy rate, share_h2d of them towards the device and
 * the rest away from it, taking what the transfers scheduled before leave. Returns the end,
 * and the start in *start. */
sim_ns sim_timeline_zero_copy(sim_timeline *t, sim_ns ready, double duration_ns, double host_bytes,
                              double share_h2d, sim_ns *start);

/* Forgets the link's load before `now`: nothing is scheduled to start earlier. */
void sim_timeline_forget_before(sim_timeline *t, sim_ns now);

/* A kernel's duration on device memory: the roofline of its operations and device bytes at
 * the calibrated efficiency, and no shorter than the shortest kernel. Its bytes in
 * host-located memory are sim_timeline_zero_copy's. */
double sim_kernel_ns(double flops, double device_bytes);

#endif
