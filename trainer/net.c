/* Building nets (shape inference), allocating them on a backend and running them. */
#include "trainer/net.h"
#include "trainer/rng.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *layer_type_name(LayerType type)
{
    static const char *const names[] = {
        [LAYER_CONV] = "Convolution", [LAYER_DECONV] = "Deconvolution", [LAYER_POOL] = "Pooling",
        [LAYER_RELU] = "ReLU", [LAYER_LRN] = "LRN", [LAYER_IP] = "InnerProduct",
        [LAYER_DROPOUT] = "Dropout", [LAYER_CONCAT] = "Concat",
        [LAYER_SOFTMAX_LOSS] = "SoftmaxWithLoss", [LAYER_DICE_LOSS] = "SoftmaxDiceLoss",
    };
    return names[type];
}

static void fail(const char *what)
{
    fprintf(stderr, "lms-trainer: model definition error: %s\n", what);
    abort(); /* a bug in models.c, never bad user input */
}

Net *net_new(const char *model, int batch)
{
    Net *net = calloc(1, sizeof *net);
    if (!net) fail("out of memory");
    snprintf(net->model, sizeof net->model, "%s", model);
    net->batch = batch;
    net->input = net->label = net->loss_layer = -1;
    net->input_scale = 1.0f;
    net->train = 1;
    return net;
}

static int add_tensor(Net *net, const char *name, int n, int c, int d, int h, int w)
{
    if (net->ntensors == NET_MAX_TENSORS) fail("too many tensors");
    if (c <= 0 || d <= 0 || h <= 0 || w <= 0) fail("a layer's output would be empty");
    int i = net->ntensors++;
    net->tensors[i] = (Tensor){.n = n, .c = c, .d = d, .h = h, .w = w};
    snprintf(net->tensor_names[i], sizeof net->tensor_names[i], "%s", name);
    return i;
}

static Layer *add_layer(Net *net, const char *name, LayerType type, int bottom)
{
    if (net->nlayers == NET_MAX_LAYERS) fail("too many layers");
    Layer *l = &net->layers[net->nlayers++];
    memset(l, 0, sizeof *l);
    l->type = type;
    snprintf(l->name, sizeof l->name, "%s", name);
    l->bottom[0] = bottom;
    l->nbottom = 1;
    return l;
}

int net_add_input(Net *net, int c, int d, int h, int w, int label_spatial)
{
    net->input = add_tensor(net, "data", net->batch, c, d, h, w);
    net->label = label_spatial ? add_tensor(net, "label", net->batch, 1, d, h, w)
                               : add_tensor(net, "label", net->batch, 1, 1, 1, 1);
    return net->input;
}

/* The window along the three axes; depth is left alone in nets of 2-D images. */
static Window window(const Net *net, int kernel, int stride, int pad)
{
    int deep = net_is_volumetric(net);
    return (Window){.kernel = {deep ? kernel : 1, kernel, kernel},
                    .stride = {deep ? stride : 1, stride, stride},
                    .pad = {deep ? pad : 0, pad, pad}};
}

static void init_param(Param *p, int n, int c, int d, int h, int w, Filler filler)
{
    p->t = (Tensor){.n = n, .c = c, .d = d, .h = h, .w = w};
    p->filler = filler;
    p->lr_mult = p->decay_mult = 1.0f;
}

int net_add_conv(Net *net, const char *name, int bottom, int out, int kernel, int stride, int pad,
                 int group, Filler weight, Filler bias)
{
    const Tensor *b = &net->tensors[bottom];
    if (b->c % group || out % group) fail("channels not divisible by group");
    Layer *l = add_layer(net, name, LAYER_CONV, bottom);
    l->p.conv.out = out;
    l->p.conv.group = group;
    Window win = l->p.conv.win = window(net, kernel, stride, pad);
    int dims[3] = {b->d, b->h, b->w};
    for (int a = 0; a < 3; a++) dims[a] = (dims[a] + 2 * win.pad[a] - win.kernel[a]) / win.stride[a] + 1;
    init_param(&l->weight, out, b->c / group, win.kernel[0], win.kernel[1], win.kernel[2], weight);
    init_param(&l->bias, 1, out, 1, 1, 1, bias);
    l->nparams = 2;
    return l->top = add_tensor(net, name, net->batch, out, dims[0], dims[1], dims[2]);
}

