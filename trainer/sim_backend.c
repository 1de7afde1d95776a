/* The simulated-GPU backend (see sim_backend.h). Everything runs on one stream; the host
 * waits only for copies from host memory, downloads and the clock. */
#include "trainer/sim_backend.h"
#include "trainer/batch_pieces.h"
#include "trainer/log.h"
#include "trainer/net.h"
#include "trainer/sim_driver.h"
#include "trainer/sim_kernel_table.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static struct {
    CUstream stream;
    CUfunction layer[SIM_LAYER_KERNEL_COUNT], gather, sgd;
    CUevent mark[2]; /* the clock's last reading is mark[last] */
    int last;
    double seconds;
    size_t workspace_limit;
    Tensor workspace; /* the convolutions' (data only): see sim_setup */
    size_t workspace_bytes;
} sim;

static CUdeviceptr device_pointer(const void *p)
{
    return (CUdeviceptr)(uintptr_t)p;
}

/* NULL when the device is out of memory: the caller says what it was for. */
static void *alloc_bytes(size_t bytes)
{
    CUdeviceptr p;
    CUresult result = driver.cuMemAlloc(&p, bytes ? bytes : 1);
    if (result == CUDA_ERROR_OUT_OF_MEMORY) return NULL;
    sim_driver_check(result, "driver.cuMemAlloc(&p, bytes ? bytes : 1)", __FILE__, __LINE__);
    return (void *)(uintptr_t)p;
}

static float *sim_alloc(size_t count)
{
    return alloc_bytes(count * sizeof(float));
}

static void sim_zero(float *p, size_t count)
{
    CU(driver.cuMemsetD32Async(device_pointer(p), 0, count, sim.stream));
}

static void sim_release(float *p)
{
    CU(driver.cuMemFree(device_pointer(p)));
}

/* Waits for the copy: it reads host memory only when the stream gets to it, and the caller
 * may reuse that memory next. */
static void upload(void *dst, const void *src, size_t bytes)
{
    CU(driver.cuMemcpyHtoDAsync(device_pointer(dst), src, bytes, sim.stream));
    CU(driver.cuStreamSynchronize(sim.stream));
}

static void sim_upload(float *dst, const float *src, size_t count)
{
    upload(dst, src, count * sizeof(float));
}

static void sim_download(float *dst, const float *src, size_t count)
{
    CU(driver.cuMemcpyDtoHAsync(dst, device_pointer(src), count * sizeof(float), sim.stream));
    CU(driver.cuStreamSynchronize(sim.stream));
}

static uint8_t *sim_upload_bytes(const uint8_t *host, size_t bytes)
{
    uint8_t *p = alloc_bytes(bytes);
    if (p) upload(p, host, bytes);
    return p;
}

static void sim_release_bytes(uint8_t *p)
{
    CU(driver.cuMemFree(device_pointer(p)));
}

/* The simulator runs a kernel as one host call whatever its grid; the grid is a real
 * kernel's, a thread per element. */
static void launch(CUfunction kernel, size_t elements, void **params)
{
    size_t blocks = elements / 256 + 1;
    CU(driver.cuLaunchKernel(kernel, blocks < INT_MAX ? (unsigned)blocks : INT_MAX, 1, 1, 256, 1, 1, 0, sim.stream,
                             params, NULL));
}

/* The workspace a convolution's algorithm needs, as cuDNN chose on the H100 (2026-11-27, each
 * layer's choice logged at setup, trainer/gpu_backend.cu): the implicit GEMM with precomputed
 * indices, whose workspace was the bytes of the call's input and output (cifar10_full's conv2
 * and conv3 at batch 14924-54272, all of unet3d's at 176^3-272^3, transposed ones too, within
 * 1 %), where that fits the limit; else one that needs none (unet3d's dec0_conv_a at 240^3
 * under 2 GiB). cifar10_full's conv1, 3 channels in, took the one that needs none at every
 * batch: with few channels the indices save little. A call is a piece of the batch where the
 * GPU backend cuts one (tensors under 2^31 elements). */
#define FEW_CHANNELS 3

static size_t conv_workspace(const Net *net, const Layer *l)
{
    const Tensor *in = &net->tensors[l->bottom[0]], *out = &net->tensors[l->top];
    if (in->c <= FEW_CHANNELS || in->n == 0) return 0;
    size_t in_image = tensor_count(in) / (size_t)in->n, out_image = tensor_count(out) / (size_t)out->n;
    BatchPieces pieces;
    if (batch_pieces(in->n, in_image > out_image ? in_image : out_image, CUDNN_MAX_ELEMENTS, 0, &pieces)) return 0;
    size_t bytes = (in_image + out_image) * (size_t)pieces.size * sizeof(float);
    return bytes <= sim.workspace_limit ? bytes : 0;
}

