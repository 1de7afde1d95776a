/* The GPU backend's host side, on any machine: the arithmetic of batch pieces (batch_pieces.h)
 * and of fast division (fast_div.h), and the backend's cuDNN descriptors for every model as
 * libcudnn checks them on the host, which needs no GPU: batches of 200000 images are cut into
 * pieces cuDNN accepts, a volumetric net is 5-D throughout (unet3d at 16^3 reaches 1x1x1), and
 * an image too large for cuDNN is refused before anything is allocated, saying why. What needs
 * a device (cudnnCreate, the algorithm search, the passes) is tested by make check-gpu. */
#include "tests/tap.h"
#include "trainer/batch_pieces.h"
#include "trainer/fast_div.h"
#include "trainer/gpu_backend.h"
#include "trainer/models.h"

#include <cudnn.h>
#include <string.h>

static int pieces_are(int batch, size_t per_image, int max_images, int size, int count, int last)
{
    BatchPieces p;
    return !batch_pieces(batch, per_image, CUDNN_MAX_ELEMENTS, max_images, &p) && p.size == size &&
           p.count == count && p.last == last;
}

static void test_pieces(void)
{
    /* cifar10_full's conv1 output: 32x32x32 floats per image. */
    ok(pieces_are(200000, 32768, 0, 65535, 4, 200000 - 3 * 65535),
       "batch 200000 of 32768-element images: 3 pieces of 65535 and one of 3395");
    ok(pieces_are(65535, 32768, 0, 65535, 1, 65535) && pieces_are(65536, 32768, 0, 65535, 2, 1),
       "batch 65535 is one call, 65536 two (65536 * 32768 = 2^31)");
    ok(pieces_are(64, 3072, 24, 24, 3, 16) && pieces_are(64, 3072, 32, 32, 2, 32) && pieces_are(10, 3072, 0, 10, 1, 10),
       "a cap of 24 images cuts 64 into 24, 24, 16; a cap of 32 into 32, 32; no cap, no cut");
    BatchPieces p;
    ok(batch_pieces(1, (size_t)1 << 31, CUDNN_MAX_ELEMENTS, 0, &p) == -1 &&
           pieces_are(3, CUDNN_MAX_ELEMENTS, 0, 1, 3, 1),
       "an image of 2^31 elements is refused; one of 2^31 - 1 goes alone");
    batch_pieces(64, 3072, CUDNN_MAX_ELEMENTS, 24, &p);
    ok(batch_piece_shape(&p, 0) == 0 && batch_piece_shape(&p, 1) == 0 && batch_piece_shape(&p, 2) == 1,
       "whole pieces take the first shape, the shorter last one the second");
    batch_pieces(64, 3072, CUDNN_MAX_ELEMENTS, 32, &p);
    ok(batch_piece_shape(&p, 1) == 0, "a last piece that is whole takes the first shape");
    int good = 1;
    for (int batch = 1; batch < 3000; batch += 7)
        for (size_t per_image = 1; per_image < ((size_t)1 << 31); per_image = per_image * 5 + 3) {
            int cap = batch % 5 ? 0 : batch % 97 + 1;
            if (batch_pieces(batch, per_image, 1u << 20, cap, &p)) {
                good &= per_image > (1u << 20);
                continue;
            }
            size_t covered = (size_t)(p.count - 1) * p.size + p.last;
            good &= covered == (size_t)batch && p.last >= 1 && p.last <= p.size &&
                    (size_t)p.size * per_image <= (1u << 20) && (!cap || p.size <= cap) &&
                    (p.count == 1 || (size_t)(p.size + 1) * per_image > (1u << 20) || p.size == cap);
        }
    ok(good, "for any batch, image size and cap: the pieces cover the batch, each within the limits, as few as can be");
}

static void test_fast_div(void)
{
    unsigned long bad = 0;
    uint32_t big[] = {INT32_MAX, 1u << 30, (1u << 30) + 1, 65535, 65536, 3 * 32768, 12345678, 55 * 55, 27};
    for (uint32_t d = 1; d < 2000; d++) {
        FastDiv f = fast_div(d);
        for (uint32_t n = 0; n < 20000; n++) bad += fast_quotient(f, n) != n / d;
        for (uint32_t n = INT32_MAX; n > INT32_MAX - 2000u; n--) bad += fast_quotient(f, n) != n / d;
    }
    for (size_t i = 0; i < sizeof big / sizeof *big; i++) {
        FastDiv f = fast_div(big[i]);
        for (uint32_t n = 0; n < 200000; n++) {
            uint32_t m = n * 10733u; /* below 2^31 */
            bad += (fast_quotient(f, n) != n / big[i]) + (fast_quotient(f, m) != m / big[i]);
        }
        for (uint32_t k = 1; k < 4 && big[i] <= INT32_MAX / 4; k++) /* around multiples */
            bad += (fast_quotient(f, k * big[i]) != k) + (fast_quotient(f, k * big[i] - 1) != k - 1);
    }
    ok(bad == 0, "fast division equals the hardware's for divisors 1..1999 and large ones, numerators below 2^31 (%lu wrong)",
       bad);
}

