/* The simulator's stream memory operations: writes and waits in stream order, across streams,
 * each condition of a wait, batches, and what is refused. */
#include "tests/sim_testing.h"

#include <stdint.h>

static uint64_t word_at(CUdeviceptr p, unsigned size)
{
    uint64_t v = 0;
    CHECK_CU(cuMemcpyDtoH(&v, p, size));
    return v;
}

int main(void)
{
    plan(10);
    sim_setup((size_t)64 << 20);
    CUdeviceptr words;
    CHECK_CU(cuMemAlloc(&words, 4096));
    CHECK_CU(cuMemsetD8(words, 0, 4096));
    CUdeviceptr go = words, flag = words + 8, done = words + 16, wide = words + 24;
    CUstream a, b;
    CHECK_CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));

    /* a waits for the host's go, then raises flag; b waits for flag, then marks done. */
    CHECK_CU(cuStreamWaitValue32(a, go, 1, CU_STREAM_WAIT_VALUE_EQ));
    CHECK_CU(cuStreamWriteValue32(a, flag, 7, CU_STREAM_WRITE_VALUE_DEFAULT));
    CHECK_CU(cuStreamWaitValue32(b, flag, 7, CU_STREAM_WAIT_VALUE_GEQ));
    CHECK_CU(cuStreamWriteValue32(b, done, 1, CU_STREAM_WRITE_VALUE_DEFAULT));
    ok(word_at(done, 4) == 0 && word_at(flag, 4) == 0, "waits hold their streams until the word is written");
    CHECK_CU(cuStreamWriteValue32(NULL, go, 1, 0)); /* a word others poll is written atomically */
    CHECK_CU(cuStreamSynchronize(b));
    ok(word_at(done, 4) == 1, "and release them, in order across streams, once it is");

    /* Conditions that hold at once: each returns, and the write after it lands. */
    CHECK_CU(cuStreamWriteValue32(a, flag, 1, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER));
    CHECK_CU(cuStreamWaitValue32(a, flag, 0xFFFFFFFFu, CU_STREAM_WAIT_VALUE_GEQ)); /* cyclic: 1 - (-1) >= 0 */
    CHECK_CU(cuStreamWaitValue32(a, flag, 3, CU_STREAM_WAIT_VALUE_AND));
    CHECK_CU(cuStreamWaitValue32(a, flag, 0x0000FFFEu, CU_STREAM_WAIT_VALUE_NOR | CU_STREAM_WAIT_VALUE_FLUSH));
    CHECK_CU(cuStreamWriteValue64(a, wide, 0x0123456789ABCDEFull, 0));
    CHECK_CU(cuStreamWaitValue64(a, wide, 0x0123456789ABCDEFull, CU_STREAM_WAIT_VALUE_EQ));
    CHECK_CU(cuStreamSynchronize(a));
    ok(word_at(wide, 8) == 0x0123456789ABCDEFull, "GEQ (cyclic), AND, NOR and a 64-bit EQ hold; 64-bit words");

    CUstreamBatchMemOpParams batch[4] = {
        {.writeValue = {.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32, .address = done, .value = 5}},
        {.memoryBarrier = {.operation = CU_STREAM_MEM_OP_BARRIER}},
        {.writeValue = {.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64, .address = wide, .value64 = 9}},
        {.waitValue = {.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64, .address = wide, .value64 = 9,
                       .flags = CU_STREAM_WAIT_VALUE_EQ}},
    };
    CHECK_CU(cuStreamBatchMemOp(b, 4, batch, 0));
    CHECK_CU(cuStreamSynchronize(b));
    ok(word_at(done, 4) == 5 && word_at(wide, 8) == 9, "a batch runs its operations in order");

    batch[2].writeValue.address = wide + 4;
    is_int(cuStreamBatchMemOp(b, 4, batch, 0), CUDA_ERROR_INVALID_VALUE, "a misaligned word: INVALID_VALUE");
    CHECK_CU(cuStreamSynchronize(b));
    ok(word_at(done, 4) == 5, "and nothing of its batch runs");
    is_int(cuStreamWaitValue32(a, flag, 1, 0x10), CUDA_ERROR_INVALID_VALUE, "an unknown flag: INVALID_VALUE");
    uint32_t host_word;
    is_int(cuStreamWriteValue32(a, (CUdeviceptr)(uintptr_t)&host_word, 1, 0), CUDA_ERROR_INVALID_VALUE,
           "memory the device cannot use: INVALID_VALUE");
    is_int(cuStreamBatchMemOp(a, 0, batch, 0), CUDA_ERROR_INVALID_VALUE, "an empty batch: INVALID_VALUE");

    CUgraph graph;
    CHECK_CU(cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUresult captured = cuStreamWriteValue32(a, flag, 2, 0);
    cuStreamEndCapture(a, &graph);
    is_int(captured, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "capturing one is refused");

    CHECK_CU(cuStreamDestroy(a));
    CHECK_CU(cuStreamDestroy(b));
    CHECK_CU(cuMemFree(words));
    return exit_status();
}
