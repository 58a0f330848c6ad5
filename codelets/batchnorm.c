/* batchnorm.c — batch normalisation over (N, HW) per channel, NCHW: CPU kernels, StarPU codelets,
 * insert helpers. Formulas follow PyTorch's BatchNorm2d in training mode:
 *   mean = sum(x) / M, var = sum((x - mean)^2) / M (biased), invstd = 1 / sqrt(var + eps),
 *   M = N * HW; the running variance gets the unbiased var * M / (M - 1) (M = 1: var itself).
 * Per-channel sums are accumulated in double: cheap, and it keeps chunk statistics accurate.
 */
#include "batchnorm.h"
#include "act_formulas.h"
#include "batchnorm_simd.h"
#include "bn_formulas.h"
#include "dnn_codelet.h"
#include "gemm_bf16.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef DNN_HAVE_CUDA
void dnn_batchnorm_fwd_train_cuda(void *buffers[], void *cl_arg);
void dnn_batchnorm_fwd_eval_cuda(void *buffers[], void *cl_arg);
void dnn_batchnorm_running_cuda(void *buffers[], void *cl_arg);
void dnn_batchnorm_bwd_cuda(void *buffers[], void *cl_arg);
void dnn_batchnorm_sums_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_batchnorm_fwd_global_cuda(void *buffers[], void *cl_arg);
void dnn_batchnorm_sums_bwd_cuda(void *buffers[], void *cl_arg);
void dnn_batchnorm_bwd_global_cuda(void *buffers[], void *cl_arg);
void dnn_bn_dsum_zero_cuda(void *buffers[], void *cl_arg);
void dnn_bn_dsum_add_cuda(void *buffers[], void *cl_arg);
#endif

/* The per-channel sums run in 8 float lanes that the compiler vectorises (a double
 * accumulator in one sequential chain is latency-bound: 4 cycles per element), folded into a
 * double once per image row of HW elements, so accuracy stays that of a double sum over rows. */
static inline double fold8(const float s[8])
{
	return (double)((s[0] + s[4]) + (s[1] + s[5])) + (double)((s[2] + s[6]) + (s[3] + s[7]));
}

/* x's element i: fp32, or bf16 (XB: a->x_bf16) widened exactly, so that every loop below gives on a bf16 x the
 * bits it gives on the widened fp32 x. XB is a literal at each call (as FUSED below): each version reads one type. */
static inline __attribute__((always_inline)) float x_at(const void *x, size_t i, const int XB)
{
	return XB ? dnn_bf16_to_f32(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

// x + off elements of its type
static inline __attribute__((always_inline)) const void *x_off(const void *x, size_t off, const int XB)
{
	return XB ? (const void *)((const uint16_t *)x + off) : (const void *)((const float *)x + off);
}

// sum(p[0..n))
static inline __attribute__((always_inline)) double lane_sum(const void *p, int n, const int XB)
{
	float s[8] = {0};
	int i = 0;
	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++)
			s[j] += x_at(p, i + j, XB);
	for (; i < n; i++)
		s[0] += x_at(p, i, XB);
	return fold8(s);
}

// sum((p[0..n) - m)^2)
static inline __attribute__((always_inline)) double lane_sqdev(const void *p, int n, float m, const int XB)
{
	float s[8] = {0};
	int i = 0;
	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++) {
			float d = x_at(p, i + j, XB) - m;
			s[j] += d * d;
		}
	for (; i < n; i++) {
		float d = x_at(p, i, XB) - m;
		s[0] += d * d;
	}
	return fold8(s);
}

/* One channel plane of the normalised output, y = (x - m) * scale + b, then max(y, 0) when the
 * batch norm is fused with the ReLU that follows it (train and eval forward alike): the formulas
 * of bn_formulas.h and act_formulas.h, which batchnorm.cu's kernels call too. */
static inline __attribute__((always_inline)) void normalise_plane(float *restrict yp, const void *xp, int HW, float m,
								   float scale, float b, int relu, const int XB)
{
	if (relu)
		for (int i = 0; i < HW; i++)
			yp[i] = dnn_act_relu(dnn_bn_normalise(x_at(xp, i, XB), m, scale, b));
	else
		for (int i = 0; i < HW; i++)
			yp[i] = dnn_bn_normalise(x_at(xp, i, XB), m, scale, b);
}

/* normalise_plane of plane o of x into plane o of y: fp32, or bf16 when a->y_bf16 (normalised in L1-resident
 * blocks, each rounded by one dnn_bf16_convert: the rounding the AVX2 forward does in registers). */
