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
    if (result != CUDA_SUCCESS)
        cd_op_free_locked(op);
    else
        result = sync ? cd_run_sync_locked(op) : cd_enqueue_locked(hStream, op, &s);
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
    (*op)->u.copy.height = 1;
    (*op)->u.copy.dst_host_ok = dst_host_ok;
    (*op)->u.copy.src_host_ok = src_host_ok;
    (*op)->u.copy.dst_device = (*op)->u.copy.src_device = CD_STREAM_DEVICE;
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

static CUresult copy_peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                          size_t size, bool sync, CUstream hStream)
{
    pthread_mutex_lock(&cd.lock);
    const cd_ctx *d = cd_ctx_find_locked(dst_ctx), *s = cd_ctx_find_locked(src_ctx);
    bool alive = d && s && d->alive && s->alive;
    int dst_device = alive ? d->device : 0, src_device = alive ? s->device : 0;
    pthread_mutex_unlock(&cd.lock);
    if (!alive)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (size == 0)
        return CUDA_SUCCESS;
    cd_op *op;
    CUresult result = copy_op(&op, (uintptr_t)dst, DEVICE_ONLY, (uintptr_t)src, DEVICE_ONLY, size);
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

/* ---- 2D copies between host, device and unified memory (no arrays) ---- */

/* The first byte of one side of a 2D copy, and whether it may be pageable host memory. */
static CUresult copy2d_side(CUmemorytype type, const void *host, CUdeviceptr device, size_t x,
                            size_t y, size_t pitch, uintptr_t *start, bool *host_ok)
{
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        *start = (uintptr_t)host;
        *host_ok = true;
        break;
    case CU_MEMORYTYPE_DEVICE:
        *start = (uintptr_t)device;
        *host_ok = false;
        break;
    case CU_MEMORYTYPE_UNIFIED:
        *start = (uintptr_t)device;
        *host_ok = true;
        break;
    case CU_MEMORYTYPE_ARRAY:
        return cd_unsupported("cuMemcpy2D with a CUDA array");
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!*start)
        return CUDA_ERROR_INVALID_VALUE;
    *start += y * pitch + x;
    return CUDA_SUCCESS;
}

static CUresult copy2d(const CUDA_MEMCPY2D *p, bool sync, CUstream hStream)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->WidthInBytes == 0 || p->Height == 0)
        return CUDA_SUCCESS;
    if (p->srcPitch < p->WidthInBytes || p->dstPitch < p->WidthInBytes)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t src = 0, dst = 0;
    bool src_host_ok = false, dst_host_ok = false;
    CUresult result = copy2d_side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes,
                                  p->srcY, p->srcPitch, &src, &src_host_ok);
    if (result == CUDA_SUCCESS)
        result = copy2d_side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY,
                             p->dstPitch, &dst, &dst_host_ok);
    if (result != CUDA_SUCCESS)
        return result;
    cd_op *op = cd_op_new(CD_OP_COPY);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.copy.dst = dst;
    op->u.copy.src = src;
    op->u.copy.dst_pitch = p->dstPitch;
    op->u.copy.src_pitch = p->srcPitch;
    op->u.copy.width = p->WidthInBytes;
    op->u.copy.height = p->Height;
    op->u.copy.dst_host_ok = dst_host_ok;
    op->u.copy.src_host_ok = src_host_ok;
    op->u.copy.dst_device = op->u.copy.src_device = CD_STREAM_DEVICE;
    return submit(op, sync, hStream);
}

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
    CD_ENTER("cuMemcpy2D");
    return copy2d(pCopy, true, NULL);
}

CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    CD_ENTER("cuMemcpy2DAsync");
    return copy2d(pCopy, false, hStream);
}
