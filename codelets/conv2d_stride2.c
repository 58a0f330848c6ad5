/* conv2d_stride2.c — direct AVX-512 kernels for 3x3 convs of stride 2 and padding 1 (ResNets' downsampling
 * convs; see conv2d_impl.h), all three passes outer products with no lane reductions.
 *
 *   forward:         outer products over the output pixels: 16 output channels to a vector (w transposed), the
 *                    zero-padded image broadcast, each output one FMA chain over (c, r, s) in order ("forward"
 *                    below); the same sums in the same order as the phase-grid GEMM it replaced (which computed
 *                    (P + 1) x (Q + 1) pixels per image, 31% more at 7x7): the same bits, 1.09-1.44x faster;
 *   backward data:   the transposed conv as outer products over the input pixels, split by the parity of their
 *                    padded position (each class takes 2x2, 2x1, 1x2 or 1x1 taps, every pixel in exactly one class):
 *                    16 input channels to a vector (w transposed), dy (transposed, zero-bordered) broadcast, each
 *                    input pixel one FMA chain over its taps, then k ("backward data" below);
 *   backward filter: outer products of dy (transposed, 16 output channels to a vector) and the zero-padded image
 *                    over the output pixels ("backward filter" below).
 * The sums' order is fixed by the shapes alone. The double-precision naive reference lives in the tests
 * (tests/op_cases.c). Measured in docs/studies/2026-12-07-resnet8-fp32b.md (forward, backward filter) and
 * docs/studies/2026-12-07-s2bwd.md (backward data).
 */
#include <stdint.h>
#include <string.h>

#include "conv2d_impl.h"
#include "short_copy.h"

/* Floats of a group of backward data's bordered, transposed dy and its (pixel, c) output: 64 Ki floats = 256 KiB,
 * re-read from L2 by every block of input channels. */
#define S2_GROUP_BUDGET (64 * 1024)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

int dnn_conv_stride2_applies(const conv_geom *g)
{
	return g->R == 3 && g->S == 3 && g->stride == 2 && g->dil == 1 && g->pad_h == 1 && g->pad_w == 1 &&
	       dnn_conv_avx512_kernels();
}

/* ------------------------------------------------------------------ forward
 *
 * y[k, p, q] = sum over c, r, s of w[k, c, r, s] xp[c, 2p + r, 2q + s] (xp: x zero-padded by 1), as the weight
 * gradient below does it: 16 output channels k to a vector (wt: w transposed to (c, r, s, k), kp floats a row,
 * zero past K), the input broadcast from xp, over the P x Q output pixels only (the phases' grid computed (P + 1)
 * x (Q + 1) of them: 31% more at 7x7). A block is PB consecutive output pixels of a group of images x KB vectors
 * of k (24 accumulators: 6 x 4, 12 x 2, 24 x 1), each a chain over c, r, s in order; it lands in yt (pixel, k),
 * which is transposed into y at the end of the group. That chain is the phase-grid GEMM's (dnn_conv_taps_gemm,
 * which this replaced): the same bits. */

/* Images per group of the forward and the weight gradient: their padded images and their transposed dy or y
 * (pq kp floats each) within S2W_GROUP_BUDGET floats; at least 1. */
#define S2W_GROUP_BUDGET (64 * 1024)
static size_t s2w_group(const conv_geom *g, size_t kp)
{
	const size_t xs = (size_t)g->C * (g->H + 2) * (g->W + 2);
	const size_t G = S2W_GROUP_BUDGET / (xs + (size_t)g->P * g->Q * kp);
	return G < 1 ? 1 : G > (size_t)g->N ? (size_t)g->N : G;
}

