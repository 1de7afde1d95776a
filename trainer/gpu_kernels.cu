#include "trainer/gpu_kernels.h"
#include "trainer/pool_window.h"
#include "trainer/rng.h"

#define THREADS 256

static unsigned blocks_for(size_t count)
{
    size_t b = (count + THREADS - 1) / THREADS;
    return (unsigned)(b < 65535 * 16 ? (b ? b : 1) : 65535 * 16);
}

#define FOR_EACH_INDEX(i, count) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (count); i += (size_t)gridDim.x * blockDim.x)

struct Dims {
    int n, c, d, h, w;
};

static Dims dims(const Tensor *t)
{
    return Dims{t->n, t->c, t->d, t->h, t->w};
}

__device__ static inline float store(float old, float value, int accumulate)
{
    return accumulate ? old + value : value;
}

/* ---- pooling: one thread per output (forward) or per input (backward, gathering) ---- */

__global__ static void pool_forward_kernel(Window win, PoolMethod method, Dims x, Dims y, const float *in, float *out)
{
    size_t count = (size_t)y.n * y.c * y.d * y.h * y.w;
    FOR_EACH_INDEX(i, count) {
        int o[3] = {(int)(i / ((size_t)y.h * y.w) % y.d), (int)(i / y.w % y.h), (int)(i % y.w)};
        int dimsin[3] = {x.d, x.h, x.w};
        size_t nc = i / ((size_t)y.d * y.h * y.w);
        const float *xp = in + nc * x.d * x.h * x.w;
        Span s = pool_span(&win, dimsin, o);
        out[i] = method == POOL_MAX ? xp[pool_argmax(xp, &s, dimsin)] : pool_average(xp, &s, dimsin);
    }
}

/* The outputs whose windows hold input position i along one axis: [first, last). */
__device__ static inline void outputs_covering(int i, int kernel, int stride, int pad, int pooled, int *first, int *last)
{
    *first = i + pad < kernel ? 0 : (i + pad - kernel) / stride + 1;
    *last = min((i + pad) / stride + 1, pooled);
}

__global__ static void pool_backward_kernel(Window win, PoolMethod method, int accumulate, Dims x, Dims y,
                                            const float *in, const float *dy, float *dx)
{
    size_t count = (size_t)x.n * x.c * x.d * x.h * x.w, xs = (size_t)x.d * x.h * x.w, ys = (size_t)y.d * y.h * y.w;
    FOR_EACH_INDEX(i, count) {
        int p[3] = {(int)(i / ((size_t)x.h * x.w) % x.d), (int)(i / x.w % x.h), (int)(i % x.w)};
        int dimsin[3] = {x.d, x.h, x.w}, pooled[3] = {y.d, y.h, y.w}, first[3], last[3];
        size_t nc = i / xs, self = i % xs;
        for (int a = 0; a < 3; a++)
            outputs_covering(p[a], win.kernel[a], win.stride[a], win.pad[a], pooled[a], &first[a], &last[a]);
        const float *xp = in + nc * xs, *dyp = dy + nc * ys;
        float g = 0;
        int o[3];
        for (o[0] = first[0]; o[0] < last[0]; o[0]++)
            for (o[1] = first[1]; o[1] < last[1]; o[1]++)
                for (o[2] = first[2]; o[2] < last[2]; o[2]++) {
                    Span s = pool_span(&win, dimsin, o);
                    float grad = dyp[((size_t)o[0] * y.h + o[1]) * y.w + o[2]];
                    if (method == POOL_MAX) {
                        if (pool_argmax(xp, &s, dimsin) == self) g += grad;
                    } else if (p[0] >= s.start[0] && p[0] < s.end[0] && p[1] >= s.start[1] && p[1] < s.end[1] &&
                               p[2] >= s.start[2] && p[2] < s.end[2]) {
                        g += grad / s.size;
                    }
                }
        dx[i] = store(dx[i], g, accumulate);
    }
}

