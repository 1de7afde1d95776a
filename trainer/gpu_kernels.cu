#include "trainer/fast_div.h"
#include "trainer/gpu_kernels.h"
#include "trainer/pool_window.h"
#include "trainer/rng.h"

#include <stdio.h>
#include <stdlib.h>

#define THREADS 256

static unsigned blocks_for(size_t count)
{
    size_t b = (count + THREADS - 1) / THREADS;
    return (unsigned)(b < 65535 * 16 ? (b ? b : 1) : 65535 * 16);
}

/* A launch's own errors (a bad configuration, no code for this GPU, a launch that liblms
 * refuses for want of memory) are not returned by the <<<>>> statement but kept for
 * cudaGetLastError: read after every launch, which does not wait for the kernel. */
#define LAUNCH(kernel, blocks, threads, shared, stream, ...)                                                 \
    do {                                                                                                     \
        kernel<<<blocks, threads, shared, stream>>>(__VA_ARGS__);                                            \
        check_launch(#kernel, __FILE__, __LINE__);                                                           \
    } while (0)

static void check_launch(const char *kernel, const char *file, int line)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return;
    fprintf(stderr, "lms-trainer: CUDA error %s launching %s at %s:%d\n", cudaGetErrorString(e), kernel, file, line);
    exit(1);
}

/* Index arithmetic is most of what the element-wise kernels do. Where every index of a launch
 * fits 31 bits, they run on uint32_t and divide by a FastDiv (fast_div.h); only tensors of 2^31
 * elements or more pay for size_t and hardware division. Each kernel is a template on the index
 * type I; by_index picks it. */
template <typename I> struct Div;

template <> struct Div<uint32_t> {
    FastDiv f;
    Div() = default;
    Div(size_t divisor) : f(fast_div((uint32_t)divisor)) {}
    __device__ uint32_t operator()(uint32_t n) const { return fast_quotient(f, n); }
    __device__ uint32_t divisor() const { return f.divisor; }
};

template <> struct Div<size_t> {
    size_t d;
    Div() = default;
    Div(size_t divisor) : d(divisor) {}
    __device__ size_t operator()(size_t n) const { return n / d; }
    __device__ size_t divisor() const { return d; }
};

/* n / div, leaving n % div in *rest. */
template <typename I> __device__ static inline I divide(I n, const Div<I> &div, I *rest)
{
    I q = div(n);
    *rest = n - q * div.divisor();
    return q;
}

/* Calls launch(I()) with the index type that the largest index of the launch, below `bound`,
 * needs. */
template <typename Launch> static void by_index(size_t bound, Launch launch)
{
    if (bound <= INT32_MAX) launch(uint32_t());
    else launch(size_t());
}

#define FOR_EACH_INDEX(I, i, count) \
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < (count); i += (I)gridDim.x * blockDim.x)

__device__ static inline float store(float old, float value, int accumulate)
{
    return accumulate ? old + value : value;
}

/* ---- pooling: one thread per output (forward) or per input (backward, gathering) ---- */

/* The window and the shapes of one channel, with dividers that take apart an index of the
 * tensor the threads own into its channel (n * c + c) and position. */
template <typename I> struct PoolArgs {
    Window win;
    int in[3], out[3]; /* d, h, w of x and of y */
    Div<I> w, h, d;
};

template <typename I> static PoolArgs<I> pool_args(const Layer *l, const Tensor *x, const Tensor *y, const Tensor *own)
{
    return PoolArgs<I>{l->p.pool.win, {x->d, x->h, x->w}, {y->d, y->h, y->w}, Div<I>(own->w), Div<I>(own->h),
                       Div<I>(own->d)};
}

/* Element i of a tensor of the shape the dividers describe: its channel, and pos = d, h, w. */
template <typename I> __device__ static I channel_position(const PoolArgs<I> &a, I i, int pos[3])
{
    I r;
    i = divide(i, a.w, &r);
    pos[2] = (int)r;
    i = divide(i, a.h, &r);
    pos[1] = (int)r;
    i = divide(i, a.d, &r);
    pos[0] = (int)r;
    return i;
}

