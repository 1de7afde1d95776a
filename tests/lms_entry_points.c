/* Every entry point liblms manages (preload/hooks.h), reached as cudart reaches it: through
 * cuGetProcAddress (v2 and v1, with and without the per-thread-default-stream flag), on a
 * device smaller than the data, so that the operands of each call were evicted when it came
 * and are evicted again before they are read back. Each call's data are checked against a host
 * model; a call that liblms retries when the driver runs out of memory runs again with the
 * driver failing so once. A hook that no row below exercises fails, naming it; the rows that
 * are skipped say why. Like every liblms test, it runs with host-located VMM on and off (where a
 * missed access cannot read the host copy: it faults, and evictions can be seen). Then, in a
 * child with LMS_MODE=off, cuGetProcAddress must hand out the driver's own functions, and
 * liblms's exports must pass the same calls through. */
#include "preload/hooks.h"
#include "tests/lms_testlib.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);

#define BUFFERS 12                /* 12 handles of 2 MiB on a 16 MiB device */
#define BUF ((size_t)256 << 10)

static struct {
    CUdeviceptr dev[BUFFERS];
    unsigned char *host[BUFFERS]; /* the model of each buffer */
    unsigned char *scratch;
    CUcontext ctx, peer_ctx;
    CUdeviceptr peer;             /* BUF bytes on the second device */
    CUstream stream;
    CUfunction incr;
    unsigned turn;                /* which buffers the next call uses */
    int strict;                   /* host-located VMM off: evictions unmap */
    size_t copied;                /* the simulator's copy counter when the call was made */
    int off;                      /* LMS_MODE=off: liblms passes every call through */
    const char *inject;           /* the driver entry point to fail once with OUT_OF_MEMORY */
    int armable;                  /* the exercise armed the fault before its call */
} g;

/* incr(dst, src, n): dst[i] = src[i] + 1 for i < n. */
static void incr(const sim_launch *l)
{
    uint8_t *dst = *(uint8_t **)l->params[0];
    const uint8_t *src = *(const uint8_t **)l->params[1];
    size_t n = *(size_t *)l->params[2];
    for (size_t i = 0; i < n; i++)
        dst[i] = (uint8_t)(src[i] + 1);
}

