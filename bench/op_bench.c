/* op_bench — single-core throughput of the CPU kernels, as a share of single-core sgemm.
 *
 * Measures cblas_sgemm (256 x 1024 x 1152, one OpenBLAS thread), then each op's kernels at the
 * shapes of a reference net (ResNet-20 on CIFAR for conv2d; the classifier layers of ResNet-20,
 * LeNet-5 and a wide MLP for dense), calling the plain kernel functions
 * directly: no StarPU, no task overhead. The memory-bound ops (batch norm, relu, residual add, at
 * ResNet-20's activation shapes) are rated in GB/s of their minimal traffic (each tensor read or
 * written once) against a memcpy of the same tensor size timed the same way, the best a
 * streaming kernel can hope for at that size. Each measurement is the best of --reps runs, timed by
 * the wall clock or (--clock cpu) by the thread's CPU time, which a busy shared machine disturbs
 * less. Prints a markdown table.
 *
 * Adding an op: write a `static void bench_<op>(const bench_opts *o)` that calls bench_row() for
 * each (shape, phase) and add it to the `ops` table at the bottom.
 */
#include <cblas.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "add.h"
#include "attention.h"
#include "batchsum.h"
#include "batchnorm.h"
#include "batchnorm_simd.h"
#include "conv2d.h"
#include "conv2d_winograd.h"
#include "cpu_kernels.h"
#include "dense.h"
#include "gemm_bf16.h"
#include "relu.h"
#include "knobs.h"

void openblas_set_num_threads(int num_threads);

typedef struct {
	int batch;
	int reps;
	int nalgos;                 // conv algorithms to run side by side (0: the default choice)
	dnn_conv_algo algos[4];
	const char *algo_names[4];
	int simd_off;               // --simd off: Winograd GEMMs in AVX2, batch norm's portable loops
	int nprec;                  // --precision: conv2d and dense in each of these side by side (0 fp32, 1 bf16)
	int prec[2];
} bench_opts;

/* Rows are kept and printed at the end, once the reference sgemm rate is final. */
#define MAX_ROWS 512
static struct {
	char op[16], shape[64], phase[32];
	double flops, seconds;
	double bytes, copy_seconds; // memory-bound rows (flops = 0): traffic, and a memcpy's time at that size
} rows[MAX_ROWS];
static int nrows;

static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now(void)
{
	struct timespec t;
	clock_gettime(bench_clock, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Best wall time of `reps` calls of fn(ctx), after one untimed warm-up call. */
static double best_time(void (*fn)(void *), void *ctx, int reps)
{
	fn(ctx);
	double best = 1e30;
	for (int i = 0; i < reps; i++) {
		double t = now();
		fn(ctx);
		t = now() - t;
		if (t < best)
			best = t;
	}
	return best;
}

static float *alloc_uniform(size_t n)
{
	float *p = malloc(n * sizeof(float));
	if (!p) {
		fprintf(stderr, "error: out of memory (%zu floats)\n", n);
		exit(1);
	}
	unsigned s = 12345;
	for (size_t i = 0; i < n; i++) {
		s = s * 1103515245u + 12345u;
		p[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
	}
	return p;
}

static void bench_row(const char *op, const char *shape, const char *phase, double flops,
		      double seconds)
{
	if (nrows == MAX_ROWS) {
		fprintf(stderr, "error: more than %d benchmark rows\n", MAX_ROWS);
		exit(1);
	}
	snprintf(rows[nrows].op, sizeof(rows[nrows].op), "%s", op);
	snprintf(rows[nrows].shape, sizeof(rows[nrows].shape), "%s", shape);
	snprintf(rows[nrows].phase, sizeof(rows[nrows].phase), "%s", phase);
	rows[nrows].flops = flops;
	rows[nrows].seconds = seconds;
	rows[nrows].bytes = rows[nrows].copy_seconds = 0;
	nrows++;
}

/* A memory-bound row: `bytes` of minimal traffic in `seconds`; copy_seconds: a memcpy moving as
 * many bytes (half read, half written) at the same tensor size. */
static void bench_row_mem(const char *op, const char *shape, const char *phase, double bytes,
			  double seconds, double copy_seconds)
{
	bench_row(op, shape, phase, 0, seconds);
	rows[nrows - 1].bytes = bytes;
	rows[nrows - 1].copy_seconds = copy_seconds;
}

/* ------------------------------------------------------------------ sgemm */

typedef struct {
	int M, N, K;
	float *A, *B, *C;
} sgemm_ctx;

static void run_sgemm(void *p)
{
	sgemm_ctx *c = p;
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c->M, c->N, c->K, 1.0f, c->A, c->K,
		    c->B, c->N, 0.0f, c->C, c->N);
}

static double measure_sgemm_at(int M, int N, int K, int reps)
{
	sgemm_ctx c = {.M = M, .N = N, .K = K};
	c.A = alloc_uniform((size_t)c.M * c.K);
	c.B = alloc_uniform((size_t)c.K * c.N);
	c.C = alloc_uniform((size_t)c.M * c.N);
	/* Let the core reach its steady clock before timing: 30 calls, or 1 s of them at a big shape. */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 30; i++) {
		run_sgemm(&c);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (t1.tv_sec - t0.tv_sec + (t1.tv_nsec - t0.tv_nsec) * 1e-9 > 1.0)
			break;
	}
	double t = best_time(run_sgemm, &c, reps < 10 ? 10 : reps);
	free(c.A);
	free(c.B);
	free(c.C);
	return 2.0 * c.M * c.N * c.K / t * 1e-9;
}

static double measure_sgemm(int reps)
{
	return measure_sgemm_at(256, 1024, 1152, reps);
}

/* --sgemm M1xN1xK1,M2xN2xK2,...: only the sgemm rate at each of these shapes, one line each (a
 * framework comparison's ceiling at its own net's GEMM shapes, bench/compare_frameworks.sh --gpt). */
static int sgemm_shapes(const char *list, int reps)
{
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", list);
	int n = 0;
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), n++) {
		int M, N, K, end = 0;
		if (sscanf(t, "%dx%dx%d%n", &M, &N, &K, &end) != 3 || t[end] != '\0' || M < 1 || N < 1 || K < 1 ||
		    (double)M * K + (double)K * N + (double)M * N > 1e9) {
			fprintf(stderr, "error: --sgemm: expected MxNxK shapes (positive, under 1e9 floats in all), got '%s'\n", t);
			return 2;
		}
		printf("sgemm %dx%dx%d: %.1f GFLOP/s (one thread, best of %d)\n", M, N, K,
		       measure_sgemm_at(M, N, K, reps), reps < 10 ? 10 : reps);
	}
	if (n == 0) {
		fprintf(stderr, "error: --sgemm: no shape given\n");
		return 2;
	}
	return 0;
}

