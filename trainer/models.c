/* The built-in models, hard-coded from Caffe's prototxt files (and, for unet3d, the paper). */
#include "trainer/models.h"

#include <stdio.h>
#include <string.h>

#define GAUSS(std) ((Filler){FILL_GAUSSIAN, (std)})
#define CONST(v) ((Filler){FILL_CONSTANT, (v)})
#define XAVIER ((Filler){FILL_XAVIER, 0})
#define MSRA ((Filler){FILL_MSRA, 0})

/* Caffe's examples/mnist/lenet_train_test.prototxt */
static void build_lenet(Net *net, const ModelOptions *opt)
{
    (void)opt;
    int x = net_add_input(net, 1, 1, 28, 28, 0);
    x = net_add_conv(net, "conv1", x, 20, 5, 1, 0, 1, XAVIER, CONST(0));
    x = net_add_pool(net, "pool1", x, POOL_MAX, 2, 2, 0);
    x = net_add_conv(net, "conv2", x, 50, 5, 1, 0, 1, XAVIER, CONST(0));
    x = net_add_pool(net, "pool2", x, POOL_MAX, 2, 2, 0);
    x = net_add_ip(net, "ip1", x, 500, XAVIER, CONST(0));
    x = net_add_relu(net, "relu1", x, 0);
    x = net_add_ip(net, "ip2", x, 10, XAVIER, CONST(0));
    net_add_loss(net, "loss", LAYER_SOFTMAX_LOSS, x);
    for (const char *const *l = (const char *const[]){"conv1", "conv2", "ip1", "ip2", NULL}; *l; l++)
        net_set_mults(net, *l, 1, 1, 2, 1);
}

/* Caffe's examples/cifar10/cifar10_quick_train_test.prototxt */
static void build_cifar10_quick(Net *net, const ModelOptions *opt)
{
    (void)opt;
    int x = net_add_input(net, 3, 1, 32, 32, 0);
    x = net_add_conv(net, "conv1", x, 32, 5, 1, 2, 1, GAUSS(0.0001f), CONST(0));
    x = net_add_pool(net, "pool1", x, POOL_MAX, 3, 2, 0);
    x = net_add_relu(net, "relu1", x, 0);
    x = net_add_conv(net, "conv2", x, 32, 5, 1, 2, 1, GAUSS(0.01f), CONST(0));
    x = net_add_relu(net, "relu2", x, 0);
    x = net_add_pool(net, "pool2", x, POOL_AVE, 3, 2, 0);
    x = net_add_conv(net, "conv3", x, 64, 5, 1, 2, 1, GAUSS(0.01f), CONST(0));
    x = net_add_relu(net, "relu3", x, 0);
    x = net_add_pool(net, "pool3", x, POOL_AVE, 3, 2, 0);
    x = net_add_ip(net, "ip1", x, 64, GAUSS(0.1f), CONST(0));
    x = net_add_ip(net, "ip2", x, 10, GAUSS(0.1f), CONST(0));
    net_add_loss(net, "loss", LAYER_SOFTMAX_LOSS, x);
    for (const char *const *l = (const char *const[]){"conv1", "conv2", "conv3", "ip1", "ip2", NULL}; *l; l++)
        net_set_mults(net, *l, 1, 1, 2, 1);
}

/* Caffe's examples/cifar10/cifar10_full_train_test.prototxt */
static void build_cifar10_full(Net *net, const ModelOptions *opt)
{
    (void)opt;
    int x = net_add_input(net, 3, 1, 32, 32, 0);
    x = net_add_conv(net, "conv1", x, 32, 5, 1, 2, 1, GAUSS(0.0001f), CONST(0));
    x = net_add_pool(net, "pool1", x, POOL_MAX, 3, 2, 0);
    x = net_add_relu(net, "relu1", x, 0);
    x = net_add_lrn(net, "norm1", x, LRN_WITHIN_CHANNEL, 3, 5e-5f, 0.75f);
    x = net_add_conv(net, "conv2", x, 32, 5, 1, 2, 1, GAUSS(0.01f), CONST(0));
    x = net_add_relu(net, "relu2", x, 0);
    x = net_add_pool(net, "pool2", x, POOL_AVE, 3, 2, 0);
    x = net_add_lrn(net, "norm2", x, LRN_WITHIN_CHANNEL, 3, 5e-5f, 0.75f);
    x = net_add_conv(net, "conv3", x, 64, 5, 1, 2, 1, GAUSS(0.01f), CONST(0));
    x = net_add_relu(net, "relu3", x, 0);
    x = net_add_pool(net, "pool3", x, POOL_AVE, 3, 2, 0);
    x = net_add_ip(net, "ip1", x, 10, GAUSS(0.01f), CONST(0));
    net_add_loss(net, "loss", LAYER_SOFTMAX_LOSS, x);
    for (const char *const *l = (const char *const[]){"conv1", "conv2", "conv3", NULL}; *l; l++)
        net_set_mults(net, *l, 1, 1, 2, 1);
    net_set_mults(net, "ip1", 1, 250, 2, 0);
}

