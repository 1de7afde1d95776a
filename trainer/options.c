#include "trainer/options.h"
#include "trainer/snapshot.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_MODEL = 256, OPT_BATCH, OPT_ITERS, OPT_DATA, OPT_SEED, OPT_LR, OPT_LR_POLICY, OPT_GAMMA,
    OPT_POWER, OPT_STEPSIZE, OPT_STEPVALUES, OPT_MOMENTUM, OPT_WEIGHT_DECAY, OPT_TEST_INTERVAL,
    OPT_TEST_ITERS, OPT_DISPLAY, OPT_SNAPSHOT, OPT_SNAPSHOT_PREFIX, OPT_RESUME, OPT_WEIGHTS, OPT_CPU,
    OPT_SIM, OPT_GPU, OPT_DETERMINISTIC, OPT_STRICT_FP32, OPT_WORKSPACE, OPT_CUDNN_BATCH, OPT_SIZE, OPT_LOSS,
    OPT_WARMUP, OPT_HELP,
};

typedef struct OptionInfo {
    const char *name;
    int key;
    const char *arg; /* NULL for a flag */
    const char *help;
} OptionInfo;

static const OptionInfo option_table[] = {
    {"model", OPT_MODEL, "NAME", "lenet, cifar10_quick, cifar10_full, alexnet or unet3d (required)"},
    {"batch", OPT_BATCH, "N", "samples per iteration (default: the model's, Caffe's)"},
    {"iters", OPT_ITERS, "N",
     "train: iterations to run in all (max_iter); test: batches to evaluate, as --test-iters; time: passes "
     "(default 50)"},
    {"warmup", OPT_WARMUP, "N",
     "train and time: iterations (passes) left out of the rates, fewer than --iters (default: 5, or the first "
     "half of a run of fewer than 10)"},
    {"data", OPT_DATA, "SPEC", "synthetic (default), cifar10:DIR or mnist:DIR"},
    {"seed", OPT_SEED, "N", "seed of the weights, the synthetic data and dropout (default 1)"},
    {"lr", OPT_LR, "RATE", "base learning rate"},
    {"lr-policy", OPT_LR_POLICY, "NAME", "fixed, step, inv or multistep"},
    {"gamma", OPT_GAMMA, "X", "learning-rate factor of step, inv and multistep"},
    {"power", OPT_POWER, "X", "power of the inv policy"},
    {"stepsize", OPT_STEPSIZE, "N", "iterations between steps of the step policy"},
    {"stepvalues", OPT_STEPVALUES, "N,N,...", "iterations of the multistep policy's steps"},
    {"momentum", OPT_MOMENTUM, "X", "SGD momentum"},
    {"weight-decay", OPT_WEIGHT_DECAY, "X", "L2 weight decay"},
    {"test-interval", OPT_TEST_INTERVAL, "N", "test every N iterations (0: never)"},
    {"test-iters", OPT_TEST_ITERS, "N", "batches per test phase"},
    {"display", OPT_DISPLAY, "N", "log the loss every N iterations (0: never)"},
    {"snapshot", OPT_SNAPSHOT, "N", "snapshot every N iterations (0: only at the end)"},
    {"snapshot-prefix", OPT_SNAPSHOT_PREFIX, "PATH", "snapshots go to PATH_iter_N.snap (default: MODEL)"},
    {"resume", OPT_RESUME, "FILE", "train: continue from this snapshot"},
    {"weights", OPT_WEIGHTS, "FILE", "test: the snapshot to evaluate"},
    {"cpu", OPT_CPU, NULL, "run on the CPU reference layers (slow; no GPU needed)"},
    {"sim", OPT_SIM, NULL, "run the GPU's driver calls on the simulated GPU (sim/; no GPU needed)"},
    {"gpu", OPT_GPU, "N|N,N,...|all",
     "run on CUDA device N (default 0), or simulated device N with --sim; a list, or all the node's "
     "devices, starts one rank per device under mpirun, each seeing its own (with --sim, a simulated "
     "GPU each)"},
    {"deterministic", OPT_DETERMINISTIC, NULL, "GPU: only deterministic cuDNN algorithms"},
    {"strict-fp32", OPT_STRICT_FP32, NULL, "GPU: no TF32 tensor-core math in convolutions and products"},
    {"workspace-limit", OPT_WORKSPACE, "MIB",
     "GPU: cap on the cuDNN workspace, one buffer all convolutions share (default 2048)"},
    {"cudnn-batch", OPT_CUDNN_BATCH, "N",
     "GPU: at most N images per cuDNN call (default: as many as cuDNN takes, < 2^31 elements)"},
    {"size", OPT_SIZE, "N", "unet3d: volumes of N^3 voxels, N a multiple of 16 (default 64)"},
    {"loss", OPT_LOSS, "NAME", "unet3d: dice (default) or ce (cross-entropy)"},
    {"help", OPT_HELP, NULL, "show this help"},
};
#define NOPTIONS (sizeof option_table / sizeof *option_table)

