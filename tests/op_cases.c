/* op_cases.c — the op harness's table (op_harness.h): one row per op of graph/ops/ops.def, with
 * its double-precision forward reference, its shapes and keys per mode, its tolerances and its
 * own extra checks. Adding an op = a reference function and a row here. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "conv2d.h"
#include "conv2d_impl.h"
#include "vec.h"
#include "dropout.h"
#include "fuse.h"
#include "gelu.h"
#include "layernorm.h"
#include "leaky_relu.h"
#include "maxpool.h"
#include "batchnorm.h"
#include "batchnorm_simd.h"
#include "op.h"
#include "op_harness.h"
#include "relu.h"
#include "test_util.h"

/* Shape rows name only what they set ({N, C, H, W, keys[, chunks[, shift]]}). */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define NS(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define SHAPES(u, g, c) .shapes = {u, g, c}, .nshapes = {NS(u), NS(g), NS(c)}

static size_t in_n(const h_ref_args *a) { return (size_t)a->n * a->in->C * a->in->H * a->in->W; }

/* ------------------------------------------------------------------ element-wise fills */

/* Exact zeros every `every`-th element (they map to zero; the backward mask at the kink). */
static void zeros_every(float *x, size_t n, size_t every)
{
	for (size_t i = 0; i < n; i += every)
		x[i] = 0.0f;
}

/* At least 0.05 away from the kink at 0: the central difference with eps 1e-3 is exact but for
 * its rounding. */
static void off_kink(float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fabsf(x[i]) < 0.05f)
			x[i] = x[i] < 0 ? -0.05f : 0.05f;
}

/* ------------------------------------------------------------------ leaky_relu */

#define ALPHA(a) ((double)(a)->nd->fattr[0])

static void ref_leaky_relu(const h_ref_args *a, double *y)
{
	for (size_t i = 0, n = in_n(a); i < n; i++)
		y[i] = a->x[0][i] > 0 ? a->x[0][i] : ALPHA(a) * a->x[0][i];
}

static void ref_leaky_relu_bwd(const h_ref_args *a, const double *dy, double *dx)
{
	for (size_t i = 0, n = in_n(a); i < n; i++)
		dx[i] = a->x[0][i] > 0 ? dy[i] : ALPHA(a) * dy[i];
}

/* unit, gpu: in [-2, 2) with exact zeros every 7th; grad: in [-1, 1), off the kink. */
static void fill_leaky_relu(int mode, int k, float *x, size_t n)
{
	(void)k;
	if (mode == H_GRAD) {
		test_fill_uniform(x, n, -1, 1);
		off_kink(x, n);
	} else {
		test_fill_uniform(x, n, -2, 2);
		zeros_every(x, n, 7);
	}
}

/* alpha = 0 is relu (codelets/relu.h), every value equal (0 * x is -0 where relu writes +0), and
 * alpha = 1 is the identity bit for bit, forward; backward likewise against relu's. */
static void extra_leaky_relu_unit(void)
{
	const long lens[] = {1, 7, 1001, 100003};
	for (int l = 0; l < NS(lens); l++) {
		const long n = lens[l];
		float *x = alloc_f(n), *y = alloc_f(n), *dy = alloc_f(n), *dx = alloc_f(n), *yr = alloc_f(n), *dxr = alloc_f(n);
		test_fill_uniform(x, n, -2, 2);
		zeros_every(x, n, 7);
		test_fill_uniform(dy, n, -1, 1);
		dnn_leaky_relu_forward_cpu(y, x, n, 0.0f);
		dnn_leaky_relu_backward_cpu(dx, y, dy, n, 0.0f, 0);
		dnn_relu_forward_cpu(yr, x, n);
		dnn_relu_backward_cpu(dxr, yr, dy, n, 0);
		long differ = 0;
		for (long i = 0; i < n; i++) /* == as values: 0 * x is -0 where relu writes +0 */
			differ += yr[i] != y[i] || dxr[i] != dx[i];
		TEST_CHECK(differ == 0, "alpha=0: %ld elements differ from relu's forward or backward (n=%ld)", differ, n);
		dnn_leaky_relu_forward_cpu(y, x, n, 1.0f);
		TEST_CHECK(memcmp(x, y, sizeof(float) * (size_t)n) == 0, "alpha=1 is not the identity (n=%ld)", n);
		free(x), free(y), free(dy), free(dx), free(yr), free(dxr);
	}
}

static const h_shape leaky_unit[] = {
	{1, 1, 1, 1, "alpha=0"},        {1, 1, 1, 1, "alpha=0.01"},      {1, 1, 1, 1, "alpha=0.3"},
	{1, 1, 1, 1, "alpha=1"},        {1, 7, 1, 1, "alpha=0"},         {1, 7, 1, 1, "alpha=0.01"},
	{1, 7, 1, 1, "alpha=0.3"},      {1, 7, 1, 1, "alpha=1"},         {1, 1001, 1, 1, "alpha=0"},
	{1, 1001, 1, 1, "alpha=0.01"},  {1, 1001, 1, 1, "alpha=0.3"},    {1, 1001, 1, 1, "alpha=1"},
	{1, 15, 1, 6667, "alpha=0"},   {1, 15, 1, 6667, "alpha=0.01"}, {1, 15, 1, 6667, "alpha=0.3"},
	{1, 15, 1, 6667, "alpha=1"},   {6, 3, 5, 7, "alpha=0.2", 4},
};
static const h_shape leaky_grad[] = {
	{1, 1, 1, 1, "alpha=0.01"},  {1, 1, 1, 1, "alpha=0.2"},  {1, 1, 1, 1, "alpha=1"},
	{1, 17, 1, 1, "alpha=0.01"}, {1, 17, 1, 1, "alpha=0.2"}, {1, 17, 1, 1, "alpha=1"},
	{1, 1000, 1, 1, "alpha=0.01"}, {1, 1000, 1, 1, "alpha=0.2"}, {1, 1000, 1, 1, "alpha=1"},
	{5, 4, 3, 3, "alpha=0.2", 3},
};
static const h_shape leaky_gpu[] = {
	{1, 1, 1, 1, "alpha=0.01"},      {1, 1, 1, 1, "alpha=0.3"},      {1, 7, 1, 1, "alpha=0.01"},
	{1, 7, 1, 1, "alpha=0.3"},       {1, 1001, 1, 1, "alpha=0.01"},  {1, 1001, 1, 1, "alpha=0.3"},
	{1, 15, 1, 6667, "alpha=0.01"}, {1, 15, 1, 6667, "alpha=0.3"},
};

/* ------------------------------------------------------------------ relu */

static void ref_relu(const h_ref_args *a, double *y)
{
	for (size_t i = 0, n = in_n(a); i < n; i++)
		y[i] = a->x[0][i] > 0 ? a->x[0][i] : 0.0;
}

static void ref_relu_bwd(const h_ref_args *a, const double *dy, double *dx)
{
	for (size_t i = 0, n = in_n(a); i < n; i++)
		dx[i] = a->x[0][i] > 0 ? dy[i] : 0.0;
}

/* unit: exact zeros every 7th; grad: off the kink; gpu: zeros every 5th. */
static void fill_relu(int mode, int k, float *x, size_t n)
{
	(void)k;
	test_fill_uniform(x, n, -1, 1);
	if (mode == H_GRAD)
		off_kink(x, n);
	else
		zeros_every(x, n, mode == H_UNIT ? 7 : 5);
}

static const h_shape relu_unit[] = {{1, 1, 1, 1}, {1, 7, 1, 1}, {1, 1001, 1, 1}, {1, 4099, 1, 1}, {4, 3, 5, 5, NULL, 3}};
static const h_shape relu_grad[] = {{1, 1, 1, 1}, {1, 13, 1, 1}, {1, 257, 1, 1}, {4, 3, 3, 3, NULL, 2}};
static const h_shape relu_gpu[] = {{1, 1, 1, 1}, {1, 7, 1, 1}, {1, 1001, 1, 1}, {1, 15, 1, 6667}};

/* ------------------------------------------------------------------ add */

static void ref_add(const h_ref_args *a, double *y)
{
	for (size_t i = 0, n = in_n(a); i < n; i++)
		y[i] = a->x[0][i] + a->x[1][i];
}

static const h_shape add_unit[] = {{1, 1, 1, 1}, {1, 7, 1, 1}, {1, 1001, 1, 1}, {1, 4099, 1, 1}, {3, 4, 3, 5, NULL, 2}};
static const h_shape add_grad[] = {{1, 1, 1, 1}, {1, 13, 1, 1}, {1, 257, 1, 1}};
static const h_shape add_gpu[] = {{1, 1, 1, 1}, {1, 7, 1, 1}, {1, 1001, 1, 1}, {1, 15, 1, 6667}};
static const h_shape none[] = {{0}};

/* ------------------------------------------------------------------ avgpool */

static void ref_avgpool(const h_ref_args *a, double *y)
{
	const int HW = a->in->H * a->in->W;
	for (size_t r = 0; r < (size_t)a->n * a->in->C; r++) {
		double s = 0;
		for (int i = 0; i < HW; i++)
			s += a->x[0][r * HW + i];
		y[r] = s / HW;
	}
}

/* (N, C, HW) as N samples of C x HW x 1 */
static const h_shape avgpool_unit[] = {{1, 1, 1, 1}, {1, 3, 5, 1}, {3, 7, 9, 1}, {8, 16, 49, 1}, {2, 5, 1, 1}, {6, 4, 3, 3, NULL, 3}};
static const h_shape avgpool_grad[] = {{1, 1, 1, 1}, {2, 3, 5, 1}, {3, 7, 9, 1}, {1, 4, 16, 1}, {4, 2, 3, 2, NULL, 2}};
static const h_shape avgpool_gpu[] = {{1, 1, 1, 1}, {1, 3, 5, 1}, {3, 7, 9, 1}, {8, 64, 49, 1}, {4, 300, 1, 1}, {2, 3, 1000, 1}};

/* ------------------------------------------------------------------ dense */

/* On a sequence, per token: rows = n T tokens of C features. */
static void ref_dense(const h_ref_args *a, double *y)
{
	const int seq = a->in->seq, IN = seq ? a->in->C : a->in->C * a->in->H * a->in->W, OUT = a->nd->out;
	const int rows = seq ? a->n * a->in->H : a->n;
	for (int n = 0; n < rows; n++)
		for (int o = 0; o < OUT; o++) {
			double s = a->w[1][o];
			for (int i = 0; i < IN; i++)
				s += a->x[0][(size_t)n * IN + i] * a->w[0][(size_t)o * IN + i];
			y[(size_t)n * OUT + o] = s;
		}
}

/* (N, IN, OUT); the last grad rows: 8 chunks of 3 and 24 chunks of 1 into one REDUX dw, db;
 * the seq rows (N, C, T): per token over a sequence [T][C] */
static const h_shape dense_unit[] = {{1, 1, 1, 1, "out=1"},    {1, 7, 1, 1, "out=3"},     {5, 13, 1, 1, "out=9"},
				     {17, 33, 1, 1, "out=10"}, {64, 129, 1, 1, "out=65"}, {3, 300, 1, 1, "out=1"},
				     {9, 3, 2, 2, "out=4", 3}, {1, 8, 5, 1, "out=3", 0, 0, 1},
				     {4, 16, 33, 1, "out=48", 3, 0, 1}};
static const h_shape dense_grad[] = {{1, 1, 1, 1, "out=1"}, {3, 5, 1, 1, "out=4"},   {4, 17, 1, 1, "out=9"},
				     {1, 8, 1, 1, "out=3"}, {7, 3, 1, 1, "out=11"},  {24, 7, 1, 1, "out=5", 8},
				     {24, 4, 1, 1, "out=3", 24}, {2, 6, 7, 1, "out=5", 0, 0, 1},
				     {5, 4, 3, 1, "out=3", 2, 0, 1}};
static const h_shape dense_gpu[] = {{1, 1, 1, 1, "out=1"},    {1, 7, 1, 1, "out=3"}, {5, 13, 1, 1, "out=9"},
				    {64, 129, 1, 1, "out=65"}, {128, 784, 1, 1, "out=10"}, {16, 33, 1, 1, "out=10", 8},
				    {4, 64, 128, 1, "out=192", 2, 0, 1}};

/* ------------------------------------------------------------------ softmax_xent */

/* y[0] = the summed loss (log-sum-exp shifted by the row max), y[1] = the correct count (ties
 * to the lowest index). On a sequence: rows are tokens, both divided by T (each sample's mean). */
static void ref_softmax_xent(const h_ref_args *a, double *y)
{
	const int CLS = a->in->C, T = a->in->seq ? a->in->H : 1;
	y[0] = y[1] = 0;
	for (int r = 0; r < a->n * T; r++) {
		const double *l = a->x[0] + (size_t)r * CLS;
		int am = 0;
		for (int j = 1; j < CLS; j++)
			if (l[j] > l[am])
				am = j;
		double s = 0;
		for (int j = 0; j < CLS; j++)
			s += exp(l[j] - l[am]);
		y[0] += (l[am] + log(s) - l[a->labels[r]]) / T;
		y[1] += (double)(am == a->labels[r]) / T;
	}
}

/* dlogits = softmax - onehot(label) (dy unused: the loss's gradient is its own). */
static void ref_softmax_xent_bwd(const h_ref_args *a, const double *dy, double *dx)
{
	(void)dy;
	const int CLS = a->in->C, T = a->in->seq ? a->in->H : 1;
	for (int r = 0; r < a->n * T; r++) {
		const double *l = a->x[0] + (size_t)r * CLS;
		double m = l[0], s = 0;
		for (int j = 1; j < CLS; j++)
			m = fmax(m, l[j]);
		for (int j = 0; j < CLS; j++)
			s += exp(l[j] - m);
		for (int j = 0; j < CLS; j++)
			dx[(size_t)r * CLS + j] = (exp(l[j] - m) / s - (j == a->labels[r])) / T;
	}
}

static void fill_softmax_xent(int mode, int k, float *x, size_t n)
{
	(void)k;
	if (mode == H_GRAD)
		test_fill_uniform(x, n, -3, 3);
	else if (mode == H_UNIT)
		test_fill_uniform(x, n, -5, 5);
	else
		test_fill_uniform(x, n, -4, 4);
}

/* (N, CLS); seq rows (N, V, T): per token over a vocabulary of V */
static const h_shape xent_unit[] = {{1, 10, 1, 1}, {7, 3, 1, 1}, {33, 101, 1, 1}, {64, 10, 1, 1}, {12, 5, 1, 1, NULL, 3},
				    {1, 7, 5, 1, NULL, 0, 0, 1}, {5, 256, 17, 1, NULL, 2, 0, 1}};
static const h_shape xent_grad[] = {{1, 2, 1, 1}, {4, 5, 1, 1}, {3, 10, 1, 1}, {2, 7, 1, 1, NULL, 1, 1000}, {6, 4, 1, 1, NULL, 2},
				    {2, 5, 3, 1, NULL, 0, 0, 1}, {3, 6, 4, 1, NULL, 3, 0, 1}};
static const h_shape xent_gpu[] = {{1, 10, 1, 1}, {7, 3, 1, 1}, {33, 1000, 1, 1}, {64, 10, 1, 1, NULL, 1, 1000},
				   {4, 50257, 8, 1, NULL, 2, 0, 1}};

/* ------------------------------------------------------------------ maxpool */

