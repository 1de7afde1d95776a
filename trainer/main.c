/* trainer: a Caffe-like training engine in C and CUDA C (trainer --help). */
#include "trainer/gpu_backend.h"
#include "trainer/models.h"
#include "trainer/options.h"
#include "trainer/run.h"
#include "trainer/sim_backend.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    Config cfg;
    char err[1024];
    int parsed = options_parse(argc, argv, &cfg, err, sizeof err);
    if (parsed > 0) return 0;
    if (parsed < 0) {
        fprintf(stderr, "trainer: error: %s\n", err);
        return 2;
    }
    Net *net = model_build(cfg.model, cfg.batch, &cfg.model_options);
    if (cfg.command == CMD_INFO) {
        int status = run_info(&cfg, net, stdout);
        net_free(net);
        return status;
    }
    const Backend *be = cfg.cpu ? &cpu_backend
                      : cfg.sim ? sim_backend_open(argv, cfg.gpu, err, sizeof err)
                                : gpu_backend_open(cfg.gpu, &cfg.gpu_options, err, sizeof err);
    if (!be) {
        fprintf(stderr, "trainer: error: %s%s\n", err, cfg.sim ? "" : " (use --cpu to run on the CPU)");
        net_free(net);
        return 2;
    }
    int status = 1;
    if (net_setup(net, be, cfg.seed, err, sizeof err))
        fprintf(stderr, "trainer: error: %s: %s\n", cfg.model->name, err);
    else
        status = cfg.command == CMD_TRAIN ? run_train(&cfg, net)
               : cfg.command == CMD_TEST  ? run_test(&cfg, net)
                                          : run_time(&cfg, net);
    net_free(net);
    if (be->close) be->close();
    return status;
}
