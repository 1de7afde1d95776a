/* lms-trace export --memory-viz: PyTorch's memory snapshot (torch.cuda.memory._snapshot()),
 * which pytorch.org/memory_viz and torch.cuda._memory_viz read.
 *
 *   {"segments": [Segment], "device_traces": [[TraceEntry] per device]}
 * Each liblms allocation is its own segment holding one block (liblms gives every
 * allocation its own mapping); `segments` are those still live at the end of the trace.
 * Trace entries: segment_alloc + alloc at an allocation; free_requested + free_completed +
 * segment_free at a free; segment_unmap when an eviction takes its device memory, segment_map
 * when it is back (swapped in, used, or evicted again), so that the viewer's cached-memory
 * timeline shows what is on the device; oom at an out-of-memory error. Times are
 * microseconds since the epoch, as PyTorch records them. */
#include "tools/commands.h"
#include "tools/pickle.h"
#include "tools/trace_read.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>

typedef struct frame {
    char *filename, *name;
    int line;
} frame;

typedef struct live {
    uint64_t key[2];              /* device, address */
    uint64_t bytes, stream;
    bool mapped;                  /* its device memory is there (pass 2) */
    size_t frame_count;
    frame *frames;                /* pass 1: to describe the segments live at the end */
    UT_hash_handle hh;
} live;

typedef struct {
    int pass;                     /* 1: live allocations at the end; 2: the trace of one device */
    int device;
    int max_device;
    uint64_t epoch_us;
    live *lives;
    FILE *out;
    bool failed;
} export;

static void free_live(live *l)
{
    for (size_t i = 0; i < l->frame_count; i++) {
        free(l->frames[i].filename);
        free(l->frames[i].name);
    }
    free(l->frames);
    free(l);
}

/* Frame i of an event as PyTorch's {filename, line, name}: from the program's symbols and
 * lines where they are at hand, else from the recorded "symbol+0x1f (libfoo.so)" (line 0). */
static frame event_frame(const trace_event *ev, size_t i, char *filename, size_t filename_len, char *name,
                         size_t name_len)
{
    symbol found;
    if (trace_frame_symbol(ev, i, &found)) {
        snprintf(filename, filename_len, "%s", found.file ? found.file : "??");
        snprintf(name, name_len, "%s", found.function);
        return (frame){ filename, name, found.line };
    }
    const char *recorded = trace_frame_recorded(ev, i), *open = strrchr(recorded, '(');
    if (open && open > recorded && open[-1] == ' ') {
        snprintf(name, name_len, "%.*s", (int)(open - recorded - 1), recorded);
        snprintf(filename, filename_len, "%.*s", (int)strcspn(open + 1, ")"), open + 1);
    } else {
        snprintf(name, name_len, "%s", recorded);
        snprintf(filename, filename_len, "%.*s", (int)strcspn(recorded, "+"), recorded);
    }
    return (frame){ filename, name, 0 };
}

static void write_frame(FILE *f, const frame *fr)
{
    pickle_dict_begin(f);
    pickle_string(f, "filename"); pickle_string(f, fr->filename);
    pickle_string(f, "line"); pickle_int(f, fr->line);
    pickle_string(f, "name"); pickle_string(f, fr->name);
    pickle_dict_end(f);
}

static void write_event_frames(FILE *f, const trace_event *ev)
{
    pickle_list_begin(f);
    for (size_t i = 0; ev && ev->frames && i < ev->frames->count; i++) {
        char filename[1024], name[512];
        frame fr = event_frame(ev, i, filename, sizeof filename, name, sizeof name);
        write_frame(f, &fr);
    }
    pickle_list_end(f);
}

/* One trace entry; `frames_of` gives its frames (NULL: none). */
static void write_entry(export *x, const char *action, double ts_us, uint64_t addr, uint64_t bytes, uint64_t stream,
                        const trace_event *frames_of)
{
    FILE *f = x->out;
    pickle_dict_begin(f);
    pickle_string(f, "action"); pickle_string(f, action);
    pickle_string(f, "addr"); pickle_int(f, (int64_t)addr);
    pickle_string(f, "size"); pickle_int(f, (int64_t)bytes);
    pickle_string(f, "stream"); pickle_int(f, (int64_t)stream);
    pickle_string(f, "time_us"); pickle_int(f, (int64_t)(x->epoch_us + (uint64_t)ts_us));
    if (strcmp(action, "oom") == 0) { pickle_string(f, "device_free"); pickle_int(f, 0); }
    pickle_string(f, "frames"); write_event_frames(f, frames_of);
    pickle_dict_end(f);
}