void gpu_pool_forward(const Layer *l, const Tensor *x, Tensor *y, cudaStream_t stream)
{
    pool_forward_kernel<<<blocks_for(tensor_count(y)), THREADS, 0, stream>>>(l->p.pool.win, l->p.pool.method, dims(x),
                                                                            dims(y), x->data, y->data);
}

void gpu_pool_backward(const Layer *l, Tensor *x, const Tensor *y, cudaStream_t stream)
{
    if (!x->diff) return;
    pool_backward_kernel<<<blocks_for(tensor_count(x)), THREADS, 0, stream>>>(
        l->p.pool.win, l->p.pool.method, l->accumulate[0], dims(x), dims(y), x->data, y->diff, x->diff);
}

/* ---- LRN: the window sums of cpu_lrn.c, one thread per element ---- */

struct LrnParams {
    LrnRegion region;
    int radius;
    float alpha, beta, k; /* alpha already divided by the window size */
};

/* Sum of term(j) over the elements j of the window around element i. */
template <typename Term> __device__ static float window_sum(const LrnParams &p, Dims t, size_t i, Term term)
{
    int pos[4] = {(int)(i / ((size_t)t.d * t.h * t.w) % t.c), (int)(i / ((size_t)t.h * t.w) % t.d),
                  (int)(i / t.w % t.h), (int)(i % t.w)};
    int dim[4] = {t.c, t.d, t.h, t.w}, lo[4], hi[4];
    size_t n = i / ((size_t)t.c * t.d * t.h * t.w);
    for (int axis = 0; axis < 4; axis++) {
        int spread = p.region == LRN_ACROSS_CHANNELS ? axis == 0 : (axis >= (t.d > 1 ? 1 : 2));
        lo[axis] = max(pos[axis] - (spread ? p.radius : 0), 0);
        hi[axis] = min(pos[axis] + (spread ? p.radius : 0), dim[axis] - 1);
    }
    float sum = 0;
    for (int c = lo[0]; c <= hi[0]; c++)
        for (int d = lo[1]; d <= hi[1]; d++)
            for (int h = lo[2]; h <= hi[2]; h++)
                for (int w = lo[3]; w <= hi[3]; w++) sum += term(((((size_t)n * t.c + c) * t.d + d) * t.h + h) * t.w + w);
    return sum;
}

__global__ static void lrn_forward_kernel(LrnParams p, Dims t, const float *x, float *scale, float *y)
{
    FOR_EACH_INDEX(i, (size_t)t.n * t.c * t.d * t.h * t.w) {
        float s = p.k + p.alpha * window_sum(p, t, i, [=](size_t j) { return x[j] * x[j]; });
        scale[i] = s;
        y[i] = x[i] * powf(s, -p.beta);
    }
}

/* dx = dy s^-beta - 2 alpha beta x * sum over the window of dy y / s */
__global__ static void lrn_backward_kernel(LrnParams p, Dims t, int accumulate, const float *x, const float *y,
                                           const float *dy, const float *scale, float *dx)
{
    FOR_EACH_INDEX(i, (size_t)t.n * t.c * t.d * t.h * t.w) {
        float ratios = window_sum(p, t, i, [=](size_t j) { return dy[j] * y[j] / scale[j]; });
        float g = dy[i] * powf(scale[i], -p.beta) - 2.0f * p.alpha * p.beta * x[i] * ratios;
        dx[i] = store(dx[i], g, accumulate);
    }
}

static LrnParams lrn_params(const Layer *l, const Tensor *x)
{
    int size = l->p.lrn.size;
    float divisor = l->p.lrn.region == LRN_ACROSS_CHANNELS ? size : x->d > 1 ? size * size * size : size * size;
    return LrnParams{l->p.lrn.region, (size - 1) / 2, l->p.lrn.alpha / divisor, l->p.lrn.beta, l->p.lrn.k};
}

void gpu_lrn_forward(Layer *l, const Tensor *x, Tensor *y, cudaStream_t stream)
{
    lrn_forward_kernel<<<blocks_for(tensor_count(x)), THREADS, 0, stream>>>(lrn_params(l, x), dims(x), x->data,
                                                                            l->aux.data, y->data);
}

