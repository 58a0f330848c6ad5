/* conv2d.c — 2-D convolution (NCHW, groups=1): CPU kernels, codelets, insert helpers.
 *
 * CPU kernels: im2col + single-threaded OpenBLAS sgemm.
 *   forward:         y[n]  (K, PQ)   = w (K, CRS) @ col[n] (CRS, PQ)
 *   backward data:   dcol  (CRS, PQ) = w^T @ dy[n],  dx[n] += col2im(dcol)
 *   backward filter: dw    (K, CRS) += dy[n] @ col[n]^T   (computed as dw^T = col[n] @ dy[n]^T)
 * What makes them fast (measured with bench/op_bench.c, see docs/op_bench.md):
 *   - im2col reads a zero-padded copy of the image split into stride phases (conv_plan), so it
 *     only copies runs of Q floats, with no bounds checks;
 *   - the GEMMs work on blocks whose column buffer stays in L2: tiles of whole output rows of
 *     one image (written straight into y / read straight from dy), or several whole images when
 *     one image is small (the 8x8 stage of CIFAR nets), through a (K, G*P*Q) buffer;
 *   - stride-1 backward data runs as a forward conv of dy with the flipped, transposed kernel:
 *     a GEMM with inner dimension K*R*S instead of K, and no col2im;
 *   - 1x1 unpadded convs need no im2col: x[n], subsampled when strided, is the column matrix;
 *   - stride-1 convs with few channels (C*K <= 128, rows <= 32: LeNet-5's) skip im2col and GEMM
 *     on AVX2+FMA CPUs: register-blocked direct loops over a padded image ("direct path");
 *   - 3x3 stride-1 undilated convs run as Winograd F(2x2, 3x3) where that measured faster
 *     (codelets/conv2d_winograd.c; the choice, DNN_CONV_ALGO, under "Winograd dispatch").
 * The double-precision naive reference lives in the tests (tests/unit_conv2d.c).
 */
#include "conv2d.h"
#include "bias.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv2d_winograd.h"
#include "dnn_codelet.h"

#ifdef DNN_HAVE_CUDA
/* Defined in conv2d.cu. */
void dnn_conv2d_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_conv2d_bwd_data_cuda(void *buffers[], void *cl_arg);
void dnn_conv2d_bwd_filter_cuda(void *buffers[], void *cl_arg);
#endif

/* ------------------------------------------------------------------ shapes */

int dnn_conv2d_args_finish(dnn_conv2d_args *a)
{
	if (a->N < 1 || a->C < 1 || a->H < 1 || a->W < 1 || a->K < 1 || a->R < 1 || a->S < 1 ||
	    a->stride < 1 || a->pad < 0 || a->dilation < 1 ||
	    (a->accumulate_dx != 0 && a->accumulate_dx != 1))
		return -1;
	long long eh = (long long)a->H + 2LL * a->pad - (long long)a->dilation * (a->R - 1) - 1;
	long long ew = (long long)a->W + 2LL * a->pad - (long long)a->dilation * (a->S - 1) - 1;
	if (eh < 0 || ew < 0)
		return -1;
	a->P = (int)(eh / a->stride + 1);
	a->Q = (int)(ew / a->stride + 1);
	return 0;
}

double dnn_conv2d_flops_fwd(const dnn_conv2d_args *a)
{
	return 2.0 * a->N * a->K * a->P * a->Q * (double)a->C * a->R * a->S;
}

static size_t x_count(const dnn_conv2d_args *a) { return (size_t)a->N * a->C * a->H * a->W; }
static size_t w_count(const dnn_conv2d_args *a) { return (size_t)a->K * a->C * a->R * a->S; }
static size_t y_count(const dnn_conv2d_args *a) { return (size_t)a->N * a->K * a->P * a->Q; }

/* ------------------------------------------------------------------ geometry and plan */

/* The kernels' view of a conv: like dnn_conv2d_args but with separate row/column padding, which
 * the transposed conv of the backward-data pass needs (its padding is dilation*(R-1) - pad
 * vertically and dilation*(S-1) - pad horizontally, possibly negative, i.e. a crop). */
typedef struct {
	int N, C, H, W; // input (N, C, H, W)
	int K, R, S;    // weights (K, C, R, S)
	int P, Q;       // output (N, K, P, Q)
	int stride, dil, pad_h, pad_w;
} conv_geom;

static conv_geom geom_of(const dnn_conv2d_args *a)
{
	conv_geom g = {.N = a->N, .C = a->C, .H = a->H, .W = a->W, .K = a->K, .R = a->R, .S = a->S,
		       .P = a->P, .Q = a->Q, .stride = a->stride, .dil = a->dilation, .pad_h = a->pad,
		       .pad_w = a->pad};
	return g;
}

/* 1x1 without padding: the column matrix is the input image, subsampled when stride > 1. */
static int is_pointwise(const conv_geom *g)
{
	return g->R == 1 && g->S == 1 && g->pad_h == 0 && g->pad_w == 0;
}

/* Floats of column buffer per block: 64 Ki floats = 256 KiB, half of a typical L2. */
#define CONV_COL_BUDGET (64 * 1024)
/* GEMMs narrower than this many columns lose efficiency; a block is at least this wide. */
#define CONV_MIN_COLS 256
/* Backward data of a stride-1 conv runs as a forward conv from this many input channels on. */
#define CONV_FLIP_MIN_C 16

/* How the kernels lay out one conv.
 *
 * Stride phases: the zero-padded input image (C, H + 2 pad_h, W + 2 pad_w) is split into
 * stride*stride phases, phase (a, b) holding its pixels (i*stride + a, j*stride + b) as a
 * (C, Hc, Wc) array. Tap (r, s) of output pixel (p, q) then reads pixel (p + r*dil/stride,
 * q + s*dil/stride) of phase ((r*dil) % stride, (s*dil) % stride): a stride-1 access with no
 * bounds to check, so im2col copies runs of Q floats. For stride 1 the single phase is just
 * the padded image.
 *
 * Blocks: the GEMMs work on blocks of output pixels, whole output rows of one image, or whole
 * images when one image has fewer pixels than a good block. */
