/* LMS_SIM_TIMELINE=FILE: the simulated device's timeline, op by op, as a Chrome trace that
 * Perfetto (ui.perfetto.dev) and chrome://tracing open. Each device is a process whose
 * threads are its engines (compute, copies in, copies out); each op is a slice from its start
 * to its end in virtual time, with the stream it was queued on and when the host queued it;
 * a kernel's also with its cost (cd_kernel_cost_json_locked), from which the fastest schedule
 * of a run that swaps is bounded (tools/bench/least_time.py).
 * The host is a process of its own whose slices are the times it waited for the device: in a
 * run that swaps, where the device idles while the host waits, they show why.
 *
 * The events form a JSON array that is closed at exit; a run that is killed leaves it
 * unterminated, which those viewers accept. `%p` becomes the process id, and an existing file
 * is never overwritten (the log says so, and nothing is written). */
#include "sim/sim_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define HOST_PID 1000 /* above every device's ordinal */

static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *file;
static bool opened; /* tried already: file is NULL when it could not be made */
/* No timeline this run (not asked for, or not made): every op skips it without the lock. */
static atomic_bool unwanted;

static const char *const engine_names[SIM_ENGINE_COUNT] = { "compute", "copies in (HtoD)",
                                                            "copies out (DtoH)" };

static void write_names(void)
{
    fprintf(file, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": {\"name\": "
            "\"host (waits for the device)\"}}", HOST_PID);
    for (int d = 0; d < cd.device_count; d++) {
        fprintf(file, ",\n{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": "
                "{\"name\": \"simulated GPU %d\"}}", d, d);
        for (int e = 0; e < SIM_ENGINE_COUNT; e++)
            fprintf(file, ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, "
                    "\"args\": {\"name\": \"%s\"}}", d, e, engine_names[e]);
    }
}

/* The file LMS_SIM_TIMELINE names, made; NULL when it is not asked for or cannot be. */
static FILE *open_timeline(void)
{
    const char *path = cd_getenv("LMS_SIM_TIMELINE");
    char expanded[4096];
    if (!path || !*path)
        return NULL;
    if (!cd_expand_path(path, expanded, sizeof expanded)) {
        cd_log("LMS_SIM_TIMELINE=%s: the name is too long", path);
        return NULL;
    }
    int fd = open(expanded, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *made = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!made) {
        cd_log("LMS_SIM_TIMELINE=%s: cannot create it: %s", expanded, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    return made;
}

/* Under file_lock: the file, opened on first use. */
static FILE *timeline(void)
{
    if (!opened) {
        opened = true;
        if ((file = open_timeline())) {
            fputs("[\n", file);
            write_names();
        } else {
            atomic_store(&unwanted, true);
        }
    }
    return file;
}

/* more: further members of args (", ..."), or "" */
static void slice(int pid, int tid, const char *name, sim_ns start, sim_ns end, const char *args, const char *more)
{
    fprintf(file, ",\n{\"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"name\": \"%s\", \"ts\": %.3f, "
            "\"dur\": %.3f, \"args\": {%s%s}}", pid, tid, name, start / 1e3, (end - start) / 1e3, args, more);
}

void cd_timeline_op_locked(const cd_stream *s, const cd_op *op, sim_engine engine, sim_ns queued,
                           sim_ns start, sim_ns end)
{
    if (atomic_load_explicit(&unwanted, memory_order_relaxed))
        return;
    char name[160], args[160], cost[96 * SIM_MAX_KERNEL_PARAMS + 64] = "";
    size_t bytes = 0;
    switch (op->kind) {
    case CD_OP_KERNEL:
        snprintf(name, sizeof name, "%s", cd_kernel_name_locked(op));
        memcpy(cost, ", ", 2); /* its cost follows the other members */
        if (!cd_kernel_cost_json_locked(op, cost + 2, sizeof cost - 2))
            cost[0] = '\0';
        break;
    case CD_OP_COPY:
        bytes = cd_copy_bytes(op);
        snprintf(name, sizeof name, "copy %.1f MiB", bytes / 1048576.0);
        break;
    case CD_OP_MEMSET:
        bytes = op->u.memset.count * op->u.memset.element_size * op->u.memset.height;
        snprintf(name, sizeof name, "memset %.1f MiB", bytes / 1048576.0);
        break;
    default:
        return;
    }
    /* Kernel names are C identifiers; nothing in them needs escaping. */
    snprintf(args, sizeof args, "\"stream\": %llu, \"queued_us\": %.3f, \"bytes\": %zu", s->id,
             queued / 1e3, bytes);
    pthread_mutex_lock(&file_lock);
    if (timeline())
        slice(s->ctx->device, engine, name, start, end, args, cost);
    pthread_mutex_unlock(&file_lock);
}

void cd_timeline_host_wait(sim_ns from, sim_ns until)
{
    if (atomic_load_explicit(&unwanted, memory_order_relaxed))
        return;
    pthread_mutex_lock(&file_lock);
    if (until > from && timeline())
        slice(HOST_PID, 0, "host waits", from, until, "", "");
    pthread_mutex_unlock(&file_lock);
}

__attribute__((destructor)) static void close_timeline(void)
{
    pthread_mutex_lock(&file_lock);
    if (file) {
        fputs("\n]\n", file);
        if (fclose(file) != 0)
            cd_log("LMS_SIM_TIMELINE: writing it failed");
        file = NULL;
    }
    pthread_mutex_unlock(&file_lock);
}
