/* gpu_cuda_policy — what the CUDA codelets promise beyond "close to the CPU":
 *   - max-pool backward routes ties exactly as the CPU kernel (the first cell equal to the
 *     window's max; the first largest one when a window holds NaNs) and sums overlapping windows
 *     in the CPU's order: CUDA's dx must equal the CPU's exactly, on inputs full of ties, with
 *     NaNs, overlapping and padded windows, written and accumulated. The forward (cuDNN,
 *     CUDNN_POOLING_MAX_DETERMINISTIC) must equal the CPU's exactly too (a max is exact); so
 *     with the fused relu (maxpool.h a->relu: relu of the max, dy masked where y <= 0);
 *   - batch-norm's saved variance is computed, not rebuilt from invstd: with var ~ 1e-13, far
 *     below eps = 1e-5, it must match the CPU's to 1e-3 relative (1/invstd^2 - eps would be off
 *     by about 100%);
 *   - with DNN_CUDA_WORKSPACE_MB=0 (set here unless the caller set it) every conv pass still
 *     runs (cuDNN's algorithms that need no workspace) and matches the CPU;
 *   - no task recorded a worker error (a failing CUDA/cuBLAS/cuDNN call would, dnn_cuda.h).
 * The references are the CPU kernels called directly. Runs with DNN_CUDA_MATH=fp32 (gpu_util.h)
 * unless set. Skipped (77) without a CUDA worker. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batchnorm.h"
#include "conv2d.h"
#include "dnn_codelet.h"
#include "gpu_util.h"
#include "maxpool.h"
#include "test_util.h"

/* Exact equality, NaN == NaN; 0 == -0 (the CPU's 2x2 path may write -0 where a sum gives +0). */
static void same_floats(const char *what, const float *got, const float *ref, size_t n)
{
	size_t bad = 0, first = 0;
	for (size_t i = 0; i < n; i++)
		if (!(got[i] == ref[i] || (isnan(got[i]) && isnan(ref[i]))))
			if (bad++ == 0)
				first = i;
	TEST_CHECK(bad == 0, "%s: %zu of %zu values differ, first [%zu]: %.9g vs %.9g", what, bad, n, first,
		   bad ? (double)got[first] : 0.0, bad ? (double)ref[first] : 0.0);
}

/* ------------------------------------------------------------- max-pool ties */
/* relu = 1: the fused relu (maxpool.h), on values -1, 0, 1: windows whose max is not positive. */
static void test_maxpool(int N, int C, int H, int W, int k, int s, int pad, int relu)
{
	dnn_maxpool_args a = {.N = N, .C = C, .H = H, .W = W, .k = k, .stride = s, .pad = pad, .relu = relu};
	if (dnn_maxpool_args_finish(&a) != 0) {
		TEST_CHECK(0, "maxpool %dx%dx%dx%d k%d s%d p%d: bad shape", N, C, H, W, k, s, pad);
		return;
	}
	size_t nx = (size_t)N * C * H * W, ny = (size_t)N * C * a.P * a.Q;
	float *x = alloc_f(nx), *dy = alloc_f(ny), *dx0 = alloc_f(nx);
	for (size_t i = 0; i < nx; i++) /* three values only: most windows hold a tie for the max */
		x[i] = (float)test_rng_int(0, 2) - (relu ? 1.0f : 0.0f);
	for (size_t i = 0; i < nx; i += 17) /* sparse NaNs: never a whole window */
		x[i] = NAN;
	test_fill_uniform(dy, ny, -1, 1);
	test_fill_uniform(dx0, nx, -1, 1);
	float *ry = alloc_f(ny), *rdx = alloc_f(nx), *rdxa = gpu_copy_f(dx0, nx);
	dnn_maxpool_forward_cpu(ry, x, &a);
	dnn_maxpool_backward_cpu(rdx, x, ry, dy, &a);
	dnn_maxpool_args acc = a;
	acc.accumulate_dx = 1;
	dnn_maxpool_backward_cpu(rdxa, x, ry, dy, &acc);

	float *y = alloc_f(ny), *dx = alloc_f(nx), *dxa = gpu_copy_f(dx0, nx);
	fill_nan(y, ny), fill_nan(dx, nx);
	starpu_data_handle_t hx = reg_f(x, nx), hy = reg_f(y, ny), hry = reg_f(ry, ny), hdy = reg_f(dy, ny);
	starpu_data_handle_t hdx = reg_f(dx, nx), hdxa = reg_f(dxa, nx);
	struct starpu_data_descr f[] = {{hx, STARPU_R}, {hy, STARPU_W}};
	gpu_task(&cl_maxpool_fwd, gpu_cuda_worker, &a, sizeof a, f, 2, "maxpool_fwd");
	/* The backward reads the CPU's y, so it is checked on its own. */
	struct starpu_data_descr b[] = {{hx, STARPU_R}, {hry, STARPU_R}, {hdy, STARPU_R}, {hdx, STARPU_W}};
	gpu_task(&cl_maxpool_bwd, gpu_cuda_worker, &a, sizeof a, b, 4, "maxpool_bwd");
	struct starpu_data_descr ba[] = {{hx, STARPU_R}, {hry, STARPU_R}, {hdy, STARPU_R}, {hdxa, STARPU_RW}};
	gpu_task(&cl_maxpool_bwd, gpu_cuda_worker, &acc, sizeof acc, ba, 4, "maxpool_bwd");
	starpu_data_handle_t all[] = {hx, hy, hry, hdy, hdx, hdxa};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		starpu_data_unregister(all[i]);

	char what[160];
	snprintf(what, sizeof what, "maxpool %dx%dx%dx%d k%d s%d p%d relu %d forward", N, C, H, W, k, s, pad, relu);
	same_floats(what, y, ry, ny);
	snprintf(what, sizeof what, "maxpool %dx%dx%dx%d k%d s%d p%d relu %d backward dx=", N, C, H, W, k, s, pad, relu);
	same_floats(what, dx, rdx, nx);
	snprintf(what, sizeof what, "maxpool %dx%dx%dx%d k%d s%d p%d relu %d backward dx+=", N, C, H, W, k, s, pad, relu);
	same_floats(what, dxa, rdxa, nx);
	printf("maxpool %dx%dx%dx%d k%d s%d p%d relu %d: forward and backward checked for exact equality\n", N, C, H, W,
	       k, s, pad, relu);
	free(x), free(dy), free(dx0), free(ry), free(rdx), free(rdxa), free(y), free(dx), free(dxa);
}

