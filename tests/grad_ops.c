/* grad_ops — backward of dense (data, weight, bias), bias, relu, add (fan-out), avgpool and
 * softmax_xent, run as StarPU tasks, against central finite differences in double precision.
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

/* K chunks, each its own bwd_weight task, all accumulating into one REDUX dw/db: the result must
 * be the initial value plus the finite differences of the total loss sum_k L_k. */
static void check_dense_redux_chunks(int K, int N, int IN, int OUT)
{
	size_t nx = (size_t)N * IN, nw = (size_t)OUT * IN, ny = (size_t)N * OUT;
	float *x = alloc_f(K * nx), *r = alloc_f(K * ny), *w = alloc_f(nw), *b = alloc_f(OUT);
	float *dw = alloc_f(nw), *db = alloc_f(OUT);
	test_fill_uniform(x, K * nx, -1, 1);
	test_fill_uniform(r, K * ny, -1, 1);
	test_fill_uniform(w, nw, -1, 1);
	test_fill_uniform(b, OUT, -1, 1);
	test_fill_uniform(dw, nw, -1, 1);
	test_fill_uniform(db, OUT, -1, 1);
	double *gw = to_double(dw, nw), *gb = to_double(db, OUT);
	double *wd = to_double(w, nw), *bd = to_double(b, OUT);
	for (int k = 0; k < K; k++) {
		dense_ctx c = {N, IN, OUT, to_double(x + k * nx, nx), wd, bd, to_double(r + k * ny, ny)};
		fd_grad(gw, wd, nw, dense_loss, &c);
		fd_grad(gb, bd, OUT, dense_loss, &c);
		free(c.x), free(c.r);
	}

	starpu_data_handle_t hdw = reg_f(dw, nw), hdb = reg_f(db, OUT), *hx = malloc(K * sizeof(*hx)),
			     *hr = malloc(K * sizeof(*hr));
	dnn_vec_set_sum_redux(hdw);
	dnn_vec_set_sum_redux(hdb);
	dnn_dense_args a = {.N = N, .IN = IN, .OUT = OUT, .accumulate_dx = 0};
	for (int k = 0; k < K; k++) {
		hx[k] = reg_f(x + k * nx, nx);
		hr[k] = reg_f(r + k * ny, ny);
		dnn_insert_dense_bwd_weight(NULL, &a, hx[k], hr[k], hdw, hdb, STARPU_REDUX);
	}
	starpu_data_acquire(hdw, STARPU_R);
	starpu_data_acquire(hdb, STARPU_R);
	char what[96];
	snprintf(what, sizeof(what), "dense redux over %d chunks dw", K);
	test_close_mixed(what, dw, gw, nw, TOL);
	snprintf(what, sizeof(what), "dense redux over %d chunks db", K);
	test_close_mixed(what, db, gb, OUT, TOL);
	starpu_data_release(hdb);
	starpu_data_release(hdw);
	for (int k = 0; k < K; k++) {
		starpu_data_unregister(hx[k]);
		starpu_data_unregister(hr[k]);
	}
	starpu_data_unregister(hdw);
	starpu_data_unregister(hdb);
	free(hx), free(hr), free(x), free(r), free(w), free(b), free(dw), free(db), free(gw), free(gb), free(wd),
		free(bd);
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

// ------------------------------------------------------------------------------- relu

typedef struct {
	long n;
	double *x, *r;
} relu_ctx;

static double relu_loss(void *p)
{
	const relu_ctx *c = p;
	double L = 0;
	for (long i = 0; i < c->n; i++)
		L += (c->x[i] > 0 ? c->x[i] : 0) * c->r[i];
	return L;
}

static void check_relu(long n)
{
	float *x = alloc_f(n), *y = alloc_f(n), *r = alloc_f(n), *dx0 = alloc_f(n), *dx1 = alloc_f(n);
	test_fill_uniform(x, n, -1, 1);
	for (long i = 0; i < n; i++) /* keep away from the kink at 0 */
		if (fabsf(x[i]) < 0.05f)
			x[i] = x[i] < 0 ? -0.05f : 0.05f;
	test_fill_uniform(r, n, -1, 1);
	fill_nan(y, n);
	fill_nan(dx0, n);
	test_fill_uniform(dx1, n, -1, 1);
	relu_ctx c = {n, to_double(x, n), to_double(r, n)};
	double *g = alloc_d(n), *want1 = to_double(dx1, n);
	fd_grad(g, c.x, n, relu_loss, &c);
	for (long i = 0; i < n; i++)
		want1[i] += g[i];

	starpu_data_handle_t hx = reg_f(x, n), hy = reg_f(y, n), hr = reg_f(r, n), hdx0 = reg_f(dx0, n),
			     hdx1 = reg_f(dx1, n);
	dnn_relu_args a = {.n = n, .accumulate_dx = 0};
	dnn_insert_relu_fwd(NULL, &a, hx, hy);
	dnn_insert_relu_bwd(NULL, &a, hy, hr, hdx0);
	a.accumulate_dx = 1;
	dnn_insert_relu_bwd(NULL, &a, hy, hr, hdx1);
	starpu_data_handle_t all[] = {hx, hy, hr, hdx0, hdx1};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		starpu_data_unregister(all[i]);
	char what[64];
	snprintf(what, sizeof(what), "relu n=%ld dx", n);
	test_close_mixed(what, dx0, g, n, TOL);
	snprintf(what, sizeof(what), "relu n=%ld dx accumulated", n);
	test_close_mixed(what, dx1, want1, n, TOL);
	free(x), free(y), free(r), free(dx0), free(dx1), free(c.x), free(c.r), free(g), free(want1);
}

// ------------------------------------------------------------------------------- add (fan-out)

typedef struct {
	long n;
	double *x, *r;
} add_ctx;

/* y = x + x: the same tensor feeds both inputs, so its gradient is the sum of two fan-out terms. */
static double add_loss(void *p)
{
	const add_ctx *c = p;
	double L = 0;
	for (long i = 0; i < c->n; i++)
		L += (c->x[i] + c->x[i]) * c->r[i];
	return L;
}

static void check_add(long n)
{
	float *x = alloc_f(n), *y = alloc_f(n), *r = alloc_f(n), *dx = alloc_f(n);
	test_fill_uniform(x, n, -1, 1);
	test_fill_uniform(r, n, -1, 1);
	fill_nan(dx, n); /* the first add_bwd (accumulate_dx 0) must overwrite it */
	add_ctx c = {n, to_double(x, n), to_double(r, n)};
	double *g = alloc_d(n);
	fd_grad(g, c.x, n, add_loss, &c);

	starpu_data_handle_t hx = reg_f(x, n), hy = reg_f(y, n), hr = reg_f(r, n), hdx = reg_f(dx, n);
	dnn_add_args a = {.n = n, .accumulate_dx = 0};
	dnn_insert_add_fwd(NULL, &a, hx, hx, hy);
	dnn_insert_add_bwd(NULL, &a, hr, hdx);
	a.accumulate_dx = 1;
	dnn_insert_add_bwd(NULL, &a, hr, hdx);
	starpu_data_handle_t all[] = {hx, hy, hr, hdx};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		starpu_data_unregister(all[i]);
	char what[64];
	snprintf(what, sizeof(what), "add fan-out n=%ld dx", n);
	test_close_mixed(what, dx, g, n, TOL);
	free(x), free(y), free(r), free(dx), free(c.x), free(c.r), free(g);
}

// ------------------------------------------------------------------------------- avgpool

typedef struct {
	int N, C, HW;
	double *x, *r; // (N,C,HW) (N,C)
} avgpool_ctx;

static double avgpool_loss(void *p)
{
	const avgpool_ctx *c = p;
	double L = 0;
	for (size_t row = 0; row < (size_t)c->N * c->C; row++) {
		double s = 0;
		for (int i = 0; i < c->HW; i++)
			s += c->x[row * c->HW + i];
		L += s / c->HW * c->r[row];
	}
	return L;
}

static void check_avgpool(int N, int C, int HW)
{
	size_t nx = (size_t)N * C * HW, ny = (size_t)N * C;
	float *x = alloc_f(nx), *r = alloc_f(ny), *dx0 = alloc_f(nx), *dx1 = alloc_f(nx);
	test_fill_uniform(x, nx, -1, 1);
	test_fill_uniform(r, ny, -1, 1);
	fill_nan(dx0, nx);
	test_fill_uniform(dx1, nx, -1, 1);
	avgpool_ctx c = {N, C, HW, to_double(x, nx), to_double(r, ny)};
	double *g = alloc_d(nx), *want1 = to_double(dx1, nx);
	fd_grad(g, c.x, nx, avgpool_loss, &c);
	for (size_t i = 0; i < nx; i++)
		want1[i] += g[i];

	starpu_data_handle_t hr = reg_f(r, ny), hdx0 = reg_f(dx0, nx), hdx1 = reg_f(dx1, nx);
	dnn_avgpool_args a = {.N = N, .C = C, .HW = HW, .accumulate_dx = 0};
	dnn_insert_avgpool_bwd(NULL, &a, hr, hdx0);
	a.accumulate_dx = 1;
	dnn_insert_avgpool_bwd(NULL, &a, hr, hdx1);
	starpu_data_unregister(hr);
	starpu_data_unregister(hdx0);
	starpu_data_unregister(hdx1);
	char what[64];
	snprintf(what, sizeof(what), "avgpool N=%d C=%d HW=%d dx", N, C, HW);
	test_close_mixed(what, dx0, g, nx, TOL);
	snprintf(what, sizeof(what), "avgpool N=%d C=%d HW=%d dx accumulated", N, C, HW);
	test_close_mixed(what, dx1, want1, nx, TOL);
	free(x), free(r), free(dx0), free(dx1), free(c.x), free(c.r), free(g), free(want1);
}

// ------------------------------------------------------------------------------- softmax_xent

typedef struct {
	int N, CLS;
	double *l;
	const int32_t *labels;
} xent_ctx;

static double xent_loss(void *p)
{
	const xent_ctx *c = p;
	double L = 0;
	for (int n = 0; n < c->N; n++) {
		const double *l = c->l + (size_t)n * c->CLS;
		double m = l[0];
		for (int j = 1; j < c->CLS; j++)
			m = l[j] > m ? l[j] : m;
		double s = 0;
		for (int j = 0; j < c->CLS; j++)
			s += exp(l[j] - m);
		L += m + log(s) - l[c->labels[n]];
	}
	return L;
}

static void check_softmax_xent(int N, int CLS, float offset)
{
	size_t n = (size_t)N * CLS;
	float *logits = alloc_f(n), *dl = alloc_f(n), stats[2];
	int32_t *labels = malloc(N * sizeof(int32_t));
	test_fill_uniform(logits, n, -3, 3);
	for (size_t i = 0; i < n; i++)
		logits[i] += offset;
	for (int i = 0; i < N; i++)
		labels[i] = test_rng_int(0, CLS - 1);
	fill_nan(dl, n);
	xent_ctx c = {N, CLS, to_double(logits, n), labels};
	double *g = alloc_d(n);
	fd_grad(g, c.l, n, xent_loss, &c);

	starpu_data_handle_t hl = reg_f(logits, n), hlab, hd = reg_f(dl, n), hs = reg_f(stats, 2);
	starpu_vector_data_register(&hlab, STARPU_MAIN_RAM, (uintptr_t)labels, N, sizeof(int32_t));
	dnn_softmax_xent_args a = {.N = N, .CLS = CLS};
	dnn_insert_softmax_xent(NULL, &a, hl, hlab, hd, hs);
	starpu_data_unregister(hl);
	starpu_data_unregister(hlab);
	starpu_data_unregister(hd);
	starpu_data_unregister(hs);
	char what[80];
	snprintf(what, sizeof(what), "softmax_xent N=%d CLS=%d offset=%g dlogits", N, CLS, (double)offset);
	test_close_mixed(what, dl, g, n, TOL);
	free(logits), free(dl), free(labels), free(c.l), free(g);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(4321);

	const int dense_shapes[][3] = {{1, 1, 1}, {3, 5, 4}, {4, 17, 9}, {1, 8, 3}, {7, 3, 11}};
	for (size_t i = 0; i < sizeof(dense_shapes) / sizeof(dense_shapes[0]); i++)
		check_dense(dense_shapes[i][0], dense_shapes[i][1], dense_shapes[i][2]);
	check_dense_redux_chunks(8, 3, 7, 5);
	check_dense_redux_chunks(24, 1, 4, 3);

	const int nchw_shapes[][3] = {{1, 1, 1}, {2, 3, 5}, {3, 7, 9}, {1, 4, 16}};
	for (size_t i = 0; i < sizeof(nchw_shapes) / sizeof(nchw_shapes[0]); i++) {
		check_bias(nchw_shapes[i][0], nchw_shapes[i][1], nchw_shapes[i][2]);
		check_avgpool(nchw_shapes[i][0], nchw_shapes[i][1], nchw_shapes[i][2]);
	}

	const long lens[] = {1, 13, 257};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		check_relu(lens[i]);
		check_add(lens[i]);
	}

	check_softmax_xent(1, 2, 0);
	check_softmax_xent(4, 5, 0);
	check_softmax_xent(3, 10, 0);
	check_softmax_xent(2, 7, 1000);

	test_starpu_shutdown();
	return test_report("grad_ops");
}