#define CHECK(expr)                                                                       \
    do {                                                                                  \
        CUresult check_ = (expr);                                                         \
        if (check_ != CUDA_SUCCESS) {                                                     \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #expr, (int)check_); \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

/* Whether buffer i is off the device: without host-located VMM, its address is unmapped. */
static int evicted(int i)
{
    unsigned long long flags = 0;
    CUmemLocation where = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    return cuMemGetAccess(&flags, &where, g.dev[i]) != CUDA_SUCCESS || flags == 0;
}

/* Every buffer but a and b overwritten, until (without host VMM, where it can be seen) a and
 * b are evicted: on a device that holds 8 of the 12, a pass or two. */
static void churn(int a, int b)
{
    for (int pass = 0; pass < 4; pass++) {
        for (int i = 0; i < BUFFERS; i++) {
            if (i == a || i == b)
                continue;
            unsigned char value = (unsigned char)(g.turn * 7 + (unsigned)(i + pass));
            CU_OK(cuMemsetD8(g.dev[i], value, BUF));
            memset(g.host[i], value, BUF);
        }
        if (!g.strict || ((a < 0 || evicted(a)) && (b < 0 || evicted(b))))
            return;
    }
    bail_out("buffers %d and %d stay on the device however much the others take", a, b);
}

/* Right before a call that liblms retries when the driver runs out of memory: the driver's
 * entry point fails once so (when the row asks). */
static void arm_fault(void)
{
    g.armable = !g.off;
    if (g.inject)
        sim_fail_call(g.inject, 1, CUDA_ERROR_OUT_OF_MEMORY);
}

/* The two operands of the next call: fresh patterns, then evicted. */
static void begin(int *a, int *b)
{
    g.turn++;
    *a = (int)(g.turn % BUFFERS);
    *b = (int)((g.turn + 5) % BUFFERS);
    int both[2] = { *a, *b };
    for (int k = 0; k < 2; k++) {
        lms_test_pattern(g.host[both[k]], BUF, g.turn * 2 + (unsigned)k);
        CU_OK(cuMemcpyHtoD(g.dev[both[k]], g.host[both[k]], BUF));
    }
    churn(*a, *b);
    CU_OK(cuCtxSynchronize());
    g.copied = sim_bytes_copied();
}

static int matches(int i)
{
    CU_OK(cuMemcpyDtoH(g.scratch, g.dev[i], BUF));
    for (size_t k = 0; k < BUF; k++)
        if (g.scratch[k] != g.host[i][k]) {
            fprintf(stderr, "buffer %d differs from its model at byte %zu: %u, expected %u\n", i, k,
                    g.scratch[k], g.host[i][k]);
            return 0;
        }
    return 1;
}

/* After the call (which moved `own` bytes itself): with host VMM off, an operand was brought
 * back to the device for it; both are evicted again, then read back against the model. */
static int end(int a, int b, size_t own)
{
    CHECK(cuCtxSynchronize());
    if (g.strict && sim_bytes_copied() - g.copied < own + BUF) {
        fprintf(stderr, "nothing was restored for the call (%zu bytes copied, %zu its own)\n",
                sim_bytes_copied() - g.copied, own);
        return 1;
    }
    churn(a, b);
    return matches(a) && matches(b) ? 0 : 1;
}

/* The stream an asynchronous form runs on: a created one, or the per-thread default stream
 * (NULL in a _ptsz call). */
static CUstream stream_for(int per_thread) { return per_thread ? NULL : g.stream; }

static void model_copy(int dst, size_t dst_off, const unsigned char *src, size_t n)
{
    memmove(g.host[dst] + dst_off, src, n);
}

/* ---- launches: kernelParams, and the packed `extra` buffer (cuBLASLt's path) ---- */

typedef struct launch_args {
    CUdeviceptr dst, src;
    size_t n;
    void *params[3];
    unsigned char packed[24];
    size_t packed_size;
    void *extra[5];
} launch_args;

static void launch_args_init(launch_args *l, int a, int b)
{
    l->dst = g.dev[b] + 8;
    l->src = g.dev[a] + 24;
    l->n = BUF - 64;
    l->params[0] = &l->dst;
    l->params[1] = &l->src;
    l->params[2] = &l->n;
    memcpy(l->packed, &l->dst, 8);
    memcpy(l->packed + 8, &l->src, 8);
    memcpy(l->packed + 16, &l->n, 8);
    l->packed_size = sizeof l->packed;
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, l->packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                      &l->packed_size, CU_LAUNCH_PARAM_END };
    memcpy(l->extra, extra, sizeof extra);
}

static void model_launch(const launch_args *l, int a, int b)
{
    for (size_t i = 0; i < l->n; i++)
        g.host[b][8 + i] = (unsigned char)(g.host[a][24 + i] + 1);
}

typedef enum launch_form { LAUNCH, LAUNCH_EX, LAUNCH_COOPERATIVE } launch_form;

static CUresult issue_launch(void *fn, launch_form form, CUstream s, launch_args *l, int packed)
{
    void **params = packed ? NULL : l->params, **extra = packed ? l->extra : NULL;
    CUlaunchConfig config = { .gridDimX = 2, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 64,
                              .blockDimY = 1, .blockDimZ = 1, .hStream = s };
    switch (form) {
    case LAUNCH:
        return ((__typeof__(cuLaunchKernel) *)fn)(g.incr, 1, 1, 1, 32, 1, 1, 0, s, params, extra);
    case LAUNCH_EX:
        return ((__typeof__(cuLaunchKernelEx) *)fn)(&config, g.incr, params, extra);
    default:
        return ((__typeof__(cuLaunchCooperativeKernel) *)fn)(g.incr, 4, 1, 1, 128, 1, 1, 0, s, params);
    }
}

/* With kernelParams, then (but for cooperative launches, which have none) with `extra`. */
static int launch_round(void *fn, int per_thread, launch_form form)
{
    for (int packed = 0; packed < (form == LAUNCH_COOPERATIVE ? 1 : 2); packed++) {
        int a, b;
        launch_args l;
        begin(&a, &b);
        launch_args_init(&l, a, b);
        arm_fault();
        CHECK(issue_launch(fn, form, stream_for(per_thread), &l, packed));
        model_launch(&l, a, b);
        if (end(a, b, 0))
            return 1;
    }
    return 0;
}
static int launch_kernel(void *fn, int pt) { return launch_round(fn, pt, LAUNCH); }
static int launch_kernel_ex(void *fn, int pt) { return launch_round(fn, pt, LAUNCH_EX); }
static int launch_cooperative(void *fn, int pt) { return launch_round(fn, pt, LAUNCH_COOPERATIVE); }

/* ---- waits for the device: a launch, then the wait, which returns once it has run (not
 * armed: a wait does not allocate) ---- */

static int wait_round(void *fn, int per_thread, int on_event)
{
    int a, b;
    begin(&a, &b);
    launch_args l;
    launch_args_init(&l, a, b);
    CUstream s = stream_for(per_thread);
    CHECK(per_thread ? cuLaunchKernel_ptsz(g.incr, 1, 1, 1, 32, 1, 1, 0, s, l.params, NULL)
                     : cuLaunchKernel(g.incr, 1, 1, 1, 32, 1, 1, 0, s, l.params, NULL));
    model_launch(&l, a, b);
    CUevent done;
    CHECK(cuEventCreate(&done, CU_EVENT_DEFAULT));
    CHECK(cuEventRecord(done, per_thread ? CU_STREAM_PER_THREAD : s));
    if (on_event)
        CHECK(((__typeof__(cuEventSynchronize) *)fn)(done));
    else
        CHECK(((__typeof__(cuStreamSynchronize) *)fn)(s));
    EXPECT(cuEventQuery(done) == CUDA_SUCCESS);
    CHECK(cuEventDestroy(done));
    return end(a, b, 0);
}
static int stream_sync(void *fn, int pt) { return wait_round(fn, pt, 0); }
static int event_sync(void *fn, int pt) { (void)pt; return wait_round(fn, 0, 1); }

/* ---- copies: from a + 5 to b + 3, an odd length (unaligned everywhere) ---- */

#define COPY_LEN (BUF - 11)

static int copy_unified(void *fn, int per_thread, int async)
{
    int a, b;
    begin(&a, &b);
    arm_fault();
    if (async)
        CHECK(((__typeof__(cuMemcpyAsync) *)fn)(g.dev[b] + 3, g.dev[a] + 5, COPY_LEN, stream_for(per_thread)));
    else
        CHECK(((__typeof__(cuMemcpy) *)fn)(g.dev[b] + 3, g.dev[a] + 5, COPY_LEN));
    model_copy(b, 3, g.host[a] + 5, COPY_LEN);
    return end(a, b, COPY_LEN);
}
static int memcpy_sync(void *fn, int pt) { return copy_unified(fn, pt, 0); }
static int memcpy_async(void *fn, int pt) { return copy_unified(fn, pt, 1); }

static int dtod(void *fn, int per_thread)
{
    (void)per_thread;
    int a, b;
    begin(&a, &b);
    arm_fault();
    CHECK(((__typeof__(cuMemcpyDtoD) *)fn)(g.dev[b] + 3, g.dev[a] + 5, COPY_LEN));
    model_copy(b, 3, g.host[a] + 5, COPY_LEN);
    return end(a, b, COPY_LEN);
}

static int dtod_async(void *fn, int per_thread)
{
    int a, b;
    begin(&a, &b);
    arm_fault();
    CHECK(((__typeof__(cuMemcpyDtoDAsync) *)fn)(g.dev[b] + 3, g.dev[a] + 5, COPY_LEN, stream_for(per_thread)));
    model_copy(b, 3, g.host[a] + 5, COPY_LEN);
    return end(a, b, COPY_LEN);
}

/* Host to b, and a to host: both directions in one exercise. */
static int host_copies(void *to_device, void *to_host, int per_thread, int async)
{
    int a, b;
    begin(&a, &b);
    unsigned char *host = malloc(BUF);
    if (!host)
        return 1;
    lms_test_pattern(host, BUF, 1000 + g.turn);
    arm_fault();
    CUresult r;
    if (to_device)
        r = async ? ((__typeof__(cuMemcpyHtoDAsync) *)to_device)(g.dev[b] + 3, host + 1, COPY_LEN, stream_for(per_thread))
                  : ((__typeof__(cuMemcpyHtoD) *)to_device)(g.dev[b] + 3, host + 1, COPY_LEN);
    else
        r = async ? ((__typeof__(cuMemcpyDtoHAsync) *)to_host)(host + 1, g.dev[a] + 5, COPY_LEN, stream_for(per_thread))
                  : ((__typeof__(cuMemcpyDtoH) *)to_host)(host + 1, g.dev[a] + 5, COPY_LEN);
    int failed = r != CUDA_SUCCESS;
    if (to_device)
        model_copy(b, 3, host + 1, COPY_LEN);
    else if (cuCtxSynchronize() != CUDA_SUCCESS || memcmp(host + 1, g.host[a] + 5, COPY_LEN) != 0)
        failed = 1;
    free(host);
    if (failed) {
        fprintf(stderr, "the copy returned %d or brought other bytes\n", (int)r);
        return 1;
    }
    return end(a, b, COPY_LEN);
}
static int htod(void *fn, int pt) { return host_copies(fn, NULL, pt, 0); }
static int dtoh(void *fn, int pt) { return host_copies(NULL, fn, pt, 0); }
static int htod_async(void *fn, int pt) { return host_copies(fn, NULL, pt, 1); }
static int dtoh_async(void *fn, int pt) { return host_copies(NULL, fn, pt, 1); }

/* From a to the second device, and from there to b, with the same entry point. */
static int peer_copies(void *fn, int per_thread, int async)
{
    int a, b;
    begin(&a, &b);
    arm_fault();
    if (async) {
        __typeof__(cuMemcpyPeerAsync) *f = (__typeof__(cuMemcpyPeerAsync) *)fn;
        CHECK(f(g.peer, g.peer_ctx, g.dev[a] + 5, g.ctx, COPY_LEN, stream_for(per_thread)));
        CHECK(f(g.dev[b] + 3, g.ctx, g.peer, g.peer_ctx, COPY_LEN, stream_for(per_thread)));
    } else {
        __typeof__(cuMemcpyPeer) *f = (__typeof__(cuMemcpyPeer) *)fn;
        CHECK(f(g.peer, g.peer_ctx, g.dev[a] + 5, g.ctx, COPY_LEN));
        CHECK(f(g.dev[b] + 3, g.ctx, g.peer, g.peer_ctx, COPY_LEN));
    }
    model_copy(b, 3, g.host[a] + 5, COPY_LEN);
    return end(a, b, 2 * COPY_LEN);
}
static int peer(void *fn, int pt) { return peer_copies(fn, pt, 0); }
static int peer_async(void *fn, int pt) { return peer_copies(fn, pt, 1); }

/* ---- pitched copies: rows of 300 bytes, a 512-byte pitch in a, 700 in b ---- */

enum { WIDTH = 300, HEIGHT = 20, DEPTH = 3, SRC_PITCH = 512, DST_PITCH = 700,
       SRC_ROWS = 25, DST_ROWS = 30 }; /* rows per plane */

/* The model of a pitched copy into b from src (a's model, or host memory). */
static void model_pitched(int b, size_t dst_x, size_t dst_y, size_t dst_z, const unsigned char *src,
                          size_t src_x, size_t src_y, size_t src_z, size_t depth)
{
    for (size_t z = 0; z < depth; z++)
        for (size_t y = 0; y < HEIGHT; y++)
            memmove(g.host[b] + ((dst_z + z) * DST_ROWS + dst_y + y) * DST_PITCH + dst_x,
                    src + ((src_z + z) * SRC_ROWS + src_y + y) * SRC_PITCH + src_x, WIDTH);
}

/* A 2D copy from a (or from host memory: from_host) to b. */
static int copy_2d(void *fn, int per_thread, int async, int from_host)
{
    int a, b;
    begin(&a, &b);
    unsigned char *host = from_host ? g.scratch : NULL;
    if (host)
        lms_test_pattern(host, BUF, 2000 + g.turn);
    arm_fault();
    CUDA_MEMCPY2D p = {
        .srcXInBytes = 7, .srcY = 2, .srcPitch = SRC_PITCH, .srcMemoryType = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE,
        .srcHost = host, .srcDevice = host ? 0 : g.dev[a],
        .dstXInBytes = 5, .dstY = 1, .dstPitch = DST_PITCH,
        .dstMemoryType = async ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_DEVICE, .dstDevice = g.dev[b],
        .WidthInBytes = WIDTH, .Height = HEIGHT,
    };
    if (async)
        CHECK(((__typeof__(cuMemcpy2DAsync) *)fn)(&p, stream_for(per_thread)));
    else
        CHECK(((__typeof__(cuMemcpy2D) *)fn)(&p));
    /* A 2D copy's rows are SRC_PITCH apart: its model is one plane of the 3D model's, whose
     * planes are SRC_ROWS rows: with z = 0 the plane size does not matter. */
    model_pitched(b, 5, 1, 0, host ? host : g.host[a], 7, 2, 0, 1);
    return end(a, b, WIDTH * HEIGHT);
}
static int copy2d(void *fn, int pt) { return copy_2d(fn, pt, 0, 1); }
static int copy2d_unaligned(void *fn, int pt) { return copy_2d(fn, pt, 0, 0); }
static int copy2d_async(void *fn, int pt) { return copy_2d(fn, pt, 1, 0); }

static int copy_3d(void *fn, int per_thread, int async)
{
    int a, b;
    begin(&a, &b);
    CUDA_MEMCPY3D p = {
        .srcXInBytes = 3, .srcY = 4, .srcZ = 1, .srcMemoryType = CU_MEMORYTYPE_DEVICE,
        .srcDevice = g.dev[a], .srcPitch = SRC_PITCH, .srcHeight = SRC_ROWS,
        .dstXInBytes = 9, .dstY = 2, .dstZ = 0, .dstMemoryType = CU_MEMORYTYPE_DEVICE,
        .dstDevice = g.dev[b], .dstPitch = DST_PITCH, .dstHeight = DST_ROWS,
        .WidthInBytes = WIDTH, .Height = HEIGHT, .Depth = DEPTH,
    };
    arm_fault();
    if (async)
        CHECK(((__typeof__(cuMemcpy3DAsync) *)fn)(&p, stream_for(per_thread)));
    else
        CHECK(((__typeof__(cuMemcpy3D) *)fn)(&p));
    model_pitched(b, 9, 2, 0, g.host[a], 3, 4, 1, DEPTH);
    return end(a, b, WIDTH * HEIGHT * DEPTH);
}
static int copy3d(void *fn, int pt) { return copy_3d(fn, pt, 0); }
static int copy3d_async(void *fn, int pt) { return copy_3d(fn, pt, 1); }

/* From a to the second device, and from there, laid out alike, to b. */
static int copy_3d_peer(void *fn, int per_thread, int async)
{
    int a, b;
    begin(&a, &b);
    CUDA_MEMCPY3D_PEER there = {
        .srcXInBytes = 3, .srcY = 4, .srcZ = 1, .srcMemoryType = CU_MEMORYTYPE_DEVICE,
        .srcDevice = g.dev[a], .srcContext = g.ctx, .srcPitch = SRC_PITCH, .srcHeight = SRC_ROWS,
        .dstXInBytes = 9, .dstY = 2, .dstZ = 0, .dstMemoryType = CU_MEMORYTYPE_DEVICE,
        .dstDevice = g.peer, .dstContext = g.peer_ctx, .dstPitch = DST_PITCH, .dstHeight = DST_ROWS,
        .WidthInBytes = WIDTH, .Height = HEIGHT, .Depth = DEPTH,
    };
    CUDA_MEMCPY3D_PEER back = there;
    back.srcXInBytes = 9, back.srcY = 2, back.srcZ = 0, back.srcDevice = g.peer;
    back.srcContext = g.peer_ctx, back.srcPitch = DST_PITCH, back.srcHeight = DST_ROWS;
    back.dstDevice = g.dev[b], back.dstContext = g.ctx;
    arm_fault();
    for (int k = 0; k < 2; k++) {
        const CUDA_MEMCPY3D_PEER *p = k ? &back : &there;
        if (async)
            CHECK(((__typeof__(cuMemcpy3DPeerAsync) *)fn)(p, stream_for(per_thread)));
        else
            CHECK(((__typeof__(cuMemcpy3DPeer) *)fn)(p));
    }
    model_pitched(b, 9, 2, 0, g.host[a], 3, 4, 1, DEPTH);
    return end(a, b, 2 * WIDTH * HEIGHT * DEPTH);
}
static int copy3d_peer(void *fn, int pt) { return copy_3d_peer(fn, pt, 0); }
static int copy3d_peer_async(void *fn, int pt) { return copy_3d_peer(fn, pt, 1); }

/* ---- memsets of each width, 1D and 2D (pitch 1000), synchronous and not ---- */

#define SET_PITCH 1000
#define SET_ROWS 200

/* The model of `rows` rows (1: a 1D memset) of count elements of `width` bytes at b + offset. */
static void model_set(int b, size_t offset, size_t count, size_t rows, unsigned width, uint32_t value)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < count; i++)
            memcpy(g.host[b] + offset + r * SET_PITCH + i * width, &value, width);
}

