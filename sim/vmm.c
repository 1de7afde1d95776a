/* Virtual memory management: reservations, physical handles, mappings and their access.
 *
 * A mapping records what cuMemSetAccess granted each device and the host. The GPU and the CPU
 * are one address space here, kernels are host code run by the streams' threads, and page
 * protection is the same for every thread: it cannot tell a kernel from the program. So a
 * host-located mapping is open at its devices' access only while device work that may touch
 * it runs (any kernel; a copy or memset over it), and otherwise only as far as the host was
 * granted: the program touching it without a host grant dies of SIGSEGV, unless such work runs
 * at that moment. A device-located mapping stays open at its devices' access: catching the CPU
 * there too would mean changing the protection of every mapping around every kernel, which
 * costs more than the tests can pay. A kernel touching memory mapped without any access dies
 * of SIGSEGV as a GPU kernel would fault. Which device may touch what is checked where the
 * simulator sees the addresses: copies, memsets, and the pointers kernels' cost functions price. */
#include "sim/regions.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static physical *physicals;
static cd_device_work *work_running;
static int kernels_running;

static void charge(const sim_sized_cost *cost, size_t bytes)
{
    cd_host_charge(sim_sized_ns(cost, (double)bytes));
}

static bool granular(size_t n)
{
    return n % CD_GRANULARITY == 0;
}

static int prot_of(CUmemAccess_flags flags)
{
    return flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
           : flags == CU_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
                                                       : PROT_NONE;
}

static bool overlaps(const region *m, uintptr_t start, uintptr_t end)
{
    return start < m->base + m->size && m->base < end;
}

/* Whether the mapping is open at its devices' access: device-located ones always, host-located
 * ones while device work that may touch them runs. */
static bool in_use(const region *m)
{
    if (m->device >= 0 || kernels_running > 0)
        return true;
    for (const cd_device_work *w = work_running; w; w = w->next)
        if (overlaps(m, w->start[0], w->end[0]) || overlaps(m, w->start[1], w->end[1]))
            return true;
    return false;
}

/* Sets a mapping's protection to what the threads of the process may do with it now. Device
 * work that touches nothing (timing-only) opens nothing. */
static void protect(region *m)
{
    int prot = prot_of(m->host_access);
    for (int d = 0; d < CD_MAX_DEVICES && !cd.timing_only && in_use(m); d++)
        prot |= prot_of(m->access[d]);
    if (prot != m->prot)
        mprotect((void *)m->base, m->size, prot);
    m->prot = prot;
}

/* Protects again the mappings the work may touch: all of them for a kernel. */
static void protect_touched(const cd_device_work *work)
{
    for (size_t i = 0; i < cd_region_count; i++) {
        region *m = &cd_regions[i];
        if (m->kind == REGION_MAPPED &&
            (work->kernel || overlaps(m, work->start[0], work->end[0]) ||
             overlaps(m, work->start[1], work->end[1])))
            protect(m);
    }
}

void cd_device_work_begin_locked(cd_device_work *work, const cd_op *op)
{
    *work = (cd_device_work){.kernel = op->kind == CD_OP_KERNEL, .next = work_running};
    if (op->kind == CD_OP_COPY) {
        work->start[0] = op->u.copy.dst;
        work->end[0] = op->u.copy.dst + cd_copy_span(op, true);
        work->start[1] = op->u.copy.src;
        work->end[1] = op->u.copy.src + cd_copy_span(op, false);
    } else if (op->kind == CD_OP_MEMOP) {
        work->start[0] = op->u.memop.addr;
        work->end[0] = op->u.memop.addr + op->u.memop.size;
    } else if (op->kind == CD_OP_MEMSET) {
        work->start[0] = op->u.memset.dst;
        work->end[0] = op->u.memset.dst + (op->u.memset.height - 1) * op->u.memset.pitch +
                       op->u.memset.count * op->u.memset.element_size;
    }
    work_running = work;
    if (!work->kernel || kernels_running++ == 0)
        protect_touched(work);
}