/* ------------------------------------------------------------------ conv2d */

typedef struct {
	dnn_conv2d_args a;
	float *x, *w, *y, *dy, *dx, *dw;
} conv_ctx;

static void run_conv_fwd(void *p)
{
	conv_ctx *c = p;
	dnn_conv2d_forward_cpu(c->y, c->x, c->w, &c->a);
}

static void run_conv_bwd_data(void *p)
{
	conv_ctx *c = p;
	dnn_conv2d_backward_data_cpu(c->dx, c->dy, c->w, &c->a);
}

static void run_conv_bwd_filter(void *p)
{
	conv_ctx *c = p;
	dnn_conv2d_backward_filter_cpu(c->dw, c->x, c->dy, &c->a);
}

/* A row's phase: the pass, then the algorithm (when several run) and "bf16" (under --precision bf16). */
static void phase_name(char *buf, size_t len, const char *pass, const char *algo, const bench_opts *o, int q)
{
	snprintf(buf, len, "%s%s%s%s", pass, algo ? " " : "", algo ? algo : "", o->prec[q] ? " bf16" : "");
}

static void bench_conv2d(const bench_opts *o)
{
	/* The distinct convs of ResNet-20 (CIFAR, projection shortcuts, as graph/nets/resnet20.net)
	 * and how often each occurs: 21 convs in all; then LeNet-5's two, ResNet-8's 3x3 stride-1 ones
	 * (28x28, 14x14 and 7x7: Winograd with partial tiles), its stride-2 3x3 and 1x1 shortcut convs and its
	 * one-channel stem (count 0: not in the ResNet-20 total). */
	static const struct {
		int C, H, K, R, stride, pad, count;
	} layers[] = {
		{3, 32, 16, 3, 1, 1, 1},  {16, 32, 16, 3, 1, 1, 6}, {16, 32, 32, 3, 2, 1, 1},
		{16, 32, 32, 1, 2, 0, 1}, {32, 16, 32, 3, 1, 1, 5}, {32, 16, 64, 3, 2, 1, 1},
		{32, 16, 64, 1, 2, 0, 1}, {64, 8, 64, 3, 1, 1, 5},
		{1, 28, 6, 5, 1, 2, 0},   {6, 14, 16, 5, 1, 0, 0},
		{16, 28, 16, 3, 1, 1, 0}, {32, 14, 32, 3, 1, 1, 0}, {64, 7, 64, 3, 1, 1, 0},
		{16, 28, 32, 3, 2, 1, 0}, {16, 28, 32, 1, 2, 0, 0}, {32, 14, 64, 3, 2, 1, 0},
		{32, 14, 64, 1, 2, 0, 0}, {1, 28, 16, 3, 1, 1, 0},
	};
	static void (*const fns[3])(void *) = {run_conv_fwd, run_conv_bwd_data, run_conv_bwd_filter};
	static const char *const phases[3] = {"fwd", "bwd_data", "bwd_filter"};
	/* With --conv-algo A,B: every (shape, phase) is timed under each algorithm in turn. */
	const int na = o->nalgos > 0 ? o->nalgos : 1;
	/* With --precision fp32,bf16: each algorithm in each precision, one after the other; in bf16 the forward also
	 * with y stored in bf16 ("fwd ... bf16 y", its path's rounding epilogue: the bf16 activation storage), right
	 * after the fp32-y forward of the same shape and algorithm (total_time's 4th phase). */
	double total_flops = 0, total_time[4][2][4] = {{{0}}};
	for (size_t l = 0; l < sizeof(layers) / sizeof(layers[0]); l++) {
		conv_ctx c = {.a = {.N = o->batch, .C = layers[l].C, .H = layers[l].H, .W = layers[l].H,
				    .K = layers[l].K, .R = layers[l].R, .S = layers[l].R,
				    .stride = layers[l].stride, .pad = layers[l].pad, .dilation = 1,
				    .algo = (int)dnn_knobs_get()->conv_algo}}; /* DNN_CONV_ALGO, unless --algo */
		if (dnn_conv2d_args_finish(&c.a) != 0) {
			fprintf(stderr, "error: bad conv shape in the table\n");
			exit(1);
		}
		size_t nx = (size_t)c.a.N * c.a.C * c.a.H * c.a.W;
		size_t nw = (size_t)c.a.K * c.a.C * c.a.R * c.a.S;
		size_t ny = (size_t)c.a.N * c.a.K * c.a.P * c.a.Q;
		c.x = alloc_uniform(nx);
		c.dx = alloc_uniform(nx);
		c.w = alloc_uniform(nw);
		c.dw = alloc_uniform(nw);
		c.y = alloc_uniform(ny);
		c.dy = alloc_uniform(ny);
		char shape[64];
		snprintf(shape, sizeof(shape), "N%d %dx%dx%d -> %d, %dx%d s%d", c.a.N, c.a.C, c.a.H, c.a.W,
			 c.a.K, c.a.R, c.a.S, c.a.stride);
		double flops = dnn_conv2d_flops_fwd(&c.a);
		for (int p = 0; p < 3; p++)
			for (int i = 0; i < na; i++)
				for (int q = 0; q < o->nprec; q++) {
					char phase[32];
					if (o->nalgos > 0)
						c.a.algo = (int)o->algos[i];
					c.a.bf16 = o->prec[q];
					const char *an = o->nalgos > 1 ? o->algo_names[i] : NULL;
					phase_name(phase, sizeof(phase), phases[p], an, o, q);
					double t = best_time(fns[p], &c, o->reps);
					bench_row("conv2d", shape, phase, flops, t);
					total_time[i][q][p] += layers[l].count * t;
					if (p == 0 && c.a.bf16) { /* y (ny floats) holds the ny bf16 values */
						c.a.y_bf16 = 1;
						t = best_time(fns[p], &c, o->reps);
						c.a.y_bf16 = 0;
						strcat(phase, " y");
						bench_row("conv2d", shape, phase, flops, t);
						total_time[i][q][3] += layers[l].count * t;
					}
				}
		total_flops += layers[l].count * flops;
		free(c.x);
		free(c.dx);
		free(c.w);
		free(c.dw);
		free(c.y);
		free(c.dy);
	}
	char shape[64];
	snprintf(shape, sizeof(shape), "ResNet-20, all 21 convs, N%d", o->batch);
	for (int p = 0; p < 4; p++)
		for (int i = 0; i < na; i++)
			for (int q = 0; q < o->nprec; q++) {
				char phase[32];
				const char *an = o->nalgos > 1 ? o->algo_names[i] : NULL;
				if (p == 3 && !o->prec[q])
					continue;
				phase_name(phase, sizeof(phase), phases[p < 3 ? p : 0], an, o, q);
				if (p == 3)
					strcat(phase, " y");
				bench_row("conv2d", shape, phase, total_flops, total_time[i][q][p]);
			}
}