typedef struct {
	int Hc, Wc;   // size of one phase: ceil((H + 2 pad_h) / stride), likewise for W
	size_t phase; // floats of one phase: C*Hc*Wc
	size_t image; // floats of all stride*stride phases of one image
	int group;    // images per block (> 1 when a whole image is smaller than a block)
	int rows;     // output rows per block (P when group > 1)
	size_t cols;  // columns of the largest block: group * rows * Q
} conv_plan;

static int imin(int a, int b) { return a < b ? a : b; }

static conv_plan plan_make(const conv_geom *g)
{
	conv_plan pl;
	int st = g->stride;
	pl.Hc = (g->H + 2 * g->pad_h + st - 1) / st;
	pl.Wc = (g->W + 2 * g->pad_w + st - 1) / st;
	pl.phase = (size_t)g->C * pl.Hc * pl.Wc;
	pl.image = (size_t)st * st * pl.phase;

	size_t crs = (size_t)g->C * g->R * g->S, pq = (size_t)g->P * g->Q;
	size_t target = CONV_COL_BUDGET / crs;
	if (target < CONV_MIN_COLS)
		target = CONV_MIN_COLS;
	/* Blocks of equal size: no thin last block. */
	if (pq >= target) {
		int rows = (int)(target / (size_t)g->Q);
		rows = rows < 1 ? 1 : imin(rows, g->P);
		int nblocks = (g->P + rows - 1) / rows;
		pl.group = 1;
		pl.rows = (g->P + nblocks - 1) / nblocks;
	} else {
		int group = imin((int)(target / pq), g->N);
		int nblocks = (g->N + group - 1) / group;
		pl.group = (g->N + nblocks - 1) / nblocks;
		pl.rows = g->P;
	}
	pl.cols = (size_t)pl.group * pl.rows * g->Q;
	return pl;
}

static float *conv_scratch(size_t nfloats)
{
	float *p = dnn_cpu_scratch(nfloats);
	if (!p && nfloats > 0) {
		fprintf(stderr, "%s:%d: conv2d: out of memory for %zu floats of scratch\n", __FILE__,
			__LINE__, nfloats);
		abort();
	}
	return p;
}

/* ------------------------------------------------------------------ data movement */

/* Range [*lo, *hi) of outputs o in [0, n) whose input o*stride + off lies in [0, len). */
static void valid_range(int *lo, int *hi, int off, int stride, int len, int n)
{
	int l = off >= 0 ? 0 : (-off + stride - 1) / stride;
	int h = len - off <= 0 ? 0 : (len - off + stride - 1) / stride;
	l = imin(l, n);
	h = imin(h, n);
	*lo = l;
	*hi = h < l ? l : h;
}

/* Whether some tap of a kernel of n taps, dilation dil, reads stride phase a. */
static int phase_used(int a, int n, int dil, int stride)
{
	for (int r = 0; r < n; r++)
		if (r * dil % stride == a)
			return 1;
	return 0;
}

/* x (C, H, W) -> its padded stride phases ph (stride, stride, C, Hc, Wc); only the phases that
 * some tap reads are written. row: stride*Wc floats of scratch. */
static void build_phases(float *restrict ph, float *restrict row, const float *restrict x,
			 const conv_geom *g, const conv_plan *pl)
{
	const int st = g->stride, H = g->H, W = g->W, Hc = pl->Hc, Wc = pl->Wc;
	/* Columns [jlo, jhi) of a padded row of st*Wc floats lie inside the image. */
	const int jlo = g->pad_w > 0 ? g->pad_w : 0, jhi = imin(g->pad_w + W, st * Wc);
	const int both = st == 2 && phase_used(0, g->S, g->dil, 2) && phase_used(1, g->S, g->dil, 2);
	for (int a = 0; a < st; a++) {
		if (!phase_used(a, g->R, g->dil, st))
			continue;
		int roff = a - g->pad_h, ilo, ihi; // phase row i holds input row i*st + roff
		valid_range(&ilo, &ihi, roff, st, H, Hc);
		float *pa = ph + (size_t)a * st * pl->phase; // phase (a, 0)
		for (int c = 0; c < g->C; c++) {
			size_t cbase = (size_t)c * Hc * Wc;
			for (int b = 0; b < st; b++) {
				if (!phase_used(b, g->S, g->dil, st))
					continue;
				float *d = pa + b * pl->phase + cbase;
				memset(d, 0, (size_t)ilo * Wc * sizeof(float));
				memset(d + (size_t)ihi * Wc, 0, (size_t)(Hc - ihi) * Wc * sizeof(float));
			}
			for (int i = ilo; i < ihi; i++) {
				const float *xrow = x + ((size_t)c * H + i * st + roff) * W;
				float *d0 = pa + cbase + (size_t)i * Wc;
				if (st == 1) {
					memset(d0, 0, (size_t)jlo * sizeof(float));
					memcpy(d0 + jlo, xrow + jlo - g->pad_w, (size_t)(jhi - jlo) * sizeof(float));
					memset(d0 + jhi, 0, (size_t)(Wc - jhi) * sizeof(float));
					continue;
				}
				/* Pad the row, then deal its columns out to the phases. */
				memset(row, 0, (size_t)jlo * sizeof(float));
				memcpy(row + jlo, xrow + jlo - g->pad_w, (size_t)(jhi - jlo) * sizeof(float));
				memset(row + jhi, 0, (size_t)(st * Wc - jhi) * sizeof(float));
				if (both) {
					float *d1 = d0 + pl->phase;
					for (int j = 0; j < Wc; j++) {
						d0[j] = row[2 * j];
						d1[j] = row[2 * j + 1];
					}
					continue;
				}
				for (int b = 0; b < st; b++) {
					if (!phase_used(b, g->S, g->dil, st))
						continue;
					float *d = d0 + b * pl->phase;
					for (int j = 0; j < Wc; j++)
						d[j] = row[j * st + b];
				}
			}
		}
	}
}

