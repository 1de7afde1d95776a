/* The GPU backend (see gpu_backend.h). Convolutions, their biases and softmax are cuDNN's,
 * inner products cuBLAS's, the rest the kernels of gpu_kernels.cu. Everything runs on one
 * stream; the host waits only to download (the loss at display time, snapshots). */
#include "trainer/batch_pieces.h"
#include "trainer/gpu_backend.h"
#include "trainer/gpu_kernels.h"
#include "trainer/log.h"
#include "trainer/net.h"

#include <cublas_v2.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define cudaCheck(call) check_cuda((call), #call, __FILE__, __LINE__)
#define cudnnCheck(call) check_cudnn((call), #call, __FILE__, __LINE__)
#define cublasCheck(call) check_cublas((call), #call, __FILE__, __LINE__)

static void check_cuda(cudaError_t e, const char *what, const char *file, int line)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "lms-trainer: CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e), file, line, what);
    exit(1);
}

static void check_cudnn(cudnnStatus_t s, const char *what, const char *file, int line)
{
    if (s == CUDNN_STATUS_SUCCESS) return;
    fprintf(stderr, "lms-trainer: cuDNN error %s at %s:%d: %s\n", cudnnGetErrorString(s), file, line, what);
    exit(1);
}

static void check_cublas(cublasStatus_t s, const char *what, const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS) return;
    fprintf(stderr, "lms-trainer: cuBLAS error %s at %s:%d: %s\n", cublasGetStatusString(s), file, line, what);
    exit(1);
}

static struct {
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    cudaStream_t stream;
    GpuOptions opt;
    void *workspace; /* shared by every convolution: they run one at a time */
    size_t workspace_size;
} gpu;

/* ---- descriptors (prepare: no GPU needed) ---- */

/* One sub-batch shape of a convolution, in the convolution's own terms: for a transposed one
 * the roles swap (its forward is the convolution's backward data, and `in` is its top). Each
 * pass has its own convolution descriptor, which carries its algorithm's math type. */
typedef struct ConvShape {
    cudnnTensorDescriptor_t in, out;
    cudnnConvolutionDescriptor_t fwd_desc, bwd_data_desc, bwd_filter_desc;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
} ConvShape;

typedef struct ConvState {
    BatchPieces pieces;
    ConvShape shape[2]; /* whole pieces, and a shorter last one */
    cudnnTensorDescriptor_t bias;
    cudnnFilterDescriptor_t filter;
    size_t in_image, out_image; /* elements per image of in and out */
    int need_fwd, need_bwd_data; /* the passes that run, known at setup */
} ConvState;

typedef struct SoftmaxState {
    BatchPieces pieces;
    cudnnTensorDescriptor_t desc[2]; /* N x C x (D*H*W) x 1, for whole pieces and the last */
    size_t image;
} SoftmaxState;

/* Where prepare fails it says so rather than exiting: the caller reports, a test asserts. */
#define TRY(call)                                                                                            \
    do {                                                                                                     \
        cudnnStatus_t status_ = (call);                                                                      \
        if (status_ != CUDNN_STATUS_SUCCESS) {                                                               \
            snprintf(err, errlen, "layer %s: cuDNN refused %s: %s", l->name, #call, cudnnGetErrorString(status_)); \
            return -1;                                                                                       \
        }                                                                                                    \
    } while (0)

/* cuDNN wants tensors, filters and convolutions of one rank: 4-D for a net of images, 5-D for
 * one of volumes, whatever a tensor's own depth (unet3d's deepest level can be 1x1x1). Strides
 * are ints: callers have checked that an image holds fewer than 2^31 elements. */
static cudnnStatus_t set_tensor(cudnnTensorDescriptor_t desc, int deep, int n, const Tensor *t)
{
    if (!deep) return cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, t->c, t->h, t->w);
    int dim[5] = {n, t->c, t->d, t->h, t->w};
    int stride[5] = {(int)tensor_sample(t), (int)tensor_spatial(t), t->h * t->w, t->w, 1};
    return cudnnSetTensorNdDescriptor(desc, CUDNN_DATA_FLOAT, 5, dim, stride);
}

static cudnnMathType_t base_math(const GpuOptions *opt)
{
    return opt->strict_fp32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
}