/* ------------------------------------------------------------------ conv2d_bsum */

/* What the weight gradient costs as an exact batch sum (codelets/batchsum.h: each image's, or
 * each block of 4 or 16 images', gradient alone, added on a 128-bit fixed-point grid), against
 * the batched kernel: the distinct convs of ResNet-20 and ResNet-8, and each net's total over
 * its convs. */
typedef struct {
	dnn_conv2d_args a;
	float *x, *dy, *dw, *work;
	dnn_bsum *acc;
} bsum_ctx;

static void run_bsum_batched(void *p)
{
	bsum_ctx *c = p;
	dnn_conv2d_backward_filter_cpu(c->dw, c->x, c->dy, &c->a);
}

static void run_bsum_exact_block(bsum_ctx *c, int block)
{
	const size_t nw = (size_t)c->a.K * c->a.C * c->a.R * c->a.S;
	memset(c->acc, 0, nw * sizeof(dnn_bsum));
	dnn_conv2d_backward_filter_bsum_cpu(c->acc, c->x, c->dy, &c->a, block, c->work);
	dnn_bsum_round(c->dw, c->acc, nw);
}
static void run_bsum_exact(void *p) { run_bsum_exact_block(p, 1); }
static void run_bsum_exact4(void *p) { run_bsum_exact_block(p, 4); }
static void run_bsum_exact16(void *p) { run_bsum_exact_block(p, 16); }

/* The per-image kernel calls of run_bsum_exact, each accumulating onto dw in float: the exact
 * grid's own cost is the difference with run_bsum_exact. */
static void run_bsum_per_image(void *p)
{
	bsum_ctx *c = p;
	const size_t xs = (size_t)c->a.C * c->a.H * c->a.W, ys = (size_t)c->a.K * c->a.P * c->a.Q;
	dnn_conv2d_args one = c->a;
	one.N = 1;
	for (int n = 0; n < c->a.N; n++)
		dnn_conv2d_backward_filter_cpu(c->dw, c->x + n * xs, c->dy + n * ys, &one); // dw +=
}

static void bench_conv2d_bsum(const bench_opts *o)
{
	static const struct {
		int net, C, H, K, R, stride, pad, count; // net 0: ResNet-20 (CIFAR), 1: ResNet-8 (28x28)
	} layers[] = {
		{0, 3, 32, 16, 3, 1, 1, 1},  {0, 16, 32, 16, 3, 1, 1, 6}, {0, 16, 32, 32, 3, 2, 1, 1},
		{0, 16, 32, 32, 1, 2, 0, 1}, {0, 32, 16, 32, 3, 1, 1, 5}, {0, 32, 16, 64, 3, 2, 1, 1},
		{0, 32, 16, 64, 1, 2, 0, 1}, {0, 64, 8, 64, 3, 1, 1, 5},  {1, 1, 28, 16, 3, 1, 1, 1},
		{1, 16, 28, 16, 3, 1, 1, 2}, {1, 16, 28, 32, 3, 2, 1, 1}, {1, 16, 28, 32, 1, 2, 0, 1},
		{1, 32, 14, 32, 3, 1, 1, 1}, {1, 32, 14, 64, 3, 2, 1, 1}, {1, 32, 14, 64, 1, 2, 0, 1},
		{1, 64, 7, 64, 3, 1, 1, 1},
	};
	enum { NP = 5 };
	static void (*const fns[NP])(void *) = {run_bsum_batched, run_bsum_per_image, run_bsum_exact, run_bsum_exact4,
						run_bsum_exact16};
	static const char *const phases[NP] = {"bwd_filter", "bwd_filter per image", "bwd_filter exact",
					       "bwd_filter exact b4", "bwd_filter exact b16"};
	double total_flops[2] = {0}, total_time[2][NP] = {{0}};
	for (size_t l = 0; l < sizeof(layers) / sizeof(layers[0]); l++) {
		bsum_ctx c = {.a = {.N = o->batch, .C = layers[l].C, .H = layers[l].H, .W = layers[l].H,
				    .K = layers[l].K, .R = layers[l].R, .S = layers[l].R,
				    .stride = layers[l].stride, .pad = layers[l].pad, .dilation = 1,
				    .algo = (int)dnn_knobs_get()->conv_algo}};
		if (o->nalgos > 0)
			c.a.algo = (int)o->algos[0];
		if (dnn_conv2d_args_finish(&c.a) != 0) {
			fprintf(stderr, "error: bad conv shape in the table\n");
			exit(1);
		}
		const size_t nw = (size_t)c.a.K * c.a.C * c.a.R * c.a.S;
		c.x = alloc_uniform((size_t)c.a.N * c.a.C * c.a.H * c.a.W);
		c.dy = alloc_uniform((size_t)c.a.N * c.a.K * c.a.P * c.a.Q);
		c.dw = alloc_uniform(nw);
		c.work = alloc_uniform(nw);
		c.acc = malloc(nw * sizeof(dnn_bsum));
		if (!c.acc) {
			fprintf(stderr, "error: out of memory\n");
			exit(1);
		}
		char shape[64];
		snprintf(shape, sizeof(shape), "%s N%d %dx%dx%d -> %d, %dx%d s%d", layers[l].net ? "R8" : "R20", c.a.N,
			 c.a.C, c.a.H, c.a.W, c.a.K, c.a.R, c.a.S, c.a.stride);
		const double flops = dnn_conv2d_flops_fwd(&c.a);
		for (int p = 0; p < NP; p++) {
			const double t = best_time(fns[p], &c, o->reps);
			bench_row("conv2d_bsum", shape, phases[p], flops, t);
			total_time[layers[l].net][p] += layers[l].count * t;
		}
		total_flops[layers[l].net] += layers[l].count * flops;
		free(c.x);
		free(c.dy);
		free(c.dw);
		free(c.work);
		free(c.acc);
	}
	for (int net = 0; net < 2; net++)
		for (int p = 0; p < NP; p++) {
			char shape[64];
			snprintf(shape, sizeof(shape), "%s, all convs, N%d", net ? "ResNet-8" : "ResNet-20", o->batch);
			bench_row("conv2d_bsum", shape, phases[p], total_flops[net], total_time[net][p]);
		}
}

