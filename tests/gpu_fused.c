/* gpu_fused — the fused paths of the CUDA codelets against the CPU ones, on the same inputs
 * (one task on a CPU worker and one on a CUDA worker, STARPU_EXECUTE_ON_WORKER):
 *   - batch-norm + ReLU (a.relu = 1): forward train (y = max(BN(x), 0), saved statistics),
 *     forward eval (running statistics), and the backward that masks dy by y > 0 before the BN
 *     backward (dx written and accumulated, dgamma/dbeta RW and one REDUX contribution per
 *     device). dy is RW in that task (the CUDA side masks it in place), so every backward task
 *     gets its own copy of dy. The CPU results are also checked against the unfused kernels
 *     (max(BN(x), 0); the plain BN backward on dy * (y > 0)), and the inputs make the mask bite
 *     (a good share of y is 0).
 *   - conv2d with the bias fused (a.bias = 1): forward (y = conv(x, w) + b) and backward filter
 *     (dw +=, db += sum of dy), against a double-precision reference as well.
 * Runs with DNN_CUDA_MATH=fp32 (gpu_util.h) unless set: FP32 tolerances; under tf32 the conv
 * tolerances widen to gpu_conv2d.c's 5e-3. Skipped (77) only without a CUDA or a CPU worker. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batchnorm.h"
#include "conv2d.h"
#include "vec.h"
#include "gpu_util.h"
#include "test_util.h"

enum { GPU = 0, CPU = 1, NDEV = 2 };
static int workers[NDEV];
static double conv_tol = 1e-4;

/* ------------------------------------------------------------- batch norm + ReLU */

