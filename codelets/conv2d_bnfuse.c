/* conv2d_bnfuse.c — batch norm fused into the convolutions around it (conv2d_bnfuse.h): the kernels, which
 * call the conv kernels of conv2d_algo.c and the batchnorm kernels of batchnorm.c unchanged, and their
 * codelets (CPU only). The normalised input z of a conv lives in the worker's second scratch buffer
 * (dnn_cpu_scratch_aux), because the conv kernels take the first. */
#include "conv2d_bnfuse.h"
#include "conv2d_impl.h"
#include "act_formulas.h"
#include "bn_formulas.h"

#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ kernels */

// z (n) from x (n); an AVX2 clone where the CPU has it (no FMA: the same floats as the batchnorm kernels)
__attribute__((target_clones("avx2", "default"))) void dnn_bn_relu_row(float *restrict z, const float *restrict x, int n,
								    float m, float scale, float b)
{
	for (int i = 0; i < n; i++)
		z[i] = dnn_act_relu(dnn_bn_normalise(x[i], m, scale, b));
}

/* bn (3C) = mean | scale | shift, scale as the batchnorm tasks round it: gamma times the float invstd. */
static void channel_affine(float *bn, const float *saved, const float *gamma, const float *beta, int C)
{
	for (int c = 0; c < C; c++)
		bn[c] = saved[c], bn[C + c] = gamma[c] * saved[2 * C + c], bn[2 * C + c] = beta[c];
}

// z (N, C, HW) from x (N, C, HW), saved (3C), gamma (C), beta (C)
void dnn_bn_relu_apply_cpu(float *z, const float *x, const float *saved, const float *gamma, const float *beta,
			   int N, int C, int HW)
{
	for (int n = 0; n < N; n++)
		for (int c = 0; c < C; c++)
			dnn_bn_relu_row(z + ((size_t)n * C + c) * HW, x + ((size_t)n * C + c) * HW, HW, saved[c],
					gamma[c] * saved[2 * C + c], beta[c]);
}

/* Where the conv runs as Winograd F(2x2): its input copy applies the batch norm (no normalised copy of the
 * chunk). bn_in and the row buffer in the aux scratch; NULL (error recorded) without memory. */
static float *affine_scratch(const float *saved, const float *gamma, const float *beta, const dnn_conv2d_args *c)
{
	float *bn = dnn_cpu_scratch_aux(3 * (size_t)c->C + (size_t)c->W);
	if (!bn) {
		dnn_worker_error("conv2d_bnfuse: out of memory for %d channels' normalisation", c->C);
		return NULL;
	}
	channel_affine(bn, saved, gamma, beta, c->C);
	return bn;
}

// saved (3C) from y (N, C, HW); the sums' 2C doubles in the aux scratch (free when this is called)
void dnn_bn_stats_cpu(float *saved, const float *y, const dnn_batchnorm_args *a)
{
	double *sums = (double *)dnn_cpu_scratch_aux(4 * (size_t)a->C);
	if (!sums) {
		dnn_worker_error("conv2d_bnfuse: out of memory for %d channels' sums", a->C);
		return;
	}
	/* From zero, as a chunk's partial sums of --batchnorm global start: the same doubles. */
	memset(sums, 0, 2 * (size_t)a->C * sizeof(double));
	dnn_batchnorm_sums_fwd_cpu(sums, y, a);
	dnn_batchnorm_stats_from_sums_cpu(saved, sums, a);
}

/* z = relu(bn(x)) of the conv's input in the aux scratch; NULL (error recorded) without memory. */
static float *normalised_input(const float *x, const float *saved, const float *gamma, const float *beta,
			       const dnn_conv2d_args *c)
{
	const size_t nz = (size_t)c->N * c->C * c->H * c->W;
	float *z = dnn_cpu_scratch_aux(nz);
	if (!z) {
		dnn_worker_error("conv2d_bnfuse: out of memory for %zu floats of normalised input", nz);
		return NULL;
	}
	dnn_bn_relu_apply_cpu(z, x, saved, gamma, beta, c->N, c->C, c->H * c->W);
	return z;
}