int net_add_deconv(Net *net, const char *name, int bottom, int out, int kernel, Filler weight)
{
    const Tensor *b = &net->tensors[bottom];
    Layer *l = add_layer(net, name, LAYER_DECONV, bottom);
    l->p.conv.out = out;
    l->p.conv.group = 1;
    Window win = l->p.conv.win = window(net, kernel, kernel, 0);
    init_param(&l->weight, b->c, out, win.kernel[0], win.kernel[1], win.kernel[2], weight);
    init_param(&l->bias, 1, out, 1, 1, 1, (Filler){FILL_CONSTANT, 0});
    l->nparams = 2;
    return l->top = add_tensor(net, name, net->batch, out, b->d * win.kernel[0],
                               b->h * win.kernel[1], b->w * win.kernel[2]);
}
/* Caffe's pooled size: (in + 2 pad - kernel) / stride + 1 rounded up, the last window
 * starting inside the padded input. */
static int pooled_size(int in, int kernel, int stride, int pad)
{
    int out = (in + 2 * pad - kernel + stride - 1) / stride + 1;
    if (pad && (out - 1) * stride >= in + pad) out--;
    return out;
}

int net_add_pool(Net *net, const char *name, int bottom, PoolMethod method, int kernel, int stride,
                 int pad)
{
    const Tensor *b = &net->tensors[bottom];
    if (pad >= kernel) fail("pooling's pad must be smaller than its kernel, as in Caffe: no window all padding");
    Layer *l = add_layer(net, name, LAYER_POOL, bottom);
    l->p.pool.method = method;
    Window win = l->p.pool.win = window(net, kernel, stride, pad);
    int dims[3] = {b->d, b->h, b->w};
    for (int a = 0; a < 3; a++) dims[a] = pooled_size(dims[a], win.kernel[a], win.stride[a], win.pad[a]);
    if (tensor_spatial(b) > INT32_MAX) fail("pooling indexes a channel in int32");
    if (method == POOL_MAX) /* the argmax of every window, for backward */
        l->aux = (Tensor){.n = b->n, .c = b->c, .d = dims[0], .h = dims[1], .w = dims[2]};
    return l->top = add_tensor(net, name, net->batch, b->c, dims[0], dims[1], dims[2]);
}

int net_add_relu(Net *net, const char *name, int bottom, float negative_slope)
{
    Layer *l = add_layer(net, name, LAYER_RELU, bottom);
    l->p.relu.negative_slope = negative_slope;
    return l->top = bottom;
}

int net_add_lrn(Net *net, const char *name, int bottom, LrnRegion region, int size, float alpha,
                float beta)
{
    if (size % 2 == 0) fail("LRN size must be odd");
    const Tensor *b = &net->tensors[bottom];
    Layer *l = add_layer(net, name, LAYER_LRN, bottom);
    l->p.lrn.region = region;
    l->p.lrn.size = size;
    l->p.lrn.alpha = alpha;
    l->p.lrn.beta = beta;
    l->p.lrn.k = 1.0f;
    l->aux = (Tensor){.n = b->n, .c = b->c, .d = b->d, .h = b->h, .w = b->w}; /* the scale */
    return l->top = add_tensor(net, name, b->n, b->c, b->d, b->h, b->w);
}

int net_add_ip(Net *net, const char *name, int bottom, int out, Filler weight, Filler bias)
{
    const Tensor *b = &net->tensors[bottom];
    Layer *l = add_layer(net, name, LAYER_IP, bottom);
    l->p.ip.out = out;
    init_param(&l->weight, out, (int)tensor_sample(b), 1, 1, 1, weight);
    init_param(&l->bias, 1, out, 1, 1, 1, bias);
    l->nparams = 2;
    return l->top = add_tensor(net, name, net->batch, out, 1, 1, 1);
}

int net_add_dropout(Net *net, const char *name, int bottom, float ratio)
{
    Layer *l = add_layer(net, name, LAYER_DROPOUT, bottom);
    l->p.dropout.ratio = ratio;
    return l->top = bottom;
}

int net_add_concat(Net *net, const char *name, int a, int b)
{
    const Tensor *x = &net->tensors[a], *y = &net->tensors[b];
    if (x->d != y->d || x->h != y->h || x->w != y->w) fail("concat of different spatial shapes");
    Layer *l = add_layer(net, name, LAYER_CONCAT, a);
    l->bottom[1] = b;
    l->nbottom = 2;
    return l->top = add_tensor(net, name, net->batch, x->c + y->c, x->d, x->h, x->w);
}

int net_add_loss(Net *net, const char *name, LayerType type, int bottom)
{
    const Tensor *b = &net->tensors[bottom], *lab = &net->tensors[net->label];
    if (tensor_spatial(b) != tensor_spatial(lab)) fail("loss: prediction and label shapes differ");
    if (type == LAYER_DICE_LOSS && b->c > 64) fail("Dice loss over more than 64 classes");
    Layer *l = add_layer(net, name, type, bottom);
    l->loss_weight = 1.0f;
    l->bottom[1] = net->label;
    l->nbottom = 2;
    l->aux = (Tensor){.n = b->n, .c = b->c, .d = b->d, .h = b->h, .w = b->w}; /* probabilities */
    net->loss_layer = net->nlayers - 1;
    return l->top = add_tensor(net, name, 1, 1, 1, 1, 1);
}

