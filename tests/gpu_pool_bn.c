/* gpu_pool_bn — every max-pooling and batch-norm codelet run on a CUDA worker and on a CPU worker
 * (STARPU_EXECUTE_ON_WORKER) on the same inputs; the results must agree. The backward tasks of
 * both devices read the CPU's forward outputs, as they would after a forward on another device.
 * The REDUX gradients get one contribution from each device. Skipped (77) without a CUDA worker. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batchnorm.h"
#include "vec.h"
#include "maxpool.h"
#include "test_util.h"

enum { GPU = 0, CPU = 1, NDEV = 2 };
static int workers[NDEV];
static const char *dev_name[NDEV] = {"cuda", "cpu"};

/* ------------------------------------------------------------------ maxpool */

static void test_maxpool(int N, int C, int H, int W, int k, int stride, int pad)
{
	dnn_maxpool_args a = {.N = N, .C = C, .H = H, .W = W, .k = k, .stride = stride, .pad = pad};
	TEST_CHECK(dnn_maxpool_args_finish(&a) == 0, "maxpool args rejected");
	size_t nx = (size_t)N * C * H * W, ny = (size_t)N * C * a.P * a.Q;
	float *x = alloc_f(nx), *dy = alloc_f(ny), *dx0 = alloc_f(nx);
	float *y[NDEV], *dxw[NDEV], *dxa[NDEV];
	// distinct values (no ties, so the argmax is unambiguous), shuffled
	for (size_t i = 0; i < nx; i++)
		x[i] = (float)((double)i / (double)nx * 4.0 - 2.0);
	for (size_t i = nx - 1; i > 0; i--) {
		size_t j = (size_t)test_rng_int(0, (int)i);
		float t = x[i];
		x[i] = x[j];
		x[j] = t;
	}
	test_fill_uniform(dy, ny, -1, 1);
	test_fill_uniform(dx0, nx, -1, 1);
	starpu_data_handle_t hx = reg_f(x, nx), hdy = reg_f(dy, ny), hy[NDEV], hdxw[NDEV], hdxa[NDEV];
	for (int d = 0; d < NDEV; d++) {
		y[d] = alloc_f(ny);
		dxw[d] = alloc_f(nx);
		dxa[d] = alloc_f(nx);
		fill_nan(y[d], ny);
		fill_nan(dxw[d], nx);
		memcpy(dxa[d], dx0, nx * sizeof(float));
		hy[d] = reg_f(y[d], ny);
		hdxw[d] = reg_f(dxw[d], nx);
		hdxa[d] = reg_f(dxa[d], nx);
	}
	for (int d = 0; d < NDEV; d++) {
		struct starpu_data_descr f[] = {{hx, STARPU_R}, {hy[d], STARPU_W}};
		test_task(&cl_maxpool_fwd, workers[d], &a, sizeof a, f, 2, "maxpool_fwd");
	}
	for (int d = 0; d < NDEV; d++) {
		dnn_maxpool_args b = a;
		struct starpu_data_descr bw[] = {
			{hx, STARPU_R}, {hy[CPU], STARPU_R}, {hdy, STARPU_R}, {hdxw[d], STARPU_W}};
		test_task(&cl_maxpool_bwd, workers[d], &b, sizeof b, bw, 4, "maxpool_bwd");
		b.accumulate_dx = 1;
		struct starpu_data_descr ba[] = {
			{hx, STARPU_R}, {hy[CPU], STARPU_R}, {hdy, STARPU_R}, {hdxa[d], STARPU_RW}};
		test_task(&cl_maxpool_bwd, workers[d], &b, sizeof b, ba, 4, "maxpool_bwd");
	}
	starpu_data_unregister(hx);
	starpu_data_unregister(hdy);
	for (int d = 0; d < NDEV; d++) {
		starpu_data_unregister(hy[d]);
		starpu_data_unregister(hdxw[d]);
		starpu_data_unregister(hdxa[d]);
	}
	char what[128];
	snprintf(what, sizeof what, "maxpool %dx%dx%dx%d k%d s%d p%d: y", N, C, H, W, k, stride, pad);
	test_close_mixed_f(what, y[GPU], y[CPU], ny, 0);
	snprintf(what, sizeof what, "maxpool %dx%dx%dx%d k%d s%d p%d: dx (W)", N, C, H, W, k, stride, pad);
	test_close_mixed_f(what, dxw[GPU], dxw[CPU], nx, 1e-6);
	snprintf(what, sizeof what, "maxpool %dx%dx%dx%d k%d s%d p%d: dx (RW)", N, C, H, W, k, stride, pad);
	test_close_mixed_f(what, dxa[GPU], dxa[CPU], nx, 1e-6);
	free(x);
	free(dy);
	free(dx0);
	for (int d = 0; d < NDEV; d++) {
		free(y[d]);
		free(dxw[d]);
		free(dxa[d]);
	}
}

