/* grad_ops — backward of dense (data, weight, bias; its weight gradient through STARPU_REDUX and
 * STARPU_RW handles) and bias, run as StarPU tasks, against central finite differences in double
 * precision. relu, add (fan-out), avgpool, softmax_xent and dense over many chunks are the op
 * harness's (tests/op_cases.c).
 *
 * For an op y = f(inputs), the scalar L = sum(y .* r) with a random r has dL/dy = r, so the
 * backward codelet fed with dy = r must return dL/dinput, which is estimated by
 * (L(p + eps) - L(p - eps)) / 2eps with double-precision forward references. softmax_xent's
 * dlogits is checked against the finite differences of its summed loss. Parameter gradients
 * start from random values and must receive +=, through STARPU_REDUX handles. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "add.h"
#include "avgpool.h"
#include "bias.h"
#include "dense.h"
#include "vec.h"
#include "relu.h"
#include "softmax_xent.h"
#include "test_util.h"

#define EPS 1e-4
#define TOL 1e-4

/* Central difference of loss(ctx) w.r.t. each p[i], added to g[i] (g may start non-zero). */
typedef double (*loss_fn)(void *ctx);
static void fd_grad(double *g, double *p, size_t n, loss_fn loss, void *ctx)
{
	for (size_t i = 0; i < n; i++) {
		double keep = p[i];
		p[i] = keep + EPS;
		double lp = loss(ctx);
		p[i] = keep - EPS;
		double lm = loss(ctx);
		p[i] = keep;
		g[i] += (lp - lm) / (2 * EPS);
	}
}

// ------------------------------------------------------------------------------- dense

typedef struct {
	int N, IN, OUT;
	double *x, *w, *b, *r; // (N,IN) (OUT,IN) (OUT) (N,OUT)
} dense_ctx;

static double dense_loss(void *p)
{
	const dense_ctx *c = p;
	double L = 0;
	for (int n = 0; n < c->N; n++)
		for (int o = 0; o < c->OUT; o++) {
			double y = c->b[o];
			for (int i = 0; i < c->IN; i++)
				y += c->x[(size_t)n * c->IN + i] * c->w[(size_t)o * c->IN + i];
			L += y * c->r[(size_t)n * c->OUT + o];
		}
	return L;
}

/* One chunk: bwd_data (overwrite and accumulate) and bwd_weight into REDUX and RW handles. */
static void check_dense(int N, int IN, int OUT)
{
	size_t nx = (size_t)N * IN, nw = (size_t)OUT * IN, ny = (size_t)N * OUT;
	float *x = alloc_f(nx), *w = alloc_f(nw), *b = alloc_f(OUT), *r = alloc_f(ny);
	test_fill_uniform(x, nx, -1, 1);
	test_fill_uniform(w, nw, -1, 1);
	test_fill_uniform(b, OUT, -1, 1);
	test_fill_uniform(r, ny, -1, 1);
	dense_ctx c = {N, IN, OUT, to_double(x, nx), to_double(w, nw), to_double(b, OUT), to_double(r, ny)};
	double *gx = alloc_d(nx), *gw = alloc_d(nw), *gb = alloc_d(OUT);
	fd_grad(gx, c.x, nx, dense_loss, &c);
	fd_grad(gw, c.w, nw, dense_loss, &c);
	fd_grad(gb, c.b, OUT, dense_loss, &c);

	float *dx0 = alloc_f(nx), *dx1 = alloc_f(nx);
	float *dw_redux = alloc_f(nw), *db_redux = alloc_f(OUT), *dw_rw = alloc_f(nw), *db_rw = alloc_f(OUT);
	fill_nan(dx0, nx);
	test_fill_uniform(dx1, nx, -1, 1);
	test_fill_uniform(dw_redux, nw, -1, 1);
	test_fill_uniform(db_redux, OUT, -1, 1);
	memcpy(dw_rw, dw_redux, nw * sizeof(float));
	memcpy(db_rw, db_redux, OUT * sizeof(float));
	double *want_dx1 = alloc_d(nx), *want_dw = alloc_d(nw), *want_db = alloc_d(OUT);
	for (size_t i = 0; i < nx; i++)
		want_dx1[i] = dx1[i] + gx[i];
	for (size_t i = 0; i < nw; i++)
		want_dw[i] = dw_redux[i] + gw[i];
	for (int i = 0; i < OUT; i++)
		want_db[i] = db_redux[i] + gb[i];

	starpu_data_handle_t hx = reg_f(x, nx), hw = reg_f(w, nw), hr = reg_f(r, ny);
	starpu_data_handle_t hdx0 = reg_f(dx0, nx), hdx1 = reg_f(dx1, nx);
	starpu_data_handle_t hdw = reg_f(dw_redux, nw), hdb = reg_f(db_redux, OUT);
	starpu_data_handle_t hdw_rw = reg_f(dw_rw, nw), hdb_rw = reg_f(db_rw, OUT);
	dnn_vec_set_sum_redux(hdw);
	dnn_vec_set_sum_redux(hdb);
	dnn_dense_args a = {.N = N, .IN = IN, .OUT = OUT, .accumulate_dx = 0};
	dnn_insert_dense_bwd_data(NULL, &a, hr, hw, hdx0);
	a.accumulate_dx = 1;
	dnn_insert_dense_bwd_data(NULL, &a, hr, hw, hdx1);
	dnn_insert_dense_bwd_weight(NULL, &a, hx, hr, hdw, hdb, STARPU_REDUX);
	dnn_insert_dense_bwd_weight(NULL, &a, hx, hr, hdw_rw, hdb_rw, STARPU_RW);
	starpu_data_handle_t all[] = {hx, hw, hr, hdx0, hdx1, hdw, hdb, hdw_rw, hdb_rw};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		starpu_data_unregister(all[i]);

	char what[96];
	snprintf(what, sizeof(what), "dense N=%d IN=%d OUT=%d dx", N, IN, OUT);
	test_close_mixed(what, dx0, gx, nx, TOL);
	snprintf(what, sizeof(what), "dense N=%d IN=%d OUT=%d dx accumulated", N, IN, OUT);
	test_close_mixed(what, dx1, want_dx1, nx, TOL);
	snprintf(what, sizeof(what), "dense N=%d IN=%d OUT=%d dw redux", N, IN, OUT);
	test_close_mixed(what, dw_redux, want_dw, nw, TOL);
	snprintf(what, sizeof(what), "dense N=%d IN=%d OUT=%d db redux", N, IN, OUT);
	test_close_mixed(what, db_redux, want_db, OUT, TOL);
	snprintf(what, sizeof(what), "dense N=%d IN=%d OUT=%d dw rw", N, IN, OUT);
	test_close_mixed(what, dw_rw, want_dw, nw, TOL);
	snprintf(what, sizeof(what), "dense N=%d IN=%d OUT=%d db rw", N, IN, OUT);
	test_close_mixed(what, db_rw, want_db, OUT, TOL);

	free(x), free(w), free(b), free(r), free(c.x), free(c.w), free(c.b), free(c.r);
	free(gx), free(gw), free(gb), free(dx0), free(dx1), free(dw_redux), free(db_redux), free(dw_rw), free(db_rw);
	free(want_dx1), free(want_dw), free(want_db);
}