/* The premises, straight from libcudnn. */
static void test_cudnn_limits(void)
{
    cudnnTensorDescriptor_t t;
    cudnnFilterDescriptor_t f;
    cudnnConvolutionDescriptor_t c;
    if (cudnnCreateTensorDescriptor(&t) || cudnnCreateFilterDescriptor(&f) || cudnnCreateConvolutionDescriptor(&c))
        bail_out("libcudnn cannot create descriptors here");
    ok(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 65535, 32, 32, 32) == CUDNN_STATUS_SUCCESS &&
           cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 65536, 32, 32, 32) ==
               CUDNN_STATUS_NOT_SUPPORTED,
       "cuDNN (%zu) takes a 4-D tensor of 2^31 - 32768 elements and refuses one of 2^31", cudnnGetVersion());
    int dim[5] = {2, 16, 416, 416, 416}, stride[5] = {16 * 416 * 416 * 416, 416 * 416 * 416, 416 * 416, 416, 1};
    ok(cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, 5, dim, stride) == CUDNN_STATUS_NOT_SUPPORTED,
       "and a 5-D tensor of 2 x 16 x 416^3 elements");
    int fdim[5] = {8, 256, 3, 3, 3}, pad[3] = {1, 1, 1}, one[3] = {1, 1, 1}, out[5];
    cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 256, 1, 1);
    cudnnSetFilterNdDescriptor(f, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 5, fdim);
    cudnnSetConvolutionNdDescriptor(c, 3, pad, one, one, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    ok(cudnnGetConvolutionNdForwardOutputDim(c, t, f, 5, out) == CUDNN_STATUS_BAD_PARAM,
       "a 4-D tensor (a 1x1x1 volume taken for an image) with a 5-D filter and a 3-D convolution: BAD_PARAM");
    cudnnDestroyConvolutionDescriptor(c);
    cudnnDestroyFilterDescriptor(f);
    cudnnDestroyTensorDescriptor(t);
}

/* Builds a model and prepares its descriptors as net_setup does before allocating anything. */
static int prepare(const char *model, int batch, int size, int max_images, char *err, size_t errlen)
{
    ModelOptions opt = {.unet_size = size, .unet_loss = LAYER_DICE_LOSS};
    Net *net = model_build(model_find(model), batch, &opt);
    GpuOptions gpu = {.workspace_limit = (size_t)1 << 30, .max_images = max_images};
    int status = gpu_backend_prepare(net, &gpu, err, errlen);
    for (int i = 0; i < net->nlayers; i++) gpu_backend_teardown(&net->layers[i]);
    net_free(net);
    return status;
}

/* prepare's verdict, saying why when it refused. */
static int prepared(const char *model, int batch, int size, int max_images)
{
    char err[512];
    if (!prepare(model, batch, size, max_images, err, sizeof err)) return 1;
    diag("%s", err);
    return 0;
}

static void test_prepare(void)
{
    const char *models[] = {"lenet", "cifar10_quick", "cifar10_full", "alexnet"};
    for (int i = 0; i < 4; i++)
        ok(prepared(models[i], 200000, 64, 0), "%s at batch 200000: every descriptor accepted, in pieces", models[i]);
    ok(prepared("cifar10_full", 64, 64, 24), "cifar10_full at batch 64 in pieces of at most 24 images: 24 and 16");
    ok(prepared("unet3d", 2, 16, 0), "unet3d at 16^3: 5-D throughout, down to 1x256x1x1x1");
    ok(prepared("unet3d", 3, 64, 2), "unet3d at 64^3, batch 3 in pieces of 2");
    ok(prepared("unet3d", 1, 400, 0), "unet3d at 400^3: 32 x 400^3 elements per image fit a cuDNN tensor");
    char err[512] = "";
    int status = prepare("unet3d", 1, 416, 0, err, sizeof err);
    ok(status == -1 && strstr(err, "layer dec0_conv_a: one image's tensor holds 2303721472 elements") &&
           strstr(err, "fewer than 2^31"),
       "unet3d at 416^3 is refused before anything is allocated: %s", err);
}

int main(void)
{
    plan(21);
    test_pieces();
    test_fast_div();
    test_cudnn_limits();
    test_prepare();
    cudnnHandle_t handle;
    cudnnStatus_t s = cudnnCreate(&handle);
    if (s == CUDNN_STATUS_SUCCESS) {
        cudnnDestroy(handle);
        skip(1, "cudnnCreate works here: a GPU is present, and make check-gpu tests the rest");
    } else {
        skip(1, "cudnnCreate needs a GPU (%s here): the algorithm search and the passes run under make check-gpu",
             cudnnGetErrorString(s));
    }
    return exit_status();
}