static void test_bn_relu(int N, int C, int HW)
{
	dnn_batchnorm_args a = {.N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f, .relu = 1};
	size_t nx = (size_t)N * C * HW;
	float *x = alloc_f(nx), *dy = alloc_f(nx), *dx0 = alloc_f(nx), *gamma = alloc_f(C), *beta = alloc_f(C);
	float *run0 = alloc_f(2 * C), *g0 = alloc_f(C);
	for (int n = 0; n < N; n++)
		for (int c = 0; c < C; c++)
			for (int i = 0; i < HW; i++)
				x[((size_t)n * C + c) * HW + i] = 0.4f * (float)(c % 5) - 0.8f +
								  (0.5f + 0.1f * (float)(c % 3)) * test_rng_uniform(-1, 1);
	test_fill_uniform(dy, nx, -1, 1);
	test_fill_uniform(dx0, nx, -1, 1);
	test_fill_uniform(gamma, C, 0.5f, 1.5f);
	test_fill_uniform(beta, C, -0.3f, 0.3f);
	test_fill_uniform(g0, C, -1, 1);
	for (int c = 0; c < C; c++) {
		run0[c] = test_rng_uniform(-0.5f, 0.5f);
		run0[C + c] = test_rng_uniform(0.5f, 1.5f);
	}
	float *y[NDEV], *saved[NDEV], *ye[NDEV], *dxw[NDEV], *dxa[NDEV], *dg[NDEV], *db[NDEV];
	float *dyw[NDEV], *dya[NDEV], *dyr[NDEV];
	starpu_data_handle_t hx = reg_f(x, nx), hg = reg_f(gamma, C), hb = reg_f(beta, C), hrun = reg_f(run0, 2 * C);
	starpu_data_handle_t hy[NDEV], hs[NDEV], hye[NDEV], hdxw[NDEV], hdxa[NDEV], hdg[NDEV], hdb[NDEV];
	starpu_data_handle_t hdyw[NDEV], hdya[NDEV], hdyr[NDEV], hdxr[NDEV];
	float *dxr[NDEV];
	for (int d = 0; d < NDEV; d++) {
		y[d] = alloc_f(nx), ye[d] = alloc_f(nx), saved[d] = alloc_f(3 * C);
		fill_nan(y[d], nx), fill_nan(ye[d], nx), fill_nan(saved[d], 3 * C);
		dxw[d] = alloc_f(nx), dxr[d] = alloc_f(nx);
		fill_nan(dxw[d], nx), fill_nan(dxr[d], nx);
		dxa[d] = gpu_copy_f(dx0, nx), dg[d] = gpu_copy_f(g0, C), db[d] = gpu_copy_f(g0, C);
		dyw[d] = gpu_copy_f(dy, nx), dya[d] = gpu_copy_f(dy, nx), dyr[d] = gpu_copy_f(dy, nx);
		hy[d] = reg_f(y[d], nx), hye[d] = reg_f(ye[d], nx), hs[d] = reg_f(saved[d], 3 * C);
		hdxw[d] = reg_f(dxw[d], nx), hdxa[d] = reg_f(dxa[d], nx), hdxr[d] = reg_f(dxr[d], nx);
		hdg[d] = reg_f(dg[d], C), hdb[d] = reg_f(db[d], C);
		hdyw[d] = reg_f(dyw[d], nx), hdya[d] = reg_f(dya[d], nx), hdyr[d] = reg_f(dyr[d], nx);
	}
	float *rg = gpu_copy_f(g0, C), *rb = gpu_copy_f(g0, C);
	starpu_data_handle_t hrg = reg_f(rg, C), hrb = reg_f(rb, C);
	dnn_vec_set_sum_redux(hrg);
	dnn_vec_set_sum_redux(hrb);

	for (int d = 0; d < NDEV; d++) {
		struct starpu_data_descr ft[] = {
			{hx, STARPU_R}, {hg, STARPU_R}, {hb, STARPU_R}, {hy[d], STARPU_W}, {hs[d], STARPU_W}};
		gpu_task(&cl_batchnorm_fwd_train, workers[d], &a, sizeof a, ft, 5, "bn_relu_fwd_train");
		struct starpu_data_descr fe[] = {
			{hx, STARPU_R}, {hg, STARPU_R}, {hb, STARPU_R}, {hrun, STARPU_R}, {hye[d], STARPU_W}};
		gpu_task(&cl_batchnorm_fwd_eval, workers[d], &a, sizeof a, fe, 5, "bn_relu_fwd_eval");
	}
	/* Both devices' backward tasks read the CPU's forward outputs (y, saved), as after a forward
	 * elsewhere. Buffer order: x, gamma, saved, dy (RW), dx, dgamma, dbeta, y. */
	for (int d = 0; d < NDEV; d++) {
		dnn_batchnorm_args b = a;
		b.accumulate_dx = 0;
		struct starpu_data_descr bw[] = {{hx, STARPU_R},       {hg, STARPU_R},      {hs[CPU], STARPU_R},
						 {hdyw[d], STARPU_RW}, {hdxw[d], STARPU_W}, {hdg[d], STARPU_RW},
						 {hdb[d], STARPU_RW},  {hy[CPU], STARPU_R}};
		gpu_task(&cl_batchnorm_bwd, workers[d], &b, sizeof b, bw, 8, "bn_relu_bwd");
		b.accumulate_dx = 1;
		struct starpu_data_descr ba[] = {{hx, STARPU_R},       {hg, STARPU_R},       {hs[CPU], STARPU_R},
						 {hdya[d], STARPU_RW}, {hdxa[d], STARPU_RW}, {hrg, STARPU_REDUX},
						 {hrb, STARPU_REDUX},  {hy[CPU], STARPU_R}};
		gpu_task(&cl_batchnorm_bwd, workers[d], &b, sizeof b, ba, 8, "bn_relu_bwd");
	}
	starpu_data_handle_t shared[] = {hx, hg, hb, hrun, hrg, hrb};
	for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++)
		starpu_data_unregister(shared[i]);
	for (int d = 0; d < NDEV; d++) {
		starpu_data_handle_t all[] = {hy[d],   hye[d],  hs[d],   hdxw[d], hdxa[d], hdxr[d],
					      hdg[d],  hdb[d],  hdyw[d], hdya[d], hdyr[d]};
		for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
			starpu_data_unregister(all[i]);
	}

	/* References from the unfused CPU kernels. */
	dnn_batchnorm_args u = a;
	u.relu = 0;
	float *yu = alloc_f(nx), *su = alloc_f(3 * C), *yeu = alloc_f(nx), *dym = alloc_f(nx), *dxu = alloc_f(nx);
	float *tg = calloc(C, sizeof(float)), *tb = calloc(C, sizeof(float));
	dnn_batchnorm_forward_train_cpu(yu, su, x, gamma, beta, &u);
	dnn_batchnorm_forward_eval_cpu(yeu, x, gamma, beta, run0, &u);
	size_t zeros = 0;
	for (size_t i = 0; i < nx; i++) {
		yu[i] = fmaxf(yu[i], 0.0f);
		yeu[i] = fmaxf(yeu[i], 0.0f);
		zeros += y[CPU][i] == 0.0f;
		dym[i] = y[CPU][i] > 0.0f ? dy[i] : 0.0f;
	}
	dnn_batchnorm_backward_cpu(dxu, tg, tb, x, gamma, saved[CPU], dym, &u);
	float *eg = alloc_f(C), *eb = alloc_f(C), *ag = alloc_f(C), *ab = alloc_f(C);
	for (int c = 0; c < C; c++) {
		eg[c] = g0[c] + 2 * tg[c]; /* REDUX: the initial value + one contribution per device */
		eb[c] = g0[c] + 2 * tb[c];
		ag[c] = g0[c] + tg[c];
		ab[c] = g0[c] + tb[c];
	}

	char what[160];