void options_usage(FILE *out)
{
    fprintf(out, "usage: lms-trainer train|test|time|info --model NAME [OPTIONS]\n"
                 "  train  train the model (SGD), testing, logging and snapshotting as it goes\n"
                 "  test   evaluate a snapshot (--weights) on the test set\n"
                 "  time   time forward and backward of each layer, like caffe time\n"
                 "  info   print each layer's shape and the device memory a run needs\n"
                 "options:\n");
    for (size_t i = 0; i < NOPTIONS; i++) {
        char left[40];
        snprintf(left, sizeof left, "--%s%s%s", option_table[i].name, option_table[i].arg ? " " : "",
                 option_table[i].arg ? option_table[i].arg : "");
        fprintf(out, "  %-26s %s\n", left, option_table[i].help);
    }
}

typedef struct Parser {
    char *err;
    size_t errlen;
    int failed;
} Parser;

static void error(Parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void error(Parser *p, const char *fmt, ...)
{
    if (p->failed) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, p->errlen, fmt, ap);
    va_end(ap);
    p->failed = 1;
}

static long parse_long_range(Parser *p, const char *option, const char *arg, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < min || v > max) {
        if (max == LONG_MAX) error(p, "--%s: expected an integer of at least %ld, got '%s'", option, min, arg);
        else error(p, "--%s: expected an integer from %ld to %ld, got '%s'", option, min, max, arg);
        return min;
    }
    return v;
}

static long parse_long(Parser *p, const char *option, const char *arg, long min)
{
    return parse_long_range(p, option, arg, min, LONG_MAX);
}

static int parse_int(Parser *p, const char *option, const char *arg, int min)
{
    return (int)parse_long_range(p, option, arg, min, INT_MAX);
}

static float parse_float(Parser *p, const char *option, const char *arg)
{
    char *end;
    errno = 0;
    float v = strtof(arg, &end);
    if (errno || end == arg || *end || !isfinite(v) || v < 0) {
        error(p, "--%s: expected a non-negative number, got '%s'", option, arg);
        return 0;
    }
    return v;
}

static void parse_stepvalues(Parser *p, const char *arg, SolverConfig *s)
{
    char *copy = strdup(arg), *save = NULL;
    s->nstepvalues = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && !p->failed; tok = strtok_r(NULL, ",", &save)) {
        if (s->nstepvalues == SOLVER_MAX_STEPVALUES) {
            error(p, "--stepvalues: at most %d values", SOLVER_MAX_STEPVALUES);
            break;
        }
        long v = parse_long(p, "stepvalues", tok, 1);
        if (s->nstepvalues && v <= s->stepvalues[s->nstepvalues - 1])
            error(p, "--stepvalues %s: values must increase", arg);
        s->stepvalues[s->nstepvalues++] = v;
    }
    if (!s->nstepvalues) error(p, "--stepvalues: expected N,N,..., got '%s'", arg);
    free(copy);
}

/* --gpu: one device, a list of distinct ones, or all (counted when ranks start). */
static void parse_gpus(Parser *p, const char *arg, Config *cfg)
{
    cfg->ngpus = 1;
    if (!strcmp(arg, "all")) {
        cfg->ngpus = 0;
        if (cfg->sim)
            error(p, "--gpu all: every --sim rank simulates a GPU of its own, so there are none to count; list them "
                     "(--gpu 0,1 for 2 ranks)");
    } else if (strchr(arg, ',')) {
        cfg->ngpus = 0;
        for (const char *tok = arg; !p->failed; tok++) {
            size_t len = strcspn(tok, ",");
            char number[32];
            snprintf(number, sizeof number, "%.*s", (int)(len < sizeof number ? len : sizeof number - 1), tok);
            int device = (int)parse_long_range(p, "gpu", number, 0, INT_MAX);
            for (int i = 0; i < cfg->ngpus && !p->failed; i++)
                if (cfg->gpus[i] == device) error(p, "--gpu %s: device %d is listed twice", arg, device);
            if (cfg->ngpus == CONFIG_MAX_GPUS) error(p, "--gpu %s: at most %d devices", arg, CONFIG_MAX_GPUS);
            if (!p->failed) cfg->gpus[cfg->ngpus++] = device;
            tok += len;
            if (!*tok) break;
        }
    } else {
        cfg->gpus[0] = parse_int(p, "gpu", arg, 0);
    }
    cfg->gpu = cfg->gpus[0];
    if (cfg->cpu && cfg->ngpus != 1)
        error(p, "--gpu %s: --cpu runs on no GPU; start CPU ranks with mpirun -np N", arg);
}

