/* The part of nccl.h (NCCL 2, its ABI: cudaStream_t is CUstream) that tests/fake_nccl.c
 * implements and tests/lms_nccl.c calls, and tests/lms_nccl_gpu.c looks up in the real NCCL,
 * declared here so that they build without NCCL. */
#ifndef LMS_TESTS_FAKE_NCCL_H
#define LMS_TESTS_FAKE_NCCL_H

#include <cuda.h>
#include <stddef.h>

typedef enum { ncclSuccess = 0, ncclInvalidArgument = 4, ncclInvalidUsage = 5 } ncclResult_t;
typedef struct ncclComm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef enum { ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;

ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, CUstream stream);
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recv_count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, CUstream stream);
ncclResult_t ncclAllGather(const void *send, void *recv, size_t send_count, ncclDataType_t type,
                           ncclComm_t comm, CUstream stream);
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, CUstream stream);
ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm_t comm, CUstream stream);
ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      CUstream stream);
ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      CUstream stream);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#endif
