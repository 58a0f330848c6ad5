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
 *     FMA); the relu mask is the same compare (y > 0, false for NaN) and AND;
 *   - a bf16 x (a->x_bf16) is widened in registers as it is loaded (zero-extend, shift left 16: exact), so every
 *     loop gives the bits it gives on the widened fp32 x; each function has a version per input type (XB, a
 *     literal), as the portable loops do;
 *   - a bf16 y (a->y_bf16) is rounded in registers before the store, with dnn_bf16_convert's rounding: its
 *     instruction, vcvtneps2bf16, where it runs it (normalise_cvtne, the one loop compiled for AVX512_BF16: no FMA
 *     either), else dnn_f32_to_bf16's integer arithmetic (bf16_round8); not normalised into a block and rounded
 *     in a second pass as the portable loops do.
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

/* x's 8 elements from i on, fp32 (XB 0) or bf16 widened exactly (XB 1: zero-extend, shift left 16). */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m256 ld8(const void *p, size_t i,
											 const int XB)
{
	if (!XB)
		return _mm256_loadu_ps((const float *)p + i);
	const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
	return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* x's element i (the tails), as ld8 */
static inline float ld1(const void *p, size_t i, const int XB)
{
	return XB ? dnn_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* x + off elements of its type */
static inline const void *xoff(const void *p, size_t off, const int XB)
{
	return XB ? (const void *)((const uint16_t *)p + off) : (const void *)((const float *)p + off);
}

/* 8 floats rounded to bf16 as dnn_f32_to_bf16 rounds them (dnn_bf16_convert without vcvtneps2bf16, gemm_bf16.h):
 * round to nearest even by its integer arithmetic (u + 0x7fff + lsb(u >> 16), >> 16; NaN: u's high half with the
 * quiet bit set; infinities stay; denormals kept). About 20 instructions per 8 values: where the CPU has
 * vcvtneps2bf16, dnn_bf16_convert runs it and so does the normalisation (normalise_cvtne). tests/op_bf16.c compares
 * both with dnn_bf16_convert on every bf16 value's neighbourhood. */
__attribute__((target("avx2"))) static inline __m128i bf16_round8(__m256 v)
{
	const __m256i u = _mm256_castps_si256(v), exp = _mm256_set1_epi32(0x7f800000);
	const __m256i hi = _mm256_srli_epi32(u, 16);
	const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
	const __m256i up = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
	const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), exp);
	const __m256i r = _mm256_blendv_epi8(up, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
	/* 8 values < 2^16 in 32-bit lanes -> 8 16-bit lanes: pack per 128-bit half, then the halves' low quads */
	return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
}

/* Whether dnn_bf16_convert runs vcvtneps2bf16 now (gemm_bf16.c's to_bf16: oneDNN's path on a CPU with
 * AVX512_BF16), which flushes denormal inputs to zero: asked once per task. */
static inline int bf16_convert_cvtne(void) { return dnn_gemm_bf16_simd() && dnn_cpu_has_bf16(); }

/* AVX-512F brings FMA instructions, which GCC would contract mul + add into (other bits than the portable loops):
 * these functions are compiled without contraction. */
#define BN_BF16_TARGET __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512bf16"), optimize("fp-contract=off")))

BN_BF16_TARGET static void convert_cvtne(uint16_t *dst, const float *src, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(dst + i), (__m128i)_mm256_cvtneps_pbh(_mm256_loadu_ps(src + i)));
	if (i < n)
		dnn_bf16_convert(dst + i, src + i, n - i);
}

__attribute__((target("avx2"))) void dnn_bn_bf16_convert_avx2(uint16_t *dst, const float *src, size_t n)
{
	if (bf16_convert_cvtne()) {
		convert_cvtne(dst, src, n);
		return;
	}
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(dst + i), bf16_round8(_mm256_loadu_ps(src + i)));
	if (i < n)
		dnn_bf16_convert(dst + i, src + i, n - i);
}

/* The lanes of v with the tail p[i0..n) added into lane 0, folded (lane_sum's ending). */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) double
fold_tail(__m256 v, const void *p, int i0, int n, const int XB)
{
	float s[8];
	_mm256_storeu_ps(s, v);
	for (int i = i0; i < n; i++)
		s[0] += ld1(p, i, XB);
	return fold8(s);
}

