/* The simulator's state, its call counters and fault injection, its log, faults, and the
 * device entry points. Its configuration is read in config.c, contexts live in contexts.c. */
#include "sim/sim_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

struct cd_state cd = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .progress = PTHREAD_COND_INITIALIZER,
};

/* The simulator's variables are LMS_SIM_*; the names it had as a test double, CUDADOUBLE_*,
 * are still read for one release when the new name is unset. */
const char *cd_getenv(const char *name)
{
    const char *value = getenv(name);
    if (value || strncmp(name, "LMS_SIM_", 8) != 0)
        return value;
    char old[64];
    snprintf(old, sizeof old, "CUDADOUBLE_%s", name + 8);
    return getenv(old);
}

/* ---- log ---- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_file;

void cd_log(const char *fmt, ...)
{
    pthread_mutex_lock(&log_lock);
    if (!log_file) {
        const char *path = cd_getenv("LMS_SIM_LOG");
        if (path && *path)
            log_file = fopen(path, "a");
        if (!log_file)
            log_file = stderr;
    }
    va_list ap;
    va_start(ap, fmt);
    fputs("lms-sim: ", log_file);
    vfprintf(log_file, fmt, ap);
    fputc('\n', log_file);
    fflush(log_file);
    va_end(ap);
    pthread_mutex_unlock(&log_lock);
}

CUresult cd_unsupported(const char *entry_point)
{
    cd_log("%s: not implemented by the simulator, answered CUDA_ERROR_NOT_SUPPORTED", entry_point);
    pthread_mutex_lock(&cd.lock);
    cd.unsupported_calls++;
    pthread_mutex_unlock(&cd.lock);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- call counters and fault injection ---- */

typedef struct entry_stats {
    char name[64];              /* base name: no _v2, _ptds or _ptsz suffix */
    unsigned long calls;
    unsigned long fail_in;      /* 0: no fault pending; n: the nth call from now fails */
    unsigned long fail_count;   /* and so many in a row from it */
    CUresult fail_result;
    double host_ns;             /* what a call costs the host's virtual clock */
    UT_hash_handle hh;
} entry_stats;

static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static entry_stats *stats;

/* "cuMemAlloc_v2", "cuMemcpyHtoD_v2_ptds" and "cuMemAlloc" all count as "cuMemAlloc". */
static void base_name(const char *entry_point, char out[64])
{
    snprintf(out, 64, "%s", entry_point);
    size_t len = strlen(out);
    if (len > 5 && (!strcmp(out + len - 5, "_ptds") || !strcmp(out + len - 5, "_ptsz")))
        out[len -= 5] = '\0';
    size_t digits = 0;
    while (digits < len && out[len - 1 - digits] >= '0' && out[len - 1 - digits] <= '9')
        digits++;
    if (digits > 0 && len > digits + 2 && out[len - digits - 1] == 'v' &&
        out[len - digits - 2] == '_')
        out[len - digits - 2] = '\0';
}

static entry_stats *stats_for(const char *entry_point)
{
    char name[64];
    base_name(entry_point, name);
    entry_stats *s;
    HASH_FIND_STR(stats, name, s);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s)
            abort();
        memcpy(s->name, name, sizeof name);
        s->host_ns = cd_call_ns(name);
        HASH_ADD_STR(stats, name, s);
    }
    return s;
}

/* ---- fork ---- */

/* The thread that forks takes every lock of the simulator first (cd.lock is the outer one: the
 * others are taken under it, never the reverse), so the child finds them free. Registered
 * when the library loads, before liblms registers its own handlers: pthread_atfork runs
 * prepare handlers in reverse order, so liblms's locks, held while it calls the driver, are
 * taken before these. */
static void lock_for_fork(void)
{
    pthread_mutex_lock(&cd.lock);
    pthread_mutex_lock(&stats_lock);
    pthread_mutex_lock(&log_lock);
}

static void unlock_after_fork(void)
{
    pthread_mutex_unlock(&log_lock);
    pthread_mutex_unlock(&stats_lock);
    pthread_mutex_unlock(&cd.lock);
}

/* The threads that waited on cd.progress stayed with the parent: a broadcast in the child
 * would wait for them for ever. The stream worker threads stayed there too: work queued in
 * the child on a stream made before fork never runs. */
