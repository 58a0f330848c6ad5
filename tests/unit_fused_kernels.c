/* unit_fused_kernels — the CPU kernels that the rest of the suite covered only end to end, each
 * against its own reference:
 *   - fused batch norm + ReLU: forward train and eval against a double-precision reference (and
 *     bit-equal to max(unfused forward, 0)); backward (dnn_batchnorm_relu_backward_cpu) against
 *     the analytic double-precision gradient and against central finite differences of
 *     L = sum(r * relu(bn(x))) in double, with += into dgamma/dbeta and both dx modes;
 *   - conv + bias (a->bias = 1), forward and backward filter, through cl_conv2d_fwd /
 *     cl_conv2d_bwd_filter tasks with their 4th buffer (the bias is added only inside the task):
 *     y = conv(x, w) + b and dw += ..., db += sum(dy) against double references;
 *   - cl_vec_slice_get / cl_vec_slice_put (the ring all-reduce's slices), through tasks: exact;
 *   - dnn_optim_update_delta_cpu (async push): against a double reference, w_new == w_old + delta
 *     exactly, grad zeroed (or kept with keep_grad), and the same as dnn_optim_update_cpu.
 * Tolerances, of the mixed error |d| / max(1, |ref|) (test_close_mixed), from the errors measured here
 * (every bound probed at 1e-13 to read them): batch norm forward 2.1e-7, backward 3.0e-7, its
 * finite differences (double, h = 1e-5, themselves accurate to ~1e-9) 2.5e-7 -> bound 1e-5;
 * conv + bias 3.4e-6 (sums of up to 400 float products) -> 1e-4, as unit_conv2d; SGD 4.6e-8 ->
 * 1e-6. Slices and the SGD identities are exact. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batchnorm.h"
#include "conv2d.h"
#include "vec.h"
#include "optim.h"
#include "test_util.h"

/* ------------------------------------------------------------------ batch norm + ReLU */

typedef struct {
	const double *gamma, *beta, *r;
	double *x; // perturbed by the finite differences
	int N, C, HW;
	double eps;
} bn_loss_ctx;

// L = sum(r * max(bn(x), 0)), in double
static double bn_relu_loss(const bn_loss_ctx *k)
{
	size_t n = (size_t)k->N * k->C * k->HW;
	double *z = alloc_d(n), L = 0;
	bn_train_ref(z, NULL, NULL, NULL, k->x, k->gamma, k->beta, k->N, k->C, k->HW, k->eps);
	for (size_t i = 0; i < n; i++)
		L += k->r[i] * (z[i] > 0 ? z[i] : 0);
	free(z);
	return L;
}

#define FD_H 1e-5
#define FD_TOL 1e-5

// central difference of bn_relu_loss w.r.t. v[i]
static double fd(bn_loss_ctx *k, double *v, size_t i)
{
	double keep = v[i];
	v[i] = keep + FD_H;
	double lp = bn_relu_loss(k);
	v[i] = keep - FD_H;
	double lm = bn_relu_loss(k);
	v[i] = keep;
	return (lp - lm) / (2 * FD_H);
}

