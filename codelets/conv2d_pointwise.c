/* conv2d_pointwise.c — direct AVX-512 kernels for 1x1 unpadded convs of stride 1 or 2 (see conv2d_impl.h),
 * and the two register-blocked loops they run on.
 *
 * A 1x1 conv is a GEMM per image on NCHW: y_n (K, PQ) = w (K, C) x_n (C, PQ), x_n subsampled when
 * strided. ResNets' projection shortcuts make tiny ones (K 32/64, inner dimension C 16/32, PQ 49..256
 * columns), where OpenBLAS's sgemm spends much of its time in call overhead and packing; the loops below run
 * them straight from the image (stride 1) or from its subsampled copy (stride 2, forward), and the backward
 * passes of stride 2 over a group of images laid side by side, (K or C, G*PQ), so that 7x7 outputs still
 * fill the 16-float vectors. Which passes run here is conv2d_algo.c's POINTWISE_RULE (measured).
 *
 *   forward:         y_n  (K, PQ)  = w (K, C) xs_n (C, PQ)
 *   backward data:   dxs_n (C, PQ) = w^T dy_n, dx_n (=|+=) dxs_n at the sampled pixels (zero elsewhere)
 *   backward filter: dw (K, C)    += sum over n, in order, of dy_n xs_n^T
 *
 * The two loops (dnn_conv_taps_gemm, dnn_conv_taps_dot) are the only places where these kernels multiply
 * (conv2d_stride2.c has its own: s2f_block, s2d_tile, s2w_block): a bf16 form of them replaces these functions.
 * Every sum has a fixed order: over the input channels and taps in order for each output, over the pixels in
 * 16 lanes reduced by one fixed instruction sequence, then over the groups of images in order; nothing depends
 * on threads or the scheduler.
 * The double-precision naive reference lives in the tests (tests/op_cases.c).
 */
#include <string.h>

#include "conv2d_impl.h"
#include "short_copy.h"

/* Floats of a group's gathered operands (strided backward passes): 64 Ki floats = 256 KiB, a quarter of Zen
 * 5's L2, so that every block of output channels re-reads them from L2. */
#define PW_GROUP_BUDGET (64 * 1024)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

int dnn_conv_avx512_kernels(void)
{
	static int cached = -1;
	if (cached < 0) {
		__builtin_cpu_init();
		cached = __builtin_cpu_supports("avx512f");
	}
	return cached;
}

/* Lanes [0, n) of a 16-float vector, n clamped to [0, 16]. */
static inline __mmask16 lanes(long n) { return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

/* One block of MB output rows x TB vectors of the GEMM below: MB*TB independent FMA chains, each input
 * load serving MB rows. */
static inline __attribute__((always_inline, target("avx512f"))) void
taps_gemm_block(float *out, size_t ldo, const float *w, size_t wsm, size_t wsc, const int *woff, const float *in,
		size_t ldi, const long *ioff, int ntaps, int nc, const __mmask16 *mk, float beta, const int MB,
		const int TB)
{
	__m512 acc[8][3];
	for (int m = 0; m < MB; m++)
		for (int v = 0; v < TB; v++)
			acc[m][v] = _mm512_setzero_ps();
	for (int c = 0; c < nc; c++) {
		const float *ic = in + (size_t)c * ldi, *wc = w + (size_t)c * wsc;
		for (int i = 0; i < ntaps; i++) {
			const float *ip = ic + ioff[i];
			__m512 xv[3];
			for (int v = 0; v < TB; v++)
				xv[v] = _mm512_maskz_loadu_ps(mk[v], ip + 16 * v);
			for (int m = 0; m < MB; m++) {
				const __m512 wv = _mm512_set1_ps(wc[(size_t)m * wsm + woff[i]]);
				for (int v = 0; v < TB; v++)
					acc[m][v] = _mm512_fmadd_ps(wv, xv[v], acc[m][v]);
			}
		}
	}
	for (int m = 0; m < MB; m++)
		for (int v = 0; v < TB; v++) {
			float *o = out + (size_t)m * ldo + 16 * v;
			__m512 r = acc[m][v];
			if (beta != 0.0f)
				r = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mk[v], o), r);
			_mm512_mask_storeu_ps(o, mk[v], r);
		}
}