static cudnnStatus_t set_conv_desc(cudnnConvolutionDescriptor_t desc, const Layer *l, int deep, cudnnMathType_t math)
{
    const Window *k = &l->p.conv.win;
    int dil[3] = {1, 1, 1};
    cudnnStatus_t s = !deep ? cudnnSetConvolution2dDescriptor(desc, k->pad[1], k->pad[2], k->stride[1], k->stride[2], 1,
                                                              1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)
                            : cudnnSetConvolutionNdDescriptor(desc, 3, k->pad, k->stride, dil, CUDNN_CROSS_CORRELATION,
                                                              CUDNN_DATA_FLOAT);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetConvolutionGroupCount(desc, l->p.conv.group);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetConvolutionMathType(desc, math);
    return s;
}

/* The pieces of a layer's batch, whose largest tensor holds per_image elements per image. */
static int cut_batch(const Layer *l, int batch, size_t per_image, const GpuOptions *opt, BatchPieces *p, char *err,
                     size_t errlen)
{
    if (!batch_pieces(batch, per_image, CUDNN_MAX_ELEMENTS, opt->max_images, p)) return 0;
    snprintf(err, errlen,
             "layer %s: one image's tensor holds %zu elements, and cuDNN's legacy API takes fewer than 2^31 "
             "(%zu) per tensor",
             l->name, per_image, CUDNN_MAX_ELEMENTS + 1);
    return -1;
}

static int prepare_conv_shape(ConvState *s, ConvShape *c, int n, const Layer *l, const Tensor *in,
                              const Tensor *out, int deep, const GpuOptions *opt, char *err, size_t errlen)
{
    TRY(cudnnCreateTensorDescriptor(&c->in));
    TRY(cudnnCreateTensorDescriptor(&c->out));
    TRY(cudnnCreateConvolutionDescriptor(&c->fwd_desc));
    TRY(cudnnCreateConvolutionDescriptor(&c->bwd_data_desc));
    TRY(cudnnCreateConvolutionDescriptor(&c->bwd_filter_desc));
    TRY(set_tensor(c->in, deep, n, in));
    TRY(set_tensor(c->out, deep, n, out));
    for (cudnnConvolutionDescriptor_t d : {c->fwd_desc, c->bwd_data_desc, c->bwd_filter_desc})
        TRY(set_conv_desc(d, l, deep, base_math(opt)));
    /* cuDNN's view of the output must be the net's: both from the same shapes and windows. */
    int rank = deep ? 5 : 4, got[5], want[5] = {n, out->c, out->d, out->h, out->w};
    if (!deep) want[2] = out->h, want[3] = out->w;
    TRY(cudnnGetConvolutionNdForwardOutputDim(c->fwd_desc, c->in, s->filter, rank, got));
    if (memcmp(got, want, rank * sizeof *got)) {
        snprintf(err, errlen, "layer %s: cuDNN computes another output shape than the net's", l->name);
        return -1;
    }
    return 0;
}

static int prepare_conv(const Net *net, Layer *l, const GpuOptions *opt, char *err, size_t errlen)
{
    ConvState *s = (ConvState *)calloc(1, sizeof *s);
    l->backend_state = s;
    int deconv = l->type == LAYER_DECONV, deep = net_is_volumetric(net);
    const Tensor *bottom = &net->tensors[l->bottom[0]], *top = &net->tensors[l->top];
    const Tensor *in = deconv ? top : bottom, *out = deconv ? bottom : top, *w = &l->weight.t;
    s->in_image = tensor_sample(in);
    s->out_image = tensor_sample(out);
    if (cut_batch(l, in->n, s->in_image > s->out_image ? s->in_image : s->out_image, opt, &s->pieces, err, errlen))
        return -1;
    TRY(cudnnCreateTensorDescriptor(&s->bias));
    TRY(cudnnCreateFilterDescriptor(&s->filter));
    Tensor bias = {1, top->c, 1, 1, 1, NULL, NULL};
    TRY(set_tensor(s->bias, deep, 1, &bias));
    int fdim[5] = {w->n, w->c, w->d, w->h, w->w};
    if (!deep) TRY(cudnnSetFilter4dDescriptor(s->filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, w->n, w->c, w->h, w->w));
    else TRY(cudnnSetFilterNdDescriptor(s->filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 5, fdim));
    for (int k = 0; k <= (s->pieces.last != s->pieces.size); k++)
        if (prepare_conv_shape(s, &s->shape[k], k ? s->pieces.last : s->pieces.size, l, in, out, deep, opt, err,
                               errlen))
            return -1;
    return 0;
}