static void test_bn_relu(int N, int C, int HW)
{
	char what[160];
	const size_t n = (size_t)N * C * HW;
	dnn_batchnorm_args a = {.N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f, .relu = 1};
	float *x = alloc_f(n), *gamma = alloc_f(C), *beta = alloc_f(C), *y = alloc_f(n), *y0 = alloc_f(n);
	float *saved = alloc_f(3 * (size_t)C), *saved0 = alloc_f(3 * (size_t)C);
	for (int c = 0; c < C; c++) {
		gamma[c] = test_rng_uniform(0.5f, 1.5f);
		beta[c] = test_rng_uniform(-0.5f, 0.5f); /* about a third to two thirds clipped */
	}
	for (size_t i = 0; i < n; i++)
		x[i] = test_rng_uniform(-1, 1) + 0.3f * (float)((i / HW) % C); /* channel offsets */
	fill_nan(y, n);
	fill_nan(saved, 3 * (size_t)C);
	dnn_batchnorm_forward_train_cpu(y, saved, x, gamma, beta, &a);

	double *xd = to_double(x, n), *gd = to_double(gamma, C), *bd = to_double(beta, C);
	double *z = alloc_d(n), *mean = alloc_d(C), *var = alloc_d(C), *invstd = alloc_d(C), *yref = alloc_d(n);
	bn_train_ref(z, mean, var, invstd, xd, gd, bd, N, C, HW, a.eps);
	size_t clipped = 0;
	for (size_t i = 0; i < n; i++) {
		yref[i] = z[i] > 0 ? z[i] : 0;
		clipped += z[i] <= 0;
	}
	snprintf(what, sizeof(what), "bn+relu fwd train N%d C%d HW%d", N, C, HW);
	test_close_mixed(what, y, yref, n, 1e-5);
	double *sref = alloc_d(3 * (size_t)C);
	for (int c = 0; c < C; c++)
		sref[c] = mean[c], sref[C + c] = var[c], sref[2 * C + c] = invstd[c];
	snprintf(what, sizeof(what), "bn+relu saved stats N%d C%d HW%d", N, C, HW);
	test_close_mixed(what, saved, sref, 3 * (size_t)C, 1e-5);
	if (n >= 16)
		TEST_CHECK(clipped > 0 && clipped < n, "%s: the ReLU clipped %zu of %zu (the case tests nothing)", what,
			   clipped, n);
	/* Fused = max(unfused, 0) bit for bit, and the same statistics. */
	dnn_batchnorm_args a0 = a;
	a0.relu = 0;
	dnn_batchnorm_forward_train_cpu(y0, saved0, x, gamma, beta, &a0);
	for (size_t i = 0, bad = 0; i < n && bad < 3; i++)
		if (y[i] != (y0[i] > 0 ? y0[i] : 0.0f)) {
			TEST_CHECK(0, "bn+relu fwd N%d C%d HW%d [%zu]: %.9g != max(%.9g, 0)", N, C, HW, i, (double)y[i],
				   (double)y0[i]);
			bad++;
		}
	TEST_CHECK(memcmp(saved, saved0, 3 * (size_t)C * sizeof(float)) == 0, "fused and plain statistics differ");

	/* Eval: the running statistics [mean | unbiased var] instead of the batch's. */
	float *running = alloc_f(2 * (size_t)C);
	for (int c = 0; c < C; c++) {
		running[c] = test_rng_uniform(-0.5f, 0.5f) + 0.3f * c;
		running[C + c] = test_rng_uniform(0.2f, 2.0f);
	}
	fill_nan(y, n);
	dnn_batchnorm_forward_eval_cpu(y, x, gamma, beta, running, &a);
	for (size_t i = 0; i < n; i++) {
		int c = (int)((i / HW) % C);
		double t = gamma[c] * ((double)x[i] - running[c]) / sqrt((double)running[C + c] + a.eps) + beta[c];
		yref[i] = t > 0 ? t : 0;
	}
	snprintf(what, sizeof(what), "bn+relu fwd eval N%d C%d HW%d", N, C, HW);
	test_close_mixed(what, y, yref, n, 1e-5);

	/* Backward. The forward output again (train), then dy random; dgamma/dbeta start non-zero
	 * (+=, they are REDUX gradients); dx overwritten (NaN before) or added to. */
	dnn_batchnorm_forward_train_cpu(y, saved, x, gamma, beta, &a);
	float *dy = alloc_f(n), *dx = alloc_f(n), *dxa = alloc_f(n), *dx0 = alloc_f(n);
	float *dg = alloc_f(C), *db = alloc_f(C), *dg0 = alloc_f(C), *db0 = alloc_f(C);
	test_fill_uniform(dy, n, -1, 1);
	test_fill_uniform(dx0, n, -1, 1);
	test_fill_uniform(dg0, C, -1, 1);
	test_fill_uniform(db0, C, -1, 1);
	float *dy_copy = alloc_f(n);
	memcpy(dy_copy, dy, n * sizeof(float));
	memcpy(dg, dg0, C * sizeof(float));
	memcpy(db, db0, C * sizeof(float));
	fill_nan(dx, n);
	dnn_batchnorm_relu_backward_cpu(dx, dg, db, x, gamma, saved, dy, y, &a);
	TEST_CHECK(memcmp(dy, dy_copy, n * sizeof(float)) == 0, "the CPU fused backward changed dy");
	/* Analytic gradient in double: g = dy * (z > 0), xhat = (x - mean) * invstd,
	 * dbeta = sum g, dgamma = sum g xhat, dx = gamma invstd (g - mean(g) - xhat mean(g xhat)). */
	double *dxref = alloc_d(n), *dgref = alloc_d(C), *dbref = alloc_d(C);
	const double M = (double)N * HW;
	for (int c = 0; c < C; c++) {
		double sg = 0, sgx = 0;
		for (int k = 0; k < N; k++)
			for (int i = 0; i < HW; i++) {
				size_t j = ((size_t)k * C + c) * HW + i;
				double g = z[j] > 0 ? dy[j] : 0;
				sg += g;
				sgx += g * (xd[j] - mean[c]) * invstd[c];
			}
		dbref[c] = db0[c] + sg;
		dgref[c] = dg0[c] + sgx;
		for (int k = 0; k < N; k++)
			for (int i = 0; i < HW; i++) {
				size_t j = ((size_t)k * C + c) * HW + i;
				double g = z[j] > 0 ? dy[j] : 0, xh = (xd[j] - mean[c]) * invstd[c];
				dxref[j] = gamma[c] * invstd[c] * (g - sg / M - xh * sgx / M);
			}
	}
	snprintf(what, sizeof(what), "bn+relu bwd dx N%d C%d HW%d", N, C, HW);
	test_close_mixed(what, dx, dxref, n, 1e-5);
	snprintf(what, sizeof(what), "bn+relu bwd dgamma (+=) N%d C%d HW%d", N, C, HW);
	test_close_mixed(what, dg, dgref, C, 1e-5);
	snprintf(what, sizeof(what), "bn+relu bwd dbeta (+=) N%d C%d HW%d", N, C, HW);
	test_close_mixed(what, db, dbref, C, 1e-5);
	/* accumulate_dx: dx += the same gradient. */
	dnn_batchnorm_args aa = a;
	aa.accumulate_dx = 1;
	memcpy(dxa, dx0, n * sizeof(float));
	memcpy(dg, dg0, C * sizeof(float));
	memcpy(db, db0, C * sizeof(float));
	dnn_batchnorm_relu_backward_cpu(dxa, dg, db, x, gamma, saved, dy, y, &aa);
	double *dxaref = alloc_d(n);
	for (size_t i = 0; i < n; i++)
		dxaref[i] = dx0[i] + dxref[i];
	snprintf(what, sizeof(what), "bn+relu bwd dx (+=) N%d C%d HW%d", N, C, HW);
	test_close_mixed(what, dxa, dxaref, n, 1e-5);
	/* Fused backward = plain backward of the masked dy (same arithmetic: bit for bit). */
	float *dym = alloc_f(n), *dxp = alloc_f(n), *dgp = alloc_f(C), *dbp = alloc_f(C);
	for (size_t i = 0; i < n; i++)
		dym[i] = y[i] > 0 ? dy[i] : 0.0f;
	memcpy(dgp, dg0, C * sizeof(float));
	memcpy(dbp, db0, C * sizeof(float));
	memcpy(dg, dg0, C * sizeof(float));
	memcpy(db, db0, C * sizeof(float));
	dnn_batchnorm_relu_backward_cpu(dx, dg, db, x, gamma, saved, dy, y, &a);
	dnn_batchnorm_backward_cpu(dxp, dgp, dbp, x, gamma, saved, dym, &a0);
	TEST_CHECK(memcmp(dx, dxp, n * sizeof(float)) == 0 && memcmp(dg, dgp, C * sizeof(float)) == 0 &&
			   memcmp(db, dbp, C * sizeof(float)) == 0,
		   "bn+relu bwd N%d C%d HW%d differs from bn bwd of dy * (y > 0)", N, C, HW);

	/* Finite differences of L = sum(dy * relu(bn(x))): dL/dx = dx, dL/dgamma = dgamma - dg0,
	 * dL/dbeta = dbeta - db0. Moving one input by FD_H moves that element's pre-activation by
	 * about gamma * invstd * FD_H (<= 3e-5 here) and the channel's others far less, so a
	 * channel with a pre-activation within 10 FD_H of the ReLU kink is left out (its
	 * difference quotient would straddle the kink); most channels must remain. */
	double *dyd = to_double(dy, n);
	double *gdd = to_double(gamma, C), *bdd = to_double(beta, C);
	bn_loss_ctx k = {.gamma = gdd, .beta = bdd, .r = dyd, .x = xd, .N = N, .C = C, .HW = HW, .eps = a.eps};
	int *smooth = calloc((size_t)C, sizeof(int)), nsmooth = 0;
	for (int c = 0; c < C; c++) {
		double mz = INFINITY;
		for (int kk = 0; kk < N; kk++)
			for (int i = 0; i < HW; i++)
				mz = fmin(mz, fabs(z[((size_t)kk * C + c) * HW + i]));
		smooth[c] = mz > 10 * FD_H;
		nsmooth += smooth[c];
	}
	TEST_CHECK(2 * nsmooth >= C, "N%d C%d HW%d: only %d of %d channels away from the ReLU kink", N, C, HW,
		   nsmooth, C);
	const size_t step = n > 40 ? n / 40 : 1;
	double *fdx = alloc_d(n);
	float *dxs = alloc_f(n);
	size_t m = 0;
	for (size_t i = 0; i < n; i += step)
		if (smooth[(i / HW) % C]) {
			fdx[m] = fd(&k, xd, i);
			dxs[m++] = dx[i];
		}
	snprintf(what, sizeof(what), "bn+relu bwd dx vs finite differences N%d C%d HW%d", N, C, HW);
	test_close_mixed(what, dxs, fdx, m, FD_TOL);
	double *fdg = alloc_d(C), *fdb = alloc_d(C);
	float *dgs = alloc_f(C), *dbs = alloc_f(C);
	m = 0;
	for (int c = 0; c < C; c++)
		if (smooth[c]) {
			fdg[m] = fd(&k, gdd, (size_t)c);
			fdb[m] = fd(&k, bdd, (size_t)c);
			dgs[m] = dg[c] - dg0[c];
			dbs[m++] = db[c] - db0[c];
		}
	snprintf(what, sizeof(what), "bn+relu bwd dgamma vs finite differences N%d C%d HW%d", N, C, HW);
	test_close_mixed(what, dgs, fdg, m, FD_TOL);
	snprintf(what, sizeof(what), "bn+relu bwd dbeta vs finite differences N%d C%d HW%d", N, C, HW);
	test_close_mixed(what, dbs, fdb, m, FD_TOL);
	free(smooth);

	free(x), free(gamma), free(beta), free(y), free(y0), free(saved), free(saved0), free(running);
	free(xd), free(gd), free(bd), free(z), free(mean), free(var), free(invstd), free(yref), free(sref);
	free(dy), free(dx), free(dxa), free(dx0), free(dg), free(db), free(dg0), free(db0), free(dy_copy);
	free(dxref), free(dgref), free(dbref), free(dxaref), free(dym), free(dxp), free(dgp), free(dbp);
	free(dyd), free(gdd), free(bdd), free(fdx), free(dxs), free(fdg), free(fdb), free(dgs), free(dbs);
}