void dnn_conv2d_bn_forward_cpu(float *y, float *saved_out, const float *x, const float *w, const float *saved_in,
			       const float *gamma, const float *beta, const dnn_conv2d_bn_args *a)
{
	const dnn_conv2d_args *c = &a->conv;
	if (a->apply && dnn_conv2d_cpu_winograd_tile(c, 0) == 2) {
		float *bn = affine_scratch(saved_in, gamma, beta, c);
		if (!bn || !dnn_conv2d_forward_bnin_cpu(y, x, w, bn, bn + 3 * (size_t)c->C, c))
			return;
	} else {
		if (a->apply && !(x = normalised_input(x, saved_in, gamma, beta, c)))
			return;
		dnn_conv2d_forward_cpu(y, x, w, c);
	}
	if (a->stats) /* y is the one this task just wrote, still in the caches for a chunk of small images */
		dnn_bn_stats_cpu(saved_out, y, &a->out_bn);
}

void dnn_conv2d_bn_backward_filter_cpu(float *dw, const float *x, const float *dy, const float *saved_in,
				       const float *gamma, const float *beta, const dnn_conv2d_bn_args *a)
{
	const dnn_conv2d_args *c = &a->conv;
	if (dnn_conv2d_cpu_winograd_tile(c, 2)) {
		float *bn = affine_scratch(saved_in, gamma, beta, c);
		if (bn)
			dnn_conv2d_backward_filter_bnin_cpu(dw, x, dy, bn, bn + 3 * (size_t)c->C, c);
		return;
	}
	const float *z = normalised_input(x, saved_in, gamma, beta, c);
	if (z)
		dnn_conv2d_backward_filter_cpu(dw, z, dy, c);
}

/* g[0..n) = dy masked where relu((x - m) * scale + b) is not > 0: batchnorm.c's relu_mask (the bits of dy ANDed
 * with the compare), with the relu's output recomputed; an AVX2 clone where the CPU has it (no FMA). */
__attribute__((target_clones("avx2", "default"))) static void
masked_grad_row(float *restrict g, const float *restrict dy, const float *restrict x, int n, float m, float scale, float b)
{
	for (int i = 0; i < n; i++) {
		uint32_t bits;
		memcpy(&bits, &dy[i], sizeof(bits));
		/* relu(v) > 0 exactly where v > 0 (NaN: neither) */
		bits &= -(uint32_t)(dnn_bn_normalise(x[i], m, scale, b) > 0.0f);
		memcpy(&g[i], &bits, sizeof(bits));
	}
}

void dnn_batchnorm_relu_backward_recompute_cpu(float *dx, float *dgamma, float *dbeta, const float *x,
					       const float *gamma, const float *beta, const float *saved,
					       const float *dy, const dnn_batchnorm_args *a)
{
	const int N = a->N, C = a->C, HW = a->HW;
	float *g = dnn_cpu_scratch_aux((size_t)N * C * HW);
	if (!g) {
		dnn_worker_error("conv2d_bnfuse: out of memory for %zu floats of the masked gradient", (size_t)N * C * HW);
		return;
	}
	/* The masked gradient once, then the plain backward on it: the fused backward's g, bit for bit, and its two
	 * passes then read one tensor (g) where they read two (dy, and the relu's output for the mask). */
	for (int n = 0; n < N; n++)
		for (int c = 0; c < C; c++) {
			const size_t o = ((size_t)n * C + c) * HW;
			masked_grad_row(g + o, dy + o, x + o, HW, saved[c], gamma[c] * saved[2 * C + c], beta[c]);
		}
	dnn_batchnorm_backward_cpu(dx, dgamma, dbeta, x, gamma, saved, g, a);
}

/* ------------------------------------------------------------------ codelets */

#define NX(i) STARPU_VECTOR_GET_NX(buffers[i])
#define PTR(i) ((float *)STARPU_VECTOR_GET_PTR(buffers[i]))

static size_t x_count(const dnn_conv2d_args *c) { return (size_t)c->N * c->C * c->H * c->W; }
static size_t w_count(const dnn_conv2d_args *c) { return (size_t)c->K * c->C * c->R * c->S; }
static size_t y_count(const dnn_conv2d_args *c) { return (size_t)c->N * c->K * c->P * c->Q; }

