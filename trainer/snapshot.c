#include "trainer/snapshot.h"
#include "trainer/data.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_SIZE 56
#define RECORD_HEADER 48

typedef struct Writer {
    FILE *f;
    uint64_t hash;
    int failed;
} Writer;

static uint64_t fnv1a(uint64_t hash, const void *data, size_t size)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < size; i++) hash = (hash ^ p[i]) * 0x100000001b3ULL;
    return hash;
}

#define FNV_OFFSET 0xcbf29ce484222325ULL

static void put(Writer *w, const void *data, size_t size)
{
    w->hash = fnv1a(w->hash, data, size);
    if (!w->failed && fwrite(data, 1, size, w->f) != size) w->failed = 1;
}

static void put_u32(Writer *w, uint32_t v) { put(w, &v, 4); }

static void put_name(Writer *w, const char *name, size_t width)
{
    char buf[32] = {0};
    size_t len = strnlen(name, width - 1);
    memcpy(buf, name, len);
    put(w, buf, width);
}

static int write_params(Writer *w, Net *net, long iter)
{
    put(w, SNAPSHOT_MAGIC, 8);
    put_u32(w, SNAPSHOT_VERSION);
    uint32_t nparams = 0;
    NET_FOR_EACH_PARAM(net, l, p) nparams++;
    put_u32(w, nparams);
    put_name(w, net->model, 32);
    int64_t it = iter;
    put(w, &it, 8);
    NET_FOR_EACH_PARAM(net, l, p) {
        size_t count = tensor_count(&p->t);
        float *host = malloc(count * sizeof *host);
        if (!host) return -1;
        put_name(w, l->name, 24);
        put_u32(w, p == &l->bias);
        int32_t shape[5] = {p->t.n, p->t.c, p->t.d, p->t.h, p->t.w};
        put(w, shape, sizeof shape);
        net->be->download(host, p->t.data, count);
        put(w, host, count * sizeof *host);
        net->be->download(host, p->history, count);
        put(w, host, count * sizeof *host);
        free(host);
    }
    uint64_t hash = w->hash;
    put(w, &hash, 8);
    return w->failed ? -1 : 0;
}

static void sync_directory(const char *path)
{
    char *copy = strdup(path);
    if (!copy) return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(copy);
}

int snapshot_prefix_check(const char *prefix, char *err, size_t errlen)
{
    /* The longest name snapshot_write makes: the last iteration's temporary file. */
    char longest[4096];
    if (snprintf(longest, sizeof longest, "%s_iter_%ld.snap.tmp.XXXXXX", prefix, LONG_MAX) >= (int)sizeof longest) {
        snprintf(err, errlen, "too long: snapshot names must stay under %zu bytes", sizeof longest);
        return -1;
    }
    const char *dir = dirname(longest);
    struct stat st;
    int missing = stat(dir, &st) != 0;
    if (missing || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "snapshots go in %s: %s", dir, missing ? strerror(errno) : "not a directory");
        return -1;
    }
    /* A file made there as snapshot_write makes its own: access() would miss read-only file
     * systems' quirks and say yes to root everywhere. */
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/.snapshot-probe.XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0) {
        snprintf(err, errlen, "snapshots go in %s: cannot create a file there: %s", dir, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    return 0;
}

int snapshot_write(const char *path, Net *net, long iter, char *err, size_t errlen)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp) {
        snprintf(err, errlen, "snapshot path too long: %s", path);
        return -1;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create a snapshot beside %s: %s", path, strerror(errno));
        return -1;
    }
    Writer w = {.f = fdopen(fd, "wb"), .hash = FNV_OFFSET};
    int failed = !w.f || write_params(&w, net, iter) || fflush(w.f) || fsync(fd);
    int saved_errno = errno;
    if (w.f ? fclose(w.f) : close(fd)) failed = 1;
    if (!failed && rename(tmp, path)) failed = 1, saved_errno = errno;
    if (failed) {
        unlink(tmp);
        snprintf(err, errlen, "cannot write snapshot %s: %s", path, strerror(saved_errno));
        return -1;
    }
    sync_directory(path);
    return 0;
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Checks every record against the net; returns 0 or -1 with err set. */
static int check_records(const uint8_t *data, size_t size, const char *path, Net *net, char *err, size_t errlen)
{
    size_t at = HEADER_SIZE, end = size - 8;
    NET_FOR_EACH_PARAM(net, l, p) {
        const char *what = p == &l->bias ? "bias" : "weight";
        if (end - at < RECORD_HEADER) {
            snprintf(err, errlen, "%s: truncated at the %s of layer %s", path, what, l->name);
            return -1;
        }
        int32_t shape[5];
        memcpy(shape, data + at + 28, sizeof shape);
        int32_t want[5] = {p->t.n, p->t.c, p->t.d, p->t.h, p->t.w};
        if (strncmp((const char *)data + at, l->name, 24) || get_u32(data + at + 24) != (p == &l->bias) ||
            memcmp(shape, want, sizeof shape)) {
            snprintf(err, errlen, "%s: the %s of layer %s does not match the model (%.24s %dx%dx%dx%dx%d)",
                     path, what, l->name, (const char *)data + at, shape[0], shape[1], shape[2], shape[3], shape[4]);
            return -1;
        }
        size_t bytes = 2 * tensor_count(&p->t) * sizeof(float);
        if (end - at - RECORD_HEADER < bytes) {
            snprintf(err, errlen, "%s: truncated in the %s of layer %s", path, what, l->name);
            return -1;
        }
        at += RECORD_HEADER + bytes;
    }
    if (at != end) {
        snprintf(err, errlen, "%s: %zu bytes left over after the last parameter", path, end - at);
        return -1;
    }
    return 0;
}