/* xp (ng, C, H + 2, W + 2) <- images [n0, n0 + ng) of x, inside the zero border (written once by the caller). */
static void s2w_pad(float *restrict xp, const float *restrict x, int n0, int ng, const conv_geom *g)
{
	const int C = g->C, H = g->H, W = g->W, wp = W + 2;
	const size_t hw = (size_t)(H + 2) * wp;
	for (int i = 0; i < ng; i++)
		for (int c = 0; c < C; c++)
			for (int h = 0; h < H; h++)
				dnn_copy_floats(xp + ((size_t)i * C + c) * hw + (size_t)(h + 1) * wp + 1,
						x + (((size_t)(n0 + i) * C + c) * H + h) * W, W);
}

size_t dnn_conv_stride2_work(const conv_geom *g)
{
	const size_t kp = ((size_t)g->K + 15) / 16 * 16, G = s2w_group(g, kp);
	return G * (size_t)g->C * (g->H + 2) * (g->W + 2) + (size_t)g->C * 9 * kp + G * (size_t)g->P * g->Q * kp;
}

/* yt's rows [0, min(PB, npix)) (the next PB output pixels of the group, kp floats each) x KB vectors of k = their
 * sums over c, r, s; xb[i]: output pixel i's tap (0, 0) in xp, channel 0 (channels hw floats apart). */
static inline __attribute__((always_inline, target("avx512f"))) void
s2f_block(float *restrict yt, const float *restrict wt, const float *const *xb, size_t kp, size_t hw, int wp, int C,
	  int npix, const int PB, const int KB)
{
	__m512 acc[24];
	for (int i = 0; i < PB * KB; i++)
		acc[i] = _mm512_setzero_ps();
	for (int c = 0; c < C; c++)
		for (int r = 0; r < 3; r++)
			for (int t = 0; t < 3; t++) {
				const float *wr = wt + (size_t)(c * 9 + r * 3 + t) * kp;
				const size_t off = (size_t)c * hw + (size_t)r * wp + t;
				__m512 wv[4];
				for (int v = 0; v < KB; v++)
					wv[v] = _mm512_loadu_ps(wr + 16 * v);
				for (int i = 0; i < PB; i++) {
					const __m512 b = _mm512_set1_ps(xb[i][off]);
					for (int v = 0; v < KB; v++)
						acc[i * KB + v] = _mm512_fmadd_ps(b, wv[v], acc[i * KB + v]);
				}
			}
	for (int i = 0; i < PB && i < npix; i++)
		for (int v = 0; v < KB; v++)
			_mm512_storeu_ps(yt + (size_t)i * kp + 16 * v, acc[i * KB + v]);
}

__attribute__((target("avx512f"))) void dnn_conv_stride2_forward(float *y, const float *x, const float *w,
								  const conv_geom *g, float beta, float *work)
{
	// y (N, K, P, Q), x (N, C, H, W), w (K, C, 3, 3)
	const int K = g->K, C = g->C, P = g->P, Q = g->Q, wp = g->W + 2;
	const size_t pq = (size_t)P * Q, hw = (size_t)(g->H + 2) * wp, xs = (size_t)C * hw;
	const size_t kp = ((size_t)K + 15) / 16 * 16, G = s2w_group(g, kp);
	float *xp = work, *wt = xp + G * xs, *yt = wt + (size_t)C * 9 * kp; // (G, C, hp, wp), (C, 9, kp), (G pq, kp)
	memset(xp, 0, (G * xs + (size_t)C * 9 * kp) * sizeof(float)); // the border, k >= K
	for (int k = 0; k < K; k++)
		for (int j = 0; j < C * 9; j++)
			wt[(size_t)j * kp + k] = w[(size_t)k * C * 9 + j];
	for (int n0 = 0; n0 < g->N; n0 += (int)G) {
		const int ng = conv_imin((int)G, g->N - n0), nt = ng * (int)pq;
		s2w_pad(xp, x, n0, ng, g);
		for (size_t k0 = 0; k0 < kp; k0 += 64) { // blocks of 4 vectors of k, then the rest
			const int kb = (int)((kp - k0) / 16 < 4 ? (kp - k0) / 16 : 4);
			const int pb = kb >= 3 ? 6 : kb == 2 ? 12 : 24;
			for (int t0 = 0; t0 < nt; t0 += pb) {
				const float *xb[24];
				for (int i = 0; i < pb; i++) { // past the group's pixels: pixel 0 again, not stored
					const int t = t0 + i < nt ? t0 + i : 0, n = t / (int)pq;
					const int p = t % (int)pq / Q, q = t % Q;
					xb[i] = xp + (size_t)n * xs + (size_t)(2 * p) * wp + 2 * q;
				}
				float *yb = yt + (size_t)t0 * kp + k0;
				const float *wk = wt + k0;
				switch (kb) {
				case 4: s2f_block(yb, wk, xb, kp, hw, wp, C, nt - t0, 6, 4); break;
				case 3: s2f_block(yb, wk, xb, kp, hw, wp, C, nt - t0, 6, 3); break;
				case 2: s2f_block(yb, wk, xb, kp, hw, wp, C, nt - t0, 12, 2); break;
				default: s2f_block(yb, wk, xb, kp, hw, wp, C, nt - t0, 24, 1); break;
				}
			}
		}
		for (int i = 0; i < ng; i++)
			for (int k = 0; k < K; k++) {
				float *d = y + ((size_t)(n0 + i) * K + k) * pq;
				const float *o = yt + (size_t)i * pq * kp + k;
				if (beta != 0.0f) {
					for (size_t t = 0; t < pq; t++)
						d[t] = o[t * kp] + beta * d[t];
				} else {
					for (size_t t = 0; t < pq; t++)
						d[t] = o[t * kp];
				}
			}
	}
}

