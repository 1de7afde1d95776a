/* The GPU backend (see gpu_backend.h). Convolutions, their biases and softmax are cuDNN's,
 * inner products cuBLAS's, the rest the kernels of gpu_kernels.cu. Everything runs on one
 * stream; the host waits only to download (the loss at display time, snapshots). */
#include "trainer/gpu_backend.h"
#include "trainer/gpu_kernels.h"
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
    fprintf(stderr, "trainer: CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e), file, line, what);
    exit(1);
}

static void check_cudnn(cudnnStatus_t s, const char *what, const char *file, int line)
{
    if (s == CUDNN_STATUS_SUCCESS) return;
    fprintf(stderr, "trainer: cuDNN error %s at %s:%d: %s\n", cudnnGetErrorString(s), file, line, what);
    exit(1);
}

static void check_cublas(cublasStatus_t s, const char *what, const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS) return;
    fprintf(stderr, "trainer: cuBLAS error %d at %s:%d: %s\n", (int)s, file, line, what);
    exit(1);
}

static struct {
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    cudaStream_t stream;
    int deterministic;
    size_t workspace_limit;
    float *workspace; /* shared by every convolution: they run one at a time */
    size_t workspace_size;
} gpu;

/* cuDNN state of a convolution. For a transposed convolution the roles swap: its forward is
 * the convolution's backward data, and `in` is its top. */
typedef struct ConvState {
    cudnnTensorDescriptor_t in, out, bias;
    cudnnFilterDescriptor_t filter;
    cudnnConvolutionDescriptor_t fwd_desc, bwd_data_desc, bwd_filter_desc; /* each with its algorithm's math */
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    int need_fwd, need_bwd_data;
} ConvState;

typedef struct SoftmaxState {
    cudnnTensorDescriptor_t desc; /* N x C x (D*H*W) x 1 */
} SoftmaxState;

