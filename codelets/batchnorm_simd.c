/* batchnorm_simd.c — AVX2 versions of batchnorm.c's training forward and local backward
 * (batchnorm_simd.h). Each function mirrors its portable counterpart in batchnorm.c operation
 * for operation:
 *   - a row's 8-lane partial sums (lane_sum, lane_sqdev, the backward's s1/s2) are one __m256,
 *     lane j summing elements i + j in increasing i; the tail (HW % 8 elements) goes into lane 0
 *     in order, then fold8 folds the lanes into a double as there;
 *   - rows are added into the channel's double sums in increasing n. Two rows are summed side by
 *     side (independent registers, so the loop is not bound by one chain of adds' latency) and
 *     folded in order, which keeps every sum's order;
 *   - no FMA (the target is "avx2" only): every product and sum is rounded on its own, as in
 *     the portable loops, which the compiler cannot contract either (x86-64's baseline has no
 *     FMA); the relu mask is the same compare (y > 0, false for NaN) and AND.
 * the op harness (tests/op_cases.c, the batchnorm row) checks the two bit for bit. */
#include "batchnorm_simd.h"
#include "act_formulas.h"
#include "bn_formulas.h"
#include "gemm_bf16.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static int bn_simd = -1; // -1: not chosen yet

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

int dnn_batchnorm_set_simd(int on)
{
	__builtin_cpu_init();
	bn_simd = on && __builtin_cpu_supports("avx2");
	return bn_simd;
}

/* As batchnorm.c's fold8. */
static inline double fold8(const float s[8])
{
	return (double)((s[0] + s[4]) + (s[1] + s[5])) + (double)((s[2] + s[6]) + (s[3] + s[7]));
}

/* The lanes of v with the tail p[i0..n) added into lane 0, folded (lane_sum's ending). */
__attribute__((target("avx2"))) static inline double fold_tail(__m256 v, const float *p, int i0, int n)
{
	float s[8];
	_mm256_storeu_ps(s, v);
	for (int i = i0; i < n; i++)
		s[0] += p[i];
	return fold8(s);
}

/* lane_sum of two rows p, q of n floats: *a, *b. */
__attribute__((target("avx2"))) static inline void sum2(double *a, double *b, const float *p, const float *q, int n)
{
	__m256 s = _mm256_setzero_ps(), t = _mm256_setzero_ps();
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		s = _mm256_add_ps(s, _mm256_loadu_ps(p + i));
		t = _mm256_add_ps(t, _mm256_loadu_ps(q + i));
	}
	*a = fold_tail(s, p, i, n);
	*b = fold_tail(t, q, i, n);
}

/* lane_sqdev of two rows about m: sum (p - m)^2, sum (q - m)^2. */
__attribute__((target("avx2"))) static inline void sqdev2(double *a, double *b, const float *p, const float *q, int n,
							float m)
{
	const __m256 vm = _mm256_set1_ps(m);
	__m256 s = _mm256_setzero_ps(), t = _mm256_setzero_ps();
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 d = _mm256_sub_ps(_mm256_loadu_ps(p + i), vm), e = _mm256_sub_ps(_mm256_loadu_ps(q + i), vm);
		s = _mm256_add_ps(s, _mm256_mul_ps(d, d));
		t = _mm256_add_ps(t, _mm256_mul_ps(e, e));
	}
	float ls[8], lt[8];
	_mm256_storeu_ps(ls, s);
	_mm256_storeu_ps(lt, t);
	for (int j = i; j < n; j++) {
		float d = p[j] - m, e = q[j] - m;
		ls[0] += d * d;
		lt[0] += e * e;
	}
	*a = fold8(ls);
	*b = fold8(lt);
}

/* normalise_plane: y = (x - m) * scale + b, then max(y, 0) with relu; y in bf16 (yh, rounded as
 * dnn_bf16_convert) in blocks of an L1-resident float buffer when yh is given (yp then unused). */
__attribute__((target("avx2"))) static inline void normalise(float *restrict yp, const float *restrict xp, int HW, float m,
							   float scale, float b, int relu)
{
	const __m256 vm = _mm256_set1_ps(m), vs = _mm256_set1_ps(scale), vb = _mm256_set1_ps(b);
	const __m256 z = _mm256_setzero_ps();
	int i = 0;
	for (; i + 8 <= HW; i += 8) {
		__m256 t = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xp + i), vm), vs), vb);
		_mm256_storeu_ps(yp + i, relu ? _mm256_max_ps(t, z) : t); // t > 0 ? t : 0 (NaN, -0 -> +0)
	}
	for (; i < HW; i++) {
		float t = dnn_bn_normalise(xp[i], m, scale, b);
		yp[i] = relu ? dnn_act_relu(t) : t;
	}
}