/* fold8 of two rows' lanes s and t at once, in registers rather than through the stack and 7 scalar adds per row (the
 * fold is per row: at 8x8 a row is 8 vectors): the same adds in the same order, s_j + s_j+4 first (vaddps of the
 * halves), then (s0 + s4) + (s1 + s5) and (s2 + s6) + (s3 + s7) (vhaddps: first operand the lower lane, as there),
 * widened, added in double. Measured 0-5% off the kernels at ResNet-20's shapes, within the noise in a training step
 * (docs/studies/2026-12-07-bnfp32.md). */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void fold2(double *a, double *b, __m256 s,
											 __m256 t)
{
	const __m128 hs = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
	const __m128 ht = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
	const __m256d d = _mm256_cvtps_pd(_mm_hadd_ps(hs, ht)); // the two rows' two partial sums
	const __m256d e = _mm256_hadd_pd(d, d);                  // lanes 0 and 2: row s's, row t's
	*a = _mm256_cvtsd_f64(e);
	*b = _mm_cvtsd_f64(_mm256_extractf128_pd(e, 1));
}

/* lane_sum of two rows p, q of n elements: *a, *b. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
sum2(double *a, double *b, const void *p, const void *q, int n, const int XB)
{
	__m256 s = _mm256_setzero_ps(), t = _mm256_setzero_ps();
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		s = _mm256_add_ps(s, ld8(p, i, XB));
		t = _mm256_add_ps(t, ld8(q, i, XB));
	}
	if (i == n) {
		fold2(a, b, s, t);
		return;
	}
	*a = fold_tail(s, p, i, n, XB);
	*b = fold_tail(t, q, i, n, XB);
}

/* lane_sqdev of two rows about m: sum (p - m)^2, sum (q - m)^2. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
sqdev2(double *a, double *b, const void *p, const void *q, int n, float m, const int XB)
{
	const __m256 vm = _mm256_set1_ps(m);
	__m256 s = _mm256_setzero_ps(), t = _mm256_setzero_ps();
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 d = _mm256_sub_ps(ld8(p, i, XB), vm), e = _mm256_sub_ps(ld8(q, i, XB), vm);
		s = _mm256_add_ps(s, _mm256_mul_ps(d, d));
		t = _mm256_add_ps(t, _mm256_mul_ps(e, e));
	}
	if (i == n) {
		fold2(a, b, s, t);
		return;
	}
	float ls[8], lt[8];
	_mm256_storeu_ps(ls, s);
	_mm256_storeu_ps(lt, t);
	for (int j = i; j < n; j++) {
		float d = ld1(p, j, XB) - m, e = ld1(q, j, XB) - m;
		ls[0] += d * d;
		lt[0] += e * e;
	}
	*a = fold8(ls);
	*b = fold8(lt);
}

/* The scalar end (elements i .. HW - 1, fewer than 8) of normalise and normalise_cvtne: the shared formulas, into
 * yp, or rounded into yh by dnn_bf16_convert when yh is given. */
static inline __attribute__((always_inline)) void normalise_tail(float *restrict yp, uint16_t *restrict yh,
								 const void *xp, int i, int HW, float m, float scale,
								 float b, int relu, const int XB)
{
	if (i == HW)
		return;
	float tail[8];
	const int k = HW - i;
	for (int j = 0; j < k; j++) {
		float t = dnn_bn_normalise(ld1(xp, i + j, XB), m, scale, b);
		tail[j] = relu ? dnn_act_relu(t) : t;
	}
	if (yh)
		dnn_bf16_convert(yh + i, tail, (size_t)k);
	else
		memcpy(yp + i, tail, (size_t)k * sizeof(float));
}

/* normalise_plane: y = (x - m) * scale + b, then max(y, 0) with relu, into yp (fp32) or, when yh is given, into
 * yh in bf16, rounded in registers by dnn_f32_to_bf16's arithmetic (bf16_round8; the tail by dnn_bf16_convert
 * itself). */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
