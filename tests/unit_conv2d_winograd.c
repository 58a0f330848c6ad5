/* unit_conv2d_winograd — the Winograd F(2x2, 3x3) and F(4x4, 3x3) paths of the CPU conv kernels,
 * forced with dnn_conv2d_args.algo = DNN_CONV_ALGO_WINOGRAD, then _WINOGRAD4, against a
 * double-precision direct conv:
 * forward, backward data (overwrite and accumulate) and backward filter (accumulating onto a
 * nonzero dw), on ResNet shapes and on odd sizes,
 * pad 0, 1 and 2, C != K, channel counts that are not multiples of the register blocks, and
 * batch 1 and 7. Skipped (77) on a CPU without AVX2+FMA.
 *
 * Two checks per output tensor:
 *   - the tolerance of unit_conv2d: max |got - ref| / max(1, |ref|) <= 1e-4;
 *   - a bound relative to the size of the sum, |got - ref| <= WINO_TOL * sum |x w| over the
 *     output's taps, which does not loosen with the size of the output. Float summation of the
 *     9 C products bounds the im2col/GEMM error near C*9*eps in the worst case and
 *     about sqrt(C*9)*eps in practice (eps = 2^-24 = 6e-8). Winograd adds the transforms: the
 *     transformed input is a sum of up to 4 inputs, the transformed filter has weights 1/4..1,
 *     and the output transform sums 9 of the 16 products, so each product's contributions are
 *     rounded a few more times, with magnitudes up to 4x the direct terms. WINO_TOL = 1e-6
 *     (~16 eps): measured (-v prints it per shape), Winograd stays at 0.4e-7..2.7e-7 on these
 *     shapes and im2col at 0.4e-7..2.2e-7, so the bound has ~4x margin over both. For the
 *     weight gradient, whose transforms mix the 9 taps of a filter, s is the largest of the 9
 *     taps' sums (filter_scale): Winograd 1.5e-8..1.8e-7, im2col 1.8e-8..2.1e-7.
 * F(4x4, 3x3) (DNN_CONV_ALGO_WINOGRAD4: forward and backward data; its weight gradient is
 * F(2x2)'s) runs every shape again with WINO4_TOL for y and dx. The first-order rounding bound
 * of a Winograd output is |got - exact| <= n eps |A^T| [sum_c (|G| |g_c| |G|^T) .* (|B^T| |d_c| |B|)] |A|,
 * n the roundings along a path (the sum over C dominates it, for both tile sizes). With
 * inputs and weights of one magnitude, that bracket over sum |x w| is at most 7.1 for F(2x2)
 * and 97.4 for F(4x4) with the points 0, 1, -1, 1/2, -2 (at the corner outputs of a tile;
 * Lavin's 0, +-1, +-2 give 256): 13.7x F(2x2)'s, so F(2x2)'s 1e-6 scales to 1.4e-5.
 * Measured: F(4x4) 1.5e-7..2.6e-6 on these shapes (the ResNet stages 0.9e-6..1.25e-6; the
 * largest on the pad-2 backward data of pad-0 convs, whose edge tiles hold zeros), 5-10x
 * F(2x2)'s. WINO4_TOL = 1e-5: ~4x over the largest measured, as WINO_TOL, and under the
 * scaled bound. F(4x4) passes unit_conv2d's 1e-4 too (with Lavin's points it did not: 1.55e-4
 * on C64 8x8 K64).
 * On a CPU with AVX-512, every shape also runs under the AVX2 GEMMs (dnn_wino_set_avx512(0), which also
 * takes F(2x2)'s AVX2 split of the image instead of split_image512) and must give bit-identical y, dx and dw.
 * Each kernel call starts from released scratch memory (dnn_cpu_scratch_release), so that a
 * sanitizer build checks the scratch sizes: the transforms load and store whole 8-float vectors
 * past the ends of rows, inside the scratch by construction (codelets/conv2d_winograd*.c).
 * A bf16 x (dnn_wino_shape.x_bf16) is read by F(2x2)'s AVX-512 split only (dnn_wino_reads_bf16); given one where it
 * cannot be read (past 32 columns), the forward and the weight gradient must record a worker error and write
 * nothing, not read 2-byte values as floats (refuse_bf16_x; control: the same calls on 32 columns record none).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv2d.h"
#include "conv2d_winograd.h"
#include "dnn_codelet.h"
#include "test_util.h"

#define WINO_TOL 1e-6
#define WINO4_TOL 1e-5
#define CLOSE_TOL 1e-4

static int verbose;
/* The algorithm under test: DNN_CONV_ALGO_WINOGRAD (F(2x2, 3x3) everywhere) or
 * DNN_CONV_ALGO_WINOGRAD4 (F(4x4, 3x3) forward and backward data, F(2x2, 3x3) weight gradient),
 * its forward tile and the forward's tolerance. */