/* ------------------------------------------------------------------ dense */

typedef struct {
	dnn_dense_args a;
	float *x, *w, *b, *y, *dy, *dx, *dw, *db;
} dense_ctx;

static void run_dense_fwd(void *p)
{
	dense_ctx *c = p;
	dnn_dense_forward_cpu(c->y, c->x, c->w, c->b, &c->a);
}

static void run_dense_bwd_data(void *p)
{
	dense_ctx *c = p;
	dnn_dense_backward_data_cpu(c->dx, c->dy, c->w, &c->a);
}

static void run_dense_bwd_weight(void *p)
{
	dense_ctx *c = p;
	dnn_dense_backward_weight_cpu(c->dw, c->db, c->x, c->dy, &c->a);
}

static void bench_dense(const bench_opts *o)
{
	static const struct {
		const char *net;
		int in, out;
	} layers[] = {
		{"ResNet-20 fc", 64, 10}, {"LeNet-5 fc1", 400, 120}, {"LeNet-5 fc2", 120, 84},
		{"LeNet-5 fc3", 84, 10},  {"MLP", 1024, 1024},
	};
	static void (*const fns[3])(void *) = {run_dense_fwd, run_dense_bwd_data, run_dense_bwd_weight};
	static const char *const phases[3] = {"fwd", "bwd_data", "bwd_weight"};
	for (size_t l = 0; l < sizeof(layers) / sizeof(layers[0]); l++) {
		dense_ctx c = {.a = {.N = o->batch, .IN = layers[l].in, .OUT = layers[l].out}};
		size_t nx = (size_t)c.a.N * c.a.IN, nw = (size_t)c.a.OUT * c.a.IN;
		size_t ny = (size_t)c.a.N * c.a.OUT;
		c.x = alloc_uniform(nx);
		c.dx = alloc_uniform(nx);
		c.w = alloc_uniform(nw);
		c.dw = alloc_uniform(nw);
		c.b = alloc_uniform(c.a.OUT);
		c.db = alloc_uniform(c.a.OUT);
		c.y = alloc_uniform(ny);
		c.dy = alloc_uniform(ny);
		char shape[64];
		snprintf(shape, sizeof(shape), "%s, N%d %d -> %d", layers[l].net, c.a.N, c.a.IN, c.a.OUT);
		for (int p = 0; p < 3; p++)
			for (int q = 0; q < o->nprec; q++) {
				char phase[32];
				c.a.bf16 = o->prec[q];
				phase_name(phase, sizeof(phase), phases[p], NULL, o, q);
				bench_row("dense", shape, phase, dnn_dense_flops_fwd(&c.a),
					  best_time(fns[p], &c, o->reps));
			}
		free(c.x);
		free(c.dx);
		free(c.w);
		free(c.dw);
		free(c.b);
		free(c.db);
		free(c.y);
		free(c.dy);
	}
}

/* ------------------------------------------------------------------ memory-bound ops */

/* The activation shapes of ResNet-20 (graph/nets/resnet20.net) and how often each kernel runs
 * on them in one training step: per stage, the batch norms fused with the following relu (the
 * stem's and each block's first), the plain ones (each block's second, the projection
 * shortcuts), the residual adds and the relus after them. */
static const struct {
	int C, HW, bn_relu, bn, add, relu;
} act_shapes[] = {
	{16, 32 * 32, 4, 3, 3, 3},
	{32, 16 * 16, 3, 4, 3, 3},
	{64, 8 * 8, 3, 4, 3, 3},
};

typedef struct {
	dnn_batchnorm_args a;
	long n;
	float *x, *y, *dy, *dx, *yr, *saved, *gamma, *beta, *dgamma, *dbeta;
} mem_ctx;