static void unlock_in_child(void)
{
    pthread_cond_init(&cd.progress, NULL);
    unlock_after_fork();
}

__attribute__((constructor)) static void handle_fork(void)
{
    pthread_atfork(lock_for_fork, unlock_after_fork, unlock_in_child);
}

/* The errors after which, on the GPU, the context is unusable: every later call in it returns
 * the error again, until it is destroyed or reset (cuda.h's documentation of each). An injected
 * one is as sticky as a real fault; any other injected error fails its one call. */
static bool is_sticky(CUresult result)
{
    switch (result) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
        return true;
    default:
        return false;
    }
}

static void make_sticky(const char *entry_point, CUresult result)
{
    cd_ctx *ctx;
    pthread_mutex_lock(&cd.lock);
    if (cd.initialized && cd_current_ctx_locked(&ctx) == CUDA_SUCCESS &&
        ctx->sticky_error == CUDA_SUCCESS) {
        ctx->sticky_error = result;
        cd_log("%s: injected error %d, and every later call in its context fails", entry_point,
               (int)result);
    }
    pthread_mutex_unlock(&cd.lock);
}

bool cd_enter(const char *entry_point, cd_entry_checks checks, CUresult *result)
{
    pthread_mutex_lock(&stats_lock);
    entry_stats *s = stats_for(entry_point);
    s->calls++;
    bool injected = s->fail_in > 0 && --s->fail_in == 0;
    if (injected)
        *result = s->fail_result;
    if (injected && s->fail_count > 1) { /* the next call fails too */
        s->fail_count -= s->fail_count != SIM_FAIL_FOR_GOOD;
        s->fail_in = 1;
    }
    double host_ns = s->host_ns;
    pthread_mutex_unlock(&stats_lock);
    cd_host_charge(host_ns);
    if (injected) {
        if (is_sticky(*result))
            make_sticky(entry_point, *result);
        return true;
    }
    if (checks == CD_CHECK_NOTHING)
        return false;
    cd_ctx *ctx;
    pthread_mutex_lock(&cd.lock);
    *result = !cd.initialized ? CUDA_ERROR_NOT_INITIALIZED
              : checks == CD_CHECK_INIT_AND_FAULT && cd_current_ctx_locked(&ctx) == CUDA_SUCCESS
                  ? ctx->sticky_error
                  : CUDA_SUCCESS;
    pthread_mutex_unlock(&cd.lock);
    return *result != CUDA_SUCCESS;
}

void sim_fail_calls(const char *entry_point, unsigned long nth, unsigned long count, CUresult result)
{
    pthread_mutex_lock(&stats_lock);
    entry_stats *s = stats_for(entry_point);
    s->fail_in = count ? nth : 0;
    s->fail_count = count;
    s->fail_result = result;
    pthread_mutex_unlock(&stats_lock);
}

void sim_fail_call(const char *entry_point, unsigned long nth, CUresult result)
{
    sim_fail_calls(entry_point, nth, 1, result);
}

void sim_clear_faults(void)
{
    pthread_mutex_lock(&stats_lock);
    for (entry_stats *s = stats; s; s = s->hh.next)
        s->fail_in = 0;
    pthread_mutex_unlock(&stats_lock);
}

/* LMS_SIM_CALLS=FILE: at exit, each entry point called and its number of calls, one
 * "name calls" line each, in name order, for tools that count calls of a whole program. */
static int by_name(const entry_stats *a, const entry_stats *b) { return strcmp(a->name, b->name); }

__attribute__((destructor)) static void write_call_counts(void)
{
    const char *path = cd_getenv("LMS_SIM_CALLS");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "w");
    if (!f) {
        cd_log("LMS_SIM_CALLS=%s: cannot create it", path);
        return;
    }
    pthread_mutex_lock(&stats_lock);
    HASH_SORT(stats, by_name);
    for (const entry_stats *s = stats; s; s = s->hh.next)
        if (s->calls)
            fprintf(f, "%s %lu\n", s->name, s->calls);
    pthread_mutex_unlock(&stats_lock);
    if (fclose(f) != 0)
        cd_log("LMS_SIM_CALLS=%s: writing it failed", path);
}

