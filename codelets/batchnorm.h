/* batchnorm.h — batch normalisation over (N, HW) per channel, NCHW.
 *
 * Training uses the chunk's own statistics (per-chunk BN, as PyTorch DDP does per replica):
 *   saved (3C) = [mean (C) | biased var (C) | invstd (C)], invstd = 1/sqrt(var + eps)
 *   y = gamma * (x - mean) * invstd + beta
 * Running statistics (2C) = [mean (C) | unbiased var (C)] are updated by a separate small task:
 *   running = (1 - momentum) * running + momentum * batch_stat   (var made unbiased: * n/(n-1))
 * Eval mode normalises with the running statistics.
 * Backward: dgamma, dbeta += (REDUX); dx (=|+=) per accumulate_dx.
 *
 * Fused ReLU (relu = 1, graph/ops/batchnorm.c uses it when graph/fuse.c fuses the batchnorm with
 * its only consumer, a relu): the forward writes max(BN(x), 0) into y (the relu's output) in the
 * same pass; the backward takes the relu's output y and gradient dy and applies the mask
 * dy * (y > 0) before the BN backward, so the BN's own output and gradient are never materialised. */
#ifndef DNN_BATCHNORM_H
#define DNN_BATCHNORM_H
#include <starpu.h>

#include "dnn_codelet.h"

typedef struct {
	int N, C, HW;
	float eps;      // 1e-5 by default
	float momentum; // 0.1 by default
	int accumulate_dx;
	int relu;       // fused ReLU after the normalisation (see above)
	int global_n;   // --batchnorm global: samples of the global batch the sums cover (0: local)
	int y_bf16;     // 1 (with relu): the fused relu's output y is stored in bf16 (uint16_t, graph/model.h
	                // y_bf16): the forwards write it rounded as dnn_bf16_convert, the backwards read their
	                // mask from it (CPU only)
	int x_bf16;     // 1: the input x is stored in bf16 (uint16_t, graph/model.h y_bf16): every task that reads x
	                // (statistics, normalisation, the backward's x - mean) widens it exactly as it loads it, so
	                // its results are the bits of the same task on the widened fp32 x (CPU only)
} dnn_batchnorm_args;

void dnn_batchnorm_forward_train_cpu(void *y, float *saved, const void *x, const float *gamma,
				     const float *beta, const dnn_batchnorm_args *a);
void dnn_batchnorm_forward_eval_cpu(void *y, const void *x, const float *gamma, const float *beta,
				    const float *running, const dnn_batchnorm_args *a);
void dnn_batchnorm_update_running_cpu(float *running, const float *saved, const dnn_batchnorm_args *a);
void dnn_batchnorm_backward_cpu(float *dx, float *dgamma, float *dbeta, const void *x, const float *gamma,
				const float *saved, const float *dy, const dnn_batchnorm_args *a);
/* Fused backward (a->relu ignored): as dnn_batchnorm_backward_cpu with dy replaced by
 * dy * (yrelu > 0), yrelu being the fused forward's output (bf16 when a->y_bf16). The forwards' y is
 * fp32, or bf16 (uint16_t) when a->y_bf16; every kernel's x (here and below) is fp32, or bf16 (uint16_t)
 * when a->x_bf16. */
void dnn_batchnorm_relu_backward_cpu(float *dx, float *dgamma, float *dbeta, const void *x, const float *gamma,
				     const float *saved, const float *dy, const void *yrelu,
				     const dnn_batchnorm_args *a);

/* fwd_train (R x, R gamma, R beta, W y, W saved)
 * fwd_eval (R x, R gamma, R beta, R running, W y)
 * running (R saved, RW running)
 * bwd (R x, R gamma, R saved, R dy, W|RW dx, REDUX dgamma, REDUX dbeta)
 * bwd with a->relu: (R x, R gamma, R saved, RW dy, W|RW dx, REDUX dgamma, REDUX dbeta, R y): dy is
 *   the relu's gradient, y its output; dy is RW because the CUDA side masks it in place (its
 *   contents are unspecified afterwards: it must have no other reader), the CPU side leaves it. */
extern struct starpu_codelet cl_batchnorm_fwd_train, cl_batchnorm_fwd_eval, cl_batchnorm_running,
	cl_batchnorm_bwd;
int dnn_insert_batchnorm_fwd_train(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x,
				    starpu_data_handle_t gamma, starpu_data_handle_t beta,
				    starpu_data_handle_t y, starpu_data_handle_t saved);
int dnn_insert_batchnorm_fwd_eval(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x,
				   starpu_data_handle_t gamma, starpu_data_handle_t beta,
				   starpu_data_handle_t running, starpu_data_handle_t y);
int dnn_insert_batchnorm_running(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t saved,
				  starpu_data_handle_t running);
int dnn_insert_batchnorm_bwd(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x, starpu_data_handle_t gamma,
			      starpu_data_handle_t saved, starpu_data_handle_t dy, starpu_data_handle_t dx,
			      starpu_data_handle_t dgamma, starpu_data_handle_t dbeta, int grad_mode);
/* The fused backward (a->relu must be 1): dy, y = the relu's gradient and output. */
int dnn_insert_batchnorm_relu_bwd(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x, starpu_data_handle_t gamma,
				   starpu_data_handle_t saved, starpu_data_handle_t dy, starpu_data_handle_t y,
				   starpu_data_handle_t dx, starpu_data_handle_t dgamma, starpu_data_handle_t dbeta,
				   int grad_mode);

