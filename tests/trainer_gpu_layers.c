/* The CUDA layers against the CPU reference, on fresh random inputs: forward outputs, bottom
 * gradients and weight gradients within fp32 relative-error bounds (strict fp32: no TF32), and
 * max pooling's saved argmax exactly; then a finite-difference gradient check of the GPU layers
 * themselves; then the cuDNN layers again with batches cut into pieces of 2 images (the backend
 * closed and opened again), and a max pooling of more than 2^31 elements (the kernels' 64-bit
 * index path) against the CPU exactly. Skips without a GPU. */
#include "tests/tap.h"
#include "trainer/gpu_backend.h"
#include "trainer/gpu_kernels.h"
#include "trainer/net.h"
#include "trainer/rng.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef Net *(*Builder)(void);

#define GAUSS(s) ((Filler){FILL_GAUSSIAN, (s)})
#define CONST(v) ((Filler){FILL_CONSTANT, (v)})

static Net *input(int n, int c, int d, int h, int w, int label_spatial)
{
    Net *net = net_new("test", n);
    net_add_input(net, c, d, h, w, label_spatial);
    return net;
}

static Net *conv2d(void) { Net *n = input(3, 5, 1, 13, 11, 0); net_add_conv(n, "conv 5x5 pad 2", n->input, 8, 5, 1, 2, 1, GAUSS(0.1f), CONST(0.1f)); return n; }
static Net *conv_group(void) { Net *n = input(2, 4, 1, 9, 9, 0); net_add_conv(n, "conv stride 2 group 2", n->input, 6, 3, 2, 1, 2, GAUSS(0.1f), CONST(0.1f)); return n; }
static Net *conv3d(void) { Net *n = input(2, 3, 6, 6, 6, 0); net_add_conv(n, "conv 3d", n->input, 4, 3, 1, 1, 1, GAUSS(0.1f), CONST(0.1f)); return n; }
static Net *deconv3d(void) { Net *n = input(2, 4, 3, 3, 3, 0); net_add_deconv(n, "deconv 3d", n->input, 2, 2, GAUSS(0.1f)); return n; }
static Net *maxpool(void) { Net *n = input(3, 4, 1, 15, 15, 0); net_add_pool(n, "max pool 3/2 ceil", n->input, POOL_MAX, 3, 2, 0); return n; }
static Net *maxpool3d(void) { Net *n = input(2, 3, 5, 6, 7, 0); net_add_pool(n, "max pool 3d 3/2 pad 1", n->input, POOL_MAX, 3, 2, 1); return n; }
static Net *avepool(void) { Net *n = input(3, 4, 1, 16, 16, 0); net_add_pool(n, "ave pool 3/2 ceil", n->input, POOL_AVE, 3, 2, 0); return n; }
static Net *pool3d(void) { Net *n = input(2, 2, 5, 5, 5, 0); net_add_pool(n, "ave pool 3d pad 1", n->input, POOL_AVE, 3, 2, 1); return n; }
static Net *relu(void) { Net *n = input(4, 3, 1, 7, 7, 0); net_add_relu(n, "relu", n->input, 0); return n; }
static Net *leaky(void) { Net *n = input(2, 3, 4, 4, 4, 0); net_add_relu(n, "leaky relu", n->input, 0.01f); return n; }
static Net *lrn_within(void) { Net *n = input(3, 4, 1, 9, 9, 0); net_add_lrn(n, "lrn within", n->input, LRN_WITHIN_CHANNEL, 3, 0.5f, 0.75f); return n; }
static Net *lrn_across(void) { Net *n = input(2, 9, 1, 5, 5, 0); net_add_lrn(n, "lrn across", n->input, LRN_ACROSS_CHANNELS, 5, 0.5f, 0.75f); return n; }
/* LRN's kernels work in tiles of at most 32 along an axis: these span several, with ragged ends. */
static Net *lrn_tiles(void) { Net *n = input(2, 3, 1, 37, 70, 0); net_add_lrn(n, "lrn within, 37x70 planes", n->input, LRN_WITHIN_CHANNEL, 3, 0.5f, 0.75f); return n; }
static Net *lrn_channels(void) { Net *n = input(2, 45, 1, 3, 5, 0); net_add_lrn(n, "lrn across 45 channels", n->input, LRN_ACROSS_CHANNELS, 5, 0.5f, 0.75f); return n; }
static Net *lrn3d(void) { Net *n = input(1, 2, 5, 9, 6, 0); net_add_lrn(n, "lrn within 3d", n->input, LRN_WITHIN_CHANNEL, 3, 0.5f, 0.75f); return n; }
static Net *ip(void) { Net *n = input(5, 3, 1, 4, 4, 0); net_add_ip(n, "inner product", n->input, 7, GAUSS(0.1f), CONST(0.1f)); return n; }
static Net *dropout(void) { Net *n = input(3, 4, 1, 5, 5, 0); net_add_dropout(n, "dropout", n->input, 0.5f); return n; }
static Net *concat(void) { Net *n = input(2, 2, 1, 4, 4, 0); int o = net_add_conv(n, "side", n->input, 3, 1, 1, 0, 1, GAUSS(0.5f), CONST(0)); net_add_concat(n, "concat", n->input, o); return n; }
static Net *softmax_loss(void) { Net *n = input(16, 10, 1, 1, 1, 0); net_add_loss(n, "softmax loss", LAYER_SOFTMAX_LOSS, n->input); return n; }
static Net *voxel_loss(void) { Net *n = input(2, 3, 4, 4, 4, 1); net_add_loss(n, "softmax loss per voxel", LAYER_SOFTMAX_LOSS, n->input); return n; }
static Net *dice_loss(void) { Net *n = input(2, 3, 4, 4, 4, 1); net_add_loss(n, "dice loss", LAYER_DICE_LOSS, n->input); return n; }