typedef enum set_form { SET_1D, SET_2D, SET_1D_ASYNC, SET_2D_ASYNC } set_form;

static CUresult call_set(void *fn, set_form form, unsigned width, CUdeviceptr dst, uint32_t v,
                         size_t count, CUstream s)
{
#define SET_CALL(name) ((__typeof__(name) *)fn)
    switch (form * 4 + width) {
    case SET_1D * 4 + 1: return SET_CALL(cuMemsetD8)(dst, (unsigned char)v, count);
    case SET_1D * 4 + 2: return SET_CALL(cuMemsetD16)(dst, (unsigned short)v, count);
    case SET_1D * 4 + 4: return SET_CALL(cuMemsetD32)(dst, v, count);
    case SET_2D * 4 + 1: return SET_CALL(cuMemsetD2D8)(dst, SET_PITCH, (unsigned char)v, count, SET_ROWS);
    case SET_2D * 4 + 2: return SET_CALL(cuMemsetD2D16)(dst, SET_PITCH, (unsigned short)v, count, SET_ROWS);
    case SET_2D * 4 + 4: return SET_CALL(cuMemsetD2D32)(dst, SET_PITCH, v, count, SET_ROWS);
    case SET_1D_ASYNC * 4 + 1: return SET_CALL(cuMemsetD8Async)(dst, (unsigned char)v, count, s);
    case SET_1D_ASYNC * 4 + 2: return SET_CALL(cuMemsetD16Async)(dst, (unsigned short)v, count, s);
    case SET_1D_ASYNC * 4 + 4: return SET_CALL(cuMemsetD32Async)(dst, v, count, s);
    case SET_2D_ASYNC * 4 + 1: return SET_CALL(cuMemsetD2D8Async)(dst, SET_PITCH, (unsigned char)v, count, SET_ROWS, s);
    case SET_2D_ASYNC * 4 + 2: return SET_CALL(cuMemsetD2D16Async)(dst, SET_PITCH, (unsigned short)v, count, SET_ROWS, s);
    default: return SET_CALL(cuMemsetD2D32Async)(dst, SET_PITCH, v, count, SET_ROWS, s);
    }
#undef SET_CALL
}