void cd_device_work_end_locked(cd_device_work *work)
{
    for (cd_device_work **link = &work_running; *link; link = &(*link)->next) {
        if (*link == work) {
            *link = work->next;
            break;
        }
    }
    if (!work->kernel || --kernels_running == 0)
        protect_touched(work);
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

/* ---- reservations ---- */

/* Without a hint the H100's driver (580.159.04) placed a process's VMM reservations low, from
 * 0x302000000 (12 GiB + 32 MiB) up, apart from where cuMemAlloc's memory lies (0x7f0b...:
 * measured, liblms's trace of cifar10_full, 2026-11-27). There an address's upper 32 bits are
 * a small number, so that two adjacent 32-bit integers in a kernel's parameters (a count and a
 * channel number, a divider's magic and shift) read as a 64-bit word can fall inside an
 * allocation. Reservations here are placed the same way, one after another, and where that
 * range is taken (a sanitizer's shadow memory) wherever mmap puts them. */
#define LOW_RESERVATIONS_START ((uintptr_t)0x302000000)
static uintptr_t next_low_reservation = LOW_RESERVATIONS_START;

static char *mmap_low(size_t span)
{
    pthread_mutex_lock(&cd.lock);
    uintptr_t at = next_low_reservation;
    char *raw = mmap((void *)at, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
                     -1, 0);
    if (raw != MAP_FAILED && (uintptr_t)raw != at) { /* a kernel without MAP_FIXED_NOREPLACE took it as a hint */
        munmap(raw, span);
        raw = MAP_FAILED;
    }
    if (raw != MAP_FAILED)
        next_low_reservation = at + span;
    pthread_mutex_unlock(&cd.lock);
    return raw;
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
    char *raw = addr ? MAP_FAILED : mmap_low(span);
    if (raw == MAP_FAILED)
        raw = mmap((void *)(uintptr_t)addr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t base = ((uintptr_t)raw + alignment - 1) & ~(uintptr_t)(alignment - 1);
    if (base > (uintptr_t)raw)
        munmap(raw, base - (uintptr_t)raw);
    if ((uintptr_t)raw + span > base + size)
        munmap((void *)(base + size), (uintptr_t)raw + span - (base + size));
    pthread_mutex_lock(&cd.lock);
    region *r = cd_region_add_locked(
        (region){.kind = REGION_RESERVED, .base = base, .size = size, .device = -1});
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
    region *r = cd_region_at_locked((uintptr_t)ptr, REGION_RESERVED);
    if (!r || r->size != size) {
        result = CUDA_ERROR_INVALID_VALUE;
    } else {
        for (size_t i = 0; i < cd_region_count; i++)
            if (cd_regions[i].kind == REGION_MAPPED && cd_regions[i].base >= r->base &&
                cd_regions[i].base - r->base < r->size)
                result = CUDA_ERROR_INVALID_VALUE; /* still mapped */
    }
    if (result == CUDA_SUCCESS) {
        munmap((void *)r->base, r->size);
        cd_region_remove_locked(r);
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* ---- physical handles ---- */

static physical *find_physical(CUmemGenericAllocationHandle handle)
{
    for (physical *p = physicals; p; p = p->next)
        if ((CUmemGenericAllocationHandle)(uintptr_t)p == handle && p->handles > 0)
            return p;
    return NULL;
}

/* Frees a physical allocation once neither a handle nor a mapping holds it. */
static void drop_physical_if_unused(physical *p)
{
    if (p->handles > 0 || p->mappings > 0)
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

/* Where a cuMemCreate may put memory, or access be granted: a device, or the host when host
 * VMM is on (*device -1). */
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

/* A location check_location accepted: its device, or -1 for the host. */
static int device_of(const CUmemLocation *location)
{
    return location->type == CU_MEM_LOCATION_TYPE_DEVICE ? location->id : -1;
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
    if (result == CUDA_SUCCESS && device >= 0 && size > cd_device_free_locked(device))
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
        p->handles = 1;
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
        p->handles--;
        drop_physical_if_unused(p);
    }
    pthread_mutex_unlock(&cd.lock);
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The handle of the allocation mapped at addr, held once more: it needs its own cuMemRelease. */
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    CD_ENTER("cuMemRetainAllocationHandle");
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    region *m = cd_region_find_locked((uintptr_t)addr, REGION_MASK(REGION_MAPPED));
    if (m) {
        m->phys->handles++;
        *handle = (CUmemGenericAllocationHandle)(uintptr_t)m->phys;
    }
    pthread_mutex_unlock(&cd.lock);
    return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- mappings ---- */

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
    region *reservation = cd_region_find_locked(base, REGION_MASK(REGION_RESERVED));
    if (!p)
        result = CUDA_ERROR_INVALID_HANDLE;
    else if (size > p->size || !reservation || base + size - reservation->base > reservation->size)
        result = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; result == CUDA_SUCCESS && i < cd_region_count; i++) {
        region *m = &cd_regions[i];
        if (m->kind == REGION_MAPPED && m->base < base + size && base < m->base + m->size)
            result = CUDA_ERROR_INVALID_VALUE; /* overlaps a mapping */
    }
    if (result == CUDA_SUCCESS &&
        mmap((void *)base, size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd, 0) == MAP_FAILED)
        result = CUDA_ERROR_OUT_OF_MEMORY;
    if (result == CUDA_SUCCESS) {
        if (cd_region_add_locked((region){.kind = REGION_MAPPED, .base = base, .size = size,
                                          .device = p->device, .phys = p, .prot = PROT_NONE})) {
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
        region *m = cd_region_at_locked(at, REGION_MAPPED);
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
        region *m = cd_region_at_locked(at, REGION_MAPPED);
        at += m->size;
        mmap((void *)m->base, m->size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        cd.bytes_mapped -= m->size;
        physical *p = m->phys;
        p->mappings--;
        cd_region_remove_locked(m);
        drop_physical_if_unused(p);
    }
    if (valid)
        cd_running_recheck_locked();
    pthread_mutex_unlock(&cd.lock);
    return valid ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Each descriptor sets one location's access and leaves the others as they were. The host
 * location may only be named for host-located memory (the driver documents it for HOST_NUMA). */
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    CD_ENTER("cuMemSetAccess");
    if (!desc || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t base = (uintptr_t)ptr;
    bool names_host = false;
    CUresult result = CUDA_SUCCESS;
    pthread_mutex_lock(&cd.lock);
    for (size_t i = 0; i < count && result == CUDA_SUCCESS; i++) {
        int device;
        result = check_location(&desc[i].location, &device);
        names_host = names_host || device < 0;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            result = CUDA_ERROR_INVALID_VALUE;
    }
    if (result == CUDA_SUCCESS && !whole_mappings(base, size))
        result = CUDA_ERROR_INVALID_VALUE;
    for (uintptr_t at = base; result == CUDA_SUCCESS && names_host && at < base + size;) {
        region *m = cd_region_at_locked(at, REGION_MAPPED);
        if (m->device >= 0)
            result = CUDA_ERROR_INVALID_VALUE;
        at += m->size;
    }
    for (uintptr_t at = base; result == CUDA_SUCCESS && at < base + size;) {
        region *m = cd_region_at_locked(at, REGION_MAPPED);
        charge(m->device >= 0 ? &sim_calibration_now()->vmm_set_access_device
                              : &sim_calibration_now()->vmm_set_access_host, m->size);
        for (size_t i = 0; i < count; i++) {
            int device = device_of(&desc[i].location);
            *(device < 0 ? &m->host_access : &m->access[device]) = desc[i].flags;
        }
        protect(m);
        at += m->size;
    }
    if (result == CUDA_SUCCESS)
        cd_running_recheck_locked();
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    CD_ENTER("cuMemGetAccess");
    if (!flags || !location)
        return CUDA_ERROR_INVALID_VALUE;
    int device;
    pthread_mutex_lock(&cd.lock);
    CUresult result = check_location(location, &device);
    region *m = cd_region_find_locked((uintptr_t)ptr, REGION_MASK(REGION_MAPPED));
    if (result == CUDA_SUCCESS && !m)
        result = CUDA_ERROR_INVALID_VALUE;
    if (result == CUDA_SUCCESS)
        *flags = device < 0 ? m->host_access : m->access[device];
    pthread_mutex_unlock(&cd.lock);
    return result;
}
