/* The embedded synthetic data set. Images: each class is a plane wave of its own direction,
 * frequency and phase in every channel, plus per-pixel noise. Volumes: spheres of classes 1
 * and 2 on background 0, each class brightening or darkening the channels in its own way, plus
 * noise. Learnable, and a pure function of (seed, split, sample). */
#include "trainer/data.h"
#include "trainer/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define TRAIN_IMAGES 4096
#define TEST_IMAGES 1024
#define TRAIN_VOLUMES 32
#define TEST_VOLUMES 8
#define MAX_BYTES ((size_t)256 << 20) /* big samples (alexnet, large volumes): fewer of them */

static uint8_t clamp_pixel(float v)
{
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)lrintf(v);
}

static void image(const Dataset *ds, const float *prototypes, int k, Rng *rng, uint8_t *pixels)
{
    size_t size = dataset_sample_size(ds);
    const float *proto = prototypes + k * size;
    for (size_t i = 0; i < size; i++) pixels[i] = clamp_pixel(proto[i] + 80 * (rng_uniform(rng) - 0.5f));
}

static float *make_prototypes(const Dataset *ds)
{
    float *protos = malloc(ds->classes * dataset_sample_size(ds) * sizeof *protos);
    if (!protos) return NULL;
    float *p = protos;
    for (int k = 0; k < ds->classes; k++) {
        float fx = 0.25f + 0.15f * (k % 4), fy = 0.2f * (k / 4 % 3), phase = 0.7f * k;
        for (int c = 0; c < ds->c; c++)
            for (int y = 0; y < ds->h; y++)
                for (int x = 0; x < ds->w; x++) *p++ = 128 + 60 * sinf(fx * x + fy * y + phase + c);
    }
    return protos;
}

static void volume(const Dataset *ds, Rng *rng, uint8_t *pixels, uint8_t *labels)
{
    float center[2][3], radius[2];
    for (int s = 0; s < 2; s++) {
        for (int a = 0; a < 3; a++) center[s][a] = ds->w * (0.25f + 0.5f * rng_uniform(rng));
        radius[s] = ds->w * (0.12f + 0.15f * rng_uniform(rng));
    }
    size_t voxels = dataset_label_size(ds), i = 0;
    for (int z = 0; z < ds->d; z++)
        for (int y = 0; y < ds->h; y++)
            for (int x = 0; x < ds->w; x++, i++) {
                int k = 0;
                for (int s = 0; s < 2; s++) {
                    float dz = z - center[s][0], dy = y - center[s][1], dx = x - center[s][2];
                    if (dz * dz + dy * dy + dx * dx <= radius[s] * radius[s]) k = s + 1;
                }
                labels[i] = (uint8_t)k;
                for (int c = 0; c < ds->c; c++) {
                    float contrast = k == 0 ? 0 : (k == 1 ? 50.0f : -50.0f) * (c % 2 ? 1 : 0.5f);
                    pixels[c * voxels + i] = clamp_pixel(128 + contrast + 60 * (rng_uniform(rng) - 0.5f));
                }
            }
}

int synthetic_generate(Dataset *ds, int train, const Model *m, const ModelOptions *opt, uint64_t seed,
                       char *err, size_t errlen)
{
    snprintf(ds->name, sizeof ds->name, "synthetic (%s)", train ? "train" : "test");
    model_input_shape(m, opt, &ds->c, &ds->d, &ds->h, &ds->w);
    ds->classes = m->classes;
    ds->segmentation = m->segmentation;
    size_t sample = dataset_sample_size(ds), label = dataset_label_size(ds);
    long most = (long)(MAX_BYTES / (sample + label));
    ds->count = ds->segmentation ? (train ? TRAIN_VOLUMES : TEST_VOLUMES) : (train ? TRAIN_IMAGES : TEST_IMAGES);
    if (ds->count > most) ds->count = most > 1 ? most : 1;
    ds->pixels = malloc(ds->count * sample);
    ds->labels = malloc(ds->count * label);
    float *protos = ds->segmentation ? NULL : make_prototypes(ds);
    if (!ds->pixels || !ds->labels || (!ds->segmentation && !protos)) {
        snprintf(err, errlen, "out of host memory generating synthetic data");
        free(protos);
        return -1;
    }
    for (long i = 0; i < ds->count; i++) {
        Rng rng = {rng_mix(seed) ^ rng_mix(((uint64_t)!train << 40) + (uint64_t)i)};
        if (ds->segmentation) {
            volume(ds, &rng, ds->pixels + i * sample, ds->labels + i * label);
        } else {
            int k = (int)(rng_uniform(&rng) * ds->classes);
            ds->labels[i] = (uint8_t)k;
            image(ds, protos, k, &rng, ds->pixels + i * sample);
        }
    }
    free(protos);
    return 0;
}