/* argmax: max pooling's winners, int32 within the channel; NULL for average pooling. */
template <typename I>
__global__ static void pool_forward_kernel(PoolArgs<I> a, I count, const float *x, float *y, int32_t *argmax)
{
    I xs = (I)a.in[0] * a.in[1] * a.in[2];
    FOR_EACH_INDEX(I, i, count) {
        int o[3];
        const float *xp = x + channel_position(a, i, o) * xs;
        Span s = pool_span(&a.win, a.in, o);
        if (argmax) y[i] = xp[argmax[i] = pool_argmax(xp, &s, a.in)];
        else y[i] = pool_average(xp, &s, a.in);
    }
}

/* The outputs whose windows hold input position i along one axis: [first, last). */
__device__ static inline void outputs_covering(int i, int kernel, int stride, int pad, int pooled, int *first,
                                               int *last)
{
    *first = i + pad < kernel ? 0 : (i + pad - kernel) / stride + 1;
    *last = min((i + pad) / stride + 1, pooled);
}

/* Each input gathers the gradients of the windows that hold it: of those it won, for max
 * pooling (argmax != NULL), or a share of each, for average pooling. No atomics: deterministic. */
template <typename I>
__global__ static void pool_backward_kernel(PoolArgs<I> a, I count, int accumulate, const int32_t *argmax,
                                            const float *dy, float *dx)
{
    I ys = (I)a.out[0] * a.out[1] * a.out[2];
    FOR_EACH_INDEX(I, i, count) {
        int p[3], first[3], last[3];
        I nc = channel_position(a, i, p);
        int32_t self = (p[0] * a.in[1] + p[1]) * a.in[2] + p[2];
        for (int ax = 0; ax < 3; ax++)
            outputs_covering(p[ax], a.win.kernel[ax], a.win.stride[ax], a.win.pad[ax], a.out[ax], &first[ax],
                             &last[ax]);
        const float *dyp = dy + nc * ys;
        const int32_t *won = argmax ? argmax + nc * ys : nullptr;
        float g = 0;
        int o[3];
        for (o[0] = first[0]; o[0] < last[0]; o[0]++)
            for (o[1] = first[1]; o[1] < last[1]; o[1]++)
                for (o[2] = first[2]; o[2] < last[2]; o[2]++) {
                    int32_t at = (o[0] * a.out[1] + o[1]) * a.out[2] + o[2];
                    if (!won) g += dyp[at] / pool_span(&a.win, a.in, o).size;
                    else if (won[at] == self) g += dyp[at];
                }
        dx[i] = store(dx[i], g, accumulate);
    }
}

static int32_t *argmax_of(const Layer *l)
{
    return l->p.pool.method == POOL_MAX ? (int32_t *)l->aux.data : nullptr;
}

void gpu_pool_forward(const Layer *l, const Tensor *x, Tensor *y, cudaStream_t stream)
{
    size_t n = tensor_count(y), m = tensor_count(x);
    by_index(n > m ? n : m, [&](auto index) {
        using I = decltype(index);
        LAUNCH(pool_forward_kernel<I>, blocks_for(n), THREADS, 0, stream, pool_args<I>(l, x, y, y), (I)n, x->data,
               y->data, argmax_of(l));
    });
}

void gpu_pool_backward(const Layer *l, Tensor *x, const Tensor *y, cudaStream_t stream)
{
    if (!x->diff) return;
    size_t n = tensor_count(x);
    by_index(n, [&](auto index) {
        using I = decltype(index);
        LAUNCH(pool_backward_kernel<I>, blocks_for(n), THREADS, 0, stream, pool_args<I>(l, x, y, x), (I)n,
               l->accumulate[0], argmax_of(l), y->diff, x->diff);
    });
}

/* ---- LRN: cpu_lrn.c's window sums, by tiles ----
 * A block owns a box of one item's elements, tile[a] along each axis (c, d, h, w), and first
 * puts the term of every element of the box and of its halo (the window's reach along the
 * axes it spreads over; zero outside the tensor, which is the reference's clipping) into
 * shared memory. Each term is computed and read from memory about once, rather than once for
 * every window that holds it: forward's x^2, and backward's dy * y / scale, as cpu_lrn.c
 * computes it once per element. */

#define LRN_MAX_SHARED (48 * 1024)

