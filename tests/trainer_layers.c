/* Finite-difference gradient check of every CPU reference layer: for L = sum(y * r) with a
 * fixed random r (or L = the loss, for loss layers), the analytic gradients of backward
 * against central differences, for the bottoms and for the weights and biases. */
#include "tests/tap.h"
#include "trainer/cpu_layers.h"
#include "trainer/net.h"
#include "trainer/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EPS 1e-3f
#define SAMPLES 40 /* elements checked per tensor, spread over it */

/* Distinct values at least 4 / count apart and none near zero, so max pooling and ReLU have
 * no kink within EPS. */
static void fill_distinct(float *x, size_t count, uint64_t salt)
{
    for (size_t i = 0; i < count; i++)
        x[i] = (float)((i * 7919 + salt) % count) * (4.0f / count) - 2.0f + 2.0f / count;
}

typedef struct Check {
    Net *net;
    Layer *layer;
    float *saved[2]; /* the bottoms' data, restored before every forward (layers may run in place) */
    float *r;
} Check;

static double objective(Check *c)
{
    Net *net = c->net;
    Layer *l = c->layer;
    for (int b = 0; b < l->nbottom; b++) {
        Tensor *t = &net->tensors[l->bottom[b]];
        memcpy(t->data, c->saved[b], tensor_count(t) * sizeof(float));
    }
    cpu_backend.forward(net, l);
    Tensor *y = &net->tensors[l->top];
    if (l->type == LAYER_SOFTMAX_LOSS || l->type == LAYER_DICE_LOSS) return y->data[0];
    double sum = 0;
    for (size_t i = 0; i < tensor_count(y); i++) sum += (double)y->data[i] * c->r[i];
    return sum;
}

/* Compares analytic gradient g of the values v (perturbed in place) with central differences. */
static void compare(Check *c, float *v, float *perturb_target_saved, const float *g, size_t count, const char *what)
{
    double worst = 0;
    size_t step = count > SAMPLES ? count / SAMPLES : 1;
    for (size_t i = 0; i < count; i += step) {
        float *target = perturb_target_saved ? perturb_target_saved : v;
        float orig = target[i];
        target[i] = orig + EPS;
        double plus = objective(c);
        target[i] = orig - EPS;
        double minus = objective(c);
        target[i] = orig;
        double numeric = (plus - minus) / (2 * EPS);
        double err = fabs(numeric - g[i]) / (2e-3 + 2e-2 * fmax(fabs(numeric), fabs(g[i])));
        if (err > worst) worst = err;
        if (err > 1) diag("%s[%zu]: numeric %g, analytic %g", what, i, numeric, g[i]);
    }
    ok(worst <= 1, "%s: %s gradient matches finite differences", c->layer->name, what);
}

static void check_net(Net *net, uint64_t seed)
{
    char err[256];
    net->input_gradient = 1;
    if (net_setup(net, &cpu_backend, seed, err, sizeof err)) bail_out("net_setup: %s", err);
    Layer *l = &net->layers[net->nlayers - 1];
    Check c = {.net = net, .layer = l};
    for (int b = 0; b < l->nbottom; b++) {
        Tensor *t = &net->tensors[l->bottom[b]];
        size_t n = tensor_count(t);
        c.saved[b] = malloc(n * sizeof(float));
        if (l->bottom[b] == net->label) {
            Rng rng = {seed};
            int classes = net->tensors[l->bottom[0]].c;
            for (size_t i = 0; i < n; i++) c.saved[b][i] = (float)(int)(rng_uniform(&rng) * classes);
        } else {
            fill_distinct(c.saved[b], n, 17 + b);
        }
    }
    Tensor *y = &net->tensors[l->top];
    c.r = malloc(tensor_count(y) * sizeof(float));
    Rng rng = {seed + 1};
    for (size_t i = 0; i < tensor_count(y); i++) c.r[i] = rng_uniform(&rng) - 0.5f;

    objective(&c);
    if (y->diff) memcpy(y->diff, c.r, tensor_count(y) * sizeof(float));
    cpu_backend.backward(net, l);
    float *grads[4] = {0};
    for (int b = 0; b < l->nbottom; b++) {
        Tensor *t = &net->tensors[l->bottom[b]];
        if (l->bottom[b] == net->label) continue;
        grads[b] = malloc(tensor_count(t) * sizeof(float));
        memcpy(grads[b], t->diff, tensor_count(t) * sizeof(float));
    }
    for (int b = 0; b < l->nbottom; b++)
        if (grads[b]) compare(&c, NULL, c.saved[b], grads[b], tensor_count(&net->tensors[l->bottom[b]]), b ? "second bottom" : "bottom");
    if (l->nparams) {
        compare(&c, l->weight.t.data, NULL, l->weight.t.diff, tensor_count(&l->weight.t), "weight");
        compare(&c, l->bias.t.data, NULL, l->bias.t.diff, tensor_count(&l->bias.t), "bias");
    }
    for (int b = 0; b < 2; b++) {
        free(c.saved[b]);
        free(grads[b]);
    }
    free(c.r);
    net_free(net);
}