/* One memset at b + 4 (aligned for every width): over nearly all of b in 1D, 200 rows in 2D. */
static int memset_case(void *fn, int per_thread, set_form form, unsigned width)
{
    int a, b;
    begin(&a, &b);
    uint32_t value = 0xC3A5F00Du ^ (g.turn * 0x01010101u);
    int two_d = form == SET_2D || form == SET_2D_ASYNC;
    size_t count = two_d ? 240 : (BUF - 16) / width, rows = two_d ? SET_ROWS : 1;
    arm_fault();
    CHECK(call_set(fn, form, width, g.dev[b] + 4, value, count, stream_for(per_thread)));
    model_set(b, 4, count, rows, width, value);
    return end(a, b, 0);
}
#define MEMSET_EXERCISE(name, form, width) \
    static int name(void *fn, int pt) { return memset_case(fn, pt, form, width); }
MEMSET_EXERCISE(set8, SET_1D, 1)
MEMSET_EXERCISE(set16, SET_1D, 2)
MEMSET_EXERCISE(set32, SET_1D, 4)
MEMSET_EXERCISE(set2d8, SET_2D, 1)
MEMSET_EXERCISE(set2d16, SET_2D, 2)
MEMSET_EXERCISE(set2d32, SET_2D, 4)
MEMSET_EXERCISE(set8_async, SET_1D_ASYNC, 1)
MEMSET_EXERCISE(set16_async, SET_1D_ASYNC, 2)
MEMSET_EXERCISE(set32_async, SET_1D_ASYNC, 4)
MEMSET_EXERCISE(set2d8_async, SET_2D_ASYNC, 1)
MEMSET_EXERCISE(set2d16_async, SET_2D_ASYNC, 2)
MEMSET_EXERCISE(set2d32_async, SET_2D_ASYNC, 4)

/* ---- batches of copies: a to b, b within itself, host memory to b ---- */

static int batch_round(void *fn, int per_thread, int v1)
{
    int a, b;
    begin(&a, &b);
    unsigned char host[500];
    lms_test_pattern(host, sizeof host, 5000 + g.turn);
    CUdeviceptr dsts[3] = { g.dev[b] + 3, g.dev[b] + 8192, g.dev[b] + 20000 };
    CUdeviceptr srcs[3] = { g.dev[a] + 5, g.dev[a] + 4096, (CUdeviceptr)(uintptr_t)host };
    size_t sizes[3] = { 1000, 3000, sizeof host }, idxs[1] = { 0 }, fail = 0;
    CUmemcpyAttributes attrs[1] = { { .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM } };
    arm_fault();
    if (v1)
        CHECK(((lms_memcpy_batch_v1 *)fn)(dsts, srcs, sizes, 3, attrs, idxs, 1, &fail, stream_for(per_thread)));
    else
        CHECK(((__typeof__(cuMemcpyBatchAsync_v2) *)fn)(dsts, srcs, sizes, 3, attrs, idxs, 1, stream_for(per_thread)));
    model_copy(b, 3, g.host[a] + 5, 1000);
    model_copy(b, 8192, g.host[a] + 4096, 3000);
    model_copy(b, 20000, host, sizeof host);
    return end(a, b, 4000 + sizeof host);
}
static int batch_copies(void *fn, int pt) { return batch_round(fn, pt, 0); }
static int batch_copies_v1(void *fn, int pt) { return batch_round(fn, pt, 1); }

/* ---- stream memory operations: words written and waited for in stream order ---- */

typedef enum memop_form { WRITE32, WRITE64, WAIT32, WAIT64, BATCH } memop_form;

static void model_word(int b, size_t offset, uint64_t value, size_t size)
{
    memcpy(g.host[b] + offset, &value, size); /* little-endian, as the device */
}

/* Writes into b (a write form), or waits in a for a word the stream wrote just before. */
static int memop_round(void *fn, int per_thread, memop_form form)
{
    int a, b;
    begin(&a, &b);
    CUstream s = stream_for(per_thread);
    uint64_t value = 0x0102030405060708ull * g.turn;
    CUresult r;
    if (form == WAIT32 || form == WAIT64) {
        int wide = form == WAIT64;
        CHECK(wide ? (per_thread ? cuStreamWriteValue64_v2_ptsz : cuStreamWriteValue64_v2)(s, g.dev[a] + 32, value, 0)
                   : (per_thread ? cuStreamWriteValue32_v2_ptsz : cuStreamWriteValue32_v2)(s, g.dev[a] + 32, (cuuint32_t)value, 0));
        model_word(a, 32, value, wide ? 8 : 4);
        churn(a, b);
        CHECK(cuCtxSynchronize());
        g.copied = sim_bytes_copied();
        arm_fault();
        r = wide ? ((__typeof__(cuStreamWaitValue64_v2) *)fn)(s, g.dev[a] + 32, value, CU_STREAM_WAIT_VALUE_EQ)
                 : ((__typeof__(cuStreamWaitValue32_v2) *)fn)(s, g.dev[a] + 32, (cuuint32_t)value, CU_STREAM_WAIT_VALUE_EQ);
    } else if (form == BATCH) {
        CUstreamBatchMemOpParams ops[3] = {
            {.writeValue = {.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32, .address = g.dev[b] + 40, .value = (cuuint32_t)value}},
            {.writeValue = {.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64, .address = g.dev[b] + 48, .value64 = ~value}},
            {.waitValue = {.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32, .address = g.dev[b] + 40,
                           .value = (cuuint32_t)value, .flags = CU_STREAM_WAIT_VALUE_EQ}},
        };
        arm_fault();
        r = ((__typeof__(cuStreamBatchMemOp_v2) *)fn)(s, 3, ops, 0);
        model_word(b, 40, value, 4);
        model_word(b, 48, ~value, 8);
    } else {
        arm_fault();
        r = form == WRITE64 ? ((__typeof__(cuStreamWriteValue64_v2) *)fn)(s, g.dev[b] + 24, value, 0)
                            : ((__typeof__(cuStreamWriteValue32_v2) *)fn)(s, g.dev[b] + 16, (cuuint32_t)value, 0);
        model_word(b, form == WRITE64 ? 24 : 16, value, form == WRITE64 ? 8 : 4);
    }
    CHECK(r);
    return end(a, b, 0);
}
static int write32(void *fn, int pt) { return memop_round(fn, pt, WRITE32); }
static int write64(void *fn, int pt) { return memop_round(fn, pt, WRITE64); }
static int wait32(void *fn, int pt) { return memop_round(fn, pt, WAIT32); }
static int wait64(void *fn, int pt) { return memop_round(fn, pt, WAIT64); }
static int batch_memop(void *fn, int pt) { return memop_round(fn, pt, BATCH); }

/* ---- allocation ---- */

/* p (bytes long) holds a pattern after the other buffers took the device, and after the
 * allocation was evicted. */
static int keeps_data(CUdeviceptr p, size_t bytes)
{
    unsigned char *data = malloc(bytes), *back = malloc(bytes);
    int same = 0;
    if (data && back) {
        lms_test_pattern(data, bytes, 3000 + g.turn);
        same = cuMemcpyHtoD(p, data, bytes) == CUDA_SUCCESS;
        churn(-1, -1);
        same = same && cuMemcpyDtoH(back, p, bytes) == CUDA_SUCCESS && memcmp(data, back, bytes) == 0;
    }
    free(data);
    free(back);
    if (!same)
        fprintf(stderr, "an allocation lost its data\n");
    return same;
}

/* The hooks another exercise fetches too (cuMemFree_v2 with cuMemAlloc_v2 ...). */
static void *fetch(const char *symbol);

static int alloc_and_free(void *alloc_fn, void *free_fn)
{
    CUdeviceptr p;
    CHECK(((__typeof__(cuMemAlloc) *)alloc_fn)(&p, BUF));
    int kept = keeps_data(p, BUF);
    CHECK(((__typeof__(cuMemFree) *)free_fn)(p));
    return !kept;
}
static int mem_alloc(void *fn, int pt) { (void)pt; return alloc_and_free(fn, fetch("cuMemFree_v2")); }
static int mem_free(void *fn, int pt) { (void)pt; return alloc_and_free(fetch("cuMemAlloc_v2"), fn); }

