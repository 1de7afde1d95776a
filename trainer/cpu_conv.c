/* Convolution and transposed convolution on the CPU: one loop nest serves the forward pass,
 * the gradient with respect to the input and the gradient with respect to the weights. */
#include "trainer/cpu_layers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ConvGeom {
    int n, group;
    int cin, din, hin, win;    /* the convolution's input */
    int cout, dout, hout, wout; /* its output */
    Window k;
} ConvGeom;

enum { CONV_FORWARD, CONV_BACKWARD_DATA, CONV_BACKWARD_FILTER };

/* The outputs o in [*lo, *hi) whose input o * stride - pad + k lies inside [0, in). */
static void valid_range(int in, int out, int stride, int pad, int k, int *lo, int *hi)
{
    int first = pad - k > 0 ? (pad - k + stride - 1) / stride : 0;
    int last = in - 1 + pad - k >= 0 ? (in - 1 + pad - k) / stride + 1 : 0;
    *lo = first;
    *hi = last < out ? last : out;
}

/* Between one group of one sample's input and its columns col[(c, kd, kh, kw)][output position]:
 * to_columns copies (zeros where the window leaves the input), else adds the columns back. */
NO_TSAN static void columns(const ConvGeom *g, float *in, float *col, int to_columns)
{
    const int *K = g->k.kernel, *S = g->k.stride, *P = g->k.pad;
    size_t out_spatial = (size_t)g->dout * g->hout * g->wout;
    for (int c = 0; c < g->cin / g->group; c++)
        for (int kd = 0; kd < K[0]; kd++)
            for (int kh = 0; kh < K[1]; kh++)
                for (int kw = 0; kw < K[2]; kw++) {
                    float *row = col + ((((size_t)c * K[0] + kd) * K[1] + kh) * K[2] + kw) * out_spatial;
                    int w0, w1;
                    valid_range(g->win, g->wout, S[2], P[2], kw, &w0, &w1);
                    for (int od = 0; od < g->dout; od++)
                        for (int oh = 0; oh < g->hout; oh++, row += g->wout) {
                            int id = od * S[0] - P[0] + kd, ih = oh * S[1] - P[1] + kh;
                            int inside = id >= 0 && id < g->din && ih >= 0 && ih < g->hin;
                            if (to_columns) memset(row, 0, g->wout * sizeof *row);
                            if (!inside) continue;
                            float *irow = in + (((size_t)c * g->din + id) * g->hin + ih) * g->win - P[2] + kw;
                            for (int ow = w0; ow < w1; ow++) {
                                if (to_columns) row[ow] = irow[ow * S[2]];
                                else irow[ow * S[2]] += row[ow];
                            }
                        }
                }
}

/* CONV_FORWARD: out += w * in; CONV_BACKWARD_DATA: in += w * out; CONV_BACKWARD_FILTER:
 * w += out * in. Weights are [cout][cin / group][kd][kh][kw], that is [cout][rows of col]:
 * each is a matrix product with the columns of the input (Caffe's im2col). */
NO_TSAN static void conv_core(const ConvGeom *g, int mode, float *in, float *out, float *w)
{
    size_t out_spatial = (size_t)g->dout * g->hout * g->wout, in_spatial = (size_t)g->din * g->hin * g->win;
    int cin_g = g->cin / g->group, cout_g = g->cout / g->group;
    size_t rows = (size_t)cin_g * g->k.kernel[0] * g->k.kernel[1] * g->k.kernel[2];
    float *col = malloc(rows * out_spatial * sizeof *col);
    if (!col) {
        fprintf(stderr, "lms-trainer: out of host memory for a %zux%zu convolution buffer\n", rows, out_spatial);
        exit(1);
    }
    for (int n = 0; n < g->n; n++)
        for (int group = 0; group < g->group; group++) {
            float *inp = in + ((size_t)n * g->cin + (size_t)group * cin_g) * in_spatial;
            float *outp = out + ((size_t)n * g->cout + (size_t)group * cout_g) * out_spatial;
            float *wg = w + (size_t)group * cout_g * rows;
            if (mode == CONV_BACKWARD_DATA) memset(col, 0, rows * out_spatial * sizeof *col);
            else columns(g, inp, col, 1);
            for (int o = 0; o < cout_g; o++) {
                float *orow = outp + o * out_spatial, *wo = wg + o * rows;
                for (size_t r = 0; r < rows; r++) {
                    float *crow = col + r * out_spatial, wv = wo[r], acc = 0;
                    if (mode == CONV_FORWARD)
                        for (size_t s = 0; s < out_spatial; s++) orow[s] += wv * crow[s];
                    else if (mode == CONV_BACKWARD_DATA)
                        for (size_t s = 0; s < out_spatial; s++) crow[s] += wv * orow[s];
                    else
                        for (size_t s = 0; s < out_spatial; s++) acc += orow[s] * crow[s];
                    if (mode == CONV_BACKWARD_FILTER) wo[r] += acc;
                }
            }
            if (mode == CONV_BACKWARD_DATA) columns(g, inp, col, 0);
        }
    free(col);
}

