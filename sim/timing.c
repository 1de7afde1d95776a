/* The simulated GPU's clocks (timing.h). */
#include "sim/timing.h"

const sim_calibration *sim_calibration_now(void)
{
    return &sim_calibration_h100;
}

static sim_ns later(sim_ns a, sim_ns b)
{
    return a > b ? a : b;
}

sim_ns sim_timeline_compute(sim_timeline *t, sim_ns ready, double duration_ns, sim_ns *start)
{
    *start = later(ready, t->free_at[SIM_ENGINE_COMPUTE]);
    sim_ns end = *start + (sim_ns)(duration_ns + 0.5);
    t->free_at[SIM_ENGINE_COMPUTE] = end;
    t->busy_ns[SIM_ENGINE_COMPUTE] += end - *start;
    return end;
}

/* The other direction's rate at time `at`, and when that rate next changes (-1: never). */
static double other_rate_at(const struct sim_copy_profile *other, double at, double *changes)
{
    *changes = -1;
    for (int i = 0; i < other->count; i++) {
        if (at < other->segment[i].start) {
            *changes = other->segment[i].start;
            return 0;
        }
        if (at < other->segment[i].end) {
            *changes = other->segment[i].end;
            return other->segment[i].rate;
        }
    }
    return 0;
}

sim_ns sim_timeline_copy(sim_timeline *t, sim_engine engine, sim_ns ready, double bytes,
                         double rate, sim_ns *start)
{
    const sim_calibration *cal = sim_calibration_now();
    int dir = engine == SIM_ENGINE_H2D ? 0 : 1;
    const struct sim_copy_profile *other = &t->last_copy[1 - dir];
    struct sim_copy_profile mine = {0};
    *start = later(ready, t->free_at[engine]);
    /* Walk the copy through the other direction's pieces, taking what each leaves. */
    double now = (double)*start + cal->copy_latency_ns, left = bytes;
    while (left > 0) {
        double until, r = cal->pinned_bidirectional - other_rate_at(other, now, &until);
        if (r > rate)
            r = rate;
        double can = until < 0 ? left : (until - now) * r / 1e9;
        double end = can >= left ? now + left / r * 1e9 : until;
        left = can >= left ? 0 : left - can;
        if (mine.count < SIM_COPY_SEGMENTS)
            mine.segment[mine.count++] = (__typeof__(mine.segment[0])){now, end, r};
        now = end;
    }
    sim_ns end = (sim_ns)(now + 0.5);
    t->free_at[engine] = end;
    t->busy_ns[engine] += end - *start;
    t->last_copy[dir] = mine;
    return end;
}

double sim_kernel_ns(double flops, double device_bytes, double host_bytes)
{
    const sim_calibration *cal = sim_calibration_now();
    double compute = flops / (cal->fp32_flops * cal->kernel_efficiency) * 1e9;
    double memory = device_bytes / (cal->hbm_bytes * cal->kernel_efficiency) * 1e9;
    double zero_copy = host_bytes / cal->zero_copy_bytes * 1e9;
    double ns = compute > memory ? compute : memory;
    if (zero_copy > ns)
        ns = zero_copy;
    return ns > cal->kernel_min_ns ? ns : cal->kernel_min_ns;
}
