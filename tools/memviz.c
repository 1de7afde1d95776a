/* lms-trace export --memory-viz: PyTorch's memory snapshot (torch.cuda.memory._snapshot()),
 * which pytorch.org/memory_viz opens.
 *
 *   {"segments": [Segment], "device_traces": [[TraceEntry] per device]}
 * Each liblms allocation is its own segment holding one block (liblms gives every
 * allocation its own mapping); `segments` are those still live at the end of the trace.
 * Trace entries: segment_alloc + alloc at an allocation, free_requested + free_completed +
 * segment_free at a free, oom at an out-of-memory. Swaps have no counterpart in the format. */
#include "tools/commands.h"
#include "tools/pickle.h"
#include "tools/trace_read.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>

typedef struct live {
    uint64_t key[2];              /* device, address */
    uint64_t bytes, stream;
    size_t frame_count;
    char **frames;
    UT_hash_handle hh;
} live;

typedef struct {
    int pass;                     /* 1: live allocations at the end; 2: the trace of one device */
    int device;
    int max_device;
    live *lives;
    FILE *out;
    bool failed;
} export;

static void free_live(live *l)
{
    for (size_t i = 0; i < l->frame_count; i++) free(l->frames[i]);
    free(l->frames);
    free(l);
}

/* A frame "symbol+0x1f (libfoo.so)" as {"filename": "libfoo.so", "line": 0, "name": "symbol+0x1f"}. */
static void write_frame(FILE *f, const char *frame)
{
    char name[256], object[256];
    const char *open = strrchr(frame, '(');
    if (open && open > frame && open[-1] == ' ') {
        snprintf(name, sizeof name, "%.*s", (int)(open - frame - 1), frame);
        snprintf(object, sizeof object, "%.*s", (int)strcspn(open + 1, ")"), open + 1);
    } else {
        snprintf(name, sizeof name, "%s", frame);
        snprintf(object, sizeof object, "%.*s", (int)strcspn(frame, "+"), frame);
    }
    pickle_dict_begin(f);
    pickle_string(f, "filename"); pickle_string(f, object);
    pickle_string(f, "line"); pickle_int(f, 0);
    pickle_string(f, "name"); pickle_string(f, name);
    pickle_dict_end(f);
}

static void write_json_frames(FILE *f, const json_value *frames)
{
    pickle_list_begin(f);
    for (size_t i = 0; frames && i < frames->count; i++)
        if (frames->items[i].type == JSON_STRING) write_frame(f, frames->items[i].text);
    pickle_list_end(f);
}

static void write_entry(FILE *f, const char *action, const trace_event *ev, const json_value *frames)
{
    pickle_dict_begin(f);
    pickle_string(f, "action"); pickle_string(f, action);
    if (ev->kind != TRACE_OOM) { pickle_string(f, "addr"); pickle_int(f, (int64_t)ev->addr); }
    pickle_string(f, "size"); pickle_int(f, (int64_t)ev->bytes);
    pickle_string(f, "stream"); pickle_int(f, (int64_t)ev->stream);
    pickle_string(f, "time_us"); pickle_int(f, (int64_t)ev->ts_us);
    if (ev->kind == TRACE_OOM) { pickle_string(f, "device_free"); pickle_int(f, 0); }
    pickle_string(f, "frames"); write_json_frames(f, frames);
    pickle_dict_end(f);
}

static int on_event(void *ctx, const trace_event *ev)
{
    export *x = ctx;
    if (ev->kind != TRACE_ALLOC && ev->kind != TRACE_FREE && ev->kind != TRACE_OOM) return 0;
    if (x->pass == 2) {
        if (ev->device != x->device) return 0;
        if (ev->kind == TRACE_ALLOC) {
            write_entry(x->out, "segment_alloc", ev, ev->frames);
            write_entry(x->out, "alloc", ev, ev->frames);
        } else if (ev->kind == TRACE_FREE) {
            write_entry(x->out, "free_requested", ev, NULL);
            write_entry(x->out, "free_completed", ev, NULL);
            write_entry(x->out, "segment_free", ev, NULL);
        } else {
            write_entry(x->out, "oom", ev, NULL);
        }
        return 0;
    }
    if (ev->device > x->max_device) x->max_device = ev->device;
    uint64_t key[2] = { (uint64_t)ev->device, ev->addr };
    live *l;
    HASH_FIND(hh, x->lives, key, sizeof key, l);
    if (l) { HASH_DEL(x->lives, l); free_live(l); }
    if (ev->kind != TRACE_ALLOC) return 0;
    size_t count = ev->frames ? ev->frames->count : 0;
    if (!(l = calloc(1, sizeof *l)) || (count && !(l->frames = calloc(count, sizeof *l->frames)))) {
        free(l);
        x->failed = true;
        return -1;
    }
    memcpy(l->key, key, sizeof key);
    l->bytes = ev->bytes;
    l->stream = ev->stream;
    for (size_t i = 0; i < count; i++)
        if (ev->frames->items[i].type == JSON_STRING && (l->frames[l->frame_count] = strdup(ev->frames->items[i].text)))
            l->frame_count++;
    HASH_ADD(hh, x->lives, key, sizeof l->key, l);
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
    for (size_t i = 0; i < l->frame_count; i++) write_frame(f, l->frames[i]);
    pickle_list_end(f);
    pickle_dict_end(f);
    pickle_list_end(f);
    pickle_dict_end(f);
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
    trace_settings settings;
    char err[600] = "";
    if (trace_read(path, &settings, on_event, &x, err, sizeof err) != 0 || x.failed) {
        print_error("%s", err[0] ? err : "out of memory");
        status = 1;
    }
    output out;
    if (!status && (status = output_start(&out, output_path, path)) == 0) {
        x.out = out.file;
        pickle_start(x.out);
        pickle_dict_begin(x.out);
        pickle_string(x.out, "segments");
        pickle_list_begin(x.out);
        for (live *l = x.lives; l; l = l->hh.next) write_segment(x.out, l);
        pickle_list_end(x.out);
        pickle_string(x.out, "device_traces");
        pickle_list_begin(x.out);
        x.pass = 2;
        for (x.device = 0; x.device <= x.max_device && !status; x.device++) {
            pickle_list_begin(x.out);
            if (trace_read(path, &settings, on_event, &x, err, sizeof err) != 0) {
                print_error("%s", err);
                status = 1;
            }
            pickle_list_end(x.out);
        }
        pickle_list_end(x.out);
        pickle_dict_end(x.out);
        pickle_stop(x.out);
        status = output_finish(&out, !status);
    }
    live *l, *tmp;
    HASH_ITER(hh, x.lives, l, tmp) { HASH_DEL(x.lives, l); free_live(l); }
    return status;
}