/* Whether the layer's kernels pass the workspace: those of an algorithm that needs one, where
 * the one kept holds it (on the H100 the zero-workspace algorithms' kernels do not name it). */
static int uses_workspace(const Net *net, const Layer *l)
{
    if (l->type != LAYER_CONV && l->type != LAYER_DECONV) return 0;
    size_t need = conv_workspace(net, l);
    return need && need <= sim.workspace_bytes;
}

static void launch_layer(Net *net, Layer *l, int backward)
{
    const SimKernelSpec *k = sim_layer_kernel(l, backward);
    const Tensor *x = &net->tensors[l->bottom[0]];
    const Tensor *slots[SIM_SLOTS] = {
        [SIM_SLOT_X] = x,
        [SIM_SLOT_X2] = l->nbottom > 1 ? &net->tensors[l->bottom[1]] : NULL,
        [SIM_SLOT_Y] = &net->tensors[l->top],
        [SIM_SLOT_W] = &l->weight.t,
        [SIM_SLOT_B] = &l->bias.t,
        [SIM_SLOT_AUX] = &l->aux,
        [SIM_SLOT_WS] = uses_workspace(net, l) ? &sim.workspace : NULL,
    };
    SimLayerArgs args;
    memset(&args, 0, sizeof args);
    for (int s = 0; s < SIM_SLOTS; s++) {
        const Tensor *t = slots[s];
        if (t) memcpy(args.shape[s], (int[5]){t->n, t->c, t->d, t->h, t->w}, sizeof args.shape[s]);
    }
    args.workspace_bytes = slots[SIM_SLOT_WS] ? sim.workspace_bytes : 0;
    args.p = l->p;
    memcpy(args.accumulate, l->accumulate, sizeof args.accumulate);
    args.loss_weight = l->loss_weight;
    args.layer_index = (int)(l - net->layers);
    args.seed = net->seed;
    args.iter = net->iter;

    CUdeviceptr pointers[SIM_MAX_ROLES];
    void *params[1 + SIM_MAX_ROLES] = {&args};
    for (int i = 0; i < k->nroles; i++) {
        int role = k->roles[i];
        const Tensor *t = slots[SIM_ROLE_SLOT(role)];
        int wanted = t && (!(role & SIM_IF_X_DIFF) || x->diff);
        pointers[i] = device_pointer(!wanted ? NULL : SIM_ROLE_IS_DIFF(role) ? t->diff : t->data);
        params[1 + i] = &pointers[i];
    }
    launch(sim.layer[k - sim_layer_kernels], tensor_count(x), params);
}

static void sim_forward(Net *net, Layer *l)
{
    if (l->type == LAYER_DROPOUT && !net->train) return; /* in place: the identity */
    launch_layer(net, l, 0);
}

static void sim_backward(Net *net, Layer *l)
{
    /* A layer without parameters whose bottoms take no gradient has nothing to compute;
     * launching anyway would only make its inputs resident for nothing. */
    int wanted = l->nparams > 0;
    for (int b = 0; b < l->nbottom; b++) wanted |= net->tensors[l->bottom[b]].diff != NULL;
    if (wanted) launch_layer(net, l, 1);
}

static void sim_gather(float *dst, const uint8_t *src, size_t item_size, long first, int batch, long count,
                       float offset, float scale)
{
    SimGatherArgs args;
    memset(&args, 0, sizeof args);
    args.item_size = item_size;
    args.first = first;
    args.count = count;
    args.batch = batch;
    args.offset = offset;
    args.scale = scale;
    CUdeviceptr out = device_pointer(dst), in = device_pointer(src);
    void *params[] = {&args, &out, &in};
    launch(sim.gather, (size_t)batch * item_size, params);
}

static void sim_sgd(Param *p, float lr, float momentum, float decay)
{
    SimSgdArgs args;
    memset(&args, 0, sizeof args);
    args.count = tensor_count(&p->t);
    args.lr = lr;
    args.momentum = momentum;
    args.decay = decay;
    CUdeviceptr data = device_pointer(p->t.data), diff = device_pointer(p->t.diff),
                history = device_pointer(p->history);
    void *params[] = {&args, &data, &diff, &history};
    launch(sim.sgd, args.count, params);
}

/* The one workspace the GPU backend keeps for all convolutions, which those that need one pass
 * to their kernels, so that liblms must hold it beside their tensors: the largest any needs; and
 * where that does not fit, half as much until it does, as the GPU backend's search takes what
 * the device has left and keeps what the algorithms timed in it need. */