/* The adjoint of build_phases: dx (C, H, W) += the entries of dph that are input pixels. */
static void scatter_phases(float *restrict dx, const float *restrict dph, const conv_geom *g,
			   const conv_plan *pl)
{
	const int st = g->stride, H = g->H, W = g->W, Hc = pl->Hc, Wc = pl->Wc;
	for (int a = 0; a < st; a++) {
		if (!phase_used(a, g->R, g->dil, st))
			continue;
		int roff = a - g->pad_h, ilo, ihi;
		valid_range(&ilo, &ihi, roff, st, H, Hc);
		for (int b = 0; b < st; b++) {
			if (!phase_used(b, g->S, g->dil, st))
				continue;
			int coff = b - g->pad_w, jlo, jhi; // phase column j holds input column j*st + coff
			valid_range(&jlo, &jhi, coff, st, W, Wc);
			const float *src = dph + (size_t)(a * st + b) * pl->phase;
			for (int c = 0; c < g->C; c++) {
				const float *s = src + (size_t)c * Hc * Wc;
				float *dxc = dx + (size_t)c * H * W;
				for (int i = ilo; i < ihi; i++) {
					const float *si = s + (size_t)i * Wc;
					float *dxrow = dxc + (size_t)(i * st + roff) * W;
					if (st == 1) {
						float *d = dxrow + jlo + coff;
						const float *sj = si + jlo;
						for (int j = 0; j < jhi - jlo; j++)
							d[j] += sj[j];
					} else {
						for (int j = jlo; j < jhi; j++)
							dxrow[j * st + coff] += si[j];
					}
				}
			}
		}
	}
}

/* Offset in the phases of what tap (c, r, s) reads for output pixel (p, 0). */
static size_t tap_offset(int c, int r, int s, int p, const conv_geom *g, const conv_plan *pl)
{
	int rd = r * g->dil, sd = s * g->dil, st = g->stride;
	return (size_t)((rd % st) * st + sd % st) * pl->phase + (size_t)c * pl->Hc * pl->Wc +
	       (size_t)(p + rd / st) * pl->Wc + (size_t)(sd / st);
}

/* d[0..n) = s[0..n) for the short runs of im2col, in 8-float moves that the compiler inlines
 * (a libc memcpy call per run costs as much as the copy). */
static inline void copy_floats(float *restrict d, const float *restrict s, int n)
{
	int i = 0;
	for (; i + 8 <= n; i += 8)
		memcpy(d + i, s + i, 8 * sizeof(float));
	for (; i < n; i++)
		d[i] = s[i];
}

/* im2col of output rows [p0, p1) of one image from its phases: col (C*R*S, ldcol). */
static void phases_to_col(float *restrict col, size_t ldcol, const float *restrict ph, int p0,
			  int p1, const conv_geom *g, const conv_plan *pl)
{
	const int Q = g->Q, Wc = pl->Wc;
	float *dst = col;
	for (int c = 0; c < g->C; c++)
		for (int r = 0; r < g->R; r++)
			for (int s = 0; s < g->S; s++, dst += ldcol) {
				const float *src = ph + tap_offset(c, r, s, p0, g, pl);
				for (int p = 0; p < p1 - p0; p++)
					copy_floats(dst + (size_t)p * Q, src + (size_t)p * Wc, Q);
			}
}

/* The adjoint of phases_to_col: dph += the columns. */
static void col_to_phases(float *restrict dph, const float *restrict col, size_t ldcol, int p0,
			  int p1, const conv_geom *g, const conv_plan *pl)
{
	const int Q = g->Q, Wc = pl->Wc;
	const float *src = col;
	for (int c = 0; c < g->C; c++)
		for (int r = 0; r < g->R; r++)
			for (int s = 0; s < g->S; s++, src += ldcol) {
				float *dst = dph + tap_offset(c, r, s, p0, g, pl);
				for (int p = 0; p < p1 - p0; p++) {
					float *d = dst + (size_t)p * Wc;
					const float *sp = src + (size_t)p * Q;
					for (int q = 0; q < Q; q++)
						d[q] += sp[q];
				}
			}
}

/* (G, K, PQ) <-> (K, G*PQ): images side by side as GEMM columns. */
static void gather_images(float *restrict dst, const float *restrict src, int G, int K, size_t pq)
{
	for (int i = 0; i < G; i++)
		for (int k = 0; k < K; k++)
			memcpy(dst + (size_t)k * G * pq + (size_t)i * pq, src + ((size_t)i * K + k) * pq,
			       pq * sizeof(float));
}

static void scatter_images(float *restrict dst, const float *restrict src, int G, int K, size_t pq,
			   int add)
{
	for (int i = 0; i < G; i++)
		for (int k = 0; k < K; k++) {
			float *d = dst + ((size_t)i * K + k) * pq;
			const float *s = src + (size_t)k * G * pq + (size_t)i * pq;
			if (add) {
				for (size_t j = 0; j < pq; j++)
					d[j] += s[j];
			} else {
				memcpy(d, s, pq * sizeof(float));
			}
		}
}

/* xs (C, P, Q) = x (C, H, W) at rows p*stride, columns q*stride (1x1 unpadded convs). */
static void subsample(float *restrict xs, const float *restrict x, const conv_geom *g)
{
	const int st = g->stride;
	for (int c = 0; c < g->C; c++)
		for (int p = 0; p < g->P; p++) {
			const float *xrow = x + ((size_t)c * g->H + (size_t)p * st) * g->W;
			float *d = xs + ((size_t)c * g->P + p) * g->Q;
			for (int q = 0; q < g->Q; q++)
				d[q] = xrow[q * st];
		}
}

/* The adjoint of subsample: dx (C, H, W) += dxs at the sampled pixels. */
static void subsample_add_back(float *restrict dx, const float *restrict dxs, const conv_geom *g)
{
	const int st = g->stride;
	for (int c = 0; c < g->C; c++)
		for (int p = 0; p < g->P; p++) {
			float *dxrow = dx + ((size_t)c * g->H + (size_t)p * st) * g->W;
			const float *s = dxs + ((size_t)c * g->P + p) * g->Q;
			for (int q = 0; q < g->Q; q++)
				dxrow[q * st] += s[q];
		}
}

/* ------------------------------------------------------------------ CPU kernels */

/* The kernels below walk blocks of images [n0, n0 + ng) and output rows [p0, p1), with ng == 1
 * or [p0, p1) == [0, P). A one-image block's GEMM reads dy / writes y in place (ld = P*Q); a
 * several-image block goes through a (K, ng*P*Q) buffer. */

