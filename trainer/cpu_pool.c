/* Max and average pooling on the CPU, with Caffe's windows (pool_window.h). Max pooling's
 * backward recomputes which input won rather than keeping a mask. */
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
    for (int nc = 0; nc < x->n * x->c; nc++) {
        const float *xp = x->data + nc * xs;
        float *yp = y->data + nc * ys;
        int in[3] = {x->d, x->h, x->w};
        FOR_EACH_WINDOW(x, y, &l->p.pool.win, s, o, {
            yp[o] = l->p.pool.method == POOL_MAX ? xp[pool_argmax(xp, &s, in)] : pool_average(xp, &s, in);
        });
    }
}

void cpu_pool_backward(const Layer *l, Tensor *x, const Tensor *y)
{
    if (!x->diff) return;
    size_t xs = tensor_spatial(x), ys = tensor_spatial(y);
    if (!l->accumulate[0]) memset(x->diff, 0, tensor_count(x) * sizeof(float));
    for (int nc = 0; nc < x->n * x->c; nc++) {
        const float *dy = y->diff + nc * ys;
        float *dx = x->diff + nc * xs;
        int in[3] = {x->d, x->h, x->w};
        FOR_EACH_WINDOW(x, y, &l->p.pool.win, s, o, {
            if (l->p.pool.method == POOL_MAX) { /* average pooling does not read x */
                dx[pool_argmax(x->data + nc * xs, &s, in)] += dy[o];
            } else {
                for (int d = s.start[0]; d < s.end[0]; d++)
                    for (int h = s.start[1]; h < s.end[1]; h++)
                        for (int w = s.start[2]; w < s.end[2]; w++)
                            dx[((size_t)d * in[1] + h) * in[2] + w] += dy[o] / s.size;
            }
        });
    }
}
