/* LMS_PIECE_MB: a split allocation's pieces are evicted and restored alone. A kernel restores
 * every piece of what it uses; a copy or memset only the pieces it overlaps, without copying
 * those it overwrites whole; a free releases every piece and the address range once; queries
 * answer for the whole allocation. Each case runs in a child of its own, with and without
 * host VMM; restores are counted from liblms's exit statistics (LMS_STATS=json). */
#include "tests/lms_testlib.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define PIECE (2 * MIB)  /* LMS_PIECE_MB, below; the simulator's granularity */
#define A_BYTES (8 * MIB) /* four pieces */
#define CAPACITY_MB 16

static unsigned char model[16 * MIB], got[16 * MIB];

/* The device's bytes at ptr equal the model's. */
static int reads_back(CUdeviceptr ptr, const unsigned char *want, size_t bytes)
{
    return cuMemcpyDtoH(got, ptr, bytes) == CUDA_SUCCESS && memcmp(got, want, bytes) == 0;
}

/* A (four pieces) written with pattern 1, then B written whole with pattern 2: B's creation
 * evicts as many of A's pieces as B needs room for, B's writes restore nothing. */
static void a_then_b(CUdeviceptr *a, CUdeviceptr *b, size_t b_bytes)
{
    CU_OK(cuMemAlloc(a, A_BYTES));
    lms_test_pattern(model, A_BYTES, 1);
    CU_OK(cuMemcpyHtoD(*a, model, A_BYTES));
    CU_OK(cuMemAlloc(b, b_bytes));
    lms_test_pattern(got, b_bytes, 2);
    CU_OK(cuMemcpyHtoD(*b, got, b_bytes));
}

/* (a) A kernel on A, half of whose pieces B's creation evicted, restores every piece. */
static int kernel_restores_every_piece(void)
{
    CUdeviceptr a, b;
    a_then_b(&a, &b, 12 * MIB);
    CU_OK(lms_test_launch(lms_test_add_kernel(), NULL, a, A_BYTES, 3));
    CU_OK(cuCtxSynchronize());
    for (size_t i = 0; i < A_BYTES; i++)
        model[i] = (unsigned char)(model[i] + 3);
    EXPECT(reads_back(a, model, A_BYTES));
    lms_test_pattern(model, 12 * MIB, 2);
    EXPECT(reads_back(b, model, 12 * MIB));
    return 0;
}

#define INSIDE (2 * PIECE + 100) /* an offset in A's third piece */
#define PATCH 1000

/* (b) A copy into A's third piece, every piece of A evicted by B (16 MiB: the whole device):
 * it restores that piece alone (the parent checks the statistics: one restore, one piece's
 * bytes). With `whole`, all of A and B then read back as the model says. */
static int copy_into_one_piece(int whole)
{
    CUdeviceptr a, b;
    a_then_b(&a, &b, 16 * MIB);
    memset(model + INSIDE, 0x77, PATCH);
    CU_OK(cuMemcpyHtoD(a + INSIDE, model + INSIDE, PATCH));
    EXPECT(reads_back(a + 2 * PIECE, model + 2 * PIECE, PIECE));
    if (!whole)
        return 0;
    EXPECT(reads_back(a, model, A_BYTES));
    lms_test_pattern(model, 16 * MIB, 2);
    EXPECT(reads_back(b, model, 16 * MIB));
    return 0;
}
static int copy_restores_one_piece(void) { return copy_into_one_piece(0); }
static int copy_keeps_data(void) { return copy_into_one_piece(1); }

#define MEMSET_END (3 * PIECE + PATCH) /* from piece 1's start into piece 3 */

/* (c) A copy over all of A's first piece and a memset over its second and third and the start
 * of its fourth, all evicted: only the fourth is restored with its bytes (the parent checks:
 * four restores, one piece's bytes). With `whole`, A reads back as the model says. */
static int overwrite_whole_pieces(int whole)
{
    CUdeviceptr a, b;
    a_then_b(&a, &b, 16 * MIB);
    lms_test_pattern(model, PIECE, 9);
    CU_OK(cuMemcpyHtoD(a, model, PIECE));
    memset(model + PIECE, 0x5a, MEMSET_END - PIECE);
    CU_OK(cuMemsetD8(a + PIECE, 0x5a, MEMSET_END - PIECE));
    CU_OK(cuCtxSynchronize());
    if (whole)
        EXPECT(reads_back(a, model, A_BYTES));
    return 0;
}
static int whole_pieces_restored_blind(void) { return overwrite_whole_pieces(0); }
static int whole_pieces_keep_data(void) { return overwrite_whole_pieces(1); }