static int prepare_softmax(const Net *net, Layer *l, const GpuOptions *opt, char *err, size_t errlen)
{
    (void)net;
    SoftmaxState *s = (SoftmaxState *)calloc(1, sizeof *s);
    l->backend_state = s;
    s->image = tensor_sample(&l->aux);
    if (cut_batch(l, l->aux.n, s->image, opt, &s->pieces, err, errlen)) return -1;
    for (int k = 0; k <= (s->pieces.last != s->pieces.size); k++) {
        TRY(cudnnCreateTensorDescriptor(&s->desc[k]));
        TRY(cudnnSetTensor4dDescriptor(s->desc[k], CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                       k ? s->pieces.last : s->pieces.size, l->aux.c, (int)tensor_spatial(&l->aux), 1));
    }
    return 0;
}

int gpu_backend_prepare(Net *net, const GpuOptions *opt, char *err, size_t errlen)
{
    for (Layer *l = net->layers; l < net->layers + net->nlayers; l++) {
        int failed = 0;
        switch (l->type) {
        case LAYER_CONV:
        case LAYER_DECONV: failed = prepare_conv(net, l, opt, err, errlen); break;
        case LAYER_SOFTMAX_LOSS:
        case LAYER_DICE_LOSS: failed = prepare_softmax(net, l, opt, err, errlen); break;
        default: break;
        }
        if (failed) return -1;
    }
    return 0;
}

static void destroy_tensor(cudnnTensorDescriptor_t d)
{
    if (d) cudnnCheck(cudnnDestroyTensorDescriptor(d));
}

static void destroy_conv_desc(cudnnConvolutionDescriptor_t d)
{
    if (d) cudnnCheck(cudnnDestroyConvolutionDescriptor(d));
}

void gpu_backend_teardown(Layer *l)
{
    if (!l->backend_state) return;
    if (l->type == LAYER_CONV || l->type == LAYER_DECONV) {
        ConvState *s = (ConvState *)l->backend_state;
        for (ConvShape *c = s->shape; c < s->shape + 2; c++) {
            destroy_tensor(c->in);
            destroy_tensor(c->out);
            destroy_conv_desc(c->fwd_desc);
            destroy_conv_desc(c->bwd_data_desc);
            destroy_conv_desc(c->bwd_filter_desc);
        }
        destroy_tensor(s->bias);
        if (s->filter) cudnnCheck(cudnnDestroyFilterDescriptor(s->filter));
    } else {
        SoftmaxState *s = (SoftmaxState *)l->backend_state;
        destroy_tensor(s->desc[0]);
        destroy_tensor(s->desc[1]);
    }
    free(l->backend_state);
    l->backend_state = NULL;
}

static int gpu_prepare(Net *net, char *err, size_t errlen)
{
    return gpu_backend_prepare(net, &gpu.opt, err, errlen);
}

/* ---- algorithms (setup: on the net's own buffers) ---- */

/* A convolution's buffers in its own terms: forward reads in and writes out; backward data
 * reads dout and writes din; backward filter reads in and dout and writes dw. */
typedef struct ConvBuffers {
    const float *in, *dout;
    float *out, *din, *dw;
} ConvBuffers;

static ConvBuffers conv_buffers(const Net *net, const Layer *l)
{
    const Tensor *x = &net->tensors[l->bottom[0]], *y = &net->tensors[l->top];
    if (l->type == LAYER_CONV) return ConvBuffers{x->data, y->diff, y->data, x->diff, l->weight.t.diff};
    return ConvBuffers{y->diff, x->data, x->diff, y->data, l->weight.t.diff};
}

/* The algorithm to use from a list sorted best first: the first that succeeded within the
 * workspace limit (and is deterministic, if asked). Returns its index or -1. */
template <typename Perf> static int pick(const Perf *perf, int count)
{
    for (int i = 0; i < count; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= gpu.opt.workspace_limit &&
            (!gpu.opt.deterministic || perf[i].determinism == CUDNN_DETERMINISTIC))
            return i;
    return -1;
}