/* ------------------------------------------------------------- batch-norm variance << eps */
static void test_bn_tiny_var(int N, int C, int HW)
{
	dnn_batchnorm_args a = {.N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f};
	size_t nx = (size_t)N * C * HW;
	float *x = alloc_f(nx), *gamma = alloc_f(C), *beta = alloc_f(C);
	/* Channel c: 1 + c/8 plus a few ulps of 1 (2^-23): var ~ 1e-13 << eps. */
	for (int n = 0; n < N; n++)
		for (int c = 0; c < C; c++)
			for (int i = 0; i < HW; i++)
				x[((size_t)n * C + c) * HW + i] =
					1.0f + 0.125f * (float)c + ldexpf((float)test_rng_int(-8, 8), -23);
	test_fill_uniform(gamma, C, 0.5f, 1.5f);
	test_fill_uniform(beta, C, -0.3f, 0.3f);
	float *ry = alloc_f(nx), *rs = alloc_f(3 * C), *y = alloc_f(nx), *s = alloc_f(3 * C);
	dnn_batchnorm_forward_train_cpu(ry, rs, x, gamma, beta, &a);
	fill_nan(y, nx), fill_nan(s, 3 * C);
	starpu_data_handle_t hx = reg_f(x, nx), hg = reg_f(gamma, C), hb = reg_f(beta, C), hy = reg_f(y, nx),
			     hs = reg_f(s, 3 * C);
	struct starpu_data_descr f[] = {{hx, STARPU_R}, {hg, STARPU_R}, {hb, STARPU_R}, {hy, STARPU_W}, {hs, STARPU_W}};
	gpu_task(&cl_batchnorm_fwd_train, gpu_cuda_worker, &a, sizeof a, f, 5, "bn_fwd_train");
	starpu_data_handle_t all[] = {hx, hg, hb, hy, hs};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		starpu_data_unregister(all[i]);
	double worst = 0;
	for (int c = 0; c < C; c++) {
		double ref = rs[C + c], got = s[C + c];
		double rel = fabs(got - ref) / fmax(ref, 1e-30);
		if (!(rel <= worst))
			worst = isnan(rel) ? INFINITY : rel;
		TEST_CHECK(ref > 0 && ref < 1e-10, "bn: channel %d's CPU variance %g is not the tiny one meant", c, ref);
	}
	TEST_CHECK(worst <= 1e-3, "bn %dx%dx%d: saved variance off by %.3g relative (var ~ %g, eps %g)", N, C, HW, worst,
		   (double)rs[C], (double)a.eps);
	printf("bn %dx%dx%d: variance %g (eps %g): worst relative difference %.3g\n", N, C, HW, (double)rs[C],
	       (double)a.eps, worst);
	free(x), free(gamma), free(beta), free(ry), free(rs), free(y), free(s);
}