static void run_copy(void *p)
{
	mem_ctx *c = p;
	memcpy(c->y, c->x, (size_t)c->n * sizeof(float));
}
static void run_bn_fwd(void *p)
{
	mem_ctx *c = p;
	dnn_batchnorm_forward_train_cpu(c->y, c->saved, c->x, c->gamma, c->beta, &c->a);
}
static void run_bn_bwd(void *p)
{
	mem_ctx *c = p;
	dnn_batchnorm_backward_cpu(c->dx, c->dgamma, c->dbeta, c->x, c->gamma, c->saved, c->dy, &c->a);
}
static void run_bn_relu_bwd(void *p)
{
	mem_ctx *c = p;
	dnn_batchnorm_relu_backward_cpu(c->dx, c->dgamma, c->dbeta, c->x, c->gamma, c->saved, c->dy,
					c->yr, &c->a);
}
static void run_relu_fwd(void *p)
{
	mem_ctx *c = p;
	dnn_relu_forward_cpu(c->y, c->x, c->n);
}
static void run_relu_bwd(void *p)
{
	mem_ctx *c = p;
	dnn_relu_backward_cpu(c->dx, c->yr, c->dy, c->n, 0);
}
static void run_add_fwd(void *p)
{
	mem_ctx *c = p;
	dnn_add_forward_cpu(c->y, c->x, c->dy, c->n);
}
static void run_add_bwd(void *p)
{
	mem_ctx *c = p;
	dnn_add_backward_cpu(c->dx, c->dy, c->n, 1);
}

/* kind 0: batch norm, 1: relu and add. */
static void bench_memory_ops(const bench_opts *o, int kind)
{
	static const struct {
		const char *phase;
		void (*fn)(void *);
		int relu, tensors; // the fused relu flag; tensors of n floats read or written
	} bn_phases[] = {
		{"fwd", run_bn_fwd, 0, 2},         {"fwd +relu", run_bn_fwd, 1, 2},
		{"bwd", run_bn_bwd, 0, 3},         {"bwd +relu", run_bn_relu_bwd, 1, 4},
	}, ew_phases[] = {
		{"relu fwd", run_relu_fwd, 0, 2},  {"relu bwd", run_relu_bwd, 0, 3},
		{"add fwd", run_add_fwd, 0, 3},    {"add bwd (+=)", run_add_bwd, 0, 3},
	};
	const char *op = kind == 0 ? "bn" : "eltwise";
	double tot_t[4] = {0}, tot_b[4] = {0}, tot_c[4] = {0};
	for (size_t l = 0; l < sizeof(act_shapes) / sizeof(act_shapes[0]); l++) {
		const int C = act_shapes[l].C, HW = act_shapes[l].HW;
		mem_ctx c = {.a = {.N = o->batch, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f}};
		c.n = (long)o->batch * C * HW;
		c.x = alloc_uniform((size_t)c.n), c.y = alloc_uniform((size_t)c.n);
		c.dy = alloc_uniform((size_t)c.n), c.dx = alloc_uniform((size_t)c.n);
		c.yr = alloc_uniform((size_t)c.n); /* about half positive: the relu masks keep half */
		c.saved = alloc_uniform(3 * (size_t)C), c.gamma = alloc_uniform((size_t)C);
		c.beta = alloc_uniform((size_t)C), c.dgamma = alloc_uniform((size_t)C);
		c.dbeta = alloc_uniform((size_t)C);
		for (int i = 0; i < C; i++)
			c.saved[2 * C + i] = 1.0f; /* invstd */
		char shape[64];
		snprintf(shape, sizeof(shape), "N%d %dx%d (%.1f MiB)", o->batch, C, HW, c.n * 4.0 / (1 << 20));
		const double copy = best_time(run_copy, &c, o->reps); /* 2 n floats moved */
		if (kind == 1) /* the reference itself, once per shape */
			bench_row_mem("memcpy", shape, "copy (reference)", 2.0 * c.n * sizeof(float), copy, copy);
		for (int p = 0; p < 4; p++) {
			const int relu = kind == 0 ? bn_phases[p].relu : 0;
			const int tensors = kind == 0 ? bn_phases[p].tensors : ew_phases[p].tensors;
			c.a.relu = relu;
			const double t = best_time(kind == 0 ? bn_phases[p].fn : ew_phases[p].fn, &c, o->reps);
			const double bytes = (double)tensors * c.n * sizeof(float);
			const double ct = copy * tensors / 2.0;
			bench_row_mem(op, shape, kind == 0 ? bn_phases[p].phase : ew_phases[p].phase, bytes, t, ct);
			/* times each kernel runs on this shape in a step: fwd and bwd alike */
			const int cnt = kind == 0 ? (relu ? act_shapes[l].bn_relu : act_shapes[l].bn)
					: p < 2 ? act_shapes[l].relu : act_shapes[l].add;
			tot_t[p] += cnt * t, tot_b[p] += cnt * bytes, tot_c[p] += cnt * ct;
		}
		free(c.x), free(c.y), free(c.dy), free(c.dx), free(c.yr), free(c.saved);
		free(c.gamma), free(c.beta), free(c.dgamma), free(c.dbeta);
	}
	char shape[64];
	snprintf(shape, sizeof(shape), "ResNet-20, one step, N%d", o->batch);
	for (int p = 0; p < 4; p++)
		bench_row_mem(op, shape, kind == 0 ? bn_phases[p].phase : ew_phases[p].phase, tot_b[p],
			      tot_t[p], tot_c[p]);
	if (kind == 1) { /* a copy far beyond the caches: the memory bandwidth one core gets */
		mem_ctx c = {.n = 16L << 20};
		c.x = alloc_uniform((size_t)c.n), c.y = alloc_uniform((size_t)c.n);
		const double t = best_time(run_copy, &c, o->reps < 5 ? o->reps : 5);
		bench_row_mem("memcpy", "64 MiB (beyond the caches)", "copy (reference)", 2.0 * c.n * sizeof(float), t, t);
		free(c.x), free(c.y);
	}
}

static void bench_bn(const bench_opts *o) { bench_memory_ops(o, 0); }