/* Says why none of cuDNN's candidates for a pass was picked: each one's status, workspace and
 * determinism, which the workspace limit and --deterministic are weighed against. */
template <typename Perf>
static void explain_refusal(const Perf *perf, int count, const Layer *l, const char *pass, char *err, size_t errlen)
{
    int n = snprintf(err, errlen, "layer %s: %s: no cuDNN algorithm fits the %zu-byte workspace limit%s; cuDNN's "
                     "candidates:", l->name, pass, gpu.opt.workspace_limit,
                     gpu.opt.deterministic ? " and is deterministic" : "");
    for (int i = 0; i < count && n > 0 && (size_t)n < errlen; i++)
        n += snprintf(err + n, errlen - (size_t)n, " algo %d (%s, %zu bytes, %s)", (int)perf[i].algo,
                      cudnnGetErrorString(perf[i].status), perf[i].memory,
                      perf[i].determinism == CUDNN_DETERMINISTIC ? "deterministic" : "not deterministic");
    if (count == 0) snprintf(err + n, errlen - (size_t)n, " none");
}

/* What setup says of a convolution's algorithms: each pass's choice, and any faster one that the
 * workspace limit refused (a limit too low can cost several times the time on a GPU). */
typedef struct Choices {
    char chosen[320], refused[320];
    size_t chosen_len, refused_len;
} Choices;

static void append(char *text, size_t cap, size_t *len, const char *what, int algo, float ms, size_t bytes)
{
    if (*len >= cap) return;
    int n = ms >= 0 ? snprintf(text + *len, cap - *len, "%s%s %d (%.3f ms, %.0f MB)", *len ? ", " : "", what, algo,
                               (double)ms, (double)bytes / 1e6)
                    : snprintf(text + *len, cap - *len, "%s%s %d (%.0f MB)", *len ? ", " : "", what, algo,
                               (double)bytes / 1e6);
    if (n > 0) *len += (size_t)n;
}

/* Gives the pass the chosen algorithm with the math it was measured with (strict fp32 keeps
 * FMA math), raises *need to its workspace and notes the choice. */
template <typename Perf, typename Algo>
static int choose(const Perf *perf, int count, Algo *algo, cudnnConvolutionDescriptor_t desc, size_t *need,
                  Choices *says, const Layer *l, const char *pass, char *err, size_t errlen)
{
    int i = pick(perf, count);
    if (i < 0) {
        explain_refusal(perf, count, l, pass, err, errlen);
        return -1;
    }
    *algo = perf[i].algo;
    if (!gpu.opt.strict_fp32) cudnnCheck(cudnnSetConvolutionMathType(desc, perf[i].mathType));
    if (perf[i].memory > *need) *need = perf[i].memory;
    append(says->chosen, sizeof says->chosen, &says->chosen_len, pass, (int)perf[i].algo, perf[i].time,
           perf[i].memory);
    for (int j = 0; j < i; j++)
        if (perf[j].status == CUDNN_STATUS_SUCCESS && perf[j].memory > gpu.opt.workspace_limit &&
            (!gpu.opt.deterministic || perf[j].determinism == CUDNN_DETERMINISTIC)) {
            append(says->refused, sizeof says->refused, &says->refused_len, pass, (int)perf[j].algo, perf[j].time,
                   perf[j].memory);
            break;
        }
    return 0;
}

/* Timing by cudnnFind*Ex is fastest, on the net's own buffers (what it writes is overwritten
 * before it is read) and in the search workspace, so that the search itself allocates
 * nothing; but it can pick differently run by run, so deterministic runs take cuDNN's
 * heuristics, which depend on the shapes alone. */