static const Builder builders[] = {conv2d,     conv_group, conv3d,       deconv3d, maxpool,      maxpool3d,
                                   avepool,    pool3d,     relu,         leaky,    lrn_within,   lrn_across,
                                   lrn_tiles,  lrn_channels, lrn3d,      ip,       dropout,      concat,
                                   softmax_loss, voxel_loss, dice_loss};
#define NBUILDERS (int)(sizeof builders / sizeof *builders)
/* The layers that cuDNN runs, in pieces when the batch is cut. */
static const Builder cudnn_builders[] = {conv2d, conv_group, conv3d, deconv3d, softmax_loss, voxel_loss, dice_loss};
#define NCUDNN (int)(sizeof cudnn_builders / sizeof *cudnn_builders)

static float *host_copy(const Backend *be, const float *p, size_t n)
{
    float *h = malloc(n * sizeof *h);
    be->download(h, p, n);
    return h;
}

/* max |a - b| / max |b|, the reference b. */
static double relative_error(const float *a, const float *b, size_t n)
{
    double diff = 0, scale = 1e-20;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return diff / scale;
}

static int is_loss(const Layer *l)
{
    return l->type == LAYER_SOFTMAX_LOSS || l->type == LAYER_DICE_LOSS;
}

/* Sets up a net on a backend with the same inputs, labels and top gradient everywhere. */
static Net *prepare(Builder build, const Backend *be, uint64_t seed)
{
    Net *net = build();
    char err[256];
    net->input_gradient = 1;
    if (net_setup(net, be, 11, err, sizeof err)) bail_out("net_setup: %s", err);
    Layer *l = &net->layers[net->nlayers - 1];
    Rng rng = {seed};
    for (int b = 0; b < l->nbottom; b++) {
        Tensor *t = &net->tensors[l->bottom[b]];
        size_t n = tensor_count(t);
        float *h = malloc(n * sizeof *h);
        for (size_t i = 0; i < n; i++)
            h[i] = l->bottom[b] == net->label ? (float)(int)(rng_uniform(&rng) * net->tensors[l->bottom[0]].c)
                                              : rng_gaussian(&rng);
        be->upload(t->data, h, n);
        free(h);
    }
    for (int i = 0; i < net->nlayers - 1; i++) be->forward(net, &net->layers[i]);
    return net;
}

static void run_layer(Net *net, uint64_t seed)
{
    Layer *l = &net->layers[net->nlayers - 1];
    net->be->forward(net, l);
    Tensor *y = &net->tensors[l->top];
    if (y->diff) {
        size_t n = tensor_count(y);
        float *h = malloc(n * sizeof *h);
        Rng rng = {seed};
        for (size_t i = 0; i < n; i++) h[i] = rng_gaussian(&rng);
        net->be->upload(y->diff, h, n);
        free(h);
    }
    net->be->backward(net, l);
    net->be->synchronize();
}

static void compare(const char *layer, const char *what, const Backend *gpu, const float *g, const float *c, size_t n,
                    double bound)
{
    float *h = host_copy(gpu, g, n);
    double err = relative_error(h, c, n);
    ok(err <= bound, "%s: GPU %s matches the CPU reference (relative error %.2g)", layer, what, err);
    free(h);
}

