/* Local response normalisation on the CPU, Caffe's two regions:
 *   across channels: s = k + alpha / size * sum of x^2 over size neighbouring channels
 *   within channel:  s = k + alpha / size^dims * sum of x^2 over a size^dims spatial window,
 *                    zero-padded (Caffe builds it from an average pooling that counts the padding)
 *   y = x * s^-beta
 *   dx = dy * s^-beta - 2 alpha beta / divisor * x * sum over the same window of dy * y / s */
#include "trainer/cpu_layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Sum of a[i] * b[i] (b NULL: of a[i]) over the window around element (n, c, d, h, w). */
static double window_sum(const Layer *l, const Tensor *t, const float *a, const float *b,
                         int n, int c, int d, int h, int w)
{
    int r = (l->p.lrn.size - 1) / 2;
    int lo[4] = {c, d, h, w}, hi[4] = {c, d, h, w}, dim[4] = {t->c, t->d, t->h, t->w};
    if (l->p.lrn.region == LRN_ACROSS_CHANNELS) {
        lo[0] -= r, hi[0] += r;
    } else {
        for (int axis = t->d > 1 ? 1 : 2; axis < 4; axis++) lo[axis] -= r, hi[axis] += r;
    }
    for (int axis = 0; axis < 4; axis++) {
        if (lo[axis] < 0) lo[axis] = 0;
        if (hi[axis] >= dim[axis]) hi[axis] = dim[axis] - 1;
    }
    double sum = 0;
    for (int cc = lo[0]; cc <= hi[0]; cc++)
        for (int dd = lo[1]; dd <= hi[1]; dd++)
            for (int hh = lo[2]; hh <= hi[2]; hh++)
                for (int ww = lo[3]; ww <= hi[3]; ww++) {
                    size_t i = ((((size_t)n * t->c + cc) * t->d + dd) * t->h + hh) * t->w + ww;
                    sum += b ? (double)a[i] * b[i] : a[i];
                }
    return sum;
}

static float divisor(const Layer *l, const Tensor *t)
{
    int size = l->p.lrn.size;
    if (l->p.lrn.region == LRN_ACROSS_CHANNELS) return (float)size;
    return t->d > 1 ? (float)(size * size * size) : (float)(size * size);
}

#define FOR_EACH_ELEMENT(t, i, body)                                                         \
    do {                                                                                   \
        size_t i = 0;                                                                      \
        for (int n = 0; n < (t)->n; n++)                                                   \
            for (int c = 0; c < (t)->c; c++)                                               \
                for (int d = 0; d < (t)->d; d++)                                           \
                    for (int h = 0; h < (t)->h; h++)                                       \
                        for (int w = 0; w < (t)->w; w++, i++) body;                        \
    } while (0)

void cpu_lrn_forward(Layer *l, const Tensor *x, Tensor *y)
{
    float alpha = l->p.lrn.alpha / divisor(l, x), beta = l->p.lrn.beta, k = l->p.lrn.k;
    float *scale = l->aux.data;
    FOR_EACH_ELEMENT(x, i, {
        scale[i] = k + alpha * (float)window_sum(l, x, x->data, x->data, n, c, d, h, w);
        y->data[i] = x->data[i] * powf(scale[i], -beta);
    });
}

void cpu_lrn_backward(const Layer *l, Tensor *x, const Tensor *y)
{
    if (!x->diff) return;
    float alpha = l->p.lrn.alpha / divisor(l, x), beta = l->p.lrn.beta;
    const float *scale = l->aux.data;
    size_t count = tensor_count(x);
    float *ratio = malloc(count * sizeof *ratio);
    if (!ratio) {
        fprintf(stderr, "lms-trainer: out of host memory in LRN backward\n");
        exit(1);
    }
    for (size_t i = 0; i < count; i++) ratio[i] = y->diff[i] * y->data[i] / scale[i];
    FOR_EACH_ELEMENT(x, i, {
        float g = y->diff[i] * powf(scale[i], -beta) -
                  2.0f * alpha * beta * x->data[i] * (float)window_sum(l, x, ratio, NULL, n, c, d, h, w);
        x->diff[i] = l->accumulate[0] ? x->diff[i] + g : g;
    });
    free(ratio);
}