static void ref_maxpool(const h_ref_args *a, double *y)
{
	const int H = a->in->H, W = a->in->W, P = a->nd->H, Q = a->nd->W, k = a->nd->k, st = a->nd->stride,
		  pad = a->nd->pad;
	for (size_t nc = 0; nc < (size_t)a->n * a->in->C; nc++)
		for (int p = 0; p < P; p++)
			for (int q = 0; q < Q; q++) {
				double m = -INFINITY;
				for (int i = 0; i < k; i++)
					for (int j = 0; j < k; j++) {
						int h = p * st - pad + i, w = q * st - pad + j;
						if (h >= 0 && h < H && w >= 0 && w < W && a->x[0][(nc * H + h) * W + w] > m)
							m = a->x[0][(nc * H + h) * W + w];
					}
				y[(nc * P + p) * Q + q] = m;
			}
}

/* unit: all negative (a padding cell chosen as 0 would show); grad and gpu: distinct values in
 * shuffled order, gaps 0.01 >> the FD step (no window has a near-tie). */
static void fill_maxpool(int mode, int k, float *x, size_t n)
{
	(void)k;
	if (mode == H_UNIT) {
		test_fill_uniform(x, n, -2, -0.5f);
		return;
	}
	for (size_t i = 0; i < n; i++)
		x[i] = -1.0f + 0.01f * (float)i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)test_rng_int(0, (int)i);
		float t = x[i];
		x[i] = x[j], x[j] = t;
	}
}

static int maxpool_variant(int v, char *name, size_t len)
{
	if (v < 0) {
		dnn_maxpool_set_simd(1);
		return 1;
	}
	snprintf(name, len, "%s", v ? "avx2" : "scalar");
	return dnn_maxpool_set_simd(v) == v;
}

static const h_shape maxpool_unit[] = {
	{2, 3, 7, 9, "k=3 stride=2 pad=1"}, {3, 2, 9, 7, "k=2 stride=2"},       {1, 4, 5, 5, "k=3 stride=1 pad=1"},
	{1, 1, 1, 1, "k=1 stride=1"},       {4, 8, 15, 13, "k=3 stride=2 pad=1"}, {2, 6, 28, 28, "k=2 stride=2"},
	{3, 2, 10, 6, "k=2 stride=2"},      {6, 3, 8, 8, "k=2 stride=2", 3},
};
static const h_shape maxpool_grad[] = {
	{2, 3, 7, 9, "k=3 stride=2 pad=1"}, {3, 2, 9, 7, "k=2 stride=2"}, {1, 4, 6, 5, "k=3 stride=1 pad=1"},
	{2, 3, 8, 6, "k=2 stride=2"},       {4, 2, 6, 6, "k=2 stride=2", 2},
};
static const h_shape maxpool_gpu[] = {
	{4, 8, 15, 13, "k=3 stride=2 pad=1"}, {2, 3, 9, 7, "k=2 stride=2"}, {1, 4, 6, 5, "k=3 stride=1 pad=1"},
	{8, 16, 32, 32, "k=3 stride=2 pad=1"},
};

/* ------------------------------------------------------------------ batchnorm */

static void ref_batchnorm(const h_ref_args *a, double *y)
{
	bn_train_ref(y, NULL, NULL, NULL, a->x[0], a->w[0], a->w[1], a->n, a->in->C, a->in->H * a->in->W, a->nd->eps);
}

/* channel c has mean ~ c - 1 and spread ~ 0.5 + c: statistics differ per channel (C from n:
 * the fill does not know the shape, so the channel is taken as the element's index mod 7) */
static void fill_batchnorm(int mode, int k, float *x, size_t n)
{
	(void)k, (void)mode;
	for (size_t i = 0; i < n; i++) {
		const int c = (int)(i % 7);
		x[i] = (float)(c - 1) * 0.5f + (0.5f + 0.3f * (float)c) * test_rng_uniform(-1, 1);
	}
}

static void fill_bn_param(int slot, float *w, size_t n)
{
	if (slot == 0)
		test_fill_uniform(w, n, 0.5f, 1.5f);
	else
		test_fill_uniform(w, n, -0.5f, 0.5f);
}

static int batchnorm_variant(int v, char *name, size_t len)
{
	if (v < 0) {
		dnn_batchnorm_set_simd(1);
		return 1;
	}
	snprintf(name, len, "%s", v ? "avx2" : "portable");
	return dnn_batchnorm_set_simd(v) == v;
}

/* (N, C, HW) */
static const h_shape bn_unit[] = {{4, 3, 25, 1}, {1, 5, 7, 1}, {8, 2, 1, 1}, {2, 16, 7, 7}, {3, 5, 5, 5},
				  {4, 3, 8, 1}, {7, 16, 32, 32}, {8, 4, 3, 3, NULL, 4}};
/* grad: 4 chunks of (3, 4, 10), (1, 3, 17), (6, 2, 1), their dgamma and dbeta through one REDUX */
static const h_shape bn_grad[] = {{12, 4, 10, 1, NULL, 4}, {4, 3, 17, 1, NULL, 4}, {24, 2, 1, 1, NULL, 4}, {3, 4, 5, 2}};
static const h_shape bn_gpu[] = {{4, 3, 25, 1}, {1, 5, 7, 1}, {6, 2, 1, 1}, {8, 16, 14, 14}, {32, 64, 7, 7}};

/* ------------------------------------------------------------------ layernorm */

/* rows x C: a sequence's tokens (H = T, W = 1) or a flat input's samples (H = W = 1) */
static long ln_rows(const h_ref_args *a) { return (long)a->n * a->in->H * a->in->W; }

/* xhat of each element and each row's rstd, in double (the biased variance, as PyTorch's) */
static void ln_ref_xhat(const h_ref_args *a, double *xh, double *rstd)
{
	const int C = a->in->C;
	for (long r = 0; r < ln_rows(a); r++) {
		const double *x = a->x[0] + (size_t)r * C;
		double m = 0, v = 0;
		for (int c = 0; c < C; c++)
			m += x[c];
		m /= C;
		for (int c = 0; c < C; c++)
			v += (x[c] - m) * (x[c] - m);
		rstd[r] = 1.0 / sqrt(v / C + (double)a->nd->eps);
		for (int c = 0; c < C; c++)
			xh[(size_t)r * C + c] = (x[c] - m) * rstd[r];
	}
}

static void ref_layernorm(const h_ref_args *a, double *y)
{
	const int C = a->in->C;
	const long rows = ln_rows(a);
	double *xh = alloc_d((size_t)rows * C), *rstd = alloc_d((size_t)rows);
	ln_ref_xhat(a, xh, rstd);
	for (long r = 0; r < rows; r++)
		for (int c = 0; c < C; c++)
			y[(size_t)r * C + c] = xh[(size_t)r * C + c] * a->w[0][c] + a->w[1][c];
	free(xh), free(rstd);
}

/* dx = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat)), g = dy * gamma */
static void ref_layernorm_bwd(const h_ref_args *a, const double *dy, double *dx)
{
	const int C = a->in->C;
	const long rows = ln_rows(a);
	double *xh = alloc_d((size_t)rows * C), *rstd = alloc_d((size_t)rows);
	ln_ref_xhat(a, xh, rstd);
	for (long r = 0; r < rows; r++) {
		const size_t o = (size_t)r * C;
		double mg = 0, mgx = 0;
		for (int c = 0; c < C; c++)
			mg += dy[o + c] * a->w[0][c], mgx += dy[o + c] * a->w[0][c] * xh[o + c];
		mg /= C, mgx /= C;
		for (int c = 0; c < C; c++)
			dx[o + c] = rstd[r] * (dy[o + c] * a->w[0][c] - mg - xh[o + c] * mgx);
	}
	free(xh), free(rstd);
}

/* Rows with their own offsets and spreads: x = row offset + spread * u (the fill does not know the
 * shape, so a "row" here is a run of 5 elements; every real row still mixes several). */
static void fill_layernorm(int mode, int k, float *x, size_t n)
{
	(void)mode, (void)k;
	for (size_t i = 0; i < n; i++) {
		const int r = (int)(i / 5 % 11);
		x[i] = 0.2f * (float)(r - 5) + (0.25f + 0.15f * (float)r) * test_rng_uniform(-1, 1);
	}
}

/* Kernel-level checks on one (rows, C): the saved mean and rstd against double; the eval forward
 * (nothing saved) gives the training forward's y bit for bit; a backward without dx (the input is
 * the net's) gives the same dgamma, dbeta bit for bit; the accumulating dx adds the overwriting
 * one's values exactly (dx0 + dx, one float add each). */
static void ln_kernel_checks(long rows, int C, float eps, float shift)
{
	const size_t n = (size_t)rows * C;
	dnn_layernorm_args a = {.rows = rows, .C = C, .eps = eps, .save = 1};
	float *x = alloc_f(n), *y = alloc_f(n), *ye = alloc_f(n), *saved = alloc_f(3 * (size_t)rows), *dy = alloc_f(n);
	float *gamma = alloc_f(C), *beta = alloc_f(C), *dxw = alloc_f(n), *dxa = alloc_f(n), *dx0 = alloc_f(n);
	float *dg = calloc(C, sizeof(float)), *db = calloc(C, sizeof(float)), *dg2 = calloc(C, sizeof(float)),
	      *db2 = calloc(C, sizeof(float));
	fill_layernorm(H_UNIT, 0, x, n);
	for (size_t i = 0; i < n; i++)
		x[i] += shift;
	test_fill_uniform(dy, n, -1, 1);
	test_fill_uniform(dx0, n, -1, 1);
	test_fill_uniform(gamma, C, 0.5f, 1.5f);
	test_fill_uniform(beta, C, -0.5f, 0.5f);
	dnn_layernorm_forward_cpu(y, saved, x, gamma, beta, &a);
	dnn_layernorm_forward_cpu(ye, NULL, x, gamma, beta, &a);
	char what[128];
	snprintf(what, sizeof(what), "layernorm rows %ld C %d shift %g: eval y vs training y", rows, C, (double)shift);
	test_same_bits(what, ye, y, n);
	/* the mean as m + dm (its float rounding) to 1e-7 of the row's spread (rstd^-1), rstd to 1e-6 */
	double *wr = alloc_d((size_t)rows), worst = 0;
	for (long r = 0; r < rows; r++) {
		double m = 0, v = 0;
		for (int c = 0; c < C; c++)
			m += x[(size_t)r * C + c];
		m /= C;
		for (int c = 0; c < C; c++)
			v += (x[(size_t)r * C + c] - m) * (x[(size_t)r * C + c] - m);
		wr[r] = 1.0 / sqrt(v / C + (double)eps);
		const double e = fabs((double)saved[r] + (double)saved[2 * rows + r] - m) * wr[r];
		worst = e > worst ? e : worst;
	}
	TEST_CHECK(worst <= 1e-7, "layernorm rows %ld C %d shift %g: saved mean off by %.3g of the spread", rows, C,
		   (double)shift, worst);
	snprintf(what, sizeof(what), "layernorm rows %ld C %d shift %g: saved rstd", rows, C, (double)shift);
	test_close_rel(what, saved + rows, wr, (size_t)rows, 1e-6);
	a.has_dx = 1;
	fill_nan(dxw, n);
	TEST_CHECK(dnn_layernorm_backward_cpu(dxw, dg, db, x, gamma, saved, dy, &a) == 0, "layernorm bwd");
	memcpy(dxa, dx0, n * sizeof(float));
	a.accumulate_dx = 1;
	float *dg3 = calloc(C, sizeof(float)), *db3 = calloc(C, sizeof(float));
	TEST_CHECK(dnn_layernorm_backward_cpu(dxa, dg3, db3, x, gamma, saved, dy, &a) == 0, "layernorm bwd +=");
	long differ = 0;
	for (size_t i = 0; i < n; i++)
		differ += dxa[i] != dx0[i] + dxw[i];
	TEST_CHECK(differ == 0, "layernorm rows %ld C %d: %ld elements of dx += are not dx0 + dx", rows, C, differ);
	a.has_dx = 0;
	TEST_CHECK(dnn_layernorm_backward_cpu(NULL, dg2, db2, x, gamma, saved, dy, &a) == 0, "layernorm bwd");
	snprintf(what, sizeof(what), "layernorm rows %ld C %d: dgamma without dx", rows, C);
	test_same_bits(what, dg2, dg, (size_t)C);
	snprintf(what, sizeof(what), "layernorm rows %ld C %d: dbeta without dx", rows, C);
	test_same_bits(what, db2, db, (size_t)C);
	snprintf(what, sizeof(what), "layernorm rows %ld C %d: dgamma with dx +=", rows, C);
	test_same_bits(what, dg3, dg, (size_t)C);
	free(x), free(y), free(ye), free(saved), free(dy), free(gamma), free(beta), free(dxw), free(dxa), free(dx0);
	free(dg), free(db), free(dg2), free(db2), free(dg3), free(db3), free(wr);
}

/* The net files a layernorm refuses (an image: its channels are not the last axis) and accepts
 * (a flat input, a sequence; on the net's input, where it has no dx to give). */
static void ln_parse_checks(void)
{
	static const struct {
		const char *text;
		const char *err; /* NULL: parses */
	} cases[] = {
		{"input x 3 4 4\nlayernorm ln x\ndense o ln out=2\nsoftmax_xent loss o\n",
		 "t.net:2: ln: layernorm needs a sequence or a flat C x 1 x 1 input, not 3x4x4"},
		{"input x 3 4 4\nconv c x out=4 k=3\nlayernorm ln c eps=1e-3\ndense o ln out=2\nsoftmax_xent loss o\n",
		 "t.net:3: ln: layernorm needs a sequence or a flat C x 1 x 1 input"},
		{"input x 3 4 4\ndense d x out=6\nlayernorm ln d eps=0\ndense o ln out=2\nsoftmax_xent loss o\n",
		 "t.net:3:"},
		{"input x 3 4 4\ndense d x out=6\nlayernorm ln d eps=1e-3\ndense o ln out=2\nsoftmax_xent loss o\n", NULL},
		{"input x 5 1 1\nlayernorm ln x\ngelu g ln\ndense o g out=2\nsoftmax_xent loss o\n", NULL},
		{"input x seq 4 6\nlayernorm ln x\ngelu g ln\ndense o g out=3\nsoftmax_xent loss o\n", NULL},
	};
	for (int i = 0; i < NS(cases); i++) {
		dnn_graph g;
		char err[512] = "";
		const int rc = dnn_graph_parse(&g, cases[i].text, "t.net", err, sizeof(err));
		if (!cases[i].err) {
			TEST_CHECK(rc == 0, "layernorm parse case %d: %s", i, err);
			if (rc == 0) {
				const dnn_node *ln = g.nodes[1].op == DNN_OP_LAYERNORM ? &g.nodes[1] : &g.nodes[2];
				TEST_CHECK(ln->op == DNN_OP_LAYERNORM && ln->params == 2LL * ln->C,
					   "layernorm parse case %d: params %lld for C %d", i, ln->params, ln->C);
			}
		} else {
			TEST_CHECK(rc != 0 && strncmp(err, cases[i].err, strlen(cases[i].err)) == 0,
				   "layernorm parse case %d: got '%s', want '%s...'", i, rc ? err : "(parsed)", cases[i].err);
		}
		if (rc == 0)
			dnn_graph_free(&g);
	}
}

/* The model's tensors of a layernorm: "<node>.weight" = 1 and "<node>.bias" = 0, C each, neither
 * weight-decayed, in that order; a sequence's layernorm has C of each too (shared by the tokens). */
