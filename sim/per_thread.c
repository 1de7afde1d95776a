/* The per-thread-default-stream variants (_ptds, _ptsz) of the entry points the simulator
 * implements. cuGetProcAddress hands them out for CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
 * The simulator runs the per-thread default stream as the legacy NULL stream, so each one
 * forwards to its legacy form; the library links with -Bsymbolic-functions, so these calls
 * stay inside the simulator even when an interposer exports the same names. */
#include "sim/per_thread.h"

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{ return cuMemcpy(dst, src, ByteCount); }
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{ return cuMemcpyHtoD_v2(dstDevice, srcHost, ByteCount); }
CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{ return cuMemcpyDtoH_v2(dstHost, srcDevice, ByteCount); }
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{ return cuMemcpyDtoD_v2(dstDevice, srcDevice, ByteCount); }
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{ return cuMemcpy2D_v2(pCopy); }
CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{ return cuMemsetD8_v2(dstDevice, uc, N); }
CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N)
{ return cuMemsetD16_v2(dstDevice, us, N); }
CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{ return cuMemsetD32_v2(dstDevice, ui, N); }
CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                              size_t Width, size_t Height)
{ return cuMemsetD2D8_v2(dstDevice, dstPitch, uc, Width, Height); }
CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                               size_t Width, size_t Height)
{ return cuMemsetD2D16_v2(dstDevice, dstPitch, us, Width, Height); }
CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                               size_t Width, size_t Height)
{ return cuMemsetD2D32_v2(dstDevice, dstPitch, ui, Width, Height); }
CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount)
{ return cuMemcpyPeer(dstDevice, dstContext, srcDevice, srcContext, ByteCount); }

CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{ return cuMemcpyAsync(dst, src, ByteCount, hStream); }
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                   CUstream hStream)
{ return cuMemcpyHtoDAsync_v2(dstDevice, srcHost, ByteCount, hStream); }
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
{ return cuMemcpyDtoHAsync_v2(dstHost, srcDevice, ByteCount, hStream); }
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
{ return cuMemcpyDtoDAsync_v2(dstDevice, srcDevice, ByteCount, hStream); }
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{ return cuMemcpy2DAsync_v2(pCopy, hStream); }
CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{ return cuMemsetD8Async(dstDevice, uc, N, hStream); }
CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{ return cuMemsetD16Async(dstDevice, us, N, hStream); }
CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{ return cuMemsetD32Async(dstDevice, ui, N, hStream); }
CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                size_t Width, size_t Height, CUstream hStream)
{ return cuMemsetD2D8Async(dstDevice, dstPitch, uc, Width, Height, hStream); }
CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                 size_t Width, size_t Height, CUstream hStream)
{ return cuMemsetD2D16Async(dstDevice, dstPitch, us, Width, Height, hStream); }
CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                 size_t Width, size_t Height, CUstream hStream)
{ return cuMemsetD2D32Async(dstDevice, dstPitch, ui, Width, Height, hStream); }
CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                CUcontext srcContext, size_t ByteCount, CUstream hStream)
{ return cuMemcpyPeerAsync(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{ return cuMemAllocAsync(dptr, bytesize, hStream); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{ return cuMemFreeAsync(dptr, hStream); }

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void **kernelParams, void **extra)
{
    return cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                          sharedMemBytes, hStream, kernelParams, extra);
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                               void **extra)
{ return cuLaunchKernelEx(config, f, kernelParams, extra); }
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX,
                                        unsigned int blockDimY, unsigned int blockDimZ,
                                        unsigned int sharedMemBytes, CUstream hStream,
                                        void **kernelParams)
{
    return cuLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                                     blockDimZ, sharedMemBytes, hStream, kernelParams);
}
CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{ return cuLaunchHostFunc(hStream, fn, userData); }

CUresult cuStreamSynchronize_ptsz(CUstream hStream) { return cuStreamSynchronize(hStream); }
CUresult cuStreamQuery_ptsz(CUstream hStream) { return cuStreamQuery(hStream); }
CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{ return cuStreamWaitEvent(hStream, hEvent, Flags); }
CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{ return cuEventRecord(hEvent, hStream); }
CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{ return cuEventRecordWithFlags(hEvent, hStream, flags); }

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{ return cuStreamBeginCapture_v2(hStream, mode); }
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{ return cuStreamEndCapture(hStream, phGraph); }
CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{ return cuStreamIsCapturing(hStream, captureStatus); }
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{ return cuGraphLaunch(hGraphExec, hStream); }
