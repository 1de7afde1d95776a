/* Caffe's pooling windows, shared by the CPU reference and the CUDA kernels so that both pick
 * the same windows, divisors and winners. The window of output o along an axis starts at
 * o * stride - pad and ends kernel later, but not past the padded input; the average divides
 * by that size (padding counted), and the sum runs over the part inside the input. */
#ifndef TRAINER_POOL_WINDOW_H
#define TRAINER_POOL_WINDOW_H

#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include "trainer/layer.h"

#ifdef __CUDACC__
#define POOL_FN __host__ __device__ static inline
#else
#define POOL_FN static inline
#endif

typedef struct Span {
    int start[3], end[3]; /* the window clipped to the input, along depth, height and width */
    int size;             /* the divisor of average pooling */
} Span;

POOL_FN Span pool_span(const Window *k, const int in[3], const int out[3])
{
    Span s;
    s.size = 1;
    for (int a = 0; a < 3; a++) {
        int start = out[a] * k->stride[a] - k->pad[a];
        int end = start + k->kernel[a];
        if (end > in[a] + k->pad[a]) end = in[a] + k->pad[a];
        s.size *= end - start;
        s.start[a] = start < 0 ? 0 : start;
        s.end[a] = end > in[a] ? in[a] : end;
    }
    return s;
}

/* Index within one channel of the window's largest input: the first in scan order. Channels
 * hold fewer than 2^31 elements (net_add_pool), so indices are int32: the saved argmax, and
 * cheaper arithmetic in the kernels. */
POOL_FN int32_t pool_argmax(const float *x, const Span *s, const int in[3])
{
    float best = -FLT_MAX;
    int32_t at = (s->start[0] * in[1] + s->start[1]) * in[2] + s->start[2];
    for (int d = s->start[0]; d < s->end[0]; d++)
        for (int h = s->start[1]; h < s->end[1]; h++) {
            int32_t row = (d * in[1] + h) * in[2];
            for (int w = s->start[2]; w < s->end[2]; w++)
                if (x[row + w] > best) {
                    best = x[row + w];
                    at = row + w;
                }
        }
    return at;
}

POOL_FN float pool_average(const float *x, const Span *s, const int in[3])
{
    float sum = 0;
    for (int d = s->start[0]; d < s->end[0]; d++)
        for (int h = s->start[1]; h < s->end[1]; h++)
            for (int w = s->start[2]; w < s->end[2]; w++) sum += x[(d * in[1] + h) * in[2] + w];
    return sum / s->size;
}

#endif