static void ln_model_checks(void)
{
	static const char *const texts[] = {
		"input x 3 4 4\ndense d x out=6\nlayernorm ln d\ndense o ln out=2\nsoftmax_xent loss o\n",
		"input x seq 5 6\ndense d x out=6\nlayernorm ln d\ndense o ln out=2\nsoftmax_xent loss o\n",
	};
	for (int t = 0; t < NS(texts); t++) {
		dnn_graph g;
		dnn_model m;
		char err[512] = "";
		if (dnn_graph_parse(&g, texts[t], "t.net", err, sizeof(err)) != 0) {
			TEST_CHECK(0, "layernorm model case %d: %s", t, err);
			continue;
		}
		if (dnn_model_create(&m, &g, 1, err, sizeof(err)) != 0) {
			TEST_CHECK(0, "layernorm model case %d: %s", t, err);
			dnn_graph_free(&g);
			continue;
		}
		const int i = 2; /* ln */
		const dnn_param *w = dnn_op_param(&m, i, 0), *b = dnn_op_param(&m, i, 1);
		TEST_CHECK(w && b && !strcmp(w->name, "ln.weight") && !strcmp(b->name, "ln.bias") && w->n == 6 && b->n == 6 &&
				   w->no_decay && b->no_decay && w < b,
			   "layernorm model case %d: its tensors are not ln.weight, ln.bias (6 each, no decay)", t);
		long bad = 0;
		for (long c = 0; w && b && c < w->n; c++)
			bad += w->w[c] != 1.0f || b->w[c] != 0.0f;
		TEST_CHECK(bad == 0, "layernorm model case %d: %ld channels not initialised to weight 1, bias 0", t, bad);
		dnn_model_destroy(&m);
		dnn_graph_free(&g);
	}
}

/* The kernels in AVX-512F registers against the build's baseline: the same bits (forward y in fp32
 * and bf16, the saved statistics; backward dx =, +=, dgamma, dbeta), on C with 16-, 8-lane and
 * scalar tails. Negative control: one input changed changes y. Without AVX-512F: said so. */
static void ln_lanes_check(long rows, int C)
{
	const size_t n = (size_t)rows * C;
	dnn_layernorm_args a = {.rows = rows, .C = C, .eps = 1e-5f, .save = 1, .has_dx = 1};
	float *x = alloc_f(n), *dy = alloc_f(n), *g = alloc_f(C), *b = alloc_f(C), *y[2], *sv[2], *dx[2], *da[2],
	      *dg[2], *db[2];
	uint16_t *yh[2] = {NULL, NULL};
	char what[80];
	snprintf(what, sizeof(what), "layernorm rows %ld C %d: AVX-512F vs baseline", rows, C);
	for (int k = 0; k < 2; k++) {
		y[k] = alloc_f(n), sv[k] = alloc_f(3 * (size_t)rows), dx[k] = alloc_f(n), da[k] = alloc_f(n);
		dg[k] = calloc(C, sizeof(float)), db[k] = calloc(C, sizeof(float));
		yh[k] = malloc(n * sizeof(uint16_t));
	}
	if (!dg[0] || !db[0] || !yh[0] || !dg[1] || !db[1] || !yh[1]) {
		TEST_CHECK(0, "layernorm lanes: out of memory");
		goto out;
	}
	fill_layernorm(H_UNIT, 0, x, n);
	test_fill_uniform(dy, n, -1, 1);
	test_fill_uniform(g, C, 0.5f, 1.5f);
	test_fill_uniform(b, C, -0.5f, 0.5f);
	for (int k = 0; k < 2; k++) {
		const int wide = dnn_layernorm_set_simd(!k);
		if (k == 0 && !wide) {
			printf("layernorm lanes: no AVX-512F here, one form only\n");
			goto out;
		}
		dnn_layernorm_args ah = a;
		ah.y_bf16 = 1;
		dnn_layernorm_forward_cpu(y[k], sv[k], x, g, b, &a);
		dnn_layernorm_forward_cpu(yh[k], NULL, x, g, b, &ah);
		TEST_CHECK(dnn_layernorm_backward_cpu(dx[k], dg[k], db[k], x, g, sv[k], dy, &a) == 0, "layernorm bwd");
		memcpy(da[k], dy, n * 4);
		a.accumulate_dx = 1;
		TEST_CHECK(dnn_layernorm_backward_cpu(da[k], dg[k], db[k], x, g, sv[k], dy, &a) == 0, "layernorm bwd +=");
		a.accumulate_dx = 0;
	}
	TEST_CHECK(test_same_bits(what, y[0], y[1], n) && test_same_bits(what, sv[0], sv[1], 3 * (size_t)rows) &&
			   memcmp(yh[0], yh[1], n * sizeof(uint16_t)) == 0 && test_same_bits(what, dx[0], dx[1], n) &&
			   test_same_bits(what, da[0], da[1], n) && test_same_bits(what, dg[0], dg[1], (size_t)C) &&
			   test_same_bits(what, db[0], db[1], (size_t)C),
		   "%s: other bits", what);
	x[0] += 0.5f;
	dnn_layernorm_forward_cpu(y[1], sv[1], x, g, b, &a);
	TEST_CHECK(memcmp(y[0], y[1], n * 4) != 0, "%s: negative control: a changed input gave the same y", what);
	printf("%s: the same bits\n", what);
out:
	dnn_layernorm_set_simd(1);
	free(x), free(dy), free(g), free(b);
	for (int k = 0; k < 2; k++)
		free(y[k]), free(sv[k]), free(dx[k]), free(da[k]), free(dg[k]), free(db[k]), free(yh[k]);
}

static void extra_layernorm_unit(void)
{
	ln_model_checks();
	ln_lanes_check(37, 128); /* gpt-nano's C */
	ln_lanes_check(9, 771);  /* tails of every width */
	ln_kernel_checks(1, 1, 1e-5f, 0);
	ln_kernel_checks(3, 7, 1e-5f, 0);
	ln_kernel_checks(17, 64, 1e-5f, 0);
	ln_kernel_checks(5, 771, 1e-3f, 0);
	ln_kernel_checks(9, 48, 1e-5f, 100.0f); /* mean >> spread: the two-pass variance */
	ln_parse_checks();
	h_extra_layernorm_bf16(); /* its bf16 output (op_bf16.c) */
}

/* (N, C, H, W [, keys, chunks, shift]): flat inputs (a row per sample) and sequences (`.seq`: H = T
 * tokens of C, a row per token) */
static const h_shape ln_unit[] = {
	{1, 1, 1, 1},
	{3, 7, 1, 1},
	{4, 64, 1, 1, NULL, 2},
	{5, 33, 1, 1, "eps=1e-3", 3},
	{2, 100, 1, 1, NULL, 1, 50.0f},
	{6, 256, 1, 1, NULL, 4},
	{1, 1, 1, 1, NULL, 1, 0, .seq = 1},
	{2, 8, 5, 1, NULL, 1, 0, .seq = 1},
	{5, 48, 7, 1, NULL, 3, 0, .seq = 1},
	{4, 200, 3, 1, "eps=1e-3", 2, 20.0f, .seq = 1},
	{3, 771, 2, 1, NULL, 3, 0, .seq = 1},
};
static const h_shape ln_grad[] = {
	{1, 1, 1, 1},
	{4, 9, 1, 1, NULL, 2},
	{6, 16, 1, 1, "eps=1e-2", 3},
	{3, 40, 1, 1},
	{2, 6, 4, 1, NULL, 1, 0, .seq = 1},
	{5, 12, 3, 1, NULL, 3, 0, .seq = 1},
	{4, 24, 5, 1, "eps=1e-3", 4, 0, .seq = 1},
};
static const h_shape ln_gpu[] = {
	{1, 1, 1, 1},
	{4, 9, 1, 1, NULL, 2},
	{6, 64, 1, 1, NULL, 3},
	{8, 300, 1, 1, "eps=1e-3", 2},
	{2, 1000, 1, 1},
	{3, 5, 7, 1, NULL, 2, 0, .seq = 1},
	{4, 768, 16, 1, NULL, 3, 10.0f, .seq = 1},
	{2, 33, 64, 1, NULL, 1, 0, .seq = 1},
};

/* ------------------------------------------------------------------ gelu */

static double gelu_d(double x)
{
	const double k = sqrt(2.0 / M_PI);
	return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

static void ref_gelu(const h_ref_args *a, double *y)
{
	for (size_t i = 0, n = in_n(a); i < n; i++)
		y[i] = gelu_d(a->x[0][i]);
}

static void ref_gelu_bwd(const h_ref_args *a, const double *dy, double *dx)
{
	const double k = sqrt(2.0 / M_PI);
	for (size_t i = 0, n = in_n(a); i < n; i++) {
		const double x = a->x[0][i], t = tanh(k * (x + 0.044715 * x * x * x));
		dx[i] = dy[i] * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x));
	}
}

/* unit, gpu: in [-5, 5) with exact zeros every 9th (deep in both tails and at 0); grad: [-3, 3) */
static void fill_gelu(int mode, int k, float *x, size_t n)
{
	(void)k;
	if (mode == H_GRAD) {
		test_fill_uniform(x, n, -3, 3);
	} else {
		test_fill_uniform(x, n, -5, 5);
		zeros_every(x, n, 9);
	}
}

/* gelu and its derivative at chosen points against double, its limits (0 and 0.5 at 0; x and 1
 * for large x; 0 far below 0, where tanh is -1 in float), and PyTorch's float32 values. */
static int gelu_variant(int v, char *name, size_t len)
{
	if (v < 0) {
		dnn_gelu_set_simd(1);
		return 1;
	}
	snprintf(name, len, "%s", v ? "avx2" : "portable");
	return dnn_gelu_set_simd(v) == v;
}

/* Chosen points (exact where GELU is: 0, and +-20) and PyTorch's values, in every form of the
 * CPU kernels (gelu_variant). */
static void extra_gelu_form(void);
static void extra_gelu_lanes(void);
static void extra_gelu_unit(void)
{
	for (int v = 0; v <= 1; v++) {
		char name[16];
		if (!gelu_variant(v, name, sizeof(name)))
			continue;
		printf("gelu chosen points and PyTorch: %s\n", name);
		extra_gelu_form();
		h_extra_gelu_bf16(); /* its bf16 output, in this form (op_bf16.c) */
	}
	gelu_variant(-1, NULL, 0);
	extra_gelu_lanes();
}

/* The AVX2 form on 16 lanes (AVX-512F) against the same form on 8: the same operations per element,
 * so the same bits, forward and backward (=, +=), on lengths that leave 8-lane and scalar tails and
 * on values that reach exp's clamps, -2u > 88 and NaN. Negative control: one input changed changes
 * an output's bits. Where the CPU has no AVX-512F both runs take 8 lanes (said so). */
static void extra_gelu_lanes(void)
{
	enum { N = 1000 + 16 + 8 + 3 };
	float *x = malloc(N * 4), *g = malloc(N * 4), *y[2], *d[2], *a[2];
	for (int k = 0; k < 2; k++)
		y[k] = malloc(N * 4), d[k] = malloc(N * 4), a[k] = malloc(N * 4);
	if (!x || !g || !y[0] || !y[1] || !d[0] || !d[1] || !a[0] || !a[1]) {
		TEST_CHECK(0, "gelu lanes: out of memory");
		goto out;
	}
	test_fill_uniform(x, N, -12, 12);
	test_fill_uniform(g, N, -1, 1);
	x[5] = 60.0f, x[6] = -60.0f, x[7] = NAN, x[8] = 0.0f, x[9] = -0.0f, x[20] = -6.0f, x[21] = 1e-30f, x[100] = 0.75f;
	for (int k = 0; k < 2; k++) {
		if (dnn_gelu_set_simd(k ? 2 : 1) != (k ? 2 : 1)) {
			printf("gelu lanes: no AVX2 here, nothing to compare\n");
			goto out;
		}
		dnn_gelu_forward_cpu(y[k], x, N);
		dnn_gelu_backward_cpu(d[k], x, g, N, 0);
		memcpy(a[k], g, N * 4);
		dnn_gelu_backward_cpu(a[k], x, g, N, 1);
	}
	TEST_CHECK(test_same_bits("gelu 16 lanes vs 8: forward", y[0], y[1], N) &&
			   test_same_bits("gelu 16 lanes vs 8: backward", d[0], d[1], N) &&
			   test_same_bits("gelu 16 lanes vs 8: backward +=", a[0], a[1], N),
		   "gelu: the 16-lane loop gave other bits than the 8-lane one");
	x[100] = 0.5f; /* from 0.75 (one ulp could round to the same y) */
	dnn_gelu_forward_cpu(y[1], x, N);
	TEST_CHECK(memcmp(y[0], y[1], N * 4) != 0, "gelu lanes: negative control: a changed input gave the same bits");
	__builtin_cpu_init();
	printf("gelu lanes: %s\n", __builtin_cpu_supports("avx512f") ? "16 (AVX-512F) and 8 give the same bits"
								  : "no AVX-512F here: 8 lanes both times");
out:
	dnn_gelu_set_simd(1);
	free(x), free(g);
	for (int k = 0; k < 2; k++)
		free(y[k]), free(d[k]), free(a[k]);
}

static void extra_gelu_form(void)
{
	static const float xs[] = {-3.0f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 2.0f, 3.0f, 20.0f, -20.0f};
	const int n = NS(xs);
	float y[NS(xs)], dx[NS(xs)], one[NS(xs)];
	for (int i = 0; i < n; i++)
		one[i] = 1.0f;
	dnn_gelu_forward_cpu(y, xs, n);
	dnn_gelu_backward_cpu(dx, xs, one, n, 0);
	double want[NS(xs)], dwant[NS(xs)];
	for (int i = 0; i < n; i++) {
		const double x = xs[i], k = sqrt(2.0 / M_PI), t = tanh(k * (x + 0.044715 * x * x * x));
		want[i] = gelu_d(x);
		dwant[i] = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
	}
	test_close_mixed("gelu at chosen points", y, want, (size_t)n, 2e-7);
	test_close_mixed("gelu' at chosen points", dx, dwant, (size_t)n, 2e-7);
	TEST_CHECK(y[3] == 0.0f && dx[3] == 0.5f, "gelu(0) = %g, gelu'(0) = %g: want 0 and 0.5", (double)y[3],
		   (double)dx[3]);
	TEST_CHECK(y[8] == 20.0f && dx[8] == 1.0f, "gelu(20) = %g, gelu'(20) = %g: want 20 and 1", (double)y[8],
		   (double)dx[8]);
	TEST_CHECK(y[9] == 0.0f && dx[9] == 0.0f, "gelu(-20) = %g, gelu'(-20) = %g: want 0 and 0", (double)y[9],
		   (double)dx[9]);
	/* PyTorch 2.15 (CPU, float32): F.gelu(x, approximate='tanh') and its gradient at x = -3, -1,
	 * 0.5, 1, 2, 3 (printed with %.9g) */
	static const float tx[] = {-3.0f, -1.0f, 0.5f, 1.0f, 2.0f, 3.0f};
	static const double ty[] = {-0.00363743305, -0.158807993, 0.345714003, 0.841192007, 1.95459771, 2.99636269};
	static const double tdx[] = {-0.0115842968, -0.0829640925, 0.86736989, 1.08296406, 1.08609927, 1.01158428};
	float gy[6], gdx[6];
	dnn_gelu_forward_cpu(gy, tx, 6);
	dnn_gelu_backward_cpu(gdx, tx, one, 6, 0);
	test_close_mixed("gelu vs PyTorch", gy, ty, 6, 2.5e-7);
	test_close_mixed("gelu' vs PyTorch", gdx, tdx, 6, 2.5e-7);
}

/* element-wise, any shape: flat, images, sequences */
static const h_shape gelu_unit[] = {
	{1, 1, 1, 1},
	{1, 7, 1, 1},
	{1, 1001, 1, 1},
	{1, 15, 1, 6667},
	{6, 3, 5, 7, NULL, 4},
	{3, 16, 9, 1, NULL, 2, 0, .seq = 1},
	{1, 1, 1, 1, NULL, 1, 0, .seq = 1},
};
static const h_shape gelu_grad[] = {
	{1, 1, 1, 1}, {1, 17, 1, 1}, {1, 1000, 1, 1}, {5, 4, 3, 3, NULL, 3}, {4, 6, 5, 1, NULL, 3, 0, .seq = 1},
};
static const h_shape gelu_gpu[] = {
	{1, 1, 1, 1},
	{1, 7, 1, 1},
	{1, 1001, 1, 1},
	{1, 15, 1, 6667},
	{6, 3, 5, 7, NULL, 4},
	{4, 64, 33, 1, NULL, 3, 0, .seq = 1},
};