/* ------------------------------------------------------------------ backward data
 *
 * dx[c, h, w] = sum over k and the taps (r, s) with h + 1 = 2p + r, w + 1 = 2q + s of w[k, c, r, s] dy[k, p, q].
 * Input rows 2i and 2i + 1 read dy rows i (taps r = 1 and 2) and i + 1 (r = 0 for row 2i + 1); input columns 2j and
 * 2j + 1 read dy columns j (s = 1, 2) and j + 1 (s = 0 for column 2j + 1). So a tile of 2 input rows x L column
 * pairs (2j, 2j + 1) reads dy at 2 x (L + 1) pixels, and each dy value feeds 9 (or fewer at the tile's edge)
 * outputs, one per tap: outer products, 16 input channels to a vector (wt: w transposed to (c / 16, k, r, s, 16),
 * zero past C), dy broadcast from dyq (dy per image with a zero row below and a zero column right of it: the
 * taps past the image read zeros), 4 L accumulators and the 9 tap vectors of one k in registers. Each output is
 * one FMA chain over k in order, and within one k over the tile's dy values in the order below; it lands in xt
 * (pixel, c), which is added or copied into dx at the end of the group. Only the input pixels are computed (the
 * phase grid it replaced computed (P + 1) x (Q + 1) per parity class and image, 31% more at 7x7 outputs), and
 * each dy value is broadcast once per tile and k, not once per tap. */

/* Images per group of backward data: their bordered dy (K img floats each) and xt (H W cp) within
 * S2_GROUP_BUDGET floats; at least 1. */
static size_t s2d_group(const conv_geom *g, size_t cp)
{
	const size_t img = (size_t)(g->P + 1) * (g->Q + 1);
	const size_t G = S2_GROUP_BUDGET / (img * g->K + (size_t)g->H * g->W * cp);
	return G < 1 ? 1 : G > (size_t)g->N ? (size_t)g->N : G;
}

/* One tile: xt rows 2i (at xo) and 2i + 1 (xo + W cp; stored when two_rows) x columns 2j0 .. 2(j0 + L) - 1 (the last
 * one stored when odd_ok: odd W ends on an even column), one vector of c; wt at this c vector (k rows 9 x 16
 * floats apart, tap t at 16 t), d0 at dy's row i, column j0 of channel 0 in dyq (channels img floats apart, rows wd
 * apart). */