normalise(float *restrict yp, uint16_t *restrict yh, const void *xp, int HW, float m, float scale, float b, int relu,
	  const int XB)
{
	const __m256 vm = _mm256_set1_ps(m), vs = _mm256_set1_ps(scale), vb = _mm256_set1_ps(b);
	const __m256 z = _mm256_setzero_ps();
	int i = 0;
	for (; i + 8 <= HW; i += 8) {
		__m256 t = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(ld8(xp, i, XB), vm), vs), vb);
		if (relu)
			t = _mm256_max_ps(t, z); // t > 0 ? t : 0 (NaN, -0 -> +0)
		if (yh)
			_mm_storeu_si128((__m128i *)(yh + i), bf16_round8(t));
		else
			_mm256_storeu_ps(yp + i, t);
	}
	normalise_tail(yp, yh, xp, i, HW, m, scale, b, relu, XB);
}

/* normalise into a bf16 y with vcvtneps2bf16 (where dnn_bf16_convert runs it): the same operations as normalise,
 * compiled for AVX512_BF16 (which brings no FMA to contract with: the same bits), one call per plane. */
BN_BF16_TARGET static inline __attribute__((always_inline)) void
normalise_cvtne(uint16_t *restrict yh, const void *xp, int HW, float m, float scale, float b, int relu, const int XB)
{
	/* 16 lanes first: a bf16 x's widening (vpmovzxwd) and the rounding (vcvtneps2bf16) each take a shuffle, which
	 * bounded the 8-lane loop (14% slower than the fp32 forward at ResNet-20's shapes); per element it is the same
	 * arithmetic */
	const __m512 wm = _mm512_set1_ps(m), ws = _mm512_set1_ps(scale), wb = _mm512_set1_ps(b);
	const __m512 wz = _mm512_setzero_ps();
	int i = 0;
	for (; i + 16 <= HW; i += 16) {
		__m512 x16;
		if (XB) {
			const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)xp + i));
			x16 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
		} else
			x16 = _mm512_loadu_ps((const float *)xp + i);
		__m512 t = _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(x16, wm), ws), wb);
		if (relu)
			t = _mm512_max_ps(t, wz);
		_mm256_storeu_si256((__m256i *)(yh + i), (__m256i)_mm512_cvtneps_pbh(t));
	}
	const __m256 vm = _mm256_set1_ps(m), vs = _mm256_set1_ps(scale), vb = _mm256_set1_ps(b);
	const __m256 z = _mm256_setzero_ps();
	for (; i + 8 <= HW; i += 8) {
		__m256 t = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(ld8(xp, i, XB), vm), vs), vb);
		if (relu)
			t = _mm256_max_ps(t, z);
		_mm_storeu_si128((__m128i *)(yh + i), (__m128i)_mm256_cvtneps_pbh(t));
	}
	normalise_tail(NULL, yh, xp, i, HW, m, scale, b, relu, XB);
}

BN_BF16_TARGET static void normalise_cvtne_x32(uint16_t *yh, const void *xp, int HW, float m, float scale, float b,
					       int relu)
{
	normalise_cvtne(yh, xp, HW, m, scale, b, relu, 0);
}

BN_BF16_TARGET static void normalise_cvtne_x16(uint16_t *yh, const void *xp, int HW, float m, float scale, float b,
					       int relu)
{
	normalise_cvtne(yh, xp, HW, m, scale, b, relu, 1);
}

/* normalise over plane o of x into plane o of y (fp32, or bf16 when a->y_bf16: cvtne, bf16_convert_cvtne() of the
 * task, says which rounding loop). */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
normalise_out(void *y, const void *x, size_t o, float m, float scale, float b, const dnn_batchnorm_args *a, int cvtne,
	      const int XB)
{
	if (a->y_bf16 && cvtne)
		(XB ? normalise_cvtne_x16 : normalise_cvtne_x32)((uint16_t *)y + o, xoff(x, o, XB), a->HW, m, scale, b,
								  a->relu);
	else
		normalise(a->y_bf16 ? NULL : (float *)y + o, a->y_bf16 ? (uint16_t *)y + o : NULL, xoff(x, o, XB),
			  a->HW, m, scale, b, a->relu, XB);
}

__attribute__((target("avx2"))) void dnn_bn_normalise_plane_avx2(void *y, const void *x, size_t o, float m,
								  float scale, float b, const dnn_batchnorm_args *a)
{
	const int cvtne = a->y_bf16 && bf16_convert_cvtne();
	if (a->x_bf16)
		normalise_out(y, x, o, m, scale, b, a, cvtne, 1);
	else
		normalise_out(y, x, o, m, scale, b, a, cvtne, 0);
}