static int mem_alloc_pitch(void *fn, int per_thread)
{
    (void)per_thread;
    CUdeviceptr p;
    size_t pitch = 0;
    EXPECT(((__typeof__(cuMemAllocPitch) *)fn)(&p, &pitch, 1000, 300, 3) == CUDA_ERROR_INVALID_VALUE);
    CHECK(((__typeof__(cuMemAllocPitch) *)fn)(&p, &pitch, 1000, 300, 4));
    EXPECT(pitch >= 1000 && pitch % 512 == 0);
    int kept = keeps_data(p, pitch * 300);
    CHECK(cuMemFree(p));
    return !kept;
}

static int mem_get_info(void *fn, int per_thread)
{
    (void)per_thread;
    size_t free_bytes = 0, total = 0;
    CHECK(((__typeof__(cuMemGetInfo) *)fn)(&free_bytes, &total));
    size_t device_total = 0;
    CHECK(cuDeviceTotalMem(&device_total, 0));
    /* The cache's capacity: the device and the host backing, less what the buffers demand;
     * passed through, the driver's. */
    EXPECT(g.off ? total == device_total : total > device_total && free_bytes <= total - BUFFERS * BUF);
    return 0;
}

/* Stream-ordered allocation from the current pool, or from the device's default pool
 * (from_pool), and its stream-ordered free (free_fn, per-thread as the allocation). */
static int alloc_async(void *alloc_fn, void *free_fn, int per_thread, int from_pool)
{
    CUdeviceptr p;
    CUstream s = stream_for(per_thread);
    if (from_pool) {
        CUmemoryPool pool;
        CHECK(cuDeviceGetDefaultMemPool(&pool, 0));
        CHECK(((__typeof__(cuMemAllocFromPoolAsync) *)alloc_fn)(&p, BUF, pool, s));
    } else {
        CHECK(((__typeof__(cuMemAllocAsync) *)alloc_fn)(&p, BUF, s));
    }
    int kept = keeps_data(p, BUF);
    CHECK(((__typeof__(cuMemFreeAsync) *)free_fn)(p, s));
    CHECK(cuCtxSynchronize());
    return !kept;
}
static int mem_alloc_async(void *fn, int pt)
{
    return alloc_async(fn, fetch(pt ? "cuMemFreeAsync_ptsz" : "cuMemFreeAsync"), pt, 0);
}
static int mem_alloc_from_pool(void *fn, int pt)
{
    return alloc_async(fn, fetch(pt ? "cuMemFreeAsync_ptsz" : "cuMemFreeAsync"), pt, 1);
}
static int mem_free_async(void *fn, int pt)
{
    return alloc_async(fetch(pt ? "cuMemAllocAsync_ptsz" : "cuMemAllocAsync"), fn, pt, 0);
}

/* The program's own VMM: a handle it creates, maps, uses while liblms swaps the others, and
 * releases. */
static int mem_create(void *fn, int per_thread)
{
    (void)per_thread;
    const size_t size = (size_t)2 << 20;
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    CUmemAccessDesc access = { prop.location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CUmemGenericAllocationHandle handle;
    CUdeviceptr va;
    CHECK(cuMemAddressReserve(&va, size, 0, 0, 0));
    CHECK(((__typeof__(cuMemCreate) *)fn)(&handle, size, &prop, 0));
    CHECK(cuMemMap(va, size, 0, handle, 0));
    CHECK(cuMemSetAccess(va, size, &access, 1));
    int kept = keeps_data(va, size);
    CHECK(cuMemUnmap(va, size));
    CHECK(((__typeof__(cuMemRelease) *)fetch("cuMemRelease"))(handle));
    CHECK(cuMemAddressFree(va, size));
    return !kept;
}
static int mem_release(void *fn, int per_thread)
{
    (void)fn;
    return mem_create(fetch("cuMemCreate"), per_thread);
}

/* ---- what the driver says of an evicted allocation ---- */

/* Each attribute of an evicted swappable allocation, as the driver gives it for cuMemAlloc
 * memory (a plain allocation below LMS_THRESHOLD_KB): the same result and value, but that VMM
 * memory cannot be exported through legacy IPC (unless liblms passes everything through). */
static int answers_as_cumemalloc(__typeof__(cuPointerGetAttribute) *get, CUdeviceptr swappable)
{
    static const CUpointer_attribute attrs[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_CONTEXT,
        CU_POINTER_ATTRIBUTE_HOST_POINTER, CU_POINTER_ATTRIBUTE_MAPPED, CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
    };
    CUdeviceptr plain, pointer = 0;
    CHECK(cuMemAlloc(&plain, 4096));
    int failed = 0;
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        unsigned long long ours = 0, drivers = 0;
        CUresult r = get(&ours, attrs[i], swappable), want = cuPointerGetAttribute(&drivers, attrs[i], plain + 9);
        if (attrs[i] == CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE && !g.off)
            drivers = 0;
        if (r != want || ours != drivers) {
            fprintf(stderr, "attribute %d: %d, %llu; the driver's for cuMemAlloc memory: %d, %llu\n",
                    (int)attrs[i], (int)r, ours, (int)want, drivers);
            failed = 1;
        }
    }
    CHECK(get(&pointer, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, swappable));
    CUdeviceptr base = 0;
    size_t size = 0;
    CHECK(((__typeof__(cuMemGetAddressRange) *)fetch("cuMemGetAddressRange_v2"))(&base, &size, plain + 9));
    CHECK(cuMemFree(plain));
    return !failed && pointer == swappable && base == plain && size == 4096;
}

static int pointer_queries(void *fn, int per_thread)
{
    (void)fn, (void)per_thread;
    int a, b;
    begin(&a, &b);
    EXPECT(answers_as_cumemalloc((__typeof__(cuPointerGetAttribute) *)fetch("cuPointerGetAttribute"),
                                 g.dev[b] + 9));
    CUdeviceptr start = 0, base = 0;
    size_t size = 0;
    CUcontext ctx = NULL;
    CUpointer_attribute attrs[] = { CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR };
    void *data[] = { &ctx, &start };
    __typeof__(cuPointerGetAttributes) *get_all = (__typeof__(cuPointerGetAttributes) *)fetch("cuPointerGetAttributes");
    CHECK(get_all(2, attrs, data, g.dev[a] + 9));
    EXPECT(ctx == g.ctx && start == g.dev[a]);
    void *host = &host; /* device memory has no host pointer: the plural form says NULL */
    CUpointer_attribute host_attr = CU_POINTER_ATTRIBUTE_HOST_POINTER, bad_attr = (CUpointer_attribute)9999;
    void *host_data[] = { &host };
    CHECK(get_all(1, &host_attr, host_data, g.dev[a] + 9));
    EXPECT(host == NULL);
    EXPECT(get_all(1, &bad_attr, host_data, g.dev[a] + 9) == CUDA_ERROR_INVALID_VALUE);
    CHECK(((__typeof__(cuPointerGetAttribute) *)fetch("cuPointerGetAttribute"))(
        &size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, g.dev[a] + 9));
    EXPECT(size == BUF);
    CHECK(((__typeof__(cuMemGetAddressRange) *)fetch("cuMemGetAddressRange_v2"))(&base, &size, g.dev[b] + 77));
    EXPECT(base == g.dev[b] && size == BUF);
    CUipcMemHandle ipc;
    lms_test_stderr_begin(); /* liblms explains the refusal */
    CUresult refused = ((__typeof__(cuIpcGetMemHandle) *)fetch("cuIpcGetMemHandle"))(&ipc, g.dev[a]);
    lms_test_stderr_end();
    EXPECT(refused == (g.off ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE)); /* passed through: plain memory */
    /* A retained handle pins its allocation on the device: one of its own. */
    CUmemGenericAllocationHandle handle;
    CUdeviceptr pinned;
    CHECK(cuMemAlloc(&pinned, BUF));
    CUresult retained = ((__typeof__(cuMemRetainAllocationHandle) *)fetch("cuMemRetainAllocationHandle"))(
        &handle, (void *)(uintptr_t)pinned);
    EXPECT(retained == (g.off ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS)); /* cuMemAlloc memory has none */
    if (retained == CUDA_SUCCESS)
        CHECK(cuMemRelease(handle));
    CHECK(cuMemFree(pinned));
    return end(a, b, 0);
}

