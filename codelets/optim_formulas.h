/* optim_formulas.h — the optimisers' per-element updates, written once for the CPU kernels
 * (optim.c) and the CUDA kernels (optim.cu) (formulas.h); optim.h states the rules. Each element
 * function reads the gradient element, updates w and the state in place and returns the applied
 * change (new w - old w) for the async push; the per-tensor constants (LARS's and LAMB's rates,
 * AdamW's step) come from the caller, which computes them once per task.
 *
 * The norms' sums (LARS: ||w||, ||g||; LAMB: ||w||, ||u||) are each path's own fixed order: the
 * CPU in one sequential double sum, CUDA in fixed blocks (cuda_reduce.cuh); the rates from the
 * sums are shared (dnn_optim_lars_lambda, dnn_optim_lamb_ratio). One SIMD copy exists: AdamW's
 * 16-lane loop in optim.c (the same operations in the same order, fp-contract off: the same bits,
 * unit_optim); the other C loops are plain, and unit_optim, unit_ops and unit_fused_kernels check them.
 */
#ifndef DNN_OPTIM_FORMULAS_H
#define DNN_OPTIM_FORMULAS_H
#include "formulas.h"

/* SGD with momentum (PyTorch): g = grad * scale + wd * w; v = mom * v + g; w = w - lr * v. */
DNN_FORMULA float dnn_optim_sgd(float *w, float *v, float grad, float lr, float mom, float wd, float scale)
{
	const float g = grad * scale + wd * *w;
	const float vi = mom * *v + g;
	*v = vi;
	*w -= lr * vi;
	return -lr * vi;
}

/* LARS's local rate lambda from ww = ||w||^2 and gg = ||grad * scale||^2: trust * ||w|| / (||g|| +
 * wd * ||w||), 1 when either norm is 0. */
DNN_FORMULA double dnn_optim_lars_lambda(double ww, double gg, float trust, float wd)
{
	const double wn = sqrt(ww), gn = sqrt(gg);
	if (wn <= 0 || gn <= 0)
		return 1.0;
	return (double)trust * wn / (gn + (double)wd * wn);
}

/* LARS: rate = lr * lambda (as float); v = mom * v + rate * (grad * scale + wd * w); w = w - v. */
DNN_FORMULA float dnn_optim_lars(float *w, float *v, float grad, float rate, float mom, float wd, float scale)
{
	const float g = grad * scale + wd * *w;
	const float vi = mom * *v + rate * g;
	*v = vi;
	*w -= vi;
	return -vi;
}

/* Adam's moments, g = grad * scale: m = beta1 m + (1 - beta1) g; s = beta2 s + (1 - beta2) g^2. */
DNN_FORMULA void dnn_optim_moments(float *m, float *s, float g, float beta1, float beta2)
{
	const float mi = beta1 * *m + (1.0f - beta1) * g;
	const float si = beta2 * *s + (1.0f - beta2) * g * g;
	*m = mi, *s = si;
}

/* AdamW's per-tensor constants: step = lr / bc1, sq2 = sqrt(bc2), decay = 1 - lr * wd. */
DNN_FORMULA void dnn_optim_adamw_consts(float *step, float *sq2, float *decay, float lr, float wd, float bc1, float bc2)
{
	*step = lr / bc1, *sq2 = sqrtf(bc2), *decay = 1.0f - lr * wd;
}

/* AdamW: the moments, then w = w * decay - step * m / (sqrt(s) / sq2 + eps). */
DNN_FORMULA float dnn_optim_adamw(float *w, float *m, float *s, float grad, float scale, float beta1, float beta2,
				  float step, float sq2, float decay, float eps)
{
	const float g = grad * scale, w0 = *w;
	dnn_optim_moments(m, s, g, beta1, beta2);
	const float wi = w0 * decay - step * *m / (sqrtf(*s) / sq2 + eps);
	*w = wi;
	return wi - w0;
}

/* LAMB's direction from the updated moments: u = (m / bc1) / (sqrt(s / bc2) + eps) + wd * w, with
 * inv_bc1 = 1 / bc1 and inv_bc2 = 1 / bc2 (the divisions as products). */
DNN_FORMULA float dnn_optim_lamb_dir(float m, float s, float w, float inv_bc1, float inv_bc2, float eps, float wd)
{
	return (m * inv_bc1) / (sqrtf(s * inv_bc2) + eps) + wd * w;
}

/* LAMB's trust ratio from ww = ||w||^2 and uu = ||u||^2: sqrt(ww) / sqrt(uu), 1 when either is 0 or
 * without layerwise. */
DNN_FORMULA double dnn_optim_lamb_ratio(double ww, double uu, int layerwise)
{
	if (!layerwise || ww <= 0 || uu <= 0)
		return 1.0;
	return sqrt(ww) / sqrt(uu);
}

/* LAMB's step, rate = lr * trust ratio (as float): w = w - rate * u. */
DNN_FORMULA float dnn_optim_lamb(float *w, float m, float s, float rate, float inv_bc1, float inv_bc2, float eps, float wd)
{
	const float w0 = *w, wi = w0 - rate * dnn_optim_lamb_dir(m, s, w0, inv_bc1, inv_bc2, eps, wd);
	*w = wi;
	return wi - w0;
}

#endif