static void against_cpu(Builder build, const Backend *gpu)
{
    Net *c = prepare(build, &cpu_backend, 5), *g = prepare(build, gpu, 5);
    run_layer(c, 6);
    run_layer(g, 6);
    Layer *lc = &c->layers[c->nlayers - 1], *lg = &g->layers[g->nlayers - 1];
    const char *name = lc->name;
    compare(name, "forward", gpu, g->tensors[lg->top].data, c->tensors[lc->top].data, tensor_count(&c->tensors[lc->top]),
            1e-4);
    for (int b = 0; b < lc->nbottom; b++) {
        if (lc->bottom[b] == c->label) continue;
        Tensor *t = &c->tensors[lc->bottom[b]];
        compare(name, b ? "second bottom gradient" : "bottom gradient", gpu, g->tensors[lg->bottom[b]].diff, t->diff,
                tensor_count(t), 5e-4);
    }
    if (lc->nparams) {
        compare(name, "weight gradient", gpu, lg->weight.t.diff, lc->weight.t.diff, tensor_count(&lc->weight.t), 5e-4);
        compare(name, "bias gradient", gpu, lg->bias.t.diff, lc->bias.t.diff, tensor_count(&lc->bias.t), 5e-4);
    }
    if (lc->type == LAYER_POOL && lc->p.pool.method == POOL_MAX) {
        size_t n = tensor_count(&lc->aux);
        float *h = host_copy(gpu, lg->aux.data, n);
        ok(!memcmp(h, lc->aux.data, n * sizeof(int32_t)), "%s: GPU argmax equals the CPU's", name);
        free(h);
    }
    net_free(c);
    net_free(g);
}

/* L = sum(y * r) (r = the top gradient) or the loss; central differences of one bottom. */
static double objective(Net *net, const float *r)
{
    Layer *l = &net->layers[net->nlayers - 1];
    Tensor *y = &net->tensors[l->top];
    net->be->forward(net, l);
    float *h = host_copy(net->be, y->data, tensor_count(y));
    double sum = 0;
    for (size_t i = 0; i < tensor_count(y); i++) sum += is_loss(l) ? h[i] : (double)h[i] * r[i];
    free(h);
    return sum;
}

static void finite_differences(Builder build, const Backend *gpu)
{
    Net *net = prepare(build, gpu, 9);
    Layer *l = &net->layers[net->nlayers - 1];
    if (l->top == l->bottom[0]) { /* in place: perturbing the input would need a copy; CPU checks these */
        skip(1, "%s runs in place", l->name);
        net_free(net);
        return;
    }
    Tensor *x = &net->tensors[l->bottom[0]], *y = &net->tensors[l->top];
    size_t n = tensor_count(x);
    /* Distinct values 4/n apart: no max-pooling or ReLU kink within eps. */
    float *xs = malloc(n * sizeof *xs);
    for (size_t i = 0; i < n; i++) xs[i] = (float)((i * 7919 + 17) % n) * (4.0f / n) - 2.0f + 2.0f / n;
    gpu->upload(x->data, xs, n);
    run_layer(net, 10);
    float *grad = host_copy(gpu, x->diff, n);
    float *r = y->diff ? host_copy(gpu, y->diff, tensor_count(y)) : NULL;
    double worst = 0;
    const float eps = 1e-3f;
    for (size_t i = 0; i < n; i += n / 20 + 1) {
        float orig = xs[i];
        xs[i] = orig + eps;
        gpu->upload(x->data, xs, n);
        double plus = objective(net, r);
        xs[i] = orig - eps;
        gpu->upload(x->data, xs, n);
        double minus = objective(net, r);
        xs[i] = orig;
        double numeric = (plus - minus) / (2 * eps);
        worst = fmax(worst, fabs(numeric - grad[i]) / (5e-3 + 5e-2 * fmax(fabs(numeric), fabs(grad[i]))));
    }
    gpu->upload(x->data, xs, n);
    ok(worst <= 1, "%s: GPU bottom gradient matches finite differences (worst %.2g)", l->name,
       worst);
    free(grad);
    free(xs);
    free(r);
    net_free(net);
}

/* A max pooling over 4 x 32768 x 16400 > 2^31 elements: the kernels index in 64 bits. The
 * values and gradients follow a pattern rather than the random generator, whose 2^31 draws
 * would take the better part of a minute on the CPU; max pooling is exact, so GPU and CPU
 * agree to the bit. */