int net_is_volumetric(const Net *net)
{
    return net->tensors[net->input].d > 1;
}

Layer *net_layer(Net *net, const char *name)
{
    for (int i = 0; i < net->nlayers; i++)
        if (!strcmp(net->layers[i].name, name)) return &net->layers[i];
    fail(name);
    return NULL;
}

void net_set_mults(Net *net, const char *name, float w_lr, float w_decay, float b_lr, float b_decay)
{
    Layer *l = net_layer(net, name);
    l->weight.lr_mult = w_lr;
    l->weight.decay_mult = w_decay;
    l->bias.lr_mult = b_lr;
    l->bias.decay_mult = b_decay;
}

static int needs_diff(const Net *net, int t)
{
    return (t != net->input || net->input_gradient) && t != net->label &&
           (net->loss_layer < 0 || t != net->layers[net->loss_layer].top);
}

static int is_in_place(const Layer *l)
{
    return l->top == l->bottom[0];
}

/* The dice loss keeps per-class sums beside the probabilities: aux.diff has room for them. */
static int aux_has_diff(const Layer *l)
{
    return l->type == LAYER_DICE_LOSS;
}

/* Activations' bytes stop at SIZE_MAX rather than wrap: info is asked about batches that no
 * machine holds, and must say so rather than print a small number. */
