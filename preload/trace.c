/* The trace writer: Chrome Trace Event JSON, streamed through one bounded buffer.
 *
 * File layout (docs/trace-format.md): the array form, which viewers read even when the
 * process was killed before writing its end:
 *   [{"ph":"M","name":"lms.settings",...}
 *   ,{event}                       one per line, each starting with its comma
 *   ,{"name":"lms.trace_end",...}
 *   ]
 * Events are formatted straight into the buffer by the small writers below, which neither
 * allocate nor take locks, so the end can be written from a signal handler. */
#include "preload/trace.h"

#include "preload/output_file.h"
#include "preload/real_dlsym.h"
#include "preload/signals.h"
#include "preload/stack.h"
#include "preload/version.h"

#include <dlfcn.h>
#include <errno.h>
/* NVTX's loader finds its injection library's entry with dlsym: glibc's, as for the stacks,
 * not interpose.c's, a layer above the trace (preload/module.mk). */
#define dlsym(handle, name) lms_libc_dlsym(handle, name)
#include <nvToolsExt.h>
#undef dlsym
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUFFER_BYTES (128u << 10)
#define MAX_EVENT (56u << 10)      /* an event never needs more; larger ones are dropped */
#define MAX_USES 2000              /* addresses listed per launch; the rest are counted */
#define FRAME_NAME_MAX 160
#define END_RESERVE 1024           /* room kept under max_bytes for the marker and the end */

/* Tracks (Chrome "tid"s) of their own, so that viewers draw one row per kind of event. */
#define TRACK_PROCESS 1           /* launches, dumps and the trace's own markers */
#define TRACK_STALLS 2            /* calls waiting for restores */
enum { TRACK_ALLOCS, TRACK_SWAP_OUT, TRACK_SWAP_IN };
#define DEVICE_TRACK(dev, kind) (8 + 8 * (uint64_t)(dev) + (kind))

_Atomic unsigned lms_trace_flags_;

static struct {
    pthread_mutex_t lock;
    int fd;                        /* -1 when no trace is open */
    char buffer[BUFFER_BYTES];
    size_t used;
    _Atomic uint64_t flushed;      /* bytes on disk, always a whole number of events */
    uint64_t max_bytes;
    uint64_t events;
    bool truncated;
    bool write_failed;
    uint64_t named_devices;        /* bit d: the tracks of device d have names */
    int pid;
    uint64_t start_ns;
    unsigned stack_depth;
} trace = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

static struct {
    pthread_mutex_t lock;          /* held from dump_begin to dump_end */
    uint64_t id;
    uint64_t count;
    uint64_t now_ns;
    bool to_trace;
    int signal;
    struct sigaction previous;
    sem_t wake;
    _Atomic bool quit;
    bool thread_running;
    pthread_t thread;
    lms_trace_walk_fn walk;
    void *walk_ctx;
} dump = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* ---- Bounded writers: async-signal-safe, set `overflow` instead of writing past the end. */

typedef struct out {
    char *p;
    size_t len, cap;
    bool overflow;
} out;