static void normalise_plane_out(void *y, const void *x, size_t o, float m, float scale, float b,
				const dnn_batchnorm_args *a)
{
	if (dnn_batchnorm_simd()) { /* the same loop in AVX2, bit-identical, rounding a bf16 y in registers */
		dnn_bn_normalise_plane_avx2(y, x, o, m, scale, b, a);
		return;
	}
	const void *xp = x_off(x, o, a->x_bf16);
	if (!a->y_bf16) {
		if (a->x_bf16)
			normalise_plane((float *)y + o, xp, a->HW, m, scale, b, a->relu, 1);
		else
			normalise_plane((float *)y + o, xp, a->HW, m, scale, b, a->relu, 0);
		return;
	}
	float t[DNN_BN_BF16_BLOCK];
	for (int i = 0; i < a->HW; i += DNN_BN_BF16_BLOCK) {
		const int k = a->HW - i < DNN_BN_BF16_BLOCK ? a->HW - i : DNN_BN_BF16_BLOCK;
		if (a->x_bf16)
			normalise_plane(t, x_off(xp, i, 1), k, m, scale, b, a->relu, 1);
		else
			normalise_plane(t, x_off(xp, i, 0), k, m, scale, b, a->relu, 0);
		dnn_bf16_convert((uint16_t *)y + o + i, t, (size_t)k);
	}
}

/* Channel c's statistics over its N planes of x into saved (dnn_bn_store_channel_stats); returns invstd and the
 * float mean *m. */
static inline __attribute__((always_inline)) double channel_stats(float *saved, float *m, const void *x,
								  const dnn_batchnorm_args *a, int c, const int XB)
{
	const int N = a->N, C = a->C, HW = a->HW;
	const double M = (double)N * HW;
	double sum = 0;
	for (int n = 0; n < N; n++)
		sum += lane_sum(x_off(x, ((size_t)n * C + c) * HW, XB), HW, XB);
	double mean = sum / M, ss = 0;
	/* Deviations from the float mean the normalisation uses; the double correction term
	 * (mean - m)^2 keeps the variance exact to float rounding. */
	*m = (float)mean;
	for (int n = 0; n < N; n++)
		ss += lane_sqdev(x_off(x, ((size_t)n * C + c) * HW, XB), HW, *m, XB);
	return dnn_bn_store_channel_stats(saved, C, c, mean, *m, ss, M, a->eps);
}

// y (N, C, HW), saved (3C) = [mean | biased var | invstd]; x (N, C, HW), gamma (C), beta (C)
void dnn_batchnorm_forward_train_cpu(void *y, float *saved, const void *x, const float *gamma,
				     const float *beta, const dnn_batchnorm_args *a)
{
	if (dnn_batchnorm_simd()) { /* the same loops in AVX2, bit-identical (batchnorm_simd.c) */
		dnn_bn_forward_train_avx2(y, saved, x, gamma, beta, a);
		return;
	}
	const int N = a->N, C = a->C, HW = a->HW;
	for (int c = 0; c < C; c++) {
		float m;
		double invstd = a->x_bf16 ? channel_stats(saved, &m, x, a, c, 1) : channel_stats(saved, &m, x, a, c, 0);
		float scale = gamma[c] * (float)invstd, b = beta[c];
		for (int n = 0; n < N; n++)
			normalise_plane_out(y, x, ((size_t)n * C + c) * HW, m, scale, b, a);
	}
}

// y (N, C, HW) from x (N, C, HW), gamma (C), beta (C), running (2C) = [mean | unbiased var]
void dnn_batchnorm_forward_eval_cpu(void *y, const void *x, const float *gamma, const float *beta,
				    const float *running, const dnn_batchnorm_args *a)
{
	const int N = a->N, C = a->C, HW = a->HW;
	for (int c = 0; c < C; c++) {
		float m = running[c];
		float scale = (float)(gamma[c] / sqrt((double)running[C + c] + a->eps)), b = beta[c];
		for (int n = 0; n < N; n++)
			normalise_plane_out(y, x, ((size_t)n * C + c) * HW, m, scale, b, a);
	}
}

// running (2C) = (1 - momentum) * running + momentum * [mean | var * M / (M - 1)] from saved (3C)
void dnn_batchnorm_update_running_cpu(float *running, const float *saved, const dnn_batchnorm_args *a)
{
	const int C = a->C;
	const double M = (double)a->N * a->HW;
	const float unbias = M > 1 ? (float)(M / (M - 1)) : 1.0f, mom = a->momentum;
	for (int c = 0; c < C; c++) {
		running[c] = dnn_bn_running(running[c], saved[c], mom, 1.0f);
		running[C + c] = dnn_bn_running(running[C + c], saved[C + c], mom, unbias);
	}
}

/* g if y > 0, else +0.0f (act_formulas.h's dnn_act_relu_grad) as a bit mask: branch-free, so that the compiler
 * vectorises the lane loops (a select on a data-dependent sign there made the fused backward
 * several times slower than bn_bwd + relu_bwd). */
static inline float relu_mask(float g, float y)
{
	uint32_t b;
	memcpy(&b, &g, sizeof(b));
	b &= -(uint32_t)(y > 0.0f);
	memcpy(&g, &b, sizeof(g));
	return g;
}

/* The relu output at element i of a plane: fp32 (FUSED 1) or bf16 (FUSED 2, a->y_bf16), widened exactly. */
#define YR(i) (FUSED == 2 ? dnn_bf16_to_f32(yhp[i]) : yrp[i])

/* Channel c's backward sums over its N planes: *sdy = sum g, *sdyx = sum g * (x - mean), g = dy
 * (FUSED: relu_mask(dy, yr), yr fp32 (1) or bf16 (2)), in 8 float lanes folded into double once per plane (fold8).
 * FUSED and XB (x in bf16) are literals at each call, as in the callers: the plain version reads no yr. */
