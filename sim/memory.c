/* Device memory, virtual memory management and pinned host memory, all on host memory.
 *
 * Device pointers are host addresses, so a host "kernel" dereferences them directly. The
 * address space the simulator hands out is kept as a list of regions:
 *   cuMemAlloc          anonymous read/write mmap, counted against the device capacity
 *   cuMemAddressReserve anonymous PROT_NONE mmap: touching it crashes like an illegal address
 *   cuMemMap            a memfd (the physical handle) mapped MAP_SHARED|MAP_FIXED, PROT_NONE
 *                       until cuMemSetAccess mprotects it; cuMemUnmap puts PROT_NONE back
 *   cuMemHostAlloc      anonymous read/write mmap; cuMemHostRegister only records the range */
#include "sim/sim_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef enum region_kind {
    REGION_ALLOC,           /* cuMemAlloc, cuMemAllocAsync, cuMemAllocPitch */
    REGION_RESERVED,        /* cuMemAddressReserve */
    REGION_MAPPED,          /* cuMemMap, inside a reservation */
    REGION_HOST_ALLOC,      /* cuMemHostAlloc, cuMemAllocHost */
    REGION_HOST_REGISTERED, /* cuMemHostRegister */
} region_kind;

/* A physical allocation of cuMemCreate: alive while its handle or a mapping holds it. */
typedef struct physical {
    int fd;
    size_t size;
    int device;             /* -1: host-located */
    bool released;
    int mappings;
    struct physical *next;
} physical;

typedef struct region {
    region_kind kind;
    uintptr_t base;
    size_t size;
    int device;             /* REGION_ALLOC */
    physical *phys;         /* REGION_MAPPED */
    int prot;               /* REGION_MAPPED: what cuMemSetAccess granted */
} region;

static region *regions;     /* [region_count], unordered */
static size_t region_count, region_capacity;
static physical *physicals;

static region *add_region(region r)
{
    if (region_count == region_capacity) {
        size_t capacity = region_capacity ? 2 * region_capacity : 64;
        region *grown = realloc(regions, capacity * sizeof *grown);
        if (!grown)
            return NULL;
        regions = grown;
        region_capacity = capacity;
    }
    regions[region_count] = r;
    return &regions[region_count++];
}

static void remove_region(region *r)
{
    *r = regions[--region_count];
}

static bool contains(const region *r, uintptr_t ptr)
{
    return ptr >= r->base && ptr - r->base < r->size;
}

/* The region of one of the kinds in mask (bits 1 << kind) containing ptr. */
static region *find_region(uintptr_t ptr, unsigned mask)
{
    for (size_t i = 0; i < region_count; i++)
        if ((mask >> regions[i].kind & 1) && contains(&regions[i], ptr))
            return &regions[i];
    return NULL;
}
#define MASK(kind) (1u << (kind))
#define DIRECT_MASK (MASK(REGION_ALLOC) | MASK(REGION_HOST_ALLOC) | MASK(REGION_HOST_REGISTERED))

static region *find_base(uintptr_t base, region_kind kind)
{
    region *r = find_region(base, MASK(kind));
    return r && r->base == base ? r : NULL;
}

bool cd_range_usable(uintptr_t ptr, size_t size, bool host_ok)
{
    if (size == 0)
        return true;
    if (ptr + size < ptr)
        return false;
    uintptr_t end = ptr + size;
    region *r = find_region(ptr, DIRECT_MASK);
    if (r)
        return end - r->base <= r->size;
    if (!find_region(ptr, MASK(REGION_RESERVED))) {
        if (!host_ok)
            return false;
        for (size_t i = 0; i < region_count; i++) /* host memory must not run into VMM */
            if (regions[i].kind == REGION_RESERVED && regions[i].base < end &&
                ptr < regions[i].base + regions[i].size)
                return false;
        return true;
    }
    for (uintptr_t at = ptr; at < end;) {
        region *m = find_region(at, MASK(REGION_MAPPED));
        if (!m || m->prot == PROT_NONE)
            return false;
        at = m->base + m->size;
    }
    return true;
}

