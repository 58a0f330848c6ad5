/* grad_pool_bn — max pooling and batch normalisation backward passes, run as StarPU tasks, against
 * central finite differences (double precision) of L = sum(y .* r) on double-precision forward
 * references.
 *   maxpool: inputs are a shuffled grid of distinct values (gaps of 0.01 >> the FD step), so no
 *            window has a near-tie and L is linear around x; accumulate_dx=1 adds to dx.
 *   batchnorm: dx, dgamma, dbeta through the training statistics; accumulate_dx=1 adds to dx;
 *            dgamma/dbeta accumulate over several chunks' tasks into one STARPU_REDUX handle,
 *            starting from a non-zero value, and += also with STARPU_RW. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batchnorm.h"
#include "vec.h"
#include "maxpool.h"
#include "test_util.h"

/* ------------------------------------------------------------------ maxpool */

// L = sum(maxpool(x) .* r), in double; x (N, C, H, W), r (N, C, P, Q)
static double maxpool_loss(const double *x, const float *r, const dnn_maxpool_args *a)
{
	double L = 0;
	for (int nc = 0; nc < a->N * a->C; nc++)
		for (int p = 0; p < a->P; p++)
			for (int q = 0; q < a->Q; q++) {
				double m = -INFINITY;
				for (int i = 0; i < a->k; i++)
					for (int j = 0; j < a->k; j++) {
						int h = p * a->stride - a->pad + i, w = q * a->stride - a->pad + j;
						if (h >= 0 && h < a->H && w >= 0 && w < a->W &&
						    x[((size_t)nc * a->H + h) * a->W + w] > m)
							m = x[((size_t)nc * a->H + h) * a->W + w];
					}
				L += m * r[((size_t)nc * a->P + p) * a->Q + q];
			}
	return L;
}

static void test_maxpool_bwd(int N, int C, int H, int W, int k, int stride, int pad, int accumulate)
{
	dnn_maxpool_args a = {.N = N, .C = C, .H = H, .W = W, .k = k, .stride = stride, .pad = pad,
			      .accumulate_dx = accumulate};
	TEST_CHECK(dnn_maxpool_args_finish(&a) == 0, "maxpool args rejected");
	size_t nx = (size_t)N * C * H * W, ny = (size_t)N * C * a.P * a.Q;
	float *x = malloc(nx * sizeof(float)), *y = malloc(ny * sizeof(float));
	float *r = malloc(ny * sizeof(float)), *dx = malloc(nx * sizeof(float));
	double *xd = malloc(nx * sizeof(double)), *ref = malloc(nx * sizeof(double));
	// distinct values -1 + 0.01 * i in shuffled order (exact in float up to rounding, gaps 0.01)
	for (size_t i = 0; i < nx; i++)
		x[i] = -1.0f + 0.01f * (float)i;
	for (size_t i = nx - 1; i > 0; i--) {
		size_t j = (size_t)test_rng_int(0, (int)i);
		float t = x[i];
		x[i] = x[j];
		x[j] = t;
	}
	test_fill_uniform(r, ny, -1, 1);
	test_fill_uniform(dx, nx, -1, 1);
	for (size_t i = 0; i < nx; i++)
		ref[i] = accumulate ? dx[i] : 0;
	if (!accumulate)
		for (size_t i = 0; i < nx; i++)
			dx[i] = NAN; // W mode: old contents must not leak through

	starpu_data_handle_t hx = reg_f(x, nx), hy = reg_f(y, ny), hr = reg_f(r, ny), hdx = reg_f(dx, nx);
	dnn_insert_maxpool_fwd(NULL, &a, hx, hy);
	dnn_insert_maxpool_bwd(NULL, &a, hx, hy, hr, hdx);
	starpu_data_handle_t all[] = {hx, hy, hr, hdx};
	for (size_t i = 0; i < 4; i++)
		starpu_data_unregister(all[i]);

	const double eps = 1e-3;
	for (size_t i = 0; i < nx; i++)
		xd[i] = x[i];
	for (size_t i = 0; i < nx; i++) {
		double x0 = xd[i];
		xd[i] = x0 + eps;
		double lp = maxpool_loss(xd, r, &a);
		xd[i] = x0 - eps;
		double lm = maxpool_loss(xd, r, &a);
		xd[i] = x0;
		ref[i] += (lp - lm) / (2 * eps);
	}
	char what[96];
	snprintf(what, sizeof what, "maxpool dx %dx%dx%dx%d k%d s%d p%d acc%d", N, C, H, W, k, stride, pad,
		 accumulate);
	test_close_mixed(what, dx, ref, nx, 1e-5);
	free(x);
	free(y);
	free(r);
	free(dx);
	free(xd);
	free(ref);
}