static inline __attribute__((always_inline, target("avx512f"))) void
s2d_tile(float *restrict xo, const float *restrict wt, const float *restrict d0, size_t img, int wd, size_t cp, int W,
	 int K, int two_rows, int odd_ok, const int L)
{
	__m512 e0[4], o0[4], e1[4], o1[4]; // row 2i or 2i + 1 (0, 1) x column 2j or 2j + 1 (e, o)
	for (int e = 0; e < L; e++)
		e0[e] = o0[e] = e1[e] = o1[e] = _mm512_setzero_ps();
	for (int k = 0; k < K; k++) {
		const float *wk = wt + (size_t)k * 9 * 16, *r0 = d0 + (size_t)k * img, *r1 = r0 + wd;
		__m512 w[9]; // tap (r, s) at 3 r + s
		for (int t = 0; t < 9; t++)
			w[t] = _mm512_loadu_ps(wk + 16 * t);
		for (int e = 0; e <= L; e++) { // dy column j0 + e: pair e's even and odd pixels, pair e - 1's odd one
			const __m512 b0 = _mm512_set1_ps(r0[e]), b1 = _mm512_set1_ps(r1[e]);
			if (e < L) {
				e0[e] = _mm512_fmadd_ps(w[4], b0, e0[e]);
				o0[e] = _mm512_fmadd_ps(w[5], b0, o0[e]);
				e1[e] = _mm512_fmadd_ps(w[7], b0, e1[e]);
				o1[e] = _mm512_fmadd_ps(w[8], b0, o1[e]);
				e1[e] = _mm512_fmadd_ps(w[1], b1, e1[e]);
				o1[e] = _mm512_fmadd_ps(w[2], b1, o1[e]);
			}
			if (e > 0) {
				o0[e - 1] = _mm512_fmadd_ps(w[3], b0, o0[e - 1]);
				o1[e - 1] = _mm512_fmadd_ps(w[6], b0, o1[e - 1]);
				o1[e - 1] = _mm512_fmadd_ps(w[0], b1, o1[e - 1]);
			}
		}
	}
	for (int e = 0; e < L; e++) {
		const int odd = e < L - 1 || odd_ok;
		_mm512_storeu_ps(xo + (size_t)(2 * e) * cp, e0[e]);
		if (odd)
			_mm512_storeu_ps(xo + (size_t)(2 * e + 1) * cp, o0[e]);
		if (two_rows) {
			_mm512_storeu_ps(xo + ((size_t)W + 2 * e) * cp, e1[e]);
			if (odd)
				_mm512_storeu_ps(xo + ((size_t)W + 2 * e + 1) * cp, o1[e]);
		}
	}
}

/* r[l] lane e <- r[e] lane l: a 16 x 16 transpose (unpack pairs, then 4-float and 128-bit lane shuffles). */
static inline __attribute__((always_inline, target("avx512f"))) void s2_transpose16(__m512 r[16])
{
	__m512 t[16];
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
	}
	for (int i = 0; i < 16; i += 4) {
		r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
		r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
		r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
		r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
	}
	for (int i = 0; i < 16; i += 8)
		for (int j = 0; j < 4; j++) {
			t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
			t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
		}
	for (int j = 0; j < 8; j++) {
		r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
		r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
	}
}