unsigned long sim_calls(const char *entry_point)
{
    pthread_mutex_lock(&stats_lock);
    unsigned long calls = stats_for(entry_point)->calls;
    pthread_mutex_unlock(&stats_lock);
    return calls;
}

static size_t read_locked(const size_t *counter)
{
    pthread_mutex_lock(&cd.lock);
    size_t value = *counter;
    pthread_mutex_unlock(&cd.lock);
    return value;
}

size_t sim_bytes_mapped(void) { return read_locked(&cd.bytes_mapped); }
size_t sim_bytes_copied(void) { return read_locked(&cd.bytes_copied); }

size_t sim_device_used(int device)
{
    if (device < 0 || device >= CD_MAX_DEVICES)
        return 0;
    return read_locked(&cd.devices[device].used);
}

size_t sim_device_reserved(int device)
{
    if (device < 0 || device >= CD_MAX_DEVICES)
        return 0;
    return read_locked(&cd.devices[device].reserved);
}

void cd_fault_locked(cd_ctx *ctx, const char *what)
{
    if (ctx->sticky_error != CUDA_SUCCESS)
        return;
    ctx->sticky_error = CUDA_ERROR_ILLEGAL_ADDRESS;
    cd_log("%s: CUDA_ERROR_ILLEGAL_ADDRESS, and every later call in its context fails", what);
}

unsigned long sim_unsupported_calls(void)
{
    pthread_mutex_lock(&cd.lock);
    unsigned long n = cd.unsupported_calls;
    pthread_mutex_unlock(&cd.lock);
    return n;
}

/* ---- devices ---- */

static CUresult arm_fault_from_env(void);

CUresult cuInit(unsigned int Flags)
{
    CD_ENTER_ANYTIME("cuInit");
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult result = CUDA_SUCCESS;
    pthread_mutex_lock(&cd.lock);
    if (!cd.initialized) {
        result = cd_configure_locked();
        if (result == CUDA_SUCCESS)
            result = arm_fault_from_env();
        cd.initialized = result == CUDA_SUCCESS;
        if (cd.initialized)
            cd_contexts_init_locked();
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    CD_ENTER_ANYTIME("cuDriverGetVersion");
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = CD_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

static bool valid_device(CUdevice dev)
{
    pthread_mutex_lock(&cd.lock);
    bool valid = dev >= 0 && dev < cd.device_count;
    pthread_mutex_unlock(&cd.lock);
    return valid;
}

CUresult cuDeviceGetCount(int *count)
{
    CD_ENTER("cuDeviceGetCount");
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    *count = cd.device_count;
    pthread_mutex_unlock(&cd.lock);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CD_ENTER("cuDeviceGet");
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(ordinal))
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CD_ENTER("cuDeviceGetName");
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&cd.lock);
    snprintf(name, (size_t)len, "%s", cd.device_name);
    pthread_mutex_unlock(&cd.lock);
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CD_ENTER("cuDeviceTotalMem");
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = read_locked(&cd.devices[dev].capacity);
    return CUDA_SUCCESS;
}

/* Values of an H100 80GB, where they matter; the device shape's own in shape_attribute. */
static const struct {
    CUdevice_attribute attribute;
    int value;
} attribute_values[] = {
    {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
    {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1},
    {CU_DEVICE_ATTRIBUTE_INTEGRATED, 0},
    {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448},
    {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 52428800},
    {CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0},
    {CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0},
    {CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 0},
};

/* The attributes of the configured device shape (config.c); false for the others. */
static bool shape_attribute(CUdevice_attribute attrib, int *value)
{
    bool known = true;
    pthread_mutex_lock(&cd.lock);
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *value = cd.cc_major;
        break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        *value = cd.cc_minor;
        break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *value = cd.sm_count;
        break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
        *value = cd.async_engines;
        break;
    case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        *value = cd.host_vmm;
        break;
    default:
        known = false;
    }
    pthread_mutex_unlock(&cd.lock);
    return known;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CD_ENTER("cuDeviceGetAttribute");
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (shape_attribute(attrib, pi))
        return CUDA_SUCCESS;
    if (attrib == CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID) {
        *pi = dev;
        return CUDA_SUCCESS;
    }
    for (size_t i = 0; i < sizeof attribute_values / sizeof attribute_values[0]; i++) {
        if (attribute_values[i].attribute == attrib) {
            *pi = attribute_values[i].value;
            return CUDA_SUCCESS;
        }
    }
    cd_log("cuDeviceGetAttribute: attribute %d not modelled, answered CUDA_ERROR_NOT_SUPPORTED",
           (int)attrib);
    pthread_mutex_lock(&cd.lock);
    cd.unsupported_calls++;
    pthread_mutex_unlock(&cd.lock);
    return CUDA_ERROR_NOT_SUPPORTED;
}