static int parse_command(const char *word, Command *cmd)
{
    static const char *const names[] = {[CMD_TRAIN] = "train", [CMD_TEST] = "test", [CMD_TIME] = "time",
                                        [CMD_INFO] = "info"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(word, names[i])) {
            *cmd = (Command)i;
            return 0;
        }
    return -1;
}

/* Flags seen, applied over the model's defaults once the model is known. */
typedef struct Given {
    const char *value[OPT_HELP + 1];
} Given;

static void apply(Parser *p, Config *cfg, const Given *g)
{
    SolverConfig *s = &cfg->solver;
    const char *v;
#define GIVEN(key) ((v = g->value[key]) != NULL)
    if (GIVEN(OPT_BATCH)) cfg->batch = parse_int(p, "batch", v, 1);
    if (GIVEN(OPT_ITERS)) cfg->time_iterations = s->max_iter = parse_long(p, "iters", v, 1);
    if (GIVEN(OPT_WARMUP)) cfg->warmup = parse_long(p, "warmup", v, 0);
    if (GIVEN(OPT_DATA)) cfg->data = v;
    if (GIVEN(OPT_SEED)) cfg->seed = (uint64_t)parse_long(p, "seed", v, 0);
    if (GIVEN(OPT_LR)) s->base_lr = parse_float(p, "lr", v);
    if (GIVEN(OPT_LR_POLICY) && lr_policy_parse(v, &s->policy))
        error(p, "--lr-policy %s: expected fixed, step, inv or multistep", v);
    if (GIVEN(OPT_GAMMA)) s->gamma = parse_float(p, "gamma", v);
    if (GIVEN(OPT_POWER)) s->power = parse_float(p, "power", v);
    if (GIVEN(OPT_STEPSIZE)) s->stepsize = parse_long(p, "stepsize", v, 1);
    if (GIVEN(OPT_STEPVALUES)) parse_stepvalues(p, v, s);
    if (GIVEN(OPT_MOMENTUM)) s->momentum = parse_float(p, "momentum", v);
    if (GIVEN(OPT_WEIGHT_DECAY)) s->weight_decay = parse_float(p, "weight-decay", v);
    if (GIVEN(OPT_TEST_INTERVAL)) s->test_interval = parse_long(p, "test-interval", v, 0);
    if (GIVEN(OPT_TEST_ITERS)) s->test_iter = parse_long(p, "test-iters", v, 1);
    if (GIVEN(OPT_DISPLAY)) s->display = parse_long(p, "display", v, 0);
    if (GIVEN(OPT_SNAPSHOT)) s->snapshot = parse_long(p, "snapshot", v, 0);
    if (GIVEN(OPT_SNAPSHOT_PREFIX)) cfg->snapshot_prefix = v;
    if (GIVEN(OPT_RESUME)) cfg->resume = v;
    if (GIVEN(OPT_WEIGHTS)) cfg->weights = v;
    if (GIVEN(OPT_CPU)) cfg->cpu = 1;
    if (GIVEN(OPT_SIM)) cfg->sim = 1;
    if (cfg->cpu && cfg->sim) error(p, "--cpu and --sim exclude each other: pick one backend");
    if (GIVEN(OPT_GPU)) parse_gpus(p, v, cfg);
    if (GIVEN(OPT_DETERMINISTIC)) cfg->gpu_options.deterministic = 1;
    if (GIVEN(OPT_STRICT_FP32)) cfg->gpu_options.strict_fp32 = 1;
    if (GIVEN(OPT_WORKSPACE)) cfg->gpu_options.workspace_limit = (size_t)parse_long(p, "workspace-limit", v, 0) << 20;
    if (GIVEN(OPT_CUDNN_BATCH)) cfg->gpu_options.max_images = parse_int(p, "cudnn-batch", v, 1);
    if (GIVEN(OPT_SIZE)) {
        cfg->model_options.unet_size = parse_int(p, "size", v, 16);
        if (cfg->model_options.unet_size % 16) error(p, "--size %s: must be a multiple of 16", v);
    }
    if (GIVEN(OPT_LOSS)) {
        if (!strcmp(v, "dice")) cfg->model_options.unet_loss = LAYER_DICE_LOSS;
        else if (!strcmp(v, "ce")) cfg->model_options.unet_loss = LAYER_SOFTMAX_LOSS;
        else error(p, "--loss %s: expected dice or ce", v);
    }
#undef GIVEN
    if (s->policy == LR_STEP && s->stepsize <= 0) error(p, "--lr-policy step needs --stepsize N");
    if (s->policy == LR_MULTISTEP && !s->nstepvalues) error(p, "--lr-policy multistep needs --stepvalues N,N,...");
    if ((g->value[OPT_SIZE] || g->value[OPT_LOSS]) && !cfg->model->segmentation)
        error(p, "--size and --loss apply to unet3d only, not %s", cfg->model->name);
    if (cfg->command == CMD_TEST && !cfg->weights) error(p, "test needs --weights FILE (a snapshot)");
    if (cfg->command != CMD_TEST && cfg->weights) error(p, "--weights applies to test only; train takes --resume");
    if (cfg->command != CMD_TRAIN && cfg->resume) error(p, "--resume applies to train only");
    if (cfg->command == CMD_TEST && g->value[OPT_WARMUP]) error(p, "--warmup applies to train and time, not test");
    if (cfg->warmup >= 0 && cfg->warmup >= (cfg->command == CMD_TIME ? cfg->time_iterations : s->max_iter))
        error(p, "--warmup %ld: leaves no iteration to time; give fewer than --iters (%ld)", cfg->warmup,
              cfg->command == CMD_TIME ? cfg->time_iterations : s->max_iter);
    if (cfg->command == CMD_TEST && g->value[OPT_ITERS]) {
        if (g->value[OPT_TEST_ITERS]) error(p, "test: --iters and --test-iters both count the batches; give one");
        s->test_iter = s->max_iter;
    }
    /* Before training, not after it: the last snapshot is the one a run must not lose. */
    char why[4200];
    if (cfg->command == CMD_TRAIN && snapshot_prefix_check(cfg->snapshot_prefix, why, sizeof why))
        error(p, "--snapshot-prefix %.200s%s: %s", cfg->snapshot_prefix, strlen(cfg->snapshot_prefix) > 200 ? "..." : "",
              why);
}