static int choose_algorithms(ConvState *s, ConvShape *c, const ConvBuffers *b, const Layer *l, void *search,
                             size_t search_size, size_t *need, Choices *says, char *err, size_t errlen)
{
    const float *w = l->weight.t.data;
    int n = 0, failed = 0;
    if (s->need_fwd) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        if (gpu.opt.deterministic)
            cudnnCheck(cudnnGetConvolutionForwardAlgorithm_v7(gpu.cudnn, c->in, s->filter, c->fwd_desc, c->out,
                                                              CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
        else
            cudnnCheck(cudnnFindConvolutionForwardAlgorithmEx(gpu.cudnn, c->in, b->in, s->filter, w, c->fwd_desc,
                                                              c->out, b->out, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n,
                                                              perf, search, search_size));
        failed = choose(perf, n, &c->fwd, c->fwd_desc, need, says, l, "forward", err, errlen);
    }
    if (s->need_bwd_data) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        if (gpu.opt.deterministic)
            cudnnCheck(cudnnGetConvolutionBackwardDataAlgorithm_v7(gpu.cudnn, s->filter, c->out, c->bwd_data_desc,
                                                                   c->in, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n,
                                                                   perf));
        else
            cudnnCheck(cudnnFindConvolutionBackwardDataAlgorithmEx(
                gpu.cudnn, s->filter, w, c->out, b->dout, c->bwd_data_desc, c->in, b->din,
                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf, search, search_size));
        failed = failed || choose(perf, n, &c->bwd_data, c->bwd_data_desc, need, says, l, "backward data", err, errlen);
    }
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    if (gpu.opt.deterministic)
        cudnnCheck(cudnnGetConvolutionBackwardFilterAlgorithm_v7(gpu.cudnn, c->in, c->out, c->bwd_filter_desc,
                                                                 s->filter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                                 &n, perf));
    else
        cudnnCheck(cudnnFindConvolutionBackwardFilterAlgorithmEx(
            gpu.cudnn, c->in, b->in, c->out, b->dout, c->bwd_filter_desc, s->filter, b->dw,
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf, search, search_size));
    return failed || choose(perf, n, &c->bwd_filter, c->bwd_filter_desc, need, says, l, "backward filter", err,
                                 errlen)
               ? -1 : 0;
}

/* The search workspace: as much of the limit as the device has left (the net is allocated),
 * halving until it fits. Algorithms that need more than it are not timed. */
static void *search_workspace(size_t *size)
{
    void *p = NULL;
    for (*size = gpu.opt.deterministic ? 0 : gpu.opt.workspace_limit; *size; *size /= 2) {
        if (cudaMalloc(&p, *size) == cudaSuccess) return p;
        cudaGetLastError(); /* out of memory is not sticky */
    }
    return NULL;
}

/* Chooses every convolution's algorithms, then keeps one workspace of the size the chosen
 * ones need. */
static int gpu_setup(Net *net, char *err, size_t errlen)
{
    size_t search_size = 0, need = 0;
    void *search = NULL;
    int searching = 0, failed = 0;
    for (Layer *l = net->layers; l < net->layers + net->nlayers && !failed; l++) {
        if (l->type != LAYER_CONV && l->type != LAYER_DECONV) continue;
        if (!searching++) search = search_workspace(&search_size);
        ConvState *s = (ConvState *)l->backend_state;
        ConvBuffers b = conv_buffers(net, l);
        /* A convolution's forward always runs; its backward data only when the bottom has a
         * gradient (allocated by now). For a transposed convolution it is the other way round. */
        int deconv = l->type == LAYER_DECONV, bottom_diff = net->tensors[l->bottom[0]].diff != NULL;
        s->need_fwd = !deconv || bottom_diff;
        s->need_bwd_data = deconv || bottom_diff;
        Choices says = {};
        for (int k = 0; k <= (s->pieces.last != s->pieces.size) && !failed; k++)
            failed = choose_algorithms(s, &s->shape[k], &b, l, search, search_size, &need, &says, err, errlen);
        if (!failed)
            log_info("layer %s: cuDNN algorithms %s%s%s%s", l->name, says.chosen,
                     says.refused_len ? "; faster, above the workspace limit: " : "", says.refused,
                     says.refused_len ? " (--workspace-limit)" : "");
    }
    if (search) cudaCheck(cudaFree(search));
    if (failed) return -1;
    /* Said, because the search's workspace sets the run's peak and the kept one its steady
     * demand: a model of this backend's memory (the simulated GPU's) needs both. */
    log_info("cuDNN workspace: %zu bytes for the chosen algorithms (searched in %zu)", need, search_size);
    if (!need) return 0;
    if (cudaMalloc(&gpu.workspace, need) != cudaSuccess) {
        cudaGetLastError();
        gpu.workspace = NULL;
        snprintf(err, errlen, "out of GPU memory for the %zu-byte cuDNN workspace", need);
        return -1;
    }
    gpu.workspace_size = need;
    return 0;
}

/* ---- the passes ---- */

static const float one = 1.0f, zero = 0.0f;

