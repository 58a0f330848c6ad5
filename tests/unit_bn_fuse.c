/* unit_bn_fuse — batch norm fused into the convolutions around it (DNN_FUSE=3, codelets/conv2d_bnfuse.h), its
 * kernels against the unfused ones:
 *   - statistics in conv A's task (dnn_bn_stats_cpu): bit-equal to --batchnorm global's sums of one chunk
 *     (dnn_batchnorm_sums_fwd_cpu + dnn_batchnorm_stats_from_sums_cpu); the mean bit-equal to the local
 *     batchnorm task's (dnn_batchnorm_forward_train_cpu: the same row sums in the same order), the variance
 *     within VAR_TOL of it (derived below), and both within VAR_TOL of a two-pass double reference;
 *   - conv B's forward on relu(bn(x)) normalised inside its task: bit-equal to the unfused batchnorm+relu
 *     forward with those statistics (dnn_batchnorm_forward_global_cpu, relu = 1) followed by the conv; the
 *     same for its weight gradient; the batchnorm+relu backward with the recomputed mask bit-equal to the
 *     stored-mask one (dnn_batchnorm_relu_backward_cpu);
 *   - negative control: a variance from a plain float sum of x^2 per row (what the row-centred sums avoid), on
 *     data with mean^2 / var = 1e6, must miss VAR_TOL.
 * VAR_TOL: each variance is a sum of HW-element rows summed in 8 float lanes (at most HW/8 + 3 roundings a lane:
 * relative error (HW/8 + 3) u, u = 2^-24, for sums of terms of one sign) then in double. The fused one also
 * carries each row's float sum error d_r into sum x^2 as 2 m_r d_r, which the mean's own 2 mean d_r cancels up to
 * 2 (m_r - mean) d_r, |d_r| <= (HW/8 + 3) u sum |x|: relative to var at most 2 max|x| |m_r - mean| / var (HW/8 + 3)
 * u, and max|x| |m_r - mean| / var <= 4 for the data where it is asserted: |offset| + spread <= 4 sd gives
 * max|x| <= 4 sd, and i.i.d. rows of HW >= 49 elements have row means within 7 of their sd, sd / sqrt(HW) <= sd / 7,
 * of the mean. So each variance is within (1 + 2 * 4) (HW/8 + 3) u
 * of the double one and two of them within 18 (HW/8 + 3) u of each other. HW = 1024: 1.4e-4; measured errors are
 * printed (1e-7 here). The offset-1000 data (mean^2 / var = 3e6) is outside that bound: there only the negative
 * control is asserted (the fused error is printed: 4e-6, the docs/batchnorm.md table's size at 1e6). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batchnorm.h"
#include "batchnorm_simd.h"
#include "conv2d.h"
#include "conv2d_bnfuse.h"
#include "test_util.h"

static double var_tol(int HW) { return 18.0 * (HW / 8 + 3) * ldexp(1.0, -24); }

/* The worst relative difference of saved's variances (and invstd's) between a and b over C channels. */
static double var_diff(const float *a, const float *b, int C)
{
	double d = 0;
	for (int c = 0; c < C; c++) {
		d = fmax(d, fabs((double)a[C + c] - b[C + c]) / fmax((double)b[C + c], 1e-30));
		d = fmax(d, 2.0 * fabs((double)a[2 * C + c] - b[2 * C + c]) / b[2 * C + c]); /* invstd: half var's */
	}
	return d;
}

