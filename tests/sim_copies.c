/* The simulator's 3D and unaligned 2D copies, its default memory pools, and asynchronous copies
 * with a pageable host side, which return once the program may reuse its buffer. */
#include "tests/sim_testing.h"

#include <stdint.h>

#define MIB ((size_t)1 << 20)

/* The CUDA 12.8 form, which cuda.h names after its successor. */
#undef cuMemcpyBatchAsync
CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                            CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                            CUstream hStream);

/* sleep_ms(int ms): keeps its stream busy. */
static void sleep_kernel(const sim_launch *l) { sleep_ms(*(int *)l->params[0]); }

static void fill_pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31 + seed);
}

static void pageable_copies(CUstream s)
{
    static const size_t sizes[] = { sizeof(int) };
    CUfunction sleeper = (CUfunction)sim_register_kernel("sleep_ms", sleep_kernel, 1, sizes);
    size_t n = MIB;
    unsigned char *host = malloc(n), *back = malloc(n);
    CUdeviceptr dev;
    CHECK_CU(cuMemAlloc(&dev, n));
    fill_pattern(host, n, 1);
    int ms = 100;
    void *params[] = { &ms };
    CHECK_CU(cuLaunchKernel(sleeper, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    CHECK_CU(cuMemcpyHtoDAsync(dev, host, n, s));
    memset(host, 0, n); /* the driver staged it: the copy keeps what it was */
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuMemcpyDtoH(back, dev, n));
    fill_pattern(host, n, 1);
    ok(memcmp(back, host, n) == 0, "an asynchronous copy from pageable memory has read it when it returns");

    memset(back, 0, n);
    CHECK_CU(cuLaunchKernel(sleeper, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    CHECK_CU(cuMemcpyDtoHAsync(back, dev, n, s));
    ok(memcmp(back, host, n) == 0, "and one to pageable memory has written it");
    CHECK_CU(cuMemFree(dev));
    free(host);
    free(back);
}

enum { W = 100, H = 6, D = 4, SP = 128, DP = 160, SR = 8, DR = 7 }; /* rows per plane: SR, DR */

static void copies_3d(CUcontext ctx, CUcontext peer_ctx)
{
    size_t src_bytes = SP * SR * (D + 1), dst_bytes = DP * DR * D;
    unsigned char *src = malloc(src_bytes), *want = calloc(1, dst_bytes), *got = malloc(dst_bytes);
    CUdeviceptr s, d, p;
    CHECK_CU(cuMemAlloc(&s, src_bytes));
    CHECK_CU(cuMemAlloc(&d, dst_bytes));
    fill_pattern(src, src_bytes, 7);
    CHECK_CU(cuMemcpyHtoD(s, src, src_bytes));
    CHECK_CU(cuMemsetD8(d, 0, dst_bytes));
    CUDA_MEMCPY3D c = { .srcXInBytes = 5, .srcY = 1, .srcZ = 1, .srcMemoryType = CU_MEMORYTYPE_DEVICE,
                        .srcDevice = s, .srcPitch = SP, .srcHeight = SR,
                        .dstXInBytes = 2, .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d,
                        .dstPitch = DP, .dstHeight = DR, .WidthInBytes = W, .Height = H, .Depth = D };
    for (size_t z = 0; z < D; z++)
        for (size_t y = 0; y < H; y++)
            memcpy(want + (z * DR + y) * DP + 2, src + ((z + 1) * SR + y + 1) * SP + 5, W);
    CHECK_CU(cuMemcpy3D(&c));
    CHECK_CU(cuMemcpyDtoH(got, d, dst_bytes));
    ok(memcmp(got, want, dst_bytes) == 0, "cuMemcpy3D: planes srcHeight and dstHeight rows apart");

    CHECK_CU(cuCtxSetCurrent(peer_ctx));
    CHECK_CU(cuMemAlloc(&p, dst_bytes));
    CHECK_CU(cuMemsetD8(p, 0, dst_bytes));
    CHECK_CU(cuCtxSetCurrent(ctx));
    CUDA_MEMCPY3D_PEER there = { .srcXInBytes = 5, .srcY = 1, .srcZ = 1, .srcMemoryType = CU_MEMORYTYPE_DEVICE,
                                 .srcDevice = s, .srcContext = ctx, .srcPitch = SP, .srcHeight = SR,
                                 .dstXInBytes = 2, .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = p,
                                 .dstContext = peer_ctx, .dstPitch = DP, .dstHeight = DR,
                                 .WidthInBytes = W, .Height = H, .Depth = D };
    CUDA_MEMCPY3D_PEER back = { .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = p, .srcContext = peer_ctx,
                                .srcPitch = DP, .srcHeight = DR, .dstMemoryType = CU_MEMORYTYPE_HOST,
                                .dstHost = got, .dstContext = ctx, .dstPitch = DP, .dstHeight = DR,
                                .WidthInBytes = DP, .Height = DR, .Depth = D };
    memset(got, 0, dst_bytes);
    CHECK_CU(cuMemcpy3DPeerAsync(&there, NULL));
    CHECK_CU(cuMemcpy3DPeer(&back));
    ok(memcmp(got, want, dst_bytes) == 0, "cuMemcpy3DPeer: to the other device and back");

    c.srcHeight = H - 1;
    is_int(cuMemcpy3D(&c), CUDA_ERROR_INVALID_VALUE, "planes taller than srcHeight: INVALID_VALUE");
    c.srcHeight = SR;
    c.dstLOD = 1;
    is_int(cuMemcpy3D(&c), CUDA_ERROR_INVALID_VALUE, "a level of detail without arrays: INVALID_VALUE");
    c.dstLOD = 0;
    c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    is_int(cuMemcpy3DAsync(&c, NULL), CUDA_ERROR_NOT_SUPPORTED, "an array side: NOT_SUPPORTED");
    there.dstContext = NULL;
    is_int(cuMemcpy3DPeer(&there), CUDA_ERROR_INVALID_CONTEXT, "a peer copy without a context: INVALID_CONTEXT");

    CUDA_MEMCPY2D u = { .srcXInBytes = 3, .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = s, .srcPitch = 37,
                        .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = got, .dstPitch = 41,
                        .WidthInBytes = 30, .Height = 5 };
    memset(got, 0, dst_bytes);
    CHECK_CU(cuMemcpy2DUnaligned(&u));
    int same = 1;
    for (size_t y = 0; y < 5; y++)
        same &= memcmp(got + y * 41, src + y * 37 + 3, 30) == 0;
    ok(same, "cuMemcpy2DUnaligned: odd pitches");
    CHECK_CU(cuMemFree(s));
    CHECK_CU(cuMemFree(d));
    free(src);
    free(want);
    free(got);
}

static void pools(CUstream stream)
{
    CUmemoryPool pool, current, other;
    CHECK_CU(cuDeviceGetDefaultMemPool(&pool, 0));
    CHECK_CU(cuDeviceGetMemPool(&current, 0));
    CHECK_CU(cuDeviceGetDefaultMemPool(&other, 1));
    ok(pool && pool == current && other != pool, "each device has its default pool, its current one");
    is_int(cuDeviceGetDefaultMemPool(&pool, 2), CUDA_ERROR_INVALID_DEVICE, "no pool for a device that is not there");
    size_t used = sim_device_used(1);
    CUdeviceptr p;
    CHECK_CU(cuMemAllocFromPoolAsync(&p, MIB, other, stream));
    CUmemoryPool of = NULL;
    CHECK_CU(cuPointerGetAttribute(&of, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
    ok(sim_device_used(1) == used + MIB && of == other,
       "cuMemAllocFromPoolAsync takes the pool's device's memory; the pointer names its pool");
    CHECK_CU(cuMemFreeAsync(p, stream));
    CHECK_CU(cuStreamSynchronize(stream));
    is_int(cuMemAllocFromPoolAsync(&p, MIB, (CUmemoryPool)&used, stream), CUDA_ERROR_INVALID_VALUE,
           "a handle that is no pool: INVALID_VALUE");
}

/* The parameters of captured copy and memset nodes, as the calls gave them. */
static void node_params(CUstream stream)
{
    CUdeviceptr d;
    static unsigned char host[256];
    CHECK_CU(cuMemAlloc(&d, MIB));
    CUgraph graph;
    CHECK_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU(cuMemcpyHtoDAsync(d + 8, host, sizeof host, stream));
    CHECK_CU(cuMemsetD16Async(d + 2, 0xABCD, 10, stream));
    CHECK_CU(cuStreamEndCapture(stream, &graph));
    CUgraphNode nodes[2];
    size_t count = 2;
    CHECK_CU(cuGraphGetNodes(graph, nodes, &count));
    CUDA_MEMCPY3D copy;
    CUDA_MEMSET_NODE_PARAMS set;
    CHECK_CU(cuGraphMemcpyNodeGetParams(nodes[0], &copy));
    CHECK_CU(cuGraphMemsetNodeGetParams(nodes[1], &set));
    ok(count == 2 && copy.srcMemoryType == CU_MEMORYTYPE_HOST && copy.srcHost == host &&
           copy.dstMemoryType == CU_MEMORYTYPE_DEVICE && copy.dstDevice == d + 8 &&
           copy.WidthInBytes == sizeof host && copy.Height == 1 && copy.Depth == 1,
       "a copy node's parameters: its sides' memory types and addresses, its extent");
    ok(set.dst == d + 2 && set.value == 0xABCD && set.elementSize == 2 && set.width == 10 && set.height == 1,
       "a memset node's: destination, value, element size, extent");
    is_int(cuGraphMemsetNodeGetParams(nodes[0], &set), CUDA_ERROR_INVALID_VALUE,
           "a node of another type: INVALID_VALUE");
    CHECK_CU(cuGraphDestroy(graph));
    CHECK_CU(cuMemFree(d));
}

/* A batch: copies queued together (two attribute ranges), or none of them. */
static void batches(CUstream stream)
{
    CUdeviceptr d;
    unsigned char host[3000], back[3000];
    fill_pattern(host, sizeof host, 5);
    CHECK_CU(cuMemAlloc(&d, MIB));
    CHECK_CU(cuMemsetD8(d, 0, MIB));
    CUdeviceptr dsts[3] = { d, d + 1000, d + 5000 }, srcs[3] = { (CUdeviceptr)(uintptr_t)host,
                                                                 (CUdeviceptr)(uintptr_t)(host + 1000), d };
    size_t sizes[3] = { 1000, 2000, 3000 }, idxs[2] = { 0, 2 }, fail = 0;
    CUmemcpyAttributes attrs[2] = { { .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL },
                                    { .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM } };
    CHECK_CU(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, idxs, 2, stream));
    CHECK_CU(cuStreamSynchronize(stream));
    CHECK_CU(cuMemcpyDtoH(back, d + 5000, sizeof back));
    ok(memcmp(back, host, sizeof back) == 0, "cuMemcpyBatchAsync: host to device, then device to device");
    is_int(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, idxs, 2, NULL), CUDA_ERROR_INVALID_VALUE,
           "not on the legacy stream");
    idxs[1] = 3;
    is_int(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, idxs, 2, stream), CUDA_ERROR_INVALID_VALUE,
           "attributes for a copy past the batch: INVALID_VALUE");
    idxs[1] = 2;
    CHECK_CU(cuMemsetD8(d, 0, 3000));
    CUdeviceptr unmapped;
    CHECK_CU(cuMemAddressReserve(&unmapped, 2 * MIB, 0, 0, 0));
    dsts[2] = unmapped; /* reserved, nothing mapped there */
    CUresult r = cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attrs, idxs, 2, &fail, stream);
    CHECK_CU(cuStreamSynchronize(stream));
    CHECK_CU(cuMemcpyDtoH(back, d, 1000));
    ok(r == CUDA_ERROR_INVALID_VALUE && fail == 2 && back[0] == 0 && back[999] == 0,
       "a copy that cannot be made: none is, and the CUDA 12.8 form names it");
    CHECK_CU(cuMemAddressFree(unmapped, 2 * MIB));
    CHECK_CU(cuMemFree(d));
}

int main(void)
{
    plan(20);
    sim_set_device_count(2);
    CUcontext ctx = sim_setup(64 * MIB), peer_ctx;
    CHECK_CU(cuDevicePrimaryCtxRetain(&peer_ctx, 1));
    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    pageable_copies(s);
    copies_3d(ctx, peer_ctx);
    pools(s);
    node_params(s);
    batches(s);
    CHECK_CU(cuStreamDestroy(s));
    return exit_status();
}