static void large_pool(const Backend *gpu)
{
    Net *nets[2];
    const Backend *backends[2] = {&cpu_backend, gpu};
    float *results[2][3];
    for (int b = 0; b < 2; b++) {
        Net *net = nets[b] = input(4, 1, 1, 32768, 16400, 0);
        int y = net_add_pool(net, "max pool 2/2", net->input, POOL_MAX, 2, 2, 0);
        char err[256];
        net->input_gradient = 1;
        if (net_setup(net, backends[b], 1, err, sizeof err)) {
            skip(3, "no room for a max pooling of 2^31 elements on the %s: %s", backends[b]->name, err);
            if (b) net_free(nets[0]);
            net_free(net);
            return;
        }
        Tensor *x = &net->tensors[net->input], *top = &net->tensors[y];
        size_t nx = tensor_count(x), ny = tensor_count(top);
        float *h = malloc((nx > ny ? nx : ny) * sizeof *h);
        for (size_t i = 0; i < nx; i++) h[i] = (float)((i * 2654435761u) % 1000003);
        backends[b]->upload(x->data, h, nx);
        for (size_t i = 0; i < ny; i++) h[i] = (float)(i % 1009) - 504;
        backends[b]->upload(top->diff, h, ny);
        free(h);
        backends[b]->forward(net, &net->layers[0]);
        backends[b]->backward(net, &net->layers[0]);
        backends[b]->synchronize();
        results[b][0] = host_copy(backends[b], top->data, ny);
        results[b][1] = host_copy(backends[b], net->layers[0].aux.data, ny);
        results[b][2] = host_copy(backends[b], x->diff, nx);
    }
    size_t counts[3] = {tensor_count(&nets[0]->tensors[nets[0]->layers[0].top]),
                        tensor_count(&nets[0]->tensors[nets[0]->layers[0].top]),
                        tensor_count(&nets[0]->tensors[nets[0]->input])};
    const char *what[3] = {"output", "argmax", "bottom gradient"};
    for (int k = 0; k < 3; k++) {
        ok(!memcmp(results[0][k], results[1][k], counts[k] * sizeof(float)),
           "max pooling of %zu elements (64-bit indices): the GPU's %s equals the CPU's", counts[2], what[k]);
        free(results[0][k]);
        free(results[1][k]);
    }
    net_free(nets[0]);
    net_free(nets[1]);
}

/* A launch that the runtime refuses (a grid of no blocks: a sum over no channels; CUDA 13's
 * runtime says "invalid argument", earlier ones "invalid configuration argument") ends the
 * program with the kernel's name rather than leaving its result unwritten. In a child forked
 * before this process touches CUDA, whose context would not survive the fork. Returns 1 when
 * the child stopped so, 0 when not, -1 when it found no GPU; what it printed is in said. */
static int launch_refused(char *said, size_t len)
{
    int out[2];
    if (pipe(out)) bail_out("pipe: %s", strerror(errno));
    pid_t child = fork();
    if (child < 0) bail_out("fork: %s", strerror(errno));
    if (child == 0) {
        int devices = 0;
        if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) _exit(3);
        dup2(out[1], STDERR_FILENO);
        gpu_channel_sum(NULL, NULL, 1, 0, 1, 0);
        _exit(0);
    }
    close(out[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < len && (r = read(out[0], said + got, len - 1 - got)) > 0) got += (size_t)r;
    said[got] = '\0';
    close(out[0]);
    int status;
    waitpid(child, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 1 &&
           strncmp(said, "lms-trainer: CUDA error ", 24) == 0 && strstr(said, " launching channel_sum_kernel") != NULL;
}

int main(void)
{
    char err[256], said[512];
    int refused = launch_refused(said, sizeof said);
    GpuOptions opt = {.deterministic = 1, .strict_fp32 = 1, .workspace_limit = (size_t)256 << 20};
    const Backend *gpu = gpu_backend_open(0, &opt, err, sizeof err);
    if (!gpu) plan_skip_all("no GPU: %s", err);
    ok(refused == 1, "a launch the runtime refuses ends the program, naming the kernel: %s", said);
    for (int i = 0; i < NBUILDERS; i++) against_cpu(builders[i], gpu);
    for (int i = 0; i < NBUILDERS; i++) finite_differences(builders[i], gpu);
    gpu->close();
    opt.max_images = 2; /* the builders' batches of 2 to 16: pieces of 2, a last of 1 for odd ones */
    if (!(gpu = gpu_backend_open(0, &opt, err, sizeof err))) bail_out("the GPU backend does not open again: %s", err);
    for (int i = 0; i < NCUDNN; i++) against_cpu(cudnn_builders[i], gpu);
    large_pool(gpu);
    gpu->close();
    done_testing();
    return exit_status();
}