/* Batch norm's kernels with the bf16 activation storage (--precision bf16): x (its input, a conv's output) and y
 * (the fused relu's output) each fp32 or bf16, at ResNet-20's shapes; the phases as "bn" (fwd, bwd plain; fwd +relu,
 * bwd +relu fused), the storage in the phase's name (x32 y16: x fp32, y bf16). Bytes: each tensor once at its
 * element size. The last rows: one training step's sum over the shapes (each kernel times its count). */
static void bench_bn_bf16(const bench_opts *o)
{
	static const struct {
		const char *phase;
		void (*fn)(void *);
		int relu, bwd;
	} ph[] = {{"fwd", run_bn_fwd, 0, 0}, {"fwd +relu", run_bn_fwd, 1, 0}, {"bwd", run_bn_bwd, 0, 1},
		  {"bwd +relu", run_bn_relu_bwd, 1, 1}};
	enum { NPH = 4, NST = 4 };
	double tot_t[NPH][NST] = {{0}}, tot_b[NPH][NST] = {{0}}, tot_c[NPH][NST] = {{0}};
	for (size_t l = 0; l < sizeof(act_shapes) / sizeof(act_shapes[0]); l++) {
		const int C = act_shapes[l].C, HW = act_shapes[l].HW;
		mem_ctx c = {.a = {.N = o->batch, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f}};
		c.n = (long)o->batch * C * HW;
		float *x32 = alloc_uniform((size_t)c.n), *yr32 = alloc_uniform((size_t)c.n);
		uint16_t *x16 = malloc((size_t)c.n * 2), *yr16 = malloc((size_t)c.n * 2);
		c.y = alloc_uniform((size_t)c.n); /* fp32 y, or room for a bf16 one */
		c.dy = alloc_uniform((size_t)c.n), c.dx = alloc_uniform((size_t)c.n);
		c.saved = alloc_uniform(3 * (size_t)C), c.gamma = alloc_uniform((size_t)C);
		c.beta = alloc_uniform((size_t)C), c.dgamma = alloc_uniform((size_t)C);
		c.dbeta = alloc_uniform((size_t)C);
		if (!x16 || !yr16) {
			fprintf(stderr, "error: out of memory\n");
			exit(1);
		}
		dnn_bf16_convert(x16, x32, (size_t)c.n);
		dnn_bf16_convert(yr16, yr32, (size_t)c.n);
		for (int i = 0; i < C; i++)
			c.saved[2 * C + i] = 1.0f; /* invstd */
		char shape[64];
		snprintf(shape, sizeof(shape), "N%d %dx%d (%.1f MiB fp32)", o->batch, C, HW, c.n * 4.0 / (1 << 20));
		c.x = x32;
		const double copy = best_time(run_copy, &c, o->reps); /* 2 n floats moved */
		for (int p = 0; p < NPH; p++)
			for (int st = 0; st < NST; st++) {
				const int xb = st >> 1, yb = st & 1;
				if (yb && !ph[p].relu)
					continue; /* a bf16 y only where the relu is fused (the plan's rule) */
				c.a.relu = ph[p].relu, c.a.x_bf16 = xb, c.a.y_bf16 = yb;
				c.x = xb ? (float *)(void *)x16 : x32;
				c.yr = yb ? (float *)(void *)yr16 : yr32;
				const double t = best_time(ph[p].fn, &c, o->reps);
				/* minimal traffic: fwd x, y; bwd x, dy, dx (+ y's mask) */
				const double xs = xb ? 2 : 4, ys = yb ? 2 : 4;
				const double bytes = c.n * (ph[p].bwd ? xs + 8 + (ph[p].relu ? ys : 0) : xs + ys);
				const double ct = copy * bytes / (2.0 * c.n * sizeof(float));
				char name[32];
				snprintf(name, sizeof(name), "%s x%d y%d", ph[p].phase, xb ? 16 : 32, yb ? 16 : 32);
				bench_row_mem("bn-bf16", shape, name, bytes, t, ct);
				const int cnt = ph[p].relu ? act_shapes[l].bn_relu : act_shapes[l].bn;
				tot_t[p][st] += cnt * t, tot_b[p][st] += cnt * bytes, tot_c[p][st] += cnt * ct;
			}
		c.a.x_bf16 = c.a.y_bf16 = 0;
		free(x32), free(yr32), free(x16), free(yr16), free(c.y), free(c.dy), free(c.dx), free(c.saved);
		free(c.gamma), free(c.beta), free(c.dgamma), free(c.dbeta);
	}
	char shape[64];
	snprintf(shape, sizeof(shape), "ResNet-20, one step, N%d", o->batch);
	for (int p = 0; p < NPH; p++)
		for (int st = 0; st < NST; st++) {
			if ((st & 1) && !ph[p].relu)
				continue;
			char name[32];
			snprintf(name, sizeof(name), "%s x%d y%d", ph[p].phase, st >> 1 ? 16 : 32, st & 1 ? 16 : 32);
			bench_row_mem("bn-bf16", shape, name, tot_b[p][st], tot_t[p][st], tot_c[p][st]);
		}
}
static void bench_eltwise(const bench_opts *o) { bench_memory_ops(o, 1); }

/* ------------------------------------------------------------------ attention */

typedef struct {
	dnn_attention_args a;
	float *qkv, *y, *lse, *dy, *dqkv, *scratch;
	uint16_t *yh; /* y stored in bf16 (a.y_bf16: the bf16 activation storage) */
} attention_ctx;

static void run_attention_fwd(void *p)
{
	attention_ctx *c = p;
	dnn_attention_forward_cpu(c->a.y_bf16 ? (void *)c->yh : c->y, c->lse, c->qkv, &c->a, c->scratch);
}

static void run_attention_bwd(void *p)
{
	attention_ctx *c = p;
	dnn_attention_backward_cpu(c->dqkv, c->qkv, c->a.y_bf16 ? (const void *)c->yh : c->y, c->dy, c->lse, &c->a,
				   c->scratch);
}