static size_t saturating_add(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

static size_t float_bytes(const Tensor *t)
{
    const int dims[] = {t->n, t->c, t->d, t->h, t->w};
    size_t bytes = sizeof(float);
    for (size_t i = 0; i < sizeof dims / sizeof *dims; i++)
        if (__builtin_mul_overflow(bytes, (size_t)dims[i], &bytes)) return SIZE_MAX;
    return bytes;
}

NetMemory net_memory(const Net *net)
{
    NetMemory m = {0};
    for (int t = 0; t < net->ntensors; t++) {
        size_t bytes = float_bytes(&net->tensors[t]);
        m.activations = saturating_add(m.activations, needs_diff(net, t) ? saturating_add(bytes, bytes) : bytes);
        m.count += needs_diff(net, t) ? 2 : 1;
    }
    for (int i = 0; i < net->nlayers; i++) {
        const Layer *l = &net->layers[i];
        size_t aux = float_bytes(&l->aux);
        if (aux) {
            m.activations = saturating_add(m.activations, aux_has_diff(l) ? saturating_add(aux, aux) : aux);
            m.count += aux_has_diff(l) ? 2 : 1;
        }
        for (const Param *p = &l->weight; l->nparams && p <= &l->bias; p++) {
            size_t bytes = tensor_count(&p->t) * sizeof(float);
            m.params += bytes;
            m.gradients += bytes;
            m.history += bytes;
            m.count += 3;
        }
    }
    return m;
}

size_t net_param_count(const Net *net)
{
    size_t n = 0;
    NET_FOR_EACH_PARAM((Net *)net, l, p) n += tensor_count(&p->t);
    return n;
}

/* Which backward writes each tensor's diff first decides who overwrites and who adds. */
static void plan_accumulation(Net *net)
{
    char written[NET_MAX_TENSORS] = {0};
    for (int i = net->nlayers - 1; i >= 0; i--) {
        Layer *l = &net->layers[i];
        if (is_in_place(l)) continue;
        for (int b = 0; b < l->nbottom; b++) {
            l->accumulate[b] = written[l->bottom[b]];
            written[l->bottom[b]] = 1;
        }
    }
}

static void fill_param(const Backend *be, Param *p, Rng *rng, float *host)
{
    size_t n = tensor_count(&p->t);
    float fan_in = (float)(n / (size_t)p->t.n);
    for (size_t i = 0; i < n; i++) {
        switch (p->filler.type) {
        case FILL_CONSTANT: host[i] = p->filler.value; break;
        case FILL_GAUSSIAN: host[i] = p->filler.value * rng_gaussian(rng); break;
        case FILL_XAVIER: host[i] = sqrtf(3.0f / fan_in) * (2.0f * rng_uniform(rng) - 1.0f); break;
        case FILL_MSRA: host[i] = sqrtf(2.0f / fan_in) * rng_gaussian(rng); break;
        }
    }
    be->upload(p->t.data, host, n);
}

static int alloc_tensor(const Backend *be, Tensor *t, int with_diff, char *err, size_t errlen)
{
    size_t n = tensor_count(t);
    t->data = be->alloc(n);
    t->diff = with_diff ? be->alloc(n) : NULL;
    if (t->data && (t->diff || !with_diff)) return 0;
    snprintf(err, errlen, "out of %s memory allocating %zu bytes", be->name, n * sizeof(float));
    return -1;
}

int net_setup(Net *net, const Backend *be, uint64_t seed, char *err, size_t errlen)
{
    net->be = be;
    net->seed = seed;
    plan_accumulation(net);
    if (be->prepare && be->prepare(net, err, errlen)) return -1;
    for (int t = 0; t < net->ntensors; t++)
        if (alloc_tensor(be, &net->tensors[t], needs_diff(net, t), err, errlen)) return -1;
    size_t largest = 0;
    for (int i = 0; i < net->nlayers; i++) {
        Layer *l = &net->layers[i];
        if (tensor_count(&l->aux) && alloc_tensor(be, &l->aux, aux_has_diff(l), err, errlen)) return -1;
        for (Param *p = &l->weight; l->nparams && p <= &l->bias; p++) {
            if (alloc_tensor(be, &p->t, 1, err, errlen)) return -1;
            if (!(p->history = be->alloc(tensor_count(&p->t)))) {
                snprintf(err, errlen, "out of %s memory for the solver history", be->name);
                return -1;
            }
            be->zero(p->history, tensor_count(&p->t));
            if (tensor_count(&p->t) > largest) largest = tensor_count(&p->t);
        }
    }
    float *host = malloc((largest ? largest : 1) * sizeof(float));
    if (!host) {
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    Rng rng = {seed};
    NET_FOR_EACH_PARAM(net, l, p) fill_param(be, p, &rng, host);
    free(host);
    return be->setup ? be->setup(net, err, errlen) : 0;
}

static void release_tensor(const Backend *be, Tensor *t)
{
    if (t->data) be->release(t->data);
    if (t->diff) be->release(t->diff);
    t->data = t->diff = NULL;
}

void net_free(Net *net)
{
    if (!net) return;
    const Backend *be = net->be;
    if (be) {
        for (int t = 0; t < net->ntensors; t++) release_tensor(be, &net->tensors[t]);
        for (int i = 0; i < net->nlayers; i++) {
            Layer *l = &net->layers[i];
            if (be->teardown) be->teardown(l);
            release_tensor(be, &l->aux);
            for (Param *p = &l->weight; l->nparams && p <= &l->bias; p++) {
                release_tensor(be, &p->t);
                if (p->history) be->release(p->history);
            }
        }
    }
    free(net);
}

void net_forward(Net *net)
{
    for (int i = 0; i < net->nlayers; i++) net->be->forward(net, &net->layers[i]);
}

void net_backward(Net *net)
{
    for (int i = net->nlayers - 1; i >= 0; i--) net->be->backward(net, &net->layers[i]);
}

float net_loss(Net *net)
{
    float loss;
    net->be->download(&loss, net->tensors[net->layers[net->loss_layer].top].data, 1);
    return loss;
}

float net_accuracy(Net *net, float *dice)
{
    const Layer *l = &net->layers[net->loss_layer];
    const Tensor *prob = &l->aux;
    size_t n = tensor_count(prob), spatial = tensor_spatial(prob), nlabels = prob->n * spatial;
    int classes = prob->c;
    float *p = malloc(n * sizeof *p), *label = malloc(nlabels * sizeof *label);
    size_t *inter = calloc(classes, sizeof *inter), *sizes = calloc(classes, sizeof *sizes);
    if (!p || !label || !inter || !sizes) {
        fprintf(stderr, "lms-trainer: out of host memory computing accuracy\n");
        exit(1);
    }
    net->be->download(p, prob->data, n);
    net->be->download(label, net->tensors[net->label].data, nlabels);
    size_t correct = 0;
    for (size_t i = 0; i < nlabels; i++) {
        size_t b = i / spatial, s = i % spatial;
        const float *x = p + b * classes * spatial + s;
        int best = 0;
        for (int c = 1; c < classes; c++)
            if (x[c * spatial] > x[best * spatial]) best = c;
        int truth = (int)label[i];
        correct += best == truth;
        inter[best] += best == truth;
        sizes[best]++;
        sizes[truth]++;
    }
    if (dice)
        for (int c = 0; c < classes; c++) dice[c] = sizes[c] ? 2.0f * inter[c] / sizes[c] : 1.0f;
    free(p);
    free(label);
    free(inter);
    free(sizes);
    return (float)correct / nlabels;
}