static void put_bytes(out *o, const char *s, size_t n)
{
    if (o->overflow || n > o->cap - o->len) { o->overflow = true; return; }
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

static void put(out *o, const char *s) { put_bytes(o, s, strlen(s)); }

static void put_u64(out *o, uint64_t v)
{
    char digits[20];
    size_t n = 0;
    do digits[sizeof digits - ++n] = (char)('0' + v % 10); while ((v /= 10) && n < sizeof digits);
    put_bytes(o, digits + sizeof digits - n, n);
}

static void put_hex(out *o, uint64_t v)    /* as a JSON string: 64-bit values do not fit a double */
{
    char digits[16];
    size_t n = 0;
    do digits[sizeof digits - ++n] = "0123456789abcdef"[v & 15]; while ((v >>= 4) && n < sizeof digits);
    put(o, "\"0x");
    put_bytes(o, digits + sizeof digits - n, n);
    put(o, "\"");
}

static void put_string(out *o, const char *s)
{
    put(o, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char escaped[2] = { '\\', (char)c };
            put_bytes(o, escaped, 2);
        } else if (c < 0x20) {
            char escaped[6] = { '\\', 'u', '0', '0', "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15] };
            put_bytes(o, escaped, 6);
        } else {
            put_bytes(o, (const char *)&c, 1);
        }
    }
    put(o, "\"");
}

/* Nanoseconds as microseconds, keeping the nanosecond digits. */
static void put_us(out *o, uint64_t ns)
{
    put_u64(o, ns / 1000);
    char fraction[4] = { '.', (char)('0' + ns / 100 % 10), (char)('0' + ns / 10 % 10), (char)('0' + ns % 10) };
    put_bytes(o, fraction, 4);
}

/* A time since the trace started. */
static void put_ts(out *o, uint64_t ns) { put_us(o, ns > trace.start_ns ? ns - trace.start_ns : 0); }

static void put_event_head(out *o, const char *ph, const char *name, uint64_t track, uint64_t ns)
{
    put(o, ",\n{\"ph\":\"");
    put(o, ph);
    put(o, "\",\"name\":");
    put_string(o, name);
    put(o, ",\"pid\":");
    put_u64(o, (uint64_t)trace.pid);
    put(o, ",\"tid\":");
    put_u64(o, track);
    put(o, ",\"ts\":");
    put_ts(o, ns);
}

static void put_arg_u64(out *o, const char *name, uint64_t v)
{
    put(o, ",\"");
    put(o, name);
    put(o, "\":");
    put_u64(o, v);
}

static void put_arg_hex(out *o, const char *name, uint64_t v)
{
    put(o, ",\"");
    put(o, name);
    put(o, "\":");
    put_hex(o, v);
}

/* ---- The file. */

uint64_t lms_trace_now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static bool write_at(int fd, const char *data, size_t n, uint64_t offset)
{
    while (n > 0) {
        ssize_t wrote = pwrite(fd, data, n, (off_t)offset);
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0) return false;
        data += wrote;
        n -= (size_t)wrote;
        offset += (uint64_t)wrote;
    }
    return true;
}

static void report(const char *message)
{
    ssize_t ignored = write(STDERR_FILENO, message, strlen(message));
    (void)ignored;
}

/* With trace.lock held. */
static void flush_buffer(void)
{
    if (trace.used == 0 || trace.write_failed) { trace.used = 0; return; }
    uint64_t at = atomic_load(&trace.flushed);
    if (write_at(trace.fd, trace.buffer, trace.used, at)) {
        atomic_store(&trace.flushed, at + trace.used);
    } else {
        trace.write_failed = true;
        report("liblms: LMS_TRACE: cannot write the trace file; recording stops here\n");
    }
    trace.used = 0;
}

static out event_out(void)
{
    if (BUFFER_BYTES - trace.used < MAX_EVENT) flush_buffer();
    return (out){ .p = trace.buffer + trace.used, .cap = MAX_EVENT };
}

static void put_end_event(out *o, int signal_number, uint64_t ns)
{
    put_event_head(o, "i", "lms.trace_end", TRACK_PROCESS, ns);
    put(o, ",\"s\":\"g\",\"args\":{\"events\":");
    put_u64(o, trace.events);
    put(o, trace.truncated ? ",\"truncated\":true" : ",\"truncated\":false");
    put_arg_u64(o, "signal", (uint64_t)signal_number);
    put(o, "}}\n]\n");
}

/* Adds the event formatted in `o` (from event_out), unless it would pass max_bytes: then a
 * marker says where the trace stops, and recording ends. With trace.lock held. */
static void commit(out *o)
{
    if (o->overflow) return;
    uint64_t size_after = atomic_load(&trace.flushed) + trace.used + o->len + END_RESERVE;
    if (trace.max_bytes && size_after > trace.max_bytes) {
        out marker = { .p = trace.buffer + trace.used, .cap = MAX_EVENT };
        put_event_head(&marker, "i", "lms.trace_truncated", TRACK_PROCESS, lms_trace_now_ns());
        put(&marker, ",\"s\":\"g\",\"args\":{");
        put(&marker, "\"max_bytes\":");
        put_u64(&marker, trace.max_bytes);
        put_arg_u64(&marker, "events", trace.events);
        put(&marker, "}}");
        trace.used += marker.len;
        trace.truncated = true;
        atomic_fetch_and(&lms_trace_flags_, ~(LMS_TRACE_ON_EVENTS | LMS_TRACE_ON_USES));
        return;
    }
    trace.used += o->len;
    trace.events++;
}

static bool is_open(void) { return trace.fd >= 0 && !trace.truncated && !trace.write_failed; }

static void name_track(uint64_t track, const char *name)
{
    out o = event_out();
    put(&o, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":");
    put_u64(&o, (uint64_t)trace.pid);
    put(&o, ",\"tid\":");
    put_u64(&o, track);
    put(&o, ",\"args\":{\"name\":");
    put_string(&o, name);
    put(&o, "}}");
    commit(&o);
}

