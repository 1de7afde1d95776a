/* The constants of the simulated GPU's timing model: one table, each figure with the
 * measurement it comes from (sim/calibration.c). Rates are bytes or operations per second,
 * durations nanoseconds. */
#ifndef LMS_SIM_CALIBRATION_H
#define LMS_SIM_CALIBRATION_H

/* A cost that grows with size, measured at two sizes and interpolated (or extrapolated)
 * linearly between them; never below the smaller figure. */
typedef struct sim_sized_cost {
    double ns_small, bytes_small;
    double ns_large, bytes_large;
    double ns_most;              /* what no size costs more than; 0: the line goes on */
} sim_sized_cost;

typedef struct sim_calibration {
    const char *version;

    /* copy engines */
    double pinned_h2d, pinned_d2h;   /* one direction alone */
    double pinned_bidirectional;     /* both directions at once, in total: the bytes of a copy
                                        each way over the time until the later ends */
    double pinned_overlap;           /* what both directions carry together while they overlap:
                                        the copy queued first keeps its rate, the other gets
                                        the rest */
    double pageable_h2d, pageable_d2h;
    double d2d_copy;                 /* bytes copied per second, device to device */
    double memset_rate;              /* bytes written per second by a memset */
    double copy_latency_ns;          /* fixed cost of any copy on an engine */

    /* kernels: a roofline */
    double fp32_flops;               /* peak */
    double hbm_bytes;                /* kernel reading and writing device memory */
    double zero_copy_bytes;          /* kernel reading and writing host-located memory */
    double zero_copy_direction_load; /* of a direction's capacity, per byte a kernel moves
                                        over it, in bytes of a copy */
    double zero_copy_read_request_load; /* of the other direction's capacity, per byte a kernel
                                        reads from host memory */
    double kernel_efficiency;        /* share of the roofline real kernels reach (fitted) */
    double kernel_min_ns;            /* the shortest kernel */

    /* host-side cost of driver calls */
    double launch_ns;                /* cuLaunchKernel and friends */
    double call_ns;                  /* any other call not listed below */
    sim_sized_cost mem_alloc;        /* cuMemAlloc */
    sim_sized_cost vmm_reserve, vmm_create_device, vmm_create_host, vmm_map;
    sim_sized_cost vmm_set_access_device, vmm_set_access_host, vmm_unmap, vmm_release;
    sim_sized_cost host_alloc, host_free, host_register;
} sim_calibration;

extern const sim_calibration sim_calibration_h100;

/* The cost of a sized call at this size. */
double sim_sized_ns(const sim_sized_cost *cost, double bytes);

#endif