#define CMP(name, got, want, n, tol)                                                        \
	do {                                                                                \
		snprintf(what, sizeof what, "bn+relu %dx%dx%d: %s", N, C, HW, name);         \
		test_close_mixed_f(what, got, want, n, tol);                                      \
	} while (0)
	TEST_CHECK(nx < 8 || zeros * 10 >= nx, "bn+relu %dx%dx%d: only %zu of %zu outputs are 0: the mask is not tested",
		   N, C, HW, zeros, nx);
	CMP("cpu fused fwd = max(BN(x), 0)", y[CPU], yu, nx, 1e-5);
	CMP("cpu fused eval = max(BN_eval(x), 0)", ye[CPU], yeu, nx, 1e-5);
	CMP("cpu fused bwd dx = BN bwd of dy*(y>0)", dxw[CPU], dxu, nx, 1e-5);
	CMP("cpu fused bwd dgamma", dg[CPU], ag, C, 1e-5);
	CMP("cpu fused bwd dbeta", db[CPU], ab, C, 1e-5);
	CMP("fwd train y (cuda vs cpu)", y[GPU], y[CPU], nx, 1e-4);
	CMP("fwd train saved (cuda vs cpu)", saved[GPU], saved[CPU], 3 * C, 1e-4);
	CMP("fwd eval y (cuda vs cpu)", ye[GPU], ye[CPU], nx, 1e-4);
	CMP("bwd dx W (cuda vs cpu)", dxw[GPU], dxw[CPU], nx, 2e-4);
	CMP("bwd dx RW (cuda vs cpu)", dxa[GPU], dxa[CPU], nx, 2e-4);
	CMP("bwd dgamma RW (cuda vs cpu)", dg[GPU], dg[CPU], C, 2e-4);
	CMP("bwd dbeta RW (cuda vs cpu)", db[GPU], db[CPU], C, 2e-4);
	CMP("bwd dgamma REDUX (both devices)", rg, eg, C, 2e-4);
	CMP("bwd dbeta REDUX (both devices)", rb, eb, C, 2e-4);
#undef CMP
	printf("bn+relu %dx%dx%d: %zu of %zu outputs masked\n", N, C, HW, zeros, nx);

	free(x), free(dy), free(dx0), free(gamma), free(beta), free(run0), free(g0), free(rg), free(rb);
	free(yu), free(su), free(yeu), free(dym), free(dxu), free(tg), free(tb), free(eg), free(eb), free(ag),
		free(ab);
	for (int d = 0; d < NDEV; d++) {
		free(y[d]), free(ye[d]), free(saved[d]), free(dxw[d]), free(dxa[d]), free(dxr[d]), free(dg[d]),
			free(db[d]), free(dyw[d]), free(dya[d]), free(dyr[d]);
	}
}

/* ------------------------------------------------------------- conv2d + bias */