// (R x, R w, W y[, R saved_in, R gamma, R beta][, W saved_out])
static void conv_bn_fwd_cpu(void *buffers[], void *cl_arg)
{
	const dnn_conv2d_bn_args *a = cl_arg;
	const dnn_conv2d_args *c = &a->conv;
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == (unsigned)(3 + 3 * a->apply + a->stats));
	STARPU_ASSERT(NX(0) == x_count(c) && NX(1) == w_count(c) && NX(2) == y_count(c));
	/* A bf16 x (a stored relu output) only reaches a conv that normalises nothing (its input is never a level-3
	 * batchnorm's input, a conv's fp32 output): the conv kernel reads it so (conv2d_algo.c). */
	STARPU_ASSERT(!c->x_bf16 || !a->apply);
	const float *x = dnn_conv2d_x_ptr(buffers, 0, c);
	const float *saved_in = NULL, *gamma = NULL, *beta = NULL;
	if (a->apply) {
		STARPU_ASSERT(NX(3) == 3 * (size_t)c->C && NX(4) == (size_t)c->C && NX(5) == (size_t)c->C);
		saved_in = PTR(3), gamma = PTR(4), beta = PTR(5);
	}
	float *saved_out = NULL;
	if (a->stats) {
		STARPU_ASSERT(NX(3 + 3 * a->apply) == 3 * (size_t)c->K);
		saved_out = PTR(3 + 3 * a->apply);
	}
	dnn_conv2d_bn_forward_cpu(PTR(2), saved_out, x, PTR(1), saved_in, gamma, beta, a);
}

// (R x, R dy, REDUX|RW dw, R saved_in, R gamma, R beta)
static void conv_bn_bwd_filter_cpu(void *buffers[], void *cl_arg)
{
	const dnn_conv2d_bn_args *a = cl_arg;
	const dnn_conv2d_args *c = &a->conv;
	STARPU_ASSERT(NX(0) == x_count(c) && NX(1) == y_count(c) && NX(2) == w_count(c) && NX(3) == 3 * (size_t)c->C &&
		      NX(4) == (size_t)c->C && NX(5) == (size_t)c->C);
	STARPU_ASSERT(!c->x_bf16); /* x: the batchnorm's input, a conv's fp32 output */
	dnn_conv2d_bn_backward_filter_cpu(PTR(2), PTR(0), PTR(1), PTR(3), PTR(4), PTR(5), a);
}

// (R x, R gamma, R beta, R saved, R dy, W|RW dx, REDUX|RW dgamma, REDUX|RW dbeta)
static void bn_relu_bwd_recompute_cpu(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = cl_arg;
	const size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(NX(0) == nx && NX(1) == C && NX(2) == C && NX(3) == 3 * C && NX(4) == nx && NX(5) == nx &&
		      NX(6) == C && NX(7) == C);
	dnn_batchnorm_relu_backward_recompute_cpu(PTR(5), PTR(6), PTR(7), PTR(0), PTR(1), PTR(2), PTR(3), PTR(4), a);
}

/* Hand-written rather than DNN_CODELET: no CUDA function, and none declared (unit_cuda_coverage's
 * registry), because the plan submits them only where no CUDA worker exists (graph/fuse.c). */