/* The convolution's passes over piece `shape`, in its own terms (in -> out). */
static void conv_fwd(const ConvState *s, const ConvShape *c, const Layer *l, const float *in, float *out,
                     const float *beta)
{
    cudnnCheck(cudnnConvolutionForward(gpu.cudnn, &one, c->in, in, s->filter, l->weight.t.data, c->fwd_desc, c->fwd,
                                       gpu.workspace, gpu.workspace_size, beta, c->out, out));
}

static void conv_bwd_data(const ConvState *s, const ConvShape *c, const Layer *l, const float *dout, float *din,
                          const float *beta)
{
    cudnnCheck(cudnnConvolutionBackwardData(gpu.cudnn, &one, s->filter, l->weight.t.data, c->out, dout,
                                            c->bwd_data_desc, c->bwd_data, gpu.workspace, gpu.workspace_size, beta,
                                            c->in, din));
}

static void conv_bwd_filter(const ConvState *s, const ConvShape *c, Layer *l, const float *in, const float *dout,
                            const float *beta)
{
    cudnnCheck(cudnnConvolutionBackwardFilter(gpu.cudnn, &one, c->in, in, c->out, dout, c->bwd_filter_desc,
                                              c->bwd_filter, gpu.workspace, gpu.workspace_size, beta, s->filter,
                                              l->weight.t.diff));
}

/* Piece k of a convolution layer: its shape, and where its images start in the bottom and the
 * top (x is the convolution's in, or for a transposed one its out). */
typedef struct ConvPiece {
    const ConvShape *shape;
    size_t bottom, top;
} ConvPiece;

static ConvPiece conv_piece(const ConvState *s, const Layer *l, int k)
{
    size_t first = (size_t)k * s->pieces.size;
    int deconv = l->type == LAYER_DECONV;
    return ConvPiece{&s->shape[batch_piece_shape(&s->pieces, k)], first * (deconv ? s->out_image : s->in_image),
                     first * (deconv ? s->in_image : s->out_image)};
}

static void conv_forward(Layer *l, Tensor *x, Tensor *y)
{
    const ConvState *s = (const ConvState *)l->backend_state;
    for (int k = 0; k < s->pieces.count; k++) {
        ConvPiece p = conv_piece(s, l, k);
        if (l->type == LAYER_CONV) conv_fwd(s, p.shape, l, x->data + p.bottom, y->data + p.top, &zero);
        else conv_bwd_data(s, p.shape, l, x->data + p.bottom, y->data + p.top, &zero);
        cudnnCheck(cudnnAddTensor(gpu.cudnn, &one, s->bias, l->bias.t.data, &one,
                                  l->type == LAYER_CONV ? p.shape->out : p.shape->in, y->data + p.top));
    }
}

/* The weight and bias gradients sum over the whole batch: pieces after the first add to them. */
static void conv_backward(Layer *l, Tensor *x, Tensor *y)
{
    const ConvState *s = (const ConvState *)l->backend_state;
    const float *beta = l->accumulate[0] ? &one : &zero;
    for (int k = 0; k < s->pieces.count; k++) {
        ConvPiece p = conv_piece(s, l, k);
        const float *sum = k ? &one : &zero;
        cudnnCheck(cudnnConvolutionBackwardBias(gpu.cudnn, &one, l->type == LAYER_CONV ? p.shape->out : p.shape->in,
                                                y->diff + p.top, sum, s->bias, l->bias.t.diff));
        if (l->type == LAYER_CONV) {
            conv_bwd_filter(s, p.shape, l, x->data + p.bottom, y->diff + p.top, sum);
            if (x->diff) conv_bwd_data(s, p.shape, l, y->diff + p.top, x->diff + p.bottom, beta);
        } else {
            conv_bwd_filter(s, p.shape, l, y->diff + p.top, x->data + p.bottom, sum);
            if (x->diff) conv_fwd(s, p.shape, l, y->diff + p.top, x->diff + p.bottom, beta);
        }
    }
}

/* Row-major y[N][O] = x[N][I] W[O][I]^T + b is column-major Y(OxN) = W^T(OxI) X(IxN). */
static void ip_forward(Layer *l, Tensor *x, Tensor *y)
{
    int in = (int)tensor_sample(x), out = l->p.ip.out, n = x->n;
    gpu_broadcast_bias(y->data, l->bias.t.data, n, out, 1, gpu.stream);
    cublasCheck(cublasSgemm(gpu.cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one, l->weight.t.data, in, x->data, in,
                            &one, y->data, out));
}

