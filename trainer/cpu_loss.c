/* Loss layers on the CPU. Both take a softmax over channels at every position (kept in aux for
 * backward and for accuracy):
 *   softmax loss: mean over positions of -log p[label]
 *   Dice loss:    1 - mean over classes k of (2 I_k + 1) / (S_k + 1), where over the whole batch
 *                 I_k = sum p_k * [label == k] and S_k = sum p_k + sum [label == k] */
#include "trainer/cpu_layers.h"

#include <float.h>
#include <math.h>

static void softmax(const Tensor *x, float *prob)
{
    size_t spatial = tensor_spatial(x);
    for (int n = 0; n < x->n; n++)
        for (size_t s = 0; s < spatial; s++) {
            const float *in = x->data + (size_t)n * x->c * spatial + s;
            float *p = prob + (size_t)n * x->c * spatial + s;
            float max = in[0], sum = 0;
            for (int c = 1; c < x->c; c++) max = fmaxf(max, in[c * spatial]);
            for (int c = 0; c < x->c; c++) sum += p[c * spatial] = expf(in[c * spatial] - max);
            for (int c = 0; c < x->c; c++) p[c * spatial] /= sum;
        }
}

void cpu_softmax_loss_forward(Layer *l, const Tensor *x, const Tensor *label, Tensor *y)
{
    size_t spatial = tensor_spatial(x), positions = x->n * spatial;
    softmax(x, l->aux.data);
    double loss = 0;
    for (size_t i = 0; i < positions; i++) {
        size_t n = i / spatial, s = i % spatial;
        int k = (int)label->data[i];
        loss -= logf(fmaxf(l->aux.data[(n * x->c + k) * spatial + s], FLT_MIN));
    }
    y->data[0] = (float)(loss / positions);
}

void cpu_softmax_loss_backward(const Layer *l, Tensor *x, const Tensor *label)
{
    size_t spatial = tensor_spatial(x), positions = x->n * spatial;
    float scale = l->loss_weight / positions;
    for (size_t i = 0; i < tensor_count(x); i++) {
        size_t n = i / (x->c * spatial), c = i / spatial % x->c, s = i % spatial;
        float g = (l->aux.data[i] - ((size_t)label->data[n * spatial + s] == c)) * scale;
        x->diff[i] = l->accumulate[0] ? x->diff[i] + g : g;
    }
}

/* aux.diff[k] = I_k and aux.diff[classes + k] = S_k. */
void cpu_dice_loss_forward(Layer *l, const Tensor *x, const Tensor *label, Tensor *y)
{
    size_t spatial = tensor_spatial(x);
    int classes = x->c;
    float *sums = l->aux.diff;
    softmax(x, l->aux.data);
    for (int k = 0; k < classes; k++) {
        double inter = 0, size = 0;
        for (int n = 0; n < x->n; n++)
            for (size_t s = 0; s < spatial; s++) {
                float p = l->aux.data[((size_t)n * classes + k) * spatial + s];
                int truth = (int)label->data[n * spatial + s] == k;
                inter += p * truth;
                size += p + truth;
            }
        sums[k] = (float)inter;
        sums[classes + k] = (float)size;
    }
    double dice = 0;
    for (int k = 0; k < classes; k++) dice += (2 * sums[k] + 1) / (sums[classes + k] + 1);
    y->data[0] = (float)(1 - dice / classes);
}

void cpu_dice_loss_backward(const Layer *l, Tensor *x, const Tensor *label)
{
    size_t spatial = tensor_spatial(x);
    int classes = x->c;
    const float *sums = l->aux.diff, *prob = l->aux.data;
    float scale = l->loss_weight / classes;
    for (int n = 0; n < x->n; n++)
        for (size_t s = 0; s < spatial; s++) {
            /* dL/dp_k, then through the softmax: dx_c = p_c (dp_c - sum_k p_k dp_k) */
            float dp[64], dot = 0;
            int truth = (int)label->data[n * spatial + s];
            for (int k = 0; k < classes; k++) {
                float u = sums[classes + k] + 1;
                float p = prob[((size_t)n * classes + k) * spatial + s];
                dp[k] = -scale * (2.0f * (truth == k) * u - (2 * sums[k] + 1)) / (u * u);
                dot += p * dp[k];
            }
            for (int c = 0; c < classes; c++) {
                size_t i = ((size_t)n * classes + c) * spatial + s;
                float g = prob[i] * (dp[c] - dot);
                x->diff[i] = l->accumulate[0] ? x->diff[i] + g : g;
            }
        }
}