struct LrnArgs {
    int dim[4];                /* c, d, h, w of one item */
    int tile[4], tile_log2[4]; /* the box: powers of two, at most THREADS in all */
    int halo[4];               /* the window's radius along the axes it spreads over, else 0 */
    int ext[4];                /* tile + 2 halo: the box as it lies in shared memory */
    int boxes[4];              /* boxes along each axis */
    Div<uint32_t> ext_w, ext_h, ext_d;
    int items;
    float alpha, beta, k; /* alpha already divided by the window's size */
};

static LrnArgs lrn_args(const Layer *l, const Tensor *x)
{
    LrnArgs a = {};
    int size = l->p.lrn.size, across = l->p.lrn.region == LRN_ACROSS_CHANNELS;
    int dims[4] = {x->c, x->d, x->h, x->w};
    int spread[4] = {across, !across && x->d > 1, !across, !across};
    /* Grow the box along the spread axes first, innermost first, so that the halo is small
     * beside it; then along the others. */
    for (int ax = 0; ax < 4; ax++) a.tile[ax] = 1;
    int threads = 1;
    for (int pass = 0; pass < 2; pass++)
        for (int ax = 3; ax >= 0; ax--) {
            if (spread[ax] != !pass) continue;
            while (threads < THREADS && a.tile[ax] < dims[ax] && a.tile[ax] < 32) {
                a.tile[ax] *= 2;
                a.tile_log2[ax]++;
                threads *= 2;
            }
        }
    for (int ax = 0; ax < 4; ax++) {
        a.dim[ax] = dims[ax];
        a.halo[ax] = spread[ax] ? (size - 1) / 2 : 0;
        a.ext[ax] = a.tile[ax] + 2 * a.halo[ax];
        a.boxes[ax] = (dims[ax] + a.tile[ax] - 1) / a.tile[ax];
    }
    a.ext_w = Div<uint32_t>(a.ext[3]);
    a.ext_h = Div<uint32_t>(a.ext[2]);
    a.ext_d = Div<uint32_t>(a.ext[1]);
    a.items = x->n;
    float divisor = across ? size : x->d > 1 ? size * size * size : size * size;
    a.alpha = l->p.lrn.alpha / divisor;
    a.beta = l->p.lrn.beta;
    a.k = l->p.lrn.k;
    return a;
}

static size_t lrn_shared_bytes(const LrnArgs &a)
{
    return (size_t)a.ext[0] * a.ext[1] * a.ext[2] * a.ext[3] * sizeof(float);
}

/* For every box: fills the shared tile with term(j) (j: an element's index in the tensor), then
 * calls out(i, sum of the terms over the window of element i) for each element of the box. */
template <typename I, typename Term, typename Out>
__device__ static void lrn_boxes(const LrnArgs &a, Term term, Out out)
{
    extern __shared__ float tile[];
    const int *dim = a.dim, *ext = a.ext;
    unsigned per_item = (unsigned)a.boxes[0] * a.boxes[1] * a.boxes[2] * a.boxes[3];
    unsigned filled = (unsigned)ext[0] * ext[1] * ext[2] * ext[3];
    int mine[4]; /* this thread's place in the box */
    for (int ax = 3, t = threadIdx.x; ax >= 0; t >>= a.tile_log2[ax], ax--) mine[ax] = t & (a.tile[ax] - 1);
    for (size_t box = blockIdx.x; box < (size_t)a.items * per_item; box += gridDim.x) {
        I item = (I)(box / per_item);
        int origin[4];
        for (int ax = 3, b = (int)(box % per_item); ax >= 0; b /= a.boxes[ax], ax--)
            origin[ax] = b % a.boxes[ax] * a.tile[ax] - a.halo[ax];
        __syncthreads(); /* the previous box's sums are done with the tile */
        for (unsigned s = threadIdx.x; s < filled; s += blockDim.x) {
            int at[4];
            uint32_t r, q = divide(s, a.ext_w, &r);
            at[3] = origin[3] + (int)r;
            q = divide(q, a.ext_h, &r);
            at[2] = origin[2] + (int)r;
            q = divide(q, a.ext_d, &r);
            at[1] = origin[1] + (int)r;
            at[0] = origin[0] + (int)q;
            bool inside = true;
            for (int ax = 0; ax < 4; ax++) inside &= at[ax] >= 0 && at[ax] < dim[ax];
            tile[s] = inside ? term((((item * dim[0] + at[0]) * dim[1] + at[1]) * dim[2] + at[2]) * (I)dim[3] + at[3])
                             : 0.0f;
        }
        __syncthreads();
        bool inside = threadIdx.x < (unsigned)(a.tile[0] * a.tile[1] * a.tile[2] * a.tile[3]);
        int at[4];
        for (int ax = 0; ax < 4; ax++) {
            at[ax] = origin[ax] + a.halo[ax] + mine[ax];
            inside &= at[ax] < dim[ax];
        }
        if (!inside) continue;
        float sum = 0;
        for (int c = 0; c <= 2 * a.halo[0]; c++)
            for (int d = 0; d <= 2 * a.halo[1]; d++)
                for (int h = 0; h <= 2 * a.halo[2]; h++) {
                    const float *row =
                        tile + (((mine[0] + c) * ext[1] + mine[1] + d) * ext[2] + mine[2] + h) * ext[3] + mine[3];
                    for (int w = 0; w <= 2 * a.halo[3]; w++) sum += row[w];
                }
        out((((item * dim[0] + at[0]) * dim[1] + at[1]) * dim[2] + at[2]) * (I)dim[3] + at[3], sum);
    }
}

