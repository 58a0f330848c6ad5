/* optim.h — the optimiser codelets: the update of one parameter tensor, one task per tensor, whatever
 * the optimiser (--optimizer; a->optimizer). g = grad * scale (scale = 1/B turns the summed gradient into a
 * mean), wd = weight_decay (0 for biases and batch-norm parameters, dnn_param_optim_args).
 *
 * sgd (PyTorch semantics), state v (n floats, the momentum buffer):
 *   v = momentum * v + (g + wd * w);  w = w - lr * v
 * lars (You, Gitman & Ginsburg 2017, "Large Batch Training of Convolutional Networks", Alg. 1),
 * state v (n floats): with a->layerwise (weights), the local rate
 *   lambda = trust * ||w|| / (||g|| + wd * ||w||)   (1 when ||w|| or ||g|| is 0)
 * over the whole tensor (both norms computed inside the task, so it stays one task), else 1
 * (biases and batch-norm parameters: no trust ratio);
 *   v = momentum * v + lr * lambda * (g + wd * w);  w = w - v
 * adamw (Loshchilov & Hutter 2019, decoupled weight decay, PyTorch's torch.optim.AdamW), state v
 * (2n floats: m then s), bc1 = 1 - beta1^t, bc2 = 1 - beta2^t for the t-th update:
 *   w = w * (1 - lr * wd);  m = beta1 * m + (1 - beta1) * g;  s = beta2 * s + (1 - beta2) * g^2
 *   w = w - (lr / bc1) * m / (sqrt(s) / sqrt(bc2) + eps)
 * lamb (You et al. 2020, "Large Batch Optimization for Deep Learning: Training BERT in 76
 * minutes", Algorithm 2 with phi the identity), state v (2n floats: m then s), bc1, bc2 as adamw:
 *   m = beta1 * m + (1 - beta1) * g;  s = beta2 * s + (1 - beta2) * g^2
 *   u = (m / bc1) / (sqrt(s / bc2) + eps) + wd * w
 *   with a->layerwise (weights) the trust ratio r = ||w|| / ||u|| over the whole tensor (1 when
 *   ||w|| or ||u|| is 0), else r = 1 (biases and batch-norm parameters, whose wd is 0 too);
 *   w = w - lr * r * u
 * Then grad = 0 (ready for the next iteration's REDUX accumulation) unless keep_grad: grad is
 * then only read (STARPU_R), e.g. an all-reduced gradient shared by several updates. With
 * write_delta a 4th buffer receives the applied change (new w - old w; async push, sgd only).
 * With clip (--clip-grad-norm, codelets/clip.h) one more buffer, read only, holds the global
 * clipping coefficient c (1 float): the update runs with g = grad * (scale * c) wherever the
 * formulas say grad * scale (LARS's and LAMB's norms included), so c = 1 is bit for bit the
 * update without clipping.
 * The per-element updates are written once, in optim_formulas.h, for optim.c and optim.cu.
 */
#ifndef DNN_OPTIM_H
#define DNN_OPTIM_H
#include <starpu.h>

#include "dnn_codelet.h"
#include "starpu_anp.h" /* dnn_optimizer */

typedef struct {
	long n;
	float lr, momentum, weight_decay, scale;
	int keep_grad;   // 1: grad is read-only, not zeroed
	int write_delta; // 1: a 4th buffer receives the applied change (async push)
	int optimizer;   // dnn_optimizer
	int layerwise;   // lars: 1 = the trust ratio applies (weights), 0 = not (biases, batch norm)
	float beta1, beta2, eps; // adamw, lamb
	float trust;     // lars: eta
	float bc1, bc2;  // adamw, lamb: 1 - beta1^t, 1 - beta2^t (computed in double by the caller)
	int clip;        // 1: the last buffer is the clipping coefficient (dnn_insert_optim_update_clipped)
	int pad_;
} dnn_optim_args;

/* "sgd", "lars", "adamw", "lamb" (NULL for anything else). */
const char *dnn_optimizer_name(dnn_optimizer o);
/* Floats of optimiser state per parameter element: 2 for adamw and lamb, else 1. */
int dnn_optimizer_state_mult(dnn_optimizer o);

void dnn_optim_update_cpu(float *w, float *v, float *grad, const dnn_optim_args *a);
/* delta may be NULL (write_delta == 0). The update of a->optimizer (v: its state, see above). */
void dnn_optim_update_delta_cpu(float *w, float *v, float *grad, float *delta, const dnn_optim_args *a);
/* AdamW's CPU loop on 16 lanes (AVX-512F, the portable loop's bits) when on = 1 and the CPU has it, else the
 * portable loop; returns 1 when the 16 lanes run. Chosen at the first update otherwise; not thread-safe
 * against running updates (the tests switch it between calls). dnn_optim_isa: "avx512" or "portable". */
int dnn_optim_set_simd(int on);
const char *dnn_optim_isa(void);
/* LARS's local rate lambda for w and the scaled gradient (double accumulations). */
double dnn_lars_rate(const float *w, const float *grad, const dnn_optim_args *a);
/* LAMB's trust ratio from ww = ||w||^2 and uu = ||u||^2: sqrt(ww / uu), 1 when either is 0 or
 * without layerwise. */
double dnn_lamb_ratio(double ww, double uu, int layerwise);

/* (RW w, RW v, RW grad) — or R grad with keep_grad */
extern struct starpu_codelet cl_optim_update;
int dnn_insert_optim_update(const dnn_task_opts *o, const dnn_optim_args *a, starpu_data_handle_t w, starpu_data_handle_t v,
			   starpu_data_handle_t grad);
/* With clipping: (RW w, RW v, RW|R grad, R coef), coef the 1-float coefficient of clip.h. */
int dnn_insert_optim_update_clipped(const dnn_task_opts *o, const dnn_optim_args *a, starpu_data_handle_t w,
				    starpu_data_handle_t v, starpu_data_handle_t grad, starpu_data_handle_t coef);
/* With write_delta: (RW w, RW v, RW|R grad, W delta). */
int dnn_insert_optim_update_delta(const dnn_task_opts *o, const dnn_optim_args *a, starpu_data_handle_t w, starpu_data_handle_t v,
				 starpu_data_handle_t grad, starpu_data_handle_t delta);
#endif