static void test_conv_bias(dnn_conv2d_args a)
{
	a.bias = 1;
	char name[160], what[220];
	snprintf(name, sizeof name, "conv+bias N%d C%d %dx%d K%d %dx%d st%d pad%d", a.N, a.C, a.H, a.W, a.K, a.R,
		 a.S, a.stride, a.pad);
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "%s: args rejected", name);
		return;
	}
	size_t nx = (size_t)a.N * a.C * a.H * a.W, nw = (size_t)a.K * a.C * a.R * a.S,
	       ny = (size_t)a.N * a.K * a.P * a.Q, PQ = (size_t)a.P * a.Q;
	float *x = alloc_f(nx), *w = alloc_f(nw), *b = alloc_f(a.K), *dy = alloc_f(ny), *dw0 = alloc_f(nw),
	      *db0 = alloc_f(a.K);
	test_fill_uniform(x, nx, -1, 1);
	test_fill_uniform(w, nw, -0.5f, 0.5f);
	test_fill_uniform(b, a.K, -1, 1);
	test_fill_uniform(dy, ny, -1, 1);
	test_fill_uniform(dw0, nw, -1, 1);
	test_fill_uniform(db0, a.K, -1, 1);
	starpu_data_handle_t hx = reg_f(x, nx), hw = reg_f(w, nw), hb = reg_f(b, a.K), hdy = reg_f(dy, ny);
	float *y[NDEV], *dw[NDEV], *db[NDEV];
	starpu_data_handle_t hy[NDEV], hdw[NDEV], hdb[NDEV];
	for (int d = 0; d < NDEV; d++) {
		y[d] = alloc_f(ny);
		fill_nan(y[d], ny);
		dw[d] = gpu_copy_f(dw0, nw), db[d] = gpu_copy_f(db0, a.K);
		hy[d] = reg_f(y[d], ny), hdw[d] = reg_f(dw[d], nw), hdb[d] = reg_f(db[d], a.K);
	}
	for (int d = 0; d < NDEV; d++) {
		struct starpu_data_descr f[] = {{hx, STARPU_R}, {hw, STARPU_R}, {hy[d], STARPU_W}, {hb, STARPU_R}};
		gpu_task(&cl_conv2d_fwd, workers[d], &a, sizeof a, f, 4, "conv_bias_fwd");
		struct starpu_data_descr bf[] = {{hx, STARPU_R}, {hdy, STARPU_R}, {hdw[d], STARPU_RW}, {hdb[d], STARPU_RW}};
		gpu_task(&cl_conv2d_bwd_filter, workers[d], &a, sizeof a, bf, 4, "conv_bias_bwd_filter");
	}
	starpu_data_unregister(hx), starpu_data_unregister(hw), starpu_data_unregister(hb),
		starpu_data_unregister(hdy);
	for (int d = 0; d < NDEV; d++)
		starpu_data_unregister(hy[d]), starpu_data_unregister(hdw[d]), starpu_data_unregister(hdb[d]);

	/* Double-precision references: y = conv + b, db = db0 + sum of dy over N, P, Q. */
	double *yr = alloc_d(ny);
	conv2d_forward_ref(yr, x, w, &a);
	float *yrf = alloc_f(ny), *dbr = alloc_f(a.K);
	for (int n = 0; n < a.N; n++)
		for (int k = 0; k < a.K; k++)
			for (size_t i = 0; i < PQ; i++) {
				size_t j = ((size_t)n * a.K + k) * PQ + i;
				yrf[j] = (float)(yr[j] + b[k]);
			}
	for (int k = 0; k < a.K; k++) {
		double s = db0[k];
		for (int n = 0; n < a.N; n++)
			for (size_t i = 0; i < PQ; i++)
				s += dy[((size_t)n * a.K + k) * PQ + i];
		dbr[k] = (float)s;
	}
	snprintf(what, sizeof what, "%s: cpu fwd vs reference", name);
	gpu_close_scaled(what, y[CPU], yrf, ny, 1e-4);
	snprintf(what, sizeof what, "%s: cpu db vs reference", name);
	gpu_close_scaled(what, db[CPU], dbr, a.K, 1e-5);
	snprintf(what, sizeof what, "%s: cuda db vs reference", name);
	gpu_close_scaled(what, db[GPU], dbr, a.K, 1e-5);
	snprintf(what, sizeof what, "%s: fwd y (cuda vs cpu)", name);
	gpu_close_scaled(what, y[GPU], y[CPU], ny, conv_tol);
	snprintf(what, sizeof what, "%s: bwd_filter dw (cuda vs cpu)", name);
	gpu_close_scaled(what, dw[GPU], dw[CPU], nw, 2 * conv_tol);
	snprintf(what, sizeof what, "%s: bwd_filter db (cuda vs cpu)", name);
	gpu_close_scaled(what, db[GPU], db[CPU], a.K, 1e-5);
	free(x), free(w), free(b), free(dy), free(dw0), free(db0), free(yr), free(yrf), free(dbr);
	for (int d = 0; d < NDEV; d++)
		free(y[d]), free(dw[d]), free(db[d]);
}

int main(int argc, char **argv)
{
	int rc = gpu_setup(&argc, &argv, "gpu_fused", 1);
	if (rc != 0)
		return rc;
	workers[GPU] = gpu_cuda_worker;
	workers[CPU] = gpu_cpu_worker;
	const char *math = getenv("DNN_CUDA_MATH");
	if (math && strcmp(math, "fp32") != 0)
		conv_tol = 5e-3; /* TF32 tensor cores: gpu_conv2d.c's tolerance */
	test_rng_seed(4242);

	test_bn_relu(4, 3, 25);
	test_bn_relu(1, 5, 7);
	test_bn_relu(8, 16, 196);
	test_bn_relu(32, 64, 49);
	test_bn_relu(16, 128, 64);

	test_conv_bias(conv_shape(2, 1, 28, 28, 6, 5, 5, 1, 2, 1));  /* lenet5's c1 */
	test_conv_bias(conv_shape(4, 6, 14, 14, 16, 5, 5, 1, 0, 1)); /* lenet5's c2 */
	test_conv_bias(conv_shape(3, 8, 9, 11, 12, 3, 3, 1, 1, 1));
	test_conv_bias(conv_shape(4, 16, 16, 16, 32, 3, 3, 2, 1, 1));
	test_conv_bias(conv_shape(8, 64, 14, 14, 64, 1, 1, 1, 0, 1));
	test_conv_bias(conv_shape(2, 3, 32, 32, 64, 7, 7, 2, 3, 1));

	test_starpu_shutdown();
	return test_report("gpu_fused");
}