/* slow_read(ptr, bytes): sleeps, then reads every byte: A's pieces stay in use meanwhile. */
static void slow_read(const sim_launch *l)
{
    usleep(100 * 1000);
    const volatile unsigned char *p = *(const unsigned char **)l->params[0];
    size_t n = *(size_t *)l->params[1];
    unsigned sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += p[i];
    (void)sum;
}

static CUresult launch_slow_read(CUstream stream, CUdeviceptr ptr, size_t bytes)
{
    static CUkernel k;
    static const size_t sizes[] = { sizeof(void *), sizeof(size_t) };
    if (!k)
        k = sim_register_kernel("slow_read", slow_read, 2, sizes);
    void *params[] = { &ptr, &bytes };
    return cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
}

/* (d) Freeing A, some pieces resident and some evicted, while a kernel still reads it (async),
 * releases every piece, unmaps all and frees the address range once (the simulator refuses a
 * second cuMemAddressFree, or one over a range still mapped); a pointer inside A is not one to
 * free. ASan finds what is leaked. */
static int free_releases_everything(void)
{
    CUstream stream;
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    size_t mapped = 0;
    unsigned long reserves = 0, frees = 0;
    /* The first round, freed as the second, leaves host backing in liblms's pool. */
    for (int round = 0; round < 3; round++) {
        int async = round == 2;
        CUdeviceptr a, b;
        a_then_b(&a, &b, 12 * MIB); /* A's first two pieces evicted, the others resident */
        EXPECT(cuMemFree(a + PIECE) == CUDA_ERROR_INVALID_VALUE);
        EXPECT(cuMemFree(a + 1) == CUDA_ERROR_INVALID_VALUE);
        CU_OK(launch_slow_read(stream, b, 12 * MIB));
        CU_OK(async ? cuMemFreeAsync(b, stream) : cuMemFree(b));
        CU_OK(cuMemFree(a));
        CU_OK(cuStreamSynchronize(stream));
        CUdeviceptr probe; /* reaps what the frees left pending */
        CU_OK(cuMemAlloc(&probe, 1024));
        CU_OK(cuMemFree(probe));
        if (round == 0) {
            mapped = sim_bytes_mapped();
            reserves = sim_calls("cuMemAddressReserve");
            frees = sim_calls("cuMemAddressFree");
        }
    }
    CU_OK(cuStreamDestroy(stream));
    EXPECT(sim_calls("cuMemAddressReserve") - reserves == 4);
    EXPECT(sim_calls("cuMemAddressFree") - frees == 4);
    EXPECT(sim_bytes_mapped() == mapped);
    EXPECT(sim_device_used(0) <= CAPACITY_MB * MIB);
    return 0;
}

/* (e) A split allocation has no one handle to retain; an unsplit one has. */
static int retain_split_refused(void)
{
    CUdeviceptr a, one;
    CU_OK(cuMemAlloc(&a, A_BYTES));
    CU_OK(cuMemAlloc(&one, PIECE));
    CUmemGenericAllocationHandle h;
    lms_test_stderr_begin();
    CUresult split = cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)(a + PIECE));
    const char *said = lms_test_stderr_end();
    EXPECT(split == CUDA_ERROR_NOT_SUPPORTED);
    EXPECT(strstr(said, "LMS_PIECE_MB") != NULL);
    CU_OK(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)one));
    CU_OK(cuMemRelease(h));
    CU_OK(cuMemFree(a));
    CU_OK(cuMemFree(one));
    return 0;
}

/* (f) Queries at an address in a later piece answer with the whole allocation. */
static int queries_answer_whole(void)
{
    CUdeviceptr a, b, base = 0, start = 0;
    a_then_b(&a, &b, 12 * MIB);
    CUdeviceptr inside = a + 3 * PIECE + 7;
    size_t size = 0, range = 0;
    CU_OK(cuMemGetAddressRange(&base, &size, inside));
    EXPECT(base == a && size == A_BYTES);
    CU_OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, inside));
    CU_OK(cuPointerGetAttribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, inside));
    EXPECT(start == a && range == A_BYTES);
    return 0;
}

#define RETAINED 3 /* of 4 MiB each (one piece under LMS_PIECE_MB=4): 12 of the 16 MiB */

/* (g) With the device held by retained allocations, a split one made beside them starts with
 * what does not fit in host memory, and piece by piece reads and writes right. */