/* The rows [m0, M) in blocks of 8, then one block of the rest. */
static inline __attribute__((always_inline, target("avx512f"))) void
taps_gemm_rows(float *out, size_t ldo, const float *w, size_t wsm, size_t wsc, const int *woff, const float *in,
	       size_t ldi, const long *ioff, int ntaps, int nc, int M, const __mmask16 *mk, float beta, const int TB)
{
	int m = 0;
	for (; m + 8 <= M; m += 8)
		taps_gemm_block(out + (size_t)m * ldo, ldo, w + (size_t)m * wsm, wsm, wsc, woff, in, ldi, ioff, ntaps,
				nc, mk, beta, 8, TB);
	float *o = out + (size_t)m * ldo;
	const float *wm = w + (size_t)m * wsm;
	switch (M - m) {
#define PW_REST(mb)                                                                                                    \
	case mb:                                                                                                       \
		taps_gemm_block(o, ldo, wm, wsm, wsc, woff, in, ldi, ioff, ntaps, nc, mk, beta, mb, TB);               \
		break;
		PW_REST(1) PW_REST(2) PW_REST(3) PW_REST(4) PW_REST(5) PW_REST(6) PW_REST(7)
#undef PW_REST
	default:
		break;
	}
}

__attribute__((target("avx512f"))) void dnn_conv_taps_gemm(float *out, size_t ldo, const float *w, size_t wsm,
							      size_t wsc, const int *woff, const float *in, size_t ldi,
							      const long *ioff, int ntaps, int nc, int M, long T,
							      float beta)
{
	/* Pixels outermost, 48 at a time: the input slice they read (nc * ntaps rows of 48 floats) stays in L1
	 * while every block of output rows runs over it. */
	long t = 0;
	for (; t + 48 <= T; t += 48) {
		const __mmask16 mk[3] = {0xffff, 0xffff, 0xffff};
		taps_gemm_rows(out + t, ldo, w, wsm, wsc, woff, in + t, ldi, ioff, ntaps, nc, M, mk, beta, 3);
	}
	if (t < T) {
		const long rest = T - t;
		const __mmask16 mk[3] = {lanes(rest), lanes(rest - 16), lanes(rest - 32)};
		if (rest > 32)
			taps_gemm_rows(out + t, ldo, w, wsm, wsc, woff, in + t, ldi, ioff, ntaps, nc, M, mk, beta, 3);
		else if (rest > 16)
			taps_gemm_rows(out + t, ldo, w, wsm, wsc, woff, in + t, ldi, ioff, ntaps, nc, M, mk, beta, 2);
		else
			taps_gemm_rows(out + t, ldo, w, wsm, wsc, woff, in + t, ldi, ioff, ntaps, nc, M, mk, beta, 1);
	}
}

/* MB rows of a x JB of the (channel, tap) rows of the input, over all T pixels; then each of the MB*JB sums
 * of 16 lanes is reduced and added to g. */
static inline __attribute__((always_inline, target("avx512f"))) void
taps_dot_block(float *g, size_t gsm, const float *a, size_t lda, const float *const *b, long T, const int MB,
	       const int JB)
{
	__m512 acc[4][4];
	for (int m = 0; m < MB; m++)
		for (int j = 0; j < JB; j++)
			acc[m][j] = _mm512_setzero_ps();
	for (long t = 0; t < T; t += 16) {
		const __mmask16 mk = lanes(T - t);
		__m512 av[4], bv[4];
		for (int m = 0; m < MB; m++)
			av[m] = _mm512_maskz_loadu_ps(mk, a + (size_t)m * lda + t);
		for (int j = 0; j < JB; j++)
			bv[j] = _mm512_maskz_loadu_ps(mk, b[j] + t);
		for (int m = 0; m < MB; m++)
			for (int j = 0; j < JB; j++)
				acc[m][j] = _mm512_fmadd_ps(av[m], bv[j], acc[m][j]);
	}
	for (int m = 0; m < MB; m++)
		for (int j = 0; j < JB; j++)
			g[(size_t)m * gsm + j] += _mm512_reduce_add_ps(acc[m][j]);
}

__attribute__((target("avx512f"))) void dnn_conv_taps_dot(float *g, const float *a, size_t lda, const float *in,
							     size_t ldi, const long *ioff, int ntaps, int nc, int M,
							     long T)
{
	const int J = nc * ntaps;
	const size_t gsm = (size_t)J;
	for (int j0 = 0; j0 < J; j0 += 4) {
		const int jb = conv_imin(4, J - j0);
		const float *b[4];
		for (int j = 0; j < jb; j++)
			b[j] = in + (size_t)((j0 + j) / ntaps) * ldi + ioff[(j0 + j) % ntaps];
		for (int m0 = 0; m0 < M; m0 += 4) {
			const int mb = conv_imin(4, M - m0);
			float *gm = g + (size_t)m0 * gsm + j0;
			const float *am = a + (size_t)m0 * lda;
			/* Full 4 x 4 blocks, else the exact sizes (each a constant for the compiler). */
			switch (mb * 4 + jb) {
#define PW_DOT(x, y)                                                                                                   \
	case x * 4 + y:                                                                                                \
		taps_dot_block(gm, gsm, am, lda, b, T, x, y);                                                          \
		break;
				PW_DOT(4, 4) PW_DOT(4, 3) PW_DOT(4, 2) PW_DOT(4, 1) PW_DOT(3, 4) PW_DOT(3, 3)
				PW_DOT(3, 2) PW_DOT(3, 1) PW_DOT(2, 4) PW_DOT(2, 3) PW_DOT(2, 2) PW_DOT(2, 1)
				PW_DOT(1, 4) PW_DOT(1, 3) PW_DOT(1, 2) PW_DOT(1, 1)
#undef PW_DOT
			default:
				break;
			}
		}
	}
}

