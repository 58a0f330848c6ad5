/* batchsum.c — exact, order-independent sums over a batch (batchsum.h). */
#include "batchsum.h"

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
	dnn_bsum q = sh >= 0 ? (dnn_bsum)m << sh : sh > -24 ? (dnn_bsum)(m >> -sh) : 0;
	if (e == 0) // zero and subnormals (below 2^-126, far under the grid's step)
		q = 0;
	return (u >> 31) ? -q : q;
}

size_t dnn_bsum_add_f32(dnn_bsum *acc, const float *x, size_t n)
{
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		acc[i] += bsum_of(x[i], &bad);
	return bad;
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
