/* Nets and the solver: the built-in models' shapes (Caffe's ceil pooling), parameter counts,
 * memory figures, the learning-rate policies, one SGD step by hand, and a whole-net gradient
 * check through a tensor that feeds two layers (backward adds their gradients). */
#include "tests/tap.h"
#include "trainer/models.h"
#include "trainer/net.h"
#include "trainer/solver.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const Tensor *top_of(Net *net, const char *layer)
{
    return &net->tensors[net_layer(net, layer)->top];
}

static int shape_is(const Tensor *t, int c, int d, int h, int w)
{
    return t->c == c && t->d == d && t->h == h && t->w == w;
}

static void test_shapes(void)
{
    ModelOptions opt = {.unet_size = 32, .unet_loss = LAYER_DICE_LOSS};
    Net *net = model_build(model_find("cifar10_full"), 10, &opt);
    ok(shape_is(top_of(net, "pool1"), 32, 1, 16, 16) && shape_is(top_of(net, "pool2"), 32, 1, 8, 8) &&
           shape_is(top_of(net, "pool3"), 64, 1, 4, 4),
       "cifar10_full pools 32 -> 16 -> 8 -> 4, rounding up as Caffe does");
    Layer *norm1 = net_layer(net, "norm1");
    ok(norm1->p.lrn.region == LRN_WITHIN_CHANNEL && norm1->p.lrn.size == 3 && norm1->p.lrn.alpha == 5e-5f &&
           norm1->p.lrn.beta == 0.75f,
       "cifar10_full LRN: within channel, local_size 3, alpha 5e-5, beta 0.75");
    Layer *ip1 = net_layer(net, "ip1");
    ok(ip1->weight.decay_mult == 250 && ip1->bias.decay_mult == 0 && ip1->bias.lr_mult == 2,
       "cifar10_full ip1: decay_mult 250 / 0, bias lr_mult 2");
    is_uint(net_param_count(net), 89578, "cifar10_full parameters");
    const SolverConfig *s = &model_find("cifar10_full")->solver;
    ok(s->base_lr == 0.001f && s->momentum == 0.9f && s->weight_decay == 0.004f && s->policy == LR_FIXED &&
           s->max_iter == 60000 && s->test_interval == 1000 && s->snapshot == 10000,
       "cifar10_full solver defaults are Caffe's");
    net_free(net);

    net = model_build(model_find("lenet"), 64, &opt);
    is_uint(net_param_count(net), 431080, "lenet parameters");
    NetMemory m = net_memory(net);
    is_uint(m.params, 431080 * 4, "lenet weights take 4 bytes per parameter");
    is_uint(m.activations, 10827524, "lenet activations at batch 64 (computed by hand in trainer_cli.sh)");
    net_free(net);

    net = model_build(model_find("alexnet"), 2, &opt);
    ok(shape_is(top_of(net, "conv1"), 96, 1, 55, 55) && shape_is(top_of(net, "pool1"), 96, 1, 27, 27) &&
           shape_is(top_of(net, "pool2"), 256, 1, 13, 13) && shape_is(top_of(net, "pool5"), 256, 1, 6, 6),
       "alexnet: conv1 55x55, pools 27, 13, 6");
    is_uint(net_param_count(net), 60965224, "alexnet has 60965224 parameters, as Caffe's bvlc_alexnet");
    net_free(net);

    net = model_build(model_find("unet3d"), 1, &opt);
    const Layer *loss = &net->layers[net->loss_layer];
    ok(loss->type == LAYER_DICE_LOSS && shape_is(&loss->aux, 3, 32, 32, 32) &&
           shape_is(top_of(net, "enc4_relu_b"), 256, 2, 2, 2),
       "unet3d at 32^3: 256 channels at 2^3, 3 classes per voxel at full resolution");
    net_free(net);
}

static void test_policies(void)
{
    SolverConfig s = {.base_lr = 0.01f, .gamma = 0.1f, .stepsize = 100, .power = 0.75f};
    s.policy = LR_FIXED;
    ok(solver_rate(&s, 12345) == 0.01f, "fixed");
    s.policy = LR_STEP;
    ok(fabsf(solver_rate(&s, 99) - 0.01f) < 1e-9f && fabsf(solver_rate(&s, 250) - 0.0001f) < 1e-9f, "step");
    s.policy = LR_INV;
    s.gamma = 0.0001f;
    ok(fabsf(solver_rate(&s, 10000) - 0.01f * powf(2.0f, -0.75f)) < 1e-8f, "inv: base_lr (1 + gamma iter)^-power");
    s.policy = LR_MULTISTEP;
    s.gamma = 0.5f;
    s.stepvalues[0] = 10, s.stepvalues[1] = 20, s.nstepvalues = 2;
    ok(solver_rate(&s, 9) == 0.01f && solver_rate(&s, 10) == 0.005f && solver_rate(&s, 25) == 0.0025f,
       "multistep");
}

