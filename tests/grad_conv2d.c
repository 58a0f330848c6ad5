/* grad_conv2d — conv2d backward-data and backward-filter, run as StarPU tasks, against central
 * finite differences of L = sum(y .* r) (r random, so dL/dy = r) computed with a double-precision
 * forward. Also checks that accumulate_dx=1 adds onto dx, and that backward-filter tasks on
 * batch chunks accumulate into one STARPU_REDUX gradient handle. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv2d.h"
#include "vec.h"
#include "test_util.h"

#define FD_H 1e-3
#define MAX_FD_POINTS 120 /* finite differences on at most this many elements per tensor */
#define NCHUNKS 3

/* L = sum_{n,k,p,q} y[n,k,p,q] * r[n,k,p,q], y = conv(x, w), all in double (the terms of L
 * are added in the same order as when the conv loop accumulated L itself). */
static double loss_ref(const double *x, const double *w, const double *r, const dnn_conv2d_args *a)
{
	size_t ny = (size_t)a->N * a->K * a->P * a->Q;
	double *y = alloc_d(ny);
	conv2d_forward_ref_d(y, x, w, a);
	double L = 0;
	for (size_t i = 0; i < ny; i++)
		L += y[i] * r[i];
	free(y);
	return L;
}

/* Picks up to MAX_FD_POINTS distinct indices of [0, n): all of them when n is small. */
static size_t fd_points(size_t *idx, size_t n)
{
	if (n <= MAX_FD_POINTS) {
		for (size_t i = 0; i < n; i++)
			idx[i] = i;
		return n;
	}
	for (size_t i = 0; i < MAX_FD_POINTS; i++)
		idx[i] = (size_t)test_rng_int(0, (int)(n - 1));
	return MAX_FD_POINTS;
}

/* Central difference of L with respect to v[i] (v is x or w, perturbed in place). */
static double fd(double *v, size_t i, const double *x, const double *w, const double *r,
		 const dnn_conv2d_args *a)
{
	double keep = v[i];
	v[i] = keep + FD_H;
	double lp = loss_ref(x, w, r, a);
	v[i] = keep - FD_H;
	double lm = loss_ref(x, w, r, a);
	v[i] = keep;
	return (lp - lm) / (2 * FD_H);
}

