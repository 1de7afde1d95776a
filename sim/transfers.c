/* Copies and memsets, synchronous and asynchronous.
 *
 * Addresses are checked when the call is made, for the device of the stream the work goes to
 * (a peer copy: for each side's context's device): a device side that is not usable device
 * memory (unknown, or inside a reservation but unmapped or without access for that device)
 * gets CUDA_ERROR_INVALID_VALUE, as a synchronous copy on unmapped memory does on the real
 * driver, and nothing is queued. The check is made again when the work runs: memory unmapped
 * or whose access was revoked since (cuMemUnmap is not ordered against queued work) makes it
 * fault, like a kernel would. Synchronous forms run on the default stream, after the work
 * already queued. */
#include "sim/sim_internal.h"

/* Which side may be pageable host memory (any address outside the simulator's device memory). */
enum { DEVICE_ONLY = 0, HOST_OK = 1 };

/* Queues op on its stream (sync: on the default stream, and waits for it) once its memory is
 * usable; sides for CD_STREAM_DEVICE take the stream's device. Takes ownership of op. */
static CUresult submit(cd_op *op, bool sync, CUstream hStream)
{
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_resolve_stream_locked(sync ? NULL : hStream, &s);
    if (result == CUDA_SUCCESS) {
        int device = s->ctx->device;
        if (op->kind == CD_OP_COPY) {
            if (op->u.copy.dst_device == CD_STREAM_DEVICE)
                op->u.copy.dst_device = device;
            if (op->u.copy.src_device == CD_STREAM_DEVICE)
                op->u.copy.src_device = device;
        } else if (op->u.memset.device == CD_STREAM_DEVICE) {
            op->u.memset.device = device;
        }
        if (!cd_op_memory_usable_locked(op))
            result = CUDA_ERROR_INVALID_VALUE;
    }
    bool staged = op->kind == CD_OP_COPY && (cd_memory_kind_locked(op->u.copy.dst) == CD_MEMORY_PAGEABLE ||
                                             cd_memory_kind_locked(op->u.copy.src) == CD_MEMORY_PAGEABLE);
    if (result != CUDA_SUCCESS)
        cd_op_free_locked(op);
    else if (sync)
        result = cd_run_sync_locked(op);
    else
        result = staged ? cd_enqueue_staged_locked(hStream, op) : cd_enqueue_locked(hStream, op, &s);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* A one-row copy whose sides need the stream's device's access. */
static CUresult copy_op(cd_op **op, uintptr_t dst, bool dst_host_ok, uintptr_t src, bool src_host_ok,
                        size_t size)
{
    if (!dst || !src)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(*op = cd_op_new(CD_OP_COPY)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    (*op)->u.copy.dst = dst;
    (*op)->u.copy.src = src;
    (*op)->u.copy.width = size;
    (*op)->u.copy.height = (*op)->u.copy.depth = 1;
    (*op)->u.copy.dst_host_ok = dst_host_ok;
    (*op)->u.copy.src_host_ok = src_host_ok;
    (*op)->u.copy.dst_device = (*op)->u.copy.src_device = CD_STREAM_DEVICE;
    /* A side that may be host memory is the host's, or unified when both may be (cuMemcpy). */
    (*op)->u.copy.dst_type = !dst_host_ok ? CU_MEMORYTYPE_DEVICE : src_host_ok ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_HOST;
    (*op)->u.copy.src_type = !src_host_ok ? CU_MEMORYTYPE_DEVICE : dst_host_ok ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_HOST;
    return CUDA_SUCCESS;
}

static CUresult copy(uintptr_t dst, bool dst_host_ok, uintptr_t src, bool src_host_ok, size_t size,
                     bool sync, CUstream hStream)
{
    if (size == 0)
        return CUDA_SUCCESS;
    cd_op *op;
    CUresult result = copy_op(&op, dst, dst_host_ok, src, src_host_ok, size);
    return result == CUDA_SUCCESS ? submit(op, sync, hStream) : result;
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    CD_ENTER("cuMemcpy");
    return copy((uintptr_t)dst, HOST_OK, (uintptr_t)src, HOST_OK, ByteCount, true, NULL);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    CD_ENTER("cuMemcpyAsync");
    return copy((uintptr_t)dst, HOST_OK, (uintptr_t)src, HOST_OK, ByteCount, false, hStream);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    CD_ENTER("cuMemcpyHtoD");
    return copy((uintptr_t)dstDevice, DEVICE_ONLY, (uintptr_t)srcHost, HOST_OK, ByteCount, true,
                NULL);
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    CD_ENTER("cuMemcpyDtoH");
    return copy((uintptr_t)dstHost, HOST_OK, (uintptr_t)srcDevice, DEVICE_ONLY, ByteCount, true,
                NULL);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    CD_ENTER("cuMemcpyDtoD");
    return copy((uintptr_t)dstDevice, DEVICE_ONLY, (uintptr_t)srcDevice, DEVICE_ONLY, ByteCount,
                true, NULL);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                              CUstream hStream)
{
    CD_ENTER("cuMemcpyHtoDAsync");
    return copy((uintptr_t)dstDevice, DEVICE_ONLY, (uintptr_t)srcHost, HOST_OK, ByteCount, false,
                hStream);
}

CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream)
{
    CD_ENTER("cuMemcpyDtoHAsync");
    return copy((uintptr_t)dstHost, HOST_OK, (uintptr_t)srcDevice, DEVICE_ONLY, ByteCount, false,
                hStream);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream)
{
    CD_ENTER("cuMemcpyDtoDAsync");
    return copy((uintptr_t)dstDevice, DEVICE_ONLY, (uintptr_t)srcDevice, DEVICE_ONLY, ByteCount,
                false, hStream);
}

/* ---- memsets: element_size is 1, 2 or 4; the destination is aligned to it ---- */

/* Fills height rows of count elements, pitch bytes apart (height 1: a 1D memset). */
static CUresult fill(CUdeviceptr dstDevice, size_t pitch, uint32_t value, unsigned element_size,
                     size_t count, size_t height, bool sync, CUstream hStream)
{
    if (count == 0 || height == 0)
        return CUDA_SUCCESS;
    uintptr_t dst = (uintptr_t)dstDevice;
    if (dst % element_size || count > SIZE_MAX / element_size)
        return CUDA_ERROR_INVALID_VALUE;
    size_t width = count * element_size;
    if (height > 1 &&
        (pitch < width || pitch % element_size || height - 1 > (SIZE_MAX - width) / pitch))
        return CUDA_ERROR_INVALID_VALUE;
    cd_op *op = cd_op_new(CD_OP_MEMSET);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.memset.dst = dst;
    op->u.memset.value = value;
    op->u.memset.element_size = element_size;
    op->u.memset.count = count;
    op->u.memset.pitch = pitch;
    op->u.memset.height = height;
    op->u.memset.device = CD_STREAM_DEVICE;
    return submit(op, sync, hStream);
}

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    CD_ENTER("cuMemsetD8");
    return fill(dstDevice, 0, uc, 1, N, 1, true, NULL);
}

CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    CD_ENTER("cuMemsetD16");
    return fill(dstDevice, 0, us, 2, N, 1, true, NULL);
}

CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    CD_ENTER("cuMemsetD32");
    return fill(dstDevice, 0, ui, 4, N, 1, true, NULL);
}

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    CD_ENTER("cuMemsetD8Async");
    return fill(dstDevice, 0, uc, 1, N, 1, false, hStream);
}

CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
    CD_ENTER("cuMemsetD16Async");
    return fill(dstDevice, 0, us, 2, N, 1, false, hStream);
}

CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    CD_ENTER("cuMemsetD32Async");
    return fill(dstDevice, 0, ui, 4, N, 1, false, hStream);
}

CUresult cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                         size_t Height)
{
    CD_ENTER("cuMemsetD2D8");
    return fill(dstDevice, dstPitch, uc, 1, Width, Height, true, NULL);
}

CUresult cuMemsetD2D16_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width,
                          size_t Height)
{
    CD_ENTER("cuMemsetD2D16");
    return fill(dstDevice, dstPitch, us, 2, Width, Height, true, NULL);
}

CUresult cuMemsetD2D32_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width,
                          size_t Height)
{
    CD_ENTER("cuMemsetD2D32");
    return fill(dstDevice, dstPitch, ui, 4, Width, Height, true, NULL);
}