/* Locks the trace for one event of device `dev`, naming its tracks the first time. */
static bool lock_for_device(int dev)
{
    pthread_mutex_lock(&trace.lock);
    if (!is_open()) { pthread_mutex_unlock(&trace.lock); return false; }
    if (dev >= 0 && dev < 64 && !(trace.named_devices & (1ull << dev))) {
        static const char *const kinds[] = { "allocations", "swap out", "swap in" };
        trace.named_devices |= 1ull << dev;
        for (unsigned kind = 0; kind < 3; kind++) {
            char name[48];
            snprintf(name, sizeof name, "GPU %d %s", dev, kinds[kind]);
            name_track(DEVICE_TRACK(dev, kind), name);
        }
    }
    return true;
}

static void write_header(const lms_trace_config *cfg)
{
    char program[64] = "program";
    FILE *comm = fopen("/proc/self/comm", "re");
    if (comm) {
        if (fgets(program, sizeof program, comm)) program[strcspn(program, "\n")] = '\0';
        fclose(comm);
    }
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    out o = { .p = trace.buffer, .cap = MAX_EVENT };
    put(&o, "[{\"ph\":\"M\",\"name\":\"lms.settings\",\"pid\":");
    put_u64(&o, (uint64_t)trace.pid);
    put(&o, ",\"tid\":0,\"args\":{\"format\":\"liblms-trace\",\"version\":2,\"liblms\":\"" LMS_VERSION "\",\"program\":");
    put_string(&o, program);
    put_arg_u64(&o, "pid", (uint64_t)trace.pid);
    put_arg_u64(&o, "threshold_bytes", cfg->threshold_bytes);
    put_arg_u64(&o, "exclude_bytes", cfg->exclude_bytes);
    put_arg_u64(&o, "piece_bytes", cfg->piece_bytes);
    put(&o, ",\"policy\":");
    put_string(&o, cfg->policy ? cfg->policy : "lru");
    put(&o, ",\"mode\":");
    put_string(&o, cfg->mode ? cfg->mode : "swap");
    put_arg_u64(&o, "stack_depth", trace.stack_depth);
    put(&o, cfg->record_uses ? ",\"uses\":true" : ",\"uses\":false");
    put_arg_u64(&o, "max_bytes", cfg->max_bytes);
    put_arg_u64(&o, "clock_start_ns", trace.start_ns);
    put_arg_u64(&o, "epoch_start_us", (uint64_t)wall.tv_sec * 1000000u + (uint64_t)wall.tv_nsec / 1000u);
    put(&o, "}}\n,{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":");
    put_u64(&o, (uint64_t)trace.pid);
    put(&o, ",\"tid\":0,\"args\":{\"name\":");
    char process[96];
    snprintf(process, sizeof process, "liblms: %s", program);
    put_string(&o, process);
    put(&o, "}}");
    trace.used = o.len;
    name_track(TRACK_PROCESS, "liblms");
    name_track(TRACK_STALLS, "restore stalls");
}

/* ---- Closing, normally and on fatal signals. */

static const int fatal_signals[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL };

/* Appends the end event and the closing bracket after of the complete events on disk. */
static void finish_file(int signal_number, bool buffer_usable)
{
    if (buffer_usable) flush_buffer();
    char tail[512];
    out o = { .p = tail, .cap = sizeof tail };
    put_end_event(&o, signal_number, lms_trace_now_ns());
    uint64_t at = atomic_load(&trace.flushed);
    if (!trace.write_failed && write_at(trace.fd, tail, o.len, at)) {
        atomic_store(&trace.flushed, at + o.len);
        if (ftruncate(trace.fd, (off_t)(at + o.len)) != 0) report("liblms: LMS_TRACE: cannot trim the trace file\n");
    }
    close(trace.fd);
    trace.fd = -1;
}

/* At death by a signal: the thread holding the lock may be this one, interrupted; then the
 * buffer may be half-written and is left out, and the file still ends with whole events. */
static void finish_on_signal(int signal_number)
{
    unsigned flags = atomic_exchange(&lms_trace_flags_, 0u);
    if (!(flags & LMS_TRACE_ON_EVENTS) && !trace.truncated) return;
    bool locked = false;
    for (int tries = 0; tries < 50 && !locked; tries++) {
        locked = pthread_mutex_trylock(&trace.lock) == 0;
        if (!locked) nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
    }
    if (trace.fd >= 0) finish_file(signal_number, locked);
}

/* ---- The dump of live allocations. */

static void on_dump_signal(int signal_number)
{
    (void)signal_number;
    int saved_errno = errno;
    sem_post(&dump.wake);
    errno = saved_errno;
}

static void *dump_thread(void *unused)
{
    (void)unused;
    for (;;) {
        while (sem_wait(&dump.wake) != 0) { /* EINTR */ }
        if (atomic_load(&dump.quit)) return NULL;
        dump.walk(dump.walk_ctx, "signal");
    }
}

static int start_dump_thread(const lms_trace_config *cfg, char *err, size_t err_len)
{
    if (!cfg->walk_live) {
        snprintf(err, err_len, "LMS_DUMP_SIGNAL: no walk_live callback given to lms_trace_open");
        return -1;
    }
    dump.walk = cfg->walk_live;
    dump.walk_ctx = cfg->walk_ctx;
    atomic_store(&dump.quit, false);
    sem_init(&dump.wake, 0, 0);

    /* The dump thread takes no signals: the program's threads keep them all. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int failed = pthread_create(&dump.thread, NULL, dump_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (failed) {
        snprintf(err, err_len, "LMS_DUMP_SIGNAL: cannot start the dump thread: %s", strerror(failed));
        return -1;
    }
    dump.thread_running = true;

    struct sigaction action = { .sa_handler = on_dump_signal, .sa_flags = SA_RESTART };
    sigemptyset(&action.sa_mask);
    sigaction(cfg->dump_signal, &action, &dump.previous);
    dump.signal = cfg->dump_signal;
    return 0;
}

static void stop_dump_thread(void)
{
    if (!dump.thread_running) return;
    sigaction(dump.signal, &dump.previous, NULL);
    atomic_store(&dump.quit, true);
    sem_post(&dump.wake);
    pthread_join(dump.thread, NULL);
    sem_destroy(&dump.wake);
    dump.thread_running = false;
}

/* The frames of each stack as JSON members, named once per stack (naming takes dladdr per
 * frame, which would dominate the cost of an event) and kept for the life of the process, as
 * the stacks are:  ,"frames":["site+0x1f (libfoo.so)",...],"pcs":["0x7f...",...]
 * Named before any lock of the writer is taken: dladdr takes the loader's lock, which a
 * thread inside dlopen may hold while it allocates. */
#define MAX_OBJECTS 512
static pthread_mutex_t frames_lock = PTHREAD_MUTEX_INITIALIZER;
static char **frames_by_stack;     /* [frames_capacity], NULL until named */
static uint32_t frames_capacity;
static struct { const void *id; uintptr_t bias; } objects_named[MAX_OBJECTS];
static size_t objects_count;

/* An lms.module event for the object holding pc, the first time one of its frames is named,
 * so that lms-trace can find the file to read its symbols and lines from. The check and the
 * event are made under frames_lock: every stack naming the object is written after it. */
static void describe_object(uintptr_t pc)
{
    lms_stack_object object;
    if (!lms_stack_frame_object(pc, &object)) return;
    pthread_mutex_lock(&frames_lock);
    bool known = false;
    for (size_t k = 0; k < objects_count && !known; k++)
        known = objects_named[k].id == object.id && objects_named[k].bias == object.bias;
    if (!known && objects_count < MAX_OBJECTS && lock_for_device(-1)) {
        objects_named[objects_count].id = object.id;
        objects_named[objects_count++].bias = object.bias;
        out o = event_out();
        put(&o, ",\n{\"ph\":\"M\",\"name\":\"lms.module\",\"pid\":");
        put_u64(&o, (uint64_t)trace.pid);
        put(&o, ",\"tid\":0,\"args\":{\"path\":");
        put_string(&o, object.path);
        put_arg_hex(&o, "bias", object.bias);
        put(&o, ",\"build_id\":");
        put_string(&o, object.build_id);
        put(&o, "}}");
        commit(&o);
        pthread_mutex_unlock(&trace.lock);
    }
    pthread_mutex_unlock(&frames_lock);
}

static const char *frames_json(uint32_t stack)
{
    static const char none[] = ",\"frames\":[],\"pcs\":[]";
    if (stack == 0) return none;
    pthread_mutex_lock(&frames_lock);
    const char *known = stack < frames_capacity ? frames_by_stack[stack] : NULL;
    pthread_mutex_unlock(&frames_lock);
    if (known) return known;

    const uintptr_t *pcs = NULL;
    size_t depth = lms_stack_frames(stack, &pcs);
    char text[LMS_STACK_MAX_DEPTH * (FRAME_NAME_MAX + 32) + 32];
    out o = { .p = text, .cap = sizeof text - 1 };
    put(&o, ",\"frames\":[");
    for (size_t i = 0; i < depth; i++) {
        char name[FRAME_NAME_MAX];
        lms_stack_frame_name(pcs[i], name, sizeof name);
        if (i) put(&o, ",");
        put_string(&o, name);
        describe_object(pcs[i]);
    }
    put(&o, "],\"pcs\":[");
    for (size_t i = 0; i < depth; i++) {
        if (i) put(&o, ",");
        put_hex(&o, pcs[i]);
    }
    put(&o, "]");
    if (o.overflow) return none;
    text[o.len] = '\0';

    pthread_mutex_lock(&frames_lock);
    if (stack >= frames_capacity) {
        uint32_t capacity = frames_capacity ? frames_capacity : 256;
        while (capacity <= stack) capacity *= 2;
        char **grown = realloc(frames_by_stack, capacity * sizeof *grown);
        if (grown) {
            memset(grown + frames_capacity, 0, (capacity - frames_capacity) * sizeof *grown);
            frames_by_stack = grown;
            frames_capacity = capacity;
        }
    }
    if (stack < frames_capacity && !frames_by_stack[stack]) frames_by_stack[stack] = strdup(text);
    known = stack < frames_capacity ? frames_by_stack[stack] : NULL;
    pthread_mutex_unlock(&frames_lock);
    return known ? known : none;
}

void lms_trace_dump_begin(const char *reason)
{
    pthread_mutex_lock(&dump.lock);
    dump.id++;
    dump.count = 0;
    dump.now_ns = lms_trace_now_ns();
    dump.to_trace = lock_for_device(-1);
    if (dump.to_trace) {
        out o = event_out();
        put_event_head(&o, "i", "lms.dump", TRACK_PROCESS, dump.now_ns);
        put(&o, ",\"s\":\"g\",\"args\":{\"reason\":");
        put_string(&o, reason);
        put_arg_u64(&o, "dump", dump.id);
        put(&o, "}}");
        commit(&o);
        pthread_mutex_unlock(&trace.lock);
    } else {
        char line[160];
        int n = snprintf(line, sizeof line,
                         "liblms: live allocations (%s):\n  %-3s %-18s %14s %-9s %12s %12s  %s\n",
                         reason, "dev", "address", "bytes", "state", "age ms", "idle ms", "allocated at");
        report(n > 0 ? line : "liblms: live allocations:\n");
    }
}

void lms_trace_dump_record(const lms_trace_live *live)
{
    uint64_t age = dump.now_ns > live->created_ns ? dump.now_ns - live->created_ns : 0;
    uint64_t idle = live->last_use_ns && dump.now_ns > live->last_use_ns ? dump.now_ns - live->last_use_ns : age;
    const char *state = live->resident ? "resident" : "host";
    dump.count++;
    if (!dump.to_trace) {
        const uintptr_t *pcs = NULL;
        char site[FRAME_NAME_MAX] = "?";
        if (live->stack && lms_stack_frames(live->stack, &pcs) > 0)
            lms_stack_frame_name(pcs[0], site, sizeof site);
        char line[FRAME_NAME_MAX + 128];
        int n = snprintf(line, sizeof line, "  %-3d 0x%016jx %14ju %-9s %12.3f %12.3f  %s\n", live->device,
                         (uintmax_t)live->addr, (uintmax_t)live->bytes, state, age / 1e6, idle / 1e6, site);
        if (n > 0) report(line);
        return;
    }
    const char *frames = frames_json(live->stack);
    if (!lock_for_device(live->device)) return;
    out o = event_out();
    put_event_head(&o, "i", "lms.live", DEVICE_TRACK(live->device, TRACK_ALLOCS), dump.now_ns);
    put(&o, ",\"s\":\"t\",\"args\":{\"dump\":");
    put_u64(&o, dump.id);
    put_arg_u64(&o, "device", (uint64_t)live->device);
    put_arg_hex(&o, "addr", live->addr);
    put_arg_u64(&o, "bytes", live->bytes);
    put(&o, ",\"state\":");
    put_string(&o, state);
    put_arg_u64(&o, "age_us", age / 1000);
    put_arg_u64(&o, "idle_us", idle / 1000);
    put_arg_u64(&o, "stack", live->stack);
    put(&o, frames);
    put(&o, "}}");
    commit(&o);
    pthread_mutex_unlock(&trace.lock);
}

void lms_trace_dump_end(void)
{
    if (dump.to_trace && lock_for_device(-1)) {
        out o = event_out();
        put_event_head(&o, "i", "lms.dump_end", TRACK_PROCESS, lms_trace_now_ns());
        put(&o, ",\"s\":\"g\",\"args\":{\"dump\":");
        put_u64(&o, dump.id);
        put_arg_u64(&o, "count", dump.count);
        put(&o, "}}");
        commit(&o);
        pthread_mutex_unlock(&trace.lock);
    } else if (!dump.to_trace) {
        char line[64];
        int n = snprintf(line, sizeof line, "liblms: %ju live allocations\n", (uintmax_t)dump.count);
        if (n > 0) report(line);
    }
    pthread_mutex_unlock(&dump.lock);
}

/* ---- Opening. */

/* Around fork, every lock of the writer is taken, in the order it nests them (a dump names
 * frames and stacks and writes events), so the child finds them free. liblms's other locks
 * (residency, graphs, launches) come
 * first: liblms registers its handlers after these (preload/fork.h). */
static void lock_for_fork(void)
{
    pthread_mutex_lock(&dump.lock);
    pthread_mutex_lock(&frames_lock);
    lms_stack_fork_lock();
    pthread_mutex_lock(&trace.lock);
}

static void unlock_after_fork(void)
{
    pthread_mutex_unlock(&trace.lock);
    lms_stack_fork_unlock();
    pthread_mutex_unlock(&frames_lock);
    pthread_mutex_unlock(&dump.lock);
}

/* The file is the parent's, and the dump thread was not forked. */
static void forget_in_child(void)
{
    atomic_store(&lms_trace_flags_, 0u);
    if (trace.fd >= 0) close(trace.fd);
    trace.fd = -1;
    trace.used = 0;
    dump.thread_running = false;
    unlock_after_fork();
}

int lms_trace_open(const lms_trace_config *cfg, char *err, size_t err_len)
{
    if (atomic_load(&lms_trace_flags_) || trace.fd >= 0 || dump.thread_running) {
        snprintf(err, err_len, "LMS_TRACE: the trace is already open (lms_trace_open called twice)");
        return -1;
    }
    if (cfg->dump_signal && start_dump_thread(cfg, err, err_len) != 0) return -1;
    trace.stack_depth = cfg->stack_depth > LMS_STACK_MAX_DEPTH ? LMS_STACK_MAX_DEPTH : cfg->stack_depth;
    unsigned flags = cfg->dump_signal && trace.stack_depth ? LMS_TRACE_ON_STACKS : 0;

    if (cfg->path && *cfg->path) {
        if (cfg->max_bytes && cfg->max_bytes < 2 * MAX_EVENT) {
            snprintf(err, err_len, "LMS_TRACE_MAX_MB: %ju bytes is too small for a trace (at least 1 MB)",
                     (uintmax_t)cfg->max_bytes);
            stop_dump_thread();
            return -1;
        }
        int fd = lms_output_file_create("LMS_TRACE", cfg->path, 0600, err, err_len);
        if (fd < 0) {
            stop_dump_thread();
            return -1;
        }
        pthread_mutex_lock(&trace.lock);
        trace.fd = fd;
        trace.pid = (int)getpid();
        trace.start_ns = lms_trace_now_ns();
        trace.max_bytes = cfg->max_bytes;
        trace.events = 0;
        trace.truncated = trace.write_failed = false;
        trace.named_devices = 0;
        atomic_store(&trace.flushed, 0);
        write_header(cfg);
        pthread_mutex_unlock(&trace.lock);
        flags |= LMS_TRACE_ON_EVENTS | (trace.stack_depth ? LMS_TRACE_ON_STACKS : 0) |
                 (cfg->record_uses ? LMS_TRACE_ON_USES : 0);
        lms_signals_at_death(finish_on_signal, fatal_signals, sizeof fatal_signals / sizeof *fatal_signals);
    }
    static bool registered;
    if (!registered) {
        registered = true;
        atexit(lms_trace_close);
        pthread_atfork(lock_for_fork, unlock_after_fork, forget_in_child);
    }
    atomic_store(&lms_trace_flags_, flags);
    return 0;
}

void lms_trace_close(void)
{
    stop_dump_thread();
    atomic_fetch_and(&lms_trace_flags_, 0u);
    pthread_mutex_lock(&trace.lock);
    if (trace.fd >= 0) finish_file(0, true);
    pthread_mutex_unlock(&trace.lock);
    lms_signals_forget(finish_on_signal);
}

/* ---- Events. */

void lms_trace_device_(int dev, uint64_t total_bytes, uint64_t soft_limit)
{
    if (!lock_for_device(dev)) return;
    out o = event_out();
    put_event_head(&o, "i", "lms.device", DEVICE_TRACK(dev, TRACK_ALLOCS), lms_trace_now_ns());
    put(&o, ",\"s\":\"t\",\"args\":{\"device\":");
    put_u64(&o, (uint64_t)dev);
    put_arg_u64(&o, "total_bytes", total_bytes);
    put_arg_u64(&o, "soft_limit", soft_limit);
    put(&o, "}}");
    commit(&o);
    pthread_mutex_unlock(&trace.lock);
}

uint32_t lms_trace_alloc_(int dev, uint64_t addr, uint64_t bytes, uint64_t stream, bool cached)
{
    unsigned flags = atomic_load_explicit(&lms_trace_flags_, memory_order_relaxed);
    uint32_t stack = flags & LMS_TRACE_ON_STACKS ? lms_stack_capture(trace.stack_depth) : 0;
    if (!(flags & LMS_TRACE_ON_EVENTS)) return stack;

    const char *frames = frames_json(stack);
    if (!lock_for_device(dev)) return stack;
    out o = event_out();
    put_event_head(&o, "i", "alloc", DEVICE_TRACK(dev, TRACK_ALLOCS), lms_trace_now_ns());
    put(&o, ",\"s\":\"t\",\"args\":{\"device\":");
    put_u64(&o, (uint64_t)dev);
    put_arg_hex(&o, "addr", addr);
    put_arg_u64(&o, "bytes", bytes);
    put_arg_hex(&o, "stream", stream);
    put(&o, cached ? ",\"cached\":true" : ",\"cached\":false");
    put_arg_u64(&o, "stack", stack);
    put(&o, frames);
    put(&o, "}}");
    commit(&o);
    pthread_mutex_unlock(&trace.lock);
    return stack;
}

/* The events that carry a device, an address, a size and nothing but a reason. */
static void simple_event(const char *name, int dev, uint64_t addr, uint64_t bytes, const char *reason)
{
    if (!lock_for_device(dev)) return;
    out o = event_out();
    put_event_head(&o, "i", name, DEVICE_TRACK(dev, TRACK_ALLOCS), lms_trace_now_ns());
    put(&o, strcmp(name, "oom") == 0 ? ",\"s\":\"p\"" : ",\"s\":\"t\"");
    put(&o, ",\"args\":{\"device\":");
    put_u64(&o, (uint64_t)dev);
    if (addr) put_arg_hex(&o, "addr", addr);
    put_arg_u64(&o, "bytes", bytes);
    if (reason) { put(&o, ",\"reason\":"); put_string(&o, reason); }
    put(&o, "}}");
    commit(&o);
    pthread_mutex_unlock(&trace.lock);
}

void lms_trace_free_(int dev, uint64_t addr, uint64_t bytes)
{
    unsigned flags = atomic_load_explicit(&lms_trace_flags_, memory_order_relaxed);
    const char *frames = frames_json(flags & LMS_TRACE_ON_STACKS ? lms_stack_capture(trace.stack_depth) : 0);
    if (!lock_for_device(dev)) return;
    out o = event_out();
    put_event_head(&o, "i", "free", DEVICE_TRACK(dev, TRACK_ALLOCS), lms_trace_now_ns());
    put(&o, ",\"s\":\"t\",\"args\":{\"device\":");
    put_u64(&o, (uint64_t)dev);
    put_arg_hex(&o, "addr", addr);
    put_arg_u64(&o, "bytes", bytes);
    put(&o, frames);
    put(&o, "}}");
    commit(&o);
    pthread_mutex_unlock(&trace.lock);
}

void lms_trace_evict_(int dev, uint64_t addr, uint64_t bytes, const char *reason)
{
    simple_event("evict", dev, addr, bytes, reason ? reason : "unknown");
}

void lms_trace_oom_(int dev, uint64_t bytes) { simple_event("oom", dev, 0, bytes, NULL); }

void lms_trace_swap_(int dev, uint64_t addr, uint64_t bytes, enum lms_swap_direction dir,
                     uint64_t start_ns, uint64_t end_ns, uint64_t copy_stream)
{
    if (!lock_for_device(dev)) return;
    bool out_of_device = dir == LMS_SWAP_OUT;
    out o = event_out();
    put_event_head(&o, "X", out_of_device ? "swap out" : "swap in",
                   DEVICE_TRACK(dev, out_of_device ? TRACK_SWAP_OUT : TRACK_SWAP_IN), start_ns);
    put(&o, ",\"dur\":");
    put_us(&o, end_ns > start_ns ? end_ns - start_ns : 0);
    put(&o, ",\"args\":{\"device\":");
    put_u64(&o, (uint64_t)dev);
    put_arg_hex(&o, "addr", addr);
    put_arg_u64(&o, "bytes", bytes);
    put_arg_hex(&o, "stream", copy_stream);
    put(&o, "}}");
    commit(&o);
    pthread_mutex_unlock(&trace.lock);
}

void lms_trace_counters_(int dev, uint64_t resident, uint64_t host, uint64_t demanded, uint64_t soft_limit)
{
    if (!lock_for_device(dev)) return;
    uint64_t now = lms_trace_now_ns();
    char name[48];
    snprintf(name, sizeof name, "GPU %d memory", dev);
    out o = event_out();
    put_event_head(&o, "C", name, TRACK_PROCESS, now);
    put(&o, ",\"args\":{\"demanded\":");
    put_u64(&o, demanded);
    put_arg_u64(&o, "resident", resident);
    put_arg_u64(&o, "host", host);
    put_arg_u64(&o, "soft_limit", soft_limit);
    put(&o, "}}");
    commit(&o);
    /* Viewers give each member of a counter its own track and scale, so demand and the limit
     * cannot be read against each other there: this track holds one as a share of the other. */
    snprintf(name, sizeof name, "GPU %d demanded %% of soft limit", dev);
    o = event_out();
    put_event_head(&o, "C", name, TRACK_PROCESS, now);
    put(&o, ",\"args\":{\"percent\":");
    uint64_t tenths = soft_limit ? (uint64_t)((double)demanded * 1000.0 / (double)soft_limit + 0.5) : 0;
    put_u64(&o, tenths / 10);
    put_bytes(&o, (char[]){ '.', (char)('0' + tenths % 10) }, 2);
    put(&o, "}}");
    commit(&o);
    pthread_mutex_unlock(&trace.lock);
}

void lms_trace_stall_(uint64_t start_ns, uint64_t end_ns)
{
    if (!lock_for_device(-1)) return;
    out o = event_out();
    put_event_head(&o, "X", "restore stall", TRACK_STALLS, start_ns);
    put(&o, ",\"dur\":");
    put_us(&o, end_ns > start_ns ? end_ns - start_ns : 0);
    put(&o, "}");
    commit(&o);
    pthread_mutex_unlock(&trace.lock);
}

void lms_trace_launch_uses_(const char *kernel, uint64_t stream, uint64_t step, const uint64_t *addrs,
                            size_t count)
{
    if (!lock_for_device(-1)) return;
    out o = event_out();
    put_event_head(&o, "i", kernel && *kernel ? kernel : "?", TRACK_PROCESS, lms_trace_now_ns());
    put(&o, ",\"cat\":\"launch\",\"s\":\"t\",\"args\":{\"step\":");
    put_u64(&o, step);
    put_arg_hex(&o, "stream", stream);
    put(&o, ",\"uses\":[");
    size_t listed = count < MAX_USES ? count : MAX_USES;
    for (size_t i = 0; i < listed; i++) {
        if (i) put(&o, ",");
        put_hex(&o, addrs[i]);
    }
    put(&o, "]");
    if (listed < count) put_arg_u64(&o, "uses_left_out", count - listed);
    put(&o, "}}");
    commit(&o);
    pthread_mutex_unlock(&trace.lock);
}

/* ---- NVTX. */

static pthread_once_t nvtx_once = PTHREAD_ONCE_INIT;
static nvtxDomainHandle_t nvtx_domain;

static void create_nvtx_domain(void) { nvtx_domain = nvtxDomainCreateA("liblms"); }

uint64_t lms_trace_range_begin(enum lms_swap_direction dir, uint64_t bytes)
{
    pthread_once(&nvtx_once, create_nvtx_domain);
    char message[64];
    snprintf(message, sizeof message, "%s %.1f MiB", dir == LMS_SWAP_OUT ? "swap out" : "swap in",
             bytes / 1048576.0);
    nvtxEventAttributes_t attributes = {
        .version = NVTX_VERSION,
        .size = NVTX_EVENT_ATTRIB_STRUCT_SIZE,
        .colorType = NVTX_COLOR_ARGB,
        .color = dir == LMS_SWAP_OUT ? 0xffd95f02u : 0xff1b9e77u,
        .messageType = NVTX_MESSAGE_TYPE_ASCII,
        .message.ascii = message,
    };
    return nvtxDomainRangeStartEx(nvtx_domain, &attributes);
}

void lms_trace_range_end(uint64_t range)
{
    pthread_once(&nvtx_once, create_nvtx_domain);
    nvtxDomainRangeEnd(nvtx_domain, range);
}