int options_parse(int argc, char **argv, Config *cfg, char *err, size_t errlen)
{
    Parser p = {.err = err, .errlen = errlen};
    struct option longopts[NOPTIONS + 1];
    for (size_t i = 0; i < NOPTIONS; i++)
        longopts[i] = (struct option){option_table[i].name, option_table[i].arg ? required_argument : no_argument,
                                      NULL, option_table[i].key};
    longopts[NOPTIONS] = (struct option){0};

    Given given = {0};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == OPT_HELP) {
            options_usage(stdout);
            return 1;
        }
        if (c == '?' || c == ':') {
            error(&p, "unknown option or missing argument: %s (see trainer --help)", argv[optind - 1]);
            return -1;
        }
        given.value[c] = optarg ? optarg : "";
    }
    /* getopt_long permutes, so the command may come before or after the options. */
    if (optind == argc) {
        error(&p, "missing command: train, test, time or info (see trainer --help)");
        return -1;
    }
    if (optind < argc - 1) {
        error(&p, "expected one command, got '%s' and '%s'", argv[optind], argv[optind + 1]);
        return -1;
    }
    memset(cfg, 0, sizeof *cfg);
    if (parse_command(argv[optind], &cfg->command)) {
        error(&p, "unknown command '%s': expected train, test, time or info", argv[optind]);
        return -1;
    }
    if (!given.value[OPT_MODEL]) {
        error(&p, "--model is required: one of %s", model_names());
        return -1;
    }
    if (!(cfg->model = model_find(given.value[OPT_MODEL]))) {
        error(&p, "unknown model '%s': expected one of %s", given.value[OPT_MODEL], model_names());
        return -1;
    }
    cfg->solver = cfg->model->solver;
    cfg->batch = cfg->model->default_batch;
    cfg->data = "synthetic";
    cfg->seed = 1;
    cfg->gpu_options.workspace_limit = (size_t)2048 << 20;
    cfg->time_iterations = 50;
    cfg->warmup = -1;
    cfg->snapshot_prefix = cfg->model->name;
    cfg->model_options = (ModelOptions){.unet_size = 64, .unet_loss = LAYER_DICE_LOSS};
    cfg->ngpus = 1;
    apply(&p, cfg, &given);
    return p.failed ? -1 : 0;
}
