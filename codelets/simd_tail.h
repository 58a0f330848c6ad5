/* simd_tail.h — the first n lanes of an AVX vector stored with plain stores, for the CPU kernels'
 * row tails.
 *
 * Not _mm256_maskstore_ps: AVX2's vmaskmovps to memory is microcoded on AMD Zen (on Zen 4, perf
 * put ~40% of the Winograd split_image's time on the instructions just after its masked
 * stores, and removing them made resnet20 ~4% faster), while Intel runs it in a few cycles. A
 * 4-, 2- and 1-float store cover any n < 8 in at most three plain stores on either vendor.
 * (vmaskmovps loads are cheap on both; AVX-512's masked stores too.) Touches p[0..n) only. */
#ifndef DNN_SIMD_TAIL_H
#define DNN_SIMD_TAIL_H
#include <immintrin.h>

/* p[0..n) = the first n of the 4 floats of v (n <= 0: nothing; n >= 4: all four). */
static inline __attribute__((always_inline, target("avx2"))) void dnn_store_first_ps128(float *p, __m128 v, int n)
{
	if (n >= 4) {
		_mm_storeu_ps(p, v);
		return;
	}
	if (n <= 0)
		return;
	if (n & 2) {
		_mm_storel_pi((__m64 *)p, v);
		p += 2;
		v = _mm_movehl_ps(v, v);
	}
	if (n & 1)
		_mm_store_ss(p, v);
}

/* p[0..n) = the first n of the 8 floats of v (n <= 0: nothing; n >= 8: all eight). */
static inline __attribute__((always_inline, target("avx2"))) void dnn_store_first_ps(float *p, __m256 v, int n)
{
	if (n >= 8) {
		_mm256_storeu_ps(p, v);
		return;
	}
	__m128 h = _mm256_castps256_ps128(v);
	if (n >= 4) {
		_mm_storeu_ps(p, h);
		p += 4;
		n -= 4;
		h = _mm256_extractf128_ps(v, 1);
	}
	dnn_store_first_ps128(p, h, n);
}

#endif