template <typename I> __global__ static void lrn_forward_kernel(LrnArgs a, const float *x, float *scale, float *y)
{
    lrn_boxes<I>(a, [=](I j) { return x[j] * x[j]; },
                 [=](I i, float sum) {
                     float s = a.k + a.alpha * sum;
                     scale[i] = s;
                     y[i] = x[i] * powf(s, -a.beta);
                 });
}

/* dx = dy s^-beta - 2 alpha beta x * sum over the window of dy y / s */
template <typename I>
__global__ static void lrn_backward_kernel(LrnArgs a, int accumulate, const float *x, const float *y, const float *dy,
                                           const float *scale, float *dx)
{
    lrn_boxes<I>(a, [=](I j) { return dy[j] * y[j] / scale[j]; },
                 [=](I i, float sum) {
                     float g = dy[i] * powf(scale[i], -a.beta) - 2.0f * a.alpha * a.beta * x[i] * sum;
                     dx[i] = store(dx[i], g, accumulate);
                 });
}

/* One block per box, up to the grid's cap (the kernel loops over the rest). */
static unsigned lrn_blocks(const LrnArgs &a)
{
    size_t boxes = (size_t)a.items * a.boxes[0] * a.boxes[1] * a.boxes[2] * a.boxes[3];
    return (unsigned)(boxes < 65535 * 16 ? boxes : 65535 * 16);
}

static LrnArgs checked_lrn_args(const Layer *l, const Tensor *x)
{
    LrnArgs a = lrn_args(l, x);
    if (lrn_shared_bytes(a) > LRN_MAX_SHARED) {
        fprintf(stderr, "lms-trainer: LRN layer %s: a window of %d is too large for the kernel's tiles\n", l->name,
                l->p.lrn.size);
        exit(1);
    }
    return a;
}

void gpu_lrn_forward(Layer *l, const Tensor *x, Tensor *y, cudaStream_t stream)
{
    LrnArgs a = checked_lrn_args(l, x);
    by_index(tensor_count(x), [&](auto index) {
        using I = decltype(index);
        LAUNCH(lrn_forward_kernel<I>, lrn_blocks(a), THREADS, lrn_shared_bytes(a), stream, a, x->data, l->aux.data,
               y->data);
    });
}

void gpu_lrn_backward(const Layer *l, Tensor *x, const Tensor *y, cudaStream_t stream)
{
    if (!x->diff) return;
    LrnArgs a = checked_lrn_args(l, x);
    by_index(tensor_count(x), [&](auto index) {
        using I = decltype(index);
        LAUNCH(lrn_backward_kernel<I>, lrn_blocks(a), THREADS, lrn_shared_bytes(a), stream, a, l->accumulate[0],
               x->data, y->data, y->diff, l->aux.data, x->diff);
    });
}

/* ---- element-wise layers ---- */

template <typename I> __global__ static void relu_forward_kernel(I count, float slope, const float *x, float *y)
{
    FOR_EACH_INDEX(I, i, count) y[i] = x[i] > 0 ? x[i] : slope * x[i];
}

