/* lms-trainer: a Caffe-like training engine in C and CUDA C (lms-trainer --help). */
#include "trainer/data_parallel.h"
#include "trainer/gpu_backend.h"
#include "trainer/models.h"
#include "trainer/log.h"
#include "trainer/nccl_gradients.h"
#include "trainer/options.h"
#include "trainer/ranks.h"
#include "trainer/run.h"
#include "trainer/sim_backend.h"
#include "trainer/spawn.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    Config cfg;
    char err[1024];
    spawn_take_device();
    int parsed = options_parse(argc, argv, &cfg, err, sizeof err);
    if (parsed > 0) return 0;
    if (parsed < 0) {
        fprintf(stderr, "lms-trainer: error: %s\n", err);
        return 2;
    }
    /* Ranks to start: before --sim's re-execution, which each rank makes for itself. --sim may
     * re-execute the trainer: before MPI starts, which an exec would break. */
    if ((!ranks_announced() && cfg.ngpus != 1 &&
         spawn_ranks(&cfg, cfg.sim ? -1 : gpu_backend_device_count(), argv, err, sizeof err)) ||
        (cfg.sim && sim_backend_prepare(argv, err, sizeof err)) || ranks_start(&argc, &argv, err, sizeof err)) {
        fprintf(stderr, "lms-trainer: error: %s\n", err);
        return 2;
    }
    if (cfg.ngpus != 1) {
        if (!ranks_rank())
            fprintf(stderr, "lms-trainer: error: --gpu: a list, or all, starts the ranks itself; under mpirun or srun "
                            "give one device (a node's rank r takes --gpu + r)\n");
        return ranks_finish(2);
    }
    if (ranks_count() > 1) log_set_rank(ranks_rank());
    Net *net = model_build(cfg.model, cfg.batch, &cfg.model_options);
    if (cfg.command == CMD_INFO) {
        int status = run_info(&cfg, net, stdout);
        net_free(net);
        return ranks_finish(status);
    }
    int device = cfg.gpu; /* several ranks on a node share none (each --sim rank has a simulated GPU of its own) */
    if (!cfg.cpu && !cfg.sim && (device = dp_device(cfg.gpu, gpu_backend_device_count(), err, sizeof err)) < 0) {
        if (!ranks_rank()) fprintf(stderr, "lms-trainer: error: %s\n", err);
        net_free(net);
        return ranks_finish(2);
    }
    const Backend *be = cfg.cpu ? &cpu_backend
                      : cfg.sim ? sim_backend_open(argv, device, cfg.gpu_options.workspace_limit, err, sizeof err)
                                : gpu_backend_open(device, &cfg.gpu_options, err, sizeof err);
    if (!be) {
        fprintf(stderr, "lms-trainer: error: %s%s\n", err, cfg.sim ? "" : " (use --cpu to run on the CPU)");
        if (ranks_count() > 1) ranks_fail(2);
        net_free(net);
        return ranks_finish(2);
    }
    if (!cfg.cpu && !cfg.sim && ranks_count() > 1) {
        const GradientExchange *exchange = nccl_gradients_open(gpu_backend_stream(), err, sizeof err);
        if (!exchange) fprintf(stderr, "lms-trainer: warning: %s: the gradients go through host memory\n", err);
        dp_set_exchange(exchange);
    }
    int status = 1;
    if (net_setup(net, be, cfg.seed, err, sizeof err))
        fprintf(stderr, "lms-trainer: error: %s: %s\n", cfg.model->name, err);
    else
        status = cfg.command == CMD_TRAIN ? run_train(&cfg, net)
               : cfg.command == CMD_TEST  ? run_test(&cfg, net)
                                          : run_time(&cfg, net);
    /* A rank that fails ends the job: the others would wait for it in their next collective. */
    if (status && ranks_count() > 1) ranks_fail(status);
    net_free(net);
    nccl_gradients_close();
    if (be->close) be->close();
    return ranks_finish(status);
}
