/* dnn_rng.h — the one pseudo-random generator of the project (splitmix64), header-only. */
#ifndef DNN_RNG_H
#define DNN_RNG_H
#include <stdint.h>

/* splitmix64: advances *s and returns the next 64 random bits. */
static inline uint64_t dnn_splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1): the top 53 bits, centred. */
static inline double dnn_uniform01(uint64_t *s) { return ((dnn_splitmix64(s) >> 11) + 0.5) / 9007199254740992.0; }
#endif
