/* unit_bn_global — the codelets of --batchnorm global (codelets/batchnorm.h), as StarPU tasks:
 *  1. A batch of N samples split into K chunks: each chunk's sums go into one double handle
 *     (STARPU_REDUX, with its zero/add methods), every chunk normalises with them; the chunks'
 *     outputs and saved statistics must equal the one-chunk local kernel on the whole batch, and
 *     a double reference. The backward the same: per-chunk sums (REDUX), then per-chunk dx,
 *     against the local backward on the whole batch (dx, dgamma, dbeta), with and without the
 *     fused ReLU, dx written and accumulated.
 *  2. The variance's accuracy from the sums (the numerically safer pair of batchnorm.h) for
 *     channels with mean^2 / var = 1e2 .. 1e8, against a two-pass double reference, beside what a
 *     plain float sum of x^2 (per row, folded in double, as the local kernel's sums) would give:
 *     printed, the figures of docs/batchnorm.md. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batchnorm.h"
#include "test_util.h"
#include "vec.h"

static starpu_data_handle_t reg_d(double *p, size_t n)
{
	starpu_data_handle_t h;
	starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)p, (uint32_t)n, sizeof(double));
	dnn_bn_set_dsum_redux(h);
	return h;
}

/* The split run: K chunks of x (N, C, HW) through the global codelets; y, saved of each chunk
 * written into y_all (N, C, HW) and saved_all (K, 3C); then the backward with dy (and y for
 * relu): dx_all (N, C, HW), dgamma, dbeta (+=, REDUX). */
static void run_split(float *y_all, float *saved_all, float *dx_all, float *dgamma, float *dbeta, const float *x,
		      const float *gamma, const float *beta, const float *dy, int N, int C, int HW, int K, int relu,
		      int acc)
{
	const size_t per = (size_t)C * HW;
	starpu_data_handle_t hg = reg_f((float *)gamma, C), hb = reg_f((float *)beta, C), hdg = reg_f(dgamma, C),
			     hdb = reg_f(dbeta, C);
	dnn_vec_set_sum_redux(hdg);
	dnn_vec_set_sum_redux(hdb);
	double *S = alloc_d(2 * C), *T = alloc_d(2 * C);
	starpu_data_handle_t hS = reg_d(S, 2 * C), hT = reg_d(T, 2 * C);
	starpu_data_handle_t hx[8], hy[8], hs[8], hdy[8], hdx[8];
	int off[9] = {0};
	for (int c = 0; c < K; c++)
		off[c + 1] = off[c] + N / K + (c < N % K ? 1 : 0);
	for (int c = 0; c < K; c++) {
		const size_t n = (size_t)(off[c + 1] - off[c]) * per, o = (size_t)off[c] * per;
		hx[c] = reg_f((float *)x + o, n), hy[c] = reg_f(y_all + o, n), hs[c] = reg_f(saved_all + 3 * C * c, 3 * C);
		hdy[c] = reg_f((float *)dy + o, n), hdx[c] = reg_f(dx_all + o, n);
	}
	dnn_batchnorm_args a = {.C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f, .relu = relu, .global_n = N,
				.accumulate_dx = acc};
	TEST_CHECK(dnn_insert_bn_dsum_zero(NULL, hS) == 0 && dnn_insert_bn_dsum_zero(NULL, hT) == 0, "zero tasks refused");
	for (int c = 0; c < K; c++) {
		a.N = off[c + 1] - off[c];
		TEST_CHECK(dnn_insert_batchnorm_sums_fwd(NULL, &a, hx[c], hS, STARPU_REDUX) == 0, "sums_fwd refused");
	}
	for (int c = 0; c < K; c++) {
		a.N = off[c + 1] - off[c];
		TEST_CHECK(dnn_insert_batchnorm_fwd_global(NULL, &a, hx[c], hg, hb, hS, hy[c], hs[c]) == 0, "fwd_global refused");
	}
	for (int c = 0; c < K; c++) {
		a.N = off[c + 1] - off[c];
		TEST_CHECK(dnn_insert_batchnorm_sums_bwd(NULL, &a, hx[c], hs[c], hdy[c], relu ? hy[c] : NULL, hT, hdg, hdb, STARPU_REDUX) == 0,
			   "sums_bwd refused");
	}
	for (int c = 0; c < K; c++) {
		a.N = off[c + 1] - off[c];
		TEST_CHECK(dnn_insert_batchnorm_bwd_global(NULL, &a, hx[c], hg, hs[c], hdy[c], relu ? hy[c] : NULL, hT,
							   hdx[c]) == 0,
			   "bwd_global refused");
	}
	starpu_task_wait_for_all();
	for (int c = 0; c < K; c++) {
		starpu_data_unregister(hx[c]), starpu_data_unregister(hy[c]), starpu_data_unregister(hs[c]);
		starpu_data_unregister(hdy[c]), starpu_data_unregister(hdx[c]);
	}
	starpu_data_handle_t all[] = {hg, hb, hdg, hdb, hS, hT};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		starpu_data_unregister(all[i]);
	free(S), free(T);
}