static void check_stats(int N, int C, int HW, float offset, float spread)
{
	const size_t n = (size_t)N * C * HW;
	float *y = alloc_f(n), *z = alloc_f(n), *gamma = alloc_f(C), *beta = alloc_f(C);
	float *fused = alloc_f(3 * C), *global = alloc_f(3 * C), *local = alloc_f(3 * C), *ref = alloc_f(3 * C);
	double *sums = alloc_d(2 * C);
	for (size_t i = 0; i < n; i++)
		y[i] = offset + test_rng_uniform(-spread, spread);
	test_fill_uniform(gamma, C, 0.5f, 1.5f);
	test_fill_uniform(beta, C, -0.5f, 0.5f);
	dnn_batchnorm_args a = {.N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f, .relu = 1};
	dnn_bn_stats_cpu(fused, y, &a);
	memset(sums, 0, 2 * C * sizeof(double));
	dnn_batchnorm_sums_fwd_cpu(sums, y, &a);
	dnn_batchnorm_stats_from_sums_cpu(global, sums, &a);
	TEST_CHECK(test_same_bits("fused stats = one chunk's global stats", fused, global, 3 * C), "N%d C%d HW%d", N,
		   C, HW);
	dnn_batchnorm_forward_train_cpu(z, local, y, gamma, beta, &a);
	TEST_CHECK(test_same_bits("fused mean = local mean", fused, local, C), "N%d C%d HW%d", N, C, HW);
	/* the two-pass double reference */
	for (int c = 0; c < C; c++) {
		double s = 0, q = 0, M = (double)N * HW;
		for (int i = 0; i < N; i++)
			for (int j = 0; j < HW; j++)
				s += y[((size_t)i * C + c) * HW + j];
		const double mean = s / M;
		for (int i = 0; i < N; i++)
			for (int j = 0; j < HW; j++) {
				double d = y[((size_t)i * C + c) * HW + j] - mean;
				q += d * d;
			}
		ref[c] = (float)mean, ref[C + c] = (float)(q / M), ref[2 * C + c] = (float)(1.0 / sqrt(q / M + a.eps));
	}
	const double tol = var_tol(HW), d_loc = var_diff(fused, local, C), d_ref = var_diff(fused, ref, C),
		     d_lref = var_diff(local, ref, C);
	printf("stats N%d C%d HW%-4d offset %-6g: fused vs local %.2e, fused vs double %.2e, local vs double %.2e "
	       "(tol %.2e)\n",
	       N, C, HW, offset, d_loc, d_ref, d_lref, tol);
	if (fabs(offset) + spread <= 4.0f * spread / sqrtf(3.0f)) /* within the derivation's 4 sd (uniform: sd = s / sqrt 3) */
		TEST_CHECK(d_loc <= tol && d_ref <= tol && d_lref <= tol, "N%d C%d HW%d: %.3g %.3g %.3g > %.3g", N, C, HW,
			   d_loc, d_ref, d_lref, tol);
	/* negative control: plain float sums of x^2 per row (8 lanes, as lane_sum) minus mean^2 */
	float *naive = alloc_f(3 * C);
	for (int c = 0; c < C; c++) {
		double s = 0, q = 0, M = (double)N * HW;
		for (int i = 0; i < N; i++) {
			float l1[8] = {0}, l2[8] = {0};
			for (int j = 0; j < HW; j++) {
				float v = y[((size_t)i * C + c) * HW + j];
				l1[j % 8] += v, l2[j % 8] += v * v;
			}
			for (int k = 0; k < 8; k++)
				s += l1[k], q += l2[k];
		}
		double mean = s / M, var = fmax(q / M - mean * mean, 0);
		naive[c] = (float)mean, naive[C + c] = (float)var, naive[2 * C + c] = (float)(1.0 / sqrt(var + a.eps));
	}
	const double d_naive = var_diff(naive, ref, C);
	printf("  negative control (plain float x^2 sums): %.2e vs double\n", d_naive);
	if (offset >= 1000.0f * spread)
		TEST_CHECK(d_naive > tol, "negative control within the tolerance: %.3g <= %.3g", d_naive, tol);
	free(y), free(z), free(gamma), free(beta), free(fused), free(global), free(local), free(ref), free(sums);
	free(naive);
}

