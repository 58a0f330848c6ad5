/* conv2d_im2col.c — the im2col + GEMM CPU conv (the general path; see conv2d_impl.h).
 *
 * im2col + single-threaded OpenBLAS sgemm:
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
 *     (codelets/conv2d_winograd_f2.c; the choice, DNN_CONV_ALGO, under "Winograd dispatch").
 * With g->bf16 (--precision bf16) every GEMM is dnn_gemm's bf16 one (gemm_bf16.h: the operands
 * rounded to bf16 as it copies them, exact products, fp32 sums); im2col, col2im and the scatters
 * stay fp32 (they only move or add floats). A forward whose y is stored in bf16 (g->y_bf16) has each GEMM block
 * written into the (K, cols) buffer and rounded into y right after (dnn_bf16_convert_rows_bias, the bias added
 * first), while the block is in L2.
 * The double-precision naive reference lives in the tests (tests/op_cases.c).
 */
#include <string.h>

#include "conv2d_impl.h"
#include "dnn_codelet.h"
#include "gemm_bf16.h"
#include "short_copy.h"

/* Floats of column buffer per block: 64 Ki floats = 256 KiB, half of a typical L2. */
#define CONV_COL_BUDGET (64 * 1024)
/* GEMMs narrower than this many columns lose efficiency; a block is at least this wide. */
#define CONV_MIN_COLS 256
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
		rows = rows < 1 ? 1 : conv_imin(rows, g->P);
		int nblocks = (g->P + rows - 1) / rows;
		pl.group = 1;
		pl.rows = (g->P + nblocks - 1) / nblocks;
	} else {
		int group = conv_imin((int)(target / pq), g->N);
		int nblocks = (g->N + group - 1) / group;
		pl.group = (g->N + nblocks - 1) / nblocks;
		pl.rows = g->P;
	}
	pl.cols = (size_t)pl.group * pl.rows * g->Q;
	return pl;
}

/* ------------------------------------------------------------------ data movement */