#define BNFUSE_CODELET(NAME, CPU_FN)                                                    \
	static struct starpu_perfmodel NAME##_model = {                                 \
		.type = STARPU_HISTORY_BASED, .symbol = "dnn_" #NAME, .footprint = dnn_args_footprint}; \
	struct starpu_codelet NAME = {.name = #NAME, .cpu_funcs = {CPU_FN}, .cpu_funcs_name = {#CPU_FN}, \
				      .nbuffers = STARPU_VARIABLE_NBUFFERS, .model = &NAME##_model}

BNFUSE_CODELET(cl_conv2d_bn_fwd, conv_bn_fwd_cpu);
BNFUSE_CODELET(cl_conv2d_bn_bwd_filter, conv_bn_bwd_filter_cpu);
BNFUSE_CODELET(cl_batchnorm_relu_bwd_recompute, bn_relu_bwd_recompute_cpu);

/* ------------------------------------------------------------------ insert helpers */

DNN_ARGS_NO_PADDING(dnn_conv2d_bn_args, sizeof(dnn_conv2d_args) + 2 * sizeof(dnn_batchnorm_args) + 2 * sizeof(int));

int dnn_insert_conv2d_bn_fwd(const dnn_task_opts *o, const dnn_conv2d_bn_args *a, starpu_data_handle_t x,
			     starpu_data_handle_t w, starpu_data_handle_t y, starpu_data_handle_t saved_in,
			     starpu_data_handle_t gamma, starpu_data_handle_t beta, starpu_data_handle_t saved_out)
{
	if (a->conv.P <= 0 || a->conv.Q <= 0 || a->conv.bias || (a->apply != 0 && a->apply != 1) ||
	    (a->stats != 0 && a->stats != 1) || !(a->apply || a->stats) || !a->apply != !saved_in || !a->stats != !saved_out)
		return -EINVAL;
	const double flops = dnn_conv2d_flops_fwd(&a->conv);
	/* The optional buffers go last, so the variable part of the list is a count of trailing pairs. */
	if (a->apply && a->stats)
		return DNN_TASK_INSERT_ARGS(o, &cl_conv2d_bn_fwd, "conv_bn_fwd", a, STARPU_R, x, STARPU_R, w, STARPU_W, y,
					    STARPU_R, saved_in, STARPU_R, gamma, STARPU_R, beta, STARPU_W, saved_out,
					    STARPU_FLOPS, flops, STARPU_TASK_COLOR, DNN_COLOR_CONV_FWD);
	if (a->apply)
		return DNN_TASK_INSERT_ARGS(o, &cl_conv2d_bn_fwd, "bn_relu_conv_fwd", a, STARPU_R, x, STARPU_R, w,
					    STARPU_W, y, STARPU_R, saved_in, STARPU_R, gamma, STARPU_R, beta,
					    STARPU_FLOPS, flops, STARPU_TASK_COLOR, DNN_COLOR_CONV_FWD);
	return DNN_TASK_INSERT_ARGS(o, &cl_conv2d_bn_fwd, "conv_bnstats_fwd", a, STARPU_R, x, STARPU_R, w, STARPU_W, y,
				    STARPU_W, saved_out, STARPU_FLOPS, flops, STARPU_TASK_COLOR, DNN_COLOR_CONV_FWD);
}

int dnn_insert_conv2d_bn_bwd_filter(const dnn_task_opts *o, const dnn_conv2d_bn_args *a, starpu_data_handle_t x,
				    starpu_data_handle_t dy, starpu_data_handle_t dw, int dw_mode,
				    starpu_data_handle_t saved_in, starpu_data_handle_t gamma, starpu_data_handle_t beta)
{
	if (a->conv.P <= 0 || a->conv.Q <= 0 || a->conv.bias || a->apply != 1 || !saved_in || !gamma || !beta)
		return -EINVAL;
	return DNN_TASK_INSERT_ARGS(o, &cl_conv2d_bn_bwd_filter, "bn_relu_conv_bwd_filter", a, STARPU_R, x, STARPU_R, dy,
				    dw_mode, dw, STARPU_R, saved_in, STARPU_R, gamma, STARPU_R, beta, STARPU_FLOPS,
				    dnn_conv2d_flops_fwd(&a->conv), STARPU_TASK_COLOR, DNN_COLOR_CONV_BWD_FILTER);
}

int dnn_insert_batchnorm_relu_bwd_recompute(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x,
					    starpu_data_handle_t gamma, starpu_data_handle_t beta,
					    starpu_data_handle_t saved, starpu_data_handle_t dy, starpu_data_handle_t dx,
					    starpu_data_handle_t dgamma, starpu_data_handle_t dbeta, int grad_mode)
{
	if (a->N < 1 || a->C < 1 || a->HW < 1 || (a->accumulate_dx != 0 && a->accumulate_dx != 1))
		return -EINVAL;
	const int dx_mode = a->accumulate_dx ? STARPU_RW : STARPU_W;
	return DNN_TASK_INSERT_ARGS(o, &cl_batchnorm_relu_bwd_recompute, "bn_relu_bwd_recompute", a, STARPU_R, x,
				    STARPU_R, gamma, STARPU_R, beta, STARPU_R, saved, STARPU_R, dy, dx_mode, dx, grad_mode, dgamma,
				    grad_mode, dbeta, STARPU_FLOPS, 10.0 * a->N * a->C * a->HW,
				    STARPU_TASK_COLOR, DNN_COLOR_BN_BWD);
}