void gpu_lrn_backward(const Layer *l, Tensor *x, const Tensor *y, cudaStream_t stream)
{
    if (!x->diff) return;
    lrn_backward_kernel<<<blocks_for(tensor_count(x)), THREADS, 0, stream>>>(
        lrn_params(l, x), dims(x), l->accumulate[0], x->data, y->data, y->diff, l->aux.data, x->diff);
}

/* ---- element-wise layers ---- */

__global__ static void relu_forward_kernel(size_t count, float slope, const float *x, float *y)
{
    FOR_EACH_INDEX(i, count) y[i] = x[i] > 0 ? x[i] : slope * x[i];
}

__global__ static void relu_backward_kernel(size_t count, float slope, int accumulate, const float *y,
                                            const float *dy, float *dx)
{
    FOR_EACH_INDEX(i, count) dx[i] = store(dx[i], y[i] > 0 ? dy[i] : slope * dy[i], accumulate);
}

void gpu_relu_forward(const Layer *l, const Tensor *x, Tensor *y, cudaStream_t stream)
{
    size_t n = tensor_count(x);
    relu_forward_kernel<<<blocks_for(n), THREADS, 0, stream>>>(n, l->p.relu.negative_slope, x->data, y->data);
}

void gpu_relu_backward(const Layer *l, Tensor *x, const Tensor *y, cudaStream_t stream)
{
    if (!x->diff) return;
    size_t n = tensor_count(x);
    relu_backward_kernel<<<blocks_for(n), THREADS, 0, stream>>>(n, l->p.relu.negative_slope, l->accumulate[0],
                                                                y->data, y->diff, x->diff);
}

__device__ static float dropout_gain(float ratio, uint64_t seed, long iter, int index, size_t i)
{
    return rng_hash_uniform(seed, (uint64_t)iter, (uint64_t)index, i) >= ratio ? 1.0f / (1.0f - ratio) : 0.0f;
}

__global__ static void dropout_kernel(size_t count, float ratio, uint64_t seed, long iter, int index, int accumulate,
                                      const float *x, float *y)
{
    FOR_EACH_INDEX(i, count) y[i] = store(y[i], x[i] * dropout_gain(ratio, seed, iter, index, i), accumulate);
}

void gpu_dropout_forward(const Layer *l, uint64_t seed, long iter, int index, const Tensor *x, Tensor *y,
                         cudaStream_t stream)
{
    size_t n = tensor_count(x);
    dropout_kernel<<<blocks_for(n), THREADS, 0, stream>>>(n, l->p.dropout.ratio, seed, iter, index, 0, x->data, y->data);
}

void gpu_dropout_backward(const Layer *l, uint64_t seed, long iter, int index, Tensor *x, const Tensor *y,
                          cudaStream_t stream)
{
    if (!x->diff) return;
    size_t n = tensor_count(x);
    dropout_kernel<<<blocks_for(n), THREADS, 0, stream>>>(n, l->p.dropout.ratio, seed, iter, index, l->accumulate[0],
                                                          y->diff, x->diff);
}

/* One thread per element of the concatenation; backward writes each part. */
__global__ static void concat_kernel(int n, size_t as, size_t bs, float *a, float *b, float *y, int backward,
                                     int acc_a, int acc_b)
{
    FOR_EACH_INDEX(i, (size_t)n * (as + bs)) {
        size_t item = i / (as + bs), r = i % (as + bs);
        float *part = r < as ? (a ? a + item * as + r : nullptr) : (b ? b + item * bs + r - as : nullptr);
        if (!backward) y[i] = *part;
        else if (part) *part = store(*part, y[i], r < as ? acc_a : acc_b);
    }
}

void gpu_concat_forward(const Tensor *a, const Tensor *b, Tensor *y, cudaStream_t stream)
{
    concat_kernel<<<blocks_for(tensor_count(y)), THREADS, 0, stream>>>(y->n, tensor_sample(a), tensor_sample(b),
                                                                       a->data, b->data, y->data, 0, 0, 0);
}

