/* Snapshots: a round trip restores weights, history and iteration; corrupt, truncated and
 * foreign files are refused with the net untouched; writing leaves no temporary files, and a
 * failed write leaves nothing at all. */
#include "tests/tap.h"
#include "trainer/models.h"
#include "trainer/snapshot.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/trainer_snapshot_XXXXXX";

static Net *lenet(uint64_t seed)
{
    ModelOptions opt = {0};
    Net *net = model_build(model_find("lenet"), 2, &opt);
    char err[128];
    if (net_setup(net, &cpu_backend, seed, err, sizeof err)) bail_out("setup: %s", err);
    NET_FOR_EACH_PARAM(net, l, p)
        for (size_t i = 0; i < tensor_count(&p->t); i++) p->history[i] = (float)i * 1e-3f + (float)seed;
    return net;
}

static int same_params(Net *a, Net *b)
{
    Layer *lb = b->layers;
    for (Layer *la = a->layers; la < a->layers + a->nlayers; la++, lb++)
        for (int k = 0; la->nparams && k < 2; k++) {
            Param *pa = k ? &la->bias : &la->weight, *pb = k ? &lb->bias : &lb->weight;
            size_t bytes = tensor_count(&pa->t) * sizeof(float);
            if (memcmp(pa->t.data, pb->t.data, bytes) || memcmp(pa->history, pb->history, bytes)) return 0;
        }
    return 1;
}

static int files_in_dir(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    return size;
}

static void rewrite(const char *from, const char *to, long keep, long flip)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    for (long i = 0; i < keep; i++) {
        int c = fgetc(in);
        fputc(i == flip ? c ^ 0x40 : c, out);
    }
    fclose(in);
    fclose(out);
}

static int read_fails_with(const char *path, Net *net, Net *original, const char *fragment)
{
    long iter = -1;
    char err[512] = "";
    int failed = snapshot_read(path, net, &iter, err, sizeof err) != 0;
    if (!strstr(err, fragment)) diag("error was: %s", err);
    return failed && strstr(err, fragment) && iter == -1 && same_params(net, original);
}

int main(void)
{
    if (!mkdtemp(dir)) bail_out("mkdtemp failed");
    plan(11);
    char path[256], bad[256], err[512];
    snprintf(path, sizeof path, "%s/lenet.snap", dir);
    snprintf(bad, sizeof bad, "%s/bad.snap", dir);

    Net *a = lenet(1), *b = lenet(2), *b_copy = lenet(2);
    ok(snapshot_write(path, a, 1234, err, sizeof err) == 0, "a snapshot is written");
    is_int(files_in_dir(), 1, "and only it: the temporary file was renamed");
    long size = file_size(path);
    is_int(size, 56 + 8 * (48) + 2 * 4 * 431080 + 8, "its size: header, 8 records of 48 bytes + data + history, hash");

    long iter = 0;
    ok(snapshot_read(path, b, &iter, err, sizeof err) == 0 && iter == 1234, "it reads back at iteration %ld", iter);
    ok(same_params(a, b), "weights and history are restored exactly");

    Net *c = lenet(3), *c_copy = lenet(3);
    rewrite(path, bad, size, size / 2);
    ok(read_fails_with(bad, c, c_copy, "checksum mismatch"), "a flipped bit is caught, the net untouched");
    rewrite(path, bad, size - 100, -1);
    ok(read_fails_with(bad, c, c_copy, "checksum mismatch"), "a truncated file is caught");
    rewrite(path, bad, 20, -1);
    ok(read_fails_with(bad, c, c_copy, "not a trainer snapshot"), "a short file is not a snapshot");
    unlink(bad);

    ModelOptions opt = {0};
    Net *quick = model_build(model_find("cifar10_quick"), 2, &opt), *quick_copy = model_build(model_find("cifar10_quick"), 2, &opt);
    net_setup(quick, &cpu_backend, 4, err, sizeof err);
    net_setup(quick_copy, &cpu_backend, 4, err, sizeof err);
    ok(read_fails_with(path, quick, quick_copy, "snapshot of model lenet, not cifar10_quick"),
       "a snapshot of another model is refused");

    char missing[300];
    snprintf(missing, sizeof missing, "%s/no/such/dir/x.snap", dir);
    ok(snapshot_write(missing, a, 1, err, sizeof err) != 0 && strstr(err, "no/such/dir"),
       "a snapshot that cannot be written says where: %s", err);
    unlink(path);
    /* A write that fails after its temporary file was made there: the name is a directory. */
    char occupied[300];
    snprintf(occupied, sizeof occupied, "%s/occupied.snap", dir);
    if (mkdir(occupied, 0700)) bail_out("mkdir %s failed", occupied);
    ok(snapshot_write(occupied, a, 1, err, sizeof err) != 0 && files_in_dir() == 1,
       "a write that fails in its own directory leaves nothing behind there: %s", err);
    rmdir(occupied);
    rmdir(dir);
    net_free(a);
    net_free(b);
    net_free(b_copy);
    net_free(c);
    net_free(c_copy);
    net_free(quick);
    net_free(quick_copy);
    return exit_status();
}
