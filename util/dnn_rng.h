/* dnn_rng.h — the one pseudo-random generator of the project (splitmix64), header-only. */
#ifndef DNN_RNG_H
#define DNN_RNG_H
#include <stdint.h>

/* Host and device (the CUDA kernels that draw from (seed, step, sample), e.g. dropout's mask). */
#ifdef __CUDACC__
#define DNN_RNG_HD __host__ __device__
#else
#define DNN_RNG_HD
#endif

/* splitmix64's golden-ratio increment, and its finaliser: a bijective 64-bit mix. */
#define DNN_RNG_GOLDEN 0x9e3779b97f4a7c15ull
static inline DNN_RNG_HD uint64_t dnn_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* splitmix64: advances *s and returns the next 64 random bits. */
static inline DNN_RNG_HD uint64_t dnn_splitmix64(uint64_t *s) { return dnn_mix64(*s += DNN_RNG_GOLDEN); }

/* Uniform in (0, 1): the top 53 bits, centred. */
static inline double dnn_uniform01(uint64_t *s) { return ((dnn_splitmix64(s) >> 11) + 0.5) / 9007199254740992.0; }
#endif