/* ------------------------------------------------------------------ conv + bias (tasks) */

/* One task of `cl` with 4 buffers and the conv arguments (test_task), then a wait. */
static void conv_task(struct starpu_codelet *cl, const dnn_conv2d_args *a, int m0, starpu_data_handle_t b0, int m1,
		      starpu_data_handle_t b1, int m2, starpu_data_handle_t b2, int m3, starpu_data_handle_t b3)
{
	struct starpu_data_descr d[] = {{b0, (enum starpu_data_access_mode)m0},
					{b1, (enum starpu_data_access_mode)m1},
					{b2, (enum starpu_data_access_mode)m2},
					{b3, (enum starpu_data_access_mode)m3}};
	if (test_task(cl, -1, a, sizeof(*a), d, 4, "test_conv_bias") != 0)
		return;
	TEST_CHECK(starpu_task_wait_for_all() == 0, "starpu_task_wait_for_all failed");
}

static void test_conv_bias(dnn_conv2d_args a)
{
	char what[200];
	a.bias = 1;
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "conv shape rejected");
		return;
	}
	snprintf(what, sizeof(what), "N%d C%d H%d W%d K%d R%d S%d st%d pad%d dil%d", a.N, a.C, a.H, a.W, a.K, a.R,
		 a.S, a.stride, a.pad, a.dilation);
	const size_t nx = (size_t)a.N * a.C * a.H * a.W, nw = (size_t)a.K * a.C * a.R * a.S;
	const size_t ny = (size_t)a.N * a.K * a.P * a.Q, PQ = (size_t)a.P * a.Q;
	float *x = alloc_f(nx), *w = alloc_f(nw), *b = alloc_f(a.K), *y = alloc_f(ny), *dy = alloc_f(ny);
	float *dw = alloc_f(nw), *db = alloc_f(a.K), *dw0 = alloc_f(nw), *db0 = alloc_f(a.K);
	test_fill_uniform(x, nx, -1, 1);
	test_fill_uniform(w, nw, -1, 1);
	test_fill_uniform(b, a.K, -2, 2);
	test_fill_uniform(dy, ny, -1, 1);
	test_fill_uniform(dw0, nw, -1, 1);
	test_fill_uniform(db0, a.K, -1, 1);
	memcpy(dw, dw0, nw * sizeof(float));
	memcpy(db, db0, a.K * sizeof(float));
	fill_nan(y, ny); /* W: every element must be written */

	starpu_data_handle_t hx = reg_f(x, nx), hw = reg_f(w, nw), hb = reg_f(b, a.K), hy = reg_f(y, ny);
	starpu_data_handle_t hdy = reg_f(dy, ny), hdw = reg_f(dw, nw), hdb = reg_f(db, a.K);
	conv_task(&cl_conv2d_fwd, &a, STARPU_R, hx, STARPU_R, hw, STARPU_W, hy, STARPU_R, hb);
	conv_task(&cl_conv2d_bwd_filter, &a, STARPU_R, hx, STARPU_R, hdy, STARPU_RW, hdw, STARPU_RW, hdb);
	starpu_data_handle_t hs[] = {hx, hw, hb, hy, hdy, hdw, hdb};
	for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
		starpu_data_unregister(hs[i]);

	/* y = conv(x, w) + b[k] */
	double *yref = alloc_d(ny);
	conv2d_forward_ref(yref, x, w, &a);
	for (size_t i = 0; i < ny; i++)
		yref[i] += b[(i / PQ) % a.K];
	char msg[260];
	snprintf(msg, sizeof(msg), "conv+bias fwd %s", what);
	test_close_mixed(msg, y, yref, ny, 1e-4);
	printf("conv+bias %s: Winograd forward %d, backward filter %d\n", what, dnn_conv2d_cpu_uses_winograd(&a, 0),
	       dnn_conv2d_cpu_uses_winograd(&a, 2));
	/* dw[k,c,r,s] += sum_{n,p,q} dy[n,k,p,q] x[n,c,ih,iw];  db[k] += sum_{n,p,q} dy[n,k,p,q] */
	double *dwref = alloc_d(nw), *dbref = alloc_d(a.K);
	for (int k = 0; k < a.K; k++) {
		double s = db0[k];
		for (int n = 0; n < a.N; n++)
			for (size_t pq = 0; pq < PQ; pq++)
				s += dy[((size_t)n * a.K + k) * PQ + pq];
		dbref[k] = s;
		for (int c = 0; c < a.C; c++)
			for (int r = 0; r < a.R; r++)
				for (int s2 = 0; s2 < a.S; s2++) {
					double acc = dw0[(((size_t)k * a.C + c) * a.R + r) * a.S + s2];
					for (int n = 0; n < a.N; n++)
						for (int p = 0; p < a.P; p++) {
							int ih = p * a.stride - a.pad + r * a.dilation;
							if (ih < 0 || ih >= a.H)
								continue;
							for (int q = 0; q < a.Q; q++) {
								int iw = q * a.stride - a.pad + s2 * a.dilation;
								if (iw < 0 || iw >= a.W)
									continue;
								acc += (double)dy[((size_t)n * a.K + k) * PQ + (size_t)p * a.Q + q] *
								       x[(((size_t)n * a.C + c) * a.H + ih) * a.W + iw];
							}
						}
					dwref[(((size_t)k * a.C + c) * a.R + r) * a.S + s2] = acc;
				}
	}
	snprintf(msg, sizeof(msg), "conv+bias bwd filter dw (+=) %s", what);
	test_close_mixed(msg, dw, dwref, nw, 1e-4);
	snprintf(msg, sizeof(msg), "conv+bias bwd filter db (+=) %s", what);
	test_close_mixed(msg, db, dbref, a.K, 1e-4);
	free(x), free(w), free(b), free(y), free(dy), free(dw), free(db), free(dw0), free(db0);
	free(yref), free(dwref), free(dbref);
}