static void set_tensor(cudnnTensorDescriptor_t desc, int n, int c, int d, int h, int w)
{
    if (d == 1) {
        cudnnCheck(cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
    } else {
        int dim[5] = {n, c, d, h, w}, stride[5] = {c * d * h * w, d * h * w, h * w, w, 1};
        cudnnCheck(cudnnSetTensorNdDescriptor(desc, CUDNN_DATA_FLOAT, 5, dim, stride));
    }
}

static void set_conv_desc(cudnnConvolutionDescriptor_t desc, const Layer *l, int deep, cudnnMathType_t math)
{
    const Window *k = &l->p.conv.win;
    if (!deep) {
        cudnnCheck(cudnnSetConvolution2dDescriptor(desc, k->pad[1], k->pad[2], k->stride[1], k->stride[2], 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    } else {
        int dil[3] = {1, 1, 1};
        cudnnCheck(cudnnSetConvolutionNdDescriptor(desc, 3, k->pad, k->stride, dil, CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT));
    }
    cudnnCheck(cudnnSetConvolutionGroupCount(desc, l->p.conv.group));
    cudnnCheck(cudnnSetConvolutionMathType(desc, math));
}

/* The algorithm to use from a list sorted best first: the first that succeeded within the
 * workspace limit (and is deterministic, if asked). Returns its index or -1. */
template <typename Perf> static int pick(const Perf *perf, int count)
{
    for (int i = 0; i < count; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= gpu.workspace_limit &&
            (!gpu.deterministic || perf[i].determinism == CUDNN_DETERMINISTIC))
            return i;
    return -1;
}

static int choose_algorithms(ConvState *s, const Layer *l, int deep, char *err, size_t errlen)
{
    size_t need = 0;
    /* Timing by cudnnFind is fastest, but it can pick differently run by run; deterministic
     * runs take cuDNN's heuristics, which depend on the shapes alone. */
    if (s->need_fwd) {
        cudnnConvolutionFwdAlgoPerf_t perf[16];
        int n = 0;
        if (gpu.deterministic)
            cudnnCheck(cudnnGetConvolutionForwardAlgorithm_v7(gpu.cudnn, s->in, s->filter, s->fwd_desc, s->out, 16, &n, perf));
        else
            cudnnCheck(cudnnFindConvolutionForwardAlgorithm(gpu.cudnn, s->in, s->filter, s->fwd_desc, s->out, 16, &n, perf));
        int i = pick(perf, n);
        if (i < 0) goto none;
        s->fwd = perf[i].algo;
        set_conv_desc(s->fwd_desc, l, deep, perf[i].mathType);
        if (perf[i].memory > need) need = perf[i].memory;
    }
    if (s->need_bwd_data) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[16];
        int n = 0;
        if (gpu.deterministic)
            cudnnCheck(cudnnGetConvolutionBackwardDataAlgorithm_v7(gpu.cudnn, s->filter, s->out, s->bwd_data_desc, s->in, 16, &n, perf));
        else
            cudnnCheck(cudnnFindConvolutionBackwardDataAlgorithm(gpu.cudnn, s->filter, s->out, s->bwd_data_desc, s->in, 16, &n, perf));
        int i = pick(perf, n);
        if (i < 0) goto none;
        s->bwd_data = perf[i].algo;
        set_conv_desc(s->bwd_data_desc, l, deep, perf[i].mathType);
        if (perf[i].memory > need) need = perf[i].memory;
    }
    {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[16];
        int n = 0;
        if (gpu.deterministic)
            cudnnCheck(cudnnGetConvolutionBackwardFilterAlgorithm_v7(gpu.cudnn, s->in, s->out, s->bwd_filter_desc, s->filter, 16, &n, perf));
        else
            cudnnCheck(cudnnFindConvolutionBackwardFilterAlgorithm(gpu.cudnn, s->in, s->out, s->bwd_filter_desc, s->filter, 16, &n, perf));
        int i = pick(perf, n);
        if (i < 0) goto none;
        s->bwd_filter = perf[i].algo;
        set_conv_desc(s->bwd_filter_desc, l, deep, perf[i].mathType);
        if (perf[i].memory > need) need = perf[i].memory;
    }
    if (need > gpu.workspace_size) {
        if (gpu.workspace) cudaCheck(cudaFree(gpu.workspace));
        gpu.workspace = NULL;
        if (cudaMalloc((void **)&gpu.workspace, need) != cudaSuccess) {
            cudaGetLastError();
            gpu.workspace_size = 0;
            snprintf(err, errlen, "out of GPU memory for a %zu-byte cuDNN workspace (layer %s)", need, l->name);
            return -1;
        }
        gpu.workspace_size = need;
    }
    return 0;
none:
    snprintf(err, errlen, "layer %s: no cuDNN algorithm fits the %zu-byte workspace limit%s", l->name,
             gpu.workspace_limit, gpu.deterministic ? " and is deterministic" : "");
    return -1;
}

static int setup_conv(Net *net, Layer *l, char *err, size_t errlen)
{
    ConvState *s = (ConvState *)calloc(1, sizeof *s);
    l->backend_state = s;
    int deconv = l->type == LAYER_DECONV;
    Tensor *bottom = &net->tensors[l->bottom[0]], *top = &net->tensors[l->top];
    const Tensor *in = deconv ? top : bottom, *out = deconv ? bottom : top;
    int deep = net_is_volumetric(net);
    cudnnCheck(cudnnCreateTensorDescriptor(&s->in));
    cudnnCheck(cudnnCreateTensorDescriptor(&s->out));
    cudnnCheck(cudnnCreateTensorDescriptor(&s->bias));
    cudnnCheck(cudnnCreateFilterDescriptor(&s->filter));
    cudnnCheck(cudnnCreateConvolutionDescriptor(&s->fwd_desc));
    cudnnCheck(cudnnCreateConvolutionDescriptor(&s->bwd_data_desc));
    cudnnCheck(cudnnCreateConvolutionDescriptor(&s->bwd_filter_desc));
    set_tensor(s->in, in->n, in->c, in->d, in->h, in->w);
    set_tensor(s->out, out->n, out->c, out->d, out->h, out->w);
    if (!deep) {
        set_tensor(s->bias, 1, top->c, 1, 1, 1);
    } else {
        int bias_dim[5] = {1, top->c, 1, 1, 1}, bias_stride[5] = {top->c, 1, 1, 1, 1};
        cudnnCheck(cudnnSetTensorNdDescriptor(s->bias, CUDNN_DATA_FLOAT, 5, bias_dim, bias_stride));
    }
    const Tensor *w = &l->weight.t;
    if (!deep) {
        cudnnCheck(cudnnSetFilter4dDescriptor(s->filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, w->n, w->c, w->h, w->w));
    } else {
        int fdim[5] = {w->n, w->c, w->d, w->h, w->w};
        cudnnCheck(cudnnSetFilterNdDescriptor(s->filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 5, fdim));
    }
    for (cudnnConvolutionDescriptor_t d : {s->fwd_desc, s->bwd_data_desc, s->bwd_filter_desc})
        set_conv_desc(d, l, deep, CUDNN_DEFAULT_MATH);
    /* A convolution's forward always runs; its backward data only when the bottom has a
     * gradient. For a transposed convolution it is the other way round. */
    s->need_fwd = !deconv || bottom->diff;
    s->need_bwd_data = deconv || bottom->diff;
    return choose_algorithms(s, l, deep, err, errlen);
}

static int setup_softmax(Net *net, Layer *l)
{
    (void)net;
    SoftmaxState *s = (SoftmaxState *)calloc(1, sizeof *s);
    l->backend_state = s;
    cudnnCheck(cudnnCreateTensorDescriptor(&s->desc));
    cudnnCheck(cudnnSetTensor4dDescriptor(s->desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, l->aux.n, l->aux.c,
                                          (int)tensor_spatial(&l->aux), 1));
    return 0;
}

static int gpu_setup(Net *net, Layer *l, char *err, size_t errlen)
{
    switch (l->type) {
    case LAYER_CONV:
    case LAYER_DECONV: return setup_conv(net, l, err, errlen);
    case LAYER_SOFTMAX_LOSS:
    case LAYER_DICE_LOSS: return setup_softmax(net, l);
    default: return 0;
    }
}

static void gpu_teardown(Layer *l)
{
    if (!l->backend_state) return;
    if (l->type == LAYER_CONV || l->type == LAYER_DECONV) {
        ConvState *s = (ConvState *)l->backend_state;
        cudnnDestroyTensorDescriptor(s->in);
        cudnnDestroyTensorDescriptor(s->out);
        cudnnDestroyTensorDescriptor(s->bias);
        cudnnDestroyFilterDescriptor(s->filter);
        cudnnDestroyConvolutionDescriptor(s->fwd_desc);
        cudnnDestroyConvolutionDescriptor(s->bwd_data_desc);
        cudnnDestroyConvolutionDescriptor(s->bwd_filter_desc);
    } else {
        cudnnDestroyTensorDescriptor(((SoftmaxState *)l->backend_state)->desc);
    }
    free(l->backend_state);
    l->backend_state = NULL;
}

static const float one = 1.0f, zero = 0.0f;

/* The three convolution passes, in the convolution's own terms (in -> out). */
static void conv_fwd(ConvState *s, const Layer *l, const float *in, float *out, const float *beta)
{
    cudnnCheck(cudnnConvolutionForward(gpu.cudnn, &one, s->in, in, s->filter, l->weight.t.data, s->fwd_desc, s->fwd,
                                       gpu.workspace, gpu.workspace_size, beta, s->out, out));
}

static void conv_bwd_data(ConvState *s, const Layer *l, const float *dout, float *din, const float *beta)
{
    cudnnCheck(cudnnConvolutionBackwardData(gpu.cudnn, &one, s->filter, l->weight.t.data, s->out, dout, s->bwd_data_desc,
                                            s->bwd_data, gpu.workspace, gpu.workspace_size, beta, s->in, din));
}

static void conv_bwd_filter(ConvState *s, Layer *l, const float *in, const float *dout)
{
    cudnnCheck(cudnnConvolutionBackwardFilter(gpu.cudnn, &one, s->in, in, s->out, dout, s->bwd_filter_desc,
                                              s->bwd_filter, gpu.workspace, gpu.workspace_size, &zero, s->filter,
                                              l->weight.t.diff));
}

static void conv_forward(Layer *l, Tensor *x, Tensor *y)
{
    ConvState *s = (ConvState *)l->backend_state;
    if (l->type == LAYER_CONV) conv_fwd(s, l, x->data, y->data, &zero);
    else conv_bwd_data(s, l, x->data, y->data, &zero);
    cudnnCheck(cudnnAddTensor(gpu.cudnn, &one, s->bias, l->bias.t.data, &one, l->type == LAYER_CONV ? s->out : s->in,
                              y->data));
}

static void conv_backward(Layer *l, Tensor *x, Tensor *y)
{
    ConvState *s = (ConvState *)l->backend_state;
    const float *beta = l->accumulate[0] ? &one : &zero;
    cudnnCheck(cudnnConvolutionBackwardBias(gpu.cudnn, &one, l->type == LAYER_CONV ? s->out : s->in, y->diff, &zero,
                                            s->bias, l->bias.t.diff));
    if (l->type == LAYER_CONV) {
        conv_bwd_filter(s, l, x->data, y->diff);
        if (x->diff) conv_bwd_data(s, l, y->diff, x->diff, beta);
    } else {
        conv_bwd_filter(s, l, y->diff, x->data);
        if (x->diff) conv_fwd(s, l, y->diff, x->diff, beta);
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
    SoftmaxState *s = (SoftmaxState *)l->backend_state;
    cudnnCheck(cudnnSoftmaxForward(gpu.cudnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, s->desc, x->data,
                                   &zero, s->desc, l->aux.data));
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

static float *gpu_alloc(size_t count)
{
    void *p = NULL;
    if (cudaMalloc(&p, (count ? count : 1) * sizeof(float)) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is reported by the caller, not sticky */
        return NULL;
    }
    cudaCheck(cudaMemsetAsync(p, 0, count * sizeof(float), gpu.stream));
    return (float *)p;
}

static void gpu_release(float *p)
{
    cudaCheck(cudaFree(p));
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

static Backend gpu_backend;

const Backend *gpu_backend_open(int device, int deterministic, size_t workspace_limit, char *err, size_t errlen)
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
    cudaCheck(cudaStreamCreateWithFlags(&gpu.stream, cudaStreamNonBlocking));
    cudnnCheck(cudnnCreate(&gpu.cudnn));
    cudnnCheck(cudnnSetStream(gpu.cudnn, gpu.stream));
    cublasCheck(cublasCreate(&gpu.cublas));
    cublasCheck(cublasSetStream(gpu.cublas, gpu.stream));
    gpu.deterministic = deterministic;
    gpu.workspace_limit = workspace_limit;
    gpu_backend = Backend{};
    gpu_backend.name = "GPU";
    gpu_backend.alloc = gpu_alloc;
    gpu_backend.release = gpu_release;
    gpu_backend.upload = gpu_upload;
    gpu_backend.download = gpu_download;
    gpu_backend.upload_bytes = gpu_upload_bytes;
    gpu_backend.release_bytes = gpu_release_bytes;
    gpu_backend.gather = gpu_gather_batch;
    gpu_backend.setup = gpu_setup;
    gpu_backend.teardown = gpu_teardown;
    gpu_backend.forward = gpu_forward;
    gpu_backend.backward = gpu_backward;
    gpu_backend.sgd_update = gpu_sgd;
    gpu_backend.synchronize = gpu_synchronize;
    gpu_backend.seconds = gpu_seconds;
    return &gpu_backend;
}