/* ------------------------------------------------------------------ batchnorm */

// L = sum(BN_train(x; gamma, beta) .* r), in double, summed channel by channel
static double bn_loss(const double *x, const double *gamma, const double *beta, const float *r,
		      const dnn_batchnorm_args *a)
{
	const int N = a->N, C = a->C, HW = a->HW;
	double *z = alloc_d((size_t)N * C * HW), L = 0;
	bn_train_ref(z, NULL, NULL, NULL, x, gamma, beta, N, C, HW, a->eps);
	for (int c = 0; c < C; c++)
		for (int n = 0; n < N; n++)
			for (int i = 0; i < HW; i++) {
				size_t j = ((size_t)n * C + c) * HW + i;
				L += z[j] * r[j];
			}
	free(z);
	return L;
}

// central differences of bn_loss w.r.t. x, gamma, beta, added to gx, gg, gb
static void bn_fd(double *gx, double *gg, double *gb, const float *x, const float *gamma, const float *beta,
		  const float *r, const dnn_batchnorm_args *a)
{
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	double *xd = malloc(nx * sizeof(double)), *g = malloc(C * sizeof(double)), *b = malloc(C * sizeof(double));
	for (size_t i = 0; i < nx; i++)
		xd[i] = x[i];
	for (size_t c = 0; c < C; c++) {
		g[c] = gamma[c];
		b[c] = beta[c];
	}
	const double eps = 1e-4;
	struct {
		double *v, *grad;
		size_t n;
	} params[] = {{xd, gx, nx}, {g, gg, C}, {b, gb, C}};
	for (int p = 0; p < 3; p++)
		for (size_t i = 0; i < params[p].n; i++) {
			double v0 = params[p].v[i];
			params[p].v[i] = v0 + eps;
			double lp = bn_loss(xd, g, b, r, a);
			params[p].v[i] = v0 - eps;
			double lm = bn_loss(xd, g, b, r, a);
			params[p].v[i] = v0;
			params[p].grad[i] += (lp - lm) / (2 * eps);
		}
	free(xd);
	free(g);
	free(b);
}

#define CHUNKS 4