/* conv B's tasks and the batchnorm's backward on a normalised input x_pre (N, C, H, W) against the unfused. */
static void check_apply(int N, int C, int H, int W, int K, int algo)
{
	dnn_conv2d_args c = conv_shape(N, C, H, W, K, 3, 3, 1, 1, 1);
	c.algo = algo;
	TEST_CHECK(dnn_conv2d_args_finish(&c) == 0, "conv shape");
	const int HW = H * W;
	const size_t nx = (size_t)N * C * HW, ny = (size_t)N * K * c.P * c.Q, nw = (size_t)K * C * 9;
	float *x = alloc_f(nx), *z = alloc_f(nx), *w = alloc_f(nw), *gamma = alloc_f(C), *beta = alloc_f(C);
	float *saved = alloc_f(3 * C), *saved2 = alloc_f(3 * C), *y0 = alloc_f(ny), *y1 = alloc_f(ny);
	float *so0 = alloc_f(3 * K), *so1 = alloc_f(3 * K), *dy = alloc_f(ny), *dw0 = alloc_f(nw), *dw1 = alloc_f(nw);
	float *dx0 = alloc_f(nx), *dx1 = alloc_f(nx), *dg0 = alloc_f(C), *dg1 = alloc_f(C), *db0 = alloc_f(C),
	      *db1 = alloc_f(C);
	double *sums = alloc_d(2 * C);
	test_fill_uniform(x, nx, -1.0f, 3.0f);
	test_fill_uniform(w, nw, -0.3f, 0.3f);
	test_fill_uniform(gamma, C, 0.5f, 1.5f);
	test_fill_uniform(beta, C, -0.5f, 0.5f);
	test_fill_uniform(dy, ny, -1.0f, 1.0f);
	dnn_batchnorm_args bn = {.N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f, .relu = 1, .global_n = N};
	memset(sums, 0, 2 * C * sizeof(double));
	dnn_batchnorm_sums_fwd_cpu(sums, x, &bn);
	/* unfused: batchnorm+relu with these statistics into z, then the conv, then its statistics */
	dnn_batchnorm_forward_global_cpu(z, saved, x, gamma, beta, sums, &bn);
	dnn_conv2d_forward_cpu(y0, z, w, &c);
	dnn_batchnorm_args bo = {.N = N, .C = K, .HW = c.P * c.Q, .eps = 1e-5f, .relu = 1};
	double *so_sums = alloc_d(2 * K);
	memset(so_sums, 0, 2 * K * sizeof(double));
	dnn_batchnorm_sums_fwd_cpu(so_sums, y0, &bo);
	dnn_batchnorm_stats_from_sums_cpu(so0, so_sums, &bo);
	/* fused */
	dnn_batchnorm_stats_from_sums_cpu(saved2, sums, &bn);
	TEST_CHECK(test_same_bits("saved", saved2, saved, 3 * C), "stats from sums");
	dnn_conv2d_bn_args f = {.conv = c, .in_bn = bn, .out_bn = bo, .apply = 1, .stats = 1};
	fill_nan(y1, ny), fill_nan(so1, 3 * K);
	dnn_conv2d_bn_forward_cpu(y1, so1, x, w, saved, gamma, beta, &f);
	TEST_CHECK(test_same_bits("conv on relu(bn(x))", y1, y0, ny), "N%d C%d %dx%d K%d algo %d", N, C, H, W, K,
		   algo);
	TEST_CHECK(test_same_bits("its output's statistics", so1, so0, 3 * K), "N%d C%d K%d", N, C, K);
	test_fill_uniform(dw0, nw, -0.1f, 0.1f);
	memcpy(dw1, dw0, nw * sizeof(float));
	dnn_conv2d_backward_filter_cpu(dw0, z, dy, &c);
	dnn_conv2d_bn_backward_filter_cpu(dw1, x, dy, saved, gamma, beta, &f);
	TEST_CHECK(test_same_bits("weight gradient", dw1, dw0, nw), "N%d C%d K%d algo %d", N, C, K, algo);
	/* the batchnorm's backward, local form, dx accumulated into */
	test_fill_uniform(dx0, nx, -0.1f, 0.1f);
	memcpy(dx1, dx0, nx * sizeof(float));
	test_fill_uniform(dg0, C, -0.1f, 0.1f), memcpy(dg1, dg0, C * sizeof(float));
	test_fill_uniform(db0, C, -0.1f, 0.1f), memcpy(db1, db0, C * sizeof(float));
	float *dz = alloc_f(nx);
	test_fill_uniform(dz, nx, -1.0f, 1.0f);
	bn.accumulate_dx = 1, bn.global_n = 0;
	dnn_batchnorm_relu_backward_cpu(dx0, dg0, db0, x, gamma, saved, dz, z, &bn);
	dnn_batchnorm_relu_backward_recompute_cpu(dx1, dg1, db1, x, gamma, beta, saved, dz, &bn);
	TEST_CHECK(test_same_bits("bn+relu backward dx", dx1, dx0, nx) &&
			   test_same_bits("dgamma", dg1, dg0, C) && test_same_bits("dbeta", db1, db0, C),
		   "N%d C%d %dx%d", N, C, H, W);
	/* the mask matters: some of z is zero */
	size_t zeros = 0;
	for (size_t i = 0; i < nx; i++)
		zeros += z[i] == 0.0f;
	TEST_CHECK(zeros > nx / 10 && zeros < nx - nx / 10, "the relu masks %zu of %zu", zeros, nx);
	printf("apply N%d C%d %dx%d K%d algo %d: bit-equal (relu zeros %zu of %zu)\n", N, C, H, W, K, algo, zeros, nx);
	free(x), free(z), free(w), free(gamma), free(beta), free(saved), free(saved2), free(y0), free(y1), free(so0);
	free(so1), free(dy), free(dw0), free(dw1), free(dx0), free(dx1), free(dg0), free(dg1), free(db0), free(db1);
	free(sums), free(so_sums), free(dz);
}

int main(void)
{
	test_rng_seed(7);
	for (int simd = 1; simd >= 0; simd--) { /* the AVX2 batchnorm kernels where the CPU has them, then portable */
		dnn_batchnorm_set_simd(simd);
		check_stats(4, 16, 64, 0.3f, 1.0f);
		check_stats(3, 8, 1024, -0.2f, 2.0f);
		check_stats(2, 5, 49, 1.0f, 0.5f); /* 7x7 rows: a tail of 1 after 6 lanes of 8 */
		check_stats(4, 6, 196, 1000.0f, 1.0f); /* mean^2 / var = 3e6: the negative control */
	}
	dnn_batchnorm_set_simd(1);
	check_apply(2, 16, 8, 8, 16, DNN_CONV_ALGO_AUTO);
	check_apply(3, 16, 14, 14, 32, DNN_CONV_ALGO_WINOGRAD);
	check_apply(2, 8, 7, 7, 8, DNN_CONV_ALGO_IM2COL);
	check_apply(2, 32, 16, 16, 32, DNN_CONV_ALGO_WINOGRAD4);
	return test_report("unit_bn_fuse");
}