static void ip_backward(Layer *l, Tensor *x, Tensor *y)
{
    int in = (int)tensor_sample(x), out = l->p.ip.out, n = x->n;
    /* dW(IxO, column-major) = X dY^T; db = sum over the batch; dX = W dY */
    cublasCheck(cublasSgemm(gpu.cublas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one, x->data, in, y->diff, out, &zero,
                            l->weight.t.diff, in));
    gpu_channel_sum(l->bias.t.diff, y->diff, n, out, 1, gpu.stream);
    if (x->diff)
        cublasCheck(cublasSgemm(gpu.cublas, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one, l->weight.t.data, in, y->diff,
                                out, l->accumulate[0] ? &one : &zero, x->diff, in));
}

static void softmax(Layer *l, const Tensor *x)
{
    const SoftmaxState *s = (const SoftmaxState *)l->backend_state;
    for (int k = 0; k < s->pieces.count; k++) {
        cudnnTensorDescriptor_t desc = s->desc[batch_piece_shape(&s->pieces, k)];
        size_t first = (size_t)k * s->pieces.size * s->image;
        cudnnCheck(cudnnSoftmaxForward(gpu.cudnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, desc,
                                       x->data + first, &zero, desc, l->aux.data + first));
    }
}

static void gpu_forward(Net *net, Layer *l)
{
    Tensor *x = &net->tensors[l->bottom[0]], *y = &net->tensors[l->top];
    Tensor *second = l->nbottom > 1 ? &net->tensors[l->bottom[1]] : NULL;
    switch (l->type) {
    case LAYER_CONV:
    case LAYER_DECONV: conv_forward(l, x, y); break;
    case LAYER_POOL: gpu_pool_forward(l, x, y, gpu.stream); break;
    case LAYER_RELU: gpu_relu_forward(l, x, y, gpu.stream); break;
    case LAYER_LRN: gpu_lrn_forward(l, x, y, gpu.stream); break;
    case LAYER_IP: ip_forward(l, x, y); break;
    case LAYER_DROPOUT:
        if (net->train) gpu_dropout_forward(l, net->seed, net->iter, (int)(l - net->layers), x, y, gpu.stream);
        break;
    case LAYER_CONCAT: gpu_concat_forward(x, second, y, gpu.stream); break;
    case LAYER_SOFTMAX_LOSS:
        softmax(l, x);
        gpu_softmax_loss_forward(l, second, y, gpu.stream);
        break;
    case LAYER_DICE_LOSS:
        softmax(l, x);
        gpu_dice_loss_forward(l, second, y, gpu.stream);
        break;
    }
}

static void gpu_backward(Net *net, Layer *l)
{
    Tensor *x = &net->tensors[l->bottom[0]], *y = &net->tensors[l->top];
    Tensor *second = l->nbottom > 1 ? &net->tensors[l->bottom[1]] : NULL;
    switch (l->type) {
    case LAYER_CONV:
    case LAYER_DECONV: conv_backward(l, x, y); break;
    case LAYER_POOL: gpu_pool_backward(l, x, y, gpu.stream); break;
    case LAYER_RELU: gpu_relu_backward(l, x, y, gpu.stream); break;
    case LAYER_LRN: gpu_lrn_backward(l, x, y, gpu.stream); break;
    case LAYER_IP: ip_backward(l, x, y); break;
    case LAYER_DROPOUT: gpu_dropout_backward(l, net->seed, net->iter, (int)(l - net->layers), x, y, gpu.stream); break;
    case LAYER_CONCAT: gpu_concat_backward(l, x, second, y, gpu.stream); break;
    case LAYER_SOFTMAX_LOSS:
        if (x->diff) gpu_softmax_loss_backward(l, x, second, gpu.stream);
        break;
    case LAYER_DICE_LOSS:
        if (x->diff) gpu_dice_loss_backward(l, x, second, gpu.stream);
        break;
    }
}

/* ---- memory ---- */

static float *gpu_alloc(size_t count)
{
    void *p = NULL;
    if (cudaMalloc(&p, (count ? count : 1) * sizeof(float)) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is reported by the caller, not sticky */
        return NULL;
    }
    return (float *)p;
}