/* ------------------------------------------------------------------ conv */

static void ref_conv(const h_ref_args *a, double *y)
{
	dnn_conv2d_args c = conv_shape(a->n, a->in->C, a->in->H, a->in->W, a->nd->out, a->nd->k, a->nd->k,
				       a->nd->stride, a->nd->pad, a->nd->dilation);
	dnn_conv2d_args_finish(&c);
	conv2d_forward_ref_d(y, a->x[0], a->w[0], &c);
	if (a->nd->bias) {
		const size_t PQ = (size_t)c.P * c.Q;
		for (size_t i = 0, ny = (size_t)c.N * c.K * PQ; i < ny; i++)
			y[i] += a->w[1][(i / PQ) % (size_t)c.K];
	}
}

/* Variant 0: bias in its own tasks (fusion level 0), the algorithm auto; 1: the bias in the
 * conv's tasks (level 2); 2, 3: the direct path's AVX2 and AVX-512 kernels (where the shape
 * takes it); 4, 5, 6: im2col, Winograd F(2x2) and F(4x4) forced (DNN_CONV_ALGO; Winograd only
 * where it runs: AVX2 + FMA, 3x3 stride 1). */
static int conv_variant(int v, char *name, size_t len)
{
	h_cfg.fuse = v == 1 ? 2 : 0;
	dnn_conv_direct_set_avx512(v != 2);
	h_cfg.conv_algo = DNN_CONV_ALGO_AUTO;
	if (v < 0)
		return 1;
	static const char *names[] = {"bias-task", "bias-fused", "direct-avx2", "direct-avx512", "im2col", "winograd", "winograd4"};
	snprintf(name, len, "%s", names[v]);
	if (v == 3)
		return dnn_conv_direct_set_avx512(1) == 1;
	if (v == 4)
		h_cfg.conv_algo = DNN_CONV_ALGO_IM2COL;
	if (v >= 5) {
		if (!test_winograd_runs_here())
			return 0;
		h_cfg.conv_algo = v == 5 ? DNN_CONV_ALGO_WINOGRAD : DNN_CONV_ALGO_WINOGRAD4;
	}
	return 1;
}

static const h_shape conv_unit[] = {
	{1, 1, 1, 1, "out=1 k=1"},
	{1, 3, 32, 32, "out=16 k=3 pad=1 bias=1"},
	{3, 16, 32, 32, "out=16 k=3 pad=1"},
	{5, 16, 32, 32, "out=32 k=3 stride=2 pad=1 bias=1"},
	{9, 64, 8, 8, "out=64 k=3 pad=1"},
	{4, 32, 16, 16, "out=64 k=1 stride=2"},
	{3, 8, 13, 11, "out=5 k=1 bias=1"},
	{2, 5, 10, 11, "out=4 k=1 stride=3"},
	{2, 3, 37, 29, "out=8 k=7 stride=2 pad=3 bias=1"},
	{2, 5, 17, 19, "out=6 k=3 pad=2 dilation=2"},
	{1, 2, 300, 5, "out=3 k=3 pad=1"},
	{2, 1, 3, 700, "out=2 k=3 pad=1"},
	{3, 1, 28, 28, "out=6 k=5 pad=2 bias=1"},
	{3, 6, 14, 14, "out=16 k=5 bias=1"},
	{2, 3, 32, 32, "out=7 k=3 pad=1 bias=1"},
	{2, 3, 16, 16, "out=9 k=3 pad=1 bias=1"},
	{2, 2, 7, 5, "out=3 k=3 bias=1"},
	{6, 3, 8, 8, "out=4 k=3 pad=1 bias=1", 3},
	{5, 16, 28, 28, "out=32 k=3 stride=2 pad=1 bias=1"},
	{5, 13, 15, 17, "out=11 k=3 stride=2 pad=1"},
	{15, 32, 14, 14, "out=64 k=1 stride=2"},
	{3, 9, 13, 11, "out=19 k=1 stride=2 bias=1"},
	{2, 17, 9, 7, "out=13 k=1"},
};
static const h_shape conv_grad[] = {
	{1, 1, 1, 1, "out=1 k=1"},
	{2, 3, 7, 8, "out=4 k=3 pad=1 bias=1"},
	{3, 4, 9, 9, "out=5 k=3 stride=2 pad=1"},
	{2, 3, 11, 10, "out=2 k=3 pad=2 dilation=2 bias=1"},
	{4, 6, 5, 7, "out=3 k=1"},
	{3, 5, 8, 7, "out=4 k=1 stride=2 bias=1"},
	{2, 2, 12, 9, "out=3 k=5 pad=2"},
	{1, 3, 13, 13, "out=4 k=7 stride=2 pad=3"},
	{3, 20, 5, 5, "out=4 k=3 pad=1"},
	{2, 1, 12, 12, "out=6 k=5 pad=2 bias=1"},
	{2, 16, 24, 24, "out=3 k=3 pad=1"},
	{6, 3, 6, 6, "out=4 k=3 pad=1 bias=1", 3},
	{3, 5, 9, 11, "out=7 k=3 stride=2 pad=1 bias=1"},
	{3, 6, 7, 9, "out=9 k=1 stride=2 bias=1"},
	{2, 3, 1, 1, "out=2 k=3 stride=2 pad=1"},
};
static const h_shape conv_gpu[] = {
	{64, 3, 32, 32, "out=16 k=3 pad=1"},          {64, 16, 32, 32, "out=16 k=3 pad=1 bias=1"},
	{32, 16, 32, 32, "out=32 k=3 stride=2 pad=1"}, {32, 16, 32, 32, "out=32 k=1 stride=2"},
	{16, 64, 8, 8, "out=64 k=3 pad=1"},           {3, 5, 37, 29, "out=7 k=7 stride=2 pad=3 bias=1"},
	{2, 6, 17, 19, "out=5 k=3 pad=2 dilation=2"}, {5, 12, 13, 11, "out=9 k=1"},
};

/* ------------------------------------------------------------------ dropout */

/* No forward reference (the mask is the kernel's own function of seed, step and sample): the
 * unit extras check it against its definition; gpu compares CUDA with CPU (the same mask). */
static const h_shape dropout_gpu[] = {{16, 1000, 1, 1, "p=0.5"}, {7, 3, 5, 5, "p=0.1", 3}, {1, 1, 1, 1, "p=0.9"}};

/* dropout's kernels (codelets/dropout.h) against their definition (moved from unit_dropout.c):
 *  - eval and p = 0 are the identity;
 *  - in training a fraction p of the elements is dropped (binomial bound), kept ones are x/(1-p);
 *  - the mask is a function of (seed, step, sample position, element) only: a chunk computed at
 *    sample0 = s gives the rows s.. of a whole-batch run (chunk invariance), and another step or
 *    seed gives another mask;
 *  - backward is dy * mask / (1-p), overwrite and accumulate, with the forward's mask. */
#define NS_DROP 16
#define PER 1000
static void extra_dropout_unit(void)
{
	static float x[NS_DROP * PER], y[NS_DROP * PER], y2[NS_DROP * PER], dy[NS_DROP * PER], dx[NS_DROP * PER];
	for (int i = 0; i < NS_DROP * PER; i++)
		x[i] = test_rng_uniform(0.5f, 2.0f); /* never 0: a dropped element is told by y == 0 */
	dnn_dropout_args a = {.per_sample = PER, .N = NS_DROP, .train = 0, .p = 0.3f, .seed = 42, .step = 5, .sample0 = 0};

	/* eval, and p = 0 in training: y = x exactly */
	dnn_dropout_forward_cpu(y, x, &a);
	TEST_CHECK(memcmp(x, y, sizeof(x)) == 0, "eval mode is not the identity");
	a.train = 1, a.p = 0.0f;
	dnn_dropout_forward_cpu(y, x, &a);
	TEST_CHECK(memcmp(x, y, sizeof(x)) == 0, "p = 0 is not the identity");

	/* training: the dropped fraction and the scale of the kept elements */
	const float rates[] = {0.1f, 0.5f, 0.9f};
	for (int r = 0; r < 3; r++) {
		a.p = rates[r];
		dnn_dropout_forward_cpu(y, x, &a);
		long dropped = 0, bad_scale = 0;
		for (int i = 0; i < NS_DROP * PER; i++) {
			if (y[i] == 0.0f)
				dropped++;
			else if (fabsf(y[i] - x[i] / (1.0f - a.p)) > 1e-6f * fabsf(y[i]))
				bad_scale++;
		}
		const double n = NS_DROP * PER, frac = dropped / n, sd = sqrt(a.p * (1 - a.p) / n);
		printf("p=%.1f: dropped %.4f of %d elements (5 sd = %.4f)\n", a.p, frac, NS_DROP * PER, 5 * sd);
		TEST_CHECK(fabs(frac - a.p) < 5 * sd, "p=%.1f: dropped fraction %.4f", a.p, frac);
		TEST_CHECK(bad_scale == 0, "p=%.1f: %ld kept elements not scaled by 1/(1-p)", a.p, bad_scale);
	}

	/* chunk invariance: samples [5, 12) as their own chunk give the same rows */
	a.p = 0.5f;
	dnn_dropout_forward_cpu(y, x, &a);
	dnn_dropout_args chunk = a;
	chunk.N = 7, chunk.sample0 = 5;
	dnn_dropout_forward_cpu(y2, x + 5 * PER, &chunk);
	TEST_CHECK(memcmp(y2, y + 5 * PER, sizeof(float) * 7 * PER) == 0, "a chunk at sample0=5 differs from the batch rows");
	/* masks differ between samples, steps and seeds */
	int same_rows = 1;
	for (int e = 0; e < PER; e++)
		same_rows &= (y[e] == 0.0f) == (y[PER + e] == 0.0f);
	TEST_CHECK(!same_rows, "samples 0 and 1 have the same mask");
	dnn_dropout_args other = a;
	other.step = 6;
	dnn_dropout_forward_cpu(y2, x, &other);
	TEST_CHECK(memcmp(y, y2, sizeof(y)) != 0, "step 6 has step 5's mask");
	other = a, other.seed = 43;
	dnn_dropout_forward_cpu(y2, x, &other);
	TEST_CHECK(memcmp(y, y2, sizeof(y)) != 0, "seed 43 has seed 42's mask");

	/* backward: dx = dy * mask / (1 - p); then += */
	for (int i = 0; i < NS_DROP * PER; i++)
		dy[i] = test_rng_uniform(-1.0f, 1.0f);
	a.accumulate_dx = 0;
	dnn_dropout_backward_cpu(dx, dy, &a);
	long bad = 0;
	for (int i = 0; i < NS_DROP * PER; i++) {
		const float want = y[i] == 0.0f ? 0.0f : dy[i] * 2.0f;
		bad += fabsf(dx[i] - want) > 1e-6f;
	}
	TEST_CHECK(bad == 0, "backward: %ld elements differ from dy * mask / (1-p)", bad);
	a.accumulate_dx = 1;
	dnn_dropout_backward_cpu(dx, dy, &a);
	bad = 0;
	for (int i = 0; i < NS_DROP * PER; i++) {
		const float want = y[i] == 0.0f ? 0.0f : dy[i] * 4.0f;
		bad += fabsf(dx[i] - want) > 1e-6f;
	}
	TEST_CHECK(bad == 0, "backward accumulate: %ld elements differ", bad);
	/* eval backward passes dy through */
	a.train = 0, a.accumulate_dx = 0;
	dnn_dropout_backward_cpu(dx, dy, &a);
	TEST_CHECK(memcmp(dx, dy, sizeof(dx)) == 0, "eval backward is not the identity");
}

/* ------------------------------------------------------------------ maxpool and batchnorm: their own checks
 * (moved from unit_pool_bn.c: the kernels, not through a net) */

// y (N, C, P, Q): max over the window, out-of-range cells are -inf
static void ref_maxpool_args(double *y, const float *x, const dnn_maxpool_args *a)
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
	ref_maxpool_args(ref, x, &a);
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

static void test_bn_running_eval(int N, int C, int HW)
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


/* maxpool's own unit checks: argument checks, the output shapes args_finish computes (and the
 * forward through the insert helper on them, tolerance 0), ties in a 2x2 window, the fused relu
 * against relu then pooling (bit for bit), the AVX2 2x2 kernels against the scalar loops on
 * ties, +-0 and NaNs (bit for bit). */
static void extra_maxpool_unit(void)
{
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
		printf("maxpool: no AVX2, the AVX2 max-pool kernels are not compared here\n");
	}
}

/* batchnorm's own unit checks: the training forward's saved statistics (mean | biased var |
 * invstd), the running-statistics update over two steps (PyTorch's formulas) and eval mode with
 * the running statistics, tolerance 2e-5; the AVX2 kernels against the portable loops, bit for
 * bit, every output of the forward (plain and fused relu) and both backwards (= and +=). */
static void extra_batchnorm_unit(void)
{
	test_bn_running_eval(4, 3, 25);
	test_bn_running_eval(1, 5, 7);
	test_bn_running_eval(8, 2, 1);
	test_bn_running_eval(2, 16, 49);
	if (dnn_batchnorm_set_simd(1)) {
		test_bn_simd_identical(3, 5, 25);
		test_bn_simd_identical(1, 2, 7);
		test_bn_simd_identical(4, 3, 8);
		test_bn_simd_identical(5, 4, 9);
		test_bn_simd_identical(2, 16, 64);
		test_bn_simd_identical(7, 16, 1024);
		test_bn_simd_identical(3, 4, 47); // 5 vectors and a tail of 7: the folds through the stack
		test_bn_simd_identical(32, 4, 64); // ResNet's 8x8 at a chunk of 32: the folds in registers (fold2)
	} else {
		printf("batchnorm: no AVX2, the AVX2 batch-norm kernels are not compared here\n");
	}
	h_extra_act_bf16(); /* the bf16 activations it writes and reads, with relu's and add's (op_bf16.c) */
}

/* ------------------------------------------------------------------ batchnorm: grad, its own check
 * (moved from grad_pool_bn.c): the training backward's dgamma and dbeta through a STARPU_RW handle
 * (the insert helper's other mode; the descriptor uses REDUX) as well as REDUX, against central
 * finite differences, over 4 chunks (chunk 0 into the RW pair, odd chunks accumulating dx). */

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

#define BN_CHUNKS 4

