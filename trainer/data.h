/* Data sets: the embedded synthetic one, CIFAR-10 binary batches and MNIST idx files, held
 * in memory as bytes (the backend copies them to the device once). Samples are taken in order,
 * batch after batch, wrapping around: the batch of iteration i is a function of i alone, so a
 * resumed run sees what an uninterrupted one would. */
#ifndef TRAINER_DATA_H
#define TRAINER_DATA_H

#include <stddef.h>
#include <stdint.h>
#include "trainer/models.h"

typedef struct Dataset {
    char name[64];
    int c, d, h, w, classes, segmentation;
    long count;          /* samples */
    uint8_t *pixels;     /* count * c*d*h*w bytes */
    uint8_t *labels;     /* count bytes, or count * d*h*w for segmentation */
} Dataset;

/* spec is "synthetic", "cifar10:DIR" or "mnist:DIR". The shape must suit the model.
 * Returns 0, or -1 with a message naming the file or spec in err. */
int dataset_open(Dataset *ds, const char *spec, int train, const Model *m, const ModelOptions *opt,
                 uint64_t seed, char *err, size_t errlen);
void dataset_close(Dataset *ds);

static inline size_t dataset_sample_size(const Dataset *ds) /* bytes of one sample */
{
    return (size_t)ds->c * ds->d * ds->h * ds->w;
}

static inline size_t dataset_label_size(const Dataset *ds) /* bytes of one sample's label */
{
    return ds->segmentation ? (size_t)ds->d * ds->h * ds->w : 1;
}

/* The readers, for dataset_open and the tests. */
int cifar10_load(Dataset *ds, const char *dir, int train, char *err, size_t errlen);
/* The synthetic data set: deterministic for a seed, learnable. */
int synthetic_generate(Dataset *ds, int train, const Model *m, const ModelOptions *opt, uint64_t seed,
                       char *err, size_t errlen);
int mnist_load(Dataset *ds, const char *dir, int train, char *err, size_t errlen);
/* Reads a whole file; 0, or -1 with the reason in err. */
int read_whole_file(const char *path, uint8_t **data, size_t *size, char *err, size_t errlen);

#endif
