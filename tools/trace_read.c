/* Reading a liblms trace: the outer JSON by hand, each event as a small tree. */
#include "tools/trace_read.h"

#include <stdio.h>
#include <string.h>

static void copy_text(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
}

/* The settings: lms.settings's args (version 2), or otherData (version 1). */
static void read_settings(json_reader *reader, const json_value *settings, trace_info *info)
{
    const char *format = json_get_string(settings, "format");
    if (!format || strcmp(format, "liblms-trace") != 0)
        json_fail(reader, "not a liblms trace (its settings do not name the format \"liblms-trace\")");
    if (!json_get_u64(settings, "version", &info->version) || info->version < 1 || info->version > 2)
        json_fail(reader, "unsupported trace version (this lms-trace reads versions 1 and 2)");
    copy_text(info->liblms, sizeof info->liblms, json_get_string(settings, "liblms"));
    copy_text(info->program, sizeof info->program, json_get_string(settings, "program"));
    copy_text(info->policy, sizeof info->policy, json_get_string(settings, "policy"));
    copy_text(info->mode, sizeof info->mode, json_get_string(settings, "mode"));
    json_get_u64(settings, "pid", &info->pid);
    json_get_u64(settings, "threshold_bytes", &info->threshold_bytes);
    json_get_u64(settings, "exclude_bytes", &info->exclude_bytes);
    json_get_u64(settings, "piece_bytes", &info->piece_bytes);
    json_get_u64(settings, "stack_depth", &info->stack_depth);
    json_get_u64(settings, "epoch_start_us", &info->epoch_start_us);
    const json_value *uses = json_get(settings, "uses");
    info->uses = uses && uses->type == JSON_TRUE;
}

static const json_value *need(json_reader *reader, const json_value *args, const char *event, const char *key)
{
    const json_value *v = json_get(args, key);
    if (!v) json_fail(reader, "%s event without args.%s", event, key);
    return v;
}

static uint64_t need_u64(json_reader *reader, const json_value *args, const char *event, const char *key)
{
    uint64_t v;
    if (!json_as_u64(need(reader, args, event, key), &v))
        json_fail(reader, "%s event: args.%s is not a non-negative integer", event, key);
    return v;
}

static const char *optional_string(const json_value *args, const char *key)
{
    const char *s = json_get_string(args, key);
    return s ? s : "";
}

/* Fills `ev` from one JSON event; false for events the tools do not use (metadata but the
 * objects, which go to the symbols). */