static void test_bn_bwd(int N, int C, int HW)
{
	dnn_batchnorm_args a = {.N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f};
	size_t nx = (size_t)N * C * HW;
	float *gamma = malloc(C * sizeof(float)), *beta = malloc(C * sizeof(float));
	float *dgamma = malloc(C * sizeof(float)), *dbeta = malloc(C * sizeof(float));
	float *dgamma_rw = malloc(C * sizeof(float)), *dbeta_rw = malloc(C * sizeof(float));
	double *gg = malloc(C * sizeof(double)), *gb = malloc(C * sizeof(double));
	double *gg_rw = malloc(C * sizeof(double)), *gb_rw = malloc(C * sizeof(double));
	float *x[BN_CHUNKS], *y[BN_CHUNKS], *r[BN_CHUNKS], *dx[BN_CHUNKS], *saved[BN_CHUNKS];
	double *gx[BN_CHUNKS];
	starpu_data_handle_t hx[BN_CHUNKS], hy[BN_CHUNKS], hr[BN_CHUNKS], hdx[BN_CHUNKS], hs[BN_CHUNKS];

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
	for (int t = 0; t < BN_CHUNKS; t++) {
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
	for (int t = 0; t < BN_CHUNKS; t++) {
		starpu_data_handle_t all[] = {hx[t], hy[t], hr[t], hdx[t], hs[t]};
		for (size_t i = 0; i < 5; i++)
			starpu_data_unregister(all[i]);
	}
	starpu_data_handle_t params[] = {hg, hb, hdg, hdb, hdg_rw, hdb_rw};
	for (size_t i = 0; i < 6; i++)
		starpu_data_unregister(params[i]);

	char what[96];
	for (int t = 0; t < BN_CHUNKS; t++) {
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

	for (int t = 0; t < BN_CHUNKS; t++) {
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

static void extra_batchnorm_grad(void) { test_bn_bwd(3, 4, 10); }

/* ------------------------------------------------------------------ conv: its own checks (moved from
 * unit_conv2d.c and grad_conv2d.c; the kernels through their insert helpers, not through a net, so
 * also the shapes a net file cannot write: R != S, padding beyond the kernel's extent).
 * unit: the shape arithmetic (args_finish's P, Q, rejections, flops); conv2d forward tasks
 * against the double reference (mixed 1e-4, a NaN-free 1e30 fill the task must overwrite) on
 * corner cases and 40 random shapes; the direct path's AVX-512 kernels against its AVX2 ones bit
 * for bit, and with the fused bias against conv then + bias.
 * grad: backward-data (= on a NaN fill, and +=) and backward-filter (RW, and REDUX over up to 3
 * batch chunks) against central finite differences (step 1e-3, at most 120 points per tensor,
 * mixed 1e-4), and the accumulating backward = dx0 + dx within 1e-6. */
static void conv_unit_shape(dnn_conv2d_args a)
{
	char what[160];
	snprintf(what, sizeof(what), "fwd N%d C%d H%d W%d K%d R%d S%d st%d pad%d dil%d", a.N, a.C, a.H,
		 a.W, a.K, a.R, a.S, a.stride, a.pad, a.dilation);
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "%s: args rejected", what);
		return;
	}
	size_t nx = (size_t)a.N * a.C * a.H * a.W, nw = (size_t)a.K * a.C * a.R * a.S;
	size_t ny = (size_t)a.N * a.K * a.P * a.Q;
	float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float));
	float *y = malloc(ny * sizeof(float));
	double *ref = malloc(ny * sizeof(double));
	test_fill_uniform(x, nx, -1, 1);
	test_fill_uniform(w, nw, -1, 1);
	for (size_t i = 0; i < ny; i++)
		y[i] = 1e30f; /* garbage: the task must overwrite every element */

	starpu_data_handle_t hx, hw, hy;
	starpu_vector_data_register(&hx, STARPU_MAIN_RAM, (uintptr_t)x, nx, sizeof(float));
	starpu_vector_data_register(&hw, STARPU_MAIN_RAM, (uintptr_t)w, nw, sizeof(float));
	starpu_vector_data_register(&hy, STARPU_MAIN_RAM, (uintptr_t)y, ny, sizeof(float));
	dnn_insert_conv2d_fwd(NULL, &a, hx, hw, hy);
	starpu_data_unregister(hx);
	starpu_data_unregister(hw);
	starpu_data_unregister(hy);

	conv2d_forward_ref(ref, x, w, &a);
	test_close_mixed(what, y, ref, ny, 1e-4);
	free(x);
	free(w);
	free(y);
	free(ref);
}

/* The direct path's AVX-512 kernels against its AVX2 ones, bit for bit (each lane sums the same
 * taps in the same order), overwriting and accumulating (beta 1); and each with the fused bias
 * against the conv then + bias. */
static void check_direct_isas(dnn_conv2d_args a)
{
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "direct N%d C%d K%d: args rejected", a.N, a.C, a.K);
		return;
	}
	const conv_geom g = conv_geom_of(&a);
	TEST_CHECK(dnn_conv_direct_applies(&g), "direct N%d C%d H%d W%d K%d R%d S%d: not a direct shape", a.N, a.C, a.H,
		   a.W, a.K, a.R, a.S);
	size_t nx = (size_t)a.N * a.C * a.H * a.W, nw = (size_t)a.K * a.C * a.R * a.S;
	size_t ny = (size_t)a.N * a.K * a.P * a.Q;
	float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)), *y0 = malloc(ny * sizeof(float));
	float *y[2][2], *work = malloc(dnn_conv_direct_work(&g) * sizeof(float));
	test_fill_uniform(x, nx, -1, 1);
	test_fill_uniform(w, nw, -1, 1);
	test_fill_uniform(y0, ny, -1, 1);
	int isa[2];
	for (int i = 0; i < 2; i++) {
		isa[i] = dnn_conv_direct_set_avx512(i);
		for (int beta = 0; beta < 2; beta++) {
			y[i][beta] = malloc(ny * sizeof(float));
			memcpy(y[i][beta], y0, ny * sizeof(float));
			dnn_conv_direct_forward(y[i][beta], x, w, NULL, &g, (float)beta, work);
		}
		/* The fused bias (DNN_FUSE=2), added in the store: the conv's floats + bias[k], as the
		 * separate bias pass gives. */
		float *yb = malloc(ny * sizeof(float)), *bias = malloc((size_t)a.K * sizeof(float));
		test_fill_uniform(bias, (size_t)a.K, -1, 1);
		dnn_conv_direct_forward(yb, x, w, bias, &g, 0.0f, work);
		float *want = malloc(ny * sizeof(float));
		for (size_t j = 0; j < ny; j++)
			want[j] = y[i][0][j] + bias[(j / ((size_t)a.P * a.Q)) % (size_t)a.K];
		char what[96];
		snprintf(what, sizeof what, "direct C%d K%d (avx512 %d): conv with its bias vs conv then + bias", a.C, a.K,
			 isa[i]);
		test_same_bits(what, yb, want, ny);
		free(yb), free(bias), free(want);
	}
	dnn_conv_direct_set_avx512(1);
	TEST_CHECK(isa[0] == 0 && isa[1] == 1, "direct: AVX2 and AVX-512 runs not both made (%d %d)", isa[0], isa[1]);
	for (int beta = 0; beta < 2; beta++) {
		char what[96];
		snprintf(what, sizeof what, "direct C%d H%d W%d K%d R%d S%d beta %d: AVX-512 vs AVX2", a.C, a.H, a.W, a.K, a.R,
			 a.S, beta);
		test_same_bits(what, y[1][beta], y[0][beta], ny);
		free(y[0][beta]), free(y[1][beta]);
	}
	free(x), free(w), free(y0), free(work);
}

#define CONV_FD_H 1e-3
#define CONV_FD_MAX 120 /* finite differences on at most this many elements per tensor */
#define CONV_NCHUNKS 3

/* L = sum_{n,k,p,q} y[n,k,p,q] * r[n,k,p,q], y = conv(x, w), all in double (the terms of L
 * are added in the same order as when the conv loop accumulated L itself). */
static double conv_loss_ref(const double *x, const double *w, const double *r, const dnn_conv2d_args *a)
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

/* Picks up to CONV_FD_MAX distinct indices of [0, n): all of them when n is small. */
static size_t conv_fd_points(size_t *idx, size_t n)
{
	if (n <= CONV_FD_MAX) {
		for (size_t i = 0; i < n; i++)
			idx[i] = i;
		return n;
	}
	for (size_t i = 0; i < CONV_FD_MAX; i++)
		idx[i] = (size_t)test_rng_int(0, (int)(n - 1));
	return CONV_FD_MAX;
}

/* Central difference of L with respect to v[i] (v is x or w, perturbed in place). */
static double conv_fd(double *v, size_t i, const double *x, const double *w, const double *r,
		 const dnn_conv2d_args *a)
{
	double keep = v[i];
	v[i] = keep + CONV_FD_H;
	double lp = conv_loss_ref(x, w, r, a);
	v[i] = keep - CONV_FD_H;
	double lm = conv_loss_ref(x, w, r, a);
	v[i] = keep;
	return (lp - lm) / (2 * CONV_FD_H);
}

static void conv_grad_shape(dnn_conv2d_args a)
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
	int nchunks = a.N < CONV_NCHUNKS ? a.N : CONV_NCHUNKS;
	starpu_data_handle_t hxc[CONV_NCHUNKS], hrc[CONV_NCHUNKS];
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
	size_t *idx = malloc(CONV_FD_MAX * sizeof(size_t));
	float *got = malloc(CONV_FD_MAX * sizeof(float));
	float *got_acc = malloc(CONV_FD_MAX * sizeof(float));
	float *got_redux = malloc(CONV_FD_MAX * sizeof(float));
	double *ref = malloc(CONV_FD_MAX * sizeof(double));

	size_t m = conv_fd_points(idx, nx);
	for (size_t j = 0; j < m; j++) {
		ref[j] = conv_fd(xd, idx[j], xd, wd, rd, &a);
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

	m = conv_fd_points(idx, nw);
	for (size_t j = 0; j < m; j++) {
		ref[j] = conv_fd(wd, idx[j], xd, wd, rd, &a);
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

/* The direct 1x1 and 3x3 stride-2 kernels (conv2d_pointwise.c, conv2d_stride2.c) called directly, every pass,
 * whatever conv2d_algo.c's rules give them, against the im2col kernels on the same inputs. Bound: each output
 * is a float sum of at most n products (n = C*R*S forward, K*R*S backward data, N*P*Q backward filter, one
 * more term for beta = 1, accumulate_dx or dw's +=); any order of it lies within gamma_n * sum |terms| of
 * the exact value (Higham, Accuracy and Stability, 3.1: gamma_n = n u / (1 - n u), u = 2^-24), so two
 * orders differ by at most 2 gamma_n * sum |terms|, where sum |terms| is the same pass run on |inputs|
 * (im2col, in float: it carries its own gamma_n, hence the factor (1 + gamma_n) on it). The negative control
 * adds 1 to the centre tap of one weight (dy for the weight gradient), which moves some outputs by up to
 * |x| ~ 1, beyond bounds of 2.5e-3 (forward, n = 288) to 0.11 (weight gradient, n = 1961), and must break the
 * bound. Returns the largest |got - want| / bound. */
static double direct_excess(const float *got, const float *want, const float *absum, size_t m, long n)
{
	const double u = ldexp(1.0, -24), gam = n * u / (1.0 - n * u);
	double worst = 0;
	for (size_t i = 0; i < m; i++) {
		const double bound = 2.0 * gam * (1.0 + gam) * absum[i] + 1e-30;
		const double e = fabs((double)got[i] - (double)want[i]) / bound;
		if (!(e <= worst))
			worst = e; // NaN wins
	}
	return worst;
}

typedef void (*direct_fwd_fn)(float *, const float *, const float *, const conv_geom *, float, float *);
typedef void (*direct_bwd_data_fn)(float *, const float *, const float *, const conv_geom *, int);
typedef void (*direct_bwd_filter_fn)(float *, const float *, const float *, const conv_geom *);

static void check_direct_kernels(dnn_conv2d_args a)
{
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "direct kernels: bad shape");
		return;
	}
	const conv_geom g = conv_geom_of(&a);
	const int pw = dnn_conv_pointwise_applies(&g), s2 = dnn_conv_stride2_applies(&g);
	TEST_CHECK(pw || s2, "direct N%d C%d H%d W%d K%d R%d stride %d: no direct kernel takes it", a.N, a.C, a.H, a.W,
		   a.K, a.R, a.stride);
	if (!pw && !s2)
		return;
	direct_fwd_fn fwd = pw ? dnn_conv_pointwise_forward : dnn_conv_stride2_forward;
	direct_bwd_data_fn bwd_data = pw ? dnn_conv_pointwise_backward_data : dnn_conv_stride2_backward_data;
	direct_bwd_filter_fn bwd_filter = pw ? dnn_conv_pointwise_backward_filter : dnn_conv_stride2_backward_filter;
	const size_t nx = (size_t)a.N * a.C * a.H * a.W, nw = (size_t)a.K * a.C * a.R * a.S;
	const size_t ny = (size_t)a.N * a.K * a.P * a.Q;
	float *x = alloc_f(nx), *w = alloc_f(nw), *dy = alloc_f(ny), *ax = alloc_f(nx), *aw = alloc_f(nw),
	      *ady = alloc_f(ny);
	for (size_t i = 0; i < nx; i++)
		ax[i] = fabsf(x[i] = test_rng_uniform(-1, 1));
	for (size_t i = 0; i < nw; i++)
		aw[i] = fabsf(w[i] = test_rng_uniform(-1, 1));
	for (size_t i = 0; i < ny; i++)
		ady[i] = fabsf(dy[i] = test_rng_uniform(-1, 1));
	const size_t nmax = nx > ny ? (nx > nw ? nx : nw) : (ny > nw ? ny : nw);
	float *got = alloc_f(nmax), *want = alloc_f(nmax), *absum = alloc_f(nmax), *bad = alloc_f(nmax);
	size_t wk = dnn_conv_im2col_forward_work(&g), wd = pw ? dnn_conv_pointwise_work(&g) : dnn_conv_stride2_work(&g);
	float *work = alloc_f(wk > wd ? wk : wd);
	char what[160];
	const char *kind = pw ? "1x1" : "3x3 stride 2";
	const size_t ctr = (size_t)(a.R * a.S) / 2; // the centre tap: never only padding
	for (int pass = 0; pass < 3; pass++)
		for (int acc = 0; acc < 2; acc++) {
			const size_t m = pass == 0 ? ny : pass == 1 ? nx : nw;
			long n = pass == 0   ? (long)a.C * a.R * a.S
				 : pass == 1 ? (long)a.K * a.R * a.S
					     : (long)a.N * a.P * a.Q;
			n += acc || pass == 2;
			/* The starting values (beta = 1, accumulate_dx = 1, dw +=): the same in got, want, bad; |.| in
			 * absum. */
			for (size_t i = 0; i < m; i++)
				got[i] = want[i] = bad[i] = (acc || pass == 2) ? test_rng_uniform(-1, 1) : NAN;
			for (size_t i = 0; i < m; i++)
				absum[i] = (acc || pass == 2) ? fabsf(got[i]) : 0.0f;
			if (pass == 0) {
				fwd(got, x, w, &g, (float)acc, work);
				dnn_conv_im2col_forward(want, x, w, &g, (float)acc, work);
				dnn_conv_im2col_forward(absum, ax, aw, &g, (float)acc, work);
				w[ctr] += 1.0f;
				fwd(bad, x, w, &g, (float)acc, work);
				w[ctr] -= 1.0f;
			} else if (pass == 1) {
				bwd_data(got, dy, w, &g, acc);
				dnn_conv_im2col_backward_data(want, dy, w, &g, acc);
				dnn_conv_im2col_backward_data(absum, ady, aw, &g, acc);
				w[ctr] += 1.0f;
				bwd_data(bad, dy, w, &g, acc);
				w[ctr] -= 1.0f;
			} else {
				if (acc)
					break; // dw is always accumulated: one case
				bwd_filter(got, x, dy, &g);
				dnn_conv_im2col_backward_filter(want, x, dy, &g);
				dnn_conv_im2col_backward_filter(absum, ax, ady, &g);
				dy[0] += 1.0f;
				bwd_filter(bad, x, dy, &g);
				dy[0] -= 1.0f;
			}
			snprintf(what, sizeof what, "direct %s N%d C%d %dx%d K%d, pass %d%s", kind, a.N, a.C, a.H, a.W,
				 a.K, pass, acc ? " (accumulating)" : "");
			const double e = direct_excess(got, want, absum, m, n);
			const double eb = direct_excess(bad, want, absum, m, n);
			TEST_CHECK(e <= 1.0, "%s: |direct - im2col| is %.3g x its bound", what, e);
			TEST_CHECK(eb > 1.0, "%s: negative control (one input + 1) within the bound (%.3g)", what, eb);
			/* Same call, same bits. */
			memcpy(bad, want, m * sizeof(float));
			if (pass == 0)
				fwd(bad, x, w, &g, 0.0f, work), fwd(got, x, w, &g, 0.0f, work);
			else if (pass == 1)
				bwd_data(bad, dy, w, &g, 0), bwd_data(got, dy, w, &g, 0);
			else
				memset(bad, 0, m * sizeof(float)), memset(got, 0, m * sizeof(float)),
					bwd_filter(bad, x, dy, &g), bwd_filter(got, x, dy, &g);
			test_same_bits(what, got, bad, m);
		}
	free(x), free(w), free(dy), free(ax), free(aw), free(ady), free(got), free(want), free(absum), free(bad);
	free(work);
}