CUresult cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width,
                           size_t Height, CUstream hStream)
{
    CD_ENTER("cuMemsetD2D8Async");
    return fill(dstDevice, dstPitch, uc, 1, Width, Height, false, hStream);
}

CUresult cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width,
                            size_t Height, CUstream hStream)
{
    CD_ENTER("cuMemsetD2D16Async");
    return fill(dstDevice, dstPitch, us, 2, Width, Height, false, hStream);
}

CUresult cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width,
                            size_t Height, CUstream hStream)
{
    CD_ENTER("cuMemsetD2D32Async");
    return fill(dstDevice, dstPitch, ui, 4, Width, Height, false, hStream);
}

/* ---- copies between devices: each side needs its own context's device's access ---- */

/* The devices of a peer copy's two contexts: INVALID_CONTEXT unless both are alive. */
static CUresult peer_devices(CUcontext dst_ctx, CUcontext src_ctx, int *dst_device, int *src_device)
{
    pthread_mutex_lock(&cd.lock);
    const cd_ctx *d = cd_ctx_find_locked(dst_ctx), *s = cd_ctx_find_locked(src_ctx);
    bool alive = d && s && d->alive && s->alive;
    if (alive) {
        *dst_device = d->device;
        *src_device = s->device;
    }
    pthread_mutex_unlock(&cd.lock);
    return alive ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult copy_peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                          size_t size, bool sync, CUstream hStream)
{
    int dst_device, src_device;
    CUresult result = peer_devices(dst_ctx, src_ctx, &dst_device, &src_device);
    if (result != CUDA_SUCCESS || size == 0)
        return result;
    cd_op *op;
    result = copy_op(&op, (uintptr_t)dst, DEVICE_ONLY, (uintptr_t)src, DEVICE_ONLY, size);
    if (result != CUDA_SUCCESS)
        return result;
    op->u.copy.dst_device = dst_device;
    op->u.copy.src_device = src_device;
    return submit(op, sync, hStream);
}

CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                      CUcontext srcContext, size_t ByteCount)
{
    CD_ENTER("cuMemcpyPeer");
    return copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, true, NULL);
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    CD_ENTER("cuMemcpyPeerAsync");
    return copy_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, false, hStream);
}

/* ---- 2D and 3D copies between host, device and unified memory (no arrays) ---- */

/* One side of a pitched copy: its memory, where the copy starts in it (x bytes into row y of
 * plane z), and its rows' and planes' strides (pitch bytes; plane_rows rows). */
typedef struct pitched_side {
    CUmemorytype type;
    const void *host;
    CUdeviceptr device;
    size_t x, y, z, pitch, plane_rows;
} pitched_side;

/* The first byte of one side, and whether it may be pageable host memory. */
static CUresult pitched_start(const pitched_side *side, uintptr_t *start, bool *host_ok)
{
    switch (side->type) {
    case CU_MEMORYTYPE_HOST:
        *start = (uintptr_t)side->host;
        *host_ok = true;
        break;
    case CU_MEMORYTYPE_DEVICE:
        *start = (uintptr_t)side->device;
        *host_ok = false;
        break;
    case CU_MEMORYTYPE_UNIFIED:
        *start = (uintptr_t)side->device;
        *host_ok = true;
        break;
    case CU_MEMORYTYPE_ARRAY:
        return cd_unsupported("a 2D or 3D copy with a CUDA array");
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!*start)
        return CUDA_ERROR_INVALID_VALUE;
    *start += (side->z * side->plane_rows + side->y) * side->pitch + side->x;
    return CUDA_SUCCESS;
}

/* depth planes of height rows of width bytes. As on the real driver, rows may not be wider
 * than a pitch, nor planes taller than their side's plane_rows. Sides for CD_STREAM_DEVICE
 * need the stream's device's access (a peer copy names each side's device). */
