/* splitmix64's finaliser: a 64-bit hash in which every input bit moves about half the output
 * bits, so that nearby ids (addresses, small numbers) hash far apart. */
#ifndef LMS_POLICY_MIX_H
#define LMS_POLICY_MIX_H

#include <stdint.h>

static inline uint64_t lms_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

#endif