static live *find(export *x, int device, uint64_t addr)
{
    uint64_t key[2] = { (uint64_t)device, addr };
    live *l;
    HASH_FIND(hh, x->lives, key, sizeof key, l);
    return l;
}

/* Pass 1 keeps every allocation with its frames; pass 2 only what mapping needs. */
static int remember(export *x, const trace_event *ev)
{
    live *l = find(x, ev->device, ev->addr);
    if (l) { HASH_DEL(x->lives, l); free_live(l); }
    size_t count = x->pass == 1 && ev->frames ? ev->frames->count : 0;
    if (!(l = calloc(1, sizeof *l)) || (count && !(l->frames = calloc(count, sizeof *l->frames)))) {
        free(l);
        x->failed = true;
        return -1;
    }
    l->key[0] = (uint64_t)ev->device;
    l->key[1] = ev->addr;
    l->bytes = ev->bytes;
    l->stream = ev->stream;
    l->mapped = true;
    for (size_t i = 0; i < count; i++) {
        char filename[1024], name[512];
        frame fr = event_frame(ev, i, filename, sizeof filename, name, sizeof name);
        l->frames[i] = (frame){ strdup(filename), strdup(name), fr.line };
        if (l->frames[i].filename && l->frames[i].name) l->frame_count = i + 1;
        else { x->failed = true; free(l->frames[i].filename); free(l->frames[i].name); break; }
    }
    HASH_ADD(hh, x->lives, key, sizeof l->key, l);
    return x->failed ? -1 : 0;
}

static void map(export *x, live *l, double ts_us)
{
    if (l->mapped) return;
    write_entry(x, "segment_map", ts_us, l->key[1], l->bytes, l->stream, NULL);
    l->mapped = true;
}

static void trace_device(export *x, const trace_event *ev)
{
    live *l = ev->kind == TRACE_OOM || ev->kind == TRACE_LAUNCH ? NULL : find(x, ev->device, ev->addr);
    switch (ev->kind) {
    case TRACE_ALLOC:
        write_entry(x, "segment_alloc", ev->ts_us, ev->addr, ev->bytes, ev->stream, ev);
        write_entry(x, "alloc", ev->ts_us, ev->addr, ev->bytes, ev->stream, ev);
        remember(x, ev);
        break;
    case TRACE_FREE: {
        uint64_t stream = l ? l->stream : 0;
        write_entry(x, "free_requested", ev->ts_us, ev->addr, ev->bytes, stream, ev);
        write_entry(x, "free_completed", ev->ts_us, ev->addr, ev->bytes, stream, ev);
        write_entry(x, "segment_free", ev->ts_us, ev->addr, ev->bytes, stream, ev);
        if (l) { HASH_DEL(x->lives, l); free_live(l); }
        break;
    }
    case TRACE_EVICT:
        if (!l) break;
        map(x, l, ev->ts_us);      /* restored without a copy since its last eviction */
        write_entry(x, "segment_unmap", ev->ts_us, l->key[1], l->bytes, l->stream, NULL);
        l->mapped = false;
        break;
    case TRACE_SWAP_IN:
        if (l) map(x, l, ev->ts_us);
        break;
    case TRACE_LAUNCH:
        for (size_t i = 0; i < ev->uses->count; i++) {
            uint64_t addr;
            if (json_as_u64(&ev->uses->items[i], &addr) && (l = find(x, x->device, addr))) map(x, l, ev->ts_us);
        }
        break;
    case TRACE_OOM: write_entry(x, "oom", ev->ts_us, 0, ev->bytes, 0, NULL); break;
    default: break;
    }
}

static int on_event(void *ctx, const trace_event *ev)
{
    export *x = ctx;
    if (x->pass == 2) {
        if (ev->device == x->device || ev->kind == TRACE_LAUNCH) trace_device(x, ev);
        return x->failed ? -1 : 0;
    }
    if (ev->kind != TRACE_ALLOC && ev->kind != TRACE_FREE) return 0;
    if (ev->device > x->max_device) x->max_device = ev->device;
    if (ev->kind == TRACE_ALLOC) return remember(x, ev);
    live *l = find(x, ev->device, ev->addr);
    if (l) { HASH_DEL(x->lives, l); free_live(l); }
    return 0;
}

