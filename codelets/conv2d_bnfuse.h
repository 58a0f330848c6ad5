/* conv2d_bnfuse.h — batch norm fused into the convolutions around it (fusion level 3, graph/fuse.c).
 *
 * The pattern conv A -> batchnorm -> relu -> conv B (A's only reader is the batchnorm, the relu's only
 * reader is B) runs, per chunk, as:
 *   forward   conv A + the batchnorm's statistics: y = conv(x, w), then saved (3C) = [mean | biased var |
 *             invstd] of y over the chunk, from the per-row sums of dnn_batchnorm_sums_fwd_cpu (double sums of
 *             each row's sum and centred sum of squares, rows in increasing n) and the formulas of
 *             dnn_batchnorm_forward_global_cpu with M = N * HW: the chunk's own statistics, as --batchnorm local,
 *             computed as one chunk of --batchnorm global computes them, bit for bit;
 *             conv B on z = relu((y - mean) * (gamma * invstd) + beta) (bn_formulas.h, act_formulas.h: the values
 *             the batchnorm+relu task would have stored), formed row by row in Winograd F(2x2)'s input copy
 *             (conv2d_winograd.h bn_in), else in a scratch copy of the chunk;
 *   backward  the batchnorm+relu backward with its gradient masked where the recomputed z is not > 0 (the same
 *             z, so the same mask, bit for bit), and conv B's weight gradient on z formed the same way.
 * The batchnorm's output z is never stored: y is read once by the statistics (in the task that wrote it) and
 * once by conv B, instead of twice by the statistics, once by the normalisation and once more (z) by conv B.
 * Against --batchnorm local's two-pass statistics (mean, then squared deviations from it) the variance
 * differs by float rounding only (docs/studies/2026-12-07-bn-fusion.md, unit_bn_fuse derives the bound).
 * CPU only: graph/fuse.c takes level 3 only where no CUDA worker exists. */
#ifndef DNN_CONV2D_BNFUSE_H
#define DNN_CONV2D_BNFUSE_H
#include <starpu.h>

#include "batchnorm.h"
#include "conv2d.h"
#include "dnn_codelet.h"

/* One task's arguments: the conv's, and the batchnorm's of its input (in_bn: applied to x, when apply) and of
 * its output (out_bn: statistics of y, when stats). */
typedef struct {
	dnn_conv2d_args conv;
	dnn_batchnorm_args in_bn, out_bn;
	int apply; // x is the batchnorm's input: the conv reads relu(bn(x)) (buffers saved_in, gamma, beta)
	int stats; // y's batchnorm statistics into saved_out
} dnn_conv2d_bn_args;

/* z (N, C, HW) = relu((x - mean) * (gamma * invstd) + beta) per channel, saved (3C) = [mean | var | invstd]:
 * the fused batchnorm+relu forward's output for those statistics, bit for bit. */
void dnn_bn_relu_apply_cpu(float *z, const float *x, const float *saved, const float *gamma, const float *beta,
			   int N, int C, int HW);
/* z[0..n) = relu((x - m) * scale + b): one row of dnn_bn_relu_apply_cpu (the Winograd F(2x2) input copy calls it:
 * compiled here without FMA, as the batchnorm kernels, so the same floats). */
void dnn_bn_relu_row(float *z, const float *x, int n, float m, float scale, float b);
/* conv2d_algo.c: the conv's F(2x2) forward / weight gradient with that applied to x in the input copy, bn_in (3, C) =
 * mean | scale | shift, bn_row: W floats; 0 (nothing done) when the pass does not run as F(2x2). */
int dnn_conv2d_forward_bnin_cpu(float *y, const float *x, const float *w, const float *bn_in, float *bn_row,
				const dnn_conv2d_args *a);
int dnn_conv2d_backward_filter_bnin_cpu(float *dw, const float *x, const float *dy, const float *bn_in, float *bn_row,
					const dnn_conv2d_args *a);
/* saved (3C) = [mean | biased var | invstd] of y (N, C, HW) over the chunk (see above). */
void dnn_bn_stats_cpu(float *saved, const float *y, const dnn_batchnorm_args *a);

/* Forward: y (N, K, P, Q) = conv(a->apply ? relu(bn(x)) : x, w); then, when a->stats, saved_out (3K) from y.
 * saved_in (3C), gamma (C), beta (C) only when a->apply. */
void dnn_conv2d_bn_forward_cpu(float *y, float *saved_out, const float *x, const float *w, const float *saved_in,
			       const float *gamma, const float *beta, const dnn_conv2d_bn_args *a);
/* Weight gradient dw (K, CRS) += of the conv on relu(bn(x)) (a->apply must be 1). */
void dnn_conv2d_bn_backward_filter_cpu(float *dw, const float *x, const float *dy, const float *saved_in,
				       const float *gamma, const float *beta, const dnn_conv2d_bn_args *a);
/* The batchnorm+relu backward (as dnn_batchnorm_relu_backward_cpu) with the relu's output recomputed from
 * x, saved, gamma and beta. */
void dnn_batchnorm_relu_backward_recompute_cpu(float *dx, float *dgamma, float *dbeta, const float *x,
					       const float *gamma, const float *beta, const float *saved,
					       const float *dy, const dnn_batchnorm_args *a);

/* conv_bn_fwd (R x, R w, W y[, R saved_in, R gamma, R beta][, W saved_out]): [apply][stats]
 * conv_bn_bwd_filter (R x, R dy, REDUX|RW dw, R saved_in, R gamma, R beta)
 * bn_relu_bwd_recompute (R x, R gamma, R beta, R saved, R dy, W|RW dx, REDUX|RW dgamma, REDUX|RW dbeta)
 * CPU only (no CUDA function: the plan never submits them where a CUDA worker exists). */
extern struct starpu_codelet cl_conv2d_bn_fwd, cl_conv2d_bn_bwd_filter, cl_batchnorm_relu_bwd_recompute;

/* saved_in, gamma, beta: NULL unless a->apply; saved_out: NULL unless a->stats. */
int dnn_insert_conv2d_bn_fwd(const dnn_task_opts *o, const dnn_conv2d_bn_args *a, starpu_data_handle_t x,
			     starpu_data_handle_t w, starpu_data_handle_t y, starpu_data_handle_t saved_in,
			     starpu_data_handle_t gamma, starpu_data_handle_t beta, starpu_data_handle_t saved_out);
int dnn_insert_conv2d_bn_bwd_filter(const dnn_task_opts *o, const dnn_conv2d_bn_args *a, starpu_data_handle_t x,
				    starpu_data_handle_t dy, starpu_data_handle_t dw, int dw_mode,
				    starpu_data_handle_t saved_in, starpu_data_handle_t gamma, starpu_data_handle_t beta);
/* dx's mode follows a->accumulate_dx; the gradients' is grad_mode. */
int dnn_insert_batchnorm_relu_bwd_recompute(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x,
					    starpu_data_handle_t gamma, starpu_data_handle_t beta,
					    starpu_data_handle_t saved, starpu_data_handle_t dy, starpu_data_handle_t dx,
					    starpu_data_handle_t dgamma, starpu_data_handle_t dbeta, int grad_mode);
#endif