template <typename I>
__global__ static void relu_backward_kernel(I count, float slope, int accumulate, const float *y, const float *dy,
                                            float *dx)
{
    FOR_EACH_INDEX(I, i, count) dx[i] = store(dx[i], y[i] > 0 ? dy[i] : slope * dy[i], accumulate);
}

void gpu_relu_forward(const Layer *l, const Tensor *x, Tensor *y, cudaStream_t stream)
{
    size_t n = tensor_count(x);
    by_index(n, [&](auto index) {
        using I = decltype(index);
        LAUNCH(relu_forward_kernel<I>, blocks_for(n), THREADS, 0, stream, (I)n, l->p.relu.negative_slope, x->data,
               y->data);
    });
}

void gpu_relu_backward(const Layer *l, Tensor *x, const Tensor *y, cudaStream_t stream)
{
    if (!x->diff) return;
    size_t n = tensor_count(x);
    by_index(n, [&](auto index) {
        using I = decltype(index);
        LAUNCH(relu_backward_kernel<I>, blocks_for(n), THREADS, 0, stream, (I)n, l->p.relu.negative_slope,
               l->accumulate[0], y->data, y->diff, x->diff);
    });
}

__device__ static float dropout_gain(float ratio, uint64_t seed, long iter, int index, uint64_t i)
{
    return rng_hash_uniform(seed, (uint64_t)iter, (uint64_t)index, i) >= ratio ? 1.0f / (1.0f - ratio) : 0.0f;
}

template <typename I>
__global__ static void dropout_kernel(I count, float ratio, uint64_t seed, long iter, int index, int accumulate,
                                      const float *x, float *y)
{
    FOR_EACH_INDEX(I, i, count) y[i] = store(y[i], x[i] * dropout_gain(ratio, seed, iter, index, i), accumulate);
}

static void dropout(const Layer *l, uint64_t seed, long iter, int index, int accumulate, size_t n, const float *x,
                    float *y, cudaStream_t stream)
{
    by_index(n, [&](auto i) {
        using I = decltype(i);
        LAUNCH(dropout_kernel<I>, blocks_for(n), THREADS, 0, stream, (I)n, l->p.dropout.ratio, seed, iter, index,
               accumulate, x, y);
    });
}

void gpu_dropout_forward(const Layer *l, uint64_t seed, long iter, int index, const Tensor *x, Tensor *y,
                         cudaStream_t stream)
{
    dropout(l, seed, iter, index, 0, tensor_count(x), x->data, y->data, stream);
}

void gpu_dropout_backward(const Layer *l, uint64_t seed, long iter, int index, Tensor *x, const Tensor *y,
                          cudaStream_t stream)
{
    if (x->diff) dropout(l, seed, iter, index, l->accumulate[0], tensor_count(x), y->diff, x->diff, stream);
}

/* One thread per element of the concatenation; backward writes each part. */
template <typename I>
__global__ static void concat_kernel(I count, Div<I> item_size, I as, I bs, float *a, float *b, float *y,
                                     int backward, int acc_a, int acc_b)
{
    FOR_EACH_INDEX(I, i, count) {
        I r, item = divide(i, item_size, &r);
        float *part = r < as ? (a ? a + item * as + r : nullptr) : (b ? b + item * bs + r - as : nullptr);
        if (!backward) y[i] = *part;
        else if (part) *part = store(*part, y[i], r < as ? acc_a : acc_b);
    }
}

static void concat(const Tensor *a, const Tensor *b, const Tensor *y, float *pa, float *pb, float *py, int backward,
                   int acc_a, int acc_b, cudaStream_t stream)
{
    size_t n = tensor_count(y), as = tensor_sample(a), bs = tensor_sample(b);
    by_index(n, [&](auto i) {
        using I = decltype(i);
        LAUNCH(concat_kernel<I>, blocks_for(n), THREADS, 0, stream, (I)n, Div<I>(as + bs), (I)as, (I)bs, pa, pb, py,
               backward, acc_a, acc_b);
    });
}

void gpu_concat_forward(const Tensor *a, const Tensor *b, Tensor *y, cudaStream_t stream)
{
    concat(a, b, y, a->data, b->data, y->data, 0, 0, 0, stream);
}