static bool convert(json_reader *reader, const json_value *json, trace_event *ev, symbols *objects)
{
    const char *ph = json_get_string(json, "ph");
    const char *name = json_get_string(json, "name");
    if (!ph || !name) json_fail(reader, "event without \"ph\" or \"name\"");
    const json_value *args = json_get(json, "args");
    if (strcmp(ph, "M") == 0) {
        uint64_t bias;
        const char *path = json_get_string(args, "path"), *build_id = json_get_string(args, "build_id");
        if (strcmp(name, "lms.module") == 0 && path && build_id && json_get_u64(args, "bias", &bias))
            symbols_add_object(objects, path, bias, build_id);
        return false;
    }
    *ev = (trace_event){ .name = name, .symbols = objects };
    if (!json_get_double(json, "ts", &ev->ts_us)) json_fail(reader, "%s event without \"ts\"", name);
    uint64_t device = 0;
    if (json_get(args, "device")) {
        device = need_u64(reader, args, name, "device");
        if (device >= TRACE_MAX_DEVICES) json_fail(reader, "%s event: device %ju is out of range", name, (uintmax_t)device);
    }
    ev->device = (int)device;

    const char *cat = json_get_string(json, "cat");
    if (cat && strcmp(cat, "launch") == 0) {
        ev->kind = TRACE_LAUNCH;
        ev->step = need_u64(reader, args, name, "step");
        ev->stream = need_u64(reader, args, name, "stream");
        ev->uses = need(reader, args, name, "uses");
        if (ev->uses->type != JSON_ARRAY) json_fail(reader, "launch event: args.uses is not an array");
        if (json_get(args, "uses_left_out")) ev->uses_left_out = need_u64(reader, args, name, "uses_left_out");
    } else if (strcmp(ph, "C") == 0) {
        int end = 0;
        if (sscanf(name, "GPU %d memory%n", &ev->device, &end) != 1 || name[end]) return false;
        ev->kind = TRACE_COUNTERS;
        if (ev->device < 0 || ev->device >= TRACE_MAX_DEVICES)
            json_fail(reader, "counter event \"%s\": device %d is out of range", name, ev->device);
        ev->demanded = need_u64(reader, args, name, "demanded");
        ev->resident_bytes = need_u64(reader, args, name, "resident");
        ev->host = need_u64(reader, args, name, "host");
        ev->soft_limit = need_u64(reader, args, name, "soft_limit");
    } else if (strcmp(ph, "X") == 0 && (strcmp(name, "swap out") == 0 || strcmp(name, "swap in") == 0)) {
        ev->kind = strcmp(name, "swap out") == 0 ? TRACE_SWAP_OUT : TRACE_SWAP_IN;
        if (!json_get_double(json, "dur", &ev->dur_us) || ev->dur_us < 0) json_fail(reader, "%s event without \"dur\"", name);
        ev->addr = need_u64(reader, args, name, "addr");
        ev->bytes = need_u64(reader, args, name, "bytes");
        ev->stream = need_u64(reader, args, name, "stream");
    } else if (strcmp(ph, "X") == 0 && strcmp(name, "restore stall") == 0) {
        ev->kind = TRACE_STALL;
        if (!json_get_double(json, "dur", &ev->dur_us) || ev->dur_us < 0) json_fail(reader, "%s event without \"dur\"", name);
    } else if (strcmp(name, "alloc") == 0) {
        ev->kind = TRACE_ALLOC;
        ev->addr = need_u64(reader, args, name, "addr");
        ev->bytes = need_u64(reader, args, name, "bytes");
        ev->stream = need_u64(reader, args, name, "stream");
        ev->cached = need(reader, args, name, "cached")->type == JSON_TRUE;
        json_get_u64(args, "stack", &ev->stack);
    } else if (strcmp(name, "free") == 0 || strcmp(name, "evict") == 0) {
        ev->kind = name[0] == 'f' ? TRACE_FREE : TRACE_EVICT;
        ev->addr = need_u64(reader, args, name, "addr");
        ev->bytes = need_u64(reader, args, name, "bytes");
        ev->reason = optional_string(args, "reason");
    } else if (strcmp(name, "oom") == 0) {
        ev->kind = TRACE_OOM;
        ev->bytes = need_u64(reader, args, name, "bytes");
    } else if (strcmp(name, "lms.device") == 0) {
        ev->kind = TRACE_DEVICE;
        ev->total_bytes = need_u64(reader, args, name, "total_bytes");
        ev->soft_limit = need_u64(reader, args, name, "soft_limit");
    } else if (strcmp(name, "lms.dump") == 0) {
        ev->kind = TRACE_DUMP;
        ev->dump = need_u64(reader, args, name, "dump");
        ev->reason = optional_string(args, "reason");
    } else if (strcmp(name, "lms.live") == 0) {
        ev->kind = TRACE_LIVE;
        ev->dump = need_u64(reader, args, name, "dump");
        ev->addr = need_u64(reader, args, name, "addr");
        ev->bytes = need_u64(reader, args, name, "bytes");
        ev->resident = strcmp(optional_string(args, "state"), "resident") == 0;
        ev->age_us = need_u64(reader, args, name, "age_us");
        ev->idle_us = need_u64(reader, args, name, "idle_us");
    } else if (strcmp(name, "lms.trace_truncated") == 0) {
        ev->kind = TRACE_TRUNCATED;
    } else if (strcmp(name, "lms.trace_end") == 0) {
        ev->kind = TRACE_END;
        uint64_t signal = 0;
        json_get_u64(args, "signal", &signal);
        ev->signal = (int)signal;
    } else {
        return false;                  /* lms.dump_end, and events of newer writers */
    }
    ev->frames = json_get(args, "frames");
    ev->pcs = json_get(args, "pcs");
    if (ev->frames && ev->frames->type != JSON_ARRAY) json_fail(reader, "%s event: args.frames is not an array", name);
    if (ev->pcs && ev->pcs->type != JSON_ARRAY) json_fail(reader, "%s event: args.pcs is not an array", name);
    return true;
}

