/* unit_pool_bn — max pooling and batch normalisation forward passes, run as StarPU tasks on
 * registered vectors, against naive double-precision references:
 *   maxpool forward on odd sizes (k=3 s=2 p=1, k=2 s=2, k=3 s=1 p=1, batch 1) and argument checks;
 *   the AVX2 2x2 max-pool kernels against the scalar loops, bit for bit, ties and NaNs included,
 *   plain and with the fused relu; the fused relu against relu + pooling + their backwards;
 *   batchnorm forward-train (y and saved = mean | biased var | invstd), the running-statistics
 *   update over two steps (PyTorch's formulas), and eval mode with the running statistics;
 *   the AVX2 batch-norm kernels (codelets/batchnorm_simd.c) against the portable loops, bit for
 *   bit: training forward (plain and with the fused relu), backward and fused relu backward
 *   (overwrite and accumulate), on odd N (an unpaired last image), HW below, at and off a
 *   multiple of 8, and relu outputs with +-0 and NaN (skipped where the CPU has no AVX2). */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batchnorm.h"
#include "batchnorm_simd.h"
#include "maxpool.h"
#include "relu.h"
#include "test_util.h"

/* ------------------------------------------------------------------ maxpool */

// y (N, C, P, Q): max over the window, out-of-range cells are -inf
static void ref_maxpool(double *y, const float *x, const dnn_maxpool_args *a)
{
	for (int nc = 0; nc < a->N * a->C; nc++)
		for (int p = 0; p < a->P; p++)
			for (int q = 0; q < a->Q; q++) {
				double m = -INFINITY;
				for (int i = 0; i < a->k; i++)
					for (int j = 0; j < a->k; j++) {
						int h = p * a->stride - a->pad + i, w = q * a->stride - a->pad + j;
						if (h < 0 || h >= a->H || w < 0 || w >= a->W)
							continue;
						double v = x[((size_t)nc * a->H + h) * a->W + w];
						if (v > m)
							m = v;
					}
				y[((size_t)nc * a->P + p) * a->Q + q] = m;
			}
}

static void test_maxpool_fwd(int N, int C, int H, int W, int k, int stride, int pad, int P, int Q)
{
	dnn_maxpool_args a = {.N = N, .C = C, .H = H, .W = W, .k = k, .stride = stride, .pad = pad};
	TEST_CHECK(dnn_maxpool_args_finish(&a) == 0, "maxpool args %dx%dx%dx%d k%d s%d p%d rejected", N, C,
		   H, W, k, stride, pad);
	TEST_CHECK(a.P == P && a.Q == Q, "maxpool output %dx%d, want %dx%d", a.P, a.Q, P, Q);
	size_t nx = (size_t)N * C * H * W, ny = (size_t)N * C * a.P * a.Q;
	float *x = malloc(nx * sizeof(float)), *y = malloc(ny * sizeof(float));
	double *ref = malloc(ny * sizeof(double));
	test_fill_uniform(x, nx, -2, -0.5f); // all negative: a padding cell chosen as 0 would show
	for (size_t i = 0; i < ny; i++)
		y[i] = NAN;
	starpu_data_handle_t hx = reg_f(x, nx), hy = reg_f(y, ny);
	dnn_insert_maxpool_fwd(NULL, &a, hx, hy);
	starpu_data_unregister(hy);
	starpu_data_unregister(hx);
	ref_maxpool(ref, x, &a);
	char what[96];
	snprintf(what, sizeof what, "maxpool fwd %dx%dx%dx%d k%d s%d p%d", N, C, H, W, k, stride, pad);
	test_close_mixed(what, y, ref, ny, 0);
	free(x);
	free(y);
	free(ref);
}

/* Ties in a 2x2 window (the even-size fast path): dy goes to the first cell, row-major, equal to
 * the max, as in the general loop and cuDNN; the others get 0 (W mode) or keep their value (RW). */