static void gpu_release(float *p)
{
    cudaCheck(cudaFree(p));
}

static void gpu_zero(float *p, size_t count)
{
    cudaCheck(cudaMemsetAsync(p, 0, count * sizeof(float), gpu.stream));
}

static void gpu_upload(float *dst, const float *src, size_t count)
{
    cudaCheck(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyHostToDevice, gpu.stream));
    cudaCheck(cudaStreamSynchronize(gpu.stream)); /* the caller may free src next */
}

static void gpu_download(float *dst, const float *src, size_t count)
{
    cudaCheck(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToHost, gpu.stream));
    cudaCheck(cudaStreamSynchronize(gpu.stream));
}

static uint8_t *gpu_upload_bytes(const uint8_t *host, size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    cudaCheck(cudaMemcpyAsync(p, host, bytes, cudaMemcpyHostToDevice, gpu.stream));
    cudaCheck(cudaStreamSynchronize(gpu.stream));
    return (uint8_t *)p;
}

static void gpu_release_bytes(uint8_t *p)
{
    cudaCheck(cudaFree(p));
}

static void gpu_gather_batch(float *dst, const uint8_t *src, size_t item_size, long first, int batch, long count,
                             float offset, float scale)
{
    gpu_gather(dst, src, item_size, first, batch, count, offset, scale, gpu.stream);
}

static void gpu_sgd(Param *p, float lr, float momentum, float decay)
{
    gpu_sgd_update(p->t.data, p->t.diff, p->history, tensor_count(&p->t), lr, momentum, decay, gpu.stream);
}

static void gpu_synchronize(void)
{
    cudaCheck(cudaStreamSynchronize(gpu.stream));
}

static double gpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void gpu_close(void)
{
    if (gpu.workspace) cudaCheck(cudaFree(gpu.workspace));
    cublasCheck(cublasDestroy(gpu.cublas));
    cudnnCheck(cudnnDestroy(gpu.cudnn));
    cudaCheck(cudaStreamDestroy(gpu.stream));
    memset(&gpu, 0, sizeof gpu);
}

static Backend gpu_backend;

void *gpu_backend_stream(void)
{
    return gpu.stream;
}

int gpu_backend_device_count(void)
{
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

const Backend *gpu_backend_open(int device, const GpuOptions *opt, char *err, size_t errlen)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(err, errlen, "no CUDA GPU available (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return NULL;
    }
    if (device >= count) {
        snprintf(err, errlen, "--gpu %d: no such device (%d CUDA device%s)", device, count, count == 1 ? "" : "s");
        return NULL;
    }
    cudaCheck(cudaSetDevice(device));
    gpu.opt = *opt;
    cudaCheck(cudaStreamCreateWithFlags(&gpu.stream, cudaStreamNonBlocking));
    cudnnCheck(cudnnCreate(&gpu.cudnn));
    cudnnCheck(cudnnSetStream(gpu.cudnn, gpu.stream));
    cublasCheck(cublasCreate(&gpu.cublas));
    cublasCheck(cublasSetStream(gpu.cublas, gpu.stream));
    if (opt->strict_fp32) cublasCheck(cublasSetMathMode(gpu.cublas, CUBLAS_PEDANTIC_MATH));
    gpu_backend = Backend{};
    gpu_backend.name = "GPU";
    gpu_backend.alloc = gpu_alloc;
    gpu_backend.release = gpu_release;
    gpu_backend.zero = gpu_zero;
    gpu_backend.upload = gpu_upload;
    gpu_backend.download = gpu_download;
    gpu_backend.upload_bytes = gpu_upload_bytes;
    gpu_backend.release_bytes = gpu_release_bytes;
    gpu_backend.gather = gpu_gather_batch;
    gpu_backend.prepare = gpu_prepare;
    gpu_backend.setup = gpu_setup;
    gpu_backend.teardown = gpu_backend_teardown;
    gpu_backend.forward = gpu_forward;
    gpu_backend.backward = gpu_backward;
    gpu_backend.sgd_update = gpu_sgd;
    gpu_backend.synchronize = gpu_synchronize;
    gpu_backend.seconds = gpu_seconds;
    gpu_backend.close = gpu_close;
    return &gpu_backend;
}
