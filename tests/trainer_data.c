/* The data readers on generated files (CIFAR-10 binary batches, MNIST idx), their errors on
 * truncated and corrupt files, the synthetic data's determinism, and batch gathering. */
#include "tests/tap.h"
#include "trainer/backend.h"
#include "trainer/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/trainer_data_XXXXXX";

static void write_file(const char *name, const void *data, size_t size)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size) bail_out("cannot write %s", path);
    fclose(f);
}

static void remove_file(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

/* n CIFAR records: record i has label i % 10 and pixels (i + j) % 256. */
static uint8_t *cifar_records(int n, size_t *size)
{
    *size = (size_t)n * 3073;
    uint8_t *data = malloc(*size);
    for (int i = 0; i < n; i++) {
        data[i * 3073] = (uint8_t)(i % 10);
        for (int j = 0; j < 3072; j++) data[i * 3073 + 1 + j] = (uint8_t)(i + j);
    }
    return data;
}

static int load_fails_with(int (*load)(Dataset *, const char *, int, char *, size_t), int train, const char *fragment)
{
    Dataset ds;
    char err[512] = "";
    int failed = load(&ds, dir, train, err, sizeof err) != 0;
    if (!failed) dataset_close(&ds);
    if (!strstr(err, fragment)) diag("error was: %s", err);
    return failed && strstr(err, fragment);
}

static void test_cifar(void)
{
    size_t size;
    uint8_t *three = cifar_records(3, &size);
    write_file("data_batch_1.bin", three, size);
    write_file("data_batch_3.bin", three, 2 * 3073);
    write_file("test_batch.bin", three, 3073);
    Dataset ds;
    char err[512];
    ok(cifar10_load(&ds, dir, 1, err, sizeof err) == 0 && ds.count == 5 && ds.c == 3 && ds.h == 32,
       "CIFAR-10: the training batches present are read (3 + 2 records)");
    ok(ds.labels[2] == 2 && ds.labels[4] == 1 && ds.pixels[3072 * 2 + 5] == 7, "labels and pixels as written");
    dataset_close(&ds);
    ok(cifar10_load(&ds, dir, 0, err, sizeof err) == 0 && ds.count == 1, "CIFAR-10: test_batch.bin");
    dataset_close(&ds);

    write_file("data_batch_3.bin", three, 2 * 3073 - 5);
    ok(load_fails_with(cifar10_load, 1, "data_batch_3.bin: 6141 bytes is not a whole number"),
       "a truncated batch is refused, naming the file");
    write_file("data_batch_3.bin", three, 0);
    ok(load_fails_with(cifar10_load, 1, "not a whole number"), "an empty batch is refused");
    three[3073] = 12;
    write_file("data_batch_3.bin", three, 2 * 3073);
    ok(load_fails_with(cifar10_load, 1, "record 1 has label 12"), "a label outside 0..9 is refused");
    remove_file("data_batch_1.bin");
    remove_file("data_batch_3.bin");
    ok(load_fails_with(cifar10_load, 1, "no CIFAR-10 training batches"), "a directory without batches is refused");
    remove_file("test_batch.bin");
    free(three);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v;
}

static void write_mnist(int count, int label_count, uint32_t image_magic, size_t cut, uint8_t bad_label)
{
    size_t isize = 16 + (size_t)count * 784, lsize = 8 + (size_t)label_count;
    uint8_t *images = calloc(1, isize), *labels = calloc(1, lsize);
    put_be32(images, image_magic);
    put_be32(images + 4, count);
    put_be32(images + 8, 28);
    put_be32(images + 12, 28);
    for (int i = 0; i < count; i++) images[16 + i * 784 + 100] = (uint8_t)(10 + i);
    put_be32(labels, 0x801);
    put_be32(labels + 4, label_count);
    for (int i = 0; i < label_count; i++) labels[8 + i] = (uint8_t)(i % 10);
    if (bad_label) labels[8] = bad_label;
    write_file("train-images-idx3-ubyte", images, isize - cut);
    write_file("train-labels-idx1-ubyte", labels, lsize);
    free(images);
    free(labels);
}

static void test_mnist(void)
{
    Dataset ds;
    char err[512];
    write_mnist(3, 3, 0x803, 0, 0);
    ok(mnist_load(&ds, dir, 1, err, sizeof err) == 0 && ds.count == 3 && ds.h == 28 && ds.w == 28 && ds.c == 1,
       "MNIST: images and labels are read");
    ok(ds.labels[2] == 2 && ds.pixels[784 + 100] == 11, "labels and pixels as written");
    dataset_close(&ds);
    write_mnist(3, 3, 0x1234, 0, 0);
    ok(load_fails_with(mnist_load, 1, "train-images-idx3-ubyte: not an MNIST image file"), "a bad magic number is refused");
    write_mnist(3, 3, 0x803, 10, 0);
    ok(load_fails_with(mnist_load, 1, "size does not match its header"), "a truncated image file is refused");
    write_mnist(3, 2, 0x803, 0, 0);
    ok(load_fails_with(mnist_load, 1, "label count does not match"), "a label file of another length is refused");
    write_mnist(3, 3, 0x803, 0, 42);
    ok(load_fails_with(mnist_load, 1, "label outside 0..9"), "a label outside 0..9 is refused");
    ok(load_fails_with(mnist_load, 0, "cannot open"), "missing test files are refused");

    write_mnist(3, 3, 0x803, 0, 0);
    ModelOptions opt = {0};
    char spec[128];
    snprintf(spec, sizeof spec, "mnist:%s", dir);
    ok(dataset_open(&ds, spec, 1, model_find("cifar10_quick"), &opt, 1, err, sizeof err) != 0 &&
           strstr(err, "model cifar10_quick expects 3x32x32"),
       "a data set of the wrong shape for the model is refused: %s", err);
    ok(dataset_open(&ds, spec, 1, model_find("lenet"), &opt, 1, err, sizeof err) == 0, "and MNIST suits lenet");
    dataset_close(&ds);
    remove_file("train-images-idx3-ubyte");
    remove_file("train-labels-idx1-ubyte");
}

static void test_synthetic(void)
{
    ModelOptions opt = {.unet_size = 16, .unet_loss = LAYER_DICE_LOSS};
    const Model *m = model_find("cifar10_quick");
    Dataset a, b, c, t;
    char err[256];
    dataset_open(&a, "synthetic", 1, m, &opt, 5, err, sizeof err);
    dataset_open(&b, "synthetic", 1, m, &opt, 5, err, sizeof err);
    dataset_open(&c, "synthetic", 1, m, &opt, 6, err, sizeof err);
    dataset_open(&t, "synthetic", 0, m, &opt, 5, err, sizeof err);
    size_t bytes = a.count * dataset_sample_size(&a);
    ok(a.count == b.count && !memcmp(a.pixels, b.pixels, bytes) && !memcmp(a.labels, b.labels, a.count),
       "synthetic data is the same for the same seed");
    ok(memcmp(a.pixels, c.pixels, bytes) != 0, "and differs for another seed");
    ok(memcmp(a.pixels, t.pixels, t.count * dataset_sample_size(&t)) != 0, "test samples differ from training samples");
    int seen[10] = {0}, classes = 0;
    for (long i = 0; i < a.count; i++) seen[a.labels[i]]++;
    for (int k = 0; k < 10; k++) classes += seen[k] > a.count / 20;
    is_int(classes, 10, "every class is well represented");
    dataset_close(&a);
    dataset_close(&b);
    dataset_close(&c);
    dataset_close(&t);

    dataset_open(&a, "synthetic", 1, model_find("unet3d"), &opt, 5, err, sizeof err);
    int labels[3] = {0};
    for (size_t i = 0; i < dataset_label_size(&a); i++) labels[a.labels[i]]++;
    ok(a.segmentation && a.d == 16 && labels[0] && labels[1] && labels[2], "volumes hold background and both classes");
    dataset_close(&a);
}

static void test_gather(void)
{
    const uint8_t src[3 * 2] = {0, 128, 255, 1, 10, 20};
    float dst[2 * 2];
    cpu_backend.gather(dst, src, 2, 2, 2, 3, 128.0f, 0.5f);
    ok(dst[0] == -59.0f && dst[1] == -54.0f && dst[2] == -64.0f && dst[3] == 0.0f,
       "gather takes samples 2 and 0 (wrapping) and preprocesses (x - 128) * 0.5");
}

int main(void)
{
    if (!mkdtemp(dir)) bail_out("mkdtemp failed");
    plan(22);
    test_cifar();
    test_mnist();
    test_synthetic();
    test_gather();
    rmdir(dir);
    return exit_status();
}
