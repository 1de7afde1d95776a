/* The training loop (Caffe's Solver::Step), the test phase, timing and the memory report. */
#include "trainer/run.h"
#include "trainer/data.h"
#include "trainer/data_parallel.h"
#include "trainer/log.h"
#include "trainer/ranks.h"
#include "trainer/snapshot.h"

#include <stdlib.h>
#include <string.h>

/* A data set copied to the backend, from which batches are gathered there. */
typedef struct Feeder {
    Dataset ds;
    uint8_t *pixels, *labels; /* on the backend */
} Feeder;

static int feeder_open(Feeder *f, const Config *cfg, const Net *net, int train)
{
    char err[4300];
    memset(f, 0, sizeof *f);
    if (dataset_open(&f->ds, cfg->data, train, cfg->model, &cfg->model_options, cfg->seed, err, sizeof err)) {
        fprintf(stderr, "lms-trainer: error: %s\n", err);
        return -1;
    }
    f->pixels = net->be->upload_bytes(f->ds.pixels, f->ds.count * dataset_sample_size(&f->ds));
    f->labels = net->be->upload_bytes(f->ds.labels, f->ds.count * dataset_label_size(&f->ds));
    if (!f->pixels || !f->labels) {
        fprintf(stderr, "lms-trainer: error: out of %s memory for the data set %s\n", net->be->name, f->ds.name);
        return -1;
    }
    return 0;
}

static void feeder_close(Feeder *f, const Net *net)
{
    if (f->pixels) net->be->release_bytes(f->pixels);
    if (f->labels) net->be->release_bytes(f->labels);
    dataset_close(&f->ds);
}

/* Loads this rank's share of batch number `index` of the data set into the net's input and
 * label tensors. */
static void feed(Feeder *f, Net *net, long index)
{
    const Backend *be = net->be;
    long first = dp_first_sample(net, index);
    be->gather(net->tensors[net->input].data, f->pixels, dataset_sample_size(&f->ds), first, net->batch,
               f->ds.count, net->subtract_mean ? 128.0f : 0.0f, net->input_scale);
    be->gather(net->tensors[net->label].data, f->labels, dataset_label_size(&f->ds), first, net->batch,
               f->ds.count, 0.0f, 1.0f);
}

/* progress: a line per batch with its own figures (this rank's), as caffe test prints. */
static void test_phase(const Config *cfg, Net *net, Feeder *test, long iter, int progress)
{
    int classes = net->layers[net->loss_layer].aux.c, segmentation = cfg->model->segmentation;
    float *batch_dice = calloc(classes, sizeof *batch_dice);
    /* accuracy, loss, then the dice of each class: averaged over the ranks, each rank's share
     * of a batch being as large as another's */
    double *sums = calloc(2 + classes, sizeof *sums), *dice = sums + 2;
    log_info("Iteration %ld, Testing net (#0)", iter);
    net->train = 0;
    for (long b = 0; b < cfg->solver.test_iter; b++) {
        feed(test, net, b);
        net_forward(net);
        double accuracy = net_accuracy(net, segmentation ? batch_dice : NULL), loss = net_loss(net);
        sums[0] += accuracy;
        sums[1] += loss;
        if (progress)
            log_info("Batch %ld/%ld (%.1f%%): accuracy = %g, loss = %g", b + 1, cfg->solver.test_iter,
                     100.0 * (b + 1) / cfg->solver.test_iter, accuracy, loss);
        for (int k = 0; k < classes && segmentation; k++) dice[k] += batch_dice[k];
    }
    net->train = 1;
    dp_average(sums, 2 + classes);
    long n = cfg->solver.test_iter;
    log_info("    Test net output #0: accuracy = %g", sums[0] / n);
    log_info("    Test net output #1: loss = %g (* 1 = %g loss)", sums[1] / n, sums[1] / n);
    for (int k = 1; k < classes && segmentation; k++)
        log_info("    Test net output #%d: dice class %d = %g", k + 1, k, dice[k] / n);
    free(sums);
    free(batch_dice);
}

static int snapshot(const Config *cfg, Net *net, long iter)
{
    if (ranks_rank()) return 0; /* the ranks' weights are the same: rank 0 writes them */
    char path[4096], err[4300];
    snprintf(path, sizeof path, "%s_iter_%ld.snap", cfg->snapshot_prefix, iter);
    log_info("Snapshotting to binary file %s", path);
    if (snapshot_write(path, net, iter, err, sizeof err)) {
        fprintf(stderr, "lms-trainer: error: %s\n", err);
        return -1;
    }
    return 0;
}