static void test_sgd_step(void)
{
    Net *net = net_new("test", 1);
    net_add_input(net, 1, 1, 1, 2, 0);
    int y = net_add_ip(net, "ip", net->input, 2, (Filler){FILL_CONSTANT, 0.5f}, (Filler){FILL_CONSTANT, 0});
    net_add_loss(net, "loss", LAYER_SOFTMAX_LOSS, y);
    net_set_mults(net, "ip", 1, 1, 2, 0);
    char err[128];
    net_setup(net, &cpu_backend, 1, err, sizeof err);
    Layer *ip = net_layer(net, "ip");
    ip->weight.t.diff[0] = 1.0f;
    ip->weight.history[0] = 0.2f;
    ip->bias.t.diff[0] = 1.0f;
    SolverConfig s = {.base_lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f, .policy = LR_FIXED};
    solver_update(net, &s, 0);
    /* history = 0.9 * 0.2 + 0.1 * (1 + 0.01 * 0.5) = 0.2805; w = 0.5 - 0.2805 */
    ok(fabsf(ip->weight.history[0] - 0.2805f) < 1e-7f && fabsf(ip->weight.t.data[0] - 0.2195f) < 1e-7f,
       "SGD with momentum and weight decay: w = %g, history = %g", ip->weight.t.data[0], ip->weight.history[0]);
    /* bias: lr_mult 2, decay_mult 0: history = 0.2 * 1 */
    ok(fabsf(ip->bias.t.data[0] + 0.2f) < 1e-7f, "lr_mult and decay_mult scale the bias step: b = %g",
       ip->bias.t.data[0]);
    net_free(net);
}

static double loss_of(Net *net)
{
    net_forward(net);
    return net_loss(net);
}

/* t1 = conv(x) feeds conv2 and the concat: its gradient is the sum of both paths. */
static void test_shared_tensor_gradient(void)
{
    Net *net = net_new("test", 2);
    net_add_input(net, 2, 1, 4, 4, 1);
    Filler g = {FILL_GAUSSIAN, 0.5f}, zero = {FILL_CONSTANT, 0};
    int t1 = net_add_conv(net, "conv1", net->input, 3, 3, 1, 1, 1, g, zero);
    int t2 = net_add_conv(net, "conv2", t1, 3, 3, 1, 1, 1, g, zero);
    int cat = net_add_concat(net, "concat", t1, t2);
    int out = net_add_conv(net, "head", cat, 3, 1, 1, 0, 1, g, zero);
    net_add_loss(net, "loss", LAYER_SOFTMAX_LOSS, out);
    char err[128];
    net_setup(net, &cpu_backend, 7, err, sizeof err);
    Tensor *x = &net->tensors[net->input], *label = &net->tensors[net->label];
    for (size_t i = 0; i < tensor_count(x); i++) x->data[i] = sinf((float)i);
    for (size_t i = 0; i < tensor_count(label); i++) label->data[i] = (float)(i % 3);
    ok(net_layer(net, "concat")->accumulate[0] == 0 && net_layer(net, "conv2")->accumulate[0] == 1,
       "the tensor feeding two layers: the last consumer's backward (run first) overwrites, the other adds");
    loss_of(net);
    net_backward(net);
    Param *w = &net_layer(net, "conv1")->weight;
    size_t n = tensor_count(&w->t);
    float *analytic = malloc(n * sizeof *analytic);
    memcpy(analytic, w->t.diff, n * sizeof *analytic);
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        float orig = w->t.data[i];
        w->t.data[i] = orig + 1e-3f;
        double plus = loss_of(net);
        w->t.data[i] = orig - 1e-3f;
        double minus = loss_of(net);
        w->t.data[i] = orig;
        double numeric = (plus - minus) / 2e-3, err_i = fabs(numeric - analytic[i]) / (1e-3 + 2e-2 * fabs(numeric));
        if (err_i > worst) worst = err_i;
    }
    ok(worst <= 1, "whole-net gradient of conv1's weights through both paths matches finite differences");
    free(analytic);
    net_free(net);
}

int main(void)
{
    plan(19);
    test_shapes();
    test_policies();
    test_sgd_step();
    test_shared_tensor_gradient();
    return exit_status();
}
