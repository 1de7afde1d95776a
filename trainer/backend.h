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
    float *(*alloc)(size_t count);  /* count zeroed floats, one allocation; NULL when out of memory */
    void (*release)(float *p);
    void (*upload)(float *dst, const float *host_src, size_t count);
    void (*download)(float *host_dst, const float *src, size_t count);
    /* Data sets live on the backend as bytes; a batch is gathered from them there:
     * dst[b][i] = (src[(first + b) % count][i] - offset) * scale, items of item_size bytes. */
    uint8_t *(*upload_bytes)(const uint8_t *host, size_t bytes); /* NULL when out of memory */
    void (*release_bytes)(uint8_t *p);
    void (*gather)(float *dst, const uint8_t *src, size_t item_size, long first, int batch, long count,
                   float offset, float scale);
    /* Prepares a layer whose tensors are allocated (descriptors, algorithms, workspace).
     * Returns 0, or -1 with a message in err. */
    int (*setup)(struct Net *net, struct Layer *layer, char *err, size_t errlen);
    void (*teardown)(struct Layer *layer);
    void (*forward)(struct Net *net, struct Layer *layer);
    void (*backward)(struct Net *net, struct Layer *layer);
    /* Caffe's SGD step for one parameter: history = momentum * history + lr * (diff + decay *
     * data); data -= history. */
    void (*sgd_update)(struct Param *param, float lr, float momentum, float decay);
    void (*synchronize)(void);
    double (*seconds)(void); /* a clock that is right once queued work is done */
    const char *clock_note;  /* how its rates are to be read; NULL for real time */
} Backend;

extern const Backend cpu_backend;

#endif