static CUresult copy_pitched(const pitched_side *dst_side, int dst_device, const pitched_side *src_side,
                             int src_device, size_t width, size_t height, size_t depth, bool sync,
                             CUstream hStream)
{
    if (width == 0 || height == 0 || depth == 0)
        return CUDA_SUCCESS;
    if (src_side->pitch < width || dst_side->pitch < width ||
        (depth > 1 && (src_side->plane_rows < height || dst_side->plane_rows < height)))
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t src = 0, dst = 0;
    bool src_host_ok = false, dst_host_ok = false;
    CUresult result = pitched_start(src_side, &src, &src_host_ok);
    if (result == CUDA_SUCCESS)
        result = pitched_start(dst_side, &dst, &dst_host_ok);
    if (result != CUDA_SUCCESS)
        return result;
    cd_op *op = cd_op_new(CD_OP_COPY);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.copy.dst = dst;
    op->u.copy.src = src;
    op->u.copy.dst_pitch = dst_side->pitch;
    op->u.copy.src_pitch = src_side->pitch;
    op->u.copy.width = width;
    op->u.copy.height = height;
    op->u.copy.depth = depth;
    op->u.copy.dst_plane = dst_side->plane_rows * dst_side->pitch;
    op->u.copy.src_plane = src_side->plane_rows * src_side->pitch;
    op->u.copy.dst_host_ok = dst_host_ok;
    op->u.copy.src_host_ok = src_host_ok;
    op->u.copy.dst_device = dst_device;
    op->u.copy.src_device = src_device;
    op->u.copy.dst_type = dst_side->type;
    op->u.copy.src_type = src_side->type;
    return submit(op, sync, hStream);
}

static CUresult copy2d(const CUDA_MEMCPY2D *p, bool sync, CUstream hStream)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    pitched_side src = {p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, 0,
                        p->srcPitch, p->Height};
    pitched_side dst = {p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, 0,
                        p->dstPitch, p->Height};
    return copy_pitched(&dst, CD_STREAM_DEVICE, &src, CD_STREAM_DEVICE, p->WidthInBytes, p->Height, 1,
                        sync, hStream);
}

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
    CD_ENTER("cuMemcpy2D");
    return copy2d(pCopy, true, NULL);
}

/* The simulator puts no alignment constraint on cuMemcpy2D's pitches: both forms are one. */
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
    CD_ENTER("cuMemcpy2DUnaligned");
    return copy2d(pCopy, true, NULL);
}

CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    CD_ENTER("cuMemcpy2DAsync");
    return copy2d(pCopy, false, hStream);
}

/* The fields CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER share, for one side. */
#define PITCHED_SIDE_3D(p, side)                                                              \
    ((pitched_side){(p)->side##MemoryType, (p)->side##Host, (p)->side##Device, (p)->side##XInBytes, \
                    (p)->side##Y, (p)->side##Z, (p)->side##Pitch, (p)->side##Height})

/* A 3D copy; level-of-detail fields name array mipmaps, which the simulator has none of. */
static CUresult copy3d(const CUDA_MEMCPY3D *p, bool sync, CUstream hStream)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->srcLOD || p->dstLOD || p->reserved0 || p->reserved1)
        return CUDA_ERROR_INVALID_VALUE;
    pitched_side src = PITCHED_SIDE_3D(p, src), dst = PITCHED_SIDE_3D(p, dst);
    return copy_pitched(&dst, CD_STREAM_DEVICE, &src, CD_STREAM_DEVICE, p->WidthInBytes, p->Height,
                        p->Depth, sync, hStream);
}

CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
    CD_ENTER("cuMemcpy3D");
    return copy3d(pCopy, true, NULL);
}

CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    CD_ENTER("cuMemcpy3DAsync");
    return copy3d(pCopy, false, hStream);
}

/* Each side needs its own context's device's access, as in cuMemcpyPeer. */
static CUresult copy3d_peer(const CUDA_MEMCPY3D_PEER *p, bool sync, CUstream hStream)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->srcLOD || p->dstLOD)
        return CUDA_ERROR_INVALID_VALUE;
    int dst_device, src_device;
    CUresult result = peer_devices(p->dstContext, p->srcContext, &dst_device, &src_device);
    if (result != CUDA_SUCCESS)
        return result;
    pitched_side src = PITCHED_SIDE_3D(p, src), dst = PITCHED_SIDE_3D(p, dst);
    return copy_pitched(&dst, dst_device, &src, src_device, p->WidthInBytes, p->Height, p->Depth, sync,
                        hStream);
}

CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy)
{
    CD_ENTER("cuMemcpy3DPeer");
    return copy3d_peer(pCopy, true, NULL);
}

CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
    CD_ENTER("cuMemcpy3DPeerAsync");
    return copy3d_peer(pCopy, false, hStream);
}

/* ---- batches of copies between pointers (cuMemcpyBatchAsync) ---- */

/* Every copy of the batch has attributes: the first index 0, each above the one before and
 * below count, with a source access order and known flags. */
static bool batch_attributes_valid(size_t count, const CUmemcpyAttributes *attrs, const size_t *idxs,
                                   size_t num)
{
    if (!attrs || !idxs || num == 0 || num > count || idxs[0] != 0)
        return false;
    for (size_t k = 0; k < num; k++)
        if ((k && idxs[k] <= idxs[k - 1]) || idxs[k] >= count ||
            attrs[k].srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
            attrs[k].srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY ||
            (attrs[k].flags & ~(unsigned)CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE))
            return false;
    return true;
}

/* Queues every copy of the batch on hStream (not the legacy stream), or none; *fail_idx names
 * the copy that could not be, else SIZE_MAX. Sources in pageable memory are read before it
 * returns (as any asynchronous copy stages them), which covers the ephemeral sources
 * CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL names. */
static CUresult copy_batch(const CUdeviceptr *dsts, const CUdeviceptr *srcs, const size_t *sizes, size_t count,
                           const CUmemcpyAttributes *attrs, const size_t *idxs, size_t num, size_t *fail_idx,
                           CUstream hStream)
{
    size_t failed = SIZE_MAX;
    if (fail_idx)
        *fail_idx = failed;
    if (!dsts || !srcs || !sizes || count == 0 || !batch_attributes_valid(count, attrs, idxs, num))
        return CUDA_ERROR_INVALID_VALUE;
    cd_op **ops = calloc(count, sizeof *ops);
    if (!ops)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult result = CUDA_SUCCESS;
    for (size_t i = 0; i < count && result == CUDA_SUCCESS; i++)
        if (sizes[i] && (result = copy_op(&ops[i], dsts[i], HOST_OK, srcs[i], HOST_OK, sizes[i])) != CUDA_SUCCESS)
            failed = i;
    cd_stream *s;
    bool staged = false;
    pthread_mutex_lock(&cd.lock);
    if (result == CUDA_SUCCESS && (result = cd_resolve_stream_locked(hStream, &s)) == CUDA_SUCCESS &&
        s->is_null)
        result = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count && result == CUDA_SUCCESS; i++) {
        if (!ops[i])
            continue;
        ops[i]->u.copy.dst_device = ops[i]->u.copy.src_device = s->ctx->device;
        staged |= cd_memory_kind_locked(ops[i]->u.copy.src) == CD_MEMORY_PAGEABLE ||
                  cd_memory_kind_locked(ops[i]->u.copy.dst) == CD_MEMORY_PAGEABLE;
        if (!cd_op_memory_usable_locked(ops[i]))
            result = CUDA_ERROR_INVALID_VALUE, failed = i;
    }
    size_t last = count; /* the last copy: a staged batch returns once it is done */
    while (last > 0 && !ops[last - 1])
        last--;
    size_t queued = 0;
    for (; queued < count && result == CUDA_SUCCESS; queued++)
        if (ops[queued])
            result = staged && queued + 1 == last ? cd_enqueue_staged_locked(hStream, ops[queued])
                                                  : cd_enqueue_locked(hStream, ops[queued], &s);
    for (size_t i = queued; i < count; i++)
        if (ops[i])
            cd_op_free_locked(ops[i]);
    pthread_mutex_unlock(&cd.lock);
    free(ops);
    if (fail_idx && result != CUDA_SUCCESS)
        *fail_idx = failed;
    return result;
}

CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                               CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream hStream)
{
    CD_ENTER("cuMemcpyBatchAsync");
    return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream);
}

CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                            CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                            CUstream hStream)
{
    CD_ENTER("cuMemcpyBatchAsync");
    return copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream);
}