static void write_segment(FILE *f, const live *l)
{
    pickle_dict_begin(f);
    pickle_string(f, "device"); pickle_int(f, (int64_t)l->key[0]);
    pickle_string(f, "address"); pickle_int(f, (int64_t)l->key[1]);
    pickle_string(f, "total_size"); pickle_int(f, (int64_t)l->bytes);
    pickle_string(f, "stream"); pickle_int(f, (int64_t)l->stream);
    pickle_string(f, "segment_type"); pickle_string(f, l->bytes >= (1u << 20) ? "large" : "small");
    pickle_string(f, "segment_pool_id"); pickle_pair_of_ints(f, 0, 0);
    pickle_string(f, "is_expandable"); pickle_bool(f, false);
    pickle_string(f, "allocated_size"); pickle_int(f, (int64_t)l->bytes);
    pickle_string(f, "active_size"); pickle_int(f, (int64_t)l->bytes);
    pickle_string(f, "requested_size"); pickle_int(f, (int64_t)l->bytes);
    pickle_string(f, "frames"); pickle_list_begin(f); pickle_list_end(f);
    pickle_string(f, "blocks");
    pickle_list_begin(f);
    pickle_dict_begin(f);
    pickle_string(f, "address"); pickle_int(f, (int64_t)l->key[1]);
    pickle_string(f, "size"); pickle_int(f, (int64_t)l->bytes);
    pickle_string(f, "requested_size"); pickle_int(f, (int64_t)l->bytes);
    pickle_string(f, "state"); pickle_string(f, "active_allocated");
    pickle_string(f, "frames");
    pickle_list_begin(f);
    for (size_t i = 0; i < l->frame_count; i++) write_frame(f, &l->frames[i]);
    pickle_list_end(f);
    pickle_dict_end(f);
    pickle_list_end(f);
    pickle_dict_end(f);
}

static void forget_all(export *x)
{
    live *l, *tmp;
    HASH_ITER(hh, x->lives, l, tmp) { HASH_DEL(x->lives, l); free_live(l); }
}

static const char usage[] = "export --memory-viz TRACE -o OUT.pickle";

int command_export(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--memory-viz") != 0) {
        print_error("export: name the format: --memory-viz (the only one)\nusage: lms-trace %s", usage);
        return 2;
    }
    argv[1] = argv[0];
    const char *path, *output_path;
    int status = parse_trace_and_output(argc - 1, argv + 1, usage, &path, &output_path);
    if (status) return status;
    if (!output_path) { print_error("export: no output file (-o OUT.pickle)"); return 2; }

    export x = { .pass = 1, .max_device = -1 };
    trace_info info;
    char err[600] = "";
    if (trace_read(path, &info, on_event, &x, err, sizeof err) != 0 || x.failed) {
        print_error("%s", err[0] ? err : "out of memory");
        status = 1;
    }
    char note[512];
    trace_ending_note(&info, note, sizeof note);
    if (!status && note[0]) print_error("warning: %s", note);
    x.epoch_us = info.epoch_start_us;
    output out;
    if (!status && (status = output_start(&out, output_path, path)) == 0) {
        x.out = out.file;
        pickle_start(x.out);
        pickle_dict_begin(x.out);
        pickle_string(x.out, "segments");
        pickle_list_begin(x.out);
        for (live *l = x.lives; l; l = l->hh.next) write_segment(x.out, l);
        pickle_list_end(x.out);
        forget_all(&x);
        pickle_string(x.out, "device_traces");
        pickle_list_begin(x.out);
        x.pass = 2;
        for (x.device = 0; x.device <= x.max_device && !status; x.device++) {
            pickle_list_begin(x.out);
            if (trace_read(path, &info, on_event, &x, err, sizeof err) != 0 || x.failed) {
                print_error("%s", err[0] ? err : "out of memory");
                status = 1;
            }
            forget_all(&x);
            pickle_list_end(x.out);
        }
        pickle_list_end(x.out);
        pickle_dict_end(x.out);
        pickle_stop(x.out);
        status = output_finish(&out, !status);
    }
    forget_all(&x);
    return status;
}