static Net *input_net(int n, int c, int d, int h, int w, int label_spatial)
{
    Net *net = net_new("test", n);
    net_add_input(net, c, d, h, w, label_spatial);
    return net;
}

#define GAUSS(s) ((Filler){FILL_GAUSSIAN, (s)})
#define CONST(v) ((Filler){FILL_CONSTANT, (v)})

int main(void)
{
    plan(36);
    Net *net;

    net = input_net(2, 3, 1, 7, 6, 0);
    net_add_conv(net, "conv 2d pad 1", net->input, 4, 3, 1, 1, 1, GAUSS(0.5f), CONST(0.1f));
    check_net(net, 1);

    net = input_net(2, 4, 1, 9, 8, 0);
    net_add_conv(net, "conv stride 2 group 2", net->input, 6, 5, 2, 2, 2, GAUSS(0.5f), CONST(0.1f));
    check_net(net, 2);

    net = input_net(1, 2, 5, 4, 6, 0);
    net_add_conv(net, "conv 3d", net->input, 3, 3, 2, 1, 1, GAUSS(0.5f), CONST(0.1f));
    check_net(net, 3);

    net = input_net(2, 3, 4, 4, 2, 0);
    net_add_deconv(net, "deconv 3d", net->input, 2, 2, GAUSS(0.5f));
    check_net(net, 4);

    net = input_net(2, 2, 1, 7, 7, 0);
    int p = net_add_pool(net, "max pool ceil", net->input, POOL_MAX, 3, 2, 0);
    is_int(net->tensors[p].h, 3, "pooled 7 by 3/2 is 3");
    check_net(net, 5);

    net = input_net(2, 2, 1, 8, 8, 0);
    p = net_add_pool(net, "ave pool ceil", net->input, POOL_AVE, 3, 2, 0);
    is_int(net->tensors[p].h, 4, "pooled 8 by 3/2 rounds up to 4");
    check_net(net, 6);

    net = input_net(1, 2, 5, 5, 5, 0);
    net_add_pool(net, "ave pool 3d pad", net->input, POOL_AVE, 3, 2, 1);
    check_net(net, 7);

    net = input_net(1, 2, 4, 4, 4, 0);
    net_add_pool(net, "max pool 3d", net->input, POOL_MAX, 2, 2, 0);
    check_net(net, 8);

    net = input_net(2, 3, 1, 4, 5, 0);
    net_add_relu(net, "relu in place", net->input, 0);
    check_net(net, 9);

    net = input_net(2, 3, 2, 4, 5, 0);
    net_add_relu(net, "leaky relu", net->input, 0.01f);
    check_net(net, 10);

    net = input_net(2, 3, 1, 5, 6, 0);
    net_add_lrn(net, "lrn within", net->input, LRN_WITHIN_CHANNEL, 3, 0.5f, 0.75f);
    check_net(net, 11);

    net = input_net(1, 2, 3, 4, 4, 0);
    net_add_lrn(net, "lrn within 3d", net->input, LRN_WITHIN_CHANNEL, 3, 0.5f, 0.75f);
    check_net(net, 12);

    net = input_net(2, 7, 1, 3, 3, 0);
    net_add_lrn(net, "lrn across", net->input, LRN_ACROSS_CHANNELS, 5, 0.5f, 0.75f);
    check_net(net, 13);

    net = input_net(3, 2, 1, 3, 4, 0);
    net_add_ip(net, "inner product", net->input, 5, GAUSS(0.5f), CONST(0.1f));
    check_net(net, 14);

    net = input_net(2, 3, 1, 4, 4, 0);
    net_add_dropout(net, "dropout", net->input, 0.3f);
    check_net(net, 15);

    net = input_net(2, 2, 1, 3, 3, 0);
    int other = net_add_conv(net, "other", net->input, 3, 1, 1, 0, 1, GAUSS(0.5f), CONST(0));
    net_add_concat(net, "concat", net->input, other);
    check_net(net, 16);

    net = input_net(4, 5, 1, 1, 1, 0);
    net_add_loss(net, "softmax loss", LAYER_SOFTMAX_LOSS, net->input);
    check_net(net, 17);

    net = input_net(2, 3, 2, 3, 3, 1);
    net_add_loss(net, "softmax loss per voxel", LAYER_SOFTMAX_LOSS, net->input);
    check_net(net, 18);

    net = input_net(2, 3, 2, 3, 3, 1);
    net_add_loss(net, "dice loss", LAYER_DICE_LOSS, net->input);
    check_net(net, 19);

    /* Values of a few layers, computed by hand. */
    net = input_net(1, 1, 1, 2, 3, 0);
    net_add_pool(net, "avg", net->input, POOL_AVE, 2, 2, 0);
    char err[256];
    net_setup(net, &cpu_backend, 1, err, sizeof err);
    const float x[6] = {1, 2, 3, 4, 5, 6};
    memcpy(net->tensors[net->input].data, x, sizeof x);
    net_forward(net);
    const float *y = net->tensors[net->layers[0].top].data;
    ok(y[0] == 3.0f && y[1] == 4.5f, "ceil average pooling divides the overhanging window by its clipped size: %g %g",
       y[0], y[1]);
    net_free(net);

    /* Max pooling keeps each window's winner for backward: the first largest in scan order, an
     * int32 index within the channel; backward routes each gradient there alone. */
    net = input_net(1, 2, 1, 3, 5, 0);
    int pooled = net_add_pool(net, "max", net->input, POOL_MAX, 3, 2, 0);
    net->input_gradient = 1;
    net_setup(net, &cpu_backend, 1, err, sizeof err);
    const float planes[30] = {1, 9, 3, 9, 5, 2, 0, 7, 1, 1, 0, 0, 0, 0, 0, /* ties everywhere: */
                              4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
    memcpy(net->tensors[net->input].data, planes, sizeof planes);
    net_forward(net);
    const int32_t *won = (const int32_t *)net->layers[0].aux.data;
    ok(net->tensors[pooled].w == 2 && won[0] == 1 && won[1] == 3 && won[2] == 0 && won[3] == 2,
       "max pooling saves the argmax within the channel, the first in scan order: %d %d, ties %d %d", won[0], won[1],
       won[2], won[3]);
    memcpy(net->tensors[pooled].diff, (const float[]){1, 2, 3, 4}, 4 * sizeof(float));
    net_backward(net);
    const float *dx = net->tensors[net->input].diff;
    float want[30] = {0};
    want[1] = 1, want[3] = 2, want[15] = 3, want[17] = 4;
    ok(!memcmp(dx, want, sizeof want), "max pooling's backward sends each gradient to the saved argmax only");
    net_free(net);

    net = input_net(1, 1, 1, 1, 3, 0);
    net_add_lrn(net, "lrn", net->input, LRN_WITHIN_CHANNEL, 3, 9.0f, 1.0f);
    net_setup(net, &cpu_backend, 1, err, sizeof err);
    const float v[3] = {1, 2, 3};
    memcpy(net->tensors[net->input].data, v, sizeof v);
    net_forward(net);
    y = net->tensors[net->layers[0].top].data;
    /* s = 1 + 9/9 * (sum of squares in the 3x3 window, zero padded) */
    ok(fabsf(y[1] - 2.0f / 15.0f) < 1e-6f && fabsf(y[0] - 1.0f / 6.0f) < 1e-6f,
       "within-channel LRN divides alpha by size^2: %g %g", y[0], y[1]);
    net_free(net);
    return exit_status();
}