/* ------------------------------------------------------------------ gradient slices (tasks) */

static void test_vec_slices(void)
{
	enum { NFULL = 1001, NCHUNK = 250 };
	static const size_t offs[] = {0, 373, NFULL - NCHUNK}; /* outlive the tasks (CL_ARGS_NFREE) */
	float *full = alloc_f(NFULL), *before = alloc_f(NFULL), *chunk = alloc_f(NCHUNK);
	test_fill_uniform(full, NFULL, -1, 1);
	starpu_data_handle_t hfull = reg_f(full, NFULL), hchunk = reg_f(chunk, NCHUNK);
	for (size_t o = 0; o < sizeof(offs) / sizeof(offs[0]); o++) {
		const size_t off = offs[o];
		/* get: chunk[i] = full[off + i]; chunk is W, so NaN before. */
		TEST_CHECK(starpu_data_acquire(hchunk, STARPU_W) == 0, "acquire");
		fill_nan(chunk, NCHUNK);
		starpu_data_release(hchunk);
		int rc = starpu_task_insert(&cl_vec_slice_get, STARPU_W, hchunk, STARPU_R, hfull, STARPU_CL_ARGS_NFREE,
					    &offs[o], sizeof(size_t), STARPU_NAME, "test_slice_get", 0);
		TEST_CHECK(rc == 0, "insert slice_get: %d", rc);
		TEST_CHECK(starpu_data_acquire(hchunk, STARPU_RW) == 0, "acquire");
		TEST_CHECK(starpu_data_acquire(hfull, STARPU_R) == 0, "acquire");
		int bad = 0;
		for (size_t i = 0; i < NCHUNK; i++)
			bad += memcmp(&chunk[i], &full[off + i], sizeof(float)) != 0;
		TEST_CHECK(bad == 0, "vec_slice_get off %zu: %d elements differ", off, bad);
		memcpy(before, full, NFULL * sizeof(float));
		for (size_t i = 0; i < NCHUNK; i++)
			chunk[i] = -7.0f - (float)i; /* what put must write back */
		starpu_data_release(hfull);
		starpu_data_release(hchunk);
		/* put: full[off + i] = chunk[i], everything else untouched. */
		rc = starpu_task_insert(&cl_vec_slice_put, STARPU_RW | STARPU_COMMUTE, hfull, STARPU_R, hchunk, STARPU_CL_ARGS_NFREE,
					&offs[o], sizeof(size_t), STARPU_NAME, "test_slice_put", 0);
		TEST_CHECK(rc == 0, "insert slice_put: %d", rc);
		TEST_CHECK(starpu_data_acquire(hfull, STARPU_RW) == 0, "acquire");
		bad = 0;
		for (size_t i = 0; i < NFULL; i++) {
			float want = i >= off && i < off + NCHUNK ? -7.0f - (float)(i - off) : before[i];
			bad += full[i] != want;
		}
		TEST_CHECK(bad == 0, "vec_slice_put off %zu: %d elements wrong", off, bad);
		for (size_t i = 0; i < NFULL; i++)
			full[i] = test_rng_uniform(-1, 1);
		starpu_data_release(hfull);
	}
	starpu_data_unregister(hchunk);
	starpu_data_unregister(hfull);
	free(full), free(before), free(chunk);
}