__attribute__((target("avx512f"))) void dnn_conv_stride2_backward_data(float *dx, const float *dy, const float *w,
									const conv_geom *g, int accumulate_dx)
{
	// dx (N, C, H, W), dy (N, K, P, Q), w (K, C, 3, 3)
	const int K = g->K, C = g->C, P = g->P, Q = g->Q, H = g->H, W = g->W;
	const int wd = Q + 1; // dyq (G, K, P + 1, Q + 1): dy, a zero row below and a zero column right
	const size_t img = (size_t)(P + 1) * wd, pq = (size_t)P * Q, hw = (size_t)H * W;
	const size_t cp = ((size_t)C + 15) / 16 * 16, G = s2d_group(g, cp);
	/* wt, dyq, xt, each at a 64-byte boundary: the worker's scratch is realloc'ed (16 bytes), and a 16-float load
	 * across two cache lines cost this kernel 1.4x at 7x7 outputs (tap vectors, xt rows). */
	const size_t nq = (G * K * img + 15) / 16 * 16;
	float *s = dnn_conv_scratch((size_t)K * 9 * cp + nq + G * hw * cp + 15);
	if (!s)
		return;
	float *wt = (float *)(((uintptr_t)s + 63) & ~(uintptr_t)63), *dyq = wt + (size_t)K * 9 * cp, *xt = dyq + nq;
	memset(wt, 0, ((size_t)K * 9 * cp + G * K * img) * sizeof(float)); // c >= C, the borders stay zero
	for (int k = 0; k < K; k++)
		for (int c = 0; c < C; c++)
			for (int t = 0; t < 9; t++)
				wt[(((size_t)(c / 16) * K + k) * 9 + t) * 16 + c % 16] = w[((size_t)k * C + c) * 9 + t];
	const int rows = (H + 1) / 2, pairs = (W + 1) / 2; // row pairs (2i, 2i + 1), column pairs (2j, 2j + 1)
	for (int n0 = 0; n0 < g->N; n0 += (int)G) {
		const int ng = conv_imin((int)G, g->N - n0);
		for (int n = 0; n < ng; n++)
			for (int k = 0; k < K; k++)
				for (int p = 0; p < P; p++)
					dnn_copy_floats(dyq + ((size_t)n * K + k) * img + (size_t)p * wd,
							dy + ((size_t)(n0 + n) * K + k) * pq + (size_t)p * Q, Q);
		for (int n = 0; n < ng; n++)
			for (size_t c0 = 0; c0 < cp; c0 += 16) {
				const float *wc = wt + c0 * K * 9;
				for (int i = 0; i < rows; i++)
					for (int j0 = 0; j0 < pairs; j0 += 4) {
						const int L = conv_imin(4, pairs - j0), two = 2 * i + 1 < H;
						const int odd_ok = 2 * (j0 + L) <= W;
						const float *d0 = dyq + (size_t)n * K * img + (size_t)i * wd + j0;
						float *xo = xt + ((size_t)n * hw + (size_t)(2 * i) * W + 2 * j0) * cp + c0;
						switch (L) {
						case 4: s2d_tile(xo, wc, d0, img, wd, cp, W, K, two, odd_ok, 4); break;
						case 3: s2d_tile(xo, wc, d0, img, wd, cp, W, K, two, odd_ok, 3); break;
						case 2: s2d_tile(xo, wc, d0, img, wd, cp, W, K, two, odd_ok, 2); break;
						default: s2d_tile(xo, wc, d0, img, wd, cp, W, K, two, odd_ok, 1); break;
						}
					}
			}
		/* dx (=|+=) xt, transposed 16 pixels x 16 channels at a time (a scalar strided copy took a quarter of
		 * the time at C = 16). */
		for (int i = 0; i < ng; i++)
			for (size_t c0 = 0; c0 < cp; c0 += 16) {
				const int nc = conv_imin(16, C - (int)c0);
				for (size_t t0 = 0; t0 < hw; t0 += 16) {
					const int nt = (int)(hw - t0 < 16 ? hw - t0 : 16);
					const __mmask16 m = nt == 16 ? (__mmask16)0xffff : (__mmask16)((1u << nt) - 1);
					__m512 r[16];
					for (int e = 0; e < 16; e++)
						r[e] = e < nt ? _mm512_loadu_ps(xt + ((size_t)i * hw + t0 + e) * cp + c0)
							      : _mm512_setzero_ps();
					s2_transpose16(r);
					for (int l = 0; l < nc; l++) {
						float *d = dx + ((size_t)(n0 + i) * C + c0 + l) * hw + t0;
						__m512 v = r[l];
						if (accumulate_dx)
							v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, d), v);
						_mm512_mask_storeu_ps(d, m, v);
					}
				}
			}
	}
}