void gpu_concat_backward(const Layer *l, Tensor *a, Tensor *b, const Tensor *y, cudaStream_t stream)
{
    concat_kernel<<<blocks_for(tensor_count(y)), THREADS, 0, stream>>>(
        y->n, tensor_sample(a), tensor_sample(b), a->diff, b->diff, y->diff, 1, l->accumulate[0], l->accumulate[1]);
}

/* ---- losses ---- */

#define REDUCE_THREADS 1024

/* Sum over threads of one block, in a fixed order. */
__device__ static float block_sum(float v)
{
    __shared__ float partial[REDUCE_THREADS];
    partial[threadIdx.x] = v;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    float total = partial[0];
    __syncthreads();
    return total;
}

/* One block: loss = mean over positions of -log p[label]. */
__global__ static void nll_kernel(int n, int classes, size_t spatial, const float *prob, const float *label, float *loss)
{
    size_t positions = (size_t)n * spatial;
    float sum = 0;
    for (size_t i = threadIdx.x; i < positions; i += blockDim.x) {
        size_t item = i / spatial, s = i % spatial;
        int k = (int)label[i];
        sum -= logf(fmaxf(prob[(item * classes + k) * spatial + s], FLT_MIN));
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0) *loss = sum / positions;
}

__global__ static void softmax_loss_backward_kernel(int n, int classes, size_t spatial, float scale, int accumulate,
                                                    const float *prob, const float *label, float *dx)
{
    FOR_EACH_INDEX(i, (size_t)n * classes * spatial) {
        size_t item = i / (classes * spatial), c = i / spatial % classes, s = i % spatial;
        float g = (prob[i] - ((size_t)label[item * spatial + s] == c)) * scale;
        dx[i] = store(dx[i], g, accumulate);
    }
}

void gpu_softmax_loss_forward(Layer *l, const Tensor *label, Tensor *y, cudaStream_t stream)
{
    const Tensor *p = &l->aux;
    nll_kernel<<<1, REDUCE_THREADS, 0, stream>>>(p->n, p->c, tensor_spatial(p), p->data, label->data, y->data);
}

void gpu_softmax_loss_backward(const Layer *l, Tensor *x, const Tensor *label, cudaStream_t stream)
{
    const Tensor *p = &l->aux;
    float scale = l->loss_weight / (p->n * tensor_spatial(p));
    softmax_loss_backward_kernel<<<blocks_for(tensor_count(p)), THREADS, 0, stream>>>(
        p->n, p->c, tensor_spatial(p), scale, l->accumulate[0], p->data, label->data, x->diff);
}

/* Block k: sums[k] = I_k, sums[classes + k] = S_k (see cpu_loss.c). */
__global__ static void dice_sums_kernel(int n, int classes, size_t spatial, const float *prob, const float *label,
                                        float *sums)
{
    int k = blockIdx.x;
    float inter = 0, size = 0;
    for (size_t i = threadIdx.x; i < (size_t)n * spatial; i += blockDim.x) {
        size_t item = i / spatial, s = i % spatial;
        float p = prob[(item * classes + k) * spatial + s];
        float truth = (int)label[i] == k;
        inter += p * truth;
        size += p + truth;
    }
    inter = block_sum(inter);
    size = block_sum(size);
    if (threadIdx.x == 0) {
        sums[k] = inter;
        sums[classes + k] = size;
    }
}

__global__ static void dice_loss_kernel(int classes, const float *sums, float *loss)
{
    float dice = 0;
    for (int k = 0; k < classes; k++) dice += (2 * sums[k] + 1) / (sums[classes + k] + 1);
    *loss = 1 - dice / classes;
}