static void test_bn_bwd(int N, int C, int HW)
{
	dnn_batchnorm_args a = {.N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f};
	size_t nx = (size_t)N * C * HW;
	float *gamma = malloc(C * sizeof(float)), *beta = malloc(C * sizeof(float));
	float *dgamma = malloc(C * sizeof(float)), *dbeta = malloc(C * sizeof(float));
	float *dgamma_rw = malloc(C * sizeof(float)), *dbeta_rw = malloc(C * sizeof(float));
	double *gg = malloc(C * sizeof(double)), *gb = malloc(C * sizeof(double));
	double *gg_rw = malloc(C * sizeof(double)), *gb_rw = malloc(C * sizeof(double));
	float *x[CHUNKS], *y[CHUNKS], *r[CHUNKS], *dx[CHUNKS], *saved[CHUNKS];
	double *gx[CHUNKS];
	starpu_data_handle_t hx[CHUNKS], hy[CHUNKS], hr[CHUNKS], hdx[CHUNKS], hs[CHUNKS];

	test_fill_uniform(gamma, C, 0.5f, 1.5f);
	test_fill_uniform(beta, C, -0.5f, 0.5f);
	test_fill_uniform(dgamma, C, -1, 1); // REDUX and RW both add to what is there
	test_fill_uniform(dbeta, C, -1, 1);
	test_fill_uniform(dgamma_rw, C, -1, 1);
	test_fill_uniform(dbeta_rw, C, -1, 1);
	for (int c = 0; c < C; c++) {
		gg[c] = dgamma[c];
		gb[c] = dbeta[c];
		gg_rw[c] = dgamma_rw[c];
		gb_rw[c] = dbeta_rw[c];
	}
	starpu_data_handle_t hg = reg_f(gamma, C), hb = reg_f(beta, C);
	starpu_data_handle_t hdg = reg_f(dgamma, C), hdb = reg_f(dbeta, C);
	starpu_data_handle_t hdg_rw = reg_f(dgamma_rw, C), hdb_rw = reg_f(dbeta_rw, C);
	dnn_vec_set_sum_redux(hdg);
	dnn_vec_set_sum_redux(hdb);

	// chunk 0 goes to the RW pair, chunks 1.. to the REDUX pair; odd chunks accumulate into dx
	for (int t = 0; t < CHUNKS; t++) {
		x[t] = malloc(nx * sizeof(float));
		y[t] = malloc(nx * sizeof(float));
		r[t] = malloc(nx * sizeof(float));
		dx[t] = malloc(nx * sizeof(float));
		saved[t] = malloc(3 * C * sizeof(float));
		gx[t] = malloc(nx * sizeof(double));
		for (int n = 0; n < N; n++)
			for (int c = 0; c < C; c++)
				for (int i = 0; i < HW; i++)
					x[t][((size_t)n * C + c) * HW + i] =
						(float)c * 0.5f + (1.0f + 0.3f * c) * test_rng_uniform(-1, 1);
		test_fill_uniform(r[t], nx, -1, 1);
		test_fill_uniform(dx[t], nx, -1, 1);
		for (size_t i = 0; i < nx; i++)
			gx[t][i] = (t & 1) ? dx[t][i] : 0;
		if (!(t & 1))
			for (size_t i = 0; i < nx; i++)
				dx[t][i] = NAN; // W mode: old contents must not leak through
		hx[t] = reg_f(x[t], nx);
		hy[t] = reg_f(y[t], nx);
		hr[t] = reg_f(r[t], nx);
		hdx[t] = reg_f(dx[t], nx);
		hs[t] = reg_f(saved[t], 3 * C);
		dnn_batchnorm_args at = a;
		at.accumulate_dx = t & 1;
		dnn_insert_batchnorm_fwd_train(NULL, &at, hx[t], hg, hb, hy[t], hs[t]);
		if (t == 0)
			dnn_insert_batchnorm_bwd(NULL, &at, hx[t], hg, hs[t], hr[t], hdx[t], hdg_rw, hdb_rw, STARPU_RW);
		else
			dnn_insert_batchnorm_bwd(NULL, &at, hx[t], hg, hs[t], hr[t], hdx[t], hdg, hdb, STARPU_REDUX);
	}
	for (int t = 0; t < CHUNKS; t++) {
		starpu_data_handle_t all[] = {hx[t], hy[t], hr[t], hdx[t], hs[t]};
		for (size_t i = 0; i < 5; i++)
			starpu_data_unregister(all[i]);
	}
	starpu_data_handle_t params[] = {hg, hb, hdg, hdb, hdg_rw, hdb_rw};
	for (size_t i = 0; i < 6; i++)
		starpu_data_unregister(params[i]);

	char what[96];
	for (int t = 0; t < CHUNKS; t++) {
		if (t == 0)
			bn_fd(gx[t], gg_rw, gb_rw, x[t], gamma, beta, r[t], &a);
		else
			bn_fd(gx[t], gg, gb, x[t], gamma, beta, r[t], &a);
		snprintf(what, sizeof what, "bn dx %dx%dx%d chunk %d acc%d", N, C, HW, t, t & 1);
		test_close_mixed(what, dx[t], gx[t], nx, 1e-4);
	}
	snprintf(what, sizeof what, "bn dgamma REDUX %dx%dx%d", N, C, HW);
	test_close_mixed(what, dgamma, gg, C, 1e-4);
	snprintf(what, sizeof what, "bn dbeta REDUX %dx%dx%d", N, C, HW);
	test_close_mixed(what, dbeta, gb, C, 1e-4);
	snprintf(what, sizeof what, "bn dgamma RW %dx%dx%d", N, C, HW);
	test_close_mixed(what, dgamma_rw, gg_rw, C, 1e-4);
	snprintf(what, sizeof what, "bn dbeta RW %dx%dx%d", N, C, HW);
	test_close_mixed(what, dbeta_rw, gb_rw, C, 1e-4);

	for (int t = 0; t < CHUNKS; t++) {
		free(x[t]);
		free(y[t]);
		free(r[t]);
		free(dx[t]);
		free(saved[t]);
		free(gx[t]);
	}
	free(gamma);
	free(beta);
	free(dgamma);
	free(dbeta);
	free(dgamma_rw);
	free(dbeta_rw);
	free(gg);
	free(gb);
	free(gg_rw);
	free(gb_rw);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(11);

	test_maxpool_bwd(2, 3, 7, 9, 3, 2, 1, 0);
	test_maxpool_bwd(2, 3, 7, 9, 3, 2, 1, 1);
	test_maxpool_bwd(3, 2, 9, 7, 2, 2, 0, 0);
	test_maxpool_bwd(1, 4, 6, 5, 3, 1, 1, 1);
	test_maxpool_bwd(2, 3, 8, 6, 2, 2, 0, 0); // even 2x2 s2: the straight-line path
	test_maxpool_bwd(2, 3, 8, 6, 2, 2, 0, 1);

	test_bn_bwd(3, 4, 10);
	test_bn_bwd(1, 3, 17);
	test_bn_bwd(6, 2, 1);

	test_starpu_shutdown();
	return test_report("grad_pool_bn");
}
