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
} dnn_batchnorm_args;

void dnn_batchnorm_forward_train_cpu(float *y, float *saved, const float *x, const float *gamma,
				     const float *beta, const dnn_batchnorm_args *a);
void dnn_batchnorm_forward_eval_cpu(float *y, const float *x, const float *gamma, const float *beta,
				    const float *running, const dnn_batchnorm_args *a);
void dnn_batchnorm_update_running_cpu(float *running, const float *saved, const dnn_batchnorm_args *a);
void dnn_batchnorm_backward_cpu(float *dx, float *dgamma, float *dbeta, const float *x, const float *gamma,
				const float *saved, const float *dy, const dnn_batchnorm_args *a);
/* Fused backward (a->relu ignored): as dnn_batchnorm_backward_cpu with dy replaced by
 * dy * (yrelu > 0), yrelu being the fused forward's output. */
void dnn_batchnorm_relu_backward_cpu(float *dx, float *dgamma, float *dbeta, const float *x, const float *gamma,
				     const float *saved, const float *dy, const float *yrelu,
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
#endif
