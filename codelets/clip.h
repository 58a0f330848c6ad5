/* clip.h — global gradient-norm clipping (train --clip-grad-norm X; graph/clip.h submits the
 * tasks): per parameter tensor, the sum of squares of its gradient scaled by 1/B (cl_grad_sumsq,
 * into a 1-element double handle); then one task that adds those sums in parameter order, takes
 * the root and writes the coefficient (cl_clip_coef)
 *     c = min(1, X / (norm + 1e-6))        (PyTorch's clip_grad_norm_; NaN for a non-finite norm)
 * into a 1-element float handle, which every update reads (optim.h: the update multiplies the
 * gradient by it, dnn_insert_optim_update_clipped). X so large that c = 1 leaves every update
 * bit for bit as without clipping (the update's scale times 1.0f).
 *
 * One order of the sum of squares on both kinds of worker, so that a coefficient never depends on
 * which worker computed it: the tensor is cut as the CUDA launch is, a grid of DNN_SUMSQ_BLOCKS
 * blocks of DNN_SUMSQ_THREADS threads; thread t of block b adds the squares of elements
 * (b * T + t) + k * B * T for k = 0, 1, ... in order; each block adds its threads' partials by a
 * tree (s[t] += s[t + s] for s = T/2, ..., 1); the blocks' sums are added in block order. A
 * float squared is exact in double, so a fused multiply-add changes nothing, and the CPU kernel
 * reproduces the GPU's bits (gpu_ops checks it where a GPU is).
 */
#ifndef DNN_CLIP_H
#define DNN_CLIP_H
#include <starpu.h>

#include "dnn_codelet.h"
#include "formulas.h"

#define DNN_SUMSQ_BLOCKS 128
#define DNN_SUMSQ_THREADS 256
/* The 1e-6 PyTorch adds to the norm before dividing. */
#define DNN_CLIP_EPS 1e-6

typedef struct {
	long n;
	float scale; // 1 / global batch: the gradient handles hold sums over the batch
	int pad_;
} dnn_sumsq_args;

typedef struct {
	float max_norm; // X
	int nparams;    // the sums' count (the task's buffers after the two outputs)
} dnn_clip_args;

/* sum over i of (double)(grad[i] * scale)^2, in the order above. */
double dnn_grad_sumsq_cpu(const float *grad, long n, float scale);
/* The coefficient of a norm: min(1, X / (norm + 1e-6)) computed in double, rounded to float; NaN
 * when norm is not finite (the run's non-finite check then stops it, as with PyTorch's NaN).
 * Written once for clip.c and clip.cu (formulas.h). */
DNN_FORMULA float dnn_clip_coef_of(double norm, float max_norm)
{
	if (!isfinite(norm))
		return NAN;
	const double c = (double)max_norm / (norm + DNN_CLIP_EPS);
	return c < 1.0 ? (float)c : 1.0f;
}
/* The last step of both paths: *norm = sqrt(total), *coef = dnn_clip_coef_of(*norm, max_norm). */
DNN_FORMULA void dnn_clip_finish(float *coef, double *norm, double total, float max_norm)
{
	*norm = sqrt(total);
	*coef = dnn_clip_coef_of(*norm, max_norm);
}
/* *norm = sqrt(sumsq[0] + sumsq[1] + ... in index order), *coef = dnn_clip_coef_of(*norm, max_norm). */
void dnn_clip_coef_cpu(float *coef, double *norm, const double *sumsq, int n, float max_norm);


/* (W out: 1 double, R grad: n floats) */
extern struct starpu_codelet cl_grad_sumsq;
/* (W coef: 1 float, W norm: 1 double, R sumsq[0..nparams): 1 double each) */
extern struct starpu_codelet cl_clip_coef;

int dnn_insert_grad_sumsq(const dnn_task_opts *o, starpu_data_handle_t out, starpu_data_handle_t grad, float scale);
/* sumsq: nparams handles, read in that order (STARPU_DATA_MODE_ARRAY). */
int dnn_insert_clip_coef(const dnn_task_opts *o, starpu_data_handle_t coef, starpu_data_handle_t norm,
			 starpu_data_handle_t *sumsq, int nparams, float max_norm);

#ifdef DNN_HAVE_CUDA
void dnn_grad_sumsq_cuda(void *buffers[], void *cl_arg);
void dnn_clip_coef_cuda(void *buffers[], void *cl_arg);
#endif
#endif
