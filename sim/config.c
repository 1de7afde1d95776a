/* The simulator's configuration: how many devices, their shape (name, memory, SMs, compute
 * capability, copy engines, host VMM, the memory the driver holds) and whether work is
 * executed or only timed. Set
 * through sim.h before cuInit, else read from the environment at cuInit; what the API set
 * wins. A preset (LMS_SIM_DEVICE) gives every field of the shape, and the other variables
 * override single fields of it. */
#include "sim/sim_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct preset {
    const char *key;                /* LMS_SIM_DEVICE's value */
    const char *name;
    unsigned long long capacity_mb;
    int sm_count, cc_major, cc_minor, async_engines;
    bool host_vmm;
    /* Device memory the driver takes for each context, and for each kernel at its first launch
     * in a context. The H100's 527 MiB per context is measured (cuMemGetInfo's free after the
     * primary context's creation: 552402944 bytes less than cuDeviceTotalMem); 2 MiB (one
     * granule) per kernel is an assumption. */
    unsigned long long context_reserve_mb, kernel_reserve_mb;
} preset;

static const preset presets[] = {
    /* The default: small, so that tests run out of memory soon, with a driver that takes
     * little of it; an H100 in all else. */
    {"test", "lms simulated GPU", 1024, 132, 9, 0, 3, true, 2, 2},
    /* The H100 of shared/GPU-FACTS.md, its memory as its driver counts it (cuDeviceTotalMem:
     * 85017493504 bytes, measured; nvidia-smi says 81559 MiB). */
    {"h100", "NVIDIA H100 80GB HBM3", 81079, 132, 9, 0, 3, true, 527, 2},
};

/* Fields the API set before cuInit. */
static struct {
    bool device_count, capacity[CD_MAX_DEVICES], name, sm_count, cc, async_engines, host_vmm,
        execution, context_reserve, kernel_reserve;
} configured;

static const preset *find_preset(const char *key)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(presets[i].key, key))
            return &presets[i];
    return NULL;
}

/* ---- through the API ---- */

static void apply_preset_locked(const preset *p)
{
    snprintf(cd.device_name, sizeof cd.device_name, "%s", p->name);
    for (int d = 0; d < CD_MAX_DEVICES; d++)
        cd.devices[d].capacity = (size_t)p->capacity_mb << 20;
    cd.sm_count = p->sm_count;
    cd.cc_major = p->cc_major;
    cd.cc_minor = p->cc_minor;
    cd.async_engines = p->async_engines;
    cd.host_vmm = p->host_vmm;
    cd.context_reserve = (size_t)p->context_reserve_mb << 20;
    cd.kernel_reserve = (size_t)p->kernel_reserve_mb << 20;
}

CUresult sim_set_device_preset(const char *key)
{
    const preset *p = key ? find_preset(key) : NULL;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    apply_preset_locked(p);
    for (int d = 0; d < CD_MAX_DEVICES; d++)
        configured.capacity[d] = true;
    configured.name = configured.sm_count = configured.cc = configured.async_engines =
        configured.host_vmm = configured.context_reserve = configured.kernel_reserve = true;
    pthread_mutex_unlock(&cd.lock);
    return CUDA_SUCCESS;
}

void sim_set_device_count(int count)
{
    pthread_mutex_lock(&cd.lock);
    if (count >= 0 && count <= CD_MAX_DEVICES) {
        cd.device_count = count;
        configured.device_count = true;
    }
    pthread_mutex_unlock(&cd.lock);
}

void sim_set_capacity(int device, size_t bytes)
{
    pthread_mutex_lock(&cd.lock);
    if (device >= 0 && device < CD_MAX_DEVICES) {
        cd.devices[device].capacity = bytes;
        configured.capacity[device] = true;
    }
    pthread_mutex_unlock(&cd.lock);
}

void sim_set_device_name(const char *name)
{
    pthread_mutex_lock(&cd.lock);
    if (name && *name) {
        snprintf(cd.device_name, sizeof cd.device_name, "%s", name);
        configured.name = true;
    }
    pthread_mutex_unlock(&cd.lock);
}

void sim_set_sm_count(int count)
{
    pthread_mutex_lock(&cd.lock);
    if (count > 0) {
        cd.sm_count = count;
        configured.sm_count = true;
    }
    pthread_mutex_unlock(&cd.lock);
}

void sim_set_compute_capability(int major, int minor)
{
    pthread_mutex_lock(&cd.lock);
    if (major > 0 && minor >= 0) {
        cd.cc_major = major;
        cd.cc_minor = minor;
        configured.cc = true;
    }
    pthread_mutex_unlock(&cd.lock);
}

void sim_set_async_engine_count(int count)
{
    pthread_mutex_lock(&cd.lock);
    if (count >= 0) {
        cd.async_engines = count;
        configured.async_engines = true;
    }
    pthread_mutex_unlock(&cd.lock);
}

void sim_set_host_vmm(int supported)
{
    pthread_mutex_lock(&cd.lock);
    cd.host_vmm = supported != 0;
    configured.host_vmm = true;
    pthread_mutex_unlock(&cd.lock);
}

void sim_set_context_reserve(size_t bytes)
{
    pthread_mutex_lock(&cd.lock);
    cd.context_reserve = bytes;
    configured.context_reserve = true;
    pthread_mutex_unlock(&cd.lock);
}