__attribute__((target("avx2"))) static void normalise_out(float *yp, uint16_t *yh, const float *xp, int HW, float m,
							  float scale, float b, int relu)
{
	if (!yh) {
		normalise(yp, xp, HW, m, scale, b, relu);
		return;
	}
	float t[DNN_BN_BF16_BLOCK];
	for (int i = 0; i < HW; i += DNN_BN_BF16_BLOCK) {
		const int k = HW - i < DNN_BN_BF16_BLOCK ? HW - i : DNN_BN_BF16_BLOCK;
		normalise(t, xp + i, k, m, scale, b, relu);
		dnn_bf16_convert(yh + i, t, (size_t)k);
	}
}

__attribute__((target("avx2"))) void dnn_bn_forward_train_avx2(void *y, float *saved, const float *x,
								const float *gamma, const float *beta,
								const dnn_batchnorm_args *a)
{
	const int N = a->N, C = a->C, HW = a->HW;
	const double M = (double)N * HW;
	const size_t cs = (size_t)C * HW; // floats from one image's plane to the next's
	for (int c = 0; c < C; c++) {
		const float *xc = x + (size_t)c * HW;
		double sum = 0, r0, r1;
		int n = 0;
		for (; n + 2 <= N; n += 2) {
			sum2(&r0, &r1, xc + n * cs, xc + (n + 1) * cs, HW);
			sum += r0;
			sum += r1;
		}
		if (n < N) {
			sum2(&r0, &r1, xc + n * cs, xc + n * cs, HW);
			sum += r0;
		}
		double mean = sum / M, ss = 0;
		float m = (float)mean;
		for (n = 0; n + 2 <= N; n += 2) {
			sqdev2(&r0, &r1, xc + n * cs, xc + (n + 1) * cs, HW, m);
			ss += r0;
			ss += r1;
		}
		if (n < N) {
			sqdev2(&r0, &r1, xc + n * cs, xc + n * cs, HW, m);
			ss += r0;
		}
		double invstd = dnn_bn_store_channel_stats(saved, C, c, mean, m, ss, M, a->eps);
		float scale = gamma[c] * (float)invstd, b = beta[c];
		for (n = 0; n < N; n++) {
			const size_t o = n * cs + (size_t)c * HW;
			normalise_out(a->y_bf16 ? NULL : (float *)y + o, a->y_bf16 ? (uint16_t *)y + o : NULL, xc + n * cs,
				      HW, m, scale, b, a->relu);
		}
	}
}

/* The relu output y at offset o: fp32 (f) or bf16 (h, a->y_bf16), or neither (not fused). */
typedef struct {
	const float *f;
	const uint16_t *h;
} relu_y;

static inline relu_y relu_y_at(const void *yr, int y_bf16, size_t o)
{
	relu_y r = {NULL, NULL};
	if (yr && y_bf16)
		r.h = (const uint16_t *)yr + o;
	else if (yr)
		r.f = (const float *)yr + o;
	return r;
}

/* The gradient g of 8 elements: dy, masked by y > 0 when y is given (relu_mask); a bf16 y widened exactly. */
__attribute__((target("avx2"))) static inline __m256 grad8(const float *dyp, relu_y y, int i)
{
	__m256 g = _mm256_loadu_ps(dyp + i);
	if (y.f)
		g = _mm256_and_ps(g, _mm256_cmp_ps(_mm256_loadu_ps(y.f + i), _mm256_setzero_ps(), _CMP_GT_OQ));
	else if (y.h) {
		const __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(y.h + i))), 16);
		g = _mm256_and_ps(g, _mm256_cmp_ps(_mm256_castsi256_ps(w), _mm256_setzero_ps(), _CMP_GT_OQ));
	}
	return g;
}

static inline float grad1(const float *dyp, relu_y y, int i)
{
	float g = dyp[i];
	if ((y.f && !(y.f[i] > 0.0f)) || (y.h && !(dnn_bf16_to_f32(y.h[i]) > 0.0f))) { // relu_mask: g's bits ANDed with 0
		uint32_t bits;
		memcpy(&bits, &g, sizeof(bits));
		bits = 0;
		memcpy(&g, &bits, sizeof(g));
	}
	return g;
}

/* The backward's sums of one row: s1 += sum g, s2 += sum g (x - mean), 8 lanes, tail in lane 0. */
typedef struct {
	float s1[8], s2[8];
} row_sums;

/* Rows p and q (offsets into x, dy, yr) side by side. */
__attribute__((target("avx2"))) static inline void grad_sums2(row_sums *rp, row_sums *rq, const float *x,
							    const float *dy, const void *yr, int y_bf16, size_t p,
							    size_t q, int HW, float mean)
{
	const __m256 vm = _mm256_set1_ps(mean);
	__m256 a1 = _mm256_setzero_ps(), a2 = a1, b1 = a1, b2 = a1;
	const relu_y yp = relu_y_at(yr, y_bf16, p), yq = relu_y_at(yr, y_bf16, q);
	int i = 0;
	for (; i + 8 <= HW; i += 8) {
		__m256 g = grad8(dy + p, yp, i), h = grad8(dy + q, yq, i);
		a1 = _mm256_add_ps(a1, g);
		a2 = _mm256_add_ps(a2, _mm256_mul_ps(g, _mm256_sub_ps(_mm256_loadu_ps(x + p + i), vm)));
		b1 = _mm256_add_ps(b1, h);
		b2 = _mm256_add_ps(b2, _mm256_mul_ps(h, _mm256_sub_ps(_mm256_loadu_ps(x + q + i), vm)));
	}
	_mm256_storeu_ps(rp->s1, a1), _mm256_storeu_ps(rp->s2, a2);
	_mm256_storeu_ps(rq->s1, b1), _mm256_storeu_ps(rq->s2, b2);
	for (; i < HW; i++) {
		float g = grad1(dy + p, yp, i), h = grad1(dy + q, yq, i);
		rp->s1[0] += g;
		rp->s2[0] += g * (x[p + i] - mean);
		rq->s1[0] += h;
		rq->s2[0] += h * (x[q + i] - mean);
	}
}