/* Caffe's models/bvlc_alexnet/train_val.prototxt (227x227 crops, 1000 classes) */
static void build_alexnet(Net *net, const ModelOptions *opt)
{
    (void)opt;
    int x = net_add_input(net, 3, 1, 227, 227, 0);
    x = net_add_conv(net, "conv1", x, 96, 11, 4, 0, 1, GAUSS(0.01f), CONST(0));
    x = net_add_relu(net, "relu1", x, 0);
    x = net_add_lrn(net, "norm1", x, LRN_ACROSS_CHANNELS, 5, 1e-4f, 0.75f);
    x = net_add_pool(net, "pool1", x, POOL_MAX, 3, 2, 0);
    x = net_add_conv(net, "conv2", x, 256, 5, 1, 2, 2, GAUSS(0.01f), CONST(0.1f));
    x = net_add_relu(net, "relu2", x, 0);
    x = net_add_lrn(net, "norm2", x, LRN_ACROSS_CHANNELS, 5, 1e-4f, 0.75f);
    x = net_add_pool(net, "pool2", x, POOL_MAX, 3, 2, 0);
    x = net_add_conv(net, "conv3", x, 384, 3, 1, 1, 1, GAUSS(0.01f), CONST(0));
    x = net_add_relu(net, "relu3", x, 0);
    x = net_add_conv(net, "conv4", x, 384, 3, 1, 1, 2, GAUSS(0.01f), CONST(0.1f));
    x = net_add_relu(net, "relu4", x, 0);
    x = net_add_conv(net, "conv5", x, 256, 3, 1, 1, 2, GAUSS(0.01f), CONST(0.1f));
    x = net_add_relu(net, "relu5", x, 0);
    x = net_add_pool(net, "pool5", x, POOL_MAX, 3, 2, 0);
    x = net_add_ip(net, "fc6", x, 4096, GAUSS(0.005f), CONST(0.1f));
    x = net_add_relu(net, "relu6", x, 0);
    x = net_add_dropout(net, "drop6", x, 0.5f);
    x = net_add_ip(net, "fc7", x, 4096, GAUSS(0.005f), CONST(0.1f));
    x = net_add_relu(net, "relu7", x, 0);
    x = net_add_dropout(net, "drop7", x, 0.5f);
    x = net_add_ip(net, "fc8", x, 1000, GAUSS(0.01f), CONST(0));
    net_add_loss(net, "loss", LAYER_SOFTMAX_LOSS, x);
    for (const char *const *l = (const char *const[]){"conv1", "conv2", "conv3", "conv4", "conv5",
                                                      "fc6", "fc7", "fc8", NULL}; *l; l++)
        net_set_mults(net, *l, 1, 1, 2, 0);
}

/* Two 3x3x3 convolutions with leaky ReLUs, as in each level of Isensee et al. 2017. */
static int unet_block(Net *net, const char *prefix, int x, int channels)
{
    char name[24];
    snprintf(name, sizeof name, "%s_conv_a", prefix);
    x = net_add_conv(net, name, x, channels, 3, 1, 1, 1, MSRA, CONST(0));
    snprintf(name, sizeof name, "%s_relu_a", prefix);
    x = net_add_relu(net, name, x, 0.01f);
    snprintf(name, sizeof name, "%s_conv_b", prefix);
    x = net_add_conv(net, name, x, channels, 3, 1, 1, 1, MSRA, CONST(0));
    snprintf(name, sizeof name, "%s_relu_b", prefix);
    return net_add_relu(net, name, x, 0.01f);
}

/* A 3D U-Net after Isensee et al. 2017 (BraTS): 4 input modalities, 3 classes, five levels
 * of 16..256 filters, strided 3x3x3 convolutions down, learned 2x up-sampling, skip
 * connections by concatenation, leaky ReLUs, soft Dice or cross-entropy loss. (The paper's
 * residual context modules, instance norm and deep supervision are left out.) */
