/* A backend runs a net's arithmetic and owns its memory: the CPU reference (cpu_backend.c)
 * or CUDA with cuDNN and cuBLAS (gpu_backend.cu). Pointers in tensors are the backend's. */
#ifndef TRAINER_BACKEND_H
#define TRAINER_BACKEND_H

#include <stddef.h>
#include <stdint.h>

struct Net;
struct Layer;
struct Param;

typedef struct Backend {
    const char *name;
    /* count floats, one allocation, contents undefined (as cudaMalloc's): nothing reads a buffer
     * before writing it, and writing zeros would only dirty memory (memory that liblms would then
     * swap out). NULL when out of memory. */
    float *(*alloc)(size_t count);
    void (*release)(float *p);
    void (*zero)(float *p, size_t count); /* the one buffer that starts at zero: the momentum */
    void (*upload)(float *dst, const float *host_src, size_t count);
    void (*download)(float *host_dst, const float *src, size_t count);
    /* Data sets live on the backend as bytes; a batch is gathered from them there:
     * dst[b][i] = (src[(first + b) % count][i] - offset) * scale, items of item_size bytes. */
    uint8_t *(*upload_bytes)(const uint8_t *host, size_t bytes); /* NULL when out of memory */
    void (*release_bytes)(uint8_t *p);
    void (*gather)(float *dst, const uint8_t *src, size_t item_size, long first, int batch, long count,
                   float offset, float scale);
    /* Optional. prepare: each layer's state from the net's shapes alone, before anything is
     * allocated, so that a net the backend cannot run fails before it takes memory (GPU: the
     * cuDNN descriptors). setup: what needs the allocated tensors (GPU: the algorithm search
     * and the workspace). Each returns 0, or -1 with a message in err. teardown undoes prepare
     * for one layer, whatever it got to. */
    int (*prepare)(struct Net *net, char *err, size_t errlen);
    int (*setup)(struct Net *net, char *err, size_t errlen);
    void (*teardown)(struct Layer *layer);
    void (*forward)(struct Net *net, struct Layer *layer);
    void (*backward)(struct Net *net, struct Layer *layer);
    /* Caffe's SGD step for one parameter: history = momentum * history + lr * (diff + decay *
     * data); data -= history. */
    void (*sgd_update)(struct Param *param, float lr, float momentum, float decay);
    void (*synchronize)(void);
    double (*seconds)(void); /* a clock that is right once queued work is done */
    const char *clock_note;  /* how its rates are to be read; NULL for real time */
    void (*close)(void);     /* optional: releases what opening the backend created */
} Backend;

extern const Backend cpu_backend;

#endif
