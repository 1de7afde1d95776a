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

/* A profile's rate at time `at`, and when it next changes (-1: never). */
static double rate_at(const sim_link_profile *p, double at, double *changes)
{
    *changes = -1;
    for (int i = 0; i < p->count; i++) {
        if (at < p->segment[i].start) {
            *changes = p->segment[i].start;
            return 0;
        }
        if (at < p->segment[i].end) {
            *changes = p->segment[i].end;
            return p->segment[i].rate;
        }
    }
    return 0;
}

/* Moves `bytes` from time `from` for user `me`, at no more than `rate`, through what the
 * link's other users' last transfers leave: of each direction its capacity, of both the
 * bidirectional bandwidth. Records the transfer as me's last and returns its end. */
static double transfer(sim_timeline *t, int me, double from, double bytes, double rate)
{
    const sim_calibration *cal = sim_calibration_now();
    const double capacity[2] = {cal->pinned_h2d, cal->pinned_d2h};
    sim_link_profile *mine = &t->last[me];
    mine->count = 0;
    double now = from, left = bytes;
    while (left > 0) {
        double used[2] = {0, 0}, until = -1;
        for (int u = 0; u < SIM_LINK_USERS; u++) {
            if (u == me)
                continue;
            double changes, r = rate_at(&t->last[u], now, &changes);
            used[0] += r * t->last[u].share[0];
            used[1] += r * t->last[u].share[1];
            if (changes >= 0 && (until < 0 || changes < until))
                until = changes;
        }
        double r = rate, both = cal->pinned_bidirectional - used[0] - used[1];
        if (both < r)
            r = both;
        for (int dir = 0; dir < 2; dir++)
            if (mine->share[dir] > 0 && (capacity[dir] - used[dir]) / mine->share[dir] < r)
                r = (capacity[dir] - used[dir]) / mine->share[dir];
        if (r <= 0) { /* the others hold the link until they change */
            now = until;
            continue;
        }
        double can = until < 0 ? left : (until - now) * r / 1e9;
        double end = can >= left ? now + left / r * 1e9 : until;
        left = can >= left ? 0 : left - can;
        if (mine->count < SIM_LINK_SEGMENTS)
            mine->segment[mine->count++] = (__typeof__(mine->segment[0])){now, end, r};
        now = end;
    }
    return now;
}

sim_ns sim_timeline_copy(sim_timeline *t, sim_engine engine, sim_ns ready, double bytes,
                         double rate, sim_ns *start)
{
    const sim_calibration *cal = sim_calibration_now();
    int me = engine == SIM_ENGINE_H2D ? SIM_LINK_H2D : SIM_LINK_D2H;
    t->last[me].share[0] = me == SIM_LINK_H2D;
    t->last[me].share[1] = me == SIM_LINK_D2H;
    *start = later(ready, t->free_at[engine]);
    sim_ns end = (sim_ns)(transfer(t, me, (double)*start + cal->copy_latency_ns, bytes, rate) + 0.5);
    t->free_at[engine] = end;
    t->busy_ns[engine] += end - *start;
    return end;
}

sim_ns sim_timeline_zero_copy(sim_timeline *t, sim_ns ready, double duration_ns, double host_bytes,
                              double share_h2d, sim_ns *start)
{
    *start = later(ready, t->free_at[SIM_ENGINE_COMPUTE]);
    double end = (double)*start + duration_ns;
    if (host_bytes > 0) {
        t->last[SIM_LINK_ZERO_COPY].share[0] = share_h2d;
        t->last[SIM_LINK_ZERO_COPY].share[1] = 1 - share_h2d;
        double moved = transfer(t, SIM_LINK_ZERO_COPY, (double)*start, host_bytes,
                                sim_calibration_now()->zero_copy_bytes);
        end = moved > end ? moved : end;
    }
    return sim_timeline_compute(t, *start, end - (double)*start, start);
}

double sim_kernel_ns(double flops, double device_bytes)
{
    const sim_calibration *cal = sim_calibration_now();
    double compute = flops / (cal->fp32_flops * cal->kernel_efficiency) * 1e9;
    double memory = device_bytes / (cal->hbm_bytes * cal->kernel_efficiency) * 1e9;
    double ns = compute > memory ? compute : memory;
    return ns > cal->kernel_min_ns ? ns : cal->kernel_min_ns;
}
