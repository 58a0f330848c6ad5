/* act_formulas.h — the element-wise activations, forward and backward, written once for the CPU
 * and CUDA kernels (formulas.h): relu.{c,cu}, leaky_relu.{c,cu}, and the ReLUs fused into batch
 * norm (batchnorm.{c,cu}) and max pooling (maxpool.{c,cu}).
 *
 * Backward reads the activation's output y, not its input x (y > 0 exactly when x > 0, for both
 * rectifiers), so x can be freed after the forward.
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

#endif