/* dx (=, or += with acc) = k g + (x - mean) kx + k0 over one row at offset o. */
__attribute__((target("avx2"))) static inline void row_dx(float *dx, const float *x, const float *dy, const void *yr,
							int y_bf16, size_t o, int HW, float mean, float k, float kx,
							float k0, int acc)
{
	const __m256 vm = _mm256_set1_ps(mean), vk = _mm256_set1_ps(k), vkx = _mm256_set1_ps(kx);
	const __m256 vk0 = _mm256_set1_ps(k0);
	const relu_y yp = relu_y_at(yr, y_bf16, o);
	float *restrict dxp = dx + o;
	int i = 0;
	for (; i + 8 <= HW; i += 8) {
		__m256 g = grad8(dy + o, yp, i);
		__m256 t = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(vk, g),
						       _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + o + i), vm), vkx)),
					 vk0);
		_mm256_storeu_ps(dxp + i, acc ? _mm256_add_ps(_mm256_loadu_ps(dxp + i), t) : t);
	}
	for (; i < HW; i++) {
		float g = grad1(dy + o, yp, i), t = dnn_bn_dx(g, x[o + i], mean, k, kx, k0);
		dxp[i] = acc ? dxp[i] + t : t;
	}
}

__attribute__((target("avx2"))) void dnn_bn_backward_avx2(float *dx, float *dgamma, float *dbeta, const float *x,
							   const float *gamma, const float *saved, const float *dy,
							   const void *yr, const dnn_batchnorm_args *a)
{
	const int N = a->N, C = a->C, HW = a->HW;
	const double M = (double)N * HW;
	const size_t cs = (size_t)C * HW;
	for (int c = 0; c < C; c++) {
		const float mean = saved[c], invstd = saved[2 * C + c];
		double sdy = 0, sdyx = 0; // sum(dy), sum(dy * xhat)
		row_sums rp, rq;
		int n = 0;
		for (; n + 2 <= N; n += 2) {
			grad_sums2(&rp, &rq, x, dy, yr, a->y_bf16, n * cs + (size_t)c * HW, (n + 1) * cs + (size_t)c * HW,
				   HW, mean);
			sdy += fold8(rp.s1);
			sdyx += fold8(rp.s2);
			sdy += fold8(rq.s1);
			sdyx += fold8(rq.s2);
		}
		if (n < N) {
			const size_t o = n * cs + (size_t)c * HW;
			grad_sums2(&rp, &rq, x, dy, yr, a->y_bf16, o, o, HW, mean);
			sdy += fold8(rp.s1);
			sdyx += fold8(rp.s2);
		}
		sdyx *= invstd;
		dbeta[c] += (float)sdy;
		dgamma[c] += (float)sdyx;
		float k, kx, k0;
		dnn_bn_dx_coefs(&k, &kx, &k0, gamma[c], invstd, (float)(sdy / M), (float)(sdyx / M));
		for (n = 0; n < N; n++)
			row_dx(dx, x, dy, yr, a->y_bf16, n * cs + (size_t)c * HW, HW, mean, k, kx, k0, a->accumulate_dx);
	}
}

int dnn_batchnorm_simd(void)
{
	if (bn_simd < 0)
		dnn_batchnorm_set_simd(1);
	return bn_simd;
}
#else
int dnn_batchnorm_set_simd(int on)
{
	(void)on;
	bn_simd = 0;
	return 0;
}

int dnn_batchnorm_simd(void) { return 0; }

void dnn_bn_forward_train_avx2(void *y, float *saved, const float *x, const float *gamma, const float *beta,
			       const dnn_batchnorm_args *a)
{
	(void)y, (void)saved, (void)x, (void)gamma, (void)beta, (void)a; // unreachable: dnn_batchnorm_simd() is 0
}

void dnn_bn_backward_avx2(float *dx, float *dgamma, float *dbeta, const float *x, const float *gamma,
			  const float *saved, const float *dy, const void *yr, const dnn_batchnorm_args *a)
{
	(void)dx, (void)dgamma, (void)dbeta, (void)x, (void)gamma, (void)saved, (void)dy, (void)yr, (void)a;
}
#endif