static inline __attribute__((always_inline)) void
channel_grad_sums(double *sdy, double *sdyx, const void *x, const float *dy, const void *yr,
		  const dnn_batchnorm_args *a, int c, float mean, const int FUSED, const int XB)
{
	const int N = a->N, C = a->C, HW = a->HW;
	double t1 = 0, t2 = 0;
	for (int n = 0; n < N; n++) {
		const void *xp = x_off(x, ((size_t)n * C + c) * HW, XB);
		const float *restrict dyp = dy + ((size_t)n * C + c) * HW;
		const float *restrict yrp = FUSED == 1 ? (const float *)yr + ((size_t)n * C + c) * HW : NULL;
		const uint16_t *restrict yhp = FUSED == 2 ? (const uint16_t *)yr + ((size_t)n * C + c) * HW : NULL;
		float s1[8] = {0}, s2[8] = {0};
		int i = 0;
		for (; i + 8 <= HW; i += 8)
			for (int j = 0; j < 8; j++) {
				float g = FUSED ? relu_mask(dyp[i + j], YR(i + j)) : dyp[i + j];
				s1[j] += g;
				s2[j] += g * (x_at(xp, i + j, XB) - mean);
			}
		for (; i < HW; i++) {
			float g = FUSED ? relu_mask(dyp[i], YR(i)) : dyp[i];
			s1[0] += g;
			s2[0] += g * (x_at(xp, i, XB) - mean);
		}
		t1 += fold8(s1);
		t2 += fold8(s2);
	}
	*sdy = t1;
	*sdyx = t2;
}

/* Channel c's dx (=, or += when a->accumulate_dx) = k * g + (x - mean) * kx + k0, g as above. */
static inline __attribute__((always_inline)) void
channel_dx(float *dx, const void *x, const float *dy, const void *yr, const dnn_batchnorm_args *a, int c,
	   float mean, float k, float kx, float k0, const int FUSED, const int XB)
{
	const int N = a->N, C = a->C, HW = a->HW;
	for (int n = 0; n < N; n++) {
		const void *xp = x_off(x, ((size_t)n * C + c) * HW, XB);
		const float *restrict dyp = dy + ((size_t)n * C + c) * HW;
		const float *restrict yrp = FUSED == 1 ? (const float *)yr + ((size_t)n * C + c) * HW : NULL;
		const uint16_t *restrict yhp = FUSED == 2 ? (const uint16_t *)yr + ((size_t)n * C + c) * HW : NULL;
		float *restrict dxp = dx + ((size_t)n * C + c) * HW;
		if (a->accumulate_dx)
			for (int i = 0; i < HW; i++) {
				float g = FUSED ? relu_mask(dyp[i], YR(i)) : dyp[i];
				dxp[i] += dnn_bn_dx(g, x_at(xp, i, XB), mean, k, kx, k0);
			}
		else
			for (int i = 0; i < HW; i++) {
				float g = FUSED ? relu_mask(dyp[i], YR(i)) : dyp[i];
				dxp[i] = dnn_bn_dx(g, x_at(xp, i, XB), mean, k, kx, k0);
			}
	}
}

/* The backward's body; FUSED is a literal at each call so that the compiler drops the mask (and
 * the read of yr) from the plain version. Fused: the incoming gradient is dy * (yr > 0), yr fp32 (1) or bf16 (2).
 * XB: x in bf16 (a literal too). */
static inline __attribute__((always_inline)) void
bn_backward(float *dx, float *dgamma, float *dbeta, const void *x, const float *gamma, const float *saved,
	    const float *dy, const void *yr, const dnn_batchnorm_args *a, const int FUSED, const int XB)
{
	const int N = a->N, C = a->C, HW = a->HW;
	const double M = (double)N * HW;
	for (int c = 0; c < C; c++) {
		const float mean = saved[c], invstd = saved[2 * C + c];
		double sdy, sdyx; // sum(dy), sum(dy * xhat)
		channel_grad_sums(&sdy, &sdyx, x, dy, yr, a, c, mean, FUSED, XB);
		sdyx *= invstd;
		dbeta[c] += (float)sdy;
		dgamma[c] += (float)sdyx;
		// dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat))
		//    = k * dy + (x - mean) * kx + k0
		float k, kx, k0;
		dnn_bn_dx_coefs(&k, &kx, &k0, gamma[c], invstd, (float)(sdy / M), (float)(sdyx / M));
		channel_dx(dx, x, dy, yr, a, c, mean, k, kx, k0, FUSED, XB);
	}
}

/* fn(args..., FUSED, XB) with FUSED the relu's mask (0: none, 1: fp32 y, 2: bf16 y) from yr and a->y_bf16, and XB
 * from a->x_bf16: each combination a version of its own, with literals. */
