/* batchnorm_simd.h — the AVX2 batch-norm kernels (batchnorm_simd.c), internal to batchnorm.c,
 * which runs them in place of its portable loops where the CPU has AVX2.
 *
 * They compute the same operations in the same order as the portable loops (the 8-lane partial
 * sums are one 256-bit register, every product and sum rounded on its own: no FMA), so the
 * results are bit-identical; they are faster because GCC turns the portable 8-lane sums into
 * shuffles and stack spills rather than one vector per lane group, and runs them on SSE2 only. */
#ifndef DNN_BATCHNORM_SIMD_H
#define DNN_BATCHNORM_SIMD_H
#include "batchnorm.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* Both forward loops (portable and AVX2) end a channel alike: from the double mean, the float
 * mean m the normalisation uses and ss, the sum of squared deviations from m over M values, the
 * variance (with the double correction (mean - m)^2, clamped at 0) and 1/sqrt(var + eps), stored
 * in saved at c, C + c and 2C + c. Returns invstd. */
static inline double dnn_bn_store_channel_stats(float *saved, int C, int c, double mean, float m, double ss,
						 double M, double eps)
{
	double dm = mean - (double)m;
	double var = ss / M - dm * dm;
	if (var < 0)
		var = 0;
	double invstd = 1.0 / sqrt(var + eps);
	saved[c] = (float)mean;
	saved[C + c] = (float)var;
	saved[2 * C + c] = (float)invstd;
	return invstd;
}

/* The portable loops normalise a bf16 output (a->y_bf16) in blocks of this many floats (on the stack, in L1), each
 * then rounded by one dnn_bf16_convert; the AVX2 ones round in registers (dnn_bn_bf16_convert_avx2). */
#define DNN_BN_BF16_BLOCK 1024

/* Whether batchnorm.c runs the AVX2 kernels: on = 1 (the default) where the CPU has AVX2,
 * on = 0 forces the portable loops (tests, side-by-side measurements). Returns the choice in
 * effect. */
int dnn_batchnorm_set_simd(int on);
int dnn_batchnorm_simd(void);

/* As dnn_batchnorm_forward_train_cpu. */
void dnn_bn_forward_train_avx2(void *y, float *saved, const void *x, const float *gamma, const float *beta,
			       const dnn_batchnorm_args *a);
/* Plane o (element offset) of y = (x - m) * scale + b (then the relu with a->relu), x and y each fp32 or bf16 per
 * a: the normalisation of the training forward, for the eval and --batchnorm global forwards. */
void dnn_bn_normalise_plane_avx2(void *y, const void *x, size_t o, float m, float scale, float b,
				 const dnn_batchnorm_args *a);
/* As dnn_batchnorm_backward_cpu (yr = NULL) and dnn_batchnorm_relu_backward_cpu (yr = the relu's
 * output). */
void dnn_bn_backward_avx2(float *dx, float *dgamma, float *dbeta, const void *x, const float *gamma,
			  const float *saved, const float *dy, const void *yr, const dnn_batchnorm_args *a);
/* dst = src rounded to bf16 by the AVX2 normalisation's in-register rounding: the bits of dnn_bf16_convert on the
 * current path (tests/op_bf16.c compares the two). */
void dnn_bn_bf16_convert_avx2(uint16_t *dst, const float *src, size_t n);
#endif