/* ------------------------------------------------------------------ direct path (AVX2)
 *
 * Convolutions with few channels (LeNet-5's 1->6 and 6->16, 5x5) make GEMMs with 6 or 16 rows,
 * where OpenBLAS spends more time packing than multiplying and im2col copies every pixel R*S
 * times. For stride 1, no dilation, C*K <= DIRECT_MAX_CK and output rows of at most 32 floats,
 * on a CPU with AVX2+FMA, the kernels below run straight from a zero-padded copy of the image:
 * an output row is held in up to four 8-float registers while the C*R*S taps are added into it
 * (forward only: backward data and weight gradients measured slower this way at LeNet-5's
 * shapes, so they stay GEMMs; backward data of a stride-1 conv with C >= 16 runs as a forward
 * conv and so may take this path). */
#define DIRECT_MAX_CK 128
#define DIRECT_MAX_S 8

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DNN_CONV_DIRECT 1

static int cpu_has_avx2_fma(void)
{
	static int cached = -1;
	if (cached < 0) {
		__builtin_cpu_init();
		cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	}
	return cached;
}

static int use_direct(const conv_geom *g)
{
	return g->stride == 1 && g->dil == 1 && g->pad_h >= 0 && g->pad_w >= 0 && g->R * g->S > 1 &&
	       g->S <= DIRECT_MAX_S && (long)g->C * g->K <= DIRECT_MAX_CK && g->Q <= 32 && cpu_has_avx2_fma();
}

/* Row stride of the padded copy: room for ceil(Q/8) 8-float loads at every tap offset. */
static int direct_ld(const conv_geom *g)
{
	int wp = g->W + 2 * g->pad_w, need = (g->Q + 7) / 8 * 8 + g->S - 1;
	return wp > need ? wp : need;
}

static size_t direct_work(const conv_geom *g)
{
	return (size_t)g->C * (g->H + 2 * g->pad_h) * direct_ld(g);
}

/* x (C, H, W) -> xp (C, H + 2 pad_h, ld), zeros around (and right of) the image. */
static void pad_image(float *restrict xp, const float *restrict x, const conv_geom *g, int ld)
{
	const int Hp = g->H + 2 * g->pad_h;
	memset(xp, 0, (size_t)g->C * Hp * ld * sizeof(float));
	for (int c = 0; c < g->C; c++)
		for (int i = 0; i < g->H; i++)
			memcpy(xp + ((size_t)c * Hp + i + g->pad_h) * ld + g->pad_w,
			       x + ((size_t)c * g->H + i) * g->W, (size_t)g->W * sizeof(float));
}

/* Output row p of KB consecutive output channels, each in NV 8-float registers (KB*NV
 * independent FMA chains hide the FMA latency; each input load serves the KB channels):
 * out[kb*32 ..] = sum over c, r, s of w[k0 + kb, c, r, s] * xp[c, p + r, s ..]. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
direct_rows(float *out, const float *xp, const float *wk, size_t wstride, int C, int R, int S, int Hp, int ld,
	    int p, const int NV, const int KB)
{
	__m256 a[4][4];
	for (int kb = 0; kb < KB; kb++)
		for (int v = 0; v < NV; v++)
			a[kb][v] = _mm256_setzero_ps();
	for (int c = 0; c < C; c++)
		for (int r = 0; r < R; r++) {
			const float *row = xp + ((size_t)c * Hp + p + r) * ld;
			const float *wr = wk + ((size_t)c * R + r) * S;
			for (int t = 0; t < S; t++) {
				__m256 xv[4];
				for (int v = 0; v < NV; v++)
					xv[v] = _mm256_loadu_ps(row + t + 8 * v);
				for (int kb = 0; kb < KB; kb++) {
					const __m256 b = _mm256_broadcast_ss(wr + kb * wstride + t);
					for (int v = 0; v < NV; v++)
						a[kb][v] = _mm256_fmadd_ps(b, xv[v], a[kb][v]);
				}
			}
		}
	for (int kb = 0; kb < KB; kb++)
		for (int v = 0; v < NV; v++)
			_mm256_storeu_ps(out + kb * 32 + 8 * v, a[kb][v]);
}

/* y (N, K, P, Q) = conv(x, w) (beta 0) or y += conv(x, w) (beta 1); work: direct_work(g). */
__attribute__((target("avx2,fma"))) static void direct_forward(float *y, const float *x, const float *w,
							      const conv_geom *g, float beta, float *xp)
{
	const int C = g->C, K = g->K, R = g->R, S = g->S, P = g->P, Q = g->Q;
	const int Hp = g->H + 2 * g->pad_h, ld = direct_ld(g), nv = (Q + 7) / 8;
	const size_t ws = (size_t)C * R * S;
	const int KB = nv >= 3 ? 2 : 4; // at most 8 accumulators
	float out[4 * 32];
	for (int n = 0; n < g->N; n++) {
		pad_image(xp, x + (size_t)n * C * g->H * g->W, g, ld);
		for (int k0 = 0; k0 < K;) {
			const int kb = K - k0 >= KB ? KB : 1;
			const float *wk = w + (size_t)k0 * ws;
			for (int p = 0; p < P; p++) {
#define DIRECT_CASE(NV_)                                                                          \
	case NV_:                                                                                  \
		if (kb > 1)                                                                        \
			direct_rows(out, xp, wk, ws, C, R, S, Hp, ld, p, NV_, NV_ >= 3 ? 2 : 4);     \
		else                                                                               \
			direct_rows(out, xp, wk, ws, C, R, S, Hp, ld, p, NV_, 1);                     \
		break
				switch (nv) {
					DIRECT_CASE(1);
					DIRECT_CASE(2);
					DIRECT_CASE(3);
				default:
					DIRECT_CASE(4);
				}
#undef DIRECT_CASE
				for (int i = 0; i < kb; i++) {
					float *yr = y + (((size_t)n * K + k0 + i) * P + p) * Q;
					if (beta != 0.0f) // y += conv: the old y added last, as y0 + conv
						for (int q = 0; q < Q; q++)
							yr[q] += out[i * 32 + q];
					else
						memcpy(yr, out + i * 32, (size_t)Q * sizeof(float));
				}
			}
			k0 += kb;
		}
	}
}