__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
forward_train(void *y, float *saved, const void *x, const float *gamma, const float *beta, const dnn_batchnorm_args *a,
	      const int XB)
{
	const int N = a->N, C = a->C, HW = a->HW;
	const double M = (double)N * HW;
	const size_t cs = (size_t)C * HW; // elements from one image's plane to the next's
	const int cvtne = a->y_bf16 && bf16_convert_cvtne();
	for (int c = 0; c < C; c++) {
		const void *xc = xoff(x, (size_t)c * HW, XB);
		double sum = 0, r0, r1;
		int n = 0;
		for (; n + 2 <= N; n += 2) {
			sum2(&r0, &r1, xoff(xc, n * cs, XB), xoff(xc, (n + 1) * cs, XB), HW, XB);
			sum += r0;
			sum += r1;
		}
		if (n < N) {
			sum2(&r0, &r1, xoff(xc, n * cs, XB), xoff(xc, n * cs, XB), HW, XB);
			sum += r0;
		}
		double mean = sum / M, ss = 0;
		float m = (float)mean;
		for (n = 0; n + 2 <= N; n += 2) {
			sqdev2(&r0, &r1, xoff(xc, n * cs, XB), xoff(xc, (n + 1) * cs, XB), HW, m, XB);
			ss += r0;
			ss += r1;
		}
		if (n < N) {
			sqdev2(&r0, &r1, xoff(xc, n * cs, XB), xoff(xc, n * cs, XB), HW, m, XB);
			ss += r0;
		}
		double invstd = dnn_bn_store_channel_stats(saved, C, c, mean, m, ss, M, a->eps);
		float scale = gamma[c] * (float)invstd, b = beta[c];
		for (n = 0; n < N; n++)
			normalise_out(y, x, n * cs + (size_t)c * HW, m, scale, b, a, cvtne, XB);
	}
}

