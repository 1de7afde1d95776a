/* Opening data sets. */
#include "trainer/data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int read_whole_file(const char *path, uint8_t **data, size_t *size, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    long end = -1;
    if (fseek(f, 0, SEEK_END) == 0) end = ftell(f);
    if (end < 0 || fseek(f, 0, SEEK_SET) != 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        fclose(f);
        return -1;
    }
    *data = malloc(end ? (size_t)end : 1);
    *size = (size_t)end;
    if (!*data || fread(*data, 1, *size, f) != *size) {
        snprintf(err, errlen, "cannot read %s: %s", path, *data ? "short read" : "out of memory");
        free(*data);
        *data = NULL;
        fclose(f);
        return -1;
    }
    fclose(f);
    return 0;
}

int dataset_open(Dataset *ds, const char *spec, int train, const Model *m, const ModelOptions *opt,
                 uint64_t seed, char *err, size_t errlen)
{
    memset(ds, 0, sizeof *ds);
    int status;
    if (!strcmp(spec, "synthetic")) {
        if (synthetic_generate(ds, train, m, opt, seed, err, errlen)) {
            dataset_close(ds);
            return -1;
        }
        return 0;
    } else if (!strncmp(spec, "cifar10:", 8)) {
        status = cifar10_load(ds, spec + 8, train, err, errlen);
    } else if (!strncmp(spec, "mnist:", 6)) {
        status = mnist_load(ds, spec + 6, train, err, errlen);
    } else {
        snprintf(err, errlen, "--data %s: expected synthetic, cifar10:DIR or mnist:DIR", spec);
        return -1;
    }
    if (status) return -1;
    int c, d, h, w;
    model_input_shape(m, opt, &c, &d, &h, &w);
    if (ds->c != c || ds->d != d || ds->h != h || ds->w != w || ds->classes != m->classes ||
        m->segmentation) {
        snprintf(err, errlen, "--data %s: %s has %dx%dx%d images in %d classes; model %s expects %dx%dx%d in %d",
                 spec, ds->name, ds->c, ds->h, ds->w, ds->classes, m->name, c, h, w, m->classes);
        dataset_close(ds);
        return -1;
    }
    return 0;
}

void dataset_close(Dataset *ds)
{
    free(ds->pixels);
    free(ds->labels);
    ds->pixels = ds->labels = NULL;
}
