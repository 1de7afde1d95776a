/* MNIST idx files: train-images-idx3-ubyte / train-labels-idx1-ubyte and the t10k-* pair.
 * Big-endian headers: magic 0x00000803 (images), count, rows, cols; magic 0x00000801 (labels),
 * count. */
#include "trainer/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t big_endian(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int check(int good, char *err, size_t errlen, const char *path, const char *what)
{
    if (!good) snprintf(err, errlen, "%s: %s", path, what);
    return !good;
}

int mnist_load(Dataset *ds, const char *dir, int train, char *err, size_t errlen)
{
    memset(ds, 0, sizeof *ds);
    snprintf(ds->name, sizeof ds->name, "MNIST (%s)", train ? "train" : "test");
    char images_path[4096], labels_path[4096];
    const char *prefix = train ? "train" : "t10k";
    snprintf(images_path, sizeof images_path, "%s/%s-images-idx3-ubyte", dir, prefix);
    snprintf(labels_path, sizeof labels_path, "%s/%s-labels-idx1-ubyte", dir, prefix);
    uint8_t *images = NULL, *labels = NULL;
    size_t images_size, labels_size;
    int failed = read_whole_file(images_path, &images, &images_size, err, errlen) ||
                 read_whole_file(labels_path, &labels, &labels_size, err, errlen) ||
                 check(images_size >= 16 && big_endian(images) == 0x803, err, errlen, images_path,
                       "not an MNIST image file (bad magic number)") ||
                 check(labels_size >= 8 && big_endian(labels) == 0x801, err, errlen, labels_path,
                       "not an MNIST label file (bad magic number)");
    if (!failed) {
        uint32_t count = big_endian(images + 4), rows = big_endian(images + 8), cols = big_endian(images + 12);
        failed = check(count > 0 && rows > 0 && rows <= 4096 && cols > 0 && cols <= 4096 &&
                           images_size - 16 == (size_t)count * rows * cols,
                       err, errlen, images_path, "size does not match its header (truncated or corrupt)") ||
                 check(big_endian(labels + 4) == count && labels_size - 8 == count, err, errlen, labels_path,
                       "label count does not match the image file (truncated or corrupt)");
        for (uint32_t i = 0; !failed && i < count; i++)
            failed = check(labels[8 + i] <= 9, err, errlen, labels_path, "label outside 0..9 (corrupt)");
        if (!failed) {
            ds->c = ds->d = 1, ds->h = (int)rows, ds->w = (int)cols, ds->classes = 10;
            ds->count = count;
            ds->pixels = malloc((size_t)count * rows * cols);
            ds->labels = malloc(count);
            failed = check(ds->pixels && ds->labels, err, errlen, images_path, "out of memory");
            if (!failed) {
                memcpy(ds->pixels, images + 16, (size_t)count * rows * cols);
                memcpy(ds->labels, labels + 8, count);
            }
        }
    }
    free(images);
    free(labels);
    if (failed) dataset_close(ds);
    return failed ? -1 : 0;
}