static void extra_conv_unit_own(void);
static void extra_conv_unit(void) /* the op's own checks, then its bf16 kernels' (op_bf16.c) */
{
	extra_conv_unit_own();
	h_extra_conv_bf16();
	h_extra_conv_act_bf16();
	h_extra_conv_out_bf16();
}

static void extra_conv_unit_own(void)
{
	/* Shape arithmetic. */
	dnn_conv2d_args a = conv_shape(2, 3, 32, 32, 16, 3, 3, 1, 1, 1);
	TEST_CHECK(dnn_conv2d_args_finish(&a) == 0 && a.P == 32 && a.Q == 32, "3x3 pad 1: P=%d Q=%d", a.P, a.Q);
	a = conv_shape(2, 3, 32, 31, 16, 3, 3, 2, 1, 1);
	TEST_CHECK(dnn_conv2d_args_finish(&a) == 0 && a.P == 16 && a.Q == 16, "stride 2: P=%d Q=%d", a.P, a.Q);
	a = conv_shape(1, 1, 7, 7, 1, 3, 3, 1, 0, 3);
	TEST_CHECK(dnn_conv2d_args_finish(&a) == 0 && a.P == 1 && a.Q == 1, "dilation 3: P=%d Q=%d", a.P, a.Q);
	a = conv_shape(1, 1, 4, 4, 1, 5, 5, 1, 0, 1);
	TEST_CHECK(dnn_conv2d_args_finish(&a) == -1, "kernel larger than the input must be rejected");
	a = conv_shape(1, 1, 4, 4, 1, 3, 3, 0, 0, 1);
	TEST_CHECK(dnn_conv2d_args_finish(&a) == -1, "stride 0 must be rejected");
	a = conv_shape(1, 1, 4, 4, 1, 3, 3, 1, 0, 1);
	TEST_CHECK(dnn_conv2d_args_finish(&a) == 0 && dnn_conv2d_flops_fwd(&a) == 2.0 * 4 * 9,
		   "flops = %g", dnn_conv2d_flops_fwd(&a));

	/* Corner cases. */
	conv_unit_shape(conv_shape(1, 1, 1, 1, 1, 1, 1, 1, 0, 1));     /* smallest */
	conv_unit_shape(conv_shape(1, 3, 32, 32, 16, 3, 3, 1, 1, 1));  /* CIFAR stem, batch 1 */
	conv_unit_shape(conv_shape(3, 16, 32, 32, 16, 3, 3, 1, 1, 1)); /* ResNet-20 stage 1: row tiles */
	conv_unit_shape(conv_shape(5, 16, 32, 32, 32, 3, 3, 2, 1, 1)); /* stride 2 */
	conv_unit_shape(conv_shape(9, 64, 8, 8, 64, 3, 3, 1, 1, 1));   /* small images: grouped, last group partial */
	conv_unit_shape(conv_shape(4, 32, 16, 16, 64, 1, 1, 2, 0, 1)); /* 1x1 stride 2 shortcut */
	conv_unit_shape(conv_shape(3, 8, 13, 11, 5, 1, 1, 1, 0, 1));   /* 1x1 stride 1: no im2col */
	conv_unit_shape(conv_shape(2, 5, 10, 11, 4, 1, 1, 3, 0, 1));   /* 1x1 stride 3: subsampled */
	conv_unit_shape(conv_shape(2, 4, 9, 10, 3, 1, 1, 1, 1, 1));    /* 1x1 with padding */
	conv_unit_shape(conv_shape(2, 3, 37, 29, 8, 7, 7, 2, 3, 1));   /* 7x7 stem, odd sizes */
	conv_unit_shape(conv_shape(2, 5, 17, 19, 6, 3, 3, 1, 2, 2));   /* dilation 2 */
	conv_unit_shape(conv_shape(3, 2, 11, 7, 3, 3, 2, 3, 4, 1));    /* pad bigger than the kernel, stride 3 */
	conv_unit_shape(conv_shape(2, 7, 15, 9, 4, 5, 3, 2, 0, 2));    /* non-square kernel, dilation, no pad */
	conv_unit_shape(conv_shape(1, 2, 300, 5, 3, 3, 3, 1, 1, 1));   /* tall image: many row tiles */
	conv_unit_shape(conv_shape(2, 1, 3, 700, 2, 3, 3, 1, 1, 1));   /* a single row wider than a block */
	conv_unit_shape(conv_shape(3, 1, 28, 28, 6, 5, 5, 1, 2, 1));   /* LeNet-5 c1: direct path, 4 vectors/row */
	conv_unit_shape(conv_shape(3, 6, 14, 14, 16, 5, 5, 1, 0, 1));  /* LeNet-5 c2: direct path, 2 vectors/row */
	conv_unit_shape(conv_shape(2, 3, 32, 32, 7, 3, 3, 1, 1, 1));   /* direct, K = 7: channel blocks + remainder */
	conv_unit_shape(conv_shape(2, 2, 9, 20, 5, 2, 4, 1, 1, 1));    /* direct, R != S, 3 vectors/row */
	conv_unit_shape(conv_shape(2, 3, 16, 16, 9, 3, 3, 1, 1, 1));   /* direct, Q = 16: one full AVX-512 vector */
	conv_unit_shape(conv_shape(2, 2, 7, 5, 3, 3, 3, 1, 0, 1));     /* direct, Q = 3 */
	conv_unit_shape(conv_shape(5, 16, 28, 28, 32, 3, 3, 2, 1, 1)); /* stride-2 direct: ResNet-8's, 4 a group */
	conv_unit_shape(conv_shape(9, 32, 14, 14, 64, 3, 3, 2, 1, 1)); /* stride-2 direct: 7x7 outputs */
	conv_unit_shape(conv_shape(3, 5, 31, 33, 13, 3, 3, 2, 1, 1));  /* stride-2 direct: odd, Q = 17 */
	conv_unit_shape(conv_shape(20, 16, 28, 28, 32, 1, 1, 2, 0, 1)); /* 1x1 direct: 16 a group, then 4 */
	conv_unit_shape(conv_shape(2, 33, 9, 37, 70, 1, 1, 1, 0, 1));  /* 1x1 stride 1: 8-row blocks + 6 */
	if (dnn_conv_avx512_kernels()) {
		check_direct_kernels(conv_shape(2, 33, 9, 37, 70, 1, 1, 1, 0, 1));  /* 1x1 stride 1: 8-row blocks + 6 */
		check_direct_kernels(conv_shape(3, 17, 13, 11, 19, 1, 1, 2, 0, 1)); /* 1x1 stride 2, odd sizes */
		check_direct_kernels(conv_shape(40, 32, 14, 14, 64, 1, 1, 2, 0, 1)); /* ResNet-8's shortcut, 2 groups */
		check_direct_kernels(conv_shape(5, 16, 13, 14, 9, 3, 3, 2, 1, 1));  /* stride 2: a partial group */
		check_direct_kernels(conv_shape(9, 32, 14, 14, 64, 3, 3, 2, 1, 1)); /* stride 2: 7x7 out, 2 groups */
		check_direct_kernels(conv_shape(2, 3, 1, 2, 5, 3, 3, 2, 1, 1));     /* stride 2: one output pixel */
		/* The stride-2 weight gradient's blocks: 3 k vectors x 2 channels in groups of 3, 3 and 1
		 * images; 4 + 1 k vectors (K = 70) with channel remainders; 2 k vectors x 4 channels + 2
		 * single channels. */
		check_direct_kernels(conv_shape(7, 24, 20, 20, 40, 3, 3, 2, 1, 1));
		check_direct_kernels(conv_shape(3, 5, 9, 11, 70, 3, 3, 2, 1, 1));
		check_direct_kernels(conv_shape(2, 6, 12, 7, 19, 3, 3, 2, 1, 1));
		/* The stride-2 backward data's blocks (vectors of input channels): 3 c vectors x 6 pixels in groups of
		 * 3 images, odd width; 4 + 1 c vectors (C = 70) in groups of 4 and 2, odd height. */
		check_direct_kernels(conv_shape(9, 40, 20, 19, 23, 3, 3, 2, 1, 1));
		check_direct_kernels(conv_shape(6, 70, 13, 15, 9, 3, 3, 2, 1, 1));
	} else {
		printf("conv: no AVX-512F, the direct 1x1 and stride-2 kernels are not run here\n");
	}
	if (dnn_conv_direct_set_avx512(1)) {
		check_direct_isas(conv_shape(3, 1, 28, 28, 6, 5, 5, 1, 2, 1));  /* LeNet-5 c1: Q = 28 */
		check_direct_isas(conv_shape(3, 6, 14, 14, 16, 5, 5, 1, 0, 1)); /* LeNet-5 c2: Q = 10 */
		check_direct_isas(conv_shape(2, 3, 32, 32, 7, 3, 3, 1, 1, 1));  /* Q = 32, K = 7: blocks + one */
		check_direct_isas(conv_shape(2, 2, 9, 20, 5, 2, 4, 1, 1, 1));   /* Q = 19 */
		check_direct_isas(conv_shape(2, 3, 16, 16, 9, 3, 3, 1, 1, 1));  /* Q = 16, K = 9 */
		check_direct_isas(conv_shape(2, 2, 7, 5, 3, 3, 3, 1, 0, 1));    /* Q = 3 */
	} else {
		printf("conv: no AVX-512, the direct path's two ISAs are not compared here\n");
	}

	/* Random shapes. */
	for (int t = 0; t < 40; t++) {
		dnn_conv2d_args r;
		do {
			r = conv_shape(test_rng_int(1, 4), test_rng_int(1, 9), test_rng_int(1, 20),
				       test_rng_int(1, 20), test_rng_int(1, 9), test_rng_int(1, 5),
				       test_rng_int(1, 5), test_rng_int(1, 3), test_rng_int(0, 3),
				       test_rng_int(1, 2));
		} while (dnn_conv2d_args_finish(&r) != 0);
		conv_unit_shape(r);
	}

}

static void extra_conv_grad(void)
{
	conv_grad_shape(conv_shape(1, 1, 1, 1, 1, 1, 1, 1, 0, 1));
	conv_grad_shape(conv_shape(2, 3, 7, 8, 4, 3, 3, 1, 1, 1));    /* 3x3 pad 1, odd sizes */
	conv_grad_shape(conv_shape(3, 4, 9, 9, 5, 3, 3, 2, 1, 1));    /* stride 2 */
	conv_grad_shape(conv_shape(2, 3, 11, 10, 2, 3, 3, 1, 2, 2));  /* dilation 2 */
	conv_grad_shape(conv_shape(4, 6, 5, 7, 3, 1, 1, 1, 0, 1));    /* 1x1 stride 1: no im2col */
	conv_grad_shape(conv_shape(3, 5, 8, 7, 4, 1, 1, 2, 0, 1));    /* 1x1 stride 2 */
	conv_grad_shape(conv_shape(2, 2, 12, 9, 3, 5, 5, 1, 2, 1));   /* 5x5 */
	conv_grad_shape(conv_shape(1, 3, 13, 13, 4, 7, 7, 2, 3, 1));  /* 7x7 stem, batch 1 */
	conv_grad_shape(conv_shape(3, 2, 6, 9, 2, 2, 3, 3, 4, 1));    /* pad larger than the kernel */
	conv_grad_shape(conv_shape(2, 3, 5, 6, 4, 3, 3, 1, 3, 1));    /* pad > dilation*(R-1) */
	conv_grad_shape(conv_shape(2, 3, 8, 7, 4, 2, 3, 1, 1, 1));    /* R != S, stride 1 */
	conv_grad_shape(conv_shape(2, 3, 6, 5, 64, 3, 3, 1, 1, 1));   /* stride 1, many output channels */
	conv_grad_shape(conv_shape(7, 8, 4, 4, 6, 3, 3, 1, 1, 1));    /* small images: grouped blocks */
	conv_grad_shape(conv_shape(2, 3, 10, 11, 4, 1, 1, 3, 0, 1));  /* 1x1 stride 3: subsampled pointwise */
	conv_grad_shape(conv_shape(2, 4, 7, 7, 3, 1, 1, 2, 1, 1));    /* 1x1 stride 2 with padding */
	/* C >= 16, stride 1: backward data runs as a forward conv with the flipped kernel. */
	conv_grad_shape(conv_shape(2, 16, 6, 7, 3, 3, 3, 1, 3, 1));   /* pad > dilation*(R-1): a crop */
	conv_grad_shape(conv_shape(2, 16, 9, 8, 2, 2, 3, 1, 1, 2));   /* R != S, dilation 2 */
	conv_grad_shape(conv_shape(3, 20, 5, 5, 4, 3, 3, 1, 1, 1));   /* grouped blocks */
	conv_grad_shape(conv_shape(2, 1, 12, 12, 6, 5, 5, 1, 2, 1));  /* LeNet-5 c1-like: direct forward */
	conv_grad_shape(conv_shape(2, 6, 8, 8, 5, 5, 5, 1, 0, 1));    /* LeNet-5 c2-like */
	conv_grad_shape(conv_shape(2, 16, 24, 24, 3, 3, 3, 1, 1, 1)); /* large images: row tiles */
	conv_grad_shape(conv_shape(2, 16, 47, 45, 3, 3, 3, 2, 1, 1)); /* row tiles, stride 2, odd */
	/* The direct 1x1 and 3x3 stride-2 kernels (conv2d_pointwise.c, conv2d_stride2.c): odd sizes, channel
	 * counts that are no multiple of their blocks, a partial last group of images. */
	conv_grad_shape(conv_shape(5, 16, 13, 14, 9, 3, 3, 2, 1, 1));  /* stride 2: 4 images a group, then 1 */
	conv_grad_shape(conv_shape(2, 9, 2, 3, 5, 3, 3, 2, 1, 1));     /* stride 2, 1x2 output */
	conv_grad_shape(conv_shape(3, 17, 6, 5, 19, 1, 1, 2, 0, 1));   /* 1x1 stride 2, odd width */
	conv_grad_shape(conv_shape(2, 7, 5, 6, 21, 1, 1, 1, 0, 1));    /* 1x1 stride 1 */
	for (int t = 0; t < 10; t++) {
		dnn_conv2d_args r;
		do {
			r = conv_shape(test_rng_int(1, 4), test_rng_int(1, 5), test_rng_int(1, 12),
				       test_rng_int(1, 12), test_rng_int(1, 5), test_rng_int(1, 4),
				       test_rng_int(1, 4), test_rng_int(1, 3), test_rng_int(0, 2),
				       test_rng_int(1, 2));
		} while (dnn_conv2d_args_finish(&r) != 0);
		conv_grad_shape(r);
	}

}

