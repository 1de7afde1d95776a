/* The per-thread-default-stream variants (_ptds, _ptsz) of the entry points the simulator
 * implements. cuGetProcAddress hands them out for CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
 * Each runs its legacy form with the NULL handle naming the calling thread's per-thread stream:
 * where the legacy form takes no stream (synchronous copies and memsets), that is where it runs.
 * The library links with -Bsymbolic-functions, so these calls stay inside the simulator even
 * when an interposer exports the same names. */
#include "sim/per_thread.h"
#include "sim/sim_internal.h"

/* The body of a variant: call, with NULL naming the per-thread stream while it runs. */
#define PER_THREAD(call)                                                                     \
    {                                                                                        \
        cd_default_stream_per_thread(true);                                                  \
        CUresult result_ = call;                                                             \
        cd_default_stream_per_thread(false);                                                 \
        return result_;                                                                      \
    }

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
PER_THREAD(cuMemcpy(dst, src, ByteCount))
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
PER_THREAD(cuMemcpyHtoD_v2(dstDevice, srcHost, ByteCount))
CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
PER_THREAD(cuMemcpyDtoH_v2(dstHost, srcDevice, ByteCount))
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
PER_THREAD(cuMemcpyDtoD_v2(dstDevice, srcDevice, ByteCount))
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
PER_THREAD(cuMemcpy2D_v2(pCopy))
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy)
PER_THREAD(cuMemcpy2DUnaligned_v2(pCopy))
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy)
PER_THREAD(cuMemcpy3D_v2(pCopy))
CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy)
PER_THREAD(cuMemcpy3DPeer(pCopy))
CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
PER_THREAD(cuMemsetD8_v2(dstDevice, uc, N))
CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N)
PER_THREAD(cuMemsetD16_v2(dstDevice, us, N))
CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
PER_THREAD(cuMemsetD32_v2(dstDevice, ui, N))
CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                              size_t Width, size_t Height)
PER_THREAD(cuMemsetD2D8_v2(dstDevice, dstPitch, uc, Width, Height))
CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                               size_t Width, size_t Height)
PER_THREAD(cuMemsetD2D16_v2(dstDevice, dstPitch, us, Width, Height))
CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                               size_t Width, size_t Height)
PER_THREAD(cuMemsetD2D32_v2(dstDevice, dstPitch, ui, Width, Height))
CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount)
PER_THREAD(cuMemcpyPeer(dstDevice, dstContext, srcDevice, srcContext, ByteCount))

CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
PER_THREAD(cuMemcpyAsync(dst, src, ByteCount, hStream))
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                   CUstream hStream)
PER_THREAD(cuMemcpyHtoDAsync_v2(dstDevice, srcHost, ByteCount, hStream))
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
PER_THREAD(cuMemcpyDtoHAsync_v2(dstHost, srcDevice, ByteCount, hStream))
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
PER_THREAD(cuMemcpyDtoDAsync_v2(dstDevice, srcDevice, ByteCount, hStream))
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
PER_THREAD(cuMemcpy2DAsync_v2(pCopy, hStream))
CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                    CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                    CUstream hStream)
PER_THREAD(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream))
CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                 CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                 size_t *failIdx, CUstream hStream)
PER_THREAD(cuMemcpyBatchAsync(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream))
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
PER_THREAD(cuMemcpy3DAsync_v2(pCopy, hStream))
CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
PER_THREAD(cuMemcpy3DPeerAsync(pCopy, hStream))
CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
PER_THREAD(cuMemsetD8Async(dstDevice, uc, N, hStream))
CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
PER_THREAD(cuMemsetD16Async(dstDevice, us, N, hStream))
CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
PER_THREAD(cuMemsetD32Async(dstDevice, ui, N, hStream))
CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                size_t Width, size_t Height, CUstream hStream)
PER_THREAD(cuMemsetD2D8Async(dstDevice, dstPitch, uc, Width, Height, hStream))
CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                 size_t Width, size_t Height, CUstream hStream)
PER_THREAD(cuMemsetD2D16Async(dstDevice, dstPitch, us, Width, Height, hStream))
CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                 size_t Width, size_t Height, CUstream hStream)
PER_THREAD(cuMemsetD2D32Async(dstDevice, dstPitch, ui, Width, Height, hStream))
CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                CUcontext srcContext, size_t ByteCount, CUstream hStream)
PER_THREAD(cuMemcpyPeerAsync(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream))
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
PER_THREAD(cuMemAllocAsync(dptr, bytesize, hStream))
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream)
PER_THREAD(cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream))
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
PER_THREAD(cuMemFreeAsync(dptr, hStream))

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void **kernelParams, void **extra)
PER_THREAD(cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                          sharedMemBytes, hStream, kernelParams, extra))
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                               void **extra)
PER_THREAD(cuLaunchKernelEx(config, f, kernelParams, extra))
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX,
                                        unsigned int blockDimY, unsigned int blockDimZ,
                                        unsigned int sharedMemBytes, CUstream hStream,
                                        void **kernelParams)