#define BN_VERSIONS(fn, yr, ...)                                                                                       \
	do {                                                                                                           \
		const int f_ = !(yr) ? 0 : a->y_bf16 ? 2 : 1;                                                       \
		if (a->x_bf16)                                                                                         \
			f_ == 0 ? fn(__VA_ARGS__, 0, 1) : f_ == 1 ? fn(__VA_ARGS__, 1, 1) : fn(__VA_ARGS__, 2, 1);     \
		else                                                                                                   \
			f_ == 0 ? fn(__VA_ARGS__, 0, 0) : f_ == 1 ? fn(__VA_ARGS__, 1, 0) : fn(__VA_ARGS__, 2, 0);     \
	} while (0)

// dx (N, C, HW) (=|+=), dgamma (C) +=, dbeta (C) +=; x (N, C, HW), gamma (C), saved (3C), dy (N, C, HW)
void dnn_batchnorm_backward_cpu(float *dx, float *dgamma, float *dbeta, const void *x, const float *gamma,
				const float *saved, const float *dy, const dnn_batchnorm_args *a)
{
	if (dnn_batchnorm_simd())
		dnn_bn_backward_avx2(dx, dgamma, dbeta, x, gamma, saved, dy, NULL, a);
	else
		BN_VERSIONS(bn_backward, NULL, dx, dgamma, dbeta, x, gamma, saved, dy, NULL, a);
}

// as above with dy * (yrelu > 0) for dy; yrelu (N, C, HW), bf16 when a->y_bf16
void dnn_batchnorm_relu_backward_cpu(float *dx, float *dgamma, float *dbeta, const void *x, const float *gamma,
				     const float *saved, const float *dy, const void *yrelu,
				     const dnn_batchnorm_args *a)
{
	if (dnn_batchnorm_simd())
		dnn_bn_backward_avx2(dx, dgamma, dbeta, x, gamma, saved, dy, yrelu, a);
	else
		BN_VERSIONS(bn_backward, yrelu, dx, dgamma, dbeta, x, gamma, saved, dy, yrelu, a);
}

/* ------------------------------------------------------------------ global statistics
 * (--batchnorm global; batchnorm.h has the formulas) */

// sums (2C doubles) += [sum x | sum x^2] of x (N, C, HW); sum x^2 from each row's centred sums.
// An AVX2 clone where the CPU has it: the compiler vectorises the 8-lane loops lane for lane, and "avx2" brings no
// FMA to contract with, so both clones give the same doubles (unit_bn_fuse compares them with the stored stats).
static inline __attribute__((always_inline)) void sums_fwd(double *sums, const void *x, const dnn_batchnorm_args *a,
							   const int XB)
{
	const int N = a->N, C = a->C, HW = a->HW;
	for (int c = 0; c < C; c++) {
		double s = 0, ss = 0;
		for (int n = 0; n < N; n++) {
			const void *xp = x_off(x, ((size_t)n * C + c) * HW, XB);
			const double rs = lane_sum(xp, HW, XB);
			const float m = (float)(rs / HW);
			/* sum (x - m)^2 and sum (x - m) (a small correction: m is rounded) */
			const double q = lane_sqdev(xp, HW, m, XB), d = rs - (double)m * HW;
			s += rs;
			ss += q + 2.0 * (double)m * d + (double)m * (double)m * HW;
		}
		sums[c] += s;
		sums[C + c] += ss;
	}
}

__attribute__((target_clones("avx2", "default"))) void dnn_batchnorm_sums_fwd_cpu(double *sums, const void *x,
										   const dnn_batchnorm_args *a)
{
	if (a->x_bf16)
		sums_fwd(sums, x, a, 1);
	else
		sums_fwd(sums, x, a, 0);
}

/* mean, biased var and invstd of channel c from the forward sums over M values. */
static void global_stats(double *mean, double *var, double *invstd, const double *sums, int C, int c, double M,
			 float eps)
{
	*mean = sums[c] / M;
	*var = sums[C + c] / M - *mean * *mean;
	if (*var < 0)
		*var = 0;
	*invstd = 1.0 / sqrt(*var + eps);
}

// saved (3C) = [mean | var | invstd] from sums (2C) over M = (global_n, else N) * HW values per channel
void dnn_batchnorm_stats_from_sums_cpu(float *saved, const double *sums, const dnn_batchnorm_args *a)
{
	const int C = a->C;
	const double M = (double)(a->global_n ? a->global_n : a->N) * a->HW;
	for (int c = 0; c < C; c++) {
		double mean, var, invstd;
		global_stats(&mean, &var, &invstd, sums, C, c, M, a->eps);
		saved[c] = (float)mean;
		saved[C + c] = (float)var;
		saved[2 * C + c] = (float)invstd;
	}
}

// y (N, C, HW), saved (3C) = [mean | var | invstd] of the global batch; x, gamma, beta; sums (2C)
void dnn_batchnorm_forward_global_cpu(void *y, float *saved, const void *x, const float *gamma,
				      const float *beta, const double *sums, const dnn_batchnorm_args *a)
{
	const int N = a->N, C = a->C, HW = a->HW;
	dnn_batchnorm_stats_from_sums_cpu(saved, sums, a);
	for (int c = 0; c < C; c++) {
		const float m = saved[c], scale = gamma[c] * saved[2 * C + c];
		for (int n = 0; n < N; n++)
			normalise_plane_out(y, x, ((size_t)n * C + c) * HW, m, scale, beta[c], a);
	}
}