void gpu_concat_backward(const Layer *l, Tensor *a, Tensor *b, const Tensor *y, cudaStream_t stream)
{
    concat(a, b, y, a->diff, b->diff, y->diff, 1, l->accumulate[0], l->accumulate[1], stream);
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
template <typename I>
__global__ static void nll_kernel(I positions, Div<I> spatial, I classes, const float *prob, const float *label,
                                  float *loss)
{
    float sum = 0;
    for (I i = threadIdx.x; i < positions; i += blockDim.x) {
        I s, item = divide(i, spatial, &s);
        I k = (I)label[i];
        sum -= logf(fmaxf(prob[(item * classes + k) * spatial.divisor() + s], FLT_MIN));
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0) *loss = sum / positions;
}

template <typename I>
__global__ static void softmax_loss_backward_kernel(I count, Div<I> spatial, Div<I> classes, float scale,
                                                    int accumulate, const float *prob, const float *label, float *dx)
{
    FOR_EACH_INDEX(I, i, count) {
        I s, c, item = divide(divide(i, spatial, &s), classes, &c);
        float g = (prob[i] - ((I)label[item * spatial.divisor() + s] == c)) * scale;
        dx[i] = store(dx[i], g, accumulate);
    }
}

void gpu_softmax_loss_forward(Layer *l, const Tensor *label, Tensor *y, cudaStream_t stream)
{
    const Tensor *p = &l->aux;
    size_t spatial = tensor_spatial(p);
    by_index(tensor_count(p), [&](auto i) {
        using I = decltype(i);
        LAUNCH(nll_kernel<I>, 1, REDUCE_THREADS, 0, stream, (I)(p->n * spatial), Div<I>(spatial), (I)p->c, p->data,
               label->data, y->data);
    });
}

void gpu_softmax_loss_backward(const Layer *l, Tensor *x, const Tensor *label, cudaStream_t stream)
{
    const Tensor *p = &l->aux;
    size_t n = tensor_count(p), spatial = tensor_spatial(p);
    float scale = l->loss_weight / (p->n * spatial);
    by_index(n, [&](auto i) {
        using I = decltype(i);
        LAUNCH(softmax_loss_backward_kernel<I>, blocks_for(n), THREADS, 0, stream, (I)n, Div<I>(spatial),
               Div<I>(p->c), scale, l->accumulate[0], p->data, label->data, x->diff);
    });
}

/* Block k: sums[k] = I_k, sums[classes + k] = S_k (see cpu_loss.c). */
template <typename I>
__global__ static void dice_sums_kernel(I positions, Div<I> spatial, int classes, const float *prob,
                                        const float *label, float *sums)
{
    int k = blockIdx.x;
    float inter = 0, size = 0;
    for (I i = threadIdx.x; i < positions; i += blockDim.x) {
        I s, item = divide(i, spatial, &s);
        float p = prob[(item * classes + k) * spatial.divisor() + s];
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

template <typename I>
__global__ static void dice_backward_kernel(I positions, Div<I> spatial, int classes, float scale, int accumulate,
                                            const float *prob, const float *label, const float *sums, float *dx)
{
    FOR_EACH_INDEX(I, i, positions) {
        I s, item = divide(i, spatial, &s);
        const float *p = prob + item * classes * spatial.divisor() + s;
        float *d = dx + item * classes * spatial.divisor() + s;
        int truth = (int)label[i];
        float dp[64], dot = 0;
        for (int k = 0; k < classes; k++) {
            float u = sums[classes + k] + 1;
            dp[k] = -scale * (2.0f * (truth == k) * u - (2 * sums[k] + 1)) / (u * u);
            dot += p[k * spatial.divisor()] * dp[k];
        }
        for (int c = 0; c < classes; c++) {
            I j = c * spatial.divisor();
            d[j] = store(d[j], p[j] * (dp[c] - dot), accumulate);
        }
    }
}

void gpu_dice_loss_forward(Layer *l, const Tensor *label, Tensor *y, cudaStream_t stream)
{
    const Tensor *p = &l->aux;
    size_t spatial = tensor_spatial(p);
    by_index(tensor_count(p), [&](auto i) {
        using I = decltype(i);
        LAUNCH(dice_sums_kernel<I>, p->c, REDUCE_THREADS, 0, stream, (I)(p->n * spatial), Div<I>(spatial), p->c,
               p->data, label->data, p->diff);
    });
    LAUNCH(dice_loss_kernel, 1, 1, 0, stream, p->c, p->diff, y->data);
}

void gpu_dice_loss_backward(const Layer *l, Tensor *x, const Tensor *label, cudaStream_t stream)
{
    const Tensor *p = &l->aux;
    size_t spatial = tensor_spatial(p), positions = p->n * spatial;
    by_index(tensor_count(p), [&](auto i) {
        using I = decltype(i);
        LAUNCH(dice_backward_kernel<I>, blocks_for(positions), THREADS, 0, stream, (I)positions, Div<I>(spatial),
               p->c, l->loss_weight / p->c, l->accumulate[0], p->data, label->data, p->diff, x->diff);
    });
}

/* ---- helpers of the backend ---- */

template <typename I>
__global__ static void broadcast_bias_kernel(I count, Div<I> spatial, Div<I> channels, float *y, const float *bias)
{
    FOR_EACH_INDEX(I, i, count) {
        I s, c;
        divide(divide(i, spatial, &s), channels, &c);
        y[i] = bias[c];
    }
}

void gpu_broadcast_bias(float *y, const float *bias, int n, int c, size_t spatial, cudaStream_t stream)
{
    size_t count = (size_t)n * c * spatial;
    by_index(count, [&](auto i) {
        using I = decltype(i);
        LAUNCH(broadcast_bias_kernel<I>, blocks_for(count), THREADS, 0, stream, (I)count, Div<I>(spatial),
               Div<I>(c), y, bias);
    });
}

template <typename I>
__global__ static void channel_sum_kernel(I positions, Div<I> spatial, int channels, float *sum, const float *x)
{
    int channel = blockIdx.x;
    float v = 0;
    for (I i = threadIdx.x; i < positions; i += blockDim.x) {
        I s, item = divide(i, spatial, &s);
        v += x[(item * channels + channel) * spatial.divisor() + s];
    }
    v = block_sum(v);
    if (threadIdx.x == 0) sum[channel] = v;
}

void gpu_channel_sum(float *sum, const float *x, int n, int c, size_t spatial, cudaStream_t stream)
{
    by_index((size_t)n * c * spatial, [&](auto i) {
        using I = decltype(i);
        LAUNCH(channel_sum_kernel<I>, c, REDUCE_THREADS, 0, stream, (I)(n * spatial), Div<I>(spatial), c, sum, x);
    });
}

/* dst[b][j] = (src[(start + b) % count][j] - offset) * scale, start = first % count. */
template <typename I>
__global__ static void gather_kernel(I total, Div<I> item_size, Div<I> count, I start, float *dst, const uint8_t *src,
                                     float offset, float scale)
{
    FOR_EACH_INDEX(I, i, total) {
        I j, item, b = divide(i, item_size, &j);
        divide(start + b, count, &item);
        dst[i] = (src[item * item_size.divisor() + j] - offset) * scale;
    }
}

void gpu_gather(float *dst, const uint8_t *src, size_t item_size, long first, int batch, long count, float offset,
                float scale, cudaStream_t stream)
{
    size_t total = (size_t)batch * item_size, start = (size_t)(first % count);
    size_t bound = total > (size_t)count * item_size ? total : (size_t)count * item_size;
    if (bound < start + batch) bound = start + batch;
    by_index(bound, [&](auto i) {
        using I = decltype(i);
        LAUNCH(gather_kernel<I>, blocks_for(total), THREADS, 0, stream, (I)total, Div<I>(item_size), Div<I>(count),
               (I)start, dst, src, offset, scale);
    });
}

template <typename I>
__global__ static void sgd_kernel(I count, float lr, float momentum, float decay, float *w, const float *g, float *h)
{
    FOR_EACH_INDEX(I, i, count) {
        float v = momentum * h[i] + lr * (g[i] + decay * w[i]);
        h[i] = v;
        w[i] -= v;
    }
}

void gpu_sgd_update(float *w, const float *g, float *h, size_t count, float lr, float momentum, float decay,
                    cudaStream_t stream)
{
    by_index(count, [&](auto i) {
        using I = decltype(i);
        LAUNCH(sgd_kernel<I>, blocks_for(count), THREADS, 0, stream, (I)count, lr, momentum, decay, w, g, h);
    });
}