__global__ static void dice_backward_kernel(int n, int classes, size_t spatial, float scale, int accumulate,
                                            const float *prob, const float *label, const float *sums, float *dx)
{
    FOR_EACH_INDEX(i, (size_t)n * spatial) {
        size_t item = i / spatial, s = i % spatial;
        int truth = (int)label[i];
        float dp[64], dot = 0;
        for (int k = 0; k < classes; k++) {
            float u = sums[classes + k] + 1;
            dp[k] = -scale * (2.0f * (truth == k) * u - (2 * sums[k] + 1)) / (u * u);
            dot += prob[(item * classes + k) * spatial + s] * dp[k];
        }
        for (int c = 0; c < classes; c++) {
            size_t j = (item * classes + c) * spatial + s;
            dx[j] = store(dx[j], prob[j] * (dp[c] - dot), accumulate);
        }
    }
}

void gpu_dice_loss_forward(Layer *l, const Tensor *label, Tensor *y, cudaStream_t stream)
{
    const Tensor *p = &l->aux;
    dice_sums_kernel<<<p->c, REDUCE_THREADS, 0, stream>>>(p->n, p->c, tensor_spatial(p), p->data, label->data, p->diff);
    dice_loss_kernel<<<1, 1, 0, stream>>>(p->c, p->diff, y->data);
}

void gpu_dice_loss_backward(const Layer *l, Tensor *x, const Tensor *label, cudaStream_t stream)
{
    const Tensor *p = &l->aux;
    dice_backward_kernel<<<blocks_for(p->n * tensor_spatial(p)), THREADS, 0, stream>>>(
        p->n, p->c, tensor_spatial(p), l->loss_weight / p->c, l->accumulate[0], p->data, label->data, p->diff, x->diff);
}

/* ---- helpers of the backend ---- */

__global__ static void broadcast_bias_kernel(float *y, const float *bias, int n, int c, size_t spatial)
{
    FOR_EACH_INDEX(i, (size_t)n * c * spatial) y[i] = bias[i / spatial % c];
}

void gpu_broadcast_bias(float *y, const float *bias, int n, int c, size_t spatial, cudaStream_t stream)
{
    broadcast_bias_kernel<<<blocks_for((size_t)n * c * spatial), THREADS, 0, stream>>>(y, bias, n, c, spatial);
}

__global__ static void channel_sum_kernel(float *sum, const float *x, int n, int c, size_t spatial)
{
    int channel = blockIdx.x;
    float v = 0;
    for (size_t i = threadIdx.x; i < (size_t)n * spatial; i += blockDim.x)
        v += x[((i / spatial) * c + channel) * spatial + i % spatial];
    v = block_sum(v);
    if (threadIdx.x == 0) sum[channel] = v;
}

void gpu_channel_sum(float *sum, const float *x, int n, int c, size_t spatial, cudaStream_t stream)
{
    channel_sum_kernel<<<c, REDUCE_THREADS, 0, stream>>>(sum, x, n, c, spatial);
}

__global__ static void gather_kernel(float *dst, const uint8_t *src, size_t item_size, long first, int batch,
                                     long count, float offset, float scale)
{
    FOR_EACH_INDEX(i, (size_t)batch * item_size) {
        size_t b = i / item_size;
        dst[i] = (src[(size_t)((first + (long)b) % count) * item_size + i % item_size] - offset) * scale;
    }
}

void gpu_gather(float *dst, const uint8_t *src, size_t item_size, long first, int batch, long count, float offset,
                float scale, cudaStream_t stream)
{
    gather_kernel<<<blocks_for((size_t)batch * item_size), THREADS, 0, stream>>>(dst, src, item_size, first, batch,
                                                                                  count, offset, scale);
}

__global__ static void sgd_kernel(float *w, const float *g, float *h, size_t count, float lr, float momentum,
                                  float decay)
{
    FOR_EACH_INDEX(i, count) {
        float v = momentum * h[i] + lr * (g[i] + decay * w[i]);
        h[i] = v;
        w[i] -= v;
    }
}

void gpu_sgd_update(float *w, const float *g, float *h, size_t count, float lr, float momentum, float decay,
                    cudaStream_t stream)
{
    sgd_kernel<<<blocks_for(count), THREADS, 0, stream>>>(w, g, h, count, lr, momentum, decay);
}
