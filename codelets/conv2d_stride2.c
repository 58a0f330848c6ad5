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
 * dx[c, h, w] = sum over k and the taps (r, s) with h + 1 = 2p + r, w + 1 = 2q + s of w[k, c, r, s] dy[k, p, q]:
 * the input pixels split by the parity (a, b) of their padded position (h + 1, w + 1) = (2i + a, 2j + b); a pixel of
 * class (a, b) takes the taps r = a (mod 2), s = b (mod 2) (2x2, 2x1, 1x2 or 1x1 of them), from dy[i + (a - r)/2,
 * j + (b - s)/2]. As outer products, the forward's form on the transposed conv: 16 input channels c to a vector
 * (wt: w transposed to (k, r, s, c), cp floats a row, zero past C), dy broadcast from dyq, dy transposed to
 * (pixel, k) with a zero border (one row above each image and one column left of each row: dyq[n, i', j'] =
 * dy[n, i' - 1, j' - 1]). A block is PB pixels of one class in a group of images x KB vectors of c (24
 * accumulators), each output one FMA chain over its taps in order, then k in order; it lands in xt (pixel, c),
 * which is added or copied into dx at the end of the group. Only the input pixels are computed (the phase grid
 * it replaced computed (P + 1) x (Q + 1) per class and image, 31% more at 7x7 outputs), with no scatter-add: every
 * input pixel belongs to exactly one class. */

/* Images per group of backward data: their bordered dy (img K floats each) and xt (H W cp) within
 * S2_GROUP_BUDGET floats; at least 1. */
static size_t s2d_group(const conv_geom *g, size_t cp)
{
	const size_t img = (size_t)(g->P + 1) * (g->Q + 1);
	const size_t G = S2_GROUP_BUDGET / (img * g->K + (size_t)g->H * g->W * cp);
	return G < 1 ? 1 : G > (size_t)g->N ? (size_t)g->N : G;
}

/* xt's rows xo[0, min(PB, npix)) x KB vectors of c = their sums over the nt taps, then k; xb[i]: the pixel's
 * base in dyq (tap offsets doff[], K floats a pixel), wt at this c block (rows cp floats apart, tap rows woff[]). */
static inline __attribute__((always_inline, target("avx512f"))) void
s2d_block(float *const *xo, const float *restrict wt, const float *const *xb, const long *doff, const int *woff,
	  int nt, size_t cp, int K, int npix, const int PB, const int KB)
{
	__m512 acc[24];
	for (int i = 0; i < PB * KB; i++)
		acc[i] = _mm512_setzero_ps();
	for (int tap = 0; tap < nt; tap++) {
		const float *wr = wt + (size_t)woff[tap] * cp;
		const long off = doff[tap];
		for (int k = 0; k < K; k++) {
			__m512 wv[4];
			for (int v = 0; v < KB; v++)
				wv[v] = _mm512_loadu_ps(wr + (size_t)k * 9 * cp + 16 * v);
			for (int i = 0; i < PB; i++) {
				const __m512 b = _mm512_set1_ps(xb[i][off + k]);
				for (int v = 0; v < KB; v++)
					acc[i * KB + v] = _mm512_fmadd_ps(b, wv[v], acc[i * KB + v]);
			}
		}
	}
	for (int i = 0; i < PB && i < npix; i++)
		for (int v = 0; v < KB; v++)
			_mm512_storeu_ps(xo[i] + 16 * v, acc[i * KB + v]);
}