/* ------------------------------------------------------------------ maxpool and batchnorm: gpu, their own
 * checks (moved from gpu_pool_bn.c): every max-pooling and batch-norm codelet on the CUDA and the
 * CPU worker (STARPU_EXECUTE_ON_WORKER) on the same inputs: the backward tasks of both devices read
 * the CPU's forward outputs; the REDUX gradients get one contribution from each device; train y,
 * saved statistics, running statistics (1e-5), eval y (1e-4), dx, dgamma, dbeta (RW and REDUX,
 * 2e-4); --batchnorm global's codelets (sums, normalisation, backward sums, dx, with the fused
 * relu). maxpool: y equal, dx (W and RW) within 1e-6. */
enum { GPU = 0, CPU = 1, NDEV = 2 };
static int workers[NDEV];
static const char *dev_name[NDEV] = {"cuda", "cpu"};

/* ------------------------------------------------------------------ maxpool */

static void gpu_test_maxpool(int N, int C, int H, int W, int k, int stride, int pad)
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

static void gpu_test_bn(int N, int C, int HW)
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
static void gpu_test_bn_global(int N, int C, int HW, int relu)
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

static void extra_pool_bn_gpu(void)
{
	workers[GPU] = h_cuda_worker(), workers[CPU] = h_cpu_worker();
}

/* ------------------------------------------------------------------ layernorm: gpu, its own checks */

/* What the descriptor's gpu rows do not submit, on each device against the CPU kernels: the eval
 * forward (nothing saved) and a backward without dx (a layernorm on the net's input), which adds
 * only dgamma, dbeta into REDUX handles (one contribution from each device: g0 + 2 x the CPU's). */
static void gpu_test_ln(long rows, int C)
{
	const size_t n = (size_t)rows * C;
	dnn_layernorm_args a = {.rows = rows, .C = C, .eps = 1e-5f, .save = 1, .has_dx = 1};
	float *x = alloc_f(n), *dy = alloc_f(n), *gamma = alloc_f(C), *beta = alloc_f(C), *g0 = alloc_f(C);
	float *saved = alloc_f(3 * (size_t)rows), *yt = alloc_f(n), *dxs = alloc_f(n), *ye[NDEV];
	fill_layernorm(H_GPU, 0, x, n);
	test_fill_uniform(dy, n, -1, 1);
	test_fill_uniform(gamma, C, 0.5f, 1.5f);
	test_fill_uniform(beta, C, -0.5f, 0.5f);
	test_fill_uniform(g0, C, -1, 1);
	float *rg = alloc_f(C), *rb = alloc_f(C), *tg = calloc(C, sizeof(float)), *tb = calloc(C, sizeof(float));
	memcpy(rg, g0, C * sizeof(float));
	memcpy(rb, g0, C * sizeof(float));
	dnn_layernorm_forward_cpu(yt, saved, x, gamma, beta, &a);
	TEST_CHECK(dnn_layernorm_backward_cpu(dxs, tg, tb, x, gamma, saved, dy, &a) == 0, "layernorm bwd");
	starpu_data_handle_t hx = reg_f(x, n), hdy = reg_f(dy, n), hg = reg_f(gamma, C), hb = reg_f(beta, C),
			     hs = reg_f(saved, 3 * (size_t)rows), hrg = reg_f(rg, C), hrb = reg_f(rb, C), hye[NDEV];
	dnn_vec_set_sum_redux(hrg);
	dnn_vec_set_sum_redux(hrb);
	for (int d = 0; d < NDEV; d++) {
		ye[d] = alloc_f(n);
		fill_nan(ye[d], n);
		hye[d] = reg_f(ye[d], n);
		dnn_layernorm_args e = a;
		e.save = 0;
		struct starpu_data_descr fe[] = {{hx, STARPU_R}, {hg, STARPU_R}, {hb, STARPU_R}, {hye[d], STARPU_W}};
		test_task(&cl_layernorm_fwd, workers[d], &e, sizeof e, fe, 4, "layernorm_fwd");
		dnn_layernorm_args b = a;
		b.has_dx = 0;
		struct starpu_data_descr bw[] = {{hx, STARPU_R},  {hg, STARPU_R},     {hs, STARPU_R},
						 {hdy, STARPU_R}, {hrg, STARPU_REDUX}, {hrb, STARPU_REDUX}};
		test_task(&cl_layernorm_bwd, workers[d], &b, sizeof b, bw, 6, "layernorm_bwd");
	}
	starpu_data_handle_t all[] = {hx, hdy, hg, hb, hs, hrg, hrb, hye[0], hye[1]};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		starpu_data_unregister(all[i]);
	float *eg = alloc_f(C), *eb = alloc_f(C);
	for (int c = 0; c < C; c++)
		eg[c] = g0[c] + 2 * tg[c], eb[c] = g0[c] + 2 * tb[c];
	char what[128];
	for (int d = 0; d < NDEV; d++) {
		snprintf(what, sizeof what, "layernorm rows %ld C %d: eval y on %s", rows, C, dev_name[d]);
		test_close_mixed_f(what, ye[d], yt, n, 1e-5);
	}
	snprintf(what, sizeof what, "layernorm rows %ld C %d: dgamma without dx (REDUX, both devices)", rows, C);
	test_close_mixed_f(what, rg, eg, C, 1e-5);
	snprintf(what, sizeof what, "layernorm rows %ld C %d: dbeta without dx (REDUX, both devices)", rows, C);
	test_close_mixed_f(what, rb, eb, C, 1e-5);
	free(x), free(dy), free(gamma), free(beta), free(g0), free(saved), free(yt), free(dxs), free(rg), free(rb);
	free(tg), free(tb), free(eg), free(eb), free(ye[0]), free(ye[1]);
}

static void extra_layernorm_gpu(void)
{
	workers[GPU] = h_cuda_worker(), workers[CPU] = h_cpu_worker();
	gpu_test_ln(1, 1);
	gpu_test_ln(37, 48);
	gpu_test_ln(300, 768);
}

/* ------------------------------------------------------------------ attention */

/* Causal multi-head attention in double, the plain O(T^2) way: per sample, head h and query t,
 * the softmax over s <= t of q_t . k_s / sqrt(D), then sum_s P v_s. x (n, T, 3C), y (n, T, C);
 * with dy: the analytic gradient into dx (n, T, 3C) instead (dx zeroed first). */
static void attention_ref(const h_ref_args *a, double *y, const double *dy, double *dx)
{
	const int T = a->in->H, L = a->in->C, C = L / 3, H = a->nd->k, D = C / H;
	const double scale = 1.0 / sqrt((double)D);
	double *p = alloc_d((size_t)T), *dp = alloc_d((size_t)T);
	if (dx)
		memset(dx, 0, (size_t)a->n * T * L * sizeof(double));
	for (int n = 0; n < a->n; n++)
		for (int h = 0; h < H; h++) {
			const double *base = a->x[0] + (size_t)n * T * L + (size_t)h * D;
			for (int t = 0; t < T; t++) {
				const double *q = base + (size_t)t * L;
				double mx = -INFINITY, sum = 0;
				for (int s = 0; s <= t; s++) {
					const double *k = base + (size_t)s * L + C;
					double acc = 0;
					for (int d = 0; d < D; d++)
						acc += q[d] * k[d];
					p[s] = acc * scale;
					mx = p[s] > mx ? p[s] : mx;
				}
				for (int s = 0; s <= t; s++)
					sum += (p[s] = exp(p[s] - mx));
				for (int s = 0; s <= t; s++)
					p[s] /= sum;
				const size_t oy = ((size_t)n * T + t) * C + (size_t)h * D;
				if (!dx) {
					for (int d = 0; d < D; d++) {
						double acc = 0;
						for (int s = 0; s <= t; s++)
							acc += p[s] * base[(size_t)s * L + 2 * C + d];
						y[oy + d] = acc;
					}
					continue;
				}
				double *dbase = dx + (size_t)n * T * L + (size_t)h * D, dot = 0;
				for (int s = 0; s <= t; s++) {
					dp[s] = 0;
					for (int d = 0; d < D; d++) {
						dp[s] += dy[oy + d] * base[(size_t)s * L + 2 * C + d];
						dbase[(size_t)s * L + 2 * C + d] += p[s] * dy[oy + d];
					}
					dot += p[s] * dp[s];
				}
				for (int s = 0; s <= t; s++) {
					const double ds = p[s] * (dp[s] - dot) * scale;
					for (int d = 0; d < D; d++) {
						dbase[(size_t)t * L + d] += ds * base[(size_t)s * L + C + d];
						dbase[(size_t)s * L + C + d] += ds * q[d];
					}
				}
			}
		}
	free(p), free(dp);
}

static void ref_attention(const h_ref_args *a, double *y) { attention_ref(a, y, NULL, NULL); }
static void ref_attention_bwd(const h_ref_args *a, const double *dy, double *dx) { attention_ref(a, NULL, dy, dx); }

/* Scores of a few units in the unit and gpu modes (peaked softmaxes, rows whose max moves
 * between tiles), of order 1 for the finite differences. */
static void fill_attention(int mode, int k, float *x, size_t n)
{
	(void)k;
	test_fill_uniform(x, n, mode == H_GRAD ? -1.0f : -2.0f, mode == H_GRAD ? 1.0f : 2.0f);
}

/* The kernels' row loops: AVX2 (exp by a polynomial) or portable (expf); not bit-identical. */
static int attention_variant(int v, char *name, size_t len)
{
	if (v < 0) {
		dnn_attention_set_simd(1);
		return 1;
	}
	snprintf(name, len, "%s", v ? "portable" : "avx2");
	return dnn_attention_set_simd(!v) == !v;
}

/* The net-file errors: one "src:line: ..." line each; and the saved buffer's size per sample. */
static void extra_attention_unit(void);
static void extra_attention_unit_all(void) /* the op's own checks, then its bf16 kernels' (op_bf16.c) */
{
	extra_attention_unit();
	h_extra_attention_bf16();
}