static void test_split(int N, int C, int HW, int K, int relu, int acc)
{
	const size_t nx = (size_t)N * C * HW;
	float *x = alloc_f(nx), *dy = alloc_f(nx), *gamma = alloc_f(C), *beta = alloc_f(C), *dx0 = alloc_f(nx);
	for (int n = 0; n < N; n++) /* channel c: mean ~ 2c - 3, spread ~ 0.3 + c */
		for (int c = 0; c < C; c++)
			for (int i = 0; i < HW; i++)
				x[((size_t)n * C + c) * HW + i] = (float)(2 * c - 3) + (0.3f + (float)c) * test_rng_uniform(-1, 1);
	test_fill_uniform(dy, nx, -1, 1);
	test_fill_uniform(gamma, C, 0.5f, 1.5f);
	test_fill_uniform(beta, C, -0.5f, 0.5f);
	test_fill_uniform(dx0, nx, -1, 1);
	/* local kernels on the whole batch (K = 1 of today's codelets) */
	dnn_batchnorm_args a = {.N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f, .relu = relu, .accumulate_dx = acc};
	float *y1 = alloc_f(nx), *s1 = alloc_f(3 * C), *dx1 = alloc_f(nx), *dg1 = calloc(C, sizeof(float)),
	      *db1 = calloc(C, sizeof(float));
	memcpy(dx1, dx0, nx * sizeof(float));
	dnn_batchnorm_forward_train_cpu(y1, s1, x, gamma, beta, &a);
	if (relu)
		dnn_batchnorm_relu_backward_cpu(dx1, dg1, db1, x, gamma, s1, dy, y1, &a);
	else
		dnn_batchnorm_backward_cpu(dx1, dg1, db1, x, gamma, s1, dy, &a);
	/* double reference of the forward */
	double *xd = to_double(x, nx), *gd = to_double(gamma, C), *bd = to_double(beta, C);
	double *yref = alloc_d(nx), *sref = alloc_d(3 * C);
	bn_train_ref(yref, sref, sref + C, sref + 2 * C, xd, gd, bd, N, C, HW, 1e-5);
	if (relu)
		for (size_t i = 0; i < nx; i++)
			yref[i] = yref[i] > 0 ? yref[i] : 0;
	/* K chunks through the global codelets */
	float *yk = alloc_f(nx), *sk = alloc_f(3 * C * (size_t)K), *dxk = alloc_f(nx), *dgk = calloc(C, sizeof(float)),
	      *dbk = calloc(C, sizeof(float));
	fill_nan(yk, nx);
	memcpy(dxk, dx0, nx * sizeof(float));
	if (!acc)
		fill_nan(dxk, nx);
	run_split(yk, sk, dxk, dgk, dbk, x, gamma, beta, dy, N, C, HW, K, relu, acc);
	char what[128];
	snprintf(what, sizeof what, "bn global %dx%dx%d K=%d relu=%d acc=%d", N, C, HW, K, relu, acc);
	char w2[224];
	snprintf(w2, sizeof w2, "%s: y vs double", what);
	test_close_mixed(w2, yk, yref, nx, 2e-5);
	snprintf(w2, sizeof w2, "%s: y vs local K=1", what);
	test_close_mixed_f(w2, yk, y1, nx, 1e-5);
	for (int c = 0; c < K; c++) { /* every chunk saw the same statistics */
		snprintf(w2, sizeof w2, "%s: chunk %d saved vs double", what, c);
		test_close_mixed(w2, sk + 3 * C * c, sref, 3 * (size_t)C, 2e-5);
		snprintf(w2, sizeof w2, "%s: chunk %d saved vs chunk 0", what, c);
		test_close_rel_f(w2, sk + 3 * C * c, sk, 3 * (size_t)C, 0);
	}
	snprintf(w2, sizeof w2, "%s: dx vs local K=1", what);
	test_close_mixed_f(w2, dxk, dx1, nx, 2e-5);
	snprintf(w2, sizeof w2, "%s: dgamma vs local K=1", what);
	test_close_mixed_f(w2, dgk, dg1, C, 2e-5);
	snprintf(w2, sizeof w2, "%s: dbeta vs local K=1", what);
	test_close_mixed_f(w2, dbk, db1, C, 2e-5);
	free(x), free(dy), free(gamma), free(beta), free(dx0), free(y1), free(s1), free(dx1), free(dg1), free(db1);
	free(xd), free(gd), free(bd), free(yref), free(sref), free(yk), free(sk), free(dxk), free(dgk), free(dbk);
}

