/* conv2d_stride2.c — direct AVX-512 kernels for 3x3 convs of stride 2 and padding 1 (ResNets' downsampling
 * convs; see conv2d_impl.h); backward data on the loops of conv2d_pointwise.c.
 *
 *   forward:         outer products over the output pixels: 16 output channels to a vector (w transposed), the
 *                    zero-padded image broadcast, each output one FMA chain over (c, r, s) in order ("forward"
 *                    below); the same sums in the same order as the phase-grid GEMM it replaced (which computed
 *                    (P + 1) x (Q + 1) pixels per image, 31% more at 7x7): the same bits, 1.09-1.44x faster;
 *   backward data:   the transposed conv, split by the parity of the input pixel: padded pixel (2i + a,
 *                    2j + b) receives the taps r = a (mod 2), s = b (mod 2), from dy[i + (a - r)/2,
 *                    j + (b - s)/2]: four stride-1 convs with 2x2, 2x1, 1x2 and 1x1 kernels over a
 *                    zero-bordered copy of dy, written straight into dx (no col2im, no scatter-add:
 *                    every input pixel belongs to exactly one class); each class is computed on the
 *                    (P + 1) x (Q + 1) grid of that copy, G images side by side, so 7x7 outputs fill the vectors;
 *   backward filter: outer products of dy (transposed, 16 output channels to a vector) and the zero-padded image
 *                    over the output pixels ("backward filter" below).
 * The sums' order is fixed by the shapes alone. The double-precision naive reference lives in the tests
 * (tests/op_cases.c). Measured in docs/studies/2026-12-07-resnet8-fp32b.md.
 */
#include <string.h>

#include "conv2d_impl.h"
#include "short_copy.h"

/* Floats of a group of backward data's bordered dy and four classes: 64 Ki floats = 256 KiB, re-read from L2 by
 * every block of output channels. */
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

/* d[2m] = e[m], d[2m + 1] = f[m] for the n floats of d (=, or += when add). */
static inline __attribute__((always_inline, target("avx512f"))) void
weave_row(float *restrict d, const float *restrict e,
							 const float *restrict f, int n, int add)
{
	const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
	const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
	for (int i = 0; i < n; i += 32) {
		const int m = i / 2, ne = (n - i + 1) / 2, nf = (n - i) / 2; // floats of e and f still wanted
		const __mmask16 me = ne >= 16 ? 0xffff : (__mmask16)((1u << ne) - 1);
		const __mmask16 mf = nf >= 16 ? 0xffff : (__mmask16)((1u << nf) - 1);
		const __m512 ev = _mm512_maskz_loadu_ps(me, e + m), fv = _mm512_maskz_loadu_ps(mf, f + m);
		const int rest = n - i;
		const __mmask16 m0 = rest >= 16 ? 0xffff : (__mmask16)((1u << rest) - 1);
		const __mmask16 m1 = rest >= 32 ? 0xffff : rest <= 16 ? 0 : (__mmask16)((1u << (rest - 16)) - 1);
		__m512 v0 = _mm512_permutex2var_ps(ev, lo, fv), v1 = _mm512_permutex2var_ps(ev, hi, fv);
		if (add) {
			v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, d + i), v0);
			v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, d + i + 16), v1);
		}
		_mm512_mask_storeu_ps(d + i, m0, v0);
		_mm512_mask_storeu_ps(d + i + 16, m1, v1);
	}
}

/* dx (ng, C, H, W) (=|+=) the four classes out (4, C, G, Hd, Wd): padded row hp = h + 1 = 2i + a takes its
 * even x columns from class (a, 1) at j = m, its odd ones from class (a, 0) at j = m + 1. In a training step
 * dx usually accumulates (the shortcut wrote it first) and comes cold from memory: this loop's time is that
 * read (2.5 % of a ResNet-8 step at one worker, perf), not its arithmetic. */
