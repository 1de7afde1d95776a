/* Max and average pooling on the CPU, with Caffe's windows (pool_window.h). Max pooling's
 * forward keeps each window's argmax in the layer's aux (int32 indices within the channel), and
 * its backward routes each gradient there without looking at the input again. */
#include "trainer/cpu_layers.h"

#include "trainer/pool_window.h"

#include <string.h>

/* Calls body for every output position (o = its index in the channel) with its span. */
#define FOR_EACH_WINDOW(x, y, win, s, o, body)                          \
    do {                                                                \
        int in_[3] = {(x)->d, (x)->h, (x)->w}, out_[3];                 \
        size_t o = 0;                                                   \
        for (out_[0] = 0; out_[0] < (y)->d; out_[0]++)                  \
            for (out_[1] = 0; out_[1] < (y)->h; out_[1]++)              \
                for (out_[2] = 0; out_[2] < (y)->w; out_[2]++, o++) {   \
                    Span s = pool_span(win, in_, out_);                 \
                    body;                                               \
                }                                                       \
    } while (0)

void cpu_pool_forward(const Layer *l, const Tensor *x, Tensor *y)
{
    size_t xs = tensor_spatial(x), ys = tensor_spatial(y);
    for (size_t nc = 0; nc < (size_t)x->n * x->c; nc++) {
        const float *xp = x->data + nc * xs;
        float *yp = y->data + nc * ys;
        int32_t *argmax = (int32_t *)l->aux.data + nc * ys;
        int in[3] = {x->d, x->h, x->w};
        FOR_EACH_WINDOW(x, y, &l->p.pool.win, s, o, {
            if (l->p.pool.method == POOL_MAX) yp[o] = xp[argmax[o] = pool_argmax(xp, &s, in)];
            else yp[o] = pool_average(xp, &s, in);
        });
    }
}

void cpu_pool_backward(const Layer *l, Tensor *x, const Tensor *y)
{
    if (!x->diff) return;
    size_t xs = tensor_spatial(x), ys = tensor_spatial(y);
    if (!l->accumulate[0]) memset(x->diff, 0, tensor_count(x) * sizeof(float));
    for (size_t nc = 0; nc < (size_t)x->n * x->c; nc++) {
        const float *dy = y->diff + nc * ys;
        float *dx = x->diff + nc * xs;
        if (l->p.pool.method == POOL_MAX) {
            const int32_t *argmax = (const int32_t *)l->aux.data + nc * ys;
            for (size_t o = 0; o < ys; o++) dx[argmax[o]] += dy[o];
            continue;
        }
        int in[3] = {x->d, x->h, x->w};
        FOR_EACH_WINDOW(x, y, &l->p.pool.win, s, o, {
            for (int d = s.start[0]; d < s.end[0]; d++)
                for (int h = s.start[1]; h < s.end[1]; h++)
                    for (int w = s.start[2]; w < s.end[2]; w++)
                        dx[((size_t)d * in[1] + h) * in[2] + w] += dy[o] / s.size;
        });
    }
}