/* The variance of one channel of N x HW values with mean mu and standard deviation sd, three
 * ways: the global sums (dnn_batchnorm_sums_fwd_cpu + the forward's formula), a plain sum of x^2
 * in float lanes per row folded into double (what the sums would be without the row centring),
 * against two passes in double. Returns the first's relative error; prints both. */
static double var_error(double mu, double sd)
{
	enum { N = 16, HW = 784 };
	float *x = alloc_f((size_t)N * HW);
	for (size_t i = 0; i < (size_t)N * HW; i++)
		x[i] = (float)(mu + sd * test_rng_uniform(-1.7320508f, 1.7320508f));
	double m = 0, v = 0, sums[2] = {0, 0}, s1 = 0, s2 = 0;
	for (size_t i = 0; i < (size_t)N * HW; i++)
		m += x[i];
	m /= (double)N * HW;
	for (size_t i = 0; i < (size_t)N * HW; i++)
		v += ((double)x[i] - m) * ((double)x[i] - m);
	v /= (double)N * HW;
	dnn_batchnorm_args a = {.N = N, .C = 1, .HW = HW, .eps = 1e-5f, .global_n = N};
	dnn_batchnorm_sums_fwd_cpu(sums, x, &a);
	const double M = (double)N * HW, mg = sums[0] / M, vg = sums[1] / M - mg * mg;
	for (int n = 0; n < N; n++) { /* the plain float sums */
		float l1[8] = {0}, l2[8] = {0};
		for (int i = 0; i < HW; i++)
			l1[i % 8] += x[n * HW + i], l2[i % 8] += x[n * HW + i] * x[n * HW + i];
		for (int j = 0; j < 8; j++)
			s1 += l1[j], s2 += l2[j];
	}
	const double vf = s2 / M - (s1 / M) * (s1 / M);
	const double eg = fabs(vg - v) / v, ef = fabs(vf - v) / v;
	printf("var from sums, mean^2/var = %.0e: row-centred double sums %.2e, plain float sum of x^2 %.2e\n",
	       mu * mu / v, eg, ef);
	free(x);
	return eg;
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(11);
	const int K[] = {1, 2, 3, 8};
	for (size_t k = 0; k < sizeof K / sizeof K[0]; k++)
		for (int relu = 0; relu <= 1; relu++) {
			test_split(8, 3, 49, K[k], relu, 0);
			test_split(8, 4, 16, K[k], relu, 1);
		}
	test_split(9, 2, 1, 3, 0, 0); /* HW = 1 (after a dense layer), uneven chunks */
	/* float accuracy of the variance far beyond the local kernel's float-sum range (batchnorm.h) */
	const double ratio[] = {1e2, 1e4, 1e6, 1e8};
	for (size_t i = 0; i < sizeof ratio / sizeof ratio[0]; i++) {
		double e = var_error(sqrt(ratio[i]), 1.0);
		/* measured: 4.9e-9, 8.9e-8, 1.2e-6, 6.7e-6 (plain float sums: 1.2e-6, 2.7e-4, 2.1e-2, 0.77) */
		const double bound = ratio[i] <= 1e4 ? 1e-6 : ratio[i] <= 1e6 ? 1e-5 : 1e-4;
		TEST_CHECK(e < bound, "mean^2/var %.0e: variance from the sums off by %.2e relative (bound %.0e)", ratio[i],
			   e, bound);
	}
	test_starpu_shutdown();
	return test_report("unit_bn_global");
}