/* The backward sums' body (FUSED, XB literals, as bn_backward): sums += [sum g | sum g (x - mean)]. */
static inline __attribute__((always_inline)) void
bn_sums_bwd(double *sums, float *dgamma, float *dbeta, const void *x, const float *saved, const float *dy,
	    const void *yr, const dnn_batchnorm_args *a, const int FUSED, const int XB)
{
	const int C = a->C;
	for (int c = 0; c < C; c++) {
		const float mean = saved[c], invstd = saved[2 * C + c];
		double sdy, sdyx;
		channel_grad_sums(&sdy, &sdyx, x, dy, yr, a, c, mean, FUSED, XB);
		sums[c] += sdy;
		sums[C + c] += sdyx;
		dbeta[c] += (float)sdy;
		dgamma[c] += (float)(sdyx * invstd);
	}
}

void dnn_batchnorm_sums_bwd_cpu(double *sums, float *dgamma, float *dbeta, const void *x, const float *saved,
				const float *dy, const void *yrelu, const dnn_batchnorm_args *a)
{
	const void *yr = a->relu ? yrelu : NULL;
	BN_VERSIONS(bn_sums_bwd, yr, sums, dgamma, dbeta, x, saved, dy, yr, a);
}

static inline __attribute__((always_inline)) void
bn_bwd_global(float *dx, const void *x, const float *gamma, const float *saved, const float *dy, const void *yr,
	      const double *sums, const dnn_batchnorm_args *a, const int FUSED, const int XB)
{
	const int C = a->C;
	const double M = (double)a->global_n * a->HW;
	for (int c = 0; c < C; c++) {
		const float mean = saved[c], invstd = saved[2 * C + c];
		// dx = k * g + (x - mean) * kx + k0 (bn_backward's form, with the global sums)
		float k, kx, k0;
		dnn_bn_dx_coefs(&k, &kx, &k0, gamma[c], invstd, (float)(sums[c] / M),
				(float)(sums[C + c] * (double)invstd / M));
		channel_dx(dx, x, dy, yr, a, c, mean, k, kx, k0, FUSED, XB);
	}
}

void dnn_batchnorm_backward_global_cpu(float *dx, const void *x, const float *gamma, const float *saved,
				       const float *dy, const void *yrelu, const double *sums,
				       const dnn_batchnorm_args *a)
{
	const void *yr = a->relu ? yrelu : NULL;
	BN_VERSIONS(bn_bwd_global, yr, dx, x, gamma, saved, dy, yr, sums, a);
}

#undef BN_VERSIONS

#undef YR

/* ------------------------------------------------------------------ StarPU codelets */

#define NX(i) STARPU_VECTOR_GET_NX(buffers[i])
#define PTR(i) ((float *)STARPU_VECTOR_GET_PTR(buffers[i]))
/* The (fused relu's) output y: bf16 elements when a->y_bf16, else fp32. */
#define YPTR(i) ((void *)STARPU_VECTOR_GET_PTR(buffers[i]))
#define YSIZE_OK(i) (STARPU_VECTOR_GET_ELEMSIZE(buffers[i]) == (a->y_bf16 ? sizeof(uint16_t) : sizeof(float)))
/* The input x: bf16 elements when a->x_bf16, else fp32. */
#define XPTR(i) ((const void *)STARPU_VECTOR_GET_PTR(buffers[i]))
#define XSIZE_OK(i) (STARPU_VECTOR_GET_ELEMSIZE(buffers[i]) == (a->x_bf16 ? sizeof(uint16_t) : sizeof(float)))

// (R x, R gamma, R beta, W y, W saved)
static void bn_fwd_train_cpu(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = cl_arg;
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(NX(0) == nx && NX(1) == C && NX(2) == C && NX(3) == nx && NX(4) == 3 * C && YSIZE_OK(3) &&
		      XSIZE_OK(0));
	dnn_batchnorm_forward_train_cpu(YPTR(3), PTR(4), XPTR(0), PTR(1), PTR(2), a);
}

// (R x, R gamma, R beta, R running, W y)
static void bn_fwd_eval_cpu(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = cl_arg;
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(NX(0) == nx && NX(1) == C && NX(2) == C && NX(3) == 2 * C && NX(4) == nx && YSIZE_OK(4) &&
		      XSIZE_OK(0));
	dnn_batchnorm_forward_eval_cpu(YPTR(4), XPTR(0), PTR(1), PTR(2), PTR(3), a);
}

// (R saved, RW running)
static void bn_running_cpu(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = cl_arg;
	STARPU_ASSERT(NX(0) == 3 * (size_t)a->C && NX(1) == 2 * (size_t)a->C);
	dnn_batchnorm_update_running_cpu(PTR(1), PTR(0), a);
}