/* ---- graphs: a captured launch, replayed on evicted buffers ---- */

/* The calls of one capture-instantiate-launch round: liblms's exports, but for the one a row
 * fetched through cuGetProcAddress. */
typedef struct graph_calls {
    __typeof__(cuStreamBeginCapture_v2) *begin_capture;
    __typeof__(cuStreamEndCapture) *end_capture;
    __typeof__(cuGraphInstantiateWithFlags) *instantiate;
    __typeof__(cuGraphInstantiateWithParams) *instantiate_params; /* used instead when set */
    lms_graph_instantiate_v1 *instantiate_v1;                      /* likewise */
    __typeof__(cuGraphExecUpdate_v2) *update;                      /* none unless set */
    lms_graph_exec_update_v1 *update_v1;
    __typeof__(cuGraphLaunch) *launch;
    __typeof__(cuGraphExecDestroy) *exec_destroy;
    __typeof__(cuGraphDestroy) *destroy;
} graph_calls;

static graph_calls graph_defaults(int per_thread)
{
    return (graph_calls){
        .begin_capture = per_thread ? cuStreamBeginCapture_v2_ptsz : cuStreamBeginCapture_v2,
        .end_capture = per_thread ? cuStreamEndCapture_ptsz : cuStreamEndCapture,
        .instantiate = cuGraphInstantiateWithFlags,
        .launch = per_thread ? cuGraphLaunch_ptsz : cuGraphLaunch,
        .exec_destroy = cuGraphExecDestroy,
        .destroy = cuGraphDestroy,
    };
}