/* ------------------------------------------------------------------ batchnorm */

static void test_bn(int N, int C, int HW)
{
	dnn_batchnorm_args a = {.N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f};
	size_t nx = (size_t)N * C * HW;
	float *x = alloc_f(nx), *dy = alloc_f(nx), *dx0 = alloc_f(nx), *gamma = alloc_f(C), *beta = alloc_f(C);
	float *run0 = alloc_f(2 * C), *g0 = alloc_f(C);
	float *y[NDEV], *saved[NDEV], *run[NDEV], *ye[NDEV], *dxw[NDEV], *dxa[NDEV], *dg[NDEV], *db[NDEV];
	for (int n = 0; n < N; n++)
		for (int c = 0; c < C; c++)
			for (int i = 0; i < HW; i++)
				x[((size_t)n * C + c) * HW + i] =
					0.3f * (float)(c % 7) - 1.0f + (0.5f + 0.1f * (float)(c % 5)) *
									  test_rng_uniform(-1, 1);
	test_fill_uniform(dy, nx, -1, 1);
	test_fill_uniform(dx0, nx, -1, 1);
	test_fill_uniform(gamma, C, 0.5f, 1.5f);
	test_fill_uniform(beta, C, -0.5f, 0.5f);
	test_fill_uniform(g0, C, -1, 1);
	for (int c = 0; c < C; c++) {
		run0[c] = test_rng_uniform(-0.5f, 0.5f);
		run0[C + c] = test_rng_uniform(0.5f, 1.5f);
	}
	starpu_data_handle_t hx = reg_f(x, nx), hdy = reg_f(dy, nx), hg = reg_f(gamma, C), hb = reg_f(beta, C);
	starpu_data_handle_t hy[NDEV], hs[NDEV], hr[NDEV], hye[NDEV], hdxw[NDEV], hdxa[NDEV], hdg[NDEV],
		hdb[NDEV];
	for (int d = 0; d < NDEV; d++) {
		y[d] = alloc_f(nx);
		ye[d] = alloc_f(nx);
		saved[d] = alloc_f(3 * C);
		run[d] = alloc_f(2 * C);
		dxw[d] = alloc_f(nx);
		dxa[d] = alloc_f(nx);
		dg[d] = alloc_f(C);
		db[d] = alloc_f(C);
		fill_nan(y[d], nx);
		fill_nan(ye[d], nx);
		fill_nan(saved[d], 3 * C);
		fill_nan(dxw[d], nx);
		memcpy(run[d], run0, 2 * C * sizeof(float));
		memcpy(dxa[d], dx0, nx * sizeof(float));
		memcpy(dg[d], g0, C * sizeof(float));
		memcpy(db[d], g0, C * sizeof(float));
		hy[d] = reg_f(y[d], nx);
		hye[d] = reg_f(ye[d], nx);
		hs[d] = reg_f(saved[d], 3 * C);
		hr[d] = reg_f(run[d], 2 * C);
		hdxw[d] = reg_f(dxw[d], nx);
		hdxa[d] = reg_f(dxa[d], nx);
		hdg[d] = reg_f(dg[d], C);
		hdb[d] = reg_f(db[d], C);
	}
	// one REDUX pair, one contribution from each device
	float *rg = alloc_f(C), *rb = alloc_f(C), *dxs = alloc_f(nx);
	memcpy(rg, g0, C * sizeof(float));
	memcpy(rb, g0, C * sizeof(float));
	starpu_data_handle_t hrg = reg_f(rg, C), hrb = reg_f(rb, C);
	dnn_vec_set_sum_redux(hrg);
	dnn_vec_set_sum_redux(hrb);

	for (int d = 0; d < NDEV; d++) {
		struct starpu_data_descr ft[] = {
			{hx, STARPU_R}, {hg, STARPU_R}, {hb, STARPU_R}, {hy[d], STARPU_W}, {hs[d], STARPU_W}};
		test_task(&cl_batchnorm_fwd_train, workers[d], &a, sizeof a, ft, 5, "bn_fwd_train");
		struct starpu_data_descr ru[] = {{hs[d], STARPU_R}, {hr[d], STARPU_RW}};
		test_task(&cl_batchnorm_running, workers[d], &a, sizeof a, ru, 2, "bn_running");
	}
	for (int d = 0; d < NDEV; d++) {
		struct starpu_data_descr fe[] = {
			{hx, STARPU_R}, {hg, STARPU_R}, {hb, STARPU_R}, {hr[CPU], STARPU_R}, {hye[d], STARPU_W}};
		test_task(&cl_batchnorm_fwd_eval, workers[d], &a, sizeof a, fe, 5, "bn_fwd_eval");
		dnn_batchnorm_args b = a;
		struct starpu_data_descr bw[] = {{hx, STARPU_R},       {hg, STARPU_R},    {hs[CPU], STARPU_R},
						 {hdy, STARPU_R},      {hdxw[d], STARPU_W}, {hdg[d], STARPU_RW},
						 {hdb[d], STARPU_RW}};
		test_task(&cl_batchnorm_bwd, workers[d], &b, sizeof b, bw, 7, "bn_bwd");
		b.accumulate_dx = 1;
		struct starpu_data_descr ba[] = {{hx, STARPU_R},     {hg, STARPU_R},       {hs[CPU], STARPU_R},
						 {hdy, STARPU_R},    {hdxa[d], STARPU_RW}, {hrg, STARPU_REDUX},
						 {hrb, STARPU_REDUX}};
		test_task(&cl_batchnorm_bwd, workers[d], &b, sizeof b, ba, 7, "bn_bwd");
	}
	starpu_data_handle_t shared[] = {hx, hdy, hg, hb, hrg, hrb};
	for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++)
		starpu_data_unregister(shared[i]);
	for (int d = 0; d < NDEV; d++) {
		starpu_data_handle_t all[] = {hy[d], hye[d], hs[d], hr[d], hdxw[d], hdxa[d], hdg[d], hdb[d]};
		for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
			starpu_data_unregister(all[i]);
	}

	// REDUX reference: g0 + 2 * (the plain CPU kernel's gradient)
	float *tg = calloc(C, sizeof(float)), *tb = calloc(C, sizeof(float));
	dnn_batchnorm_backward_cpu(dxs, tg, tb, x, gamma, saved[CPU], dy, &a);
	float *eg = alloc_f(C), *eb = alloc_f(C);
	for (int c = 0; c < C; c++) {
		eg[c] = g0[c] + 2 * tg[c];
		eb[c] = g0[c] + 2 * tb[c];
	}

	char what[128];