__attribute__((target("avx512f"))) static void s2_weave(float *restrict dx, const float *restrict out, int ng, int C,
							int H, int W, size_t ld, size_t img, int Wd, int add)
{
	for (int i = 0; i < ng; i++)
		for (int c = 0; c < C; c++)
			for (int h = 0; h < H; h++) {
				const int a = (h + 1) % 2, ii = (h + 1) / 2;
				const size_t at = (size_t)c * ld + (size_t)i * img + (size_t)ii * Wd;
				const float *e = out + (size_t)(a * 2 + 1) * C * ld + at; // class (a, 1)
				const float *f = out + (size_t)(a * 2) * C * ld + at + 1;  // class (a, 0), from j = 1
				weave_row(dx + ((size_t)i * C + c) * H * W + (size_t)h * W, e, f, W, add);
			}
}

void dnn_conv_stride2_backward_data(float *dx, const float *dy, const float *w, const conv_geom *g, int accumulate_dx)
{
	// dx (N, C, H, W), dy (N, K, P, Q), w (K, C, 3, 3)
	const int K = g->K, C = g->C, P = g->P, Q = g->Q, H = g->H, W = g->W;
	/* dy with a zero border: dyp (K, G, Hd, Wd), dyp[.., i', j'] = dy[i' - 1, j' - 1], Hd = P + 1, Wd = Q + 1:
	 * each image's zero row 0 is the previous image's bottom border, each row's zero column 0 the previous
	 * row's right border (a tail of zeros after the last). Its pixel grid is the one the four classes are
	 * computed on: class pixel (i, j) reads dyp rows i, i + 1 and columns j, j + 1; the classes need
	 * i <= H/2 <= P and j <= W/2 <= Q. */
	const int Hd = P + 1, Wd = Q + 1;
	const size_t img = (size_t)Hd * Wd, pq = (size_t)P * Q;
	size_t G = S2_GROUP_BUDGET / (((size_t)K + 4 * (size_t)C) * img);
	G = G < 1 ? 1 : G > (size_t)g->N ? (size_t)g->N : G;
	const size_t ld = G * img;
	const size_t tail = (size_t)Wd + 2;
	float *dyp = dnn_conv_scratch((size_t)K * ld + tail + 4 * (size_t)C * ld); // then out (4, C, G, Hd, Wd)
	if (!dyp)
		return;
	float *out = dyp + (size_t)K * ld + tail;
	memset(dyp, 0, ((size_t)K * ld + tail) * sizeof(float)); // the borders stay zero: only the interior is copied
	/* Each class (a, b): its taps and their offsets in dyp. */
	int woff[4][4], nt[4];
	long ioff[4][4];
	for (int a = 0; a < 2; a++)
		for (int b = 0; b < 2; b++) {
			int cl = a * 2 + b, n = 0;
			for (int r = a; r < 3; r += 2)
				for (int t = b; t < 3; t += 2, n++) {
					woff[cl][n] = r * 3 + t;
					ioff[cl][n] = (long)(1 + (a - r) / 2) * Wd + (1 + (b - t) / 2);
				}
			nt[cl] = n;
		}
	for (int n0 = 0; n0 < g->N; n0 += (int)G) {
		const int ng = conv_imin((int)G, g->N - n0);
		for (int i = 0; i < ng; i++)
			for (int k = 0; k < K; k++)
				for (int p = 0; p < P; p++) {
					float *d = dyp + (size_t)k * ld + (size_t)i * img + (size_t)(p + 1) * Wd + 1;
					dnn_copy_floats(d, dy + ((size_t)(n0 + i) * K + k) * pq + (size_t)p * Q, Q);
				}
		for (int cl = 0; cl < 4; cl++)
			dnn_conv_taps_gemm(out + (size_t)cl * C * ld, ld, w, 9, (size_t)C * 9, woff[cl], dyp, ld,
					   ioff[cl], nt[cl], K, C, (long)(ng * img), 0.0f);
		s2_weave(dx + (size_t)n0 * C * H * W, out, ng, C, H, W, ld, img, Wd, accumulate_dx);
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