static void test_maxpool_ties(void)
{
	dnn_maxpool_args a = {.N = 1, .C = 1, .H = 2, .W = 4, .k = 2, .stride = 2, .pad = 0};
	TEST_CHECK(dnn_maxpool_args_finish(&a) == 0, "maxpool 2x4 k2 s2 rejected");
	// window 0: cells 1 (row 0) and 4 (row 1) tie at 3; window 1: all four cells equal 5
	float x[8] = {1, 3, 5, 5, 3, 2, 5, 5}, y[2], dy[2] = {10, 20};
	for (int acc = 0; acc <= 1; acc++) {
		float dx[8] = {1, 1, 1, 1, 1, 1, 1, 1};
		a.accumulate_dx = acc;
		dnn_maxpool_forward_cpu(y, x, &a);
		dnn_maxpool_backward_cpu(dx, x, y, dy, &a);
		const float b = acc ? 1.0f : 0.0f;
		const float want[8] = {b, b + 10, b + 20, b, b, b, b, b};
		TEST_CHECK(y[0] == 3 && y[1] == 5, "maxpool ties: y = %g %g, want 3 5", y[0], y[1]);
		for (int i = 0; i < 8; i++)
			TEST_CHECK(dx[i] == want[i], "maxpool ties (acc %d): dx[%d] = %g, want %g", acc, i, dx[i], want[i]);
	}
}

/* The AVX2 2x2 kernels (maxpool.c) against the scalar loops, bit for bit: forward and backward
 * (overwrite and accumulate) on Q below, at and off a multiple of 8; inputs with ties (values
 * rounded to a few levels, relu-like zeros of both signs), and NaNs, whose 8-window groups take
 * the scalar path inside the AVX2 kernel. */
static void test_maxpool_simd_identical(int N, int C, int H, int W, int relu)
{
	dnn_maxpool_args a = {.N = N, .C = C, .H = H, .W = W, .k = 2, .stride = 2, .pad = 0, .relu = relu};
	TEST_CHECK(dnn_maxpool_args_finish(&a) == 0, "maxpool %dx%dx%dx%d k2 s2 rejected", N, C, H, W);
	const size_t nx = (size_t)N * C * H * W, ny = (size_t)N * C * a.P * a.Q;
	float *x = malloc(nx * sizeof(float)), *dy = malloc(ny * sizeof(float)), *dx0 = malloc(nx * sizeof(float));
	test_fill_uniform(x, nx, -1, 1);
	for (size_t i = 0; i < nx; i++) {
		if (i % 3 == 0)
			x[i] = roundf(x[i] * 2.0f) * 0.5f; // ties among the window's cells
		if (x[i] <= 0.0f && i % 2)
			x[i] = (i / 2) % 2 ? 0.0f : -0.0f; // relu outputs: +0 and -0 tie too
	}
	x[nx / 2] = NAN, x[nx - 1] = NAN; // one window with a NaN, one in the last group
	if (nx > 8)
		x[3] = x[2] = NAN;
	test_fill_uniform(dy, ny, -1, 1);
	test_fill_uniform(dx0, nx, -1, 1);
	// per run: y, dx (=), dx (+=)
	const size_t nout = ny + 2 * nx;
	float *out[2] = {malloc(nout * sizeof(float)), malloc(nout * sizeof(float))};
	int simd[2];
	for (int r = 0; r < 2; r++) {
		simd[r] = dnn_maxpool_set_simd(r);
		float *y = out[r], *dx = y + ny;
		dnn_maxpool_forward_cpu(y, x, &a);
		for (int acc = 0; acc <= 1; acc++) {
			a.accumulate_dx = acc;
			memcpy(dx + (size_t)acc * nx, dx0, nx * sizeof(float));
			dnn_maxpool_backward_cpu(dx + (size_t)acc * nx, x, y, dy, &a);
		}
	}
	dnn_maxpool_set_simd(1);
	TEST_CHECK(simd[0] == 0 && simd[1] == 1, "maxpool: the scalar and AVX2 runs were not both run (%d, %d)", simd[0],
		   simd[1]);
	char what[96];
	snprintf(what, sizeof what, "maxpool %dx%dx%dx%d relu %d: AVX2 vs scalar, y|dx=|dx+=", N, C, H, W, relu);
	test_same_bits(what, out[1], out[0], nout);
	free(out[0]), free(out[1]), free(x), free(dy), free(dx0);
}