#else
static int use_direct(const conv_geom *g)
{
	(void)g;
	return 0;
}
static size_t direct_work(const conv_geom *g)
{
	(void)g;
	return 0;
}
static void direct_forward(float *y, const float *x, const float *w, const conv_geom *g, float beta, float *xp)
{
	(void)y, (void)x, (void)w, (void)g, (void)beta, (void)xp;
	abort();
}
#endif

/* ------------------------------------------------------------------ Winograd dispatch
 *
 * 3x3, stride-1, undilated convs may run as Winograd F(2x2, 3x3) (codelets/conv2d_winograd.c):
 * forward, and backward data through its forward conv with the flipped kernel. Which one runs
 * is dnn_conv2d_set_cpu_algo()'s choice, else the environment's DNN_CONV_ALGO (im2col,
 * winograd or auto, read once), else auto: WINO_RULE below. */
/* Auto rule, from forward-pass timings of 16 images, one core, im2col time / Winograd time
 * (same run, best of 15-40 calls, thread CPU clock; the ratios moved by ~10% between runs):
 *   ResNet stages  C16 32x32 K16: 2.0   C32 16x16 K32: 1.9   C64 8x8 K64: 1.4 (backward data
 *                  1.9, 2.2, 1.3);
 *   other shapes   C8 K16 32x32: 1.5   C16 K8: 1.4   C16 16x16 K16: 1.8   C64 K4 32x32: 2.0
 *                  C8 K64: 1.2   C64 2x2 K64: 1.07   C128 4x4 K128: 1.15   C128 8x8/16x16 K128:
 *                  1.3/1.6   C64 8x8 K256: 1.4;
 *   not faster     C3/C4 32x32 K64: 0.9-1.1   C256 8x8 K256: 1.07   and where the direct path
 *                  runs (C*K <= 128, e.g. C8 K8 16x16: 0.85, the C3 K16 stem: 1.08).
 * So: Winograd from 8 to 128 input channels, unless the direct path takes the conv. */
#define WINO_RULE(g) (!use_direct(g) && (g)->C >= 8 && (g)->C <= 128)

/* The weight gradient has its own rule (16 images, same method): C16 32x32 K16: 1.66
 * C32 16x16 K32: 1.34-1.46  C64 8x8 K64: 1.1-1.2  C8 32x32 K16: 1.39  C8 16x16 K8: 1.44-1.67
 * C128 8x8 K64: 1.12  C3 32x32 K16 (the CIFAR stem): 1.23-1.29; but C64 8x8 K128 0.91,
 * C64 16x16 K128 0.94, C128 8x8 K128 0.96, C3 32x32 K64 0.88-0.95, C1 28x28 K8 0.70-0.83.
 * So: 3 <= C <= 128, K <= 64 and K <= 8 C. */
#define WINO_FILTER_RULE(g) ((g)->C >= 3 && (g)->C <= 128 && (g)->K <= 64 && (g)->K <= 8 * (g)->C)

static int algo_set = -1; // dnn_conv_algo once chosen

dnn_conv_algo dnn_conv2d_cpu_algo(void)
{
	int a = __atomic_load_n(&algo_set, __ATOMIC_RELAXED);
	if (a >= 0)
		return (dnn_conv_algo)a;
	a = DNN_CONV_ALGO_AUTO;
	const char *env = getenv("DNN_CONV_ALGO");
	if (env && strcmp(env, "im2col") == 0)
		a = DNN_CONV_ALGO_IM2COL;
	else if (env && strcmp(env, "winograd") == 0)
		a = DNN_CONV_ALGO_WINOGRAD;
	else if (env && *env && strcmp(env, "auto") != 0)
		fprintf(stderr, "conv2d: DNN_CONV_ALGO=%s is not im2col, winograd or auto; using auto\n", env);
	int expected = -1;
	__atomic_compare_exchange_n(&algo_set, &expected, a, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	return (dnn_conv_algo)__atomic_load_n(&algo_set, __ATOMIC_RELAXED);
}

void dnn_conv2d_set_cpu_algo(dnn_conv_algo algo)
{
	__atomic_store_n(&algo_set, (int)algo, __ATOMIC_RELAXED);
}

static dnn_wino_shape wino_shape(const conv_geom *g)
{
	dnn_wino_shape s = {.N = g->N, .C = g->C, .H = g->H, .W = g->W, .K = g->K, .P = g->P,
			    .Q = g->Q, .pad_h = g->pad_h, .pad_w = g->pad_w};
	return s;
}

/* Whether the conv runs as Winograd, given the auto rule's verdict for it. */
static int winograd_choice(const conv_geom *g, int rule)
{
	if (!(g->R == 3 && g->S == 3 && g->stride == 1 && g->dil == 1 && g->pad_h >= 0 &&
	      g->pad_w >= 0 && dnn_wino_supported()))
		return 0;
	switch (dnn_conv2d_cpu_algo()) {
	case DNN_CONV_ALGO_IM2COL:
		return 0;
	case DNN_CONV_ALGO_WINOGRAD:
		return 1;
	default:
		return rule;
	}
}

static int use_winograd(const conv_geom *g) { return winograd_choice(g, WINO_RULE(g)); }

static int use_winograd_filter(const conv_geom *g) { return winograd_choice(g, WINO_FILTER_RULE(g)); }

/* Floats of scratch that conv_forward needs. */
static size_t forward_work(const conv_geom *g)
{
	if (use_winograd(g)) {
		dnn_wino_shape s = wino_shape(g);
		return dnn_wino_work(&s);
	}
	if (use_direct(g))
		return direct_work(g);
	if (is_pointwise(g))
		return g->stride > 1 ? (size_t)g->C * g->P * g->Q : 0;
	conv_plan pl = plan_make(g);
	return pl.group * pl.image + ((size_t)g->C * g->R * g->S + g->K) * pl.cols +
	       (size_t)g->stride * pl.Wc;
}

/* y = conv(x, w) (beta = 0) or y += conv(x, w) (beta = 1); work: forward_work(g) floats. */
static void conv_forward(float *y, const float *x, const float *w, const conv_geom *g, float beta,
			 float *work)
{
	// y (N, K, P, Q), x (N, C, H, W), w (K, C, R, S) = (K, CRS)
	const int K = g->K, crs = g->C * g->R * g->S;
	const size_t pq = (size_t)g->P * g->Q, chw = (size_t)g->C * g->H * g->W;
	if (use_winograd(g)) {
		dnn_wino_shape s = wino_shape(g);
		dnn_wino_forward(y, x, w, &s, beta, work);
		return;
	}
	if (use_direct(g)) {
		direct_forward(y, x, w, g, beta, work);
		return;
	}
	if (is_pointwise(g)) {
		for (int n = 0; n < g->N; n++) {
			const float *xs = x + n * chw; // (C, P*Q)
			if (g->stride > 1) {
				subsample(work, xs, g);
				xs = work;
			}
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, (int)pq, g->C, 1.0f, w,
				    crs, xs, (int)pq, beta, y + n * K * pq, (int)pq);
		}
		return;
	}
	conv_plan pl = plan_make(g);
	float *ph = work;                         // (group, phases of one image)
	float *col = ph + pl.group * pl.image;    // (CRS, cols)
	float *out = col + (size_t)crs * pl.cols; // (K, cols)
	float *row = out + (size_t)K * pl.cols;   // (stride * Wc)
	for (int n0 = 0; n0 < g->N; n0 += pl.group) {
		int ng = imin(pl.group, g->N - n0);
		for (int i = 0; i < ng; i++)
			build_phases(ph + i * pl.image, row, x + (n0 + i) * chw, g, &pl);
		for (int p0 = 0; p0 < g->P; p0 += pl.rows) {
			int p1 = imin(p0 + pl.rows, g->P);
			int ld = ng * (p1 - p0) * g->Q;
			for (int i = 0; i < ng; i++)
				phases_to_col(col + i * pq, ld, ph + i * pl.image, p0, p1, g, &pl);
			if (ng == 1) {
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, ld, crs, 1.0f, w,
					    crs, col, ld, beta, y + n0 * K * pq + (size_t)p0 * g->Q,
					    (int)pq);
				continue;
			}
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, K, ld, crs, 1.0f, w, crs,
				    col, ld, 0.0f, out, ld);
			scatter_images(y + n0 * K * pq, out, ng, K, pq, beta != 0.0f);
		}
	}
}