static void extra_attention_unit(void)
{
	static const struct {
		const char *net, *want;
	} bad[] = {
		{"input x seq 4 12\nattention a x\ndense o a out=2\nsoftmax_xent l o\n", "t.net:2: a: attention needs heads=H"},
		{"input x seq 4 10\nattention a x heads=1\ndense o a out=2\nsoftmax_xent l o\n",
		 "t.net:2: a: its input x has 10 channels per token, not 3C (q, k and v of C each)"},
		{"input x seq 4 12\nattention a x heads=3\ndense o a out=2\nsoftmax_xent l o\n",
		 "t.net:2: a: heads=3 does not divide C=4 (x's 12 channels / 3)"},
		{"input x 3 4 4\nattention a x heads=1\ndense o a out=2\nsoftmax_xent l o\n",
		 "t.net:2: a: attention takes a sequence [T][3C] (q, k, v per token), but x is not one"},
		{"input x seq 4 12\nattention a x heads=0\ndense o a out=2\nsoftmax_xent l o\n", "t.net:2: a: heads=0 is not an integer in [1, 65536]"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		dnn_graph g;
		char err[512] = "";
		const int rc = dnn_graph_parse(&g, bad[i].net, "t.net", err, sizeof(err));
		TEST_CHECK(rc != 0 && strncmp(err, bad[i].want, strlen(bad[i].want)) == 0 && !strchr(err, '\n'),
			   "attention: bad net %zu: rc %d, error '%s', want '%s...'", i, rc, err, bad[i].want);
		if (rc == 0)
			dnn_graph_free(&g);
	}
	dnn_graph g;
	char err[512];
	TEST_CHECK(dnn_graph_parse(&g, "input x seq 7 48\nattention a x heads=4\ndense o a out=2\nsoftmax_xent l o\n",
				   "t.net", err, sizeof(err)) == 0, "attention: %s", err);
	if (g.nodes) {
		const dnn_node *nd = &g.nodes[1];
		const dnn_op_desc *d = dnn_op_get(nd->op);
		TEST_CHECK(nd->C == 16 && nd->H == 7 && nd->W == 1 && nd->seq == 1 && nd->params == 0,
			   "attention: output %dx%dx%d seq %d", nd->C, nd->H, nd->W, nd->seq);
		TEST_CHECK(!d->saved_floats && d->saved_floats_per_sample && d->saved_floats_per_sample(nd) == 4 * 7,
			   "attention: saved %zu floats per sample",
			   d->saved_floats_per_sample ? d->saved_floats_per_sample(nd) : 0);
		TEST_CHECK(nd->flops == 2.0 * 7 * 7 * 16, "attention: %g FLOPs per sample", nd->flops);
		dnn_graph_free(&g);
	}
}

/* seq shapes (N, 3C, T): T in {1, 5, 17, 64, 65, 130} (130 crosses two 64-token tiles), heads 1, 2,
 * 4, D = C / heads in {4, 16, 64}, 1-3 chunks */
#define ATT(N, L, T, keys, chunks) {N, L, T, 1, keys, chunks, 0, 1}
static const h_shape attention_unit[] = {
	ATT(1, 12, 1, "heads=1", 0),    ATT(2, 24, 5, "heads=2", 2),    ATT(3, 192, 17, "heads=4", 3),
	ATT(2, 192, 64, "heads=1", 2),  ATT(1, 96, 65, "heads=2", 0),   ATT(2, 384, 130, "heads=2", 2),
	ATT(3, 48, 130, "heads=4", 3),  ATT(1, 768, 130, "heads=4", 0),
};
static const h_shape attention_grad[] = {
	ATT(1, 12, 1, "heads=1", 0),   ATT(2, 24, 5, "heads=2", 2),   ATT(3, 48, 17, "heads=4", 3),
	ATT(1, 48, 64, "heads=1", 0),  ATT(2, 96, 130, "heads=2", 2), ATT(1, 192, 17, "heads=1", 0),
	ATT(2, 192, 70, "heads=4", 2),
};
static const h_shape attention_gpu[] = {
	ATT(1, 12, 1, "heads=1", 0),   ATT(2, 24, 5, "heads=2", 2),    ATT(3, 192, 17, "heads=4", 3),
	ATT(2, 384, 130, "heads=2", 2), ATT(2, 2304, 256, "heads=12", 2),
};
/* ------------------------------------------------------------------ embed, lm_head */

/* embed: its placeholder is the net's token input (ids in [0, vocab)); y = wte[id] + wpe[t]. */
static int embed_net(const h_shape *s, char *buf, size_t len)
{
	return snprintf(buf, len, "input d0 tokens %d\nembed t d0 %s\n", s->H, s->keys);
}

static void ref_embed(const h_ref_args *a, double *y)
{
	const int T = a->nd->H, C = a->nd->C;
	for (size_t r = 0; r < (size_t)a->n * T; r++)
		for (int c = 0; c < C; c++)
			y[r * C + c] = a->w[0][(size_t)a->x[0][r] * C + c] + a->w[1][(r % T) * C + c];
}

/* (N, dim, T) with "vocab=V dim=C": ids repeated (V small), V = 1, T = 1, more rows than V x T */
static const h_shape embed_unit[] = {{1, 1, 1, 1, "vocab=1 dim=1", 0, 0, 1},   {2, 8, 5, 1, "vocab=3 dim=8", 0, 0, 1},
				     {3, 33, 17, 1, "vocab=50 dim=33", 2, 0, 1}, {4, 16, 64, 1, "vocab=7 dim=16", 3, 0, 1},
				     {6, 5, 1, 1, "vocab=9 dim=5", 0, 0, 1}};
static const h_shape embed_grad[] = {{2, 4, 3, 1, "vocab=5 dim=4", 0, 0, 1}, {5, 3, 4, 1, "vocab=4 dim=3", 3, 0, 1},
				     {4, 2, 2, 1, "vocab=2 dim=2", 4, 0, 1}};
static const h_shape embed_gpu[] = {{1, 1, 1, 1, "vocab=1 dim=1", 0, 0, 1}, {8, 64, 32, 1, "vocab=11 dim=64", 2, 0, 1},
				    {4, 200, 128, 1, "vocab=1000 dim=200", 2, 0, 1},
				    {8, 256, 256, 1, "vocab=5000 dim=256", 3, 0, 1}};

/* lm_head: its placeholder d0 is a sequence [T][C] after an embed e (keys: e's), whose table is
 * the parameter the harness sets and checks (slot 0 wte; wpe must get no gradient from it). */
static int lm_head_net(const h_shape *s, char *buf, size_t len)
{
	return snprintf(buf, len, "input x tokens %d\nembed e x %s\ndropout d0 e p=0\nlm_head t d0,e\n", s->H, s->keys);
}

static void ref_lm_head(const h_ref_args *a, double *y)
{
	const int V = a->nd->C, C = a->in->C;
	for (size_t r = 0; r < (size_t)a->n * a->in->H; r++)
		for (int v = 0; v < V; v++) {
			double s = 0;
			for (int c = 0; c < C; c++)
				s += a->x[0][r * C + c] * a->w[0][(size_t)v * C + c];
			y[r * V + v] = s;
		}
}

static void ref_lm_head_bwd(const h_ref_args *a, const double *dy, double *dx)
{
	const int V = a->nd->C, C = a->in->C;
	for (size_t r = 0; r < (size_t)a->n * a->in->H; r++)
		for (int c = 0; c < C; c++) {
			double s = 0;
			for (int v = 0; v < V; v++)
				s += dy[r * V + v] * a->w[0][(size_t)v * C + c];
			dx[r * C + c] = s;
		}
}

/* (N, dim, T) with the embed's "vocab=V dim=C" */
static const h_shape lm_head_unit[] = {{1, 1, 1, 1, "vocab=2 dim=1", 0, 0, 1}, {3, 8, 5, 1, "vocab=11 dim=8", 0, 0, 1},
				       {4, 16, 7, 1, "vocab=33 dim=16", 3, 0, 1}};
static const h_shape lm_head_grad[] = {{2, 4, 3, 1, "vocab=5 dim=4", 0, 0, 1}, {3, 3, 2, 1, "vocab=7 dim=3", 3, 0, 1}};
static const h_shape lm_head_gpu[] = {{4, 64, 32, 1, "vocab=500 dim=64", 2, 0, 1},
				      {2, 128, 64, 1, "vocab=5000 dim=128", 2, 0, 1}};

/* ------------------------------------------------------------------ the table */

const h_op h_ops[] = {
	{.op = "leaky_relu", .ninputs = 1, .ref = ref_leaky_relu, .ref_bwd = ref_leaky_relu_bwd, .fill = fill_leaky_relu,
	 .fwd = {H_REL, 1.2e-7}, .bwd = {H_TERMS, 1.2e-7}, .grad = {H_TERMS, 1e-6}, .gpu = {H_TERMS, 1e-6},
	 .fd_eps = 1e-3, .dy_min = 0.05, .gpu_vs_ref = 1, SHAPES(leaky_unit, leaky_grad, leaky_gpu),
	 .extra = {extra_leaky_relu_unit}, .seed = {31, 1234, 4242},
	 /* after a conv (alpha=0.1), after a batchnorm (the default 0.01), after a dense layer (a
	  * 2-D value, alpha=0.2): the LeakyRelu nodes carry the three alphas */
	 .onnx_net = "conv c1 x out=8 k=3 pad=1 bias=1\nleaky_relu l1 c1 alpha=0.1\nmaxpool p1 l1 k=2\n"
		     "conv c2 p1 out=8 k=3 pad=1\nbatchnorm b2 c2\nleaky_relu l2 b2\nadd a2 l2,p1\navgpool g a2\n"
		     "dense f1 g out=16\nleaky_relu l3 f1 alpha=0.2\ndense f2 l3 out=10\nsoftmax_xent loss f2\n",
	 .onnx_py = "import sys, onnx\n"
		    "m = onnx.load(sys.argv[1])\n"
		    "got = {n.name: [a.f for a in n.attribute if a.name == 'alpha'] for n in m.graph.node if n.op_type == 'LeakyRelu'}\n"
		    "want = {'l1': 0.1, 'l2': 0.01, 'l3': 0.2}\n"
		    "assert sorted(got) == sorted(want), got\n"
		    "for k, v in want.items():\n"
		    "    assert len(got[k]) == 1 and abs(got[k][0] - v) < 1e-7, (k, got[k], v)\n"
		    "print('LeakyRelu nodes:', {k: round(v[0], 7) for k, v in got.items()})\n"},
	{.op = "relu", .ninputs = 1, .ref = ref_relu, .ref_bwd = ref_relu_bwd, .fill = fill_relu, .fwd = {H_MIXED, 0},
	 .bwd = {H_TERMS, 1.2e-7}, .grad = {H_MIXED, 1e-4}, .gpu = {H_MIXED, 1e-4}, .fd_eps = 1e-4,
	 SHAPES(relu_unit, relu_grad, relu_gpu)},
	{.op = "add", .ninputs = 2, .ref = ref_add, .fwd = {H_MIXED, 1e-7}, .grad = {H_MIXED, 1e-4},
	 .gpu = {H_MIXED, 1e-4}, .fd_eps = 1e-4, SHAPES(add_unit, add_grad, add_gpu)},
	/* y = x + x: the same tensor feeds both inputs, its gradient is the sum of the two terms */
	{.op = "add", .ninputs = 2, .fanout = 1, .ref = ref_add, .fwd = {H_MIXED, 1e-7}, .grad = {H_MIXED, 1e-4},
	 .gpu = {H_MIXED, 1e-4}, .fd_eps = 1e-4, .shapes = {none, add_grad, none}, .nshapes = {0, NS(add_grad), 0}},
	{.op = "avgpool", .ninputs = 1, .ref = ref_avgpool, .fwd = {H_MIXED, 1e-6}, .grad = {H_MIXED, 1e-4},
	 .gpu = {H_MIXED, 1e-4}, .fd_eps = 1e-4, SHAPES(avgpool_unit, avgpool_grad, avgpool_gpu)},
	{.op = "dense", .ninputs = 1, .ref = ref_dense, .fwd = {H_MIXED, 1e-5}, .grad = {H_MIXED, 1e-4},
	 .gpu = {H_MIXED, 1e-4}, .fd_eps = 1e-4, SHAPES(dense_unit, dense_grad, dense_gpu),
	 .extra = {h_extra_dense_bf16, NULL, h_extra_dense_bf16_gpu}},
	{.op = "softmax_xent", .ninputs = 1, .is_loss = 1, .ref = ref_softmax_xent, .ref_bwd = ref_softmax_xent_bwd,
	 .fill = fill_softmax_xent, .fwd = {H_MIXED, 1e-5}, .bwd = {H_MIXED, 1e-6}, .grad = {H_MIXED, 1e-4},
	 .gpu = {H_MIXED, 1e-4}, .fd_eps = 1e-4, SHAPES(xent_unit, xent_grad, xent_gpu)},
	{.op = "maxpool", .ninputs = 1, .ref = ref_maxpool, .fill = fill_maxpool, .fwd = {H_MIXED, 0},
	 .grad = {H_MIXED, 1e-5}, .gpu = {H_MIXED, 1e-6}, .gpu_y_exact = 1, .fd_eps = 1e-3, .nvariants = 2,
	 .set_variant = maxpool_variant, .extra = {extra_maxpool_unit, NULL, extra_pool_bn_gpu}, .seed = {7, 11, 23}, .variants_same_bits = 1,
	 SHAPES(maxpool_unit, maxpool_grad, maxpool_gpu)},
	{.op = "batchnorm", .ninputs = 1, .ref = ref_batchnorm, .fill = fill_batchnorm, .fill_param = fill_bn_param,
	 .fwd = {H_MIXED, 2e-5}, .grad = {H_MIXED, 1e-4}, .gpu = {H_MIXED, 2e-4}, .fd_eps = 1e-4, .nvariants = 2,
	 .set_variant = batchnorm_variant, .variants_same_bits = 1, SHAPES(bn_unit, bn_grad, bn_gpu),
	 .extra = {extra_batchnorm_unit, extra_batchnorm_grad}, .seed = {7, 11, 23}},
	{.op = "conv", .ninputs = 1, .ref = ref_conv, .fwd = {H_MIXED, 1e-4}, .grad = {H_MIXED, 1e-4},
	 .gpu = {H_MIXED, 5e-3}, .fd_eps = 1e-3, .fd_points = 120, .nvariants = 7, .set_variant = conv_variant,
	 SHAPES(conv_unit, conv_grad, conv_gpu), .extra = {extra_conv_unit, extra_conv_grad}, .seed = {1234, 777}},
	{.op = "dropout", .ninputs = 1, .gpu = {H_MIXED, 1e-6}, .shapes = {none, none, dropout_gpu},
	 .nshapes = {0, 0, NS(dropout_gpu)}, .extra = {extra_dropout_unit}, .seed = {7},
	 /* eval mode: the identity, an Identity node */
	 .onnx_net = "conv c1 x out=4 k=3 pad=1 bias=1\nrelu r1 c1\ndropout d1 r1 p=0.3\nmaxpool p1 d1 k=2\n"
		     "dense f1 p1 out=16\ndropout d2 f1 p=0.5\ndense f2 d2 out=10\nsoftmax_xent loss f2\n",
	 .onnx_py = "import sys, onnx\n"
		    "m = onnx.load(sys.argv[1])\n"
		    "ids = sorted(n.name for n in m.graph.node if n.op_type == 'Identity')\n"
		    "assert ids == ['d1', 'd2'], ids\n"
		    "print('Identity nodes:', ids)\n"},
	{.op = "layernorm", .ninputs = 1, .ref = ref_layernorm, .ref_bwd = ref_layernorm_bwd, .fill = fill_layernorm,
	 .fill_param = fill_bn_param, .fwd = {H_MIXED, 1e-6}, .bwd = {H_MIXED, 2e-6}, .grad = {H_MIXED, 5e-6},
	 .gpu = {H_MIXED, 2e-6}, .fd_eps = 1e-4, .gpu_vs_ref = 1, SHAPES(ln_unit, ln_grad, ln_gpu),
	 .extra = {extra_layernorm_unit, NULL, extra_layernorm_gpu}, .seed = {41, 43, 47},
	 /* after dense layers (2-D values: LayerNormalization over the last axis), eps default and 1e-3 */
	 .onnx_net = "dense f1 x out=32\nlayernorm ln1 f1\nrelu r1 ln1\ndense f2 r1 out=16\nlayernorm ln2 f2 eps=1e-3\n"
		     "dense f3 ln2 out=10\nsoftmax_xent loss f3\n",
	 .onnx_py = "import sys, onnx\n"
		    "m = onnx.load(sys.argv[1])\n"
		    "got = {n.name: {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}\n"
		    "       for n in m.graph.node if n.op_type == 'LayerNormalization'}\n"
		    "assert sorted(got) == ['ln1', 'ln2'], got\n"
		    "for k, eps in (('ln1', 1e-5), ('ln2', 1e-3)):\n"
		    "    assert got[k]['axis'] == -1 and abs(got[k]['epsilon'] - eps) < 1e-9, (k, got[k])\n"
		    "print('LayerNormalization nodes:', got)\n"},
	{.op = "gelu", .ninputs = 1, .ref = ref_gelu, .ref_bwd = ref_gelu_bwd, .fill = fill_gelu, .fwd = {H_MIXED, 4e-7},
	 .bwd = {H_MIXED, 1e-6}, .grad = {H_MIXED, 2e-6}, .gpu = {H_MIXED, 2e-6}, .fd_eps = 1e-3, .gpu_vs_ref = 1,
	 .nvariants = 2, .set_variant = gelu_variant,
	 SHAPES(gelu_unit, gelu_grad, gelu_gpu), .extra = {extra_gelu_unit}, .seed = {53, 59, 61},
	 /* after a conv (4-D) and after a dense layer (2-D): the tanh formula as nodes */
	 .onnx_net = "conv c1 x out=4 k=3 pad=1 bias=1\ngelu g1 c1\nmaxpool p1 g1 k=2\ndense f1 p1 out=16\n"
		     "gelu g2 f1\ndense f2 g2 out=10\nsoftmax_xent loss f2\n",
	 /* g2's nodes, cut out of the model into one of their own, against the formula in double */
	 .onnx_py = "import sys, onnx, numpy as np, onnxruntime as ort\n"
		    "from onnx import helper, TensorProto\n"
		    "m = onnx.load(sys.argv[1])\n"
		    "ops = [n.op_type for n in m.graph.node]\n"
		    "assert ops.count('Tanh') == 2 and 'Gelu' not in ops, ops\n"
		    "nodes = [n for n in m.graph.node if n.name == 'g2' or n.name.startswith('g2.')]\n"
		    "inits = [t for t in m.graph.initializer if t.name.startswith('g2.')]\n"
		    "src = {i for n in nodes for i in n.input if i != 'g2' and not i.startswith('g2.')}\n"
		    "assert src == {'f1'}, src\n"
		    "vi = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [None])\n"
		    "sub = helper.make_model(helper.make_graph(nodes, 'gelu', [vi('f1')], [vi('g2')], inits),\n"
		    "                        opset_imports=[helper.make_opsetid('', 17)])\n"
		    "sub.ir_version = m.ir_version\n"
		    "x = np.linspace(-8, 8, 4001).astype(np.float32)\n"
		    "s = ort.InferenceSession(sub.SerializeToString(), providers=['CPUExecutionProvider'])\n"
		    "y = s.run(None, {'f1': x})[0].astype(np.float64)\n"
		    "d = x.astype(np.float64)\n"
		    "want = 0.5 * d * (1 + np.tanh(np.sqrt(2 / np.pi) * (d + 0.044715 * d ** 3)))\n"
		    "err = float(np.max(np.abs(y - want) / np.maximum(1, np.abs(want))))\n"
		    "assert err < 1e-6, err\n"
		    "print('gelu: %d nodes (Tanh x2 in the model), the formula within %.2g on [-8, 8]' % (len(nodes), err))\n"},
	{.op = "attention", .ninputs = 1, .ref = ref_attention, .ref_bwd = ref_attention_bwd, .fill = fill_attention,
	 .fwd = {H_MIXED, 1e-5}, .bwd = {H_MIXED, 1e-5}, .grad = {H_MIXED, 1e-5}, .gpu = {H_MIXED, 5e-3}, .fd_eps = 1e-3,
	 .fd_points = 150, .nvariants = 2, .set_variant = attention_variant,
	 SHAPES(attention_unit, attention_grad, attention_gpu), .extra = {extra_attention_unit_all}, .seed = {5, 6, 7}},
	/* y = wte[id] + wpe[t] is one float add: exact; the backward adds each gradient row in token
	 * order on both devices (embed.h): CUDA gives the CPU's bits */
	{.op = "embed", .ninputs = 1, .net = embed_net, .ref = ref_embed, .fwd = {H_EXACT, 0}, .grad = {H_MIXED, 1e-4},
	 .gpu = {H_MIXED, 0}, .gpu_y_exact = 1, .fd_eps = 1e-3, SHAPES(embed_unit, embed_grad, embed_gpu),
	 .seed = {43, 44, 45}},
	{.op = "lm_head", .ninputs = 1, .net = lm_head_net, .param_node = "e", .ref = ref_lm_head,
	 .ref_bwd = ref_lm_head_bwd, .fwd = {H_MIXED, 1e-5}, .bwd = {H_MIXED, 1e-5}, .grad = {H_MIXED, 1e-4},
	 .gpu = {H_MIXED, 1e-4}, .fd_eps = 1e-3, SHAPES(lm_head_unit, lm_head_grad, lm_head_gpu), .seed = {46, 47, 48}},
};
const int h_nops = NS(h_ops);