PER_THREAD(cuLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                                     blockDimZ, sharedMemBytes, hStream, kernelParams))
CUresult cuStreamWriteValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
PER_THREAD(cuStreamWriteValue32_v2(stream, addr, value, flags))
CUresult cuStreamWriteValue64_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
PER_THREAD(cuStreamWriteValue64_v2(stream, addr, value, flags))
CUresult cuStreamWaitValue32_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
PER_THREAD(cuStreamWaitValue32_v2(stream, addr, value, flags))
CUresult cuStreamWaitValue64_v2_ptsz(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
PER_THREAD(cuStreamWaitValue64_v2(stream, addr, value, flags))
CUresult cuStreamBatchMemOp_v2_ptsz(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
                                    unsigned int flags)
PER_THREAD(cuStreamBatchMemOp_v2(stream, count, paramArray, flags))
CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
PER_THREAD(cuLaunchHostFunc(hStream, fn, userData))

CUresult cuStreamSynchronize_ptsz(CUstream hStream) PER_THREAD(cuStreamSynchronize(hStream))
CUresult cuStreamQuery_ptsz(CUstream hStream) PER_THREAD(cuStreamQuery(hStream))
CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
PER_THREAD(cuStreamWaitEvent(hStream, hEvent, Flags))
CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
PER_THREAD(cuEventRecord(hEvent, hStream))
CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
PER_THREAD(cuEventRecordWithFlags(hEvent, hStream, flags))

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
PER_THREAD(cuStreamBeginCapture_v2(hStream, mode))
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
PER_THREAD(cuStreamEndCapture(hStream, phGraph))
CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
PER_THREAD(cuStreamIsCapturing(hStream, captureStatus))
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
PER_THREAD(cuGraphLaunch(hGraphExec, hStream))
CUresult cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId)
PER_THREAD(cuStreamGetId(hStream, streamId))
CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
PER_THREAD(cuStreamGetCtx(hStream, pctx))
CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
PER_THREAD(cuStreamGetCtx_v2(hStream, pCtx, pGreenCtx))
CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                     cuuint64_t *id_out)
PER_THREAD(cuStreamGetCaptureInfo(hStream, captureStatus_out, id_out))
CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        size_t *numDependencies_out)
PER_THREAD(cuStreamGetCaptureInfo_v2(hStream, captureStatus_out, id_out, graph_out,
                                     dependencies_out, numDependencies_out))
CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out, CUgraph *graph_out,
                                        const CUgraphNode **dependencies_out,
                                        const CUgraphEdgeData **edgeData_out,
                                        size_t *numDependencies_out)
PER_THREAD(cuStreamGetCaptureInfo_v3(hStream, captureStatus_out, id_out, graph_out,
                                     dependencies_out, edgeData_out, numDependencies_out))
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
PER_THREAD(cuGraphInstantiateWithParams(phGraphExec, hGraph, instantiateParams))