/* Reads events up to the end of the array: `]`, or the end of a file cut short. */
static int read_events(json_reader *reader, trace_info *info, symbols *objects, trace_event_fn on_event, void *ctx)
{
    for (;;) {
        const json_value *json = json_read_value(reader);
        trace_event ev;
        if (convert(reader, json, &ev, objects)) {
            info->events++;
            if (ev.ts_us + ev.dur_us > info->last_us) info->last_us = ev.ts_us + ev.dur_us;
            if (ev.kind == TRACE_END) info->complete = true, info->signal = ev.signal;
            if (ev.kind == TRACE_TRUNCATED) info->truncated = true;
            int stop = on_event(ctx, &ev);
            if (stop) return stop;
        }
        json_arena_reset(reader);
        info->whole_bytes = json_offset(reader);
        if (json_peek(reader) == ']') { json_expect(reader, ']'); return 0; }
        json_expect(reader, ',');
    }
}

/* Version 1 wrote the object form: {"otherData":{settings},...,"traceEvents":[...]}. */
static int read_object_form(json_reader *reader, trace_info *info, symbols *objects, trace_event_fn on_event, void *ctx)
{
    json_expect(reader, '{');
    if (strcmp(json_read_key(reader), "otherData") != 0)
        json_fail(reader, "not a liblms trace (it does not start with \"otherData\")");
    read_settings(reader, json_read_value(reader), info);
    json_arena_reset(reader);
    while (json_peek(reader) == ',') {
        json_expect(reader, ',');
        if (strcmp(json_read_key(reader), "traceEvents") != 0) {
            json_read_value(reader);
            json_arena_reset(reader);
            continue;
        }
        json_expect(reader, '[');
        if (json_peek(reader) == ']') json_fail(reader, "no events (not even the trace's start)");
        int stop = read_events(reader, info, objects, on_event, ctx);
        if (stop) return stop;
    }
    json_expect(reader, '}');
    return 0;
}

static int read_array_form(json_reader *reader, trace_info *info, symbols *objects, trace_event_fn on_event, void *ctx)
{
    json_expect(reader, '[');
    const json_value *first = json_read_value(reader);
    const char *name = json_get_string(first, "name");
    if (!name || strcmp(name, "lms.settings") != 0)
        json_fail(reader, "not a liblms trace (its first event is not lms.settings)");
    read_settings(reader, json_get(first, "args"), info);
    json_arena_reset(reader);
    info->whole_bytes = json_offset(reader);
    if (json_peek(reader) == ']') { json_expect(reader, ']'); return 0; }
    json_expect(reader, ',');
    return read_events(reader, info, objects, on_event, ctx);
}