static void format_duration(char *buf, size_t len, double seconds)
{
    long s = (long)(seconds + 0.5);
    snprintf(buf, len, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
}

/* Rates leave out the warm-up, whose first launches and lazy initialisation (cuDNN's and
 * cuBLAS's, the first touch of every buffer) say nothing of the steady speed: the first 5
 * iterations, or the first half of a run of fewer than 10 (so none of a single iteration),
 * unless --warmup says how many. */
static long warmup_iterations(const Config *cfg, long n)
{
    if (cfg->warmup >= 0)
        return cfg->warmup < n ? cfg->warmup : n;
    return n / 2 < 5 ? n / 2 : 5;
}

/* The clock of images/s. It runs over timed iterations only and stops for test phases and
 * snapshots; starting or stopping it waits for the device, so that queued work is counted on
 * the side where it was queued. */
typedef struct Stopwatch {
    const Backend *be;
    double total, since; /* seconds counted, and when the running stretch began (< 0: stopped) */
} Stopwatch;

static void stopwatch_start(Stopwatch *w)
{
    if (w->since >= 0) return;
    w->be->synchronize();
    w->since = w->be->seconds();
}

static void stopwatch_stop(Stopwatch *w)
{
    if (w->since < 0) return;
    w->be->synchronize();
    w->total += w->be->seconds() - w->since;
    w->since = -1;
}

/* Counted so far: the caller has waited for the device. */
static double stopwatch_read(const Stopwatch *w)
{
    return w->total + (w->since < 0 ? 0 : w->be->seconds() - w->since);
}

int run_train(const Config *cfg, Net *net)
{
    const SolverConfig *s = &cfg->solver;
    long iter = 0;
    char err[4300];
    if (cfg->resume && !ranks_rank() && snapshot_read(cfg->resume, net, &iter, err, sizeof err)) {
        fprintf(stderr, "lms-trainer: error: --resume: %s\n", err);
        return 2;
    }
    dp_share_state(net, &iter);
    if (cfg->resume) log_info("Resuming from %s at iteration %ld", cfg->resume, iter);
    Feeder train, test;
    int testing = s->test_interval > 0;
    if (feeder_open(&train, cfg, net, 1)) {
        feeder_close(&train, net);
        return 2;
    }
    if (testing && feeder_open(&test, cfg, net, 0)) {
        feeder_close(&train, net);
        feeder_close(&test, net);
        return 2;
    }
    /* Rates count the images of every rank. */
    long images = (long)net->batch * ranks_count();
    char ranks[48] = "";
    if (ranks_count() > 1) snprintf(ranks, sizeof ranks, " on each of %d ranks", ranks_count());
    log_info("Solving %s on %s, batch %d%s, %s data, lr policy %s, base_lr %g", net->model, net->be->name,
             net->batch, ranks, train.ds.name, lr_policy_name(s->policy), s->base_lr);
    const Backend *be = net->be;
    long first_iter = iter, timed_from = iter + warmup_iterations(cfg, s->max_iter - iter);
    long shown = timed_from; /* the timed iterations and the clock at the last display */
    Stopwatch clock = {be, 0, -1};
    double shown_at = 0, start = be->seconds();
    int status = 0;
    for (; iter < s->max_iter; iter++) {
        if (iter == timed_from) stopwatch_start(&clock);
        if (testing && iter % s->test_interval == 0) {
            stopwatch_stop(&clock);
            test_phase(cfg, net, &test, iter, 0);
            if (iter >= timed_from) stopwatch_start(&clock);
        }
        net->iter = iter;
        feed(&train, net, iter);
        net_forward(net);
        dp_backward(net);
        if (s->display && iter % s->display == 0) {
            double loss = net_loss(net); /* waits for the device: only when displaying */
            dp_average(&loss, 1);
            double timed = stopwatch_read(&clock), dt = timed - shown_at;
            long done = iter + 1 - shown;
            if (iter < timed_from)
                log_info("Iteration %ld (warm-up), loss = %.9g", iter, loss);
            else
                log_info("Iteration %ld (%.3g iter/s, %.4g images/s%s%s), loss = %.9g", iter, dt > 0 ? done / dt : 0,
                         dt > 0 ? done * images / dt : 0, be->clock_note ? ", " : "",
                         be->clock_note ? be->clock_note : "", loss);
            log_info("    Train net output #0: loss = %.9g (* 1 = %.9g loss)", loss, loss);
            log_info("Iteration %ld, lr = %g", iter, solver_rate(s, iter));
            char eta[32];
            double rate = iter < timed_from ? (iter + 1 - first_iter) / (be->seconds() - start)
                                            : (iter + 1 - timed_from) / timed;
            format_duration(eta, sizeof eta, rate > 0 ? (s->max_iter - iter - 1) / rate : 0);
            log_info("Progress %ld/%ld (%.1f%%), ETA %s", iter + 1, s->max_iter, 100.0 * (iter + 1) / s->max_iter, eta);
            if (iter >= timed_from) {
                shown_at = timed;
                shown = iter + 1;
            }
        }
        solver_update(net, s, iter);
        if (s->snapshot && (iter + 1) % s->snapshot == 0 && iter + 1 < s->max_iter) {
            stopwatch_stop(&clock);
            if (snapshot(cfg, net, iter + 1)) {
                status = 1;
                break;
            }
            if (iter >= timed_from) stopwatch_start(&clock);
        }
    }
    if (!status) {
        stopwatch_stop(&clock);
        if (testing && iter % s->test_interval == 0) test_phase(cfg, net, &test, iter, 0);
        if (snapshot(cfg, net, iter)) status = 1;
        long timed = iter - timed_from;
        log_info("Optimization Done: %ld iterations; the last %ld in %.3f s: %.4g images/s (%ld of warm-up, "
                 "tests and snapshots not timed%s%s).",
                 iter - first_iter, timed, clock.total, clock.total > 0 ? timed * images / clock.total : 0,
                 timed_from - first_iter, be->clock_note ? "; " : "", be->clock_note ? be->clock_note : "");
    }
    feeder_close(&train, net);
    if (testing) feeder_close(&test, net);
    return status;
}

int run_test(const Config *cfg, Net *net)
{
    long iter;
    char err[4300];
    if (snapshot_read(cfg->weights, net, &iter, err, sizeof err)) {
        fprintf(stderr, "lms-trainer: error: --weights: %s\n", err);
        return 2;
    }
    Feeder test;
    if (feeder_open(&test, cfg, net, 0)) {
        feeder_close(&test, net);
        return 2;
    }
    test_phase(cfg, net, &test, iter, 1);
    feeder_close(&test, net);
    return 0;
}

int run_time(const Config *cfg, Net *net)
{
    const Backend *be = net->be;
    Feeder train;
    if (feeder_open(&train, cfg, net, 1)) {
        feeder_close(&train, net);
        return 2;
    }
    feed(&train, net, 0);
    double *fwd = calloc(net->nlayers, sizeof *fwd), *bwd = calloc(net->nlayers, sizeof *bwd);
    long n = cfg->time_iterations, warmup = warmup_iterations(cfg, n), timed = n - warmup;
    be->synchronize();
    double start = be->seconds();
    for (long it = 0; it < n; it++) {
        if (it == warmup) start = be->seconds(); /* every layer has been waited for */
        for (int i = 0; i < net->nlayers; i++) {
            double t = be->seconds();
            be->forward(net, &net->layers[i]);
            be->synchronize();
            if (it >= warmup) fwd[i] += be->seconds() - t;
        }
        for (int i = net->nlayers - 1; i >= 0; i--) {
            double t = be->seconds();
            be->backward(net, &net->layers[i]);
            be->synchronize();
            if (it >= warmup) bwd[i] += be->seconds() - t;
        }
    }
    double total = be->seconds() - start, ftotal = 0, btotal = 0;
    for (int i = 0; i < net->nlayers; i++) {
        log_info("%12s\tforward: %.5f ms.", net->layers[i].name, 1e3 * fwd[i] / timed);
        log_info("%12s\tbackward: %.5f ms.", net->layers[i].name, 1e3 * bwd[i] / timed);
        ftotal += fwd[i];
        btotal += bwd[i];
    }
    log_info("Average Forward pass: %.5f ms.", 1e3 * ftotal / timed);
    log_info("Average Backward pass: %.5f ms.", 1e3 * btotal / timed);
    log_info("Average Forward-Backward: %.5f ms (%.4g images/s, synchronising after every layer; over %ld passes "
             "after %ld of warm-up%s%s).",
             1e3 * total / timed, timed * net->batch / total, timed, warmup, be->clock_note ? "; " : "",
             be->clock_note ? be->clock_note : "");
    free(fwd);
    free(bwd);
    feeder_close(&train, net);
    return 0;
}

static double mib(size_t bytes)
{
    return bytes / 1048576.0;
}

/* More than any machine holds: the largest GPUs have under 256 GiB, the largest single hosts
 * 32 to 48 TiB, and liblms can at most keep a run's tensors in its host's memory. */
#define LARGEST_MACHINE_BYTES ((size_t)64 << 40)

/* info's refusal of a batch no machine holds, with the largest that fits in the bound. */
static int beyond_any_machine(const Config *cfg, const Net *net)
{
    if (net_memory(net).activations <= LARGEST_MACHINE_BYTES) return 0;
    Net *one = model_build(cfg->model, 1, &cfg->model_options);
    size_t per_image = net_memory(one).activations;
    net_free(one);
    char fits[64] = "not even one sample fits";
    if (per_image <= LARGEST_MACHINE_BYTES)
        snprintf(fits, sizeof fits, "batch %zu at most fits", LARGEST_MACHINE_BYTES / per_image);
    if (!ranks_rank()) /* the same in every rank */
        fprintf(stderr, "lms-trainer: error: --batch %d: %s would need more than 64 TiB, more than any GPU and its "
                        "host's memory hold together (%s)\n", net->batch, net->model, fits);
    return 1;
}

/* The device memory each rank plans for, gathered on rank 0: equal, since every rank holds
 * the whole net at its own batch and none holds more (no DataParallel gathering on one). */
static void print_rank_memory(size_t total, FILE *out)
{
    double *per_rank = calloc((size_t)ranks_count(), sizeof *per_rank);
    if (!per_rank) {
        fprintf(stderr, "lms-trainer: error: out of host memory\n");
        ranks_fail(1);
    }
    dp_gather((double)total, per_rank);
    if (!ranks_rank()) {
        fprintf(out, "Device memory per rank, %d ranks (each its own share of every global batch):\n", ranks_count());
        for (int r = 0; r < ranks_count(); r++)
            fprintf(out, "  rank %d: %.0f bytes (%.1f MiB)\n", r, per_rank[r], mib((size_t)per_rank[r]));
    }
    free(per_rank);
}

static void print_net(const Config *cfg, const Net *net, NetMemory m, size_t total, FILE *out)
{
    const Tensor *in = &net->tensors[net->input];
    fprintf(out, "Model %s: %s\n", net->model, cfg->model->description);
    fprintf(out, "Batch %d, input %dx%dx%dx%d\n\n", net->batch, in->c, in->d, in->h, in->w);
    fprintf(out, "%-14s %-16s %-22s %12s %10s\n", "layer", "type", "top (NxCxDxHxW)", "params", "top MiB");
    for (int i = 0; i < net->nlayers; i++) {
        const Layer *l = &net->layers[i];
        const Tensor *t = &net->tensors[l->top];
        char shape[64];
        snprintf(shape, sizeof shape, "%dx%dx%dx%dx%d", t->n, t->c, t->d, t->h, t->w);
        size_t params = l->nparams ? tensor_count(&l->weight.t) + tensor_count(&l->bias.t) : 0;
        fprintf(out, "%-14s %-16s %-22s %12zu %10.2f%s\n", l->name, layer_type_name(l->type), shape, params,
                mib(tensor_count(t) * sizeof(float)), l->top == l->bottom[0] ? " (in place)" : "");
    }
    fprintf(out, "\nParameters: %zu\n", net_param_count(net));
    fprintf(out, "Device memory for batch %d, one cudaMalloc per tensor (%zu allocations):\n", net->batch, m.count);
    fprintf(out, "  activations: %zu bytes (%.1f MiB)  data, diff and layer buffers\n", m.activations, mib(m.activations));
    fprintf(out, "  weights:     %zu bytes (%.1f MiB)\n", m.params, mib(m.params));
    fprintf(out, "  gradients:   %zu bytes (%.1f MiB)\n", m.gradients, mib(m.gradients));
    fprintf(out, "  history:     %zu bytes (%.1f MiB)  solver momentum\n", m.history, mib(m.history));
    fprintf(out, "  total:       %zu bytes (%.1f MiB)\n", total, mib(total));
    fprintf(out, "  plus the cuDNN workspace (chosen at setup, at most %.0f MiB), the data set (kept on the\n"
                 "  device as bytes) and the CUDA context\n", mib(cfg->gpu_options.workspace_limit));
}

int run_info(const Config *cfg, const Net *net, FILE *out)
{
    if (beyond_any_machine(cfg, net)) return 2;
    NetMemory m = net_memory(net);
    size_t total = m.activations + m.params + m.gradients + m.history;
    if (!ranks_rank()) print_net(cfg, net, m, total, out);
    if (ranks_count() > 1) print_rank_memory(total, out);
    return 0;
}