#define CMP(name, got, want, n, tol)                                                     \
	do {                                                                             \
		snprintf(what, sizeof what, "bn %dx%dx%d: %s", N, C, HW, name);           \
		test_close_mixed_f(what, got, want, n, tol);                                   \
	} while (0)
	for (int d = 0; d < NDEV; d++)
		printf("bn %dx%dx%d ran on %s worker %d\n", N, C, HW, dev_name[d], workers[d]);
	CMP("train y", y[GPU], y[CPU], nx, 1e-4);
	CMP("saved", saved[GPU], saved[CPU], 3 * C, 1e-4);
	CMP("running", run[GPU], run[CPU], 2 * C, 1e-5);
	CMP("eval y", ye[GPU], ye[CPU], nx, 1e-4);
	CMP("dx (W)", dxw[GPU], dxw[CPU], nx, 2e-4);
	CMP("dx (RW)", dxa[GPU], dxa[CPU], nx, 2e-4);
	CMP("dgamma (RW)", dg[GPU], dg[CPU], C, 2e-4);
	CMP("dbeta (RW)", db[GPU], db[CPU], C, 2e-4);
	CMP("dgamma (REDUX, both devices)", rg, eg, C, 2e-4);
	CMP("dbeta (REDUX, both devices)", rb, eb, C, 2e-4);