void sim_set_kernel_reserve(size_t bytes)
{
    pthread_mutex_lock(&cd.lock);
    cd.kernel_reserve = bytes;
    configured.kernel_reserve = true;
    pthread_mutex_unlock(&cd.lock);
}

void sim_set_execution(sim_execution mode)
{
    pthread_mutex_lock(&cd.lock);
    cd.timing_only = mode == SIM_TIMING_ONLY;
    configured.execution = true;
    pthread_mutex_unlock(&cd.lock);
}

/* ---- from the environment ---- */

/* Reads an integer variable from min to max; false (and a log line naming the variable)
 * when it is set to anything else. */
static bool env_number(const char *var, unsigned long long min, unsigned long long max,
                       unsigned long long *value)
{
    const char *text = cd_getenv(var);
    if (!text)
        return true;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-' || v < min || v > max) {
        cd_log("%s=%s: expected an integer from %llu to %llu", var, text, min, max);
        return false;
    }
    *value = v;
    return true;
}

/* LMS_SIM_EXECUTE: execute (the default) or timing-only. */
static bool env_execution(bool *timing_only)
{
    const char *text = cd_getenv("LMS_SIM_EXECUTE");
    if (!text)
        return true;
    if (strcmp(text, "execute") != 0 && strcmp(text, "timing-only") != 0) {
        cd_log("LMS_SIM_EXECUTE=%s: expected execute or timing-only", text);
        return false;
    }
    *timing_only = !strcmp(text, "timing-only");
    return true;
}

/* LMS_SIM_CC: major.minor, as 9.0. */
static bool env_compute_capability(int *major, int *minor)
{
    const char *text = cd_getenv("LMS_SIM_CC");
    if (!text)
        return true;
    unsigned a, b;
    int end = 0;
    if (sscanf(text, "%2u.%1u%n", &a, &b, &end) != 2 || text[end] || a == 0 ||
        (text[0] < '0' || text[0] > '9')) {
        cd_log("LMS_SIM_CC=%s: expected a compute capability such as 9.0", text);
        return false;
    }
    *major = (int)a;
    *minor = (int)b;
    return true;
}

static bool env_name(const char **name)
{
    const char *text = cd_getenv("LMS_SIM_NAME");
    if (!text)
        return true;
    if (!*text || strlen(text) >= sizeof cd.device_name) {
        cd_log("LMS_SIM_NAME=%s: expected a name of 1 to %zu characters", text,
               sizeof cd.device_name - 1);
        return false;
    }
    *name = text;
    return true;
}

CUresult cd_configure_locked(void)
{
    const preset *shape = &presets[0];
    const char *preset_key = cd_getenv("LMS_SIM_DEVICE");
    if (preset_key && !(shape = find_preset(preset_key))) {
        char keys[64] = "";
        for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
            snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s%s", i ? ", " : "",
                     presets[i].key);
        cd_log("LMS_SIM_DEVICE=%s: expected one of %s", preset_key, keys);
        return CUDA_ERROR_INVALID_VALUE;
    }
    const char *name = shape->name;
    unsigned long long devices = 1, capacity_mb = shape->capacity_mb, host_vmm = shape->host_vmm;
    unsigned long long sms = (unsigned long long)shape->sm_count;
    unsigned long long engines = (unsigned long long)shape->async_engines;
    unsigned long long context_mb = shape->context_reserve_mb, kernel_mb = shape->kernel_reserve_mb;
    int cc_major = shape->cc_major, cc_minor = shape->cc_minor;
    bool timing_only = false;
    if (!env_number("LMS_SIM_DEVICES", 0, CD_MAX_DEVICES, &devices) ||
        !env_number("LMS_SIM_CAPACITY_MB", 0, 1ull << 30, &capacity_mb) ||
        !env_number("LMS_SIM_HOST_VMM", 0, 1, &host_vmm) ||
        !env_number("LMS_SIM_SMS", 1, 65535, &sms) ||
        !env_number("LMS_SIM_ASYNC_ENGINES", 0, 64, &engines) || !env_name(&name) ||
        !env_number("LMS_SIM_CONTEXT_RESERVE_MB", 0, 1ull << 30, &context_mb) ||
        !env_number("LMS_SIM_KERNEL_RESERVE_MB", 0, 1ull << 30, &kernel_mb) ||
        !env_compute_capability(&cc_major, &cc_minor) ||
        !env_execution(&timing_only))
        return CUDA_ERROR_INVALID_VALUE;
    if (!configured.device_count)
        cd.device_count = (int)devices;
    for (int d = 0; d < CD_MAX_DEVICES; d++)
        if (!configured.capacity[d])
            cd.devices[d].capacity = (size_t)capacity_mb << 20;
    if (!configured.name)
        snprintf(cd.device_name, sizeof cd.device_name, "%s", name);
    if (!configured.sm_count)
        cd.sm_count = (int)sms;
    if (!configured.cc) {
        cd.cc_major = cc_major;
        cd.cc_minor = cc_minor;
    }
    if (!configured.async_engines)
        cd.async_engines = (int)engines;
    if (!configured.host_vmm)
        cd.host_vmm = host_vmm != 0;
    if (!configured.execution)
        cd.timing_only = timing_only;
    if (!configured.context_reserve)
        cd.context_reserve = (size_t)context_mb << 20;
    if (!configured.kernel_reserve)
        cd.kernel_reserve = (size_t)kernel_mb << 20;
    return CUDA_SUCCESS;
}
