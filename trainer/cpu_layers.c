/* The element-wise and fully connected layers on the CPU: inner product, ReLU, dropout, concat. */
#include "trainer/cpu_layers.h"
#include "trainer/rng.h"

#include <string.h>

static void store(float *dst, float value, int accumulate)
{
    *dst = accumulate ? *dst + value : value;
}

/* y[n][o] = b[o] + sum_i W[o][i] x[n][i] */
NO_TSAN void cpu_ip_forward(const Layer *l, const Tensor *x, Tensor *y)
{
    int in = (int)tensor_sample(x), out = l->p.ip.out;
    const float *W = l->weight.t.data;
    for (int n = 0; n < x->n; n++)
        for (int o = 0; o < out; o++) {
            const float *xn = x->data + (size_t)n * in, *wo = W + (size_t)o * in;
            float sum = l->bias.t.data[o];
            for (int i = 0; i < in; i++) sum += wo[i] * xn[i];
            y->data[(size_t)n * out + o] = sum;
        }
}

NO_TSAN void cpu_ip_backward(Layer *l, Tensor *x, const Tensor *y)
{
    int in = (int)tensor_sample(x), out = l->p.ip.out;
    float *dW = l->weight.t.diff, *db = l->bias.t.diff;
    const float *W = l->weight.t.data;
    memset(dW, 0, (size_t)out * in * sizeof(float));
    memset(db, 0, (size_t)out * sizeof(float));
    for (int n = 0; n < x->n; n++)
        for (int o = 0; o < out; o++) {
            float g = y->diff[(size_t)n * out + o];
            const float *xn = x->data + (size_t)n * in;
            for (int i = 0; i < in; i++) dW[(size_t)o * in + i] += g * xn[i];
            db[o] += g;
        }
    if (!x->diff) return;
    for (int n = 0; n < x->n; n++)
        for (int i = 0; i < in; i++) {
            float sum = 0;
            for (int o = 0; o < out; o++) sum += y->diff[(size_t)n * out + o] * W[(size_t)o * in + i];
            store(&x->diff[(size_t)n * in + i], sum, l->accumulate[0]);
        }
}

void cpu_relu_forward(const Layer *l, const Tensor *x, Tensor *y)
{
    float slope = l->p.relu.negative_slope;
    for (size_t i = 0; i < tensor_count(x); i++)
        y->data[i] = x->data[i] > 0 ? x->data[i] : slope * x->data[i];
}

/* Uses the output, which is all that is left when the layer runs in place. */
void cpu_relu_backward(const Layer *l, Tensor *x, const Tensor *y)
{
    if (!x->diff) return;
    float slope = l->p.relu.negative_slope;
    for (size_t i = 0; i < tensor_count(x); i++)
        store(&x->diff[i], y->data[i] > 0 ? y->diff[i] : slope * y->diff[i], l->accumulate[0]);
}

static float dropout_gain(const Layer *l, uint64_t seed, long iter, int layer_index, size_t i)
{
    float ratio = l->p.dropout.ratio;
    return rng_hash_uniform(seed, (uint64_t)iter, (uint64_t)layer_index, i) >= ratio ? 1.0f / (1.0f - ratio) : 0.0f;
}

void cpu_dropout_forward(const Layer *l, uint64_t seed, long iter, int layer_index, const Tensor *x, Tensor *y)
{
    for (size_t i = 0; i < tensor_count(x); i++)
        y->data[i] = x->data[i] * dropout_gain(l, seed, iter, layer_index, i);
}

void cpu_dropout_backward(const Layer *l, uint64_t seed, long iter, int layer_index, Tensor *x, const Tensor *y)
{
    if (!x->diff) return;
    for (size_t i = 0; i < tensor_count(x); i++)
        store(&x->diff[i], y->diff[i] * dropout_gain(l, seed, iter, layer_index, i), l->accumulate[0]);
}

void cpu_concat_forward(const Layer *l, const Tensor *a, const Tensor *b, Tensor *y)
{
    (void)l;
    size_t as = tensor_sample(a), bs = tensor_sample(b);
    for (int n = 0; n < y->n; n++) {
        memcpy(y->data + n * (as + bs), a->data + n * as, as * sizeof(float));
        memcpy(y->data + n * (as + bs) + as, b->data + n * bs, bs * sizeof(float));
    }
}

void cpu_concat_backward(const Layer *l, Tensor *a, Tensor *b, const Tensor *y)
{
    size_t as = tensor_sample(a), bs = tensor_sample(b);
    for (int n = 0; n < y->n; n++) {
        for (size_t i = 0; a->diff && i < as; i++)
            store(&a->diff[n * as + i], y->diff[n * (as + bs) + i], l->accumulate[0]);
        for (size_t i = 0; b->diff && i < bs; i++)
            store(&b->diff[n * bs + i], y->diff[n * (as + bs) + as + i], l->accumulate[1]);
    }
}
