/* The address space the simulator hands out, as a list of regions: shared by device and host
 * memory (memory.c) and virtual memory management (vmm.c). Call everything with cd.lock held.
 *
 *   cuMemAlloc          anonymous read/write mmap, counted against the device capacity
 *   cuMemAddressReserve anonymous PROT_NONE mmap: touching it crashes like an illegal address
 *   cuMemMap            a memfd (the physical handle) mapped MAP_SHARED|MAP_FIXED, protected
 *                       by the access granted (vmm.c); cuMemUnmap puts PROT_NONE back
 *   cuMemHostAlloc      anonymous read/write mmap; cuMemHostRegister only records the range */
#ifndef LMS_SIM_REGIONS_H
#define LMS_SIM_REGIONS_H

#include "sim/sim_internal.h"

typedef enum region_kind {
    REGION_ALLOC,           /* cuMemAlloc, cuMemAllocAsync, cuMemAllocPitch */
    REGION_RESERVED,        /* cuMemAddressReserve */
    REGION_MAPPED,          /* cuMemMap, inside a reservation */
    REGION_HOST_ALLOC,      /* cuMemHostAlloc, cuMemAllocHost */
    REGION_HOST_REGISTERED, /* cuMemHostRegister */
} region_kind;

/* A physical allocation of cuMemCreate: alive while a handle (cuMemCreate, and each
 * cuMemRetainAllocationHandle) or a mapping holds it. */
typedef struct physical {
    int fd;
    size_t size;
    int device;             /* -1: host-located */
    int handles;
    int mappings;
    struct physical *next;
} physical;

typedef struct region {
    region_kind kind;
    uintptr_t base;
    size_t size;
    int device;             /* REGION_ALLOC: the device; REGION_MAPPED: the physical's */
    cd_ctx *ctx;            /* the context that made it; NULL for pool and VMM memory */
    bool pool;              /* REGION_ALLOC from cuMemAllocAsync */
    unsigned long long buffer_id;
    physical *phys;         /* REGION_MAPPED */
    /* REGION_MAPPED: what each device and the host were granted, and the protection in force. */
    CUmemAccess_flags access[CD_MAX_DEVICES];
    CUmemAccess_flags host_access;
    int prot;
} region;

extern region *cd_regions;  /* [cd_region_count], unordered */
extern size_t cd_region_count;

/* Adds a region (it gets its buffer id): NULL when out of memory. Removing one moves another
 * into its place. */
region *cd_region_add_locked(region r);
void cd_region_remove_locked(region *r);

#define REGION_MASK(kind) (1u << (kind))
#define DIRECT_MASK                                                                          \
    (REGION_MASK(REGION_ALLOC) | REGION_MASK(REGION_HOST_ALLOC) |                           \
     REGION_MASK(REGION_HOST_REGISTERED))
/* The region of one of the kinds in mask (REGION_MASK bits) containing ptr, or starting at it. */
region *cd_region_find_locked(uintptr_t ptr, unsigned mask);
region *cd_region_at_locked(uintptr_t base, region_kind kind);

/* Whether a device may touch a mapping (for writing too, with write). */
bool cd_mapping_allows(const region *m, int device, bool write);

#endif
