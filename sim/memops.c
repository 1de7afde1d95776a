/* Stream memory operations: writes of, and waits for, one 32- or 64-bit word in stream order
 * (cuStreamWriteValue32/64, cuStreamWaitValue32/64, cuStreamBatchMemOp). A wait polls its word
 * on its stream's worker until its condition holds, as the GPU's front end does. The word must
 * be memory the stream's device may use (INVALID_VALUE otherwise, and for a misaligned one).
 * Capturing one is refused: the simulator has no batch-memop graph nodes. */
#include "sim/per_thread.h"
#include "sim/sim_internal.h"

#include <time.h>

/* The conditions of cuda.h's CUstreamWaitValue_flags, on the word's width. */
static bool wait_holds(const cd_op *op, uint64_t word)
{
    uint64_t value = op->u.memop.value, mask = op->u.memop.size == 4 ? UINT32_MAX : UINT64_MAX;
    word &= mask;
    switch (op->u.memop.condition) {
    case CU_STREAM_WAIT_VALUE_GEQ: /* cyclic: (int)(word - value) >= 0 */
        return (((word - value) & mask) >> (op->u.memop.size * 8 - 1)) == 0;
    case CU_STREAM_WAIT_VALUE_EQ:
        return word == value;
    case CU_STREAM_WAIT_VALUE_AND:
        return (word & value) != 0;
    default: /* NOR */
        return (~(word | value) & mask) != 0;
    }
}

void cd_memop_run(const cd_op *op)
{
    void *word = (void *)op->u.memop.addr;
    bool wide = op->u.memop.size == 8;
    if (op->u.memop.write) {
        if (wide)
            __atomic_store_n((uint64_t *)word, op->u.memop.value, __ATOMIC_SEQ_CST);
        else
            __atomic_store_n((uint32_t *)word, (uint32_t)op->u.memop.value, __ATOMIC_SEQ_CST);
        return;
    }
    const struct timespec poll = {0, 20 * 1000};
    while (!wait_holds(op, wide ? __atomic_load_n((uint64_t *)word, __ATOMIC_SEQ_CST)
                                : __atomic_load_n((uint32_t *)word, __ATOMIC_SEQ_CST)))
        nanosleep(&poll, NULL);
}

/* The operation one entry of a batch asks for: NULL (and SUCCESS) for barriers and flushes,
 * which stream order already gives; INVALID_VALUE for a bad one. */
static CUresult memop_of(const CUstreamBatchMemOpParams *p, cd_op **op)
{
    *op = NULL;
    bool write, wide;
    switch (p->operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32: write = false, wide = false; break;
    case CU_STREAM_MEM_OP_WAIT_VALUE_64: write = false, wide = true; break;
    case CU_STREAM_MEM_OP_WRITE_VALUE_32: write = true, wide = false; break;
    case CU_STREAM_MEM_OP_WRITE_VALUE_64: write = true, wide = true; break;
    case CU_STREAM_MEM_OP_BARRIER:
    case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* waitValue and writeValue share their layout */
    unsigned flags = p->waitValue.flags, size = wide ? 8 : 4;
    unsigned known = write ? CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER : 0x3u | CU_STREAM_WAIT_VALUE_FLUSH;
    if (!p->waitValue.address || p->waitValue.address % size || (flags & ~known))
        return CUDA_ERROR_INVALID_VALUE;
    if (!(*op = cd_op_new(CD_OP_MEMOP)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    (*op)->u.memop.addr = (uintptr_t)p->waitValue.address;
    (*op)->u.memop.value = wide ? p->waitValue.value64 : p->waitValue.value;
    (*op)->u.memop.size = size;
    (*op)->u.memop.write = write;
    (*op)->u.memop.condition = write ? 0 : flags & 0x3u;
    return CUDA_SUCCESS;
}

/* Queues the batch's operations in order on hStream, or none of them. */
static CUresult queue_batch(CUstream hStream, unsigned count, const CUstreamBatchMemOpParams *params,
                            unsigned flags)
{
    if (!params || count == 0 || count > 256 || flags)
        return CUDA_ERROR_INVALID_VALUE;
    cd_op *ops[256];
    CUresult result = CUDA_SUCCESS;
    unsigned built = 0;
    for (unsigned i = 0; i < count && result == CUDA_SUCCESS; i++)
        if ((result = memop_of(&params[i], &ops[built])) == CUDA_SUCCESS && ops[built])
            built++;
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    if (result == CUDA_SUCCESS)
        result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS && s->capture)
        result = cd_capture_refuse_locked(s, "a stream memory operation");
    for (unsigned i = 0; i < built && result == CUDA_SUCCESS; i++) {
        ops[i]->u.memop.device = s->ctx->device;
        if (!cd_op_memory_usable_locked(ops[i]))
            result = CUDA_ERROR_INVALID_VALUE;
    }
    unsigned queued = 0;
    for (; queued < built && result == CUDA_SUCCESS; queued++)
        result = cd_enqueue_locked(hStream, ops[queued], &s);
    for (unsigned i = queued; i < built; i++)
        cd_op_free_locked(ops[i]);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

static CUresult one_op(CUstream hStream, CUstreamBatchMemOpType operation, CUdeviceptr addr,
                       cuuint64_t value, unsigned flags)
{
    CUstreamBatchMemOpParams p = {.waitValue = {.operation = operation, .address = addr, .flags = flags}};
    if (operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 || operation == CU_STREAM_MEM_OP_WRITE_VALUE_32)
        p.waitValue.value = (cuuint32_t)value;
    else
        p.waitValue.value64 = value;
    return queue_batch(hStream, 1, &p, 0);
}

CUresult cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    CD_ENTER("cuStreamWriteValue32");
    return one_op(stream, CU_STREAM_MEM_OP_WRITE_VALUE_32, addr, value, flags);
}

CUresult cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
    CD_ENTER("cuStreamWriteValue64");
    return one_op(stream, CU_STREAM_MEM_OP_WRITE_VALUE_64, addr, value, flags);
}

CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags)
{
    CD_ENTER("cuStreamWaitValue32");
    return one_op(stream, CU_STREAM_MEM_OP_WAIT_VALUE_32, addr, value, flags);
}

CUresult cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags)
{
    CD_ENTER("cuStreamWaitValue64");
    return one_op(stream, CU_STREAM_MEM_OP_WAIT_VALUE_64, addr, value, flags);
}

CUresult cuStreamBatchMemOp_v2(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray,
                               unsigned int flags)
{
    CD_ENTER("cuStreamBatchMemOp");
    return queue_batch(stream, count, paramArray, flags);
}