static dnn_conv_algo algo = DNN_CONV_ALGO_WINOGRAD;
static int tile = 2;
static double fwd_tol = WINO_TOL;

enum { REF_FWD, REF_BWD_DATA, REF_BWD_FILTER };

/* The direct 3x3 conv in double, one pass at a time, over every (input, filter, output) tap:
 *   REF_FWD        out = y  = conv(x, w),        s = sum |x w| per output;
 *   REF_BWD_DATA   out = dx = conv^T(dy, w),     s = sum |dy w| per input;
 *   REF_BWD_FILTER out = dw = dw0 + sum dy x,    s = |dw0| + sum |dy x| per weight.
 * Each element's terms are added in (c, r, t) order within (n, k, p, q). */
static void direct_ref(int pass, double *out, double *s, const float *x, const float *w, const float *dy,
		       const float *dw0, const dnn_conv2d_args *a)
{
	size_t nout = pass == REF_FWD ? (size_t)a->N * a->K * a->P * a->Q
		    : pass == REF_BWD_DATA ? (size_t)a->N * a->C * a->H * a->W : (size_t)a->K * a->C * 9;
	for (size_t i = 0; i < nout; i++) {
		out[i] = pass == REF_BWD_FILTER ? dw0[i] : 0.0;
		s[i] = pass == REF_BWD_FILTER ? fabs(dw0[i]) : 0.0;
	}
	for (int n = 0; n < a->N; n++)
		for (int k = 0; k < a->K; k++)
			for (int p = 0; p < a->P; p++)
				for (int q = 0; q < a->Q; q++) {
					size_t iy = (((size_t)n * a->K + k) * a->P + p) * a->Q + q;
					for (int c = 0; c < a->C; c++)
						for (int r = 0; r < 3; r++) {
							int ih = p - a->pad + r;
							if (ih < 0 || ih >= a->H)
								continue;
							for (int t = 0; t < 3; t++) {
								int iw = q - a->pad + t;
								if (iw < 0 || iw >= a->W)
									continue;
								size_t ix = (((size_t)n * a->C + c) * a->H + ih) * a->W + iw;
								size_t jw = (((size_t)k * a->C + c) * 3 + r) * 3 + t;
								double v;
								size_t io;
								if (pass == REF_FWD)
									v = (double)x[ix] * w[jw], io = iy;
								else if (pass == REF_BWD_DATA)
									v = (double)dy[iy] * w[jw], io = ix;
								else
									v = (double)dy[iy] * x[ix], io = jw;
								out[io] += v;
								s[io] += fabs(v);
							}
						}
				}
}

/* The weight gradient's transforms mix the 9 taps of one (k, c) filter, so its rounding error
 * scales with the largest of their sums, not with each tap's own (a corner tap of a 2x2 output
 * has 1 term where the centre has 4): s of each tap = the largest s of its filter. */
static void filter_scale(double *s, size_t nw)
{
	for (size_t f = 0; f < nw; f += 9) {
		double m = 0;
		for (int i = 0; i < 9; i++)
			m = fmax(m, s[f + i]);
		for (int i = 0; i < 9; i++)
			s[f + i] = m;
	}
}

/* Largest |got - ref| / s; the tolerance check of unit_conv2d on top. */
static double check(const char *what, const float *got, const double *ref, const double *s, size_t n,
		    double tol)
{
	double worst = 0;
	size_t wi = 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - ref[i]);
		double d = s[i] > 0 ? e / s[i] : (e == 0 ? 0 : INFINITY);
		if (!(d <= worst)) {
			worst = isnan(d) ? INFINITY : d;
			wi = i;
		}
	}
	TEST_CHECK(worst <= tol, "%s: |err| / sum|terms| = %.3g > %.3g at [%zu]: got %.8g want %.8g",
		   what, worst, tol, wi, (double)got[wi], ref[wi]);
	test_close_mixed(what, got, ref, n, CLOSE_TOL);
	return worst;
}