void dnn_conv2d_forward_cpu(float *y, const float *x, const float *w, const dnn_conv2d_args *a)
{
	conv_geom g = geom_of(a);
	conv_forward(y, x, w, &g, 0.0f, conv_scratch(forward_work(&g)));
}

/* Backward data of a stride-1 conv as a forward conv: dx = conv(dy, w'), w' (C, K, R, S) the
 * flipped transpose of w, padding dilation*(R-1) - pad. Its GEMM has K*R*S as inner dimension
 * instead of K, which OpenBLAS runs much faster when K is small, and it needs no col2im; but it
 * has only C rows, hence the CONV_FLIP_MIN_C bound. */
static conv_geom flipped_geom(const conv_geom *g)
{
	conv_geom t = {.N = g->N, .C = g->K, .H = g->P, .W = g->Q, .K = g->C, .R = g->R, .S = g->S,
		       .P = g->H, .Q = g->W, .stride = 1, .dil = g->dil,
		       .pad_h = g->dil * (g->R - 1) - g->pad_h, .pad_w = g->dil * (g->S - 1) - g->pad_w};
	return t;
}

static int bwd_data_as_forward(const conv_geom *g)
{
	return g->stride == 1 && g->R * g->S > 1 && g->C >= CONV_FLIP_MIN_C;
}

int dnn_conv2d_cpu_uses_winograd(const dnn_conv2d_args *a, int pass)
{
	conv_geom g = geom_of(a);
	if (pass != 1)
		return pass == 0 ? use_winograd(&g) : use_winograd_filter(&g);
	if (is_pointwise(&g) || !bwd_data_as_forward(&g))
		return 0;
	conv_geom t = flipped_geom(&g);
	return use_winograd(&t);
}

static void conv_backward_data_flipped(float *dx, const float *dy, const float *w,
				       const conv_geom *g, float beta)
{
	conv_geom t = flipped_geom(g);
	const int RS = g->R * g->S;
	size_t nw = (size_t)g->K * g->C * RS;
	float *wf = conv_scratch(nw + forward_work(&t)); // (C, K, R, S), then the forward's work
	for (int k = 0; k < g->K; k++)
		for (int c = 0; c < g->C; c++)
			for (int i = 0; i < RS; i++)
				wf[((size_t)c * g->K + k) * RS + (RS - 1 - i)] = w[((size_t)k * g->C + c) * RS + i];
	conv_forward(dx, dy, wf, &t, beta, wf + nw);
}