__attribute__((target("avx2"))) void dnn_bn_forward_train_avx2(void *y, float *saved, const void *x,
								const float *gamma, const float *beta,
								const dnn_batchnorm_args *a)
{
	if (a->x_bf16)
		forward_train(y, saved, x, gamma, beta, a, 1);
	else
		forward_train(y, saved, x, gamma, beta, a, 0);
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

/* The backward's sums of one row, folded (fold8): s1 = sum g, s2 = sum g (x - mean), 8 lanes, tail in lane 0. */
typedef struct {
	double s1, s2;
} row_sums;

/* Rows p and q (offsets into x, dy, yr) side by side. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
grad_sums2(row_sums *rp, row_sums *rq, const void *x, const float *dy, const void *yr, int y_bf16, size_t p, size_t q,
	   int HW, float mean, const int XB)
{
	const __m256 vm = _mm256_set1_ps(mean);
	__m256 a1 = _mm256_setzero_ps(), a2 = a1, b1 = a1, b2 = a1;
	const relu_y yp = relu_y_at(yr, y_bf16, p), yq = relu_y_at(yr, y_bf16, q);
	int i = 0;
	for (; i + 8 <= HW; i += 8) {
		__m256 g = grad8(dy + p, yp, i), h = grad8(dy + q, yq, i);
		a1 = _mm256_add_ps(a1, g);
		a2 = _mm256_add_ps(a2, _mm256_mul_ps(g, _mm256_sub_ps(ld8(x, p + i, XB), vm)));
		b1 = _mm256_add_ps(b1, h);
		b2 = _mm256_add_ps(b2, _mm256_mul_ps(h, _mm256_sub_ps(ld8(x, q + i, XB), vm)));
	}
	if (i == HW) {
		fold2(&rp->s1, &rq->s1, a1, b1);
		fold2(&rp->s2, &rq->s2, a2, b2);
		return;
	}
	float p1[8], p2[8], q1[8], q2[8];
	_mm256_storeu_ps(p1, a1), _mm256_storeu_ps(p2, a2);
	_mm256_storeu_ps(q1, b1), _mm256_storeu_ps(q2, b2);
	for (; i < HW; i++) {
		float g = grad1(dy + p, yp, i), h = grad1(dy + q, yq, i);
		p1[0] += g;
		p2[0] += g * (ld1(x, p + i, XB) - mean);
		q1[0] += h;
		q2[0] += h * (ld1(x, q + i, XB) - mean);
	}
	rp->s1 = fold8(p1), rp->s2 = fold8(p2), rq->s1 = fold8(q1), rq->s2 = fold8(q2);
}

/* dx (=, or += with acc) = k g + (x - mean) kx + k0 over one row at offset o. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
row_dx(float *dx, const void *x, const float *dy, const void *yr, int y_bf16, size_t o, int HW, float mean, float k,
       float kx, float k0, int acc, const int XB)
{
	const __m256 vm = _mm256_set1_ps(mean), vk = _mm256_set1_ps(k), vkx = _mm256_set1_ps(kx);
	const __m256 vk0 = _mm256_set1_ps(k0);
	const relu_y yp = relu_y_at(yr, y_bf16, o);
	float *restrict dxp = dx + o;
	int i = 0;
	for (; i + 8 <= HW; i += 8) {
		__m256 g = grad8(dy + o, yp, i);
		__m256 t = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(vk, g),
						       _mm256_mul_ps(_mm256_sub_ps(ld8(x, o + i, XB), vm), vkx)),
					 vk0);
		_mm256_storeu_ps(dxp + i, acc ? _mm256_add_ps(_mm256_loadu_ps(dxp + i), t) : t);
	}
	for (; i < HW; i++) {
		float g = grad1(dy + o, yp, i), t = dnn_bn_dx(g, ld1(x, o + i, XB), mean, k, kx, k0);
		dxp[i] = acc ? dxp[i] + t : t;
	}
}

__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void
backward(float *dx, float *dgamma, float *dbeta, const void *x, const float *gamma, const float *saved, const float *dy,
	 const void *yr, const dnn_batchnorm_args *a, const int XB)
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
				   HW, mean, XB);
			sdy += rp.s1;
			sdyx += rp.s2;
			sdy += rq.s1;
			sdyx += rq.s2;
		}
		if (n < N) {
			const size_t o = n * cs + (size_t)c * HW;
			grad_sums2(&rp, &rq, x, dy, yr, a->y_bf16, o, o, HW, mean, XB);
			sdy += rp.s1;
			sdyx += rp.s2;
		}
		sdyx *= invstd;
		dbeta[c] += (float)sdy;
		dgamma[c] += (float)sdyx;
		float k, kx, k0;
		dnn_bn_dx_coefs(&k, &kx, &k0, gamma[c], invstd, (float)(sdy / M), (float)(sdyx / M));
		for (n = 0; n < N; n++)
			row_dx(dx, x, dy, yr, a->y_bf16, n * cs + (size_t)c * HW, HW, mean, k, kx, k0, a->accumulate_dx,
			       XB);
	}
}

__attribute__((target("avx2"))) void dnn_bn_backward_avx2(float *dx, float *dgamma, float *dbeta, const void *x,
							   const float *gamma, const float *saved, const float *dy,
							   const void *yr, const dnn_batchnorm_args *a)
{
	if (a->x_bf16)
		backward(dx, dgamma, dbeta, x, gamma, saved, dy, yr, a, 1);
	else
		backward(dx, dgamma, dbeta, x, gamma, saved, dy, yr, a, 0);
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

void dnn_bn_forward_train_avx2(void *y, float *saved, const void *x, const float *gamma, const float *beta,
			       const dnn_batchnorm_args *a)
{
	(void)y, (void)saved, (void)x, (void)gamma, (void)beta, (void)a; // unreachable: dnn_batchnorm_simd() is 0
}

void dnn_bn_normalise_plane_avx2(void *y, const void *x, size_t o, float m, float scale, float b,
				 const dnn_batchnorm_args *a)
{
	(void)y, (void)x, (void)o, (void)m, (void)scale, (void)b, (void)a; // unreachable, as above
}

void dnn_bn_backward_avx2(float *dx, float *dgamma, float *dbeta, const void *x, const float *gamma,
			  const float *saved, const float *dy, const void *yr, const dnn_batchnorm_args *a)
{
	(void)dx, (void)dgamma, (void)dbeta, (void)x, (void)gamma, (void)saved, (void)dy, (void)yr, (void)a;
}

void dnn_bn_bf16_convert_avx2(uint16_t *dst, const float *src, size_t n) { dnn_bf16_convert(dst, src, n); }
#endif
