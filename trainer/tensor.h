/* A tensor: a 5-D NCDHW array of fp32 values with its gradient. 2-D images have d == 1.
 * Where the memory lives (host or device) is the backend's business (see backend.h). */
#ifndef TRAINER_TENSOR_H
#define TRAINER_TENSOR_H

#include <stddef.h>

typedef struct Tensor {
    int n, c, d, h, w; /* batch, channels, depth, height, width */
    float *data;       /* n*c*d*h*w values */
    float *diff;       /* gradient of the loss with respect to data; same size, NULL if unused */
} Tensor;

static inline size_t tensor_count(const Tensor *t)
{
    return (size_t)t->n * t->c * t->d * t->h * t->w;
}

static inline size_t tensor_spatial(const Tensor *t) /* d*h*w */
{
    return (size_t)t->d * t->h * t->w;
}

static inline size_t tensor_sample(const Tensor *t) /* c*d*h*w: one item of the batch */
{
    return (size_t)t->c * t->d * t->h * t->w;
}

#endif