/* The fused relu (a->relu, the relu+maxpool fusion of graph/fuse.c) against relu.c's forward and
 * backward around the plain pooling, bit for bit: y, and dx overwritten and accumulated, on the
 * 2x2 fast path (scalar and AVX2) and the general loops (overlapping windows, odd sizes), with
 * windows whose max is negative, zero (+0 and -0) or NaN-only. */
static void test_maxpool_relu_fused(int N, int C, int H, int W, int k, int stride, int pad)
{
	dnn_maxpool_args a = {.N = N, .C = C, .H = H, .W = W, .k = k, .stride = stride, .pad = pad};
	TEST_CHECK(dnn_maxpool_args_finish(&a) == 0, "maxpool %dx%dx%dx%d k%d rejected", N, C, H, W, k);
	const size_t nx = (size_t)N * C * H * W, ny = (size_t)N * C * a.P * a.Q;
	float *x = malloc(nx * sizeof(float)), *r = malloc(nx * sizeof(float)), *dy = malloc(ny * sizeof(float));
	float *dx0 = malloc(nx * sizeof(float)), *dpool = malloc(nx * sizeof(float));
	float *y[2] = {malloc(ny * sizeof(float)), malloc(ny * sizeof(float))};
	float *dx[2][2] = {{malloc(nx * sizeof(float)), malloc(nx * sizeof(float))},
			   {malloc(nx * sizeof(float)), malloc(nx * sizeof(float))}};
	test_fill_uniform(x, nx, -1, 0.6f); // many windows entirely negative
	for (size_t i = 0; i < nx; i += 5)
		x[i] = i % 3 == 0 ? 0.0f : i % 3 == 1 ? -0.0f : x[i];
	x[1] = NAN;
	test_fill_uniform(dy, ny, -1, 1);
	test_fill_uniform(dx0, nx, -1, 1);
	dx0[0] = -0.0f;
	for (int simd = 0; simd <= 1; simd++) {
		if (dnn_maxpool_set_simd(simd) != simd)
			continue; // no AVX2 here
		// unfused: relu, pool, pool backward into a zeroed buffer, relu backward (= or +=)
		a.relu = 0, a.accumulate_dx = 0;
		dnn_relu_forward_cpu(r, x, (long)nx);
		dnn_maxpool_forward_cpu(y[0], r, &a);
		dnn_maxpool_backward_cpu(dpool, r, y[0], dy, &a);
		for (int acc = 0; acc <= 1; acc++) {
			memcpy(dx[0][acc], dx0, nx * sizeof(float));
			dnn_relu_backward_cpu(dx[0][acc], r, dpool, (long)nx, acc);
		}
		// fused
		a.relu = 1;
		dnn_maxpool_forward_cpu(y[1], x, &a);
		for (int acc = 0; acc <= 1; acc++) {
			a.accumulate_dx = acc;
			memcpy(dx[1][acc], dx0, nx * sizeof(float));
			dnn_maxpool_backward_cpu(dx[1][acc], x, y[1], dy, &a);
		}
		char what[128];
		snprintf(what, sizeof what, "maxpool+relu %dx%dx%dx%d k%d s%d p%d (simd %d): fused vs relu then pool, y", N, C,
			 H, W, k, stride, pad, simd);
		test_same_bits(what, y[1], y[0], ny);
		for (int acc = 0; acc <= 1; acc++) {
			snprintf(what, sizeof what, "maxpool+relu %dx%dx%dx%d k%d s%d p%d (simd %d, acc %d): fused vs relu then pool, dx",
				 N, C, H, W, k, stride, pad, simd, acc);
			test_same_bits(what, dx[1][acc], dx[0][acc], nx);
		}
	}
	dnn_maxpool_set_simd(1);
	free(x), free(r), free(dy), free(dx0), free(dpool), free(y[0]), free(y[1]);
	free(dx[0][0]), free(dx[0][1]), free(dx[1][0]), free(dx[1][1]);
}

