/* Reading a liblms trace: the outer JSON by hand, each event as a small tree. */
#include "tools/trace_read.h"

#include <stdio.h>
#include <string.h>

static void copy_text(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
}

static void read_settings(json_reader *reader, trace_settings *settings)
{
    const json_value *other = json_read_value(reader);
    const char *format = json_get_string(other, "format");
    if (!format || strcmp(format, "liblms-trace") != 0)
        json_fail(reader, "not a liblms trace (otherData.format is not \"liblms-trace\")");
    uint64_t version = 0;
    if (!json_get_u64(other, "version", &version) || version != 1)
        json_fail(reader, "unsupported trace version (this lms-trace reads version 1)");
    *settings = (trace_settings){ 0 };
    copy_text(settings->program, sizeof settings->program, json_get_string(other, "program"));
    copy_text(settings->policy, sizeof settings->policy, json_get_string(other, "policy"));
    copy_text(settings->mode, sizeof settings->mode, json_get_string(other, "mode"));
    json_get_u64(other, "pid", &settings->pid);
    json_get_u64(other, "threshold_bytes", &settings->threshold_bytes);
    json_get_u64(other, "exclude_bytes", &settings->exclude_bytes);
    json_get_u64(other, "stack_depth", &settings->stack_depth);
    const json_value *uses = json_get(other, "uses");
    settings->uses = uses && uses->type == JSON_TRUE;
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

/* Fills `ev` from one JSON event; false for events the tools do not use (metadata). */
static bool convert(json_reader *reader, const json_value *json, trace_event *ev)
{
    const char *ph = json_get_string(json, "ph");
    const char *name = json_get_string(json, "name");
    if (!ph || !name) json_fail(reader, "event without \"ph\" or \"name\"");
    if (strcmp(ph, "M") == 0) return false;
    const json_value *args = json_get(json, "args");
    *ev = (trace_event){ .name = name };
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
    } else if (strcmp(ph, "C") == 0) {
        ev->kind = TRACE_COUNTERS;
        if (sscanf(name, "GPU %d memory", &ev->device) != 1 || ev->device < 0 || ev->device >= TRACE_MAX_DEVICES)
            json_fail(reader, "counter event \"%s\" is not \"GPU N memory\"", name);
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
    } else if (strcmp(name, "alloc") == 0) {
        ev->kind = TRACE_ALLOC;
        ev->addr = need_u64(reader, args, name, "addr");
        ev->bytes = need_u64(reader, args, name, "bytes");
        ev->stream = need_u64(reader, args, name, "stream");
        ev->cached = need(reader, args, name, "cached")->type == JSON_TRUE;
        json_get_u64(args, "stack", &ev->stack);
        ev->frames = json_get(args, "frames");
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
        ev->frames = json_get(args, "frames");
    } else if (strcmp(name, "lms.trace_truncated") == 0) {
        ev->kind = TRACE_TRUNCATED;
    } else if (strcmp(name, "lms.trace_end") == 0) {
        ev->kind = TRACE_END;
    } else {
        return false;                  /* lms.dump_end, and events of newer writers */
    }
    if (ev->frames && ev->frames->type != JSON_ARRAY) json_fail(reader, "%s event: args.frames is not an array", name);
    return true;
}

int trace_read(const char *path, trace_settings *settings, trace_event_fn on_event, void *ctx,
               char *err, size_t err_len)
{
    json_reader *reader = json_open(path, err, err_len);
    if (!reader) return -1;
    volatile int stopped = 0;
    if (setjmp(*json_catch(reader))) {
        snprintf(err, err_len, "%s", json_error(reader));
        json_close(reader);
        return -1;
    }
    json_expect(reader, '{');
    if (strcmp(json_read_key(reader), "otherData") != 0)
        json_fail(reader, "not a liblms trace (it does not start with \"otherData\")");
    read_settings(reader, settings);
    bool events_seen = false, complete = false;
    while (json_peek(reader) == ',' && !stopped) {
        json_expect(reader, ',');
        const char *key = json_read_key(reader);
        if (strcmp(key, "traceEvents") != 0) {
            json_read_value(reader);
            json_arena_reset(reader);
            continue;
        }
        events_seen = true;
        json_expect(reader, '[');
        if (json_peek(reader) == ']') json_fail(reader, "no events (not even the trace's start)");
        for (;;) {
            const json_value *json = json_read_value(reader);
            trace_event ev;
            if (convert(reader, json, &ev)) {
                if (ev.kind == TRACE_END) complete = true;
                int r = on_event(ctx, &ev);
                if (r) { stopped = r; break; }
            }
            json_arena_reset(reader);
            if (json_peek(reader) == ']') { json_expect(reader, ']'); break; }
            json_expect(reader, ',');
        }
    }
    if (!stopped) {
        json_expect(reader, '}');
        json_expect_end(reader);
        if (!events_seen) json_fail(reader, "no \"traceEvents\"");
        if (!complete) json_fail(reader, "no lms.trace_end event: the trace is incomplete");
    }
    json_close(reader);
    return stopped;
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

void trace_call_site(const json_value *frames, char *buf, size_t len)
{
    const char *site = NULL;
    for (size_t i = 0; frames && i < frames->count && !site; i++)
        if (frames->items[i].type == JSON_STRING && !frame_is_ours_or_cuda(frames->items[i].text))
            site = frames->items[i].text;
    if (!site && frames && frames->count && frames->items[0].type == JSON_STRING) site = frames->items[0].text;
    snprintf(buf, len, "%s", site ? site : "?");
}