// (R x, R gamma, R saved, R dy, W|RW dx, REDUX dgamma, REDUX dbeta), + (R y) when a->relu
static void bn_bwd_cpu(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = cl_arg;
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == (a->relu ? 8 : 7));
	STARPU_ASSERT(NX(0) == nx && NX(1) == C && NX(2) == 3 * C && NX(3) == nx && NX(4) == nx &&
		      NX(5) == C && NX(6) == C && XSIZE_OK(0));
	if (a->relu) {
		STARPU_ASSERT(NX(7) == nx && YSIZE_OK(7));
		dnn_batchnorm_relu_backward_cpu(PTR(4), PTR(5), PTR(6), XPTR(0), PTR(1), PTR(2), PTR(3), YPTR(7), a);
	} else {
		dnn_batchnorm_backward_cpu(PTR(4), PTR(5), PTR(6), XPTR(0), PTR(1), PTR(2), PTR(3), a);
	}
}

#define DPTR(i) ((double *)STARPU_VECTOR_GET_PTR(buffers[i]))

// (R x, REDUX or RW sums)
static void bn_sums_fwd_cpu(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = cl_arg;
	STARPU_ASSERT(NX(0) == (size_t)a->N * a->C * a->HW && NX(1) == 2 * (size_t)a->C && XSIZE_OK(0));
	dnn_batchnorm_sums_fwd_cpu(DPTR(1), XPTR(0), a);
}

// (R x, R gamma, R beta, R sums, W y, W saved)
static void bn_fwd_global_cpu(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = cl_arg;
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(NX(0) == nx && NX(1) == C && NX(2) == C && NX(3) == 2 * C && NX(4) == nx && NX(5) == 3 * C &&
		      YSIZE_OK(4) && XSIZE_OK(0));
	dnn_batchnorm_forward_global_cpu(YPTR(4), PTR(5), XPTR(0), PTR(1), PTR(2), DPTR(3), a);
}

// (R x, R saved, R dy, REDUX or RW sums, dgamma, dbeta), + (R y) when a->relu
static void bn_sums_bwd_cpu(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = cl_arg;
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(NX(0) == nx && NX(1) == 3 * C && NX(2) == nx && NX(3) == 2 * C && NX(4) == C && NX(5) == C &&
		      XSIZE_OK(0));
	STARPU_ASSERT(!a->relu || (NX(6) == nx && YSIZE_OK(6)));
	dnn_batchnorm_sums_bwd_cpu(DPTR(3), PTR(4), PTR(5), XPTR(0), PTR(1), PTR(2), a->relu ? YPTR(6) : NULL, a);
}

// (R x, R gamma, R saved, R dy, R sums, W|RW dx), + (R y) when a->relu
static void bn_bwd_global_cpu(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = cl_arg;
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(NX(0) == nx && NX(1) == C && NX(2) == 3 * C && NX(3) == nx && NX(4) == 2 * C && NX(5) == nx &&
		      XSIZE_OK(0));
	STARPU_ASSERT(!a->relu || (NX(6) == nx && YSIZE_OK(6)));
	dnn_batchnorm_backward_global_cpu(PTR(5), XPTR(0), PTR(1), PTR(2), PTR(3), a->relu ? YPTR(6) : NULL, DPTR(4),
					  a);
}

static void bn_dsum_zero_cpu(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	memset(DPTR(0), 0, NX(0) * sizeof(double));
}

static void bn_dsum_add_cpu(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	STARPU_ASSERT(NX(0) == NX(1));
	double *dst = DPTR(0);
	const double *src = DPTR(1);
	for (size_t i = 0; i < NX(0); i++)
		dst[i] += src[i];
}
#undef DPTR

#undef NX
#undef PTR
#undef YPTR
#undef YSIZE_OK
#undef XPTR
#undef XSIZE_OK

DNN_CODELET(cl_batchnorm_fwd_train, 5, bn_fwd_train_cpu, dnn_batchnorm_fwd_train_cuda);
DNN_CODELET(cl_batchnorm_fwd_eval, 5, bn_fwd_eval_cpu, dnn_batchnorm_fwd_eval_cuda);
DNN_CODELET(cl_batchnorm_running, 2, bn_running_cpu, dnn_batchnorm_running_cuda);
/* The backward's modes (dx W or RW, dgamma/dbeta REDUX or RW) are chosen per task; 7 buffers, 8
 * with the fused ReLU. */
DNN_CODELET(cl_batchnorm_bwd, 8, bn_bwd_cpu, dnn_batchnorm_bwd_cuda);

DNN_CODELET(cl_batchnorm_sums_fwd, 2, bn_sums_fwd_cpu, dnn_batchnorm_sums_fwd_cuda);
DNN_CODELET(cl_batchnorm_fwd_global, 6, bn_fwd_global_cpu, dnn_batchnorm_fwd_global_cuda);
DNN_CODELET(cl_batchnorm_sums_bwd, 7, bn_sums_bwd_cpu, dnn_batchnorm_sums_bwd_cuda);
DNN_CODELET(cl_batchnorm_bwd_global, 7, bn_bwd_global_cpu, dnn_batchnorm_bwd_global_cuda);

/* The REDUX methods of the double sums (StarPU calls them with these fixed modes), as vec.c's
 * cl_vec_zero / cl_vec_redux_add (asynchronous on CUDA, the simulation build included: vec.c
 * says why that once differed). */
