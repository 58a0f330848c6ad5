/* batchsum.c — exact, order-independent sums over a batch (batchsum.h). */
#include "batchsum.h"

#include <immintrin.h>
#include <string.h>

/* x on the grid, truncated toward zero below it; *bad += 1 for |x| >= DNN_BSUM_MAX, inf, NaN. */
static inline dnn_bsum bsum_of(float x, size_t *bad)
{
	uint32_t u;
	memcpy(&u, &x, sizeof(u));
	const int e = (int)(u >> 23) & 0xff; // biased exponent: |x| = m 2^(e - 150), m 24 bits
	if (e >= 127 + 32) {                   // |x| >= 2^32, inf, NaN
		++*bad;
		return 0;
	}
	const uint64_t m = (u & 0x7fffffu) | 0x800000u;
	const int sh = e - 150 + DNN_BSUM_FRAC; // units of 2^-FRAC: m 2^sh (sh <= 88: below 2^112)
	/* Branch-free in the sign and in the zero/subnormal case (a gradient's signs are random: a
	 * branch on them mispredicts half the time); m >> 63 = 0 covers sh <= -24. */
	dnn_bsum q = sh >= 0 ? (dnn_bsum)m << sh : (dnn_bsum)(m >> (-sh < 63 ? -sh : 63));
	q &= -(dnn_bsum)(e != 0); // zero and subnormals (below 2^-126, far under the grid's step)
	const dnn_bsum s = -(dnn_bsum)(u >> 31);
	return (q ^ s) - s;
}

/* acc (n) += x (n) on the grid, one element at a time; what the AVX-512 version computes too. */
static size_t bsum_add_scalar(dnn_bsum *acc, const float *x, size_t n)
{
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		acc[i] += bsum_of(x[i], &bad);
	return bad;
}

/* The same on 8 floats at a time: m << sh as two 64-bit halves by variable shifts (a count of
 * 64 or more, or a negative one seen as unsigned, gives 0, which covers every case of sh), the
 * sign and the zero and out-of-range cases as masks, then the 128-bit add with its carry on the
 * accumulator's halves, deinterleaved from and back into acc's (lo, hi) pairs. */
__attribute__((target("avx512f"))) static size_t bsum_add_avx512(dnn_bsum *acc, const float *x, size_t n)
{
	const __m512i ev = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), od = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
	const __m512i lo_of = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0), hi_of = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
	const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi64(1), c64 = _mm512_set1_epi64(64);
	size_t bad = 0, i = 0;
	for (; i + 8 <= n; i += 8) {
		const __m512i u = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(x + i)));
		const __m512i e = _mm512_and_si512(_mm512_srli_epi64(u, 23), _mm512_set1_epi64(0xff));
		const __m512i m = _mm512_or_si512(_mm512_and_si512(u, _mm512_set1_epi64(0x7fffff)), _mm512_set1_epi64(0x800000));
		const __m512i sh = _mm512_sub_epi64(e, _mm512_set1_epi64(150 - DNN_BSUM_FRAC));
		const __mmask8 out = _mm512_cmpge_epi64_mask(e, _mm512_set1_epi64(127 + 32));
		const __mmask8 keep = _mm512_cmpneq_epi64_mask(e, zero) & (__mmask8)~out;
		bad += (size_t)__builtin_popcount(out);
		__m512i qlo = _mm512_or_si512(_mm512_sllv_epi64(m, sh), _mm512_srlv_epi64(m, _mm512_sub_epi64(zero, sh)));
		__m512i qhi = _mm512_or_si512(_mm512_srlv_epi64(m, _mm512_sub_epi64(c64, sh)),
					      _mm512_sllv_epi64(m, _mm512_sub_epi64(sh, c64)));
		qlo = _mm512_maskz_mov_epi64(keep, qlo);
		qhi = _mm512_maskz_mov_epi64(keep, qhi);
		/* Negative x: q = -q on 128 bits, hi = -hi - (lo != 0), lo = -lo. */
		const __mmask8 neg = _mm512_test_epi64_mask(u, _mm512_set1_epi64(0x80000000));
		const __mmask8 borrow = neg & _mm512_cmpneq_epi64_mask(qlo, zero);
		qhi = _mm512_mask_sub_epi64(qhi, neg, zero, qhi);
		qhi = _mm512_mask_sub_epi64(qhi, borrow, qhi, one);
		qlo = _mm512_mask_sub_epi64(qlo, neg, zero, qlo);
		/* acc[i..i+7]: 16 int64, (lo, hi) pairs. */
		__m512i *pa = (__m512i *)(acc + i);
		const __m512i a0 = _mm512_loadu_si512(pa), a1 = _mm512_loadu_si512(pa + 1);
		const __m512i lo = _mm512_permutex2var_epi64(a0, ev, a1), hi = _mm512_permutex2var_epi64(a0, od, a1);
		const __m512i slo = _mm512_add_epi64(lo, qlo);
		const __mmask8 carry = _mm512_cmplt_epu64_mask(slo, lo);
		const __m512i shi = _mm512_mask_add_epi64(_mm512_add_epi64(hi, qhi), carry, _mm512_add_epi64(hi, qhi), one);
		_mm512_storeu_si512(pa, _mm512_permutex2var_epi64(slo, lo_of, shi));
		_mm512_storeu_si512(pa + 1, _mm512_permutex2var_epi64(slo, hi_of, shi));
	}
	return bad + bsum_add_scalar(acc + i, x + i, n - i);
}

