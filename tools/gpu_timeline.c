/* liblms-timeline.so: a real GPU's timeline in the format of the simulated GPU's
 * (LMS_SIM_TIMELINE, sim/timeline_file.c), so that a run on a GPU and the same run simulated
 * can be laid side by side, slice for slice, in Perfetto or by `lms-timeline summary`.
 *
 *   CUDA_INJECTION64_PATH=.../liblms-timeline.so LMS_GPU_TIMELINE=FILE PROGRAM ...
 *
 * (`lms-run --timeline FILE` sets both.) The driver loads the library named by
 * CUDA_INJECTION64_PATH in cuInit and calls its InitializeInjection: the library sees every
 * context, whoever made it (cuDNN, cuBLAS, a static runtime) and whatever is preloaded, with no
 * symbol interposed. It asks CUPTI's activity API for what the device ran, with the device's
 * own start and end times: kernels (without serializing them), copies, memsets, and the host's
 * waits for the device (event, stream and context synchronization). Each is written as the
 * simulator writes it: each device a process whose threads are its engines (compute, copies
 * in, copies out), copies between device addresses and memsets on the compute engine as the
 * simulator prices them, the host's waits a process of their own. Times are microseconds
 * from the injection. Kernels that overlap on the device overlap on its compute thread.
 *
 * CUPTI hands records over in buffers when they fill and at exit, so the file is written in
 * batches, not in time order; it is a JSON array closed at exit (a killed run leaves it
 * unterminated, which the viewers accept). `%p` in FILE becomes the process id, and an
 * existing file is never overwritten. Records CUPTI dropped are counted on stderr. */
#include "preload/output_file.h"

#include <cupti.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOST_PID 1000 /* above every device's ordinal, as in the simulator's file */
#define MAX_DEVICES 64
#define BUFFER_BYTES (8u << 20)

enum engine { ENGINE_COMPUTE, ENGINE_H2D, ENGINE_D2H, ENGINE_COUNT };
static const char *const engine_names[ENGINE_COUNT] = { "compute", "copies in (HtoD)",
                                                        "copies out (DtoH)" };

static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *file;
static uint64_t origin_ns;
static uint64_t devices_named; /* bit d: GPU d's process and threads are named in the file */
static unsigned long long dropped;

static void say(const char *what, CUptiResult r)
{
    const char *text = "?";
    cuptiGetResultString(r, &text);
    fprintf(stderr, "liblms-timeline: %s: %s\n", what, text);
}

static void name_device(uint32_t device)
{
    if (device >= MAX_DEVICES || devices_named & (1ull << device))
        return;
    devices_named |= 1ull << device;
    fprintf(file, ",\n{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %" PRIu32 ", \"args\": "
            "{\"name\": \"GPU %" PRIu32 "\"}}", device, device);
    for (int e = 0; e < ENGINE_COUNT; e++)
        fprintf(file, ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %" PRIu32 ", \"tid\": %d, "
                "\"args\": {\"name\": \"%s\"}}", device, e, engine_names[e]);
}

/* A kernel's name as a JSON string's contents: C++ names hold no quotes, but nothing is assumed. */
static void write_escaped(const char *text)
{
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(file, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(file, "\\u%04x", *c);
        else
            fputc(*c, file);
    }
}

static void slice(uint32_t pid, enum engine tid, const char *name, uint64_t start, uint64_t end,
                  uint32_t stream, uint64_t bytes)
{
    if (pid != HOST_PID)
        name_device(pid);
    fprintf(file, ",\n{\"ph\": \"X\", \"pid\": %" PRIu32 ", \"tid\": %d, \"name\": \"", pid, tid);
    write_escaped(name);
    fprintf(file, "\", \"ts\": %.3f, \"dur\": %.3f, \"args\": {\"stream\": %" PRIu32
            ", \"bytes\": %" PRIu64 "}}", (double)(start - origin_ns) / 1e3,
            (double)(end - start) / 1e3, stream, bytes);
}

static enum engine copy_engine(uint8_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
        return ENGINE_COMPUTE;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
        return ENGINE_D2H;
    default: /* to the device, and host to host, where the simulator puts them too */
        return ENGINE_H2D;
    }
}

/* Under file_lock. */
static void write_record(const CUpti_Activity *record)
{
    char name[64];
    switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)record;
        slice(k->deviceId, ENGINE_COMPUTE, k->name ? k->name : "kernel", k->start, k->end,
              k->streamId, 0);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *c = (const CUpti_ActivityMemcpy6 *)record;
        snprintf(name, sizeof name, "copy %.1f MiB", c->bytes / 1048576.0);
        slice(c->deviceId, copy_engine(c->copyKind), name, c->start, c->end, c->streamId, c->bytes);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)record;
        snprintf(name, sizeof name, "memset %.1f MiB", m->bytes / 1048576.0);
        slice(m->deviceId, ENGINE_COMPUTE, name, m->start, m->end, m->streamId, m->bytes);
        break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const CUpti_ActivitySynchronization2 *s = (const CUpti_ActivitySynchronization2 *)record;
        /* A stream waiting for an event is the device's wait, not the host's. */
        if (s->type != CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT && s->end > s->start)
            slice(HOST_PID, ENGINE_COMPUTE, "host waits", s->start, s->end, s->streamId, 0);
        break;
    }
    default:
        break;
    }
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    (void)size;
    CUpti_Activity *record = NULL;
    pthread_mutex_lock(&file_lock);
    if (file)
        while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
            write_record(record);
    size_t lost = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &lost) == CUPTI_SUCCESS)
        dropped += lost;
    pthread_mutex_unlock(&file_lock);
    free(buffer);
}

static void close_timeline(void)
{
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&file_lock);
    if (file) {
        fputs("\n]\n", file);
        if (fclose(file) != 0)
            fprintf(stderr, "liblms-timeline: LMS_GPU_TIMELINE: writing it failed\n");
        file = NULL;
    }
    if (dropped)
        fprintf(stderr, "liblms-timeline: CUPTI dropped %llu records: the timeline lacks them\n", dropped);
    pthread_mutex_unlock(&file_lock);
}

static const CUpti_ActivityKind wanted[] = { CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                             CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                                             CUPTI_ACTIVITY_KIND_SYNCHRONIZATION };

/* Called by the driver in cuInit. Returns 1 (the driver ignores the value): a timeline that
 * cannot be made is said on stderr and the program runs on without one. */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
    const char *path = getenv("LMS_GPU_TIMELINE");
    char err[512];
    if (!path || !*path) {
        fprintf(stderr, "liblms-timeline: LMS_GPU_TIMELINE is not set: no timeline is written\n");
        return 1;
    }
    int fd = lms_output_file_create("LMS_GPU_TIMELINE", path, 0644, err, sizeof err);
    FILE *made = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!made) {
        fprintf(stderr, "liblms-timeline: %s\n", fd >= 0 ? "LMS_GPU_TIMELINE: fdopen failed" : err);
        return 1;
    }
    CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof wanted / sizeof wanted[0]; i++)
        r = cuptiActivityEnable(wanted[i]);
    if (r == CUPTI_SUCCESS)
        r = cuptiGetTimestamp(&origin_ns);
    if (r != CUPTI_SUCCESS) {
        say("CUPTI refused the activity records; no timeline", r);
        fclose(made);
        return 1;
    }
    fprintf(made, "[\n{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": {\"name\": "
            "\"host (waits for the device)\"}}", HOST_PID);
    pthread_mutex_lock(&file_lock);
    file = made;
    pthread_mutex_unlock(&file_lock);
    atexit(close_timeline);
    return 1;
}