/* ------------------------------------------------------------------ backward filter
 *
 * dw[k, c, r, s] += sum over the images n and the output pixels (p, q) of dy[n, k, p, q] xp[n, c, 2p + r, 2q + s],
 * xp: x zero-padded by one pixel. As outer products, 16 output channels to a vector: at each output pixel, KB
 * vectors of dy (dyt: dy transposed to (pixel, k), kp floats a pixel, zero past K) times CB input channels x the
 * 3 taps of one filter row r, each broadcast from xp; 3 CB KB accumulators (24 at most) that run over every
 * output pixel of a group of images, in order, then are added to dwt (C, 9, kp), dw's transpose, once per group;
 * dwt is added to dw at the end. No lane reductions and only the P x Q output pixels: the phases' grid of the
 * forward computed (P + 1) x (Q + 1) of them (31% more at 7x7) and ended every group in K*C*9 sums of 16 lanes,
 * which lost to im2col's sgemm from 32 channels on. Each sum's order is the kernel's: groups in order, and in a
 * group the images, rows and columns in order (one FMA chain per output). */

/* Channels [c0, c0 + CB) x filter row r x kp-vectors [0, KB) of dwt (at dwt, for this k block) += their sums
 * over the ng images of the group: xc at channel c0, row r of image 0 (images xs apart, channels hw apart, rows
 * wp apart); dyt at this k block (images pq kp apart, pixels kp apart). */
static inline __attribute__((always_inline, target("avx512f"))) void
s2w_block(float *restrict dwt, const float *restrict dyt, const float *restrict xc, size_t kp, size_t xs, size_t hw,
	  int wp, int ng, int P, int Q, const int KB, const int CB)
{
	__m512 acc[24];
	for (int i = 0; i < 3 * CB * KB; i++)
		acc[i] = _mm512_setzero_ps();
	for (int n = 0; n < ng; n++)
		for (int p = 0; p < P; p++) {
			const float *xr = xc + (size_t)n * xs + (size_t)(2 * p) * wp;
			const float *dr = dyt + ((size_t)n * P + p) * Q * kp;
			for (int q = 0; q < Q; q++) {
				__m512 dv[4];
				for (int v = 0; v < KB; v++)
					dv[v] = _mm512_loadu_ps(dr + (size_t)q * kp + 16 * v);
				for (int ch = 0; ch < CB; ch++)
					for (int t = 0; t < 3; t++) {
						const __m512 b = _mm512_set1_ps(xr[(size_t)ch * hw + 2 * q + t]);
						for (int v = 0; v < KB; v++)
							acc[(ch * 3 + t) * KB + v] =
								_mm512_fmadd_ps(b, dv[v], acc[(ch * 3 + t) * KB + v]);
					}
			}
		}
	for (int ch = 0; ch < CB; ch++)
		for (int t = 0; t < 3; t++)
			for (int v = 0; v < KB; v++) {
				float *o = dwt + (size_t)(ch * 9 + t) * kp + 16 * v;
				_mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), acc[(ch * 3 + t) * KB + v]));
			}
}

/* Every channel of one k block (KB vectors) and filter row r: CB channels at a time (24 accumulators), then
 * one at a time. */
static inline __attribute__((always_inline, target("avx512f"))) void
s2w_rows(float *restrict dwt, const float *restrict dyt, const float *restrict x0, size_t kp, size_t xs, size_t hw,
	 int wp, int ng, int P, int Q, int C, const int KB)
{
	const int CB = KB >= 3 ? 2 : KB == 2 ? 4 : 8;
	int c = 0;
	for (; c + CB <= C; c += CB)
		s2w_block(dwt + (size_t)c * 9 * kp, dyt, x0 + (size_t)c * hw, kp, xs, hw, wp, ng, P, Q, KB, CB);
	for (; c < C; c++)
		s2w_block(dwt + (size_t)c * 9 * kp, dyt, x0 + (size_t)c * hw, kp, xs, hw, wp, ng, P, Q, KB, 1);
}