size_t cd_device_free_locked(int device)
{
    const cd_device *dev = &cd.devices[device];
    size_t taken = dev->used + dev->reserved;
    return taken < dev->capacity ? dev->capacity - taken : 0;
}

/* Free counts out what the driver holds for its contexts and kernels, as on the GPU. */
CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    CD_ENTER("cuMemGetInfo");
    if (!free || !total)
        return CUDA_ERROR_INVALID_VALUE;
    cd_ctx *ctx;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_current_ctx_locked(&ctx);
    if (result == CUDA_SUCCESS) {
        *total = cd.devices[ctx->device].capacity;
        *free = cd_device_free_locked(ctx->device);
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* ---- error strings ---- */

static const struct {
    CUresult code;
    const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED",
     "context is destroyed"},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "peer access is not supported between these two devices"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
     "peer access has not been enabled"},
    {CUDA_ERROR_TOO_MANY_PEERS, "CUDA_ERROR_TOO_MANY_PEERS",
     "peer mapping resources exhausted"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_FILE_NOT_FOUND, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_MERGE, "CUDA_ERROR_STREAM_CAPTURE_MERGE",
     "operation would result in a merge of separate capture sequences"},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
     "capture was not ended in the same stream as it began"},
    {CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
     "capturing stream has unjoined work"},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
     "dependency created on uncaptured work in another stream"},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT",
     "operation not permitted on an event last recorded in a capturing stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
     "the graph update was not performed because it included changes which violated "
     "constraints specific to instantiated graph update"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
     "the operation cannot be performed in the present state"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int error_index(CUresult code)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code)
            return (int)i;
    return -1;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    CD_ENTER_ANYTIME("cuGetErrorName");
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    int i = error_index(error);
    *pStr = i < 0 ? NULL : errors[i].name;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    CD_ENTER_ANYTIME("cuGetErrorString");
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    int i = error_index(error);
    *pStr = i < 0 ? NULL : errors[i].text;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* LMS_SIM_FAIL=ENTRY:N:ERROR, read at cuInit: the Nth call of ENTRY since the process started
 * (cuInit's own and earlier ones count) returns ERROR, a CUresult name with or without its
 * CUDA_ERROR_ prefix. A sweep of faults over a whole program names each call this way. */
static CUresult arm_fault_from_env(void)
{
    const char *text = cd_getenv("LMS_SIM_FAIL");
    if (!text || !*text)
        return CUDA_SUCCESS;
    char entry[64], error[64], prefixed[80];
    unsigned long nth;
    int end = 0;
    bool parsed = sscanf(text, "%63[^:]:%lu:%63[A-Z_]%n", entry, &nth, error, &end) == 3 &&
                  text[end] == '\0' && nth > 0;
    snprintf(prefixed, sizeof prefixed, "CUDA_ERROR_%s", error);
    int code = -1;
    for (size_t i = 0; parsed && code < 0 && i < sizeof errors / sizeof errors[0]; i++)
        if (!strcmp(errors[i].name, error) || !strcmp(errors[i].name, prefixed))
            code = (int)i;
    if (code < 0 || errors[code].code == CUDA_SUCCESS) {
        cd_log("LMS_SIM_FAIL=%s: expected ENTRY:N:ERROR, N from 1, ERROR a CUDA_ERROR_ name", text);
        return CUDA_ERROR_INVALID_VALUE;
    }
    unsigned long made = sim_calls(entry);
    if (nth > made)
        sim_fail_call(entry, nth - made, errors[code].code);
    else
        cd_log("LMS_SIM_FAIL=%s: call %lu was made before cuInit: nothing injected", text, nth);
    return CUDA_SUCCESS;
}