static int bsum_simd = -1; /* -1: not chosen yet; workers read it concurrently (atomics) */

int dnn_bsum_set_simd(int on)
{
	const int v = on && __builtin_cpu_supports("avx512f");
	__atomic_store_n(&bsum_simd, v, __ATOMIC_RELAXED);
	return v;
}

size_t dnn_bsum_add_f32(dnn_bsum *acc, const float *x, size_t n)
{
	int simd = __atomic_load_n(&bsum_simd, __ATOMIC_RELAXED);
	if (simd < 0)
		simd = dnn_bsum_set_simd(1);
	return simd ? bsum_add_avx512(acc, x, n) : bsum_add_scalar(acc, x, n);
}

void dnn_bsum_merge(dnn_bsum *acc, const dnn_bsum *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		acc[i] += b[i];
}

void dnn_bsum_round(float *y, const dnn_bsum *acc, size_t n)
{
	/* The int128 -> float conversion rounds to nearest (libgcc's, in the default rounding mode);
	 * the scaling by a power of two is exact: |acc| >= 1 unit = 2^-80 is far above float's
	 * subnormals and below 2^47 far under its overflow. */
	for (size_t i = 0; i < n; i++)
		y[i] = (float)acc[i] * 0x1p-80f;
}

size_t dnn_conv2d_backward_filter_bsum_cpu(dnn_bsum *acc, const float *x, const float *dy, const dnn_conv2d_args *a,
					   int block, float *work)
{
	// acc (K, C, R, S) +=, x (N, C, H, W), dy (N, K, P, Q), work (K, C, R, S)
	dnn_conv2d_args blk = *a;
	const size_t nw = (size_t)a->K * a->C * a->R * a->S;
	const size_t xs = (size_t)a->C * a->H * a->W, ys = (size_t)a->K * a->P * a->Q;
	size_t bad = 0;
	if (block < 1)
		block = 1;
	for (int n = 0; n < a->N; n += block) {
		blk.N = a->N - n < block ? a->N - n : block;
		memset(work, 0, nw * sizeof(float));
		dnn_conv2d_backward_filter_cpu(work, x + n * xs, dy + n * ys, &blk);
		bad += dnn_bsum_add_f32(acc, work, nw);
	}
	return bad;
}