#undef CMP

	free(x);
	free(dy);
	free(dx0);
	free(gamma);
	free(beta);
	free(run0);
	free(g0);
	free(rg);
	free(rb);
	free(dxs);
	free(tg);
	free(tb);
	free(eg);
	free(eb);
	for (int d = 0; d < NDEV; d++) {
		free(y[d]);
		free(ye[d]);
		free(saved[d]);
		free(run[d]);
		free(dxw[d]);
		free(dxa[d]);
		free(dg[d]);
		free(db[d]);
	}
}

/* --batchnorm global's codelets (batchnorm.h) on each device, on the same inputs: the forward
 * sums (REDUX into a double handle, one contribution from each device, against twice the CPU
 * kernel's), the normalisation from given sums, the backward sums and dx, with the fused relu. */
static void test_bn_global(int N, int C, int HW, int relu)
{
	dnn_batchnorm_args a = {.N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f, .relu = relu, .global_n = 2 * N};
	const size_t nx = (size_t)N * C * HW;
	float *x = alloc_f(nx), *dy = alloc_f(nx), *gamma = alloc_f(C), *beta = alloc_f(C);
	for (size_t i = 0; i < nx; i++)
		x[i] = 0.7f + test_rng_uniform(-1, 1);
	test_fill_uniform(dy, nx, -1, 1);
	test_fill_uniform(gamma, C, 0.5f, 1.5f);
	test_fill_uniform(beta, C, -0.5f, 0.5f);
	double *sums = calloc(2 * (size_t)C, sizeof(double)), *ref = calloc(2 * (size_t)C, sizeof(double));
	dnn_batchnorm_sums_fwd_cpu(ref, x, &a);
	for (int c = 0; c < 2 * C; c++)
		ref[c] *= 2; /* two contributions: global_n = 2N */
	starpu_data_handle_t hx = reg_f(x, nx), hdy = reg_f(dy, nx), hg = reg_f(gamma, C), hb = reg_f(beta, C), hS;
	starpu_vector_data_register(&hS, STARPU_MAIN_RAM, (uintptr_t)sums, 2 * (uint32_t)C, sizeof(double));
	dnn_bn_set_dsum_redux(hS);
	for (int d = 0; d < NDEV; d++) {
		struct starpu_data_descr sf[] = {{hx, STARPU_R}, {hS, STARPU_REDUX}};
		test_task(&cl_batchnorm_sums_fwd, workers[d], &a, sizeof a, sf, 2, "bn_sums_fwd");
	}
	float *y[NDEV], *saved[NDEV], *dx[NDEV], *dg[NDEV], *db[NDEV];
	double *T[NDEV];
	starpu_data_handle_t hy[NDEV], hs[NDEV], hdx[NDEV], hdg[NDEV], hdb[NDEV], hT[NDEV];
	for (int d = 0; d < NDEV; d++) {
		y[d] = alloc_f(nx), saved[d] = alloc_f(3 * C), dx[d] = alloc_f(nx);
		dg[d] = calloc(C, sizeof(float)), db[d] = calloc(C, sizeof(float)), T[d] = calloc(2 * (size_t)C, sizeof(double));
		fill_nan(y[d], nx), fill_nan(saved[d], 3 * C), fill_nan(dx[d], nx);
		hy[d] = reg_f(y[d], nx), hs[d] = reg_f(saved[d], 3 * C), hdx[d] = reg_f(dx[d], nx);
		hdg[d] = reg_f(dg[d], C), hdb[d] = reg_f(db[d], C);
		starpu_vector_data_register(&hT[d], STARPU_MAIN_RAM, (uintptr_t)T[d], 2 * (uint32_t)C, sizeof(double));
		struct starpu_data_descr fg[] = {{hx, STARPU_R}, {hg, STARPU_R}, {hb, STARPU_R}, {hS, STARPU_R}, {hy[d], STARPU_W}, {hs[d], STARPU_W}};
		test_task(&cl_batchnorm_fwd_global, workers[d], &a, sizeof a, fg, 6, "bn_fwd_global");
	}
	for (int d = 0; d < NDEV; d++) { /* both devices read the CPU's forward */
		struct starpu_data_descr sb[] = {{hx, STARPU_R}, {hs[CPU], STARPU_R}, {hdy, STARPU_R}, {hT[d], STARPU_RW},
						 {hdg[d], STARPU_RW}, {hdb[d], STARPU_RW}, {hy[CPU], STARPU_R}};
		test_task(&cl_batchnorm_sums_bwd, workers[d], &a, sizeof a, sb, relu ? 7 : 6, "bn_sums_bwd");
		struct starpu_data_descr bg[] = {{hx, STARPU_R}, {hg, STARPU_R}, {hs[CPU], STARPU_R}, {hdy, STARPU_R},
						 {hT[CPU], STARPU_R}, {hdx[d], STARPU_W}, {hy[CPU], STARPU_R}};
		test_task(&cl_batchnorm_bwd_global, workers[d], &a, sizeof a, bg, relu ? 7 : 6, "bn_bwd_global");
	}
	starpu_task_wait_for_all();
	starpu_data_handle_t shared[] = {hx, hdy, hg, hb, hS};
	for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++)
		starpu_data_unregister(shared[i]);
	for (int d = 0; d < NDEV; d++) {
		starpu_data_handle_t all[] = {hy[d], hs[d], hdx[d], hdg[d], hdb[d], hT[d]};
		for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
			starpu_data_unregister(all[i]);
	}
	char what[128];
	float *fs = alloc_f(2 * C), *fr = alloc_f(2 * C), *t0 = alloc_f(2 * C), *t1 = alloc_f(2 * C);
	for (int c = 0; c < 2 * C; c++)
		fs[c] = (float)sums[c], fr[c] = (float)ref[c], t0[c] = (float)T[GPU][c], t1[c] = (float)T[CPU][c];