/* GPT-2-like heads (D = 64; also D = 32 and 16) at T = 256 and 1024, and gpt-nano's (T 128, D 32),
 * one sample (batch 1: the rate is per (sample, head) and T; --batch does not apply). GFLOP/s count
 * the causal half of the products (dnn_attention_flops_fwd/bwd): the tiles on the diagonal compute
 * some more. Under --precision bf16 also with y stored in bf16 ("bf16 y": the activation storage). */
static void bench_attention(const bench_opts *o)
{
	static const int shapes[][3] = {{256, 64, 1}, {1024, 64, 1}, {1024, 768, 12}, {1024, 32, 1}, {1024, 16, 1},
					{128, 128, 4}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		attention_ctx c = {.a = {.N = 1, .T = shapes[s][0], .C = shapes[s][1], .H = shapes[s][2], .save_lse = 1}};
		const size_t tok = (size_t)c.a.T;
		c.qkv = alloc_uniform(tok * 3 * c.a.C);
		c.dqkv = alloc_uniform(tok * 3 * c.a.C);
		c.y = alloc_uniform(tok * c.a.C);
		c.dy = alloc_uniform(tok * c.a.C);
		c.lse = alloc_uniform(tok * c.a.H);
		c.scratch = alloc_uniform(dnn_attention_scratch_floats(c.a.T, c.a.C / c.a.H));
		for (size_t i = 0; i < tok * 3 * c.a.C; i++)
			c.qkv[i] *= 8.0f; /* scores of a few units, as trained heads have */
		char shape[64];
		snprintf(shape, sizeof(shape), "T%d C%d H%d (D%d), causal", c.a.T, c.a.C, c.a.H, c.a.C / c.a.H);
		c.yh = malloc(tok * c.a.C * sizeof(uint16_t));
		if (c.yh)
			dnn_bf16_convert(c.yh, c.y, tok * c.a.C);
		for (int q = 0; q < o->nprec; q++)
			for (int yb = 0; yb <= (o->prec[q] && c.yh); yb++) {
				char ph[32];
				c.a.bf16 = o->prec[q], c.a.y_bf16 = yb;
				phase_name(ph, sizeof(ph), "fwd", NULL, o, q);
				if (yb)
					strcat(ph, " y");
				bench_row("attention", shape, ph, dnn_attention_flops_fwd(&c.a),
					  best_time(run_attention_fwd, &c, o->reps));
				ph[0] = 'b', ph[1] = 'w', ph[2] = 'd';
				bench_row("attention", shape, ph, dnn_attention_flops_bwd(&c.a),
					  best_time(run_attention_bwd, &c, o->reps));
			}
		free(c.qkv), free(c.dqkv), free(c.y), free(c.dy), free(c.lse), free(c.scratch), free(c.yh);
	}
}

/* ------------------------------------------------------------------ main */

static const struct {
	const char *name;
	void (*run)(const bench_opts *o);
	int on_request; // only with --op NAME (not in the default table of docs/op_bench.md)
} ops[] = {
	{"conv2d", bench_conv2d, 0},
	{"conv2d_bsum", bench_conv2d_bsum, 0},
	{"dense", bench_dense, 0},
	{"bn", bench_bn, 0},
	{"bn-bf16", bench_bn_bf16, 1},
	{"eltwise", bench_eltwise, 0},
	{"attention", bench_attention, 0},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: dnn_op_bench [--batch N] [--reps R] [--clock wall|cpu] [--op NAME] [--conv-algo LIST]\n"
		   "                    [--simd auto|off] [--sgemm LIST]\n"
		   "                    [--precision fp32|bf16|fp32,bf16]\n"
		   "  Single-core GFLOP/s of the CPU kernels vs single-core sgemm (GB/s vs memcpy for the\n"
		   "  memory-bound ops), as a markdown table.\n"
		   "  --batch N       batch size of the benchmarked shapes (default 64)\n"
		   "  --reps R        timed runs per measurement, the best is kept (default 5)\n"
		   "  --clock C       wall (default) or cpu: the thread's CPU time\n"
		   "  --conv-algo L   conv2d under each of these CPU algorithms side by side, L a comma-separated\n"
		   "                  list of im2col, winograd, winograd4, onednn, auto (default: DNN_CONV_ALGO, else auto)\n"
		   "  --simd S        auto (default) or off: off runs the Winograd conv's GEMMs in AVX2 even on\n"
		   "                  an AVX-512 CPU and batch norm on its portable loops, the kernels before\n"
		   "                  their SIMD versions (the results are bit-identical)\n"
		   "  --precision P   fp32 (default), bf16 or fp32,bf16: conv2d, dense and attention in each, side\n"
		   "                  by side\n"
		   "                  (bf16: --precision bf16's kernels, gemm_bf16.h; needs AVX512_BF16; conv2d's\n"
		   "                  and attention's forward also with y stored in bf16, the rows ending in \"y\")\n"
		   "  --sgemm LIST    only the single-core sgemm rate at each shape of LIST, comma-separated\n"
		   "                  MxNxK (C[M x N] = A[M x K] B[K x N], row-major), one line each\n"
		   "  --op NAME       only this op (");
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		fprintf(f, "%s%s", i ? ", " : "", ops[i].name);
	fprintf(f, ")\n");
}

static int parse_int(const char *opt, const char *s, int lo, int hi)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
		fprintf(stderr, "error: %s: expected an integer in [%d, %d], got '%s'\n", opt, lo, hi, s);
		exit(2);
	}
	return (int)v;
}