/* What a call of that size costs the host's virtual clock (calibration.h). */
static void charge(const sim_sized_cost *cost, size_t bytes)
{
    cd_host_charge(sim_sized_ns(cost, (double)bytes));
}

cd_memory_kind cd_memory_kind_locked(uintptr_t ptr)
{
    region *r = find_region(ptr, DIRECT_MASK | MASK(REGION_MAPPED));
    if (!r)
        return CD_MEMORY_PAGEABLE;
    if (r->kind == REGION_ALLOC || (r->kind == REGION_MAPPED && r->phys->device >= 0))
        return CD_MEMORY_DEVICE;
    return CD_MEMORY_PINNED;
}

static void *map_anonymous(size_t size, int prot)
{
    void *p = mmap(NULL, size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* ---- cuMemAlloc and friends ---- */

static CUresult alloc_device(CUdeviceptr *dptr, size_t size)
{
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    charge(&sim_calibration_now()->mem_alloc, size);
    cd_ctx *ctx;
    CUresult result = cd_current_ctx(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    pthread_mutex_lock(&cd.lock);
    cd_device *dev = &cd.devices[ctx->device];
    void *p = NULL;
    if (size > dev->capacity - dev->used)
        result = CUDA_ERROR_OUT_OF_MEMORY;
    else if (!(p = map_anonymous(size, PROT_READ | PROT_WRITE)))
        result = CUDA_ERROR_OUT_OF_MEMORY;
    else if (!add_region((region){REGION_ALLOC, (uintptr_t)p, size, ctx->device, NULL, 0})) {
        munmap(p, size);
        result = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        dev->used += size;
        *dptr = (CUdeviceptr)(uintptr_t)p;
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    CD_ENTER("cuMemAlloc");
    return alloc_device(dptr, bytesize);
}

/* Rows start on 512-byte boundaries, like the real driver's pitch. */
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    CD_ENTER("cuMemAllocPitch");
    if (!pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = (WidthInBytes + 511) & ~(size_t)511;
    if (Height > SIZE_MAX / pitch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult result = alloc_device(dptr, pitch * Height);
    if (result == CUDA_SUCCESS)
        *pPitch = pitch;
    return result;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    CD_ENTER("cuMemAllocAsync");
    (void)hStream; /* allocated at once: ready before any work the stream runs later */
    return alloc_device(dptr, bytesize);
}

CUresult cd_free_device_locked(uintptr_t ptr)
{
    region *r = find_base(ptr, REGION_ALLOC);
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    munmap((void *)r->base, r->size);
    cd.devices[r->device].used -= r->size;
    remove_region(r);
    return CUDA_SUCCESS;
}

/* Like the real driver, cuMemFree waits for all work of the context first. */
CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    CD_ENTER("cuMemFree");
    CUresult result = cd_ctx_synchronize(NULL);
    if (result != CUDA_SUCCESS)
        return result;
    pthread_mutex_lock(&cd.lock);
    result = cd_free_device_locked((uintptr_t)dptr);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    CD_ENTER("cuMemFreeAsync");
    pthread_mutex_lock(&cd.lock);
    bool known = find_base((uintptr_t)dptr, REGION_ALLOC) != NULL;
    pthread_mutex_unlock(&cd.lock);
    if (!known)
        return CUDA_ERROR_INVALID_VALUE;
    cd_op *op = cd_op_new(CD_OP_FREE);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.free.ptr = (uintptr_t)dptr;
    return cd_enqueue(hStream, op);
}

/* ---- virtual memory management ---- */

static bool granular(size_t n)
{
    return n % CD_GRANULARITY == 0;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    CD_ENTER("cuMemGetAllocationGranularity");
    if (!granularity || !prop || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                                  option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = CD_GRANULARITY;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    CD_ENTER("cuMemAddressReserve");
    if (!ptr || size == 0 || !granular(size) || flags != 0 || (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    charge(&sim_calibration_now()->vmm_reserve, size);
    if (alignment < CD_GRANULARITY)
        alignment = CD_GRANULARITY;
    if (size > SIZE_MAX - alignment)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* Over-reserve, then trim to the alignment; addr is a hint, as on the real driver. */
    size_t span = size + alignment;
    char *raw = mmap((void *)(uintptr_t)addr, span, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t base = ((uintptr_t)raw + alignment - 1) & ~(uintptr_t)(alignment - 1);
    if (base > (uintptr_t)raw)
        munmap(raw, base - (uintptr_t)raw);
    if ((uintptr_t)raw + span > base + size)
        munmap((void *)(base + size), (uintptr_t)raw + span - (base + size));
    pthread_mutex_lock(&cd.lock);
    region *r = add_region((region){REGION_RESERVED, base, size, -1, NULL, PROT_NONE});
    pthread_mutex_unlock(&cd.lock);
    if (!r) {
        munmap((void *)base, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = (CUdeviceptr)base;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    CD_ENTER("cuMemAddressFree");
    CUresult result = CUDA_SUCCESS;
    pthread_mutex_lock(&cd.lock);
    region *r = find_base((uintptr_t)ptr, REGION_RESERVED);
    if (!r || r->size != size) {
        result = CUDA_ERROR_INVALID_VALUE;
    } else {
        for (size_t i = 0; i < region_count; i++)
            if (regions[i].kind == REGION_MAPPED && contains(r, regions[i].base))
                result = CUDA_ERROR_INVALID_VALUE; /* still mapped */
    }
    if (result == CUDA_SUCCESS) {
        munmap((void *)r->base, r->size);
        remove_region(r);
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

static physical *find_physical(CUmemGenericAllocationHandle handle)
{
    for (physical *p = physicals; p; p = p->next)
        if ((CUmemGenericAllocationHandle)(uintptr_t)p == handle && !p->released)
            return p;
    return NULL;
}

/* Frees a physical allocation once neither its handle nor a mapping holds it. */
static void drop_physical_if_unused(physical *p)
{
    if (!p->released || p->mappings > 0)
        return;
    close(p->fd);
    if (p->device >= 0)
        cd.devices[p->device].used -= p->size;
    for (physical **link = &physicals; *link; link = &(*link)->next) {
        if (*link == p) {
            *link = p->next;
            break;
        }
    }
    free(p);
}

/* Where a cuMemCreate may put memory: a device, or the host when host VMM is on. */
static CUresult check_location(const CUmemLocation *location, int *device)
{
    switch (location->type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        if (location->id < 0 || location->id >= cd.device_count)
            return CUDA_ERROR_INVALID_DEVICE;
        *device = location->id;
        return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        if (!cd.host_vmm)
            return CUDA_ERROR_NOT_SUPPORTED;
        if (location->type == CU_MEM_LOCATION_TYPE_HOST_NUMA && location->id != 0)
            return CUDA_ERROR_INVALID_VALUE; /* the simulator has one NUMA node */
        *device = -1;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    CD_ENTER("cuMemCreate");
    if (!handle || !prop || size == 0 || !granular(size) || flags != 0 ||
        prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    int device;
    pthread_mutex_lock(&cd.lock);
    CUresult result = check_location(&prop->location, &device);
    if (result == CUDA_SUCCESS)
        charge(device >= 0 ? &sim_calibration_now()->vmm_create_device
                           : &sim_calibration_now()->vmm_create_host, size);
    if (result == CUDA_SUCCESS && device >= 0 &&
        size > cd.devices[device].capacity - cd.devices[device].used)
        result = CUDA_ERROR_OUT_OF_MEMORY;
    physical *p = NULL;
    if (result == CUDA_SUCCESS && !(p = calloc(1, sizeof *p)))
        result = CUDA_ERROR_OUT_OF_MEMORY;
    if (result == CUDA_SUCCESS) {
        p->fd = memfd_create("lms-sim-physical", MFD_CLOEXEC);
        if (p->fd < 0 || ftruncate(p->fd, (off_t)size) != 0) {
            if (p->fd >= 0)
                close(p->fd);
            free(p);
            result = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    if (result == CUDA_SUCCESS) {
        p->size = size;
        p->device = device;
        p->next = physicals;
        physicals = p;
        if (device >= 0)
            cd.devices[device].used += size;
        *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CD_ENTER("cuMemRelease");
    pthread_mutex_lock(&cd.lock);
    physical *p = find_physical(handle);
    if (p) {
        charge(&sim_calibration_now()->vmm_release, p->size);
        p->released = true;
        drop_physical_if_unused(p);
    }
    pthread_mutex_unlock(&cd.lock);
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    CD_ENTER("cuMemMap");
    if (offset != 0)
        return CUDA_ERROR_NOT_SUPPORTED; /* as measured on the real driver */
    uintptr_t base = (uintptr_t)ptr;
    if (flags != 0 || size == 0 || !granular(size) || !granular(base))
        return CUDA_ERROR_INVALID_VALUE;
    charge(&sim_calibration_now()->vmm_map, size);
    CUresult result = CUDA_SUCCESS;
    pthread_mutex_lock(&cd.lock);
    physical *p = find_physical(handle);
    region *reservation = find_region(base, MASK(REGION_RESERVED));
    if (!p)
        result = CUDA_ERROR_INVALID_HANDLE;
    else if (size > p->size || !reservation || base + size - reservation->base > reservation->size)
        result = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; result == CUDA_SUCCESS && i < region_count; i++) {
        region *m = &regions[i];
        if (m->kind == REGION_MAPPED && m->base < base + size && base < m->base + m->size)
            result = CUDA_ERROR_INVALID_VALUE; /* overlaps a mapping */
    }
    if (result == CUDA_SUCCESS &&
        mmap((void *)base, size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd, 0) == MAP_FAILED)
        result = CUDA_ERROR_OUT_OF_MEMORY;
    if (result == CUDA_SUCCESS) {
        if (add_region((region){REGION_MAPPED, base, size, p->device, p, PROT_NONE})) {
            p->mappings++;
            cd.bytes_mapped += size;
        } else {
            mmap((void *)base, size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
            result = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* Whether [base, base+size) is exactly a run of whole, adjacent mappings. The real driver
 * only remaps or changes whole mappings: a partial one is INVALID_VALUE. */
static bool whole_mappings(uintptr_t base, size_t size)
{
    if (size == 0)
        return false;
    for (uintptr_t at = base; at < base + size;) {
        region *m = find_base(at, REGION_MAPPED);
        if (!m || m->size > base + size - at)
            return false;
        at += m->size;
    }
    return true;
}

/* Not ordered against queued work: a queued kernel that touches the range later crashes. */
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CD_ENTER("cuMemUnmap");
    charge(&sim_calibration_now()->vmm_unmap, size);
    uintptr_t base = (uintptr_t)ptr;
    pthread_mutex_lock(&cd.lock);
    bool valid = whole_mappings(base, size);
    for (uintptr_t at = base; valid && at < base + size;) {
        region *m = find_base(at, REGION_MAPPED);
        at += m->size;
        mmap((void *)m->base, m->size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        cd.bytes_mapped -= m->size;
        physical *p = m->phys;
        p->mappings--;
        remove_region(m);
        drop_physical_if_unused(p);
    }
    pthread_mutex_unlock(&cd.lock);
    return valid ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The simulator's kernels run on the host, so whichever location is granted access (a device
 * or the host) opens the memory to them; the widest grant wins. */
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    CD_ENTER("cuMemSetAccess");
    if (!desc || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    int prot = PROT_NONE;
    CUresult result = CUDA_SUCCESS;
    pthread_mutex_lock(&cd.lock);
    for (size_t i = 0; i < count && result == CUDA_SUCCESS; i++) {
        int device;
        result = check_location(&desc[i].location, &device);
        if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            prot = PROT_READ | PROT_WRITE;
        else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE)
            prot = PROT_READ;
        else if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
                 desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ)
            result = CUDA_ERROR_INVALID_VALUE;
    }
    uintptr_t base = (uintptr_t)ptr;
    if (result == CUDA_SUCCESS && !whole_mappings(base, size))
        result = CUDA_ERROR_INVALID_VALUE;
    for (uintptr_t at = base; result == CUDA_SUCCESS && at < base + size;) {
        region *m = find_base(at, REGION_MAPPED);
        charge(m->device >= 0 ? &sim_calibration_now()->vmm_set_access_device
                              : &sim_calibration_now()->vmm_set_access_host, m->size);
        mprotect((void *)m->base, m->size, prot);
        m->prot = prot;
        at += m->size;
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* A mapped VMM address reports its mapping (its handle's range), as the real driver does. */
CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    CD_ENTER("cuMemGetAddressRange");
    pthread_mutex_lock(&cd.lock);
    region *r = find_region((uintptr_t)dptr, DIRECT_MASK | MASK(REGION_MAPPED));
    if (r && pbase)
        *pbase = (CUdeviceptr)r->base;
    if (r && psize)
        *psize = r->size;
    pthread_mutex_unlock(&cd.lock);
    return r ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* ---- pinned host memory ---- */

static CUresult host_alloc(void **pp, size_t bytesize, unsigned int Flags)
{
    if (!pp || bytesize == 0 ||
        (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                             CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    void *p = map_anonymous(bytesize, PROT_READ | PROT_WRITE);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&cd.lock);
    region *r = add_region((region){REGION_HOST_ALLOC, (uintptr_t)p, bytesize, -1, NULL, 0});
    pthread_mutex_unlock(&cd.lock);
    if (!r) {
        munmap(p, bytesize);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    CD_ENTER("cuMemHostAlloc");
    charge(&sim_calibration_now()->host_alloc, bytesize);
    return host_alloc(pp, bytesize, Flags);
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    CD_ENTER("cuMemAllocHost");
    charge(&sim_calibration_now()->host_alloc, bytesize);
    return host_alloc(pp, bytesize, 0);
}

/* Waits for the device first, as the real driver does; without a context nothing can be
 * queued, so there is nothing to wait for. */
static void wait_for_device(void)
{
    cd_ctx *ctx;
    if (cd_current_ctx(&ctx) == CUDA_SUCCESS)
        cd_ctx_synchronize(NULL);
}

CUresult cuMemFreeHost(void *p)
{
    CD_ENTER("cuMemFreeHost");
    wait_for_device();
    pthread_mutex_lock(&cd.lock);
    region *r = find_base((uintptr_t)p, REGION_HOST_ALLOC);
    if (r) {
        charge(&sim_calibration_now()->host_free, r->size);
        munmap((void *)r->base, r->size);
        remove_region(r);
    }
    pthread_mutex_unlock(&cd.lock);
    return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    CD_ENTER("cuMemHostRegister");
    if (!p || bytesize == 0 ||
        (Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                             CU_MEMHOSTREGISTER_READ_ONLY)))
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t base = (uintptr_t)p;
    charge(&sim_calibration_now()->host_register, bytesize);
    CUresult result = CUDA_SUCCESS;
    pthread_mutex_lock(&cd.lock);
    for (size_t i = 0; i < region_count; i++) {
        region *r = &regions[i];
        if ((r->kind == REGION_HOST_ALLOC || r->kind == REGION_HOST_REGISTERED) &&
            r->base < base + bytesize && base < r->base + r->size)
            result = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
    if (result == CUDA_SUCCESS &&
        !add_region((region){REGION_HOST_REGISTERED, base, bytesize, -1, NULL, 0}))
        result = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuMemHostUnregister(void *p)
{
    CD_ENTER("cuMemHostUnregister");
    wait_for_device();
    pthread_mutex_lock(&cd.lock);
    region *r = find_base((uintptr_t)p, REGION_HOST_REGISTERED);
    if (r)
        remove_region(r);
    pthread_mutex_unlock(&cd.lock);
    return r ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

/* Host and device share one address space here: the device pointer is the host pointer. */
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    CD_ENTER("cuMemHostGetDevicePointer");
    if (!pdptr || Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    region *r = find_region((uintptr_t)p, MASK(REGION_HOST_ALLOC) | MASK(REGION_HOST_REGISTERED));
    pthread_mutex_unlock(&cd.lock);
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