__attribute__((target("avx512f"))) void dnn_conv_stride2_backward_filter(float *dw, const float *x, const float *dy,
									  const conv_geom *g)
{
	// dw (K, C, 3, 3) +=, x (N, C, H, W), dy (N, K, P, Q)
	const int K = g->K, C = g->C, P = g->P, Q = g->Q, wp = g->W + 2;
	const size_t pq = (size_t)P * Q, hw = (size_t)(g->H + 2) * wp, xs = (size_t)C * hw;
	const size_t kp = ((size_t)K + 15) / 16 * 16, G = s2w_group(g, kp);
	float *xp = dnn_conv_scratch(G * xs + G * pq * kp + (size_t)C * 9 * kp); // xp (G, C, hp, wp), dyt, dwt
	if (!xp)
		return;
	float *dyt = xp + G * xs, *dwt = dyt + G * pq * kp;
	/* Zeros: xp's border and dyt's k >= K stay so (only the rest is written), dwt is a sum. */
	memset(xp, 0, (G * xs + G * pq * kp + (size_t)C * 9 * kp) * sizeof(float));
	for (int n0 = 0; n0 < g->N; n0 += (int)G) {
		const int ng = conv_imin((int)G, g->N - n0);
		s2w_pad(xp, x, n0, ng, g);
		for (int i = 0; i < ng; i++) {
			const float *dn = dy + (size_t)(n0 + i) * K * pq;
			float *dt = dyt + (size_t)i * pq * kp;
			for (int k = 0; k < K; k++)
				for (size_t t = 0; t < pq; t++)
					dt[t * kp + k] = dn[(size_t)k * pq + t];
		}
		for (size_t k0 = 0; k0 < kp; k0 += 64) { // blocks of 4 vectors of k, then the rest
			const int kb = (int)((kp - k0) / 16 < 4 ? (kp - k0) / 16 : 4);
			for (int r = 0; r < 3; r++) {
				float *dr = dwt + (size_t)(r * 3) * kp + k0;
				const float *dk = dyt + k0, *xr = xp + (size_t)r * wp;
				switch (kb) {
				case 4: s2w_rows(dr, dk, xr, kp, xs, hw, wp, ng, P, Q, C, 4); break;
				case 3: s2w_rows(dr, dk, xr, kp, xs, hw, wp, ng, P, Q, C, 3); break;
				case 2: s2w_rows(dr, dk, xr, kp, xs, hw, wp, ng, P, Q, C, 2); break;
				default: s2w_rows(dr, dk, xr, kp, xs, hw, wp, ng, P, Q, C, 1); break;
				}
			}
		}
	}
	for (int k = 0; k < K; k++)
		for (size_t j = 0; j < (size_t)C * 9; j++)
			dw[(size_t)k * C * 9 + j] += dwt[j * kp + k];
}

#else /* not x86-64 GCC/Clang: dnn_conv_stride2_applies is 0, the im2col path runs these convs */

int dnn_conv_stride2_applies(const conv_geom *g)
{
	(void)g;
	return 0;
}
size_t dnn_conv_stride2_work(const conv_geom *g) { return dnn_conv_im2col_forward_work(g); }
void dnn_conv_stride2_forward(float *y, const float *x, const float *w, const conv_geom *g, float beta, float *work)
{
	dnn_conv_im2col_forward(y, x, w, g, beta, work);
}
void dnn_conv_stride2_backward_data(float *dx, const float *dy, const float *w, const conv_geom *g, int accumulate_dx)
{
	dnn_conv_im2col_backward_data(dx, dy, w, g, accumulate_dx);
}
void dnn_conv_stride2_backward_filter(float *dw, const float *x, const float *dy, const conv_geom *g)
{
	dnn_conv_im2col_backward_filter(dw, x, dy, g);
}
#endif