void dnn_conv2d_backward_data_cpu(float *dx, const float *dy, const float *w, const dnn_conv2d_args *a)
{
	// dx (N, C, H, W), dy (N, K, P, Q), w (K, CRS)
	conv_geom g = geom_of(a);
	const int K = g.K, crs = g.C * g.R * g.S;
	const size_t pq = (size_t)g.P * g.Q, chw = (size_t)g.C * g.H * g.W;
	const float beta = a->accumulate_dx ? 1.0f : 0.0f;
	if (is_pointwise(&g) && g.stride == 1) {
		for (int n = 0; n < g.N; n++)
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, g.C, (int)pq, K, 1.0f, w,
				    crs, dy + n * K * pq, (int)pq, beta, dx + n * chw, (int)pq);
		return;
	}
	if (is_pointwise(&g)) {
		float *dxs = conv_scratch((size_t)g.C * pq); // (C, P*Q)
		if (!a->accumulate_dx)
			memset(dx, 0, (size_t)g.N * chw * sizeof(float));
		for (int n = 0; n < g.N; n++) {
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, g.C, (int)pq, K, 1.0f, w,
				    crs, dy + n * K * pq, (int)pq, 0.0f, dxs, (int)pq);
			subsample_add_back(dx + n * chw, dxs, &g);
		}
		return;
	}
	if (bwd_data_as_forward(&g)) {
		conv_backward_data_flipped(dx, dy, w, &g, beta);
		return;
	}
	/* dcol = w^T dy per block, added into the gradient of the phases, which then goes to dx. */
	if (!a->accumulate_dx)
		memset(dx, 0, (size_t)g.N * chw * sizeof(float));
	conv_plan pl = plan_make(&g);
	float *dph = conv_scratch(pl.group * pl.image + ((size_t)crs + K) * pl.cols);
	float *dcol = dph + pl.group * pl.image;   // (CRS, cols)
	float *dyg = dcol + (size_t)crs * pl.cols; // (K, cols)
	for (int n0 = 0; n0 < g.N; n0 += pl.group) {
		int ng = imin(pl.group, g.N - n0);
		memset(dph, 0, ng * pl.image * sizeof(float));
		for (int p0 = 0; p0 < g.P; p0 += pl.rows) {
			int p1 = imin(p0 + pl.rows, g.P);
			int ld = ng * (p1 - p0) * g.Q;
			if (ng == 1) {
				cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, crs, ld, K, 1.0f, w,
					    crs, dy + n0 * K * pq + (size_t)p0 * g.Q, (int)pq, 0.0f, dcol,
					    ld);
			} else {
				gather_images(dyg, dy + n0 * K * pq, ng, K, pq);
				cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, crs, ld, K, 1.0f, w,
					    crs, dyg, ld, 0.0f, dcol, ld);
			}
			for (int i = 0; i < ng; i++)
				col_to_phases(dph + i * pl.image, dcol + i * pq, ld, p0, p1, &g, &pl);
		}
		for (int i = 0; i < ng; i++)
			scatter_phases(dx + (n0 + i) * chw, dph + i * pl.image, &g, &pl);
	}
}

void dnn_conv2d_backward_filter_cpu(float *dw, const float *x, const float *dy, const dnn_conv2d_args *a)
{
	// dw (K, CRS) +=, x (N, C, H, W), dy (N, K, P, Q)
	conv_geom g = geom_of(a);
	const int K = g.K, crs = g.C * g.R * g.S;
	const size_t pq = (size_t)g.P * g.Q, chw = (size_t)g.C * g.H * g.W;
	if (use_winograd_filter(&g)) {
		dnn_wino_shape s = wino_shape(&g);
		dnn_wino_backward_filter(dw, x, dy, &s, conv_scratch(dnn_wino_filter_work(&s)));
		return;
	}
	if (is_pointwise(&g)) {
		float *xs_buf = conv_scratch(forward_work(&g));
		for (int n = 0; n < g.N; n++) {
			const float *xs = x + n * chw; // (C, P*Q)
			if (g.stride > 1) {
				subsample(xs_buf, xs, &g);
				xs = xs_buf;
			}
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, K, g.C, (int)pq, 1.0f,
				    dy + n * K * pq, (int)pq, xs, (int)pq, 1.0f, dw, crs);
		}
		return;
	}
	conv_plan pl = plan_make(&g);
	float *ph = conv_scratch(pl.group * pl.image + ((size_t)crs + K) * pl.cols +
				 (size_t)g.stride * pl.Wc + (size_t)crs * K);
	float *col = ph + pl.group * pl.image;       // (CRS, cols)
	float *dyg = col + (size_t)crs * pl.cols;    // (K, cols)
	float *row = dyg + (size_t)K * pl.cols;      // (stride * Wc)
	float *dwt = row + (size_t)g.stride * pl.Wc; // (CRS, K): dw^T of this call
	float beta = 0.0f;
	for (int n0 = 0; n0 < g.N; n0 += pl.group) {
		int ng = imin(pl.group, g.N - n0);
		for (int i = 0; i < ng; i++)
			build_phases(ph + i * pl.image, row, x + (n0 + i) * chw, &g, &pl);
		for (int p0 = 0; p0 < g.P; p0 += pl.rows) {
			int p1 = imin(p0 + pl.rows, g.P);
			int ld = ng * (p1 - p0) * g.Q;
			for (int i = 0; i < ng; i++)
				phases_to_col(col + i * pq, ld, ph + i * pl.image, p0, p1, &g, &pl);
			const float *A = dy + n0 * K * pq + (size_t)p0 * g.Q;
			int lda = (int)pq;
			if (ng > 1) {
				gather_images(dyg, dy + n0 * K * pq, ng, K, pq);
				A = dyg;
				lda = ld;
			}
			/* dw^T = col dy^T rather than dw = dy col^T: OpenBLAS packs col faster so. */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, crs, K, ld, 1.0f, col, ld,
				    A, lda, beta, dwt, K);
			beta = 1.0f;
		}
	}
	for (int k = 0; k < K; k++)
		for (int j = 0; j < crs; j++)
			dw[(size_t)k * crs + j] += dwt[(size_t)j * K + k];
}

/* ------------------------------------------------------------------ codelets */

/* The i-th buffer of the running task as a float vector of `expect` elements. */
static float *vec_ptr(void *buffers[], int i, size_t expect)
{
	void *buffer = buffers[i];
	STARPU_ASSERT_MSG(STARPU_VECTOR_GET_NX(buffer) == expect && STARPU_VECTOR_GET_ELEMSIZE(buffer) == sizeof(float),
			  "conv2d: buffer has %u elements of %zu bytes, the args say %zu floats",
			  (unsigned)STARPU_VECTOR_GET_NX(buffer), (size_t)STARPU_VECTOR_GET_ELEMSIZE(buffer),
			  expect);
	return (float *)STARPU_VECTOR_GET_PTR(buffer);
}

/* The bias as bias.h sees it: y (N, K, P*Q). */
static dnn_bias_args bias_args(const dnn_conv2d_args *a)
{
	dnn_bias_args b = {.N = a->N, .C = a->K, .HW = a->P * a->Q};
	return b;
}