/* The AVX-512 GEMMs and F(2x2)'s AVX-512 split (codelets/conv2d_winograd.c, conv2d_winograd_f2.c) promise the AVX2
 * loops' results bit for bit:
 * y, dx (overwrite) and dw (+= onto dw0) under each ISA, compared exactly. Where the CPU has no
 * AVX-512 both runs take AVX2 and the check is trivially true. */
static void check_isa_identical(const char *what, dnn_conv2d_args a, const float *x, const float *w,
				const float *dy, const float *dw0)
{
	size_t nx = (size_t)a.N * a.C * a.H * a.W, nw = (size_t)a.K * a.C * 9;
	size_t ny = (size_t)a.N * a.K * a.P * a.Q, n = nx + nw + ny;
	float *out[2] = {malloc(n * sizeof(float)), malloc(n * sizeof(float))};
	int isa[2];
	a.accumulate_dx = 0;
	for (int i = 0; i < 2; i++) {
		isa[i] = dnn_wino_set_avx512(i);
		float *y = out[i], *dx = y + ny, *dw = dx + nx;
		memcpy(dw, dw0, nw * sizeof(float));
		dnn_conv2d_forward_cpu(y, x, w, &a);
		dnn_conv2d_backward_data_cpu(dx, dy, w, &a);
		dnn_conv2d_backward_filter_cpu(dw, x, dy, &a);
	}
	dnn_wino_set_avx512(1);
	char msg[224]; // what: at most 160 (the caller's buffer)
	snprintf(msg, sizeof msg, "%s: AVX-512 (%d) vs AVX2 GEMMs, y|dx|dw", what, isa[1]);
	test_same_bits(msg, out[1], out[0], n);
	free(out[0]);
	free(out[1]);
}

