/* Deterministic random numbers, the same on the host and in CUDA kernels: weight fillers,
 * synthetic data and dropout masks are pure functions of a seed and counters, so a run
 * resumed from a snapshot draws exactly what an uninterrupted one would. */
#ifndef TRAINER_RNG_H
#define TRAINER_RNG_H

#include <stdint.h>
#include <math.h>

#ifdef __CUDACC__
#define RNG_FN __host__ __device__ static inline
#else
#define RNG_FN static inline
#endif

RNG_FN uint64_t rng_mix(uint64_t x) /* splitmix64's finaliser */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* A hash of a seed and three counters, uniform in [0, 1). */
RNG_FN float rng_hash_uniform(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t h = rng_mix(seed ^ rng_mix(a + 0x9e3779b97f4a7c15ULL * (1 + rng_mix(b ^ rng_mix(c)))));
    return (float)(h >> 40) * (1.0f / 16777216.0f);
}

typedef struct Rng {
    uint64_t state;
} Rng;

RNG_FN uint64_t rng_next(Rng *r)
{
    r->state += 0x9e3779b97f4a7c15ULL;
    return rng_mix(r->state);
}

RNG_FN float rng_uniform(Rng *r) /* [0, 1) */
{
    return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

RNG_FN float rng_gaussian(Rng *r) /* mean 0, standard deviation 1 (Box-Muller) */
{
    float u = 1.0f - rng_uniform(r), v = rng_uniform(r);
    return sqrtf(-2.0f * logf(u)) * cosf(6.28318530718f * v);
}

#endif