/* ------------------------------------------------------------------ SGD with delta */

static void test_sgd_delta(long n, int keep_grad)
{
	dnn_optim_args a = {.n = n, .lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f, .scale = 1.0f / 64,
			  .keep_grad = keep_grad, .write_delta = 1};
	float *w = alloc_f(n), *v = alloc_f(n), *g = alloc_f(n), *delta = alloc_f(n);
	float *w0 = alloc_f(n), *v0 = alloc_f(n), *g0 = alloc_f(n), *w2 = alloc_f(n), *v2 = alloc_f(n),
	      *g2 = alloc_f(n);
	test_fill_uniform(w0, n, -1, 1);
	test_fill_uniform(v0, n, -0.1f, 0.1f);
	test_fill_uniform(g0, n, -30, 30); /* a summed gradient over a batch of 64 */
	memcpy(w, w0, n * sizeof(float)), memcpy(v, v0, n * sizeof(float)), memcpy(g, g0, n * sizeof(float));
	memcpy(w2, w0, n * sizeof(float)), memcpy(v2, v0, n * sizeof(float)), memcpy(g2, g0, n * sizeof(float));
	fill_nan(delta, n);
	dnn_optim_update_delta_cpu(w, v, g, delta, &a);
	dnn_optim_update_cpu(w2, v2, g2, &a); /* delta NULL */
	double *wref = alloc_d(n), *vref = alloc_d(n), *dref = alloc_d(n);
	for (long i = 0; i < n; i++) {
		double gg = (double)g0[i] * a.scale + (double)a.weight_decay * w0[i];
		vref[i] = (double)a.momentum * v0[i] + gg;
		dref[i] = -(double)a.lr * vref[i];
		wref[i] = w0[i] + dref[i];
	}
	char what[96];
	snprintf(what, sizeof(what), "sgd delta n%ld keep_grad %d: w", n, keep_grad);
	test_close_mixed(what, w, wref, n, 1e-6);
	snprintf(what, sizeof(what), "sgd delta n%ld keep_grad %d: v", n, keep_grad);
	test_close_mixed(what, v, vref, n, 1e-6);
	snprintf(what, sizeof(what), "sgd delta n%ld keep_grad %d: delta", n, keep_grad);
	test_close_mixed(what, delta, dref, n, 1e-6);
	int bad_sum = 0, bad_grad = 0;
	for (long i = 0; i < n; i++) {
		/* w -= lr v and delta = -lr v round the same product: w_new = w_old + delta exactly. */
		bad_sum += w[i] != w0[i] + delta[i];
		bad_grad += keep_grad ? memcmp(&g[i], &g0[i], sizeof(float)) != 0 : g[i] != 0.0f;
	}
	TEST_CHECK(bad_sum == 0, "sgd delta n%ld: %d elements with w_new != w_old + delta", n, bad_sum);
	TEST_CHECK(bad_grad == 0, "sgd delta n%ld keep_grad %d: %d grad elements %s", n, keep_grad, bad_grad,
		   keep_grad ? "changed" : "not zeroed");
	TEST_CHECK(memcmp(w, w2, n * sizeof(float)) == 0 && memcmp(v, v2, n * sizeof(float)) == 0 &&
			   memcmp(g, g2, n * sizeof(float)) == 0,
		   "sgd n%ld: dnn_optim_update_cpu and dnn_optim_update_delta_cpu disagree", n);
	free(w), free(v), free(g), free(delta), free(w0), free(v0), free(g0), free(w2), free(v2), free(g2);
	free(wref), free(vref), free(dref);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(20261203);

	test_bn_relu(3, 4, 37);  /* odd plane: the 8-lane sums' remainder */
	test_bn_relu(2, 5, 64);  /* whole lanes */
	test_bn_relu(4, 2, 9);
	test_bn_relu(1, 3, 1);   /* M = 1: var 0, every output = beta */
	test_bn_relu(8, 3, 16);

	test_conv_bias(conv_shape(2, 3, 7, 8, 4, 3, 3, 1, 1, 1));    /* 3x3 pad 1, odd sizes */
	test_conv_bias(conv_shape(3, 4, 9, 9, 5, 3, 3, 2, 1, 1));    /* stride 2 */
	test_conv_bias(conv_shape(2, 16, 8, 8, 16, 3, 3, 1, 1, 1));  /* C16 K16: Winograd under auto */
	test_conv_bias(conv_shape(4, 6, 5, 7, 3, 1, 1, 1, 0, 1));    /* 1x1 */
	test_conv_bias(conv_shape(2, 6, 12, 12, 16, 5, 5, 1, 0, 1)); /* LeNet-5 c2-like */
	test_conv_bias(conv_shape(1, 2, 11, 10, 3, 3, 3, 1, 2, 2));  /* dilation 2, batch 1 */

	test_vec_slices();

	test_sgd_delta(1537, 0);
	test_sgd_delta(1537, 1);
	test_sgd_delta(1, 0);

	test_starpu_shutdown();
	return test_report("unit_fused_kernels");
}