static void check_shape(int N, int C, int H, int W, int K, int pad)
{
	dnn_conv2d_args a = {.N = N, .C = C, .H = H, .W = W, .K = K, .R = 3, .S = 3, .stride = 1,
			     .pad = pad, .dilation = 1, .algo = algo};
	char what[160];
	snprintf(what, sizeof(what), "F%d N%d C%d H%d W%d K%d pad%d", tile, N, C, H, W, K, pad);
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "%s: args rejected", what);
		return;
	}
	size_t nx = (size_t)N * C * H * W, nw = (size_t)K * C * 9, ny = (size_t)N * K * a.P * a.Q;
	float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float));
	float *y = malloc(ny * sizeof(float)), *dy = malloc(ny * sizeof(float));
	float *dx = malloc(nx * sizeof(float)), *dx0 = malloc(nx * sizeof(float));
	size_t nmax = nx > ny ? nx : ny;
	nmax = nmax > nw ? nmax : nw;
	float *dw = malloc(nw * sizeof(float)), *dw0 = malloc(nw * sizeof(float));
	double *ref = malloc(nmax * sizeof(double)), *s = malloc(nmax * sizeof(double));
	test_fill_uniform(x, nx, -1, 1);
	test_fill_uniform(w, nw, -1, 1);
	test_fill_uniform(dy, ny, -1, 1);
	test_fill_uniform(dx0, nx, -1, 1);
	test_fill_uniform(dw0, nw, -1, 1);
	char msg[200];

	/* Forward, overwriting garbage. */
	TEST_CHECK(dnn_conv2d_cpu_winograd_tile(&a, 0) == tile, "%s: forward does not take the Winograd path", what);
	for (size_t i = 0; i < ny; i++)
		y[i] = 1e30f;
	dnn_cpu_scratch_release(); /* exact-size scratch: sanitizer builds see overruns */
	dnn_conv2d_forward_cpu(y, x, w, &a);
	direct_ref(REF_FWD, ref, s, x, w, NULL, NULL, &a);
	snprintf(msg, sizeof(msg), "fwd %s", what);
	double ef = check(msg, y, ref, s, ny, fwd_tol);

	/* Backward data, overwriting; then accumulating onto dx0. Backward data runs as Winograd
	 * when it runs as the flipped forward conv (C >= 16); else it must still be right. */
	int bwd_wino = dnn_conv2d_cpu_winograd_tile(&a, 1);
	TEST_CHECK(bwd_wino == (C >= 16 ? tile : 0), "%s: backward data Winograd tile = %d", what, bwd_wino);
	const double bwd_tol = bwd_wino == 4 ? fwd_tol : WINO_TOL;
	direct_ref(REF_BWD_DATA, ref, s, NULL, w, dy, NULL, &a);
	for (size_t i = 0; i < nx; i++)
		dx[i] = 1e30f;
	a.accumulate_dx = 0;
	dnn_cpu_scratch_release(); /* exact-size scratch: sanitizer builds see overruns */
	dnn_conv2d_backward_data_cpu(dx, dy, w, &a);
	snprintf(msg, sizeof(msg), "bwd_data %s", what);
	double eb = check(msg, dx, ref, s, nx, bwd_tol);
	memcpy(dx, dx0, nx * sizeof(float));
	a.accumulate_dx = 1;
	dnn_cpu_scratch_release(); /* exact-size scratch: sanitizer builds see overruns */
	dnn_conv2d_backward_data_cpu(dx, dy, w, &a);
	for (size_t i = 0; i < nx; i++) {
		ref[i] += dx0[i];
		s[i] += fabs(dx0[i]);
	}
	snprintf(msg, sizeof(msg), "bwd_data accumulate %s", what);
	double ea = check(msg, dx, ref, s, nx, bwd_tol);
	/* Backward filter: dw += ... */
	TEST_CHECK(dnn_conv2d_cpu_winograd_tile(&a, 2) == 2, "%s: backward filter does not take the Winograd path", what);
	memcpy(dw, dw0, nw * sizeof(float));
	dnn_cpu_scratch_release(); /* exact-size scratch: sanitizer builds see overruns */
	dnn_conv2d_backward_filter_cpu(dw, x, dy, &a);
	direct_ref(REF_BWD_FILTER, ref, s, x, NULL, dy, dw0, &a);
	filter_scale(s, nw);
	snprintf(msg, sizeof(msg), "bwd_filter %s", what);
	double ew = check(msg, dw, ref, s, nw, WINO_TOL);
	check_isa_identical(what, a, x, w, dy, dw0);
	if (verbose) {
		/* The same metric for the im2col path, for comparison. */
		a.algo = DNN_CONV_ALGO_IM2COL;
		a.accumulate_dx = 0;
		dnn_conv2d_forward_cpu(y, x, w, &a);
		direct_ref(REF_FWD, ref, s, x, w, NULL, NULL, &a);
		double fi = 0;
		for (size_t i = 0; i < ny; i++)
			if (s[i] > 0)
				fi = fmax(fi, fabs(y[i] - ref[i]) / s[i]);
		memcpy(dw, dw0, nw * sizeof(float));
		dnn_conv2d_backward_filter_cpu(dw, x, dy, &a);
		a.algo = algo;
		direct_ref(REF_BWD_FILTER, ref, s, x, NULL, dy, dw0, &a);
		filter_scale(s, nw);
		double wi = 0;
		for (size_t i = 0; i < nw; i++)
			wi = fmax(wi, fabs(dw[i] - ref[i]) / s[i]);
		printf("%-24s err/sum|terms|: winograd fwd %.2e bwd_data %.2e (acc %.2e) bwd_filter %.2e;"
		       " im2col fwd %.2e bwd_filter %.2e\n", what, ef, eb, ea, ew, fi, wi);
	}
	free(x);
	free(w);
	free(y);
	free(dy);
	free(dx);
	free(dx0);
	free(ref);
	free(s);
	free(dw);
	free(dw0);
}

/* The refusal of a bf16 x that the split cannot read: calls on 32 columns (read: no error) first, the worker error
 * being sticky, then on 36 (refused: an error, y and dw untouched). */