static int check_file(const uint8_t *data, size_t size, const char *path, Net *net, char *err, size_t errlen)
{
    if (size < HEADER_SIZE + 8 || memcmp(data, SNAPSHOT_MAGIC, 8)) {
        snprintf(err, errlen, "%s: not a trainer snapshot (bad magic number or too short)", path);
        return -1;
    }
    uint64_t stored;
    memcpy(&stored, data + size - 8, 8);
    if (fnv1a(FNV_OFFSET, data, size - 8) != stored) {
        snprintf(err, errlen, "%s: checksum mismatch (corrupt or truncated snapshot)", path);
        return -1;
    }
    if (get_u32(data + 8) != SNAPSHOT_VERSION) {
        snprintf(err, errlen, "%s: snapshot version %u, this trainer reads version %d", path,
                 get_u32(data + 8), SNAPSHOT_VERSION);
        return -1;
    }
    char model[33] = {0};
    memcpy(model, data + 16, 32);
    if (strcmp(model, net->model)) {
        snprintf(err, errlen, "%s: snapshot of model %s, not %s", path, model, net->model);
        return -1;
    }
    return check_records(data, size, path, net, err, errlen);
}

int snapshot_read(const char *path, Net *net, long *iter, char *err, size_t errlen)
{
    uint8_t *data;
    size_t size;
    if (read_whole_file(path, &data, &size, err, errlen)) return -1;
    if (check_file(data, size, path, net, err, errlen)) {
        free(data);
        return -1;
    }
    int64_t it;
    memcpy(&it, data + 48, 8);
    size_t largest = 1;
    NET_FOR_EACH_PARAM(net, l, p) if (tensor_count(&p->t) > largest) largest = tensor_count(&p->t);
    float *values = malloc(largest * sizeof *values); /* the file's floats may be unaligned */
    if (!values) {
        snprintf(err, errlen, "%s: out of memory", path);
        free(data);
        return -1;
    }
    size_t at = HEADER_SIZE;
    NET_FOR_EACH_PARAM(net, l, p) {
        size_t count = tensor_count(&p->t);
        memcpy(values, data + at + RECORD_HEADER, count * sizeof *values);
        net->be->upload(p->t.data, values, count);
        memcpy(values, data + at + RECORD_HEADER + count * sizeof *values, count * sizeof *values);
        net->be->upload(p->history, values, count);
        at += RECORD_HEADER + 2 * count * sizeof(float);
    }
    free(values);
    *iter = (long)it;
    free(data);
    return 0;
}