/* The graph: a launch, a memset and a copy, whose nodes liblms reads to know what it uses. */
static int graph_round(const graph_calls *c, int per_thread)
{
    int a, b;
    launch_args l;
    CUgraph graph;
    CUgraphExec exec;
    CUstream s = stream_for(per_thread), named = per_thread ? CU_STREAM_PER_THREAD : s;
    uint32_t value = 0x11223344u ^ g.turn;
    begin(&a, &b);
    launch_args_init(&l, a, b);
    CHECK(c->begin_capture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CHECK(cuLaunchKernel(g.incr, 1, 1, 1, 1, 1, 1, 0, named, l.params, NULL));
    CHECK(cuMemsetD32Async(g.dev[a] + 64, value, 100, named));
    CHECK(cuMemcpyDtoDAsync(g.dev[a] + 100000, g.dev[b] + 8, 5000, named));
    CHECK(c->end_capture(s, &graph));
    if (c->instantiate_params) {
        CUDA_GRAPH_INSTANTIATE_PARAMS params = { .hUploadStream = s };
        CHECK(c->instantiate_params(&exec, graph, &params));
    } else if (c->instantiate_v1) {
        CHECK(c->instantiate_v1(&exec, graph, NULL, NULL, 0));
    } else {
        CHECK(c->instantiate(&exec, graph, 0));
    }
    if (c->update) {
        CUgraphExecUpdateResultInfo info;
        CHECK(c->update(exec, graph, &info));
        EXPECT(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
    } else if (c->update_v1) {
        CUgraphNode error_node;
        CUgraphExecUpdateResult result;
        CHECK(c->update_v1(exec, graph, &error_node, &result));
        EXPECT(result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
    }
    churn(a, b); /* the capture restored them: the replay finds them evicted again */
    CHECK(cuCtxSynchronize());
    g.copied = sim_bytes_copied();
    CHECK(c->launch(exec, s));
    model_launch(&l, a, b);
    model_set(a, 64, 100, 1, 4, value);
    model_copy(a, 100000, g.host[b] + 8, 5000);
    int failed = end(a, b, 0);
    CHECK(c->exec_destroy(exec));
    CHECK(c->destroy(graph));
    return failed;
}

#define GRAPH_EXERCISE(name, field, type)                                \
    static int name(void *fn, int pt)                                    \
    {                                                                    \
        graph_calls c = graph_defaults(pt);                              \
        c.field = (type *)fn;                                            \
        return graph_round(&c, pt);                                      \
    }
GRAPH_EXERCISE(graph_begin, begin_capture, __typeof__(cuStreamBeginCapture_v2))
GRAPH_EXERCISE(graph_end, end_capture, __typeof__(cuStreamEndCapture))
GRAPH_EXERCISE(graph_instantiate, instantiate, __typeof__(cuGraphInstantiateWithFlags))
GRAPH_EXERCISE(graph_instantiate_params, instantiate_params, __typeof__(cuGraphInstantiateWithParams))
GRAPH_EXERCISE(graph_instantiate_v1, instantiate_v1, lms_graph_instantiate_v1)
GRAPH_EXERCISE(graph_update, update, __typeof__(cuGraphExecUpdate_v2))
GRAPH_EXERCISE(graph_update_v1, update_v1, lms_graph_exec_update_v1)
GRAPH_EXERCISE(graph_launch, launch, __typeof__(cuGraphLaunch))
GRAPH_EXERCISE(graph_exec_destroy, exec_destroy, __typeof__(cuGraphExecDestroy))
GRAPH_EXERCISE(graph_destroy, destroy, __typeof__(cuGraphDestroy))

/* ---- unloads: a module's (or library's) kernel on an evicted buffer, then the unload ---- */

static char module_path[4096]; /* tests/sim_test_module.so, beside this program */

/* scale(float *data, float factor, int n) of the module doubles n floats of a. */
static int unload_round(void *fn, int library)
{
    int a, b;
    begin(&a, &b);
    enum { N = 1000 };
    float values[N];
    for (int i = 0; i < N; i++)
        values[i] = (float)(i - 300) / 8;
    CHECK(cuMemcpyHtoD(g.dev[a], values, sizeof values));
    churn(a, b);
    CUmodule module;
    CUlibrary lib;
    CUfunction scale;
    if (library) {
        CUkernel k;
        CHECK(cuLibraryLoadFromFile(&lib, module_path, NULL, NULL, 0, NULL, NULL, 0));
        CHECK(cuLibraryGetKernel(&k, lib, "scale"));
        scale = (CUfunction)k;
    } else {
        CHECK(cuModuleLoad(&module, module_path));
        CHECK(cuModuleGetFunction(&scale, module, "scale"));
    }
    float factor = 2;
    int n = N;
    void *params[] = { &g.dev[a], &factor, &n };
    CHECK(cuCtxSynchronize());
    g.copied = sim_bytes_copied();
    CHECK(cuLaunchKernel(scale, 1, 1, 1, 1, 1, 1, 0, g.stream, params, NULL));
    for (int i = 0; i < N; i++)
        values[i] *= 2;
    memcpy(g.host[a], values, sizeof values);
    int failed = end(a, b, 0);
    if (library)
        CHECK(((__typeof__(cuLibraryUnload) *)fn)(lib));
    else
        CHECK(((__typeof__(cuModuleUnload) *)fn)(module));
    return failed;
}
static int module_unload(void *fn, int pt) { (void)pt; return unload_round(fn, 0); }
static int library_unload(void *fn, int pt) { (void)pt; return unload_round(fn, 1); }

/* ---- context teardown: liblms forgets the context's allocations, keeps the others' ---- */

static int all_buffers_kept(void)
{
    for (int i = 0; i < BUFFERS; i++)
        if (!matches(i))
            return 0;
    return 1;
}

/* An allocation of the current context holds a pattern. */
static int holds_pattern(CUdeviceptr *p)
{
    unsigned char data[4096], back[4096];
    lms_test_pattern(data, sizeof data, 4000 + g.turn);
    CHECK(cuMemAlloc(p, BUF));
    CHECK(cuMemcpyHtoD(*p + BUF - sizeof data, data, sizeof data));
    CHECK(cuMemcpyDtoH(back, *p + BUF - sizeof data, sizeof back));
    EXPECT(memcmp(data, back, sizeof data) == 0);
    return 0;
}

static int ctx_destroy(void *fn, int pt)
{
    (void)pt;
    CUcontext c;
    CUdeviceptr p;
    CHECK(cuCtxCreate(&c, NULL, 0, 0));
    if (holds_pattern(&p))
        return 1;
    churn(-1, -1);
    CHECK(((__typeof__(cuCtxDestroy) *)fn)(c));
    CHECK(cuCtxSetCurrent(g.ctx));
    EXPECT(all_buffers_kept());
    return 0;
}

/* The second device's primary context (retained by setup), retained again and released
 * through fn: still active, its allocation intact; released again: gone, and the first
 * device's buffers intact. */
static int primary_release(void *fn, int pt)
{
    (void)pt;
    __typeof__(cuDevicePrimaryCtxRelease) *release = (__typeof__(cuDevicePrimaryCtxRelease) *)fn;
    CUcontext c;
    CUdeviceptr p;
    unsigned flags;
    int active;
    CHECK(cuDevicePrimaryCtxRetain(&c, 1));
    CHECK(cuCtxSetCurrent(c));
    if (holds_pattern(&p))
        return 1;
    CHECK(release(1));
    CHECK(cuDevicePrimaryCtxGetState(1, &flags, &active));
    EXPECT(active);
    CHECK(cuMemsetD8(p, 1, BUF));
    CHECK(release(1));
    CHECK(cuDevicePrimaryCtxGetState(1, &flags, &active));
    EXPECT(!active);
    CHECK(cuCtxSetCurrent(g.ctx));
    EXPECT(all_buffers_kept());
    return 0;
}

/* A reset of the second device ends its context with g.peer in it; a new one allocates. */
static int primary_reset(void *fn, int pt)
{
    (void)pt;
    CUcontext c;
    CUdeviceptr p;
    CHECK(((__typeof__(cuDevicePrimaryCtxReset) *)fn)(1));
    CHECK(cuDevicePrimaryCtxRetain(&c, 1));
    CHECK(cuCtxSetCurrent(c));
    int failed = holds_pattern(&p);
    CHECK(cuMemFree(p));
    CHECK(cuDevicePrimaryCtxRelease(1));
    CHECK(cuCtxSetCurrent(g.ctx));
    EXPECT(all_buffers_kept());
    return failed;
}

/* ---- the table ---- */

typedef int exercise_fn(void *fn, int per_thread);

typedef struct row {
    const char *symbol; /* the hook's exported name */
    exercise_fn *run;   /* NULL: skipped, for `why` */
    const char *why;
    int version;        /* the CUDA version cudart asks with: 0 for the newest */
} row;

#define ROW(symbol, run) { #symbol, run, NULL, 0 }
#define ROW_V(symbol, version, run) { #symbol, run, NULL, version }
#define TWIN(symbol, suffix, run) ROW(symbol, run), ROW(symbol##suffix, run)
#define SKIP(symbol, why) { #symbol, NULL, why, 0 }
#define SKIP_TWIN(symbol, suffix, why) SKIP(symbol, why), SKIP(symbol##suffix, why)

static const char NO_ARRAYS[] = "the simulator has no CUDA arrays",
                  NO_CAPTURE_TO_GRAPH[] = "the simulator cannot capture into an existing graph";

static const row rows[] = {
    ROW(cuMemAlloc_v2, mem_alloc),
    ROW(cuMemAllocPitch_v2, mem_alloc_pitch),
    ROW(cuMemFree_v2, mem_free),
    ROW(cuMemGetInfo_v2, mem_get_info),
    TWIN(cuMemAllocAsync, _ptsz, mem_alloc_async),
    TWIN(cuMemAllocFromPoolAsync, _ptsz, mem_alloc_from_pool),
    TWIN(cuMemFreeAsync, _ptsz, mem_free_async),
    ROW(cuMemCreate, mem_create),
    ROW(cuMemRelease, mem_release),
    TWIN(cuLaunchKernel, _ptsz, launch_kernel),
    TWIN(cuLaunchKernelEx, _ptsz, launch_kernel_ex),
    TWIN(cuLaunchCooperativeKernel, _ptsz, launch_cooperative),
    TWIN(cuMemcpy, _ptds, memcpy_sync),
    TWIN(cuMemcpyAsync, _ptsz, memcpy_async),
    TWIN(cuMemcpyPeer, _ptds, peer),
    TWIN(cuMemcpyPeerAsync, _ptsz, peer_async),
    TWIN(cuMemcpyHtoD_v2, _ptds, htod),
    TWIN(cuMemcpyDtoH_v2, _ptds, dtoh),
    TWIN(cuMemcpyDtoD_v2, _ptds, dtod),
    TWIN(cuMemcpyHtoDAsync_v2, _ptsz, htod_async),
    TWIN(cuMemcpyDtoHAsync_v2, _ptsz, dtoh_async),
    TWIN(cuMemcpyDtoDAsync_v2, _ptsz, dtod_async),
    SKIP_TWIN(cuMemcpyDtoA_v2, _ptds, NO_ARRAYS),
    SKIP_TWIN(cuMemcpyAtoD_v2, _ptds, NO_ARRAYS),
    TWIN(cuMemcpy2D_v2, _ptds, copy2d),
    TWIN(cuMemcpy2DUnaligned_v2, _ptds, copy2d_unaligned),
    TWIN(cuMemcpy2DAsync_v2, _ptsz, copy2d_async),
    TWIN(cuMemcpy3D_v2, _ptds, copy3d),
    TWIN(cuMemcpy3DAsync_v2, _ptsz, copy3d_async),
    TWIN(cuMemcpy3DPeer, _ptds, copy3d_peer),
    TWIN(cuMemcpy3DPeerAsync, _ptsz, copy3d_peer_async),
    TWIN(cuMemcpyBatchAsync_v2, _ptsz, batch_copies),
    ROW_V(cuMemcpyBatchAsync, 12080, batch_copies_v1),
    ROW_V(cuMemcpyBatchAsync_ptsz, 12080, batch_copies_v1),
    TWIN(cuStreamSynchronize, _ptsz, stream_sync),
    ROW(cuEventSynchronize, event_sync),
    TWIN(cuStreamWriteValue32_v2, _ptsz, write32),
    TWIN(cuStreamWriteValue64_v2, _ptsz, write64),
    TWIN(cuStreamWaitValue32_v2, _ptsz, wait32),
    TWIN(cuStreamWaitValue64_v2, _ptsz, wait64),
    TWIN(cuStreamBatchMemOp_v2, _ptsz, batch_memop),
    TWIN(cuMemsetD8_v2, _ptds, set8),
    TWIN(cuMemsetD16_v2, _ptds, set16),
    TWIN(cuMemsetD32_v2, _ptds, set32),
    TWIN(cuMemsetD2D8_v2, _ptds, set2d8),
    TWIN(cuMemsetD2D16_v2, _ptds, set2d16),
    TWIN(cuMemsetD2D32_v2, _ptds, set2d32),
    TWIN(cuMemsetD8Async, _ptsz, set8_async),
    TWIN(cuMemsetD16Async, _ptsz, set16_async),
    TWIN(cuMemsetD32Async, _ptsz, set32_async),
    TWIN(cuMemsetD2D8Async, _ptsz, set2d8_async),
    TWIN(cuMemsetD2D16Async, _ptsz, set2d16_async),
    TWIN(cuMemsetD2D32Async, _ptsz, set2d32_async),
    TWIN(cuStreamBeginCapture_v2, _ptsz, graph_begin),
    SKIP_TWIN(cuStreamBeginCaptureToGraph, _ptsz, NO_CAPTURE_TO_GRAPH),
    TWIN(cuStreamEndCapture, _ptsz, graph_end),
    ROW(cuGraphInstantiateWithFlags, graph_instantiate),
    TWIN(cuGraphInstantiateWithParams, _ptsz, graph_instantiate_params),
    ROW_V(cuGraphInstantiate, 10000, graph_instantiate_v1),
    ROW_V(cuGraphInstantiate_v2, 11000, graph_instantiate_v1),
    ROW_V(cuGraphExecUpdate, 11000, graph_update_v1),
    ROW(cuGraphExecUpdate_v2, graph_update),
    TWIN(cuGraphLaunch, _ptsz, graph_launch),
    ROW(cuGraphExecDestroy, graph_exec_destroy),
    ROW(cuGraphDestroy, graph_destroy),
    ROW(cuPointerGetAttribute, pointer_queries),
    ROW(cuPointerGetAttributes, pointer_queries),
    ROW(cuMemGetAddressRange_v2, pointer_queries),
    ROW(cuIpcGetMemHandle, pointer_queries),
    ROW(cuMemRetainAllocationHandle, pointer_queries),
    ROW(cuModuleUnload, module_unload),
    ROW(cuLibraryUnload, library_unload),
    ROW(cuDevicePrimaryCtxReset_v2, primary_reset),
    ROW(cuDevicePrimaryCtxRelease_v2, primary_release),
    ROW(cuCtxDestroy_v2, ctx_destroy),
};
#define ROWS (sizeof rows / sizeof rows[0])

static const char *const hooks[] = {
#define HOOK_NAME(symbol, prototype) #symbol,
    LMS_HOOK_TABLE(HOOK_NAME)
#undef HOOK_NAME
};
#define HOOKS (sizeof hooks / sizeof hooks[0])

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int per_thread_symbol(const char *symbol)
{
    return has_suffix(symbol, "_ptds") || has_suffix(symbol, "_ptsz");
}

/* The name cudart asks for: the symbol without its stream and version suffixes. */
static void request_of(const char *symbol, char *name, size_t size)
{
    snprintf(name, size, "%s", symbol);
    size_t n = strlen(name);
    if (per_thread_symbol(name))
        name[n -= 5] = '\0';
    if (n > 3 && name[n - 3] == '_' && name[n - 2] == 'v')
        name[n - 3] = '\0';
}

static const row *row_of(const char *symbol)
{
    for (size_t i = 0; i < ROWS; i++)
        if (strcmp(rows[i].symbol, symbol) == 0)
            return &rows[i];
    return NULL;
}

static void *liblms;
static unsigned fetches;

/* The wrapper cudart would get for symbol, through cuGetProcAddress v2 and v1 in turn; NULL
 * unless it is liblms's export of that name. */
static void *fetch(const char *symbol)
{
    char name[128];
    request_of(symbol, name, sizeof name);
    cuuint64_t flags = per_thread_symbol(symbol) ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                                 : CU_GET_PROC_ADDRESS_DEFAULT;
    void *fn = NULL;
    CUdriverProcAddressQueryResult status;
    const row *r = row_of(symbol);
    int version = r && r->version ? r->version : 13000;
    CUresult result = fetches++ % 2 ? cuGetProcAddress(name, &fn, version, flags)
                                    : cuGetProcAddress_v2(name, &fn, version, flags, &status);
    void *exported = dlsym(liblms, symbol);
    if (result != CUDA_SUCCESS || !fn || (fn == exported) == g.off) {
        fprintf(stderr, "cuGetProcAddress(\"%s\", flags %llu) gave %p (result %d); liblms's %s is at %p\n",
                name, (unsigned long long)flags, fn, (int)result, symbol, exported);
        return NULL;
    }
    return exported; /* passed through, the driver's: liblms's export is the one under test */
}

/* Every row that runs, each a TAP test; the number that failed. */
static int run_rows(void)
{
    int failed = 0;
    for (size_t i = 0; i < HOOKS; i++) {
        const row *r = row_of(hooks[i]);
        if (!r || !r->run)
            continue;
        void *fn = fetch(hooks[i]);
        g.armable = 0;
        int bad = !fn || r->run(fn, per_thread_symbol(hooks[i]));
        int armable = g.armable;
        char name[128];
        request_of(hooks[i], name, sizeof name);
        /* liblms's restores copy with cuMemcpyHtoDAsync: a fault there is the restore's
         * (the fault sweep's concern), not the call's. */
        armable = armable && strcmp(name, "cuMemcpyHtoDAsync") != 0;
        if (!bad && armable) { /* again, the driver out of memory at the call */
            g.inject = name;
            bad = r->run(fn, per_thread_symbol(hooks[i]));
            g.inject = NULL;
            sim_clear_faults();
        }
        failed += bad;
        if (g.off && bad)
            fprintf(stderr, "%s passed through: its data differ from the model\n", hooks[i]);
        else if (!g.off)
            ok(!bad, "%s through cuGetProcAddress: its data match the model%s", hooks[i],
               armable ? ", also when the driver first runs out of memory" : "");
    }
    return failed;
}

static void setup(void)
{
    g.off = getenv("LMS_MODE") && strcmp(getenv("LMS_MODE"), "off") == 0;
    g.strict = !lms_test_host_vmm() && !g.off; /* evictions can be seen */
    g.ctx = lms_test_context();
    CUdevice second;
    CU_OK(cuDeviceGet(&second, 1));
    CU_OK(cuDevicePrimaryCtxRetain(&g.peer_ctx, second));
    CU_OK(cuCtxSetCurrent(g.peer_ctx));
    CU_OK(cuMemAlloc(&g.peer, BUF));
    CU_OK(cuCtxSetCurrent(g.ctx));
    CU_OK(cuStreamCreate(&g.stream, CU_STREAM_NON_BLOCKING));
    static const size_t sizes[] = { sizeof(void *), sizeof(void *), sizeof(size_t) };
    g.incr = (CUfunction)sim_register_kernel("incr", incr, 3, sizes);
    if (!(g.scratch = malloc(BUF)))
        bail_out("no memory");
    for (int i = 0; i < BUFFERS; i++) {
        CU_OK(cuMemAlloc(&g.dev[i], BUF));
        if (!(g.host[i] = calloc(1, BUF)))
            bail_out("no memory");
        CU_OK(cuMemsetD8(g.dev[i], 0, BUF));
    }
    if (!(liblms = dlopen("liblms.so", RTLD_NOW | RTLD_NOLOAD)))
        bail_out("liblms.so is not loaded: %s", dlerror());
    ssize_t n = readlink("/proc/self/exe", module_path, sizeof module_path - 32);
    char *slash = n > 0 ? memrchr(module_path, '/', (size_t)n) : NULL;
    if (!slash)
        bail_out("cannot find this program's directory");
    strcpy(slash, "/sim_test_module.so");
}

int main(int argc, char **argv)
{
    static const char *const env[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0", "LMS_SIM_CAPACITY_MB=16",
                                       "LMS_SIM_DEVICES=2", NULL };
    if (argc > 1 && strcmp(argv[1], "off") == 0) { /* the child with LMS_MODE=off */
        setup();
        return run_rows() ? 1 : 0;
    }
    lms_test_with_env(argv, env);
    plan((int)(HOOKS + 2));
    for (size_t i = 0; i < HOOKS; i++) {
        const row *r = row_of(hooks[i]);
        if (!r)
            ok(0, "%s: no test exercises this wrapper (add a row to tests/lms_entry_points.c)", hooks[i]);
        else if (!r->run)
            skip(1, "%s: %s", hooks[i], r->why);
    }
    setup();
    void *v1 = NULL;
    CUdriverProcAddressQueryResult found;
    ok(cuGetProcAddress_v2("cuGetProcAddress", &v1, 11030, 0, &found) == CUDA_SUCCESS &&
           v1 == dlsym(liblms, "cuGetProcAddress") && v1 == (void *)cuGetProcAddress,
       "cuGetProcAddress_v2 hands out liblms's cuGetProcAddress (v1), which the rows use in turn");
    run_rows();
    static const char *const off[] = { "LMS_MODE=off", NULL };
    int status = lms_test_run_self(argv, "off", off);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "with LMS_MODE=off cuGetProcAddress hands out the driver's functions, and each export passes "
       "the same calls through (status %#x)", status);
    return exit_status();
}