int trace_read(const char *path, trace_info *info, trace_event_fn on_event, void *ctx, char *err, size_t err_len)
{
    *info = (trace_info){ 0 };
    json_reader *reader = json_open(path, err, err_len);
    if (!reader) return -1;
    symbols *objects = symbols_new();
    if (!objects) {
        snprintf(err, err_len, "out of memory");
        json_close(reader);
        return -1;
    }
    if (setjmp(*json_catch(reader))) {
        /* The end of the file inside an event: the process stopped writing there. After the
         * end event, only the closing bracket is missing: nothing is. */
        bool readable = json_ended(reader) && info->version > 0;
        info->cut = readable && !info->complete;
        info->file_bytes = json_offset(reader);
        if (!readable) snprintf(err, err_len, "%s", json_error(reader));
        symbols_free(objects);
        json_close(reader);
        return readable ? 0 : -1;
    }
    int stopped = json_peek(reader) == '{' ? read_object_form(reader, info, objects, on_event, ctx)
                       : read_array_form(reader, info, objects, on_event, ctx);
    if (!stopped) {
        json_expect_end(reader);
        info->file_bytes = json_offset(reader);
        if (!info->complete) info->cut = true;
    }
    symbols_free(objects);
    json_close(reader);
    return stopped;
}

void trace_ending_note(const trace_info *info, char *buf, size_t len)
{
    if (info->cut)
        snprintf(buf, len, "the trace is cut: it ends at byte %ju of %ju, after %ju whole events, %.3f s into the run, "
                 "without liblms's end event: the process was killed (SIGKILL) or crashed before closing it; "
                 "what follows covers the part recorded",
                 (uintmax_t)info->whole_bytes, (uintmax_t)info->file_bytes, (uintmax_t)info->events, info->last_us / 1e6);
    else if (info->truncated)
        snprintf(buf, len, "the trace reached LMS_TRACE_MAX_MB and stops early; what follows covers the part recorded");
    else
        snprintf(buf, len, "%s", "");
}

static bool frame_is_ours_or_cuda(const char *frame)
{
    static const char *const skipped_objects[] = { "(liblms", "(libcuda", "(libcublas", "(libcudnn", "(libnv",
                                                   "(libc10", "liblms", "libcuda", "libcublas", "libcudnn",
                                                   "libnv", "libc10" };
    /* Function names ("name+0x1f (object)"), not objects named alike ("lms_workload+0x1f"). */
    bool named = strstr(frame, " (") != NULL;
    if (named && (strncmp(frame, "lms_", 4) == 0 || strncmp(frame, "cuda", 4) == 0 || strncmp(frame, "cuMem", 5) == 0))
        return true;
    for (size_t i = 0; i < sizeof skipped_objects / sizeof *skipped_objects; i++) {
        const char *object = skipped_objects[i][0] == '(' ? strstr(frame, skipped_objects[i]) : frame;
        if (object && strncmp(object, skipped_objects[i], strlen(skipped_objects[i])) == 0) return true;
    }
    return false;
}

bool trace_frame_symbol(const trace_event *event, size_t i, symbol *found)
{
    uint64_t pc;
    const json_value *pcs = event->pcs;
    return pcs && i < pcs->count && json_as_u64(&pcs->items[i], &pc) && event->symbols &&
           symbols_find(event->symbols, pc, found);
}

const char *trace_frame_recorded(const trace_event *event, size_t i)
{
    const json_value *frames = event->frames;
    return frames && i < frames->count && frames->items[i].type == JSON_STRING ? frames->items[i].text : "?";
}

void trace_frame_name(const trace_event *event, size_t i, char *buf, size_t len)
{
    symbol found;
    if (!trace_frame_symbol(event, i, &found)) snprintf(buf, len, "%s", trace_frame_recorded(event, i));
    else if (found.file) snprintf(buf, len, "%s (%s:%d)", found.function, found.file, found.line);
    else snprintf(buf, len, "%s", found.function);
}

void trace_call_site(const trace_event *event, char *buf, size_t len)
{
    const json_value *frames = event->frames;
    size_t count = frames ? frames->count : 0, site = 0;
    while (site < count && (frames->items[site].type != JSON_STRING || frame_is_ours_or_cuda(frames->items[site].text)))
        site++;
    if (site == count) site = 0;   /* every frame is liblms's or CUDA's: the innermost */
    if (count) trace_frame_name(event, site, buf, len);
    else snprintf(buf, len, "?");
}