static void check_shape(dnn_conv2d_args a)
{
	char what[200];
	int len = snprintf(what, sizeof(what), "N%d C%d H%d W%d K%d R%d S%d st%d pad%d dil%d", a.N, a.C,
			   a.H, a.W, a.K, a.R, a.S, a.stride, a.pad, a.dilation);
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "%s: args rejected", what);
		return;
	}
	size_t nx = (size_t)a.N * a.C * a.H * a.W, nw = (size_t)a.K * a.C * a.R * a.S;
	size_t ny = (size_t)a.N * a.K * a.P * a.Q;
	float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float));
	float *r = malloc(ny * sizeof(float)); /* dL/dy */
	float *dx = malloc(nx * sizeof(float)), *dx_acc = malloc(nx * sizeof(float));
	float *dx0 = malloc(nx * sizeof(float));
	float *dw = malloc(nw * sizeof(float)), *dw_redux = malloc(nw * sizeof(float));
	float *dw0 = malloc(nw * sizeof(float));
	test_fill_uniform(x, nx, -1, 1);
	test_fill_uniform(w, nw, -1, 1);
	test_fill_uniform(r, ny, -1, 1);
	test_fill_uniform(dx0, nx, -1, 1);
	test_fill_uniform(dw0, nw, -1, 1);
	for (size_t i = 0; i < nx; i++)
		dx[i] = NAN; /* accumulate_dx = 0 must overwrite */
	memcpy(dx_acc, dx0, nx * sizeof(float));
	memcpy(dw, dw0, nw * sizeof(float));
	memcpy(dw_redux, dw0, nw * sizeof(float));

	/* dx (overwrite), dx (accumulate) and dw (RW), each one task. */
	starpu_data_handle_t hx = reg_f(x, nx), hw = reg_f(w, nw), hr = reg_f(r, ny);
	starpu_data_handle_t hdx = reg_f(dx, nx), hdx_acc = reg_f(dx_acc, nx), hdw = reg_f(dw, nw);
	dnn_insert_conv2d_bwd_data(NULL, &a, hr, hw, hdx);
	dnn_conv2d_args acc = a;
	acc.accumulate_dx = 1;
	dnn_insert_conv2d_bwd_data(NULL, &acc, hr, hw, hdx_acc);
	dnn_insert_conv2d_bwd_filter(NULL, &a, hx, hr, hdw, STARPU_RW);
	starpu_data_unregister(hx);
	starpu_data_unregister(hdx);
	starpu_data_unregister(hdx_acc);
	starpu_data_unregister(hdw);
	starpu_data_unregister(hr);

	/* dw in REDUX mode: one bwd_filter task per batch chunk, plus one for the whole batch. */
	starpu_data_handle_t hdwr = reg_f(dw_redux, nw);
	dnn_vec_set_sum_redux(hdwr);
	int nchunks = a.N < NCHUNKS ? a.N : NCHUNKS;
	starpu_data_handle_t hxc[NCHUNKS], hrc[NCHUNKS];
	for (int c = 0; c < nchunks; c++) {
		int n0 = a.N * c / nchunks, n1 = a.N * (c + 1) / nchunks;
		dnn_conv2d_args ca = a;
		ca.N = n1 - n0;
		hxc[c] = reg_f(x + (size_t)n0 * a.C * a.H * a.W, (size_t)ca.N * a.C * a.H * a.W);
		hrc[c] = reg_f(r + (size_t)n0 * a.K * a.P * a.Q, (size_t)ca.N * a.K * a.P * a.Q);
		dnn_insert_conv2d_bwd_filter(NULL, &ca, hxc[c], hrc[c], hdwr, STARPU_REDUX);
	}
	starpu_data_acquire(hdwr, STARPU_R); /* forces the reduction */
	starpu_data_release(hdwr);
	for (int c = 0; c < nchunks; c++) {
		starpu_data_unregister(hxc[c]);
		starpu_data_unregister(hrc[c]);
	}
	starpu_data_unregister(hdwr);
	starpu_data_unregister(hw);

	/* Finite differences in double. */
	double *xd = to_double(x, nx), *wd = to_double(w, nw), *rd = to_double(r, ny);
	size_t *idx = malloc(MAX_FD_POINTS * sizeof(size_t));
	float *got = malloc(MAX_FD_POINTS * sizeof(float));
	float *got_acc = malloc(MAX_FD_POINTS * sizeof(float));
	float *got_redux = malloc(MAX_FD_POINTS * sizeof(float));
	double *ref = malloc(MAX_FD_POINTS * sizeof(double));

	size_t m = fd_points(idx, nx);
	for (size_t j = 0; j < m; j++) {
		ref[j] = fd(xd, idx[j], xd, wd, rd, &a);
		got[j] = dx[idx[j]];
		got_acc[j] = dx_acc[idx[j]] - dx0[idx[j]];
	}
	snprintf(what + len, sizeof(what) - (size_t)len, " dx");
	test_close_mixed(what, got, ref, m, 1e-4);
	snprintf(what + len, sizeof(what) - (size_t)len, " dx accumulate (fd)");
	test_close_mixed(what, got_acc, ref, m, 1e-4);
	/* The accumulating task must give exactly dx0 + dx, up to one float rounding. */
	for (size_t i = 0; i < nx; i++)
		dx0[i] += dx[i];
	snprintf(what + len, sizeof(what) - (size_t)len, " dx accumulate = dx0 + dx");
	test_close_mixed_f(what, dx_acc, dx0, nx, 1e-6);

	m = fd_points(idx, nw);
	for (size_t j = 0; j < m; j++) {
		ref[j] = fd(wd, idx[j], xd, wd, rd, &a);
		got[j] = dw[idx[j]] - dw0[idx[j]];
		got_redux[j] = dw_redux[idx[j]] - dw0[idx[j]];
	}
	snprintf(what + len, sizeof(what) - (size_t)len, " dw (RW, +=)");
	test_close_mixed(what, got, ref, m, 1e-4);
	snprintf(what + len, sizeof(what) - (size_t)len, " dw (REDUX, %d chunks)", nchunks);
	test_close_mixed(what, got_redux, ref, m, 1e-4);

	free(xd);
	free(wd);
	free(rd);
	free(idx);
	free(got);
	free(got_acc);
	free(got_redux);
	free(ref);
	free(x);
	free(w);
	free(r);
	free(dx);
	free(dx_acc);
	free(dx0);
	free(dw);
	free(dw_redux);
	free(dw0);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(777);

	check_shape(conv_shape(1, 1, 1, 1, 1, 1, 1, 1, 0, 1));
	check_shape(conv_shape(2, 3, 7, 8, 4, 3, 3, 1, 1, 1));    /* 3x3 pad 1, odd sizes */
	check_shape(conv_shape(3, 4, 9, 9, 5, 3, 3, 2, 1, 1));    /* stride 2 */
	check_shape(conv_shape(2, 3, 11, 10, 2, 3, 3, 1, 2, 2));  /* dilation 2 */
	check_shape(conv_shape(4, 6, 5, 7, 3, 1, 1, 1, 0, 1));    /* 1x1 stride 1: no im2col */
	check_shape(conv_shape(3, 5, 8, 7, 4, 1, 1, 2, 0, 1));    /* 1x1 stride 2 */
	check_shape(conv_shape(2, 2, 12, 9, 3, 5, 5, 1, 2, 1));   /* 5x5 */
	check_shape(conv_shape(1, 3, 13, 13, 4, 7, 7, 2, 3, 1));  /* 7x7 stem, batch 1 */
	check_shape(conv_shape(3, 2, 6, 9, 2, 2, 3, 3, 4, 1));    /* pad larger than the kernel */
	check_shape(conv_shape(2, 3, 5, 6, 4, 3, 3, 1, 3, 1));    /* pad > dilation*(R-1) */
	check_shape(conv_shape(2, 3, 8, 7, 4, 2, 3, 1, 1, 1));    /* R != S, stride 1 */
	check_shape(conv_shape(2, 3, 6, 5, 64, 3, 3, 1, 1, 1));   /* stride 1, many output channels */
	check_shape(conv_shape(7, 8, 4, 4, 6, 3, 3, 1, 1, 1));    /* small images: grouped blocks */
	check_shape(conv_shape(2, 3, 10, 11, 4, 1, 1, 3, 0, 1));  /* 1x1 stride 3: subsampled pointwise */
	check_shape(conv_shape(2, 4, 7, 7, 3, 1, 1, 2, 1, 1));    /* 1x1 stride 2 with padding */
	/* C >= 16, stride 1: backward data runs as a forward conv with the flipped kernel. */
	check_shape(conv_shape(2, 16, 6, 7, 3, 3, 3, 1, 3, 1));   /* pad > dilation*(R-1): a crop */
	check_shape(conv_shape(2, 16, 9, 8, 2, 2, 3, 1, 1, 2));   /* R != S, dilation 2 */
	check_shape(conv_shape(3, 20, 5, 5, 4, 3, 3, 1, 1, 1));   /* grouped blocks */
	check_shape(conv_shape(2, 1, 12, 12, 6, 5, 5, 1, 2, 1));  /* LeNet-5 c1-like: direct forward */
	check_shape(conv_shape(2, 6, 8, 8, 5, 5, 5, 1, 0, 1));    /* LeNet-5 c2-like */
	check_shape(conv_shape(2, 16, 24, 24, 3, 3, 3, 1, 1, 1)); /* large images: row tiles */
	check_shape(conv_shape(2, 16, 47, 45, 3, 3, 3, 2, 1, 1)); /* row tiles, stride 2, odd */
	for (int t = 0; t < 10; t++) {
		dnn_conv2d_args r;
		do {
			r = conv_shape(test_rng_int(1, 4), test_rng_int(1, 5), test_rng_int(1, 12),
				       test_rng_int(1, 12), test_rng_int(1, 5), test_rng_int(1, 4),
				       test_rng_int(1, 4), test_rng_int(1, 3), test_rng_int(0, 2),
				       test_rng_int(1, 2));
		} while (dnn_conv2d_args_finish(&r) != 0);
		check_shape(r);
	}

	test_starpu_shutdown();
	return test_report("grad_conv2d");
}