static void conv2d_fwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_conv2d_args *a = cl_arg;
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == (a->bias ? 4 : 3));
	const float *x = vec_ptr(buffers, 0, x_count(a));
	const float *w = vec_ptr(buffers, 1, w_count(a));
	float *y = vec_ptr(buffers, 2, y_count(a));
	dnn_conv2d_forward_cpu(y, x, w, a);
	if (a->bias) {
		dnn_bias_args b = bias_args(a);
		dnn_bias_forward_cpu(y, vec_ptr(buffers, 3, (size_t)a->K), &b);
	}
}

static void conv2d_bwd_data_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_conv2d_args *a = cl_arg;
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == 3);
	const float *dy = vec_ptr(buffers, 0, y_count(a));
	const float *w = vec_ptr(buffers, 1, w_count(a));
	float *dx = vec_ptr(buffers, 2, x_count(a));
	dnn_conv2d_backward_data_cpu(dx, dy, w, a);
}

static void conv2d_bwd_filter_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_conv2d_args *a = cl_arg;
	const float *x = vec_ptr(buffers, 0, x_count(a));
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == (a->bias ? 4 : 3));
	const float *dy = vec_ptr(buffers, 1, y_count(a));
	float *dw = vec_ptr(buffers, 2, w_count(a));
	dnn_conv2d_backward_filter_cpu(dw, x, dy, a);
	if (a->bias) {
		dnn_bias_args b = bias_args(a);
		dnn_bias_backward_cpu(vec_ptr(buffers, 3, (size_t)a->K), dy, &b);
	}
}

DNN_CODELET(cl_conv2d_fwd, 3, conv2d_fwd_cpu_task, dnn_conv2d_fwd_cuda);
DNN_CODELET(cl_conv2d_bwd_data, 3, conv2d_bwd_data_cpu_task, dnn_conv2d_bwd_data_cuda);
DNN_CODELET(cl_conv2d_bwd_filter, 3, conv2d_bwd_filter_cpu_task, dnn_conv2d_bwd_filter_cuda);

/* ------------------------------------------------------------------ insert helpers */

static dnn_conv2d_args *args_copy(const dnn_conv2d_args *a)
{
	STARPU_ASSERT_MSG(a->P > 0 && a->Q > 0, "conv2d: call dnn_conv2d_args_finish() first");
	dnn_conv2d_args *c = malloc(sizeof(*c));
	if (!c) {
		fprintf(stderr, "%s:%d: conv2d: out of memory\n", __FILE__, __LINE__);
		exit(1);
	}
	*c = *a;
	return c;
}

int dnn_insert_conv2d_fwd(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t x, starpu_data_handle_t w,
			   starpu_data_handle_t y)
{
	STARPU_ASSERT_MSG(!a->bias, "conv2d with bias: dnn_insert_conv2d_bias_fwd");
	dnn_conv2d_args *arg = args_copy(a);
	return DNN_TASK_INSERT(o, &cl_conv2d_fwd, "conv_fwd", STARPU_R, x, STARPU_R, w, STARPU_W, y,
					    STARPU_CL_ARGS, arg, sizeof(*arg), 
					    STARPU_FLOPS, dnn_conv2d_flops_fwd(a), STARPU_TASK_COLOR,
					    DNN_COLOR_CONV_FWD);
}

int dnn_insert_conv2d_bwd_data(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t dy,
				starpu_data_handle_t w, starpu_data_handle_t dx)
{
	dnn_conv2d_args *arg = args_copy(a);
	int dx_mode = a->accumulate_dx ? STARPU_RW : STARPU_W;
	return DNN_TASK_INSERT(o, &cl_conv2d_bwd_data, "conv_bwd_data", STARPU_R, dy, STARPU_R, w, dx_mode, dx,
					    STARPU_CL_ARGS, arg, sizeof(*arg),  STARPU_FLOPS, dnn_conv2d_flops_fwd(a),
					    STARPU_TASK_COLOR, DNN_COLOR_CONV_BWD_DATA);
}

int dnn_insert_conv2d_bwd_filter(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t x,
				  starpu_data_handle_t dy, starpu_data_handle_t dw, int dw_mode)
{
	STARPU_ASSERT_MSG(!a->bias, "conv2d with bias: dnn_insert_conv2d_bias_bwd_filter");
	dnn_conv2d_args *arg = args_copy(a);
	return DNN_TASK_INSERT(o, &cl_conv2d_bwd_filter, "conv_bwd_filter", STARPU_R, x, STARPU_R, dy, dw_mode,
					    dw, STARPU_CL_ARGS, arg, sizeof(*arg),  STARPU_FLOPS, dnn_conv2d_flops_fwd(a),
					    STARPU_TASK_COLOR, DNN_COLOR_CONV_BWD_FILTER);
}

int dnn_insert_conv2d_bias_fwd(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t x, starpu_data_handle_t w,
				starpu_data_handle_t b, starpu_data_handle_t y)
{
	STARPU_ASSERT_MSG(a->bias, "dnn_insert_conv2d_bias_fwd needs a->bias = 1");
	dnn_conv2d_args *arg = args_copy(a);
	return DNN_TASK_INSERT(o, &cl_conv2d_fwd, "conv_bias_fwd", STARPU_R, x, STARPU_R, w, STARPU_W, y, STARPU_R, b,
					    STARPU_CL_ARGS, arg, sizeof(*arg), 
					    STARPU_FLOPS, dnn_conv2d_flops_fwd(a) + (double)y_count(a),
					    STARPU_TASK_COLOR, DNN_COLOR_CONV_FWD);
}

int dnn_insert_conv2d_bias_bwd_filter(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t x,
				       starpu_data_handle_t dy, starpu_data_handle_t dw, starpu_data_handle_t db,
				       int dw_mode)
{
	STARPU_ASSERT_MSG(a->bias, "dnn_insert_conv2d_bias_bwd_filter needs a->bias = 1");
	dnn_conv2d_args *arg = args_copy(a);
	return DNN_TASK_INSERT(o, &cl_conv2d_bwd_filter, "conv_bias_bwd_filter", STARPU_R, x, STARPU_R, dy, dw_mode, dw,
					    dw_mode, db, STARPU_CL_ARGS, arg, sizeof(*arg),  STARPU_FLOPS,
					    dnn_conv2d_flops_fwd(a) + (double)y_count(a),
					    STARPU_TASK_COLOR, DNN_COLOR_CONV_BWD_FILTER);
}