// ------------------------------------------------------------------------------- bias

typedef struct {
	int N, C, HW;
	double *y0, *b, *r; // (N,C,HW) (C) (N,C,HW)
} bias_ctx;

static double bias_loss(void *p)
{
	const bias_ctx *c = p;
	double L = 0;
	for (int n = 0; n < c->N; n++)
		for (int ch = 0; ch < c->C; ch++)
			for (int i = 0; i < c->HW; i++) {
				size_t k = ((size_t)n * c->C + ch) * c->HW + i;
				L += (c->y0[k] + c->b[ch]) * c->r[k];
			}
	return L;
}

static void check_bias(int N, int C, int HW)
{
	size_t n = (size_t)N * C * HW;
	float *y0 = alloc_f(n), *b = alloc_f(C), *r = alloc_f(n), *db = alloc_f(C), *db_rw = alloc_f(C);
	test_fill_uniform(y0, n, -1, 1);
	test_fill_uniform(b, C, -1, 1);
	test_fill_uniform(r, n, -1, 1);
	test_fill_uniform(db, C, -1, 1);
	memcpy(db_rw, db, C * sizeof(float));
	bias_ctx c = {N, C, HW, to_double(y0, n), to_double(b, C), to_double(r, n)};
	double *want = to_double(db, C);
	fd_grad(want, c.b, C, bias_loss, &c);

	/* Through a REDUX handle (as in training) and a plain RW one (which shows the += directly). */
	starpu_data_handle_t hr = reg_f(r, n), hdb = reg_f(db, C), hdb_rw = reg_f(db_rw, C);
	dnn_vec_set_sum_redux(hdb);
	dnn_bias_args a = {.N = N, .C = C, .HW = HW};
	dnn_insert_bias_bwd(NULL, &a, hr, hdb, STARPU_REDUX);
	dnn_insert_bias_bwd(NULL, &a, hr, hdb_rw, STARPU_RW);
	starpu_data_unregister(hr);
	starpu_data_unregister(hdb);
	starpu_data_unregister(hdb_rw);
	char what[64];
	snprintf(what, sizeof(what), "bias N=%d C=%d HW=%d db redux", N, C, HW);
	test_close_mixed(what, db, want, C, TOL);
	snprintf(what, sizeof(what), "bias N=%d C=%d HW=%d db rw", N, C, HW);
	test_close_mixed(what, db_rw, want, C, TOL);
	free(y0), free(b), free(r), free(db), free(db_rw), free(c.y0), free(c.b), free(c.r), free(want);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(4321);

	const int dense_shapes[][3] = {{1, 1, 1}, {3, 5, 4}, {4, 17, 9}, {1, 8, 3}, {7, 3, 11}};
	for (size_t i = 0; i < sizeof(dense_shapes) / sizeof(dense_shapes[0]); i++)
		check_dense(dense_shapes[i][0], dense_shapes[i][1], dense_shapes[i][2]);

	const int nchw_shapes[][3] = {{1, 1, 1}, {2, 3, 5}, {3, 7, 9}, {1, 4, 16}};
	for (size_t i = 0; i < sizeof(nchw_shapes) / sizeof(nchw_shapes[0]); i++) {
		check_bias(nchw_shapes[i][0], nchw_shapes[i][1], nchw_shapes[i][2]);
	}

	test_starpu_shutdown();
	return test_report("grad_ops");
}