static ConvGeom geometry(const Layer *l, const Tensor *in, const Tensor *out)
{
    return (ConvGeom){.n = in->n, .group = l->p.conv.group,
                      .cin = in->c, .din = in->d, .hin = in->h, .win = in->w,
                      .cout = out->c, .dout = out->d, .hout = out->h, .wout = out->w,
                      .k = l->p.conv.win};
}

static void add_bias(const float *bias, Tensor *y)
{
    size_t spatial = tensor_spatial(y);
    for (int n = 0; n < y->n; n++)
        for (int c = 0; c < y->c; c++) {
            float *p = y->data + ((size_t)n * y->c + c) * spatial;
            for (size_t s = 0; s < spatial; s++) p[s] += bias[c];
        }
}

static void bias_gradient(const Tensor *y, float *dbias)
{
    size_t spatial = tensor_spatial(y);
    for (int c = 0; c < y->c; c++) {
        double sum = 0;
        for (int n = 0; n < y->n; n++) {
            const float *p = y->diff + ((size_t)n * y->c + c) * spatial;
            for (size_t s = 0; s < spatial; s++) sum += p[s];
        }
        dbias[c] = (float)sum;
    }
}

void cpu_conv_forward(const Layer *l, const Tensor *x, Tensor *y)
{
    ConvGeom g = geometry(l, x, y);
    memset(y->data, 0, tensor_count(y) * sizeof(float));
    conv_core(&g, CONV_FORWARD, x->data, y->data, l->weight.t.data);
    add_bias(l->bias.t.data, y);
}

void cpu_conv_backward(Layer *l, Tensor *x, const Tensor *y)
{
    ConvGeom g = geometry(l, x, y);
    memset(l->weight.t.diff, 0, tensor_count(&l->weight.t) * sizeof(float));
    conv_core(&g, CONV_BACKWARD_FILTER, x->data, y->diff, l->weight.t.diff);
    bias_gradient(y, l->bias.t.diff);
    if (!x->diff) return;
    if (!l->accumulate[0]) memset(x->diff, 0, tensor_count(x) * sizeof(float));
    conv_core(&g, CONV_BACKWARD_DATA, x->diff, y->diff, l->weight.t.data);
}

/* A transposed convolution is a convolution run backwards: its output is the convolution's
 * input, and its weights [in][out][k...] are the convolution's [cout][cin][k...]. */
void cpu_deconv_forward(const Layer *l, const Tensor *x, Tensor *y)
{
    ConvGeom g = geometry(l, y, x);
    memset(y->data, 0, tensor_count(y) * sizeof(float));
    conv_core(&g, CONV_BACKWARD_DATA, y->data, x->data, l->weight.t.data);
    add_bias(l->bias.t.data, y);
}

void cpu_deconv_backward(Layer *l, Tensor *x, const Tensor *y)
{
    ConvGeom g = geometry(l, y, x);
    memset(l->weight.t.diff, 0, tensor_count(&l->weight.t) * sizeof(float));
    conv_core(&g, CONV_BACKWARD_FILTER, y->diff, x->data, l->weight.t.diff);
    bias_gradient(y, l->bias.t.diff);
    if (!x->diff) return;
    if (!l->accumulate[0]) memset(x->diff, 0, tensor_count(x) * sizeof(float));
    conv_core(&g, CONV_FORWARD, y->diff, x->diff, l->weight.t.data);
}