#define UNET_LEVELS 5
static void build_unet3d(Net *net, const ModelOptions *opt)
{
    int n = opt->unet_size;
    int x = net_add_input(net, 4, n, n, n, 1), skip[UNET_LEVELS];
    char name[24];
    for (int level = 0; level < UNET_LEVELS; level++) {
        int channels = 16 << level;
        if (level) {
            snprintf(name, sizeof name, "down%d", level);
            x = net_add_conv(net, name, x, channels, 3, 2, 1, 1, MSRA, CONST(0));
        }
        snprintf(name, sizeof name, "enc%d", level);
        x = skip[level] = unet_block(net, name, x, channels);
    }
    for (int level = UNET_LEVELS - 2; level >= 0; level--) {
        int channels = 16 << level;
        snprintf(name, sizeof name, "up%d", level);
        x = net_add_deconv(net, name, x, channels, 2, MSRA);
        snprintf(name, sizeof name, "concat%d", level);
        x = net_add_concat(net, name, skip[level], x);
        snprintf(name, sizeof name, "dec%d", level);
        x = unet_block(net, name, x, channels);
    }
    x = net_add_conv(net, "classifier", x, 3, 1, 1, 0, 1, MSRA, CONST(0));
    net_add_loss(net, "loss", opt->unet_loss, x);
}

static const Model models[] = {
    {"lenet", "LeNet on MNIST digits (1x28x28, 10 classes)", 1, 1, 28, 28, 10, 0, 64, 0.00390625f, 0,
     {.base_lr = 0.01f, .momentum = 0.9f, .weight_decay = 0.0005f, .policy = LR_INV, .gamma = 0.0001f,
      .power = 0.75f, .max_iter = 10000, .test_interval = 500, .test_iter = 100, .display = 100,
      .snapshot = 5000},
     build_lenet},
    {"cifar10_quick", "Caffe's CIFAR-10 quick model (3x32x32, 10 classes)", 3, 1, 32, 32, 10, 0, 100, 1, 1,
     {.base_lr = 0.001f, .momentum = 0.9f, .weight_decay = 0.004f, .policy = LR_FIXED, .max_iter = 4000,
      .test_interval = 500, .test_iter = 100, .display = 100, .snapshot = 4000},
     build_cifar10_quick},
    {"cifar10_full", "Caffe's CIFAR-10 full model with LRN (3x32x32, 10 classes)", 3, 1, 32, 32, 10, 0, 100, 1, 1,
     {.base_lr = 0.001f, .momentum = 0.9f, .weight_decay = 0.004f, .policy = LR_FIXED, .max_iter = 60000,
      .test_interval = 1000, .test_iter = 100, .display = 200, .snapshot = 10000},
     build_cifar10_full},
    {"alexnet", "AlexNet, Caffe's bvlc_alexnet (3x227x227, 1000 classes)", 3, 1, 227, 227, 1000, 0, 256, 1, 1,
     {.base_lr = 0.01f, .momentum = 0.9f, .weight_decay = 0.0005f, .policy = LR_STEP, .gamma = 0.1f,
      .stepsize = 100000, .max_iter = 450000, .test_interval = 1000, .test_iter = 1000, .display = 20,
      .snapshot = 10000},
     build_alexnet},
    {"unet3d", "3D U-Net after Isensee et al. 2017 (4xNxNxN volumes, 3 classes)", 4, 0, 0, 0, 3, 1, 1,
     1.0f / 64, 1,
     {.base_lr = 0.01f, .momentum = 0.9f, .weight_decay = 0.0001f, .policy = LR_FIXED, .max_iter = 10000,
      .test_interval = 500, .test_iter = 10, .display = 20, .snapshot = 1000},
     build_unet3d},
};

const Model *model_find(const char *name)
{
    for (size_t i = 0; i < sizeof models / sizeof *models; i++)
        if (!strcmp(models[i].name, name)) return &models[i];
    return NULL;
}

const char *model_names(void)
{
    return "lenet, cifar10_quick, cifar10_full, alexnet, unet3d";
}

void model_input_shape(const Model *m, const ModelOptions *opt, int *c, int *d, int *h, int *w)
{
    *c = m->c;
    if (m->segmentation) {
        *d = *h = *w = opt->unet_size;
    } else {
        *d = m->d, *h = m->h, *w = m->w;
    }
}

Net *model_build(const Model *m, int batch, const ModelOptions *opt)
{
    Net *net = net_new(m->name, batch);
    net->input_scale = m->input_scale;
    net->subtract_mean = m->subtract_mean;
    m->build(net, opt);
    return net;
}