static int created_partly_on_host(void)
{
    CUdeviceptr kept[RETAINED], c;
    CUmemGenericAllocationHandle h[RETAINED];
    for (int i = 0; i < RETAINED; i++) {
        CU_OK(cuMemAlloc(&kept[i], 4 * MIB));
        CU_OK(cuMemRetainAllocationHandle(&h[i], (void *)(uintptr_t)kept[i]));
    }
    CU_OK(cuMemAlloc(&c, 12 * MIB));
    EXPECT(sim_device_used(0) <= CAPACITY_MB * MIB);
    lms_test_pattern(model, 12 * MIB, 5);
    for (size_t off = 0; off < 12 * MIB; off += 4 * MIB)
        CU_OK(cuMemcpyHtoD(c + off, model + off, 4 * MIB));
    for (size_t off = 0; off < 12 * MIB; off += 4 * MIB)
        EXPECT(reads_back(c + off, model + off, 4 * MIB));
    for (int i = 0; i < RETAINED; i++)
        CU_OK(cuMemRelease(h[i]));
    return 0;
}

/* A case, and what liblms's statistics must say at its exit: restores (-1: any) and the
 * bytes they copied. */
typedef struct piece_case {
    lms_test_case c;
    long restores, bytes_in;
} piece_case;

static const piece_case cases[] = {
    { { "kernel", "(a) a kernel restores every piece of its allocation, data intact", kernel_restores_every_piece, { NULL } }, -1, -1 },
    { { "copy-one", "(b) a copy into one piece of an evicted allocation restores that piece alone", copy_restores_one_piece, { NULL } }, 1, (long)PIECE },
    { { "copy-data", "(b) and the allocation and its neighbour read back intact", copy_keeps_data, { NULL } }, -1, -1 },
    { { "whole-blind", "(c) a copy and a memset over whole pieces restore them without copying", whole_pieces_restored_blind, { NULL } }, 4, (long)PIECE },
    { { "whole-data", "(c) and the allocation reads back as written", whole_pieces_keep_data, { NULL } }, -1, -1 },
    { { "free", "(d) a free releases every piece and the range once; not inside", free_releases_everything, { NULL } }, -1, -1 },
    { { "retain", "(e) a split allocation's handle is not retained; an unsplit one's is", retain_split_refused, { NULL } }, -1, -1 },
    { { "queries", "(f) queries in a later piece answer with the whole allocation", queries_answer_whole, { NULL } }, -1, -1 },
    { { "partly-on-host", "(g) made beside retained allocations, a split one starts partly in host memory", created_partly_on_host, { "LMS_PIECE_MB=4", NULL } }, -1, -1 },
};
#define CASES (sizeof cases / sizeof cases[0])

/* "swapped_in":{"count":N,"bytes":B from the statistics file; 0 when it has none. */
static int read_swapped_in(const char *path, long *count, long *bytes)
{
    char text[4096] = "";
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *at = strstr(text, "\"swapped_in\":");
    return at && sscanf(at, "\"swapped_in\":{\"count\":%ld,\"bytes\":%ld", count, bytes) == 2;
}

int main(int argc, char **argv)
{
    static const char *const env[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0", "LMS_SIM_CAPACITY_MB=16",
                                       "LMS_PIECE_MB=2", NULL };
    lms_test_with_env(argv, env); /* from here on, in one backing mode */
    lms_test_case plain[CASES];
    for (size_t i = 0; i < CASES; i++)
        plain[i] = cases[i].c;
    if (argc > 1)
        return lms_test_main(argc, argv, plain, CASES, NULL);
    plan((int)CASES);
    char stats[64], stats_file[96];
    snprintf(stats, sizeof stats, "/tmp/lms_pieces.%ld.json", (long)getpid());
    snprintf(stats_file, sizeof stats_file, "LMS_STATS_FILE=%s", stats);
    for (size_t i = 0; i < CASES; i++) {
        const char *case_env[8] = { "LMS_STATS=json", stats_file };
        for (size_t k = 0; cases[i].c.env[k]; k++)
            case_env[2 + k] = cases[i].c.env[k];
        unlink(stats);
        int status = lms_test_run_self(argv, cases[i].c.name, case_env);
        long restores = -1, bytes_in = -1;
        int counted = read_swapped_in(stats, &restores, &bytes_in);
        ok(WIFEXITED(status) && WEXITSTATUS(status) == 0 && counted &&
               (cases[i].restores < 0 || restores == cases[i].restores) &&
               (cases[i].bytes_in < 0 || bytes_in == cases[i].bytes_in),
           "%s (status %#x, %ld restores of %ld bytes)", cases[i].c.what, status, restores, bytes_in);
    }
    unlink(stats);
    return exit_status();
}
