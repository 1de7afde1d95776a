/* Division by a divisor known at launch as a multiply-high, an add and a shift (Granlund and
 * Montgomery's method, as PyTorch's IntDivider): the kernels turn every element's index into
 * coordinates by dividing it by the tensor's dimensions, and a 32-bit hardware division costs
 * some twenty instructions. Exact for 1 <= divisor < 2^31 and numerators below 2^31. Pure
 * arithmetic for the host and the device, tested on the CPU (tests/trainer_cudnn.c). */
#ifndef TRAINER_FAST_DIV_H
#define TRAINER_FAST_DIV_H

#include <stdint.h>

#ifdef __CUDACC__
#define FAST_DIV_FN __host__ __device__ static inline
#else
#define FAST_DIV_FN static inline
#endif

typedef struct FastDiv {
    uint32_t divisor, magic, shift;
} FastDiv;

/* shift = ceil(log2 divisor); magic = floor(2^32 (2^shift - divisor) / divisor) + 1, below 2^32. */
FAST_DIV_FN FastDiv fast_div(uint32_t divisor)
{
    FastDiv f = {divisor, 0, 0};
    while (((uint64_t)1 << f.shift) < divisor) f.shift++;
    f.magic = (uint32_t)(((((uint64_t)1 << f.shift) - divisor) << 32) / divisor + 1);
    return f;
}

/* n / divisor: floor(n magic / 2^32) + n fits 32 bits since n < 2^31. */
FAST_DIV_FN uint32_t fast_quotient(FastDiv f, uint32_t n)
{
#ifdef __CUDA_ARCH__
    uint32_t high = __umulhi(n, f.magic);
#else
    uint32_t high = (uint32_t)(((uint64_t)n * f.magic) >> 32);
#endif
    return (high + n) >> f.shift;
}

#endif
