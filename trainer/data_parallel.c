#include "trainer/data_parallel.h"
#include "trainer/ranks.h"

#include <stdio.h>
#include <stdlib.h>

long dp_first_sample(const Net *net, long index)
{
    return (index * ranks_count() + ranks_rank()) * (long)net->batch;
}

static size_t param_floats(Net *net)
{
    size_t total = 0;
    NET_FOR_EACH_PARAM(net, l, p) total += tensor_count(&p->t);
    return total;
}

/* One host buffer for every parameter's floats, so that each exchange is one collective. */
static float *host_buffer(size_t count)
{
    float *host = malloc(count ? count * sizeof *host : 1);
    if (!host) {
        fprintf(stderr, "lms-trainer: error: out of host memory for %zu floats of the ranks' exchange\n", count);
        ranks_fail(1);
    }
    return host;
}

void dp_share_state(Net *net, long *iter)
{
    if (ranks_count() == 1) return;
    const Backend *be = net->be;
    size_t count = param_floats(net), at = 0;
    float *host = host_buffer(2 * count);
    NET_FOR_EACH_PARAM(net, l, p) {
        size_t n = tensor_count(&p->t);
        be->download(host + at, p->t.data, n);
        be->download(host + count + at, p->history, n);
        at += n;
    }
    ranks_broadcast(host, 2 * count * sizeof *host);
    ranks_broadcast(iter, sizeof *iter);
    at = 0;
    NET_FOR_EACH_PARAM(net, l, p) {
        size_t n = tensor_count(&p->t);
        be->upload(p->t.data, host + at, n);
        be->upload(p->history, host + count + at, n);
        at += n;
    }
    free(host);
}

static const GradientExchange *device_exchange;

void dp_set_exchange(const GradientExchange *exchange)
{
    device_exchange = exchange;
}

static void average_on_host(Net *net)
{
    const Backend *be = net->be;
    size_t count = param_floats(net), at = 0;
    float *host = host_buffer(count);
    NET_FOR_EACH_PARAM(net, l, p) {
        be->download(host + at, p->t.diff, tensor_count(&p->t));
        at += tensor_count(&p->t);
    }
    ranks_sum_floats(host, count);
    float scale = 1.0f / ranks_count();
    for (size_t i = 0; i < count; i++) host[i] *= scale;
    at = 0;
    NET_FOR_EACH_PARAM(net, l, p) {
        be->upload(p->t.diff, host + at, tensor_count(&p->t));
        at += tensor_count(&p->t);
    }
    free(host);
}

int dp_device(int requested, int visible, char *err, size_t errlen)
{
    const char *view = getenv("CUDA_VISIBLE_DEVICES");
    int local = ranks_local_count();
    if (local == 1 || !ranks_node_agrees(view ? view : "")) return requested;
    double crowded = requested + local > visible;
    ranks_sum_doubles(&crowded, 1);
    if (!crowded) return requested + ranks_local_rank();
    snprintf(err, errlen, "%d ranks on one node need CUDA devices %d to %d, but they share a view of %d: give each "
             "rank a GPU of its own (fewer ranks per node, or CUDA_VISIBLE_DEVICES per rank, as srun "
             "--gpus-per-task=1 sets it)", local, requested, requested + local - 1, visible);
    return -1;
}

void dp_backward(Net *net)
{
    const GradientExchange *exchange = ranks_count() > 1 ? device_exchange : NULL;
    for (int i = net->nlayers - 1; i >= 0; i--) {
        net->be->backward(net, &net->layers[i]);
        if (exchange) exchange->ready(net, &net->layers[i]);
    }
    if (exchange)
        exchange->finish(net);
    else if (ranks_count() > 1)
        average_on_host(net);
}

/* A sum of values that are zero but in their own rank's slot. */
void dp_gather(double value, double *all)
{
    for (int r = 0; r < ranks_count(); r++) all[r] = r == ranks_rank() ? value : 0;
    ranks_sum_doubles(all, (size_t)ranks_count());
}

void dp_average(double *values, int n)
{
    if (ranks_count() == 1) return;
    ranks_sum_doubles(values, (size_t)n);
    for (int i = 0; i < n; i++) values[i] /= ranks_count();
}
