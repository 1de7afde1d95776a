/* CIFAR-10 binary batches: records of 1 label byte and 3x32x32 pixel bytes (channel-major).
 * Training reads data_batch_1.bin .. data_batch_5.bin (those present, at least one), test
 * reads test_batch.bin. */
#include "trainer/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CIFAR_PIXELS (3 * 32 * 32)
#define CIFAR_RECORD (1 + CIFAR_PIXELS)

static int append_file(Dataset *ds, const char *path, char *err, size_t errlen)
{
    uint8_t *data;
    size_t size;
    if (read_whole_file(path, &data, &size, err, errlen)) return -1;
    if (size == 0 || size % CIFAR_RECORD) {
        snprintf(err, errlen, "%s: %zu bytes is not a whole number of %d-byte CIFAR-10 records "
                 "(truncated or not a CIFAR-10 binary batch)", path, size, CIFAR_RECORD);
        free(data);
        return -1;
    }
    long n = (long)(size / CIFAR_RECORD);
    uint8_t *pixels = realloc(ds->pixels, (size_t)(ds->count + n) * CIFAR_PIXELS);
    if (pixels) ds->pixels = pixels;
    uint8_t *labels = realloc(ds->labels, (size_t)(ds->count + n));
    if (labels) ds->labels = labels;
    if (!pixels || !labels) {
        snprintf(err, errlen, "%s: out of memory", path);
        free(data);
        return -1;
    }
    for (long i = 0; i < n; i++) {
        const uint8_t *record = data + i * CIFAR_RECORD;
        if (record[0] > 9) {
            snprintf(err, errlen, "%s: record %ld has label %d, expected 0..9 (corrupt file)", path, i, record[0]);
            free(data);
            return -1;
        }
        ds->labels[ds->count + i] = record[0];
        memcpy(ds->pixels + (size_t)(ds->count + i) * CIFAR_PIXELS, record + 1, CIFAR_PIXELS);
    }
    ds->count += n;
    free(data);
    return 0;
}

int cifar10_load(Dataset *ds, const char *dir, int train, char *err, size_t errlen)
{
    memset(ds, 0, sizeof *ds);
    snprintf(ds->name, sizeof ds->name, "CIFAR-10 (%s)", train ? "train" : "test");
    ds->c = 3, ds->d = 1, ds->h = ds->w = 32, ds->classes = 10;
    char path[4096];
    int files = 0;
    for (int i = 1; i <= (train ? 5 : 1); i++) {
        if (train)
            snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, i);
        else
            snprintf(path, sizeof path, "%s/test_batch.bin", dir);
        if (train && access(path, F_OK) != 0) continue;
        if (append_file(ds, path, err, errlen)) {
            dataset_close(ds);
            return -1;
        }
        files++;
    }
    if (!files) {
        snprintf(err, errlen, "%s: no CIFAR-10 training batches (data_batch_1.bin .. data_batch_5.bin); "
                 "tools/fetch-cifar10.sh downloads them", dir);
        return -1;
    }
    return 0;
}
