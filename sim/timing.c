/* The simulated GPU's clocks (timing.h). */
#include "sim/timing.h"

#include <stdlib.h>
#include <string.h>

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
    *start = later(ready, t->compute_free_at);
    sim_ns end = *start + (sim_ns)(duration_ns + 0.5);
    t->compute_free_at = end;
    t->busy_ns[SIM_ENGINE_COMPUTE] += end - *start;
    return end;
}

/* The load of the link where nothing is scheduled. */
static const sim_link_point idle_link;

/* Makes a point at time x, carrying the load of the segment it falls in (idle after the last
 * point); returns its index, or -1 when memory is short. */
static int point_at(sim_timeline *t, double x)
{
    int i = t->link_count;
    while (i > 0 && t->link[i - 1].at > x)
        i--;
    if (i > 0 && t->link[i - 1].at == x)
        return i - 1;
    if (t->link_count == t->link_cap) {
        int cap = t->link_cap ? 2 * t->link_cap : 64;
        sim_link_point *grown = realloc(t->link, (size_t)cap * sizeof *grown);
        if (!grown)
            return -1;
        t->link = grown;
        t->link_cap = cap;
    }
    memmove(&t->link[i + 1], &t->link[i], (size_t)(t->link_count - i) * sizeof *t->link);
    t->link[i] = i > 0 ? t->link[i - 1] : idle_link;
    t->link[i].at = x;
    t->link_count++;
    return i;
}

void sim_timeline_forget_before(sim_timeline *t, sim_ns now)
{
    int gone = 0;
    while (gone + 1 < t->link_count && t->link[gone + 1].at <= (double)now)
        gone++;
    if (gone == 0)
        return;
    memmove(t->link, t->link + gone, (size_t)(t->link_count - gone) * sizeof *t->link);
    t->link_count -= gone;
}

/* When a transfer moved its bytes: from its first to its end, moving for `moving_ns` of it. */
typedef struct sim_moved {
    double first, end, moving_ns;
} sim_moved;

/* Moves `bytes` from time `from`, share[d] of them in direction d, at no more than `rate`,
 * through what the transfers scheduled before leave: of each direction its capacity, taking
 * load[d] of it per byte moved, and of both the bidirectional bandwidth, taken by the bytes
 * themselves. Adds itself to the link's load. */
static sim_moved transfer(sim_timeline *t, const double share[2], const double load[2], double from,
                          double bytes, double rate)
{
    const sim_calibration *cal = sim_calibration_now();
    const double capacity[2] = {cal->pinned_h2d, cal->pinned_d2h};
    double now = from, left = bytes;
    int i = point_at(t, now);
    sim_moved moved = {from, from, 0};
    int moving = 0;
    while (left > 0) {
        const sim_link_point *used = i >= 0 ? &t->link[i] : &idle_link;
        double until = i >= 0 && i + 1 < t->link_count ? t->link[i + 1].at : -1;
        double r = rate, both = cal->pinned_overlap - used->rate[0] - used->rate[1];
        if (both < r)
            r = both;
        for (int d = 0; d < 2; d++)
            if (load[d] > 0 && (capacity[d] - used->load[d]) / load[d] < r)
                r = (capacity[d] - used->load[d]) / load[d];
        if (r <= 0) { /* taken until the load changes */
            now = until;
            i++;
            continue;
        }
        if (!moving) {
            moved.first = now;
            moving = 1;
        }
        double can = until < 0 ? left : (until - now) * r / 1e9;
        double end = can >= left ? now + left / r * 1e9 : until;
        left = can >= left ? 0 : left - can;
        if (i >= 0 && (until < 0 || end < until) && point_at(t, end) < 0)
            i = -1; /* no memory for the load: priced, not recorded */
        if (i >= 0) {
            for (int d = 0; d < 2; d++) {
                t->link[i].rate[d] += r * share[d];
                t->link[i].load[d] += r * load[d];
            }
            i++;
        }
        moved.moving_ns += end - now;
        now = end;
    }
    moved.end = now;
    return moved;
}

sim_ns sim_timeline_copy(sim_timeline *t, sim_engine engine, sim_ns ready, double bytes,
                         double rate, sim_ns *start)
{
    const sim_calibration *cal = sim_calibration_now();
    const double share[2] = {engine == SIM_ENGINE_H2D, engine == SIM_ENGINE_D2H};
    sim_moved moved = transfer(t, share, share, (double)ready + cal->copy_latency_ns, bytes, rate);
    *start = (sim_ns)(moved.first - cal->copy_latency_ns + 0.5);
    t->busy_ns[engine] += (sim_ns)(cal->copy_latency_ns + moved.moving_ns + 0.5);
    return (sim_ns)(moved.end + 0.5);
}

sim_ns sim_timeline_zero_copy(sim_timeline *t, sim_ns ready, double duration_ns, double host_bytes,
                              double share_h2d, sim_ns *start)
{
    *start = later(ready, t->compute_free_at);
    double end = (double)*start + duration_ns;
    if (host_bytes > 0) {
        const sim_calibration *cal = sim_calibration_now();
        const double share[2] = {share_h2d, 1 - share_h2d};
        /* Its direction's as measured; its reads' requests also take the other one's. */
        const double load[2] = {share[0] * cal->zero_copy_direction_load,
                                share[1] * cal->zero_copy_direction_load + share[0] * cal->zero_copy_read_request_load};
        double moved = transfer(t, share, load, (double)*start, host_bytes, cal->zero_copy_bytes).end;
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