static int sim_setup(Net *net, char *err, size_t errlen)
{
    (void)err, (void)errlen; /* it cannot fail: without room, the convolutions go without */
    size_t bytes = 0;
    for (const Layer *l = net->layers; l < net->layers + net->nlayers; l++)
        if (l->type == LAYER_CONV || l->type == LAYER_DECONV) {
            size_t need = conv_workspace(net, l);
            if (need > bytes) bytes = need;
        }
    while (bytes && !(sim.workspace.data = alloc_bytes(bytes))) bytes /= 2;
    sim.workspace_bytes = bytes;
    log_info("convolution workspace: %zu bytes (as cuDNN's on the H100: the largest convolution's input and output, "
             "within the %zu-byte limit and what fits)", bytes, sim.workspace_limit);
    return 0;
}

static void sim_close(void)
{
    if (sim.workspace.data) sim_release(sim.workspace.data);
    sim.workspace.data = NULL;
    sim.workspace_bytes = 0;
}

static void sim_synchronize(void)
{
    CU(driver.cuStreamSynchronize(sim.stream));
}

/* The device's clock, from events. An elapsed time is a float of milliseconds, so readings
 * add up the time since the previous one, which keeps long runs precise. */
static double sim_seconds(void)
{
    CUevent last = sim.mark[sim.last], now = sim.mark[!sim.last];
    CU(driver.cuEventRecord(now, sim.stream));
    CU(driver.cuEventSynchronize(now));
    float ms;
    CU(driver.cuEventElapsedTime(&ms, last, now));
    sim.seconds += ms * 1e-3;
    sim.last = !sim.last;
    return sim.seconds;
}

static const Backend sim_backend = {
    .name = "simulated GPU",
    .clock_note = "simulated H100 time",
    .alloc = sim_alloc,
    .release = sim_release,
    .zero = sim_zero,
    .upload = sim_upload,
    .download = sim_download,
    .upload_bytes = sim_upload_bytes,
    .release_bytes = sim_release_bytes,
    .gather = sim_gather,
    .setup = sim_setup,
    .forward = sim_forward,
    .backward = sim_backward,
    .sgd_update = sim_sgd,
    .synchronize = sim_synchronize,
    .seconds = sim_seconds,
    .close = sim_close,
};

int sim_backend_prepare(char **argv, char *err, size_t errlen)
{
    return sim_driver_prepare(argv, err, errlen);
}

const Backend *sim_backend_open(char **argv, int device, size_t workspace_limit, char *err, size_t errlen)
{
    sim.workspace_limit = workspace_limit;
    char module_path[4096];
    if (sim_driver_prepare(argv, err, errlen) || sim_driver_open(err, errlen) ||
        sim_driver_module_path(module_path, sizeof module_path, err, errlen))
        return NULL;
    CUresult started = driver.cuInit(0);
    if (started != CUDA_SUCCESS) {
        const char *name = "an unknown error";
        driver.cuGetErrorName(started, &name);
        snprintf(err, errlen, "the simulated GPU did not start (cuInit: %s); its log says why", name);
        return NULL;
    }
    int count = 0;
    CU(driver.cuDeviceGetCount(&count));
    if (device >= count) {
        snprintf(err, errlen, "--gpu %d: no such device (the simulated GPU has %d device%s)", device, count,
                 count == 1 ? "" : "s");
        return NULL;
    }
    CUdevice dev;
    CUcontext context;
    CU(driver.cuDeviceGet(&dev, device));
    CU(driver.cuDevicePrimaryCtxRetain(&context, dev));
    CU(driver.cuCtxSetCurrent(context));
    CU(driver.cuStreamCreate(&sim.stream, CU_STREAM_NON_BLOCKING));
    CUmodule module;
    CU(driver.cuModuleLoad(&module, module_path));
    for (int k = 0; k < SIM_LAYER_KERNEL_COUNT; k++)
        CU(driver.cuModuleGetFunction(&sim.layer[k], module, sim_layer_kernels[k].name));
    CU(driver.cuModuleGetFunction(&sim.gather, module, SIM_GATHER_KERNEL));
    CU(driver.cuModuleGetFunction(&sim.sgd, module, SIM_SGD_KERNEL));
    for (int i = 0; i < 2; i++) CU(driver.cuEventCreate(&sim.mark[i], CU_EVENT_DEFAULT));
    CU(driver.cuEventRecord(sim.mark[sim.last], sim.stream));
    return &sim_backend;
}