/* ---- Global statistics (--batchnorm global, graph/ops/batchnorm.c): each chunk adds its
 * per-channel sums into one handle per (node, step) (STARPU_REDUX within a process; the
 * processes' handles are then summed over the ranks), and every chunk normalises (forward) or
 * back-propagates (backward) with the sums of the whole global batch of global_n samples,
 * M = global_n * HW values per channel. The sums are doubles:
 *   fwd sums (2C) = [sum x | sum x^2]
 *   bwd sums (2C) = [sum g | sum g * (x - mean)],  g = dy (fused ReLU: dy * (y > 0))
 * and mean = S0 / M, var = S1 / M - mean^2 (biased), clamped at 0, invstd = 1/sqrt(var + eps);
 * dx = gamma * invstd * (g - B0 / M - xhat * invstd * B1 / M), xhat = (x - mean) * invstd.
 * sum x^2 is formed per image row (the HW values of one (n, c)) from the row's centred sum of
 * squares, sum (x - m_r)^2 + 2 m_r sum (x - m_r) + HW m_r^2 with m_r the row's float mean, so
 * float rounding inside a row is relative to the row's own spread, not to mean^2. Measured
 * (unit_bn_global) against two passes in double, at mean^2 / var = 1e2, 1e4, 1e6, 1e8: relative
 * variance errors 5e-9, 9e-8, 1.2e-6, 6.7e-6, where a plain float sum of x^2 per row gives 1.2e-6,
 * 2.7e-4, 2.1e-2, 0.77. Partial sums over chunks and ranks only
 * reassociate double additions, so every chunk of every rank sees the same mean and var to
 * the last float bit in practice. */
// sums (2C doubles) += [sum x | sum x^2] of x (N, C, HW)
void dnn_batchnorm_sums_fwd_cpu(double *sums, const void *x, const dnn_batchnorm_args *a);
// saved (3C) = [mean | var | invstd] from sums (2C doubles) over M = (a->global_n, or a->N when 0) * HW, as
// dnn_batchnorm_forward_global_cpu computes them (graph/fuse.c's level 3: one chunk's own sums)
void dnn_batchnorm_stats_from_sums_cpu(float *saved, const double *sums, const dnn_batchnorm_args *a);
// y, saved (3C) = [mean | var | invstd] from sums (2C doubles) over M = a->global_n * HW
void dnn_batchnorm_forward_global_cpu(void *y, float *saved, const void *x, const float *gamma,
				      const float *beta, const double *sums, const dnn_batchnorm_args *a);
// sums (2C doubles) += [sum g | sum g * (x - mean)]; dgamma += invstd * sum g (x - mean), dbeta += sum g
// (this chunk's share); yrelu: the fused relu's output (a->relu) or NULL
void dnn_batchnorm_sums_bwd_cpu(double *sums, float *dgamma, float *dbeta, const void *x, const float *saved,
				const float *dy, const void *yrelu, const dnn_batchnorm_args *a);
// dx (=|+= per a->accumulate_dx) from the global backward sums (2C doubles)
void dnn_batchnorm_backward_global_cpu(float *dx, const void *x, const float *gamma, const float *saved,
				       const float *dy, const void *yrelu, const double *sums,
				       const dnn_batchnorm_args *a);

/* sums_fwd (R x, REDUX|RW sums)
 * fwd_global (R x, R gamma, R beta, R sums, W y, W saved)
 * sums_bwd (R x, R saved, R dy, REDUX|RW sums, REDUX|RW dgamma, REDUX|RW dbeta), + (R y) when a->relu
 *   (the insert helpers' `mode`: STARPU_REDUX into one handle for all chunks, or STARPU_RW into
 *   the chunk's own partial sums, which graph/chunksum.h then adds in a fixed order)
 * bwd_global (R x, R gamma, R saved, R dy, R sums, W|RW dx), + (R y) when a->relu
 * The double vectors' REDUX methods: cl_bn_dsum_zero (W) and cl_bn_dsum_redux_add (RW|COMMUTE,
 * R); cl_bn_dsum_add is the same add with modes given at insert time (a rank's contribution
 * to a cross-rank sum, STARPU_MPI_REDUX). */
extern struct starpu_codelet cl_batchnorm_sums_fwd, cl_batchnorm_fwd_global, cl_batchnorm_sums_bwd,
	cl_batchnorm_bwd_global, cl_bn_dsum_zero, cl_bn_dsum_redux_add, cl_bn_dsum_add;
/* h (a vector of doubles) sums its REDUX contributions. */
void dnn_bn_set_dsum_redux(starpu_data_handle_t h);
int dnn_insert_bn_dsum_zero(const dnn_task_opts *o, starpu_data_handle_t dst);
int dnn_insert_bn_dsum_add(const dnn_task_opts *o, starpu_data_handle_t dst, int dst_mode, starpu_data_handle_t src);
int dnn_insert_batchnorm_sums_fwd(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x,
				   starpu_data_handle_t sums, int mode);
int dnn_insert_batchnorm_fwd_global(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x,
				     starpu_data_handle_t gamma, starpu_data_handle_t beta, starpu_data_handle_t sums,
				     starpu_data_handle_t y, starpu_data_handle_t saved);
/* y: the fused relu's output when a->relu, else NULL */
int dnn_insert_batchnorm_sums_bwd(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x,
				   starpu_data_handle_t saved, starpu_data_handle_t dy, starpu_data_handle_t y,
				   starpu_data_handle_t sums, starpu_data_handle_t dgamma, starpu_data_handle_t dbeta, int mode);
int dnn_insert_batchnorm_bwd_global(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x,
				     starpu_data_handle_t gamma, starpu_data_handle_t saved, starpu_data_handle_t dy,
				     starpu_data_handle_t y, starpu_data_handle_t sums, starpu_data_handle_t dx);
#endif