static void test_maxpool_args(void)
{
	dnn_maxpool_args bad[] = {
		{.N = 1, .C = 1, .H = 5, .W = 5, .k = 3, .stride = 1, .pad = 2}, // pad > k/2
		{.N = 1, .C = 1, .H = 2, .W = 5, .k = 3, .stride = 1, .pad = 0}, // window taller than H
		{.N = 1, .C = 1, .H = 5, .W = 5, .k = 2, .stride = 0, .pad = 0}, // stride 0
		{.N = 0, .C = 1, .H = 5, .W = 5, .k = 2, .stride = 2, .pad = 0}, // empty batch
		{.N = 1, .C = 1, .H = 5, .W = 5, .k = 0, .stride = 1, .pad = 0}, // empty window
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		TEST_CHECK(dnn_maxpool_args_finish(&bad[i]) == -1, "invalid maxpool args #%zu accepted", i);
}

/* ------------------------------------------------------------------ batchnorm */

// double reference of the training forward: y (N, C, HW), saved (3C: mean, var, invstd)
static void ref_bn_train(double *y, double *saved, const float *x, const float *gamma, const float *beta,
			 const dnn_batchnorm_args *a)
{
	double *xd = to_double(x, (size_t)a->N * a->C * a->HW), *gd = to_double(gamma, a->C),
	       *bd = to_double(beta, a->C);
	bn_train_ref(y, saved, saved + a->C, saved + 2 * a->C, xd, gd, bd, a->N, a->C, a->HW, a->eps);
	free(xd), free(gd), free(bd);
}

static void fill_bn_input(float *x, const dnn_batchnorm_args *a)
{
	// channel c has mean ~ c - 1 and spread ~ 0.5 + c: stats differ per channel
	for (int n = 0; n < a->N; n++)
		for (int c = 0; c < a->C; c++)
			for (int i = 0; i < a->HW; i++)
				x[((size_t)n * a->C + c) * a->HW + i] = (float)(c - 1) +
					(0.5f + (float)c) * test_rng_uniform(-1, 1);
}

static void test_bn(int N, int C, int HW)
{
	dnn_batchnorm_args a = {.N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f};
	size_t nx = (size_t)N * C * HW;
	float *x = malloc(nx * sizeof(float)), *y = malloc(nx * sizeof(float));
	float *gamma = malloc(C * sizeof(float)), *beta = malloc(C * sizeof(float));
	float *saved = malloc(3 * C * sizeof(float)), *running = malloc(2 * C * sizeof(float));
	double *yref = malloc(nx * sizeof(double)), *sref = malloc(3 * C * sizeof(double));
	double *rref = malloc(2 * C * sizeof(double));
	test_fill_uniform(gamma, C, 0.5f, 1.5f);
	test_fill_uniform(beta, C, -0.5f, 0.5f);
	for (int c = 0; c < C; c++) { // PyTorch's initial running stats
		running[c] = 0;
		running[C + c] = 1;
		rref[c] = 0;
		rref[C + c] = 1;
	}
	starpu_data_handle_t hx = reg_f(x, nx), hy = reg_f(y, nx), hg = reg_f(gamma, C), hb = reg_f(beta, C);
	starpu_data_handle_t hs = reg_f(saved, 3 * C), hr = reg_f(running, 2 * C);
	const double M = (double)N * HW, unbias = M > 1 ? M / (M - 1) : 1;
	char what[96];
	for (int step = 0; step < 2; step++) {
		starpu_data_acquire(hx, STARPU_W);
		fill_bn_input(x, &a);
		starpu_data_release(hx);
		dnn_insert_batchnorm_fwd_train(NULL, &a, hx, hg, hb, hy, hs);
		dnn_insert_batchnorm_running(NULL, &a, hs, hr);
		starpu_data_acquire(hy, STARPU_R);
		starpu_data_acquire(hs, STARPU_R);
		starpu_data_acquire(hr, STARPU_R);
		ref_bn_train(yref, sref, x, gamma, beta, &a);
		for (int c = 0; c < C; c++) {
			rref[c] = (1 - a.momentum) * rref[c] + a.momentum * sref[c];
			rref[C + c] = (1 - a.momentum) * rref[C + c] + a.momentum * sref[C + c] * unbias;
		}
		snprintf(what, sizeof what, "bn train y %dx%dx%d step %d", N, C, HW, step);
		test_close_mixed(what, y, yref, nx, 2e-5);
		snprintf(what, sizeof what, "bn train saved %dx%dx%d step %d", N, C, HW, step);
		test_close_mixed(what, saved, sref, 3 * C, 2e-5);
		snprintf(what, sizeof what, "bn running %dx%dx%d step %d", N, C, HW, step);
		test_close_mixed(what, running, rref, 2 * C, 2e-5);
		starpu_data_release(hr);
		starpu_data_release(hs);
		starpu_data_release(hy);
	}

	// eval: normalise a fresh input with the running statistics
	starpu_data_acquire(hx, STARPU_W);
	fill_bn_input(x, &a);
	starpu_data_release(hx);
	dnn_insert_batchnorm_fwd_eval(NULL, &a, hx, hg, hb, hr, hy);
	starpu_data_acquire(hy, STARPU_R);
	for (int n = 0; n < N; n++)
		for (int c = 0; c < C; c++)
			for (int i = 0; i < HW; i++) {
				size_t j = ((size_t)n * C + c) * HW + i;
				yref[j] = gamma[c] * (x[j] - (double)running[c]) /
						  sqrt((double)running[C + c] + (double)a.eps) +
					  beta[c];
			}
	snprintf(what, sizeof what, "bn eval y %dx%dx%d", N, C, HW);
	test_close_mixed(what, y, yref, nx, 2e-5);
	starpu_data_release(hy);

	starpu_data_handle_t all[] = {hx, hy, hg, hb, hs, hr};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		starpu_data_unregister(all[i]);
	free(x);
	free(y);
	free(gamma);
	free(beta);
	free(saved);
	free(running);
	free(yref);
	free(sref);
	free(rref);
}

/* Every output of the training forward and both backwards, under the portable loops (run 0) and
 * the AVX2 kernels (run 1), compared bit for bit. */
static void test_bn_simd_identical(int N, int C, int HW)
{
	const size_t nx = (size_t)N * C * HW;
	dnn_batchnorm_args a = {.N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f};
	float *x = malloc(nx * sizeof(float)), *dy = malloc(nx * sizeof(float)), *yr = malloc(nx * sizeof(float));
	float *gamma = malloc(C * sizeof(float)), *beta = malloc(C * sizeof(float));
	float *dx0 = malloc(nx * sizeof(float));
	fill_bn_input(x, &a);
	test_fill_uniform(dy, nx, -1, 1);
	test_fill_uniform(yr, nx, -1, 1);
	test_fill_uniform(dx0, nx, -1, 1);
	test_fill_uniform(gamma, C, 0.5f, 1.5f);
	test_fill_uniform(beta, C, -0.5f, 0.5f);
	for (size_t i = 0; i < nx; i += 7) // the relu mask's edge cases: y = -0, +0, NaN
		yr[i] = i % 3 == 0 ? -0.0f : i % 3 == 1 ? 0.0f : NAN;
	/* per run: y, y with relu, saved twice (3C each), dx plain (=, +=), dx fused (=, +=), and
	 * dgamma | dbeta (2C, accumulated over the four backwards) */
	const size_t nout = 6 * nx + 8 * (size_t)C;
	float *out[2] = {malloc(nout * sizeof(float)), malloc(nout * sizeof(float))};
	int simd[2];
	for (int r = 0; r < 2; r++) {
		simd[r] = dnn_batchnorm_set_simd(r);
		float *y = out[r], *yrelu = y + nx, *sv = yrelu + nx, *sv2 = sv + 3 * C, *dx = sv2 + 3 * C;
		float *dgb = dx + 4 * nx;
		a.relu = 0;
		dnn_batchnorm_forward_train_cpu(y, sv, x, gamma, beta, &a);
		a.relu = 1;
		dnn_batchnorm_forward_train_cpu(yrelu, sv2, x, gamma, beta, &a);
		for (int c = 0; c < 2 * C; c++)
			dgb[c] = 0.25f * (float)c;
		for (int k = 0; k < 4; k++) {
			float *d = dx + (size_t)k * nx;
			a.accumulate_dx = k & 1;
			memcpy(d, dx0, nx * sizeof(float));
			if (k < 2)
				dnn_batchnorm_backward_cpu(d, dgb, dgb + C, x, gamma, sv, dy, &a);
			else
				dnn_batchnorm_relu_backward_cpu(d, dgb, dgb + C, x, gamma, sv, dy, yr, &a);
		}
	}
	dnn_batchnorm_set_simd(1);
	char what[96];
	snprintf(what, sizeof what, "bn %dx%dx%d: AVX2 (%d) vs portable kernels, all outputs", N, C, HW, simd[1]);
	test_same_bits(what, out[1], out[0], nout);
	free(out[0]), free(out[1]), free(x), free(dy), free(yr), free(gamma), free(beta), free(dx0);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(7);

	test_maxpool_args();
	test_maxpool_fwd(2, 3, 7, 9, 3, 2, 1, 4, 5);
	test_maxpool_fwd(3, 2, 9, 7, 2, 2, 0, 4, 3);
	test_maxpool_fwd(1, 4, 5, 5, 3, 1, 1, 5, 5);
	test_maxpool_fwd(1, 1, 1, 1, 1, 1, 0, 1, 1);
	test_maxpool_fwd(4, 8, 15, 13, 3, 2, 1, 8, 7);
	test_maxpool_fwd(2, 6, 28, 28, 2, 2, 0, 14, 14); // even 2x2 s2 (LeNet-5): the straight-line path
	test_maxpool_fwd(3, 2, 10, 6, 2, 2, 0, 5, 3);
	test_maxpool_ties();
	test_maxpool_relu_fused(2, 6, 28, 28, 2, 2, 0); // the 2x2 fast path
	test_maxpool_relu_fused(3, 4, 10, 10, 2, 2, 0); // Q = 5
	test_maxpool_relu_fused(2, 3, 9, 11, 3, 2, 1);  // overlapping windows: the general loops
	test_maxpool_relu_fused(2, 3, 7, 7, 2, 2, 0);   // odd sizes: the general loops
	if (dnn_maxpool_set_simd(1)) {
		for (int relu = 0; relu <= 1; relu++) {
			test_maxpool_simd_identical(2, 6, 28, 28, relu); // LeNet-5's first pooling: Q = 14
			test_maxpool_simd_identical(3, 16, 10, 10, relu); // its second: Q = 5, a masked tail only
			test_maxpool_simd_identical(1, 3, 4, 32, relu);   // Q = 16: no tail
			test_maxpool_simd_identical(2, 2, 6, 50, relu);   // Q = 25
		}
	} else {
		printf("unit_pool_bn: no AVX2, the AVX2 max-pool kernels are not compared here\n");
	}

	test_bn(4, 3, 25);
	test_bn(1, 5, 7);
	test_bn(8, 2, 1);
	test_bn(2, 16, 49);
	if (dnn_batchnorm_set_simd(1)) {
		test_bn_simd_identical(3, 5, 25);
		test_bn_simd_identical(1, 2, 7);
		test_bn_simd_identical(4, 3, 8);
		test_bn_simd_identical(5, 4, 9);
		test_bn_simd_identical(2, 16, 64);
		test_bn_simd_identical(7, 16, 1024);
	} else {
		printf("unit_pool_bn: no AVX2, the AVX2 batch-norm kernels are not compared here\n");
	}

	test_starpu_shutdown();
	return test_report("unit_pool_bn");
}