__attribute__((target("avx512f"))) void dnn_conv_stride2_backward_data(float *dx, const float *dy, const float *w,
									const conv_geom *g, int accumulate_dx)
{
	// dx (N, C, H, W), dy (N, K, P, Q), w (K, C, 3, 3)
	const int K = g->K, C = g->C, P = g->P, Q = g->Q, H = g->H, W = g->W;
	const int Hd = P + 1, Wd = Q + 1; // dyq's pixels per image: the border row and column, then dy
	const size_t img = (size_t)Hd * Wd, pq = (size_t)P * Q, hw = (size_t)H * W;
	const size_t cp = ((size_t)C + 15) / 16 * 16, G = s2d_group(g, cp);
	/* A pixel of class (a, b) at (i, j) reads dyq rows i, i + 1 and columns j, j + 1, i <= H/2 <= P, j <= W/2 <= Q:
	 * the last image's row i + 1 = P + 1 lies in the tail (zeros), as each other image's lies in the next one's
	 * border row. */
	const size_t tail = (size_t)Wd + 2;
	float *wt = dnn_conv_scratch((size_t)K * 9 * cp + (G * img + tail) * K + G * hw * cp); // then dyq, xt
	if (!wt)
		return;
	float *dyq = wt + (size_t)K * 9 * cp, *xt = dyq + (G * img + tail) * K;
	memset(wt, 0, ((size_t)K * 9 * cp + (G * img + tail) * K) * sizeof(float)); // c >= C, the borders stay zero
	for (int k = 0; k < K; k++)
		for (int c = 0; c < C; c++)
			for (int j = 0; j < 9; j++)
				wt[((size_t)k * 9 + j) * cp + c] = w[((size_t)k * C + c) * 9 + j];
	for (int n0 = 0; n0 < g->N; n0 += (int)G) {
		const int ng = conv_imin((int)G, g->N - n0);
		for (int i = 0; i < ng; i++)
			for (int k = 0; k < K; k++)
				for (int p = 0; p < P; p++) {
					const float *s = dy + ((size_t)(n0 + i) * K + k) * pq + (size_t)p * Q;
					float *d = dyq + ((size_t)i * img + (size_t)(p + 1) * Wd + 1) * K + k;
					for (int q = 0; q < Q; q++)
						d[(size_t)q * K] = s[q];
				}
		for (int a = 0; a < 2; a++)
			for (int b = 0; b < 2; b++) {
				/* The class's rows h = 2m + 1 - a (i = m + 1 - a), columns w = 2l + 1 - b (j = l + 1 - b);
				 * its taps (r, s) in order and their offsets in dyq. */
				const int Ha = (H + a) / 2, Wb = (W + b) / 2, na = Ha * Wb, npx = ng * na;
				if (na == 0)
					continue;
				int woff[4], nt = 0;
				long doff[4];
				for (int r = a; r < 3; r += 2)
					for (int s = b; s < 3; s += 2, nt++) {
						woff[nt] = r * 3 + s;
						doff[nt] = ((long)(1 + (a - r) / 2) * Wd + (1 + (b - s) / 2)) * K;
					}
				for (size_t c0 = 0; c0 < cp; c0 += 64) { // blocks of 4 vectors of c, then the rest
					const int cb = (int)((cp - c0) / 16 < 4 ? (cp - c0) / 16 : 4);
					const int pb = cb >= 3 ? 6 : cb == 2 ? 12 : 24;
					for (int t0 = 0; t0 < npx; t0 += pb) {
						const float *xb[24];
						float *xo[24];
						for (int e = 0; e < pb; e++) { // past the class's pixels: pixel 0 again, not stored
							const int t = t0 + e < npx ? t0 + e : 0, n = t / na;
							const int m = t % na / Wb, l = t % Wb;
							xb[e] = dyq + ((size_t)n * img + (size_t)(m + 1 - a) * Wd + (l + 1 - b)) * K;
							xo[e] = xt + ((size_t)n * hw + (size_t)(2 * m + 1 - a) * W + (2 * l + 1 - b)) *
									     cp + c0;
						}
						const float *wc = wt + c0;
						switch (cb) {
						case 4: s2d_block(xo, wc, xb, doff, woff, nt, cp, K, npx - t0, 6, 4); break;
						case 3: s2d_block(xo, wc, xb, doff, woff, nt, cp, K, npx - t0, 6, 3); break;
						case 2: s2d_block(xo, wc, xb, doff, woff, nt, cp, K, npx - t0, 12, 2); break;
						default: s2d_block(xo, wc, xb, doff, woff, nt, cp, K, npx - t0, 24, 1); break;
						}
					}
				}
			}
		for (int i = 0; i < ng; i++)
			for (int c = 0; c < C; c++) {
				float *d = dx + ((size_t)(n0 + i) * C + c) * hw;
				const float *o = xt + (size_t)i * hw * cp + c;
				if (accumulate_dx) {
					for (size_t t = 0; t < hw; t++)
						d[t] += o[t * cp];
				} else {
					for (size_t t = 0; t < hw; t++)
						d[t] = o[t * cp];
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