int main(int argc, char **argv)
{
	bench_opts o = {.batch = 64, .reps = 5, .nprec = 1};
	char kerr[512];
	if (dnn_knobs_load(kerr, sizeof(kerr)) != 0) { /* DNN_CONV_ALGO: the default algorithm */
		fprintf(stderr, "error: %s\n", kerr);
		return 2;
	}
	const char *only = NULL, *sgemm_list = NULL;
	static const struct option longopts[] = {
		{"batch", required_argument, NULL, 'b'},
		{"reps", required_argument, NULL, 'r'},
		{"op", required_argument, NULL, 'o'},
		{"clock", required_argument, NULL, 'c'},
		{"conv-algo", required_argument, NULL, 'a'},
		{"simd", required_argument, NULL, 's'},
		{"sgemm", required_argument, NULL, 'g'},
		{"precision", required_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "b:r:o:c:a:s:g:p:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'b': o.batch = parse_int("--batch", optarg, 1, 4096); break;
		case 'r': o.reps = parse_int("--reps", optarg, 1, 1000); break;
		case 'o': only = optarg; break;
		case 'c':
			if (strcmp(optarg, "wall") == 0) {
				bench_clock = CLOCK_MONOTONIC;
			} else if (strcmp(optarg, "cpu") == 0) {
				bench_clock = CLOCK_THREAD_CPUTIME_ID;
			} else {
				fprintf(stderr, "error: --clock: expected wall or cpu, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 'a': {
			static char buf[64];
			snprintf(buf, sizeof(buf), "%s", optarg);
			o.nalgos = 0;
			for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
				static const char *const names[5] = {"auto", "im2col", "winograd", "winograd4", "onednn"};
				int k = 0;
				while (k < 5 && strcmp(t, names[k]) != 0)
					k++;
				if (k == 5 || o.nalgos == 4) {
					fprintf(stderr, "error: --conv-algo: expected up to 4 of im2col, winograd, winograd4, onednn, auto, got '%s'\n",
						optarg);
					return 2;
				}
				o.algos[o.nalgos] = (dnn_conv_algo)k; // names[] follows the enum's order
				o.algo_names[o.nalgos++] = names[k];
			}
			break;
		}
		case 's':
			if (strcmp(optarg, "off") != 0 && strcmp(optarg, "auto") != 0) {
				fprintf(stderr, "error: --simd: expected auto or off, got '%s'\n", optarg);
				return 2;
			}
			o.simd_off = strcmp(optarg, "off") == 0;
			break;
		case 'g': sgemm_list = optarg; break;
		case 'p':
			if (strcmp(optarg, "fp32") == 0 || strcmp(optarg, "bf16") == 0) {
				o.nprec = 1, o.prec[0] = optarg[0] == 'b';
			} else if (strcmp(optarg, "fp32,bf16") == 0) {
				o.nprec = 2, o.prec[0] = 0, o.prec[1] = 1;
			} else {
				fprintf(stderr, "error: --precision: expected fp32, bf16 or fp32,bf16, got '%s'\n",
					optarg);
				return 2;
			}
			if ((o.prec[0] || o.nprec == 2) && !dnn_cpu_has_bf16()) {
				fprintf(stderr, "error: --precision bf16: this CPU has no AVX512_BF16\n");
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "error: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	int found = only == NULL;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		found |= only && strcmp(only, ops[i].name) == 0;
	if (!found) {
		fprintf(stderr, "error: --op: unknown op '%s'\n", only);
		usage(stderr);
		return 2;
	}

	char kline[1024];
	if (dnn_cpu_kernels_init(argv, dnn_knobs_get()->blas_coretype, dnn_knobs_get()->blas_reexec_from, kerr,
				 sizeof(kerr)) != 0) { /* may re-execute (cpu_kernels.h) */
		fprintf(stderr, "error: %s\n", kerr);
		return 2;
	}
	dnn_cpu_kernels_describe(kline, sizeof(kline));
	openblas_set_num_threads(1);
	if (sgemm_list) {
		printf("%s\n", kline);
		return sgemm_shapes(sgemm_list, o.reps);
	}
	const int wino512 = dnn_wino_set_avx512(!o.simd_off), bn_simd = dnn_batchnorm_set_simd(!o.simd_off);
	/* The reference is measured before and after the ops and the faster kept, so that a
	 * moment of contention on a shared machine does not inflate every percentage. */
	double sgemm_before = measure_sgemm(o.reps);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (only ? strcmp(only, ops[i].name) == 0 : !ops[i].on_request)
			ops[i].run(&o);
	double sgemm_after = measure_sgemm(o.reps);
	double sgemm = sgemm_before > sgemm_after ? sgemm_before : sgemm_after;

	printf("%s\n", kline);
	printf("winograd GEMMs: %s; batch norm: %s\n", wino512 ? "avx512" : "avx2", bn_simd ? "avx2" : "portable loops");
	printf("single-core sgemm 256x1024x1152: %.1f GFLOP/s (%.1f before the ops, %.1f after; "
	       "best of %d runs each, %s clock); batch %d, best of %d runs per row\n\n",
	       sgemm, sgemm_before, sgemm_after, o.reps < 10 ? 10 : o.reps,
	       bench_clock == CLOCK_MONOTONIC ? "wall" : "thread CPU", o.batch, o.reps);
	printf("| op       | shape                              | phase               |   ms/call | GFLOP/s | %% sgemm |  GB/s | %% copy |\n");
	printf("|----------|------------------------------------|---------------------|----------:|--------:|--------:|------:|-------:|\n");
	for (int i = 0; i < nrows; i++) {
		printf("| %-8s | %-34s | %-19s | %9.3f ", rows[i].op, rows[i].shape, rows[i].phase,
		       rows[i].seconds * 1e3);
		if (rows[i].bytes > 0) { /* memory-bound: GB/s against a memcpy of the same size */
			double gb = rows[i].bytes / rows[i].seconds * 1e-9;
			printf("|         |         | %5.1f | %5.0f%% |\n", gb,
			       100.0 * rows[i].copy_seconds / rows[i].seconds);
		} else {
			double gf = rows[i].flops / rows[i].seconds * 1e-9;
			printf("| %7.1f | %6.0f%% |       |        |\n", gf, 100.0 * gf / sgemm);
		}
	}
	return 0;
}