/* Range [*lo, *hi) of outputs o in [0, n) whose input o*stride + off lies in [0, len). */
static void valid_range(int *lo, int *hi, int off, int stride, int len, int n)
{
	int l = off >= 0 ? 0 : (-off + stride - 1) / stride;
	int h = len - off <= 0 ? 0 : (len - off + stride - 1) / stride;
	l = conv_imin(l, n);
	h = conv_imin(h, n);
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

/* Image n of x (N, C, H, W): fp32, or bf16 (uint16_t) values when g->x_bf16 (a stored activation). */
static const void *image_of(const float *x, int n, const conv_geom *g)
{
	const size_t o = (size_t)n * g->C * g->H * g->W;
	return g->x_bf16 ? (const void *)((const uint16_t *)x + o) : (const void *)(x + o);
}

/* d[0..n) = x's elements [o, o + n) as floats: copied, or widened from bf16 (g->x_bf16), exactly (a loop of its
 * own: the rows are short, a call per row would cost more than the widening). */
static inline void copy_in(float *restrict d, const void *x, size_t o, int n, const conv_geom *g)
{
	if (g->x_bf16) {
		const uint16_t *restrict h = (const uint16_t *)x + o;
		for (int j = 0; j < n; j++)
			d[j] = dnn_bf16_to_f32(h[j]);
	} else
		dnn_copy_floats(d, (const float *)x + o, n);
}

/* x (C, H, W) -> its padded stride phases ph (stride, stride, C, Hc, Wc); only the phases that
 * some tap reads are written. row: stride*Wc floats of scratch. x: bf16 values when g->x_bf16, widened
 * here as they are copied (no pass of their own). */
static void build_phases(float *restrict ph, float *restrict row, const void *x, const conv_geom *g,
			 const conv_plan *pl)
{
	const int st = g->stride, H = g->H, W = g->W, Hc = pl->Hc, Wc = pl->Wc;
	/* Columns [jlo, jhi) of a padded row of st*Wc floats lie inside the image. */
	const int jlo = g->pad_w > 0 ? g->pad_w : 0, jhi = conv_imin(g->pad_w + W, st * Wc);
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
				dnn_zero_floats(d, (long)ilo * Wc);
				dnn_zero_floats(d + (size_t)ihi * Wc, (long)(Hc - ihi) * Wc);
			}
			for (int i = ilo; i < ihi; i++) {
				const size_t xrow = ((size_t)c * H + i * st + roff) * W; // x's row, an offset
				float *d0 = pa + cbase + (size_t)i * Wc;
				if (st == 1) {
					dnn_zero_floats(d0, jlo);
					copy_in(d0 + jlo, x, xrow + jlo - g->pad_w, jhi - jlo, g);
					dnn_zero_floats(d0 + jhi, Wc - jhi);
					continue;
				}
				/* Pad the row, then deal its columns out to the phases. */
				dnn_zero_floats(row, jlo);
				copy_in(row + jlo, x, xrow + jlo - g->pad_w, jhi - jlo, g);
				dnn_zero_floats(row + jhi, (long)st * Wc - jhi);
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

/* d[0..n) = s[0..n) for the short runs of im2col (short_copy.h: no libc call per run). */
static inline void copy_floats(float *restrict d, const float *restrict s, int n) { dnn_copy_floats(d, s, n); }

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
			dnn_copy_floats(dst + (size_t)k * G * pq + (size_t)i * pq, src + ((size_t)i * K + k) * pq,
					(long)pq);
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
				dnn_copy_floats(d, s, (long)pq);
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

/* The kernels' one GEMM (row-major, as cblas_sgemm; trans 0 = as stored): sgemm, or the bf16
 * GEMM under g->bf16, whose failure (its bf16 copies, oneDNN) is recorded as a worker error. */
static void conv_gemm(const conv_geom *g, int tA, int tB, int M, int N, int K, const float *A, int lda,
		      const float *B, int ldb, float beta, float *C, int ldc)
{
	if (dnn_gemm(g->bf16, tA, tB, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc) != 0)
		dnn_worker_error("conv2d: the bf16 GEMM (%d x %d x %d) failed (%s)", M, N, K, dnn_gemm_bf16_impl());
}

/* ------------------------------------------------------------------ kernels */

/* The kernels below walk blocks of images [n0, n0 + ng) and output rows [p0, p1), with ng == 1
 * or [p0, p1) == [0, P). A one-image block's GEMM reads dy / writes y in place (ld = P*Q); a
 * several-image block goes through a (K, ng*P*Q) buffer. */

/* A 1x1 conv's columns per GEMM when y is bf16 (its (K, cols) block then goes through the work, rounded into y). */
static size_t pointwise_bf16_cols(const conv_geom *g)
{
	const size_t pq = (size_t)g->P * g->Q, cb = CONV_COL_BUDGET / g->K;
	return pq < CONV_MIN_COLS || pq < cb ? pq : cb < CONV_MIN_COLS ? CONV_MIN_COLS : cb;
}

size_t dnn_conv_im2col_forward_work(const conv_geom *g)
{
	if (conv_is_pointwise(g))
		return (g->stride > 1 ? (size_t)g->C * g->P * g->Q : 0) +
		       (g->y_bf16 ? (size_t)g->K * pointwise_bf16_cols(g) : 0);
	conv_plan pl = plan_make(g);
	return pl.group * pl.image + ((size_t)g->C * g->R * g->S + g->K) * pl.cols +
	       (size_t)g->stride * pl.Wc;
}

void dnn_conv_im2col_forward(float *y, const float *x, const float *w, const conv_geom *g, float beta,
			     float *work)
{
	// y (N, K, P, Q), x (N, C, H, W), w (K, C, R, S) = (K, CRS)
	const int K = g->K, crs = g->C * g->R * g->S;
	const size_t pq = (size_t)g->P * g->Q, chw = (size_t)g->C * g->H * g->W;
	if (conv_is_pointwise(g)) {
		for (int n = 0; n < g->N; n++) {
			const float *xs = x + n * chw; // (C, P*Q)
			if (g->stride > 1) {
				subsample(work, xs, g);
				xs = work;
			}
			if (!g->y_bf16) {
				conv_gemm(g, 0, 0, K, (int)pq, g->C, w, crs, xs, (int)pq, beta, y + n * K * pq, (int)pq);
				continue;
			}
			/* bf16 y: blocks of columns into the work, each rounded into y right after its GEMM */
			float *blk = work + (g->stride > 1 ? (size_t)g->C * pq : 0);
			const size_t cb = pointwise_bf16_cols(g);
			for (size_t c0 = 0; c0 < pq; c0 += cb) {
				const int nc = (int)(pq - c0 < cb ? pq - c0 : cb);
				conv_gemm(g, 0, 0, K, nc, g->C, w, crs, xs + c0, (int)pq, 0.0f, blk, nc);
				dnn_bf16_convert_rows_bias((uint16_t *)y + n * K * pq + c0, pq, blk, (size_t)nc, K, nc, g->ybias, 1);
			}
		}
		return;
	}
	conv_plan pl = plan_make(g);
	float *ph = work;                         // (group, phases of one image)
	float *col = ph + pl.group * pl.image;    // (CRS, cols)
	float *out = col + (size_t)crs * pl.cols; // (K, cols)
	float *row = out + (size_t)K * pl.cols;   // (stride * Wc)
	for (int n0 = 0; n0 < g->N; n0 += pl.group) {
		int ng = conv_imin(pl.group, g->N - n0);
		for (int i = 0; i < ng; i++)
			build_phases(ph + i * pl.image, row, image_of(x, n0 + i, g), g, &pl);
		for (int p0 = 0; p0 < g->P; p0 += pl.rows) {
			int p1 = conv_imin(p0 + pl.rows, g->P);
			int ld = ng * (p1 - p0) * g->Q;
			for (int i = 0; i < ng; i++)
				phases_to_col(col + i * pq, ld, ph + i * pl.image, p0, p1, g, &pl);
			if (ng == 1 && !g->y_bf16) {
				conv_gemm(g, 0, 0, K, ld, crs, w, crs, col, ld, beta,
					  y + n0 * K * pq + (size_t)p0 * g->Q, (int)pq);
				continue;
			}
			conv_gemm(g, 0, 0, K, ld, crs, w, crs, col, ld, 0.0f, out, ld);
			if (g->y_bf16) { /* the block (K, ld) rounded into y while it is in L2, the bias added first */
				for (int i = 0; i < ng; i++)
					dnn_bf16_convert_rows_bias((uint16_t *)y + (n0 + i) * K * pq + (size_t)p0 * g->Q, pq,
								   out + i * pq, (size_t)ld, K, (p1 - p0) * g->Q, g->ybias, 1);
				continue;
			}
			scatter_images(y + n0 * K * pq, out, ng, K, pq, beta != 0.0f);
		}
	}
}

void dnn_conv_im2col_backward_data(float *dx, const float *dy, const float *w, const conv_geom *gp,
				   int accumulate_dx)
{
	// dx (N, C, H, W), dy (N, K, P, Q), w (K, CRS)
	const conv_geom g = *gp;
	const int K = g.K, crs = g.C * g.R * g.S;
	const size_t pq = (size_t)g.P * g.Q, chw = (size_t)g.C * g.H * g.W;
	const float beta = accumulate_dx ? 1.0f : 0.0f;
	if (conv_is_pointwise(&g) && g.stride == 1) {
		for (int n = 0; n < g.N; n++)
			conv_gemm(&g, 1, 0, g.C, (int)pq, K, w, crs, dy + n * K * pq, (int)pq, beta, dx + n * chw,
				  (int)pq);
		return;
	}
	if (conv_is_pointwise(&g)) {
		float *dxs = dnn_conv_scratch((size_t)g.C * pq); // (C, P*Q)
		if (!dxs)
			return;
		if (!accumulate_dx)
			memset(dx, 0, (size_t)g.N * chw * sizeof(float));
		for (int n = 0; n < g.N; n++) {
			conv_gemm(&g, 1, 0, g.C, (int)pq, K, w, crs, dy + n * K * pq, (int)pq, 0.0f, dxs, (int)pq);
			subsample_add_back(dx + n * chw, dxs, &g);
		}
		return;
	}
	/* dcol = w^T dy per block, added into the gradient of the phases, which then goes to dx. */
	conv_plan pl = plan_make(&g);
	float *dph = dnn_conv_scratch(pl.group * pl.image + ((size_t)crs + K) * pl.cols);
	if (!dph)
		return;
	if (!accumulate_dx)
		memset(dx, 0, (size_t)g.N * chw * sizeof(float));
	float *dcol = dph + pl.group * pl.image;   // (CRS, cols)
	float *dyg = dcol + (size_t)crs * pl.cols; // (K, cols)
	for (int n0 = 0; n0 < g.N; n0 += pl.group) {
		int ng = conv_imin(pl.group, g.N - n0);
		memset(dph, 0, ng * pl.image * sizeof(float));
		for (int p0 = 0; p0 < g.P; p0 += pl.rows) {
			int p1 = conv_imin(p0 + pl.rows, g.P);
			int ld = ng * (p1 - p0) * g.Q;
			if (ng == 1) {
				conv_gemm(&g, 1, 0, crs, ld, K, w, crs, dy + n0 * K * pq + (size_t)p0 * g.Q, (int)pq,
					  0.0f, dcol, ld);
			} else {
				gather_images(dyg, dy + n0 * K * pq, ng, K, pq);
				conv_gemm(&g, 1, 0, crs, ld, K, w, crs, dyg, ld, 0.0f, dcol, ld);
			}
			for (int i = 0; i < ng; i++)
				col_to_phases(dph + i * pl.image, dcol + i * pq, ld, p0, p1, &g, &pl);
		}
		for (int i = 0; i < ng; i++)
			scatter_phases(dx + (n0 + i) * chw, dph + i * pl.image, &g, &pl);
	}
}

void dnn_conv_im2col_backward_filter(float *dw, const float *x, const float *dy, const conv_geom *gp)
{
	// dw (K, CRS) +=, x (N, C, H, W), dy (N, K, P, Q)
	const conv_geom g = *gp;
	const int K = g.K, crs = g.C * g.R * g.S;
	const size_t pq = (size_t)g.P * g.Q, chw = (size_t)g.C * g.H * g.W;
	if (conv_is_pointwise(&g)) {
		float *xs_buf = dnn_conv_scratch(dnn_conv_im2col_forward_work(&g));
		if (!xs_buf)
			return;
		for (int n = 0; n < g.N; n++) {
			const float *xs = x + n * chw; // (C, P*Q)
			if (g.stride > 1) {
				subsample(xs_buf, xs, &g);
				xs = xs_buf;
			}
			conv_gemm(&g, 0, 1, K, g.C, (int)pq, dy + n * K * pq, (int)pq, xs, (int)pq, 1.0f, dw, crs);
		}
		return;
	}
	conv_plan pl = plan_make(&g);
	float *ph = dnn_conv_scratch(pl.group * pl.image + ((size_t)crs + K) * pl.cols +
				     (size_t)g.stride * pl.Wc + (size_t)crs * K);
	if (!ph)
		return;
	float *col = ph + pl.group * pl.image;       // (CRS, cols)
	float *dyg = col + (size_t)crs * pl.cols;    // (K, cols)
	float *row = dyg + (size_t)K * pl.cols;      // (stride * Wc)
	float *dwt = row + (size_t)g.stride * pl.Wc; // (CRS, K): dw^T of this call
	float beta = 0.0f;
	for (int n0 = 0; n0 < g.N; n0 += pl.group) {
		int ng = conv_imin(pl.group, g.N - n0);
		for (int i = 0; i < ng; i++)
			build_phases(ph + i * pl.image, row, image_of(x, n0 + i, &g), &g, &pl);
		for (int p0 = 0; p0 < g.P; p0 += pl.rows) {
			int p1 = conv_imin(p0 + pl.rows, g.P);
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
			conv_gemm(&g, 0, 1, crs, K, ld, col, ld, A, lda, beta, dwt, K);
			beta = 1.0f;
		}
	}
	for (int k = 0; k < K; k++)
		for (int j = 0; j < crs; j++)
			dw[(size_t)k * crs + j] += dwt[(size_t)j * K + k];
}