/* d[0..n) = s[2i + off] for i < n, reading s only below len (zeros beyond): the even (off 0) or odd (off 1)
 * pixels of a row, 16 at a time. */
__attribute__((target("avx512f"))) void dnn_conv_deal_row(float *restrict d, const float *restrict s, int off,
							     int len, int n)
{
	const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	const __m512i idx1 = _mm512_add_epi32(idx, _mm512_set1_epi32(1));
	const __m512i ix = off ? idx1 : idx;
	for (int i = 0; i < n; i += 16) {
		const long base = 2L * i;
		const __m512 lo = _mm512_maskz_loadu_ps(lanes(len - base), s + base);
		const __m512 hi = _mm512_maskz_loadu_ps(lanes(len - base - 16), s + base + 16);
		_mm512_mask_storeu_ps(d + i, lanes(n - i), _mm512_permutex2var_ps(lo, ix, hi));
	}
}

/* ------------------------------------------------------------------ 1x1 convs */

int dnn_conv_pointwise_applies(const conv_geom *g)
{
	return conv_is_pointwise(g) && (g->stride == 1 || g->stride == 2) && dnn_conv_avx512_kernels();
}

/* Images per group of a strided 1x1 conv: the gathered input (C, G*PQ) and output (K, G*PQ) within the
 * budget; at least 1. */
static int pw_group(const conv_geom *g)
{
	const size_t per = ((size_t)g->C + g->K) * g->P * g->Q, G = PW_GROUP_BUDGET / per;
	return G < 1 ? 1 : G > (size_t)g->N ? g->N : (int)G;
}

size_t dnn_conv_pointwise_work(const conv_geom *g)
{
	return g->stride == 1 ? 0 : (size_t)g->C * g->P * g->Q;
}

/* xs (C, G*PQ) = images [n0, n0 + ng) of x subsampled at stride 2. */
static void pw_gather(float *restrict xs, const float *restrict x, int n0, int ng, int G, const conv_geom *g)
{
	const size_t pq = (size_t)g->P * g->Q, hw = (size_t)g->H * g->W;
	for (int i = 0; i < ng; i++)
		for (int c = 0; c < g->C; c++) {
			const float *xc = x + ((size_t)(n0 + i) * g->C + c) * hw;
			float *d = xs + (size_t)c * G * pq + (size_t)i * pq;
			for (int p = 0; p < g->P; p++)
				dnn_conv_deal_row(d + (size_t)p * g->Q, xc + (size_t)p * 2 * g->W, 0, g->W, g->Q);
		}
}

/* ys (K, G*PQ) = images [n0, n0 + ng) of y (N, K, PQ), side by side. */
static void pw_gather_plain(float *restrict ys, const float *restrict y, int n0, int ng, int G, int K, size_t pq)
{
	for (int i = 0; i < ng; i++)
		for (int k = 0; k < K; k++)
			dnn_copy_floats(ys + (size_t)k * G * pq + (size_t)i * pq, y + ((size_t)(n0 + i) * K + k) * pq,
					(long)pq);
}

void dnn_conv_pointwise_forward(float *y, const float *x, const float *w, const conv_geom *g, float beta, float *work)
{
	// y (N, K, P, Q), x (N, C, H, W), w (K, C)
	const int K = g->K, C = g->C;
	const size_t pq = (size_t)g->P * g->Q, chw = (size_t)C * g->H * g->W;
	const int woff = 0;
	const long ioff = 0;
	if (g->stride == 1) {
		for (int n = 0; n < g->N; n++)
			dnn_conv_taps_gemm(y + (size_t)n * K * pq, pq, w, C, 1, &woff, x + n * chw, pq, &ioff, 1, C, K,
					   (long)pq, beta);
		return;
	}
	/* The subsampled image, then its GEMM straight into y: no output copy (measured faster than one GEMM over
	 * a group of images side by side and its copy back). */
	for (int n = 0; n < g->N; n++) {
		pw_gather(work, x, n, 1, 1, g);
		dnn_conv_taps_gemm(y + (size_t)n * K * pq, pq, w, C, 1, &woff, work, pq, &ioff, 1, C, K, (long)pq,
				   beta);
	}
}