static void refuse_bf16_x(void)
{
	if (!dnn_wino_avx512()) {
		printf("  bf16 x refusal: no AVX-512 Winograd kernels here, not run\n");
		return;
	}
	char msg[256];
	for (int W = 32; W <= 36; W += 4) {
		dnn_wino_shape s = {.N = 1, .C = 4, .H = 4, .W = W, .K = 4, .P = 4, .Q = W, .pad_h = 1, .pad_w = 1,
				    .bf16 = 1, .x_bf16 = 1};
		const size_t nx = 4 * 4 * (size_t)W, ny = nx, nw = 4 * 4 * 9;
		uint16_t *xh = calloc(nx, 2);
		float *w = calloc(nw, 4), *dy = calloc(ny, 4), *y = malloc(ny * 4), *dw = malloc(nw * 4);
		const size_t nwork = dnn_wino_work(&s) > dnn_wino_filter_work(&s) ? dnn_wino_work(&s) : dnn_wino_filter_work(&s);
		float *work = malloc(nwork * 4);
		if (!xh || !w || !dy || !y || !dw || !work) {
			TEST_CHECK(0, "bf16 x refusal: out of memory");
			free(xh), free(w), free(dy), free(y), free(dw), free(work);
			return;
		}
		for (size_t i = 0; i < ny; i++)
			y[i] = 7.0f;
		for (size_t i = 0; i < nw; i++)
			dw[i] = 7.0f;
		dnn_wino_forward(y, (const float *)xh, w, &s, 0.0f, work);
		dnn_wino_backward_filter(dw, (const float *)xh, dy, &s, work);
		const int err = dnn_worker_error_get(msg, sizeof(msg)), read = dnn_wino_reads_bf16(&s);
		size_t kept = 0;
		for (size_t i = 0; i < ny; i++)
			kept += y[i] == 7.0f;
		for (size_t i = 0; i < nw; i++)
			kept += dw[i] == 7.0f;
		if (read) /* zero x and w: y = 0, dw += 0 keeps 7 */
			TEST_CHECK(!err && kept == nw, "bf16 x on %d columns: error %d (%s), %zu of %zu kept", W, err,
				   err ? msg : "", kept, ny + nw);
		else
			TEST_CHECK(err && strstr(msg, "bf16 x") && kept == ny + nw,
				   "bf16 x on %d columns not refused: error %d, %zu of %zu outputs kept", W, err, kept,
				   ny + nw);
		free(xh), free(w), free(dy), free(y), free(dw), free(work);
	}
	printf("  bf16 x refusal: %s\n", msg);
}

int main(int argc, char **argv)
{
	verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
	if (!test_winograd_runs_here()) {
		printf("unit_conv2d_winograd: no AVX2+FMA, the Winograd path does not run here; skipped\n");
		return TEST_SKIP;
	}
	for (int pass = 0; pass < 2; pass++) {
		algo = pass ? DNN_CONV_ALGO_WINOGRAD4 : DNN_CONV_ALGO_WINOGRAD;
		tile = pass ? 4 : 2;
		fwd_tol = pass ? WINO4_TOL : WINO_TOL; /* check_shape's convs take algo */
		test_rng_seed(4321);
		/* ResNet-20 / ResNet-8 stages. */
		check_shape(1, 16, 32, 32, 16, 1);
		check_shape(7, 32, 16, 16, 32, 1);
		check_shape(7, 64, 8, 8, 64, 1);
		check_shape(2, 3, 32, 32, 16, 1);  /* the stem: C = 3, backward data stays im2col */
		/* Odd sizes: partial edge tiles, tile rows not a multiple of 8, C != K. */
		check_shape(7, 5, 13, 11, 9, 1);   /* K % 4 = 1 */
		check_shape(1, 17, 9, 15, 6, 0);   /* pad 0, K % 4 = 2 */
		check_shape(7, 19, 7, 7, 23, 0);   /* pad 0, 5x5 output, K % 4 = 3 */
		check_shape(1, 2, 3, 3, 3, 0);     /* a single output pixel */
		check_shape(2, 16, 1, 5, 18, 1);   /* a single row */
		check_shape(3, 20, 40, 70, 24, 1); /* several row chunks per image, 35 tiles per row */
		check_shape(2, 24, 6, 7, 16, 2);   /* pad 2 (the backward data of a pad-0 conv) */
		check_shape(7, 48, 5, 6, 40, 0);   /* pad 0: backward data is a pad-2 Winograd conv */
		check_shape(2, 16, 11, 37, 10, 0); /* pad 0 and 2 (backward data) on rows of >= 16 columns */
		check_shape(1, 9, 5, 33, 12, 2);
		check_shape(1, 64, 2, 2, 20, 1);
		check_shape(9, 16, 4, 4, 64, 1);   /* tiny images: many per chunk, last chunk partial */
		check_shape(2, 16, 64, 64, 16, 1); /* output straight into y, several row chunks per image */
		check_shape(2, 32, 120, 20, 24, 1); /* F(4x4) strips (5 tiles per row), 2 chunks per image */
		check_shape(20, 64, 8, 8, 64, 1);  /* F(4x4) row groups of 7, 7 and 6 images */
		check_shape(1, 32, 200, 16, 32, 1); /* F(4x4) row groups, 2 chunks of one image */
		check_shape(5, 32, 14, 14, 32, 1); /* ResNet-8's stages: row groups with partial tiles */
		check_shape(5, 64, 7, 7, 64, 1);
	}
	refuse_bf16_x();
	return test_report("unit_conv2d_winograd");
}
