/* bn_formulas.h — batch normalisation's per-element formulas, written once for the CPU kernels
 * (batchnorm.c) and the CUDA kernels (batchnorm.cu) (formulas.h). The per-channel statistics
 * (sums, mean, invstd) are each path's own: the CPU sums in float lanes folded into doubles,
 * cuDNN or the CUDA block sums in double; these take them as given.
 *
 * Forward, per element of channel c: y = (x - mean) * scale + beta, scale = gamma * invstd
 * computed once per channel in float (train: the batch's invstd; eval: 1 / sqrt(running var +
 * eps)).
 * Backward, with g = dy (masked by the fused ReLU's output: act_formulas.h) and the channel's sums
 * sdy = sum g, sdyx = invstd * sum g (x - mean) over its M values:
 *   dx = gamma * invstd * (g - sdy / M - (x - mean) * invstd * sdyx / M) = k g + (x - mean) kx + k0
 * with k = gamma * invstd, kx = -k * invstd * (sdyx / M), k0 = -k * (sdy / M) (dnn_bn_dx_coefs).
 *
 * Hand-written copy: batchnorm_simd.c's AVX2 normalise and row_dx compute the same expressions
 * in the same order, 8 lanes at a time; unit_pool_bn compares them with the portable loops of
 * batchnorm.c, which call these, bit for bit.
 */
#ifndef DNN_BN_FORMULAS_H
#define DNN_BN_FORMULAS_H
#include "formulas.h"

/* y = (x - mean) * scale + beta */
DNN_FORMULA float dnn_bn_normalise(float x, float mean, float scale, float beta) { return (x - mean) * scale + beta; }

/* k, kx, k0 of dx = k g + (x - mean) kx + k0 from gamma, invstd and the means mdy = sdy / M,
 * mdyx = sdyx / M (each rounded to float by the caller). */
DNN_FORMULA void dnn_bn_dx_coefs(float *k, float *kx, float *k0, float gamma, float invstd, float mdy, float mdyx)
{
	const float kk = gamma * invstd;
	*k = kk;
	*kx = -kk * invstd * mdyx;
	*k0 = -kk * mdy;
}

/* dx of one element (to be stored, or added to dx when accumulating) */
DNN_FORMULA float dnn_bn_dx(float g, float x, float mean, float k, float kx, float k0)
{
	return k * g + (x - mean) * kx + k0;
}

/* A running statistic: (1 - momentum) * running + momentum * batch * factor (the mean: factor 1;
 * the variance: the biased var and factor M / (M - 1), applied in that order). */
DNN_FORMULA float dnn_bn_running(float running, float batch, float momentum, float factor)
{
	return (1.0f - momentum) * running + momentum * batch * factor;
}

#endif