#define BN_REDUX_CUDA_FLAGS STARPU_CUDA_ASYNC
static struct starpu_perfmodel bn_dsum_zero_model = {.type = STARPU_HISTORY_BASED, .symbol = "dnn_cl_bn_dsum_zero"};
static struct starpu_perfmodel bn_dsum_add_model = {.type = STARPU_HISTORY_BASED, .symbol = "dnn_cl_bn_dsum_add"};
struct starpu_codelet cl_bn_dsum_zero = {
	.name = "cl_bn_dsum_zero",
	.cpu_funcs = {bn_dsum_zero_cpu},
	.cpu_funcs_name = {"bn_dsum_zero_cpu"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_bn_dsum_zero_cuda)},
	.cuda_flags = {BN_REDUX_CUDA_FLAGS},
	.nbuffers = 1,
	.modes = {STARPU_W},
	.model = &bn_dsum_zero_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_bn_dsum_zero);
struct starpu_codelet cl_bn_dsum_redux_add = {
	.name = "cl_bn_dsum_redux_add",
	.cpu_funcs = {bn_dsum_add_cpu},
	.cpu_funcs_name = {"bn_dsum_add_cpu"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_bn_dsum_add_cuda)},
	.cuda_flags = {BN_REDUX_CUDA_FLAGS},
	.nbuffers = 2,
	.modes = {STARPU_RW | STARPU_COMMUTE, STARPU_R},
	.model = &bn_dsum_add_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_bn_dsum_redux_add);
/* The same add, modes at insert time (a REDUX target refuses a codelet whose static mode is
 * RW|COMMUTE: vec.c's cl_vec_add says why). */
struct starpu_codelet cl_bn_dsum_add = {
	.name = "cl_bn_dsum_add",
	.cpu_funcs = {bn_dsum_add_cpu},
	.cpu_funcs_name = {"bn_dsum_add_cpu"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_bn_dsum_add_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = STARPU_VARIABLE_NBUFFERS,
	.model = &bn_dsum_add_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_bn_dsum_add);

void dnn_bn_set_dsum_redux(starpu_data_handle_t h)
{
	starpu_data_set_reduction_methods(h, &cl_bn_dsum_redux_add, &cl_bn_dsum_zero);
}

DNN_ARGS_NO_PADDING(dnn_batchnorm_args, 8 * sizeof(int) + 2 * sizeof(float));

static double elems(const dnn_batchnorm_args *a) { return (double)a->N * a->C * a->HW; }

int dnn_insert_batchnorm_fwd_train(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x,
				    starpu_data_handle_t gamma, starpu_data_handle_t beta,
				    starpu_data_handle_t y, starpu_data_handle_t saved)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_batchnorm_fwd_train, a->relu ? "bn_relu_fwd_train" : "bn_fwd_train", a, STARPU_R, x, STARPU_R, gamma,
					    STARPU_R, beta, STARPU_W, y, STARPU_W, saved, STARPU_FLOPS, (a->relu ? 8.0 : 7.0) * elems(a),
					    STARPU_TASK_COLOR, (int)DNN_COLOR_BN_FWD);
}

int dnn_insert_batchnorm_fwd_eval(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x,
				   starpu_data_handle_t gamma, starpu_data_handle_t beta,
				   starpu_data_handle_t running, starpu_data_handle_t y)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_batchnorm_fwd_eval, a->relu ? "bn_relu_fwd_eval" : "bn_fwd_eval", a, STARPU_R, x, STARPU_R, gamma,
					    STARPU_R, beta, STARPU_R, running, STARPU_W, y, STARPU_FLOPS, (a->relu ? 4.0 : 3.0) * elems(a),
					    STARPU_TASK_COLOR, (int)DNN_COLOR_BN_FWD);
}

int dnn_insert_batchnorm_running(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t saved,
				  starpu_data_handle_t running)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_batchnorm_running, "bn_running", a, STARPU_R, saved, STARPU_RW, running, STARPU_FLOPS, 7.0 * a->C,
					    STARPU_TASK_COLOR, (int)DNN_COLOR_BN_FWD);
}

int dnn_insert_batchnorm_bwd(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x, starpu_data_handle_t gamma,
			      starpu_data_handle_t saved, starpu_data_handle_t dy, starpu_data_handle_t dx,
			      starpu_data_handle_t dgamma, starpu_data_handle_t dbeta, int grad_mode)
{
	if (a->relu) // the fused backward: dnn_insert_batchnorm_relu_bwd
		return -EINVAL;
	int dx_mode = a->accumulate_dx ? STARPU_RW : STARPU_W;
	return DNN_TASK_INSERT_ARGS(o, &cl_batchnorm_bwd, "bn_bwd", a, STARPU_R, x, STARPU_R, gamma,
					    STARPU_R, saved, STARPU_R, dy, dx_mode, dx,
					    grad_mode, dgamma, grad_mode, dbeta, STARPU_FLOPS, 12.0 * elems(a),
					    STARPU_TASK_COLOR, (int)DNN_COLOR_BN_BWD);
}