/* ------------------------------------------------------------- conv without workspace */
static void test_conv(dnn_conv2d_args a, double tol)
{
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "conv: bad shape");
		return;
	}
	size_t nx = (size_t)a.N * a.C * a.H * a.W, nw = (size_t)a.K * a.C * a.R * a.S, ny = (size_t)a.N * a.K * a.P * a.Q;
	float *x = alloc_f(nx), *w = alloc_f(nw), *dy = alloc_f(ny);
	test_fill_uniform(x, nx, -1, 1);
	test_fill_uniform(w, nw, -0.5f, 0.5f);
	test_fill_uniform(dy, ny, -1, 1);
	float *ry = alloc_f(ny), *rdx = alloc_f(nx), *rdw = calloc(nw, sizeof(float));
	float *y = alloc_f(ny), *dx = alloc_f(nx), *dw = calloc(nw, sizeof(float));
	if (!rdw || !dw) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	dnn_conv2d_forward_cpu(ry, x, w, &a);
	dnn_conv2d_backward_data_cpu(rdx, dy, w, &a);
	dnn_conv2d_backward_filter_cpu(rdw, x, dy, &a);
	fill_nan(y, ny), fill_nan(dx, nx);
	starpu_data_handle_t hx = reg_f(x, nx), hw = reg_f(w, nw), hdy = reg_f(dy, ny), hy = reg_f(y, ny),
			     hdx = reg_f(dx, nx), hdw = reg_f(dw, nw);
	struct starpu_data_descr f[] = {{hx, STARPU_R}, {hw, STARPU_R}, {hy, STARPU_W}};
	gpu_task(&cl_conv2d_fwd, gpu_cuda_worker, &a, sizeof a, f, 3, "conv_fwd");
	struct starpu_data_descr bd[] = {{hdy, STARPU_R}, {hw, STARPU_R}, {hdx, STARPU_W}};
	gpu_task(&cl_conv2d_bwd_data, gpu_cuda_worker, &a, sizeof a, bd, 3, "conv_bwd_data");
	struct starpu_data_descr bf[] = {{hx, STARPU_R}, {hdy, STARPU_R}, {hdw, STARPU_RW}};
	gpu_task(&cl_conv2d_bwd_filter, gpu_cuda_worker, &a, sizeof a, bf, 3, "conv_bwd_filter");
	starpu_data_handle_t all[] = {hx, hw, hdy, hy, hdx, hdw};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		starpu_data_unregister(all[i]);
	char what[160];
	snprintf(what, sizeof what, "conv N%d C%d %dx%d K%d k%d s%d p%d d%d (workspace %s MiB) fwd", a.N, a.C, a.H, a.W,
		 a.K, a.R, a.stride, a.pad, a.dilation, getenv("DNN_CUDA_WORKSPACE_MB"));
	gpu_close_scaled(what, y, ry, ny, tol);
	/* The backward passes sum over more terms (and bwd filter's ALGO_0 fallback in another
	 * order, with atomics): 5x the forward's tolerance, still far below a wrong algorithm's O(1). */
	what[strlen(what) - 3] = '\0';
	strcat(what, "bwd_data");
	gpu_close_scaled(what, dx, rdx, nx, 5 * tol);
	what[strlen(what) - 8] = '\0';
	strcat(what, "bwd_filter");
	gpu_close_scaled(what, dw, rdw, nw, 5 * tol);
	free(x), free(w), free(dy), free(ry), free(rdx), free(rdw), free(y), free(dx), free(dw);
}

int main(int argc, char **argv)
{
	setenv("DNN_CUDA_WORKSPACE_MB", "0", 0);
	int rc = gpu_setup(&argc, &argv, "gpu_cuda_policy", 0);
	if (rc != 0)
		return rc;
	test_rng_seed(1212);

	test_maxpool(2, 3, 8, 8, 2, 2, 0, 0);  /* the CPU's 2x2 fast path */
	test_maxpool(2, 3, 9, 9, 3, 2, 1, 0);  /* overlapping, padded windows */
	test_maxpool(1, 4, 7, 7, 3, 1, 1, 0);  /* every cell in up to 9 windows */
	test_maxpool(3, 2, 13, 11, 2, 1, 0, 0); /* overlapping 2x2, odd sizes */
	test_maxpool(2, 3, 8, 8, 2, 2, 0, 1);  /* the fused relu (LeNet-5's relu+maxpool): 2x2 */
	test_maxpool(2, 3, 9, 9, 3, 2, 1, 1);  /* the fused relu, overlapping windows */

	test_bn_tiny_var(4, 3, 49);
	test_bn_tiny_var(16, 8, 196);

	const char *math = getenv("DNN_CUDA_MATH");
	double tol = math && strcmp(math, "fp32") != 0 ? 5e-3 : 2e-4;
	test_conv(conv_shape(2, 3, 16, 16, 8, 3, 3, 1, 1, 1), tol);
	test_conv(conv_shape(4, 16, 14, 14, 32, 3, 3, 2, 1, 1), tol);
	test_conv(conv_shape(2, 8, 15, 15, 4, 5, 5, 1, 2, 2), tol);
	test_conv(conv_shape(8, 64, 8, 8, 64, 1, 1, 1, 0, 1), tol);

	starpu_task_wait_for_all();
	char msg[512];
	TEST_CHECK(!dnn_worker_error_get(msg, sizeof msg), "a task recorded a worker error: %s", msg);
	test_starpu_shutdown();
	return test_report("gpu_cuda_policy");
}
