/* act_formulas.h — the element-wise activations, forward and backward, written once for the CPU
 * and CUDA kernels (formulas.h): relu.{c,cu}, leaky_relu.{c,cu}, and the ReLUs fused into batch
 * norm (batchnorm.{c,cu}) and max pooling (maxpool.{c,cu}).
 *
 * The rectifiers' backward reads the activation's output y, not its input x (y > 0 exactly when
 * x > 0, for both), so x can be freed after the forward; gelu's reads x (y does not give x back).
 *
 * Hand-written copies: batchnorm.c's relu_mask (the gradient select as a bit mask, which the
 * compiler vectorises inside the lane sums) and batchnorm_simd.c's AVX2 forward and grad8 give
 * the same values as dnn_act_relu and dnn_act_relu_grad; unit_pool_bn compares the AVX2 and
 * portable batch norms bit for bit, fused ReLU included.
 */
#ifndef DNN_ACT_FORMULAS_H
#define DNN_ACT_FORMULAS_H
#include "formulas.h"

/* y = max(x, 0) (NaN gives 0) */
DNN_FORMULA float dnn_act_relu(float x) { return x > 0.0f ? x : 0.0f; }

/* dx = dy where y > 0, else +0 */
DNN_FORMULA float dnn_act_relu_grad(float dy, float y) { return y > 0.0f ? dy : 0.0f; }

/* y = x > 0 ? x : alpha x */
DNN_FORMULA float dnn_act_leaky_relu(float x, float alpha) { return x > 0.0f ? x : alpha * x; }

/* dx = y > 0 ? dy : alpha dy */
DNN_FORMULA float dnn_act_leaky_relu_grad(float dy, float y, float alpha) { return y > 0.0f ? dy : alpha * dy; }

/* GELU, tanh form (GPT-2; PyTorch's gelu(approximate='tanh')):
 *   y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *   dy/dx = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 * in PyTorch's order of operations (its CPU kernel's). */
#define DNN_GELU_BETA 0.7978845608028654f /* sqrt(2/pi) */
#define DNN_GELU_KAPPA 0.044715f

DNN_FORMULA float dnn_act_gelu(float x)
{
	const float inner = DNN_GELU_BETA * (x + DNN_GELU_KAPPA * (x * x * x));
	return 0.5f * x * (1.0f + tanhf(inner));
}

/* dx = dy * gelu'(x) */
DNN_FORMULA float dnn_act_gelu_grad(float dy, float x)
{
	const float x_sq = x * x, x_cube = x_sq * x;
	const float inner = DNN_GELU_BETA * (x + DNN_GELU_KAPPA * x_cube), t = tanhf(inner);
	const float left = 0.5f * x, right = 1.0f + t;
	const float left_derivative = 0.5f * right;
	const float right_derivative = left * (1.0f - t * t) * DNN_GELU_BETA * (1.0f + 3.0f * DNN_GELU_KAPPA * x_sq);
	return dy * (left_derivative + right_derivative);
}

#endif