int dnn_insert_batchnorm_relu_bwd(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x, starpu_data_handle_t gamma,
				   starpu_data_handle_t saved, starpu_data_handle_t dy, starpu_data_handle_t y,
				   starpu_data_handle_t dx, starpu_data_handle_t dgamma, starpu_data_handle_t dbeta,
				   int grad_mode)
{
	if (!a->relu)
		return -EINVAL;
	int dx_mode = a->accumulate_dx ? STARPU_RW : STARPU_W;
	return DNN_TASK_INSERT_ARGS(o, &cl_batchnorm_bwd, "bn_relu_bwd", a, STARPU_R, x, STARPU_R, gamma,
					    STARPU_R, saved, STARPU_RW, dy, dx_mode, dx,
					    grad_mode, dgamma, grad_mode, dbeta, STARPU_R, y, STARPU_FLOPS, 13.0 * elems(a),
					    STARPU_TASK_COLOR, (int)DNN_COLOR_BN_BWD);
}

int dnn_insert_bn_dsum_zero(const dnn_task_opts *o, starpu_data_handle_t dst)
{
	return DNN_TASK_INSERT(o, &cl_bn_dsum_zero, "bn_sums_zero", STARPU_W, dst, STARPU_TASK_COLOR, (int)DNN_COLOR_REDUX);
}

int dnn_insert_bn_dsum_add(const dnn_task_opts *o, starpu_data_handle_t dst, int dst_mode, starpu_data_handle_t src)
{
	return DNN_TASK_INSERT(o, &cl_bn_dsum_add, "bn_sums_add", dst_mode, dst, STARPU_R, src, STARPU_TASK_COLOR,
			       (int)DNN_COLOR_REDUX);
}

int dnn_insert_batchnorm_sums_fwd(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x,
				   starpu_data_handle_t sums, int mode)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_batchnorm_sums_fwd, "bn_sums_fwd", a, STARPU_R, x, mode, sums,
				    STARPU_FLOPS, 5.0 * elems(a), STARPU_TASK_COLOR, (int)DNN_COLOR_BN_FWD);
}

int dnn_insert_batchnorm_fwd_global(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x,
				     starpu_data_handle_t gamma, starpu_data_handle_t beta, starpu_data_handle_t sums,
				     starpu_data_handle_t y, starpu_data_handle_t saved)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_batchnorm_fwd_global, a->relu ? "bn_relu_fwd_global" : "bn_fwd_global", a,
				    STARPU_R, x, STARPU_R, gamma, STARPU_R, beta, STARPU_R, sums, STARPU_W, y, STARPU_W,
				    saved, STARPU_FLOPS, (a->relu ? 3.0 : 2.0) * elems(a), STARPU_TASK_COLOR,
				    (int)DNN_COLOR_BN_FWD);
}

int dnn_insert_batchnorm_sums_bwd(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x,
				   starpu_data_handle_t saved, starpu_data_handle_t dy, starpu_data_handle_t y,
				   starpu_data_handle_t sums, starpu_data_handle_t dgamma, starpu_data_handle_t dbeta, int mode)
{
	if (!a->relu != !y)
		return -EINVAL;
	if (a->relu)
		return DNN_TASK_INSERT_ARGS(o, &cl_batchnorm_sums_bwd, "bn_relu_sums_bwd", a, STARPU_R, x, STARPU_R, saved,
					    STARPU_R, dy, mode, sums, mode, dgamma, mode, dbeta, STARPU_R, y, STARPU_FLOPS, 5.0 * elems(a), STARPU_TASK_COLOR,
					    (int)DNN_COLOR_BN_BWD);
	return DNN_TASK_INSERT_ARGS(o, &cl_batchnorm_sums_bwd, "bn_sums_bwd", a, STARPU_R, x, STARPU_R, saved, STARPU_R,
				    dy, mode, sums, mode, dgamma, mode, dbeta, STARPU_FLOPS,
				    4.0 * elems(a), STARPU_TASK_COLOR, (int)DNN_COLOR_BN_BWD);
}

int dnn_insert_batchnorm_bwd_global(const dnn_task_opts *o, const dnn_batchnorm_args *a, starpu_data_handle_t x,
				     starpu_data_handle_t gamma, starpu_data_handle_t saved, starpu_data_handle_t dy,
				     starpu_data_handle_t y, starpu_data_handle_t sums, starpu_data_handle_t dx)
{
	if (!a->relu != !y)
		return -EINVAL;
	const int dx_mode = a->accumulate_dx ? STARPU_RW : STARPU_W;
	if (a->relu)
		return DNN_TASK_INSERT_ARGS(o, &cl_batchnorm_bwd_global, "bn_relu_bwd_global", a, STARPU_R, x, STARPU_R,
					    gamma, STARPU_R, saved, STARPU_R, dy, STARPU_R, sums, dx_mode, dx, STARPU_R, y,
					    STARPU_FLOPS, 7.0 * elems(a), STARPU_TASK_COLOR, (int)DNN_COLOR_BN_BWD);
	return DNN_TASK_INSERT_ARGS(o, &cl_batchnorm_bwd_global, "bn_bwd_global", a, STARPU_R, x, STARPU_R, gamma,
				    STARPU_R, saved, STARPU_R, dy, STARPU_R, sums, dx_mode, dx, STARPU_FLOPS,
				    6.0 * elems(a), STARPU_TASK_COLOR, (int)DNN_COLOR_BN_BWD);
}