void dnn_conv_pointwise_backward_data(float *dx, const float *dy, const float *w, const conv_geom *g,
				      int accumulate_dx)
{
	// dx (N, C, H, W), dy (N, K, P, Q), w (K, C): dxs_n (C, PQ) = w^T dy_n
	const int K = g->K, C = g->C;
	const size_t pq = (size_t)g->P * g->Q, chw = (size_t)C * g->H * g->W;
	const int woff = 0;
	const long ioff = 0;
	if (g->stride == 1) {
		for (int n = 0; n < g->N; n++)
			dnn_conv_taps_gemm(dx + n * chw, pq, w, 1, C, &woff, dy + (size_t)n * K * pq, pq, &ioff, 1, K,
					   C, (long)pq, accumulate_dx ? 1.0f : 0.0f);
		return;
	}
	const int G = pw_group(g);
	const size_t ld = (size_t)G * pq;
	float *dys = dnn_conv_scratch(((size_t)K + C) * ld); // (K, G*PQ), then (C, G*PQ)
	if (!dys)
		return;
	float *out = dys + (size_t)K * ld;
	const int st = g->stride;
	for (int n0 = 0; n0 < g->N; n0 += G) {
		const int ng = conv_imin(G, g->N - n0);
		pw_gather_plain(dys, dy, n0, ng, G, K, pq);
		dnn_conv_taps_gemm(out, ld, w, 1, C, &woff, dys, ld, &ioff, 1, K, C, (long)(ng * pq), 0.0f);
		for (int i = 0; i < ng; i++)
			for (int c = 0; c < C; c++) {
				float *dxc = dx + (size_t)(n0 + i) * chw + (size_t)c * g->H * g->W;
				const float *s = out + (size_t)c * ld + (size_t)i * pq;
				if (!accumulate_dx)
					memset(dxc, 0, (size_t)g->H * g->W * sizeof(float));
				for (int p = 0; p < g->P; p++) {
					float *row = dxc + (size_t)p * st * g->W;
					const float *sp = s + (size_t)p * g->Q;
					for (int q = 0; q < g->Q; q++)
						row[q * st] += sp[q];
				}
			}
	}
}

void dnn_conv_pointwise_backward_filter(float *dw, const float *x, const float *dy, const conv_geom *g)
{
	// dw (K, C) +=, x (N, C, H, W), dy (N, K, P, Q)
	const int K = g->K, C = g->C;
	const size_t pq = (size_t)g->P * g->Q, chw = (size_t)C * g->H * g->W;
	const long ioff = 0;
	if (g->stride == 1) {
		for (int n = 0; n < g->N; n++)
			dnn_conv_taps_dot(dw, dy + (size_t)n * K * pq, pq, x + n * chw, pq, &ioff, 1, C, K, (long)pq);
		return;
	}
	const int G = pw_group(g);
	const size_t ld = (size_t)G * pq;
	float *xs = dnn_conv_scratch(((size_t)K + C) * ld); // (C, G*PQ), then dy's (K, G*PQ)
	if (!xs)
		return;
	float *dys = xs + (size_t)C * ld;
	for (int n0 = 0; n0 < g->N; n0 += G) {
		const int ng = conv_imin(G, g->N - n0);
		pw_gather(xs, x, n0, ng, G, g);
		pw_gather_plain(dys, dy, n0, ng, G, K, pq);
		dnn_conv_taps_dot(dw, dys, ld, xs, ld, &ioff, 1, C, K, (long)(ng * pq));
	}
}

#else /* not x86-64 GCC/Clang: the im2col path runs every conv */

int dnn_conv_avx512_kernels(void) { return 0; }
int dnn_conv_pointwise_applies(const conv_geom *g)
{
	(void)g;
	return 0;
}
size_t dnn_conv_pointwise_work(const conv_geom *g) { return dnn_conv_im2col_forward_work(g); }
void dnn_conv_pointwise_forward(float *y, const float *x, const float *w, const conv_geom *g, float beta, float *work)
{
	dnn_conv_im2col_forward(y, x, w, g, beta, work);
}
void dnn_conv_pointwise_backward_data(float *dx, const float *dy, const float *w, const conv_geom *g,
				      int accumulate_dx)
{
	dnn_conv_im2col_backward_data(dx, dy, w, g, accumulate_dx);
}
void dnn_conv_pointwise_backward_filter(float *dw, const float *x, const float *dy, const conv_geom *g)
{
	dnn_conv_im2col_backward_filter(dw, x, dy, g);
}
#endif