#define CMP(name, got, want, n, tol)                                                                      \
	do {                                                                                              \
		snprintf(what, sizeof what, "bn global %dx%dx%d relu=%d: %s", N, C, HW, relu, name);        \
		test_close_mixed_f(what, got, want, n, tol);                                              \
	} while (0)
	CMP("fwd sums (REDUX, both devices)", fs, fr, 2 * C, 1e-5);
	CMP("y", y[GPU], y[CPU], nx, 1e-4);
	CMP("saved", saved[GPU], saved[CPU], 3 * C, 1e-5);
	CMP("bwd sums", t0, t1, 2 * C, 1e-4);
	CMP("dgamma", dg[GPU], dg[CPU], C, 1e-4);
	CMP("dbeta", db[GPU], db[CPU], C, 1e-4);
	CMP("dx", dx[GPU], dx[CPU], nx, 1e-4);
#undef CMP
	free(x), free(dy), free(gamma), free(beta), free(sums), free(ref), free(fs), free(fr), free(t0), free(t1);
	for (int d = 0; d < NDEV; d++)
		free(y[d]), free(saved[d]), free(dx[d]), free(dg[d]), free(db[d]), free(T[d]);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	if (starpu_cuda_worker_get_count() == 0 || starpu_cpu_worker_get_count() == 0) {
		printf("SKIP: gpu_pool_bn needs a CUDA worker and a CPU worker (cuda %u, cpu %u)\n",
		       starpu_cuda_worker_get_count(), starpu_cpu_worker_get_count());
		test_starpu_shutdown();
		return TEST_SKIP;
	}
	unsigned ncuda = starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, &workers[GPU], 1);
	unsigned ncpu = starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, &workers[CPU], 1);
	if (ncuda != 1 || ncpu != 1) {
		fprintf(stderr, "FAIL: worker ids not found (cuda %u, cpu %u)\n", ncuda, ncpu);
		return 1;
	}
	test_rng_seed(23);

	test_maxpool(4, 8, 15, 13, 3, 2, 1);
	test_maxpool(2, 3, 9, 7, 2, 2, 0);
	test_maxpool(1, 4, 6, 5, 3, 1, 1);
	test_maxpool(8, 16, 32, 32, 3, 2, 1);

	test_bn(4, 3, 25);
	test_bn(1, 5, 7);
	test_bn_global(4, 3, 25, 0);
	test_bn_global(2, 16, 49, 1);
	test_bn(6, 2, 1);
	test_bn(8, 16, 196);
	test_bn(32, 64, 49);

	test_starpu_shutdown();
	return test_report("gpu_pool_bn");
}
