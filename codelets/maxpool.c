/* maxpool.c — max pooling, NCHW: CPU kernels, StarPU codelets, insert helpers.
 *
 * Padding cells count as -inf, so they are never selected (dnn_maxpool_args_finish keeps
 * 2*pad <= k, so every window holds at least one real cell). Backward recomputes each window's
 * argmax from x and y and routes dy to the first input equal to the window max (the first
 * largest one when none is: a window of NaNs); maxpool.cu's backward kernel applies this rule
 * exactly (tests/gpu_cuda_policy.c checks it bit for bit).
 */
#include "maxpool.h"
#include "act_formulas.h"
#include "dnn_codelet.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef DNN_HAVE_CUDA
void dnn_maxpool_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_maxpool_bwd_cuda(void *buffers[], void *cl_arg);
#endif

int dnn_maxpool_args_finish(dnn_maxpool_args *a)
{
	if (a->N < 1 || a->C < 1 || a->H < 1 || a->W < 1 || a->k < 1 || a->stride < 1 || a->pad < 0)
		return -1;
	if (2 * (long long)a->pad > a->k) // as PyTorch: pad <= k/2
		return -1;
	long long hp = (long long)a->H + 2LL * a->pad, wp = (long long)a->W + 2LL * a->pad;
	if (hp < a->k || wp < a->k)
		return -1;
	long long P = (hp - a->k) / a->stride + 1, Q = (wp - a->k) / a->stride + 1;
	if ((long long)a->N * a->C * a->H * a->W > INT_MAX)
		return -1; // cuDNN tensor descriptors take int sizes
	a->P = (int)P;
	a->Q = (int)Q;
	return 0;
}

/* The common 2x2, stride-2, unpadded pooling of an even-sized image: straight-line code with no
 * window bounds (about 5x faster than the general loops below on LeNet-5's shapes). */
static int is_2x2(const dnn_maxpool_args *a)
{
	return a->k == 2 && a->stride == 2 && a->pad == 0 && a->H == 2 * a->P && a->W == 2 * a->Q;
}

// Same as the general loop's "if (v > m) m = v" from -inf: NaNs are skipped.
static inline float max_gt(float m, float v) { return v > m ? v : m; }
// The fused relu (act_formulas.h, as relu.c's): v > 0 ? v : +0 (NaN gives 0).
static inline float relu_of(float v) { return dnn_act_relu(v); }

static void maxpool_forward_2x2(float *restrict y, const float *restrict x, const dnn_maxpool_args *a)
{
	const int W = a->W, P = a->P, Q = a->Q;
	for (long long nc = 0; nc < (long long)a->N * a->C; nc++)
		for (int p = 0; p < P; p++) {
			const float *r0 = x + (nc * a->H + 2 * p) * W, *r1 = r0 + W;
			float *yp = y + (nc * P + p) * Q;
			for (int q = 0; q < Q; q++)
				yp[q] = max_gt(max_gt(max_gt(max_gt(-INFINITY, r0[2 * q]), r0[2 * q + 1]), r1[2 * q]),
					       r1[2 * q + 1]);
			if (a->relu)
				for (int q = 0; q < Q; q++)
					yp[q] = relu_of(yp[q]);
		}
}

/* Backward of the 2x2 case: every input cell belongs to exactly one window, so dx is written
 * (or accumulated) in one pass, dy going to the first cell (row-major) equal to the max. */
static void maxpool_backward_2x2(float *restrict dx, const float *restrict x, const float *restrict y,
				 const float *restrict dy, const dnn_maxpool_args *a)
{
	const int W = a->W, P = a->P, Q = a->Q, acc = a->accumulate_dx;
	for (long long nc = 0; nc < (long long)a->N * a->C; nc++)
		for (int p = 0; p < P; p++) {
			const size_t o0 = (size_t)(nc * a->H + 2 * p) * W, o1 = o0 + W;
			const float *yp = y + (nc * P + p) * Q, *dyp = dy + (nc * P + p) * Q;
			for (int q = 0; q < Q; q++) {
				const float m = yp[q], g = a->relu ? dnn_act_relu_grad(dyp[q], m) : dyp[q];
				const float v0 = x[o0 + 2 * q], v1 = x[o0 + 2 * q + 1], v2 = x[o1 + 2 * q],
					    v3 = x[o1 + 2 * q + 1];
				/* Branch-free selection (which cell holds the max is data-dependent and
				 * mispredicts): f_i = cell i is the first equal to the max. */
				const int e0 = v0 == m, e1 = v1 == m, e2 = v2 == m, e3 = v3 == m;
				int f0 = e0, f1 = e1 & !e0, f2 = e2 & !(e0 | e1), f3 = e3 & !(e0 | e1 | e2);
				if (!(e0 | e1 | e2 | e3)) { // no cell equals y (NaNs): the first argmax, as the general loop
					float bm = -INFINITY;
					int t = 0;
					if (v0 > bm)
						bm = v0;
					if (v1 > bm)
						bm = v1, t = 1;
					if (v2 > bm)
						bm = v2, t = 2;
					if (v3 > bm)
						t = 3;
					f0 = t == 0, f1 = t == 1, f2 = t == 2, f3 = t == 3;
				}
				float g0 = f0 ? g : 0.0f, g1 = f1 ? g : 0.0f, g2 = f2 ? g : 0.0f, g3 = f3 ? g : 0.0f;
				if (acc) {
					dx[o0 + 2 * q] += g0, dx[o0 + 2 * q + 1] += g1;
					dx[o1 + 2 * q] += g2, dx[o1 + 2 * q + 1] += g3;
				} else {
					dx[o0 + 2 * q] = g0, dx[o0 + 2 * q + 1] = g1;
					dx[o1 + 2 * q] = g2, dx[o1 + 2 * q + 1] = g3;
				}
			}
		}
}

/* ------------------------------------------------------------------ AVX2 2x2 kernels
 *
 * The 2x2 fast paths above, 8 windows per step: a row pair's 16 + 16 inputs are split into their
 * even and odd columns (v0 v1 from row 0, v2 v3 from row 1, each lane one window). The results are
 * bit-identical to the scalar loops: the forward's chain max_gt(max_gt(-inf, v0), v1)... is
 * _mm256_max_ps(v, m) (v > m ? v : m, NaN v gives m), and the backward picks the same cell (first
 * equal to y, from the same ordered compares); a group of 8 windows where some window has no
 * cell equal to y (NaNs) goes through the scalar loop. GCC does not vectorise the scalar loops
 * (stride-2 loads, four interleaved stores): on LeNet-5 at batch 256 the scalar backward was 19%
 * of a step's CPU time on an Intel Xeon. */
static int pool_simd = -1; // -1: not chosen yet

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "simd_tail.h"

int dnn_maxpool_set_simd(int on)
{
	__builtin_cpu_init();
	pool_simd = on && __builtin_cpu_supports("avx2");
	return pool_simd;
}

/* The row tails (t < 8 windows, 2t floats per input row) use AVX2's masked loads and stores:
 * masked-off lanes read as 0 and are never written, so LeNet-5's 5-wide second pooling is one
 * masked step per row pair instead of 5 scalar windows. */
__attribute__((target("avx2"))) static inline __m256i first_lanes(int n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Even and odd elements of p[0..nf), nf <= 16 (16: plain loads): (p0 p2 .. p14), (p1 p3 .. p15). */
__attribute__((target("avx2"))) static inline void deinterleave(const float *p, int nf, __m256 *ev, __m256 *od)
{
	__m256 a, b;
	if (nf == 16)
		a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
	else
		a = _mm256_maskload_ps(p, first_lanes(nf)), b = _mm256_maskload_ps(p + 8, first_lanes(nf - 8));
	// per 128-bit lane: (a0 a2 b0 b2 | a4 a6 b4 b6); then 64-bit blocks 0 2 1 3
	*ev = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
	*od = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

/* p[0..nf) (= or +=) the interleave (e0 o0 e1 o1 ... e7 o7), nf <= 16 (16: plain loads/stores). */
__attribute__((target("avx2"))) static inline void interleave(float *p, int nf, __m256 ev, __m256 od, int acc)
{
	__m256 lo = _mm256_unpacklo_ps(ev, od), hi = _mm256_unpackhi_ps(ev, od); // (e0 o0 e1 o1 | e4 o4 e5 o5), (e2 .. | e6 ..)
	__m256 r0 = _mm256_permute2f128_ps(lo, hi, 0x20), r1 = _mm256_permute2f128_ps(lo, hi, 0x31);
	if (nf == 16) {
		if (acc) {
			r0 = _mm256_add_ps(_mm256_loadu_ps(p), r0);
			r1 = _mm256_add_ps(_mm256_loadu_ps(p + 8), r1);
		}
		_mm256_storeu_ps(p, r0);
		_mm256_storeu_ps(p + 8, r1);
		return;
	}
	const __m256i k0 = first_lanes(nf), k1 = first_lanes(nf - 8);
	if (acc) {
		r0 = _mm256_add_ps(_mm256_maskload_ps(p, k0), r0);
		r1 = _mm256_add_ps(_mm256_maskload_ps(p + 8, k1), r1);
	}
	dnn_store_first_ps(p, r0, nf);
	dnn_store_first_ps(p + 8, r1, nf - 8);
}

__attribute__((target("avx2"))) static void maxpool_forward_2x2_avx2(float *restrict y, const float *restrict x,
								    const dnn_maxpool_args *a)
{
	const int W = a->W, P = a->P, Q = a->Q;
	for (long long nc = 0; nc < (long long)a->N * a->C; nc++)
		for (int p = 0; p < P; p++) {
			const float *r0 = x + (nc * a->H + 2 * p) * W, *r1 = r0 + W;
			float *yp = y + (nc * P + p) * Q;
			for (int q = 0; q < Q; q += 8) {
				const int t = Q - q < 8 ? Q - q : 8; // windows in this step: 8, or the row's tail
				__m256 v0, v1, v2, v3;
				deinterleave(r0 + 2 * q, 2 * t, &v0, &v1);
				deinterleave(r1 + 2 * q, 2 * t, &v2, &v3);
				__m256 m = _mm256_max_ps(v0, _mm256_set1_ps(-INFINITY));
				m = _mm256_max_ps(v3, _mm256_max_ps(v2, _mm256_max_ps(v1, m)));
				if (a->relu)
					m = _mm256_max_ps(m, _mm256_setzero_ps());
				if (t == 8)
					_mm256_storeu_ps(yp + q, m);
				else
					dnn_store_first_ps(yp + q, m, t);
			}
		}
}

/* One window of the scalar backward (maxpool_backward_2x2's body), for the tails and NaN groups. */
static inline void maxpool_backward_window(float *restrict d0, float *restrict d1, const float *x0, const float *x1,
					   float m, float g, int acc, int relu)
{
	const dnn_maxpool_args one = {.N = 1, .C = 1, .H = 2, .W = 2, .k = 2, .stride = 2, .P = 1, .Q = 1,
				      .accumulate_dx = acc, .relu = relu};
	const float xw[4] = {x0[0], x0[1], x1[0], x1[1]};
	float dw[4] = {d0[0], d0[1], d1[0], d1[1]};
	maxpool_backward_2x2(dw, xw, &m, &g, &one);
	d0[0] = dw[0], d0[1] = dw[1], d1[0] = dw[2], d1[1] = dw[3];
}

__attribute__((target("avx2"))) static void maxpool_backward_2x2_avx2(float *restrict dx, const float *restrict x,
								     const float *restrict y, const float *restrict dy,
								     const dnn_maxpool_args *a)
{
	const int W = a->W, P = a->P, Q = a->Q, acc = a->accumulate_dx;
	for (long long nc = 0; nc < (long long)a->N * a->C; nc++)
		for (int p = 0; p < P; p++) {
			const size_t o0 = (size_t)(nc * a->H + 2 * p) * W, o1 = o0 + W;
			const float *yp = y + (nc * P + p) * Q, *dyp = dy + (nc * P + p) * Q;
			for (int q = 0; q < Q; q += 8) {
				const int t = Q - q < 8 ? Q - q : 8; // windows in this step: 8, or the row's tail
				__m256 v0, v1, v2, v3, m, g;
				deinterleave(x + o0 + 2 * q, 2 * t, &v0, &v1);
				deinterleave(x + o1 + 2 * q, 2 * t, &v2, &v3);
				if (t == 8)
					m = _mm256_loadu_ps(yp + q), g = _mm256_loadu_ps(dyp + q);
				else
					m = _mm256_maskload_ps(yp + q, first_lanes(t)), g = _mm256_maskload_ps(dyp + q, first_lanes(t));
				if (a->relu) // g where y > 0 (relu_of's max_ps(m, 0): y is never NaN)
					g = _mm256_and_ps(_mm256_cmp_ps(m, _mm256_setzero_ps(), _CMP_GT_OQ), g);
				const __m256 e0 = _mm256_cmp_ps(v0, m, _CMP_EQ_OQ), e1 = _mm256_cmp_ps(v1, m, _CMP_EQ_OQ),
					     e2 = _mm256_cmp_ps(v2, m, _CMP_EQ_OQ), e3 = _mm256_cmp_ps(v3, m, _CMP_EQ_OQ);
				const __m256 any01 = _mm256_or_ps(e0, e1), any012 = _mm256_or_ps(any01, e2);
				/* a window with no cell equal to y (NaNs): this step's windows go the scalar way;
				 * with the relu a window with y = 0 routes a zero, which is 0 wherever it goes */
				const int unused_lanes = 0xFF & ~((1 << t) - 1);
				__m256 routed = _mm256_or_ps(any012, e3);
				if (a->relu)
					routed = _mm256_or_ps(routed, _mm256_cmp_ps(m, _mm256_setzero_ps(), _CMP_LE_OQ));
				if ((_mm256_movemask_ps(routed) | unused_lanes) != 0xFF) {
					for (int j = q; j < q + t; j++)
						maxpool_backward_window(dx + o0 + 2 * j, dx + o1 + 2 * j, x + o0 + 2 * j,
									x + o1 + 2 * j, yp[j], dyp[j], acc, a->relu);
					continue;
				}
				// f_i = cell i is the first equal to the max; g where f_i, else 0
				const __m256 g0 = _mm256_and_ps(e0, g), g1 = _mm256_and_ps(_mm256_andnot_ps(e0, e1), g),
					     g2 = _mm256_and_ps(_mm256_andnot_ps(any01, e2), g),
					     g3 = _mm256_and_ps(_mm256_andnot_ps(any012, e3), g);
				interleave(dx + o0 + 2 * q, 2 * t, g0, g1, acc);
				interleave(dx + o1 + 2 * q, 2 * t, g2, g3, acc);
			}
		}
}
#else
int dnn_maxpool_set_simd(int on)
{
	(void)on;
	pool_simd = 0;
	return 0;
}
#endif

int dnn_maxpool_simd(void)
{
	if (pool_simd < 0)
		dnn_maxpool_set_simd(1);
	return pool_simd;
}

// y (N, C, P, Q) = max over each k x k window of x (N, C, H, W)
void dnn_maxpool_forward_cpu(float *y, const float *x, const dnn_maxpool_args *a)
{
	if (is_2x2(a)) {
#if defined(__x86_64__) && defined(__GNUC__)
		if (dnn_maxpool_simd()) {
			maxpool_forward_2x2_avx2(y, x, a);
			return;
		}
#endif
		maxpool_forward_2x2(y, x, a);
		return;
	}
	const int H = a->H, W = a->W, P = a->P, Q = a->Q, k = a->k, s = a->stride, pad = a->pad;
	for (long long nc = 0; nc < (long long)a->N * a->C; nc++) {
		const float *xp = x + nc * H * W;
		float *yp = y + nc * P * Q;
		for (int p = 0; p < P; p++) {
			int h0 = p * s - pad;
			int hs = h0 < 0 ? 0 : h0, he = h0 + k > H ? H : h0 + k;
			for (int q = 0; q < Q; q++) {
				int w0 = q * s - pad;
				int ws = w0 < 0 ? 0 : w0, we = w0 + k > W ? W : w0 + k;
				float m = -INFINITY;
				for (int h = hs; h < he; h++)
					for (int w = ws; w < we; w++)
						if (xp[h * W + w] > m)
							m = xp[h * W + w];
				yp[p * Q + q] = a->relu ? relu_of(m) : m;
			}
		}
	}
}

// dx (N, C, H, W) (=|+=) dy (N, C, P, Q) routed to the first x == y in each window
void dnn_maxpool_backward_cpu(float *dx, const float *x, const float *y, const float *dy,
			      const dnn_maxpool_args *a)
{
	if (is_2x2(a)) {
#if defined(__x86_64__) && defined(__GNUC__)
		if (dnn_maxpool_simd()) {
			maxpool_backward_2x2_avx2(dx, x, y, dy, a);
			return;
		}
#endif
		maxpool_backward_2x2(dx, x, y, dy, a);
		return;
	}
	const int H = a->H, W = a->W, P = a->P, Q = a->Q, k = a->k, s = a->stride, pad = a->pad;
	if (!a->accumulate_dx)
		memset(dx, 0, (size_t)a->N * a->C * H * W * sizeof(float));
	else if (a->relu) // the relu's backward adds +0 to every cell (-0 becomes +0): so does the fused one
		for (size_t i = 0; i < (size_t)a->N * a->C * H * W; i++)
			dx[i] += 0.0f;
	for (long long nc = 0; nc < (long long)a->N * a->C; nc++) {
		const float *xp = x + nc * H * W;
		const float *yp = y + nc * P * Q, *dyp = dy + nc * P * Q;
		float *dxp = dx + nc * H * W;
		for (int p = 0; p < P; p++) {
			int h0 = p * s - pad;
			int hs = h0 < 0 ? 0 : h0, he = h0 + k > H ? H : h0 + k;
			for (int q = 0; q < Q; q++) {
				int w0 = q * s - pad;
				int ws = w0 < 0 ? 0 : w0, we = w0 + k > W ? W : w0 + k;
				float m = yp[p * Q + q];
				int best = -1, arg = hs * W + ws; // arg: first argmax, if y does not match x
				float bm = -INFINITY;
				for (int h = hs; h < he && best < 0; h++)
					for (int w = ws; w < we; w++) {
						float v = xp[h * W + w];
						if (v == m) {
							best = h * W + w;
							break;
						}
						if (v > bm) {
							bm = v;
							arg = h * W + w;
						}
					}
				dxp[best >= 0 ? best : arg] += a->relu ? dnn_act_relu_grad(dyp[p * Q + q], m) : dyp[p * Q + q];
			}
		}
	}
}

/* ------------------------------------------------------------------ StarPU codelets */

static void maxpool_fwd_cpu(void *buffers[], void *cl_arg)
{
	const dnn_maxpool_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->C * a->H * a->W);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->N * a->C * a->P * a->Q);
	dnn_maxpool_forward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				(const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a);
}

static void maxpool_bwd_cpu(void *buffers[], void *cl_arg)
{
	const dnn_maxpool_args *a = cl_arg;
	size_t nx = (size_t)a->N * a->C * a->H * a->W, ny = (size_t)a->N * a->C * a->P * a->Q;
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == 4);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == nx);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == ny);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == ny);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == nx);
	dnn_maxpool_backward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[3]),
				 (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
				 (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				 (const float *)STARPU_VECTOR_GET_PTR(buffers[2]), a);
}

/* The backward's dx mode (W or RW) is chosen per task (every codelet's modes are: dnn_codelet.h). */
DNN_CODELET(cl_maxpool_fwd, 2, maxpool_fwd_cpu, dnn_maxpool_fwd_cuda);
DNN_CODELET(cl_maxpool_bwd, 4, maxpool_bwd_cpu, dnn_maxpool_bwd_cuda);

DNN_ARGS_NO_PADDING(dnn_maxpool_args, 11 * sizeof(int));

int dnn_insert_maxpool_fwd(const dnn_task_opts *o, const dnn_maxpool_args *a, starpu_data_handle_t x, starpu_data_handle_t y)
{
	double flops = (double)a->N * a->C * a->P * a->Q * a->k * a->k;
	return DNN_TASK_INSERT_ARGS(o, &cl_maxpool_fwd, "maxpool_fwd", a, STARPU_R, x, STARPU_W, y, STARPU_FLOPS, flops,
					    STARPU_TASK_COLOR, (int)DNN_COLOR_POOL_FWD);
}

int dnn_insert_maxpool_bwd(const dnn_task_opts *o, const dnn_maxpool_args *a, starpu_data_handle_t x, starpu_data_handle_t y,
			    starpu_data_handle_t dy, starpu_data_handle_t dx)
{
	double flops = (double)a->N * a->C * a->P * a->Q * (a->k * a->k + 1);
	int dx_mode = a->accumulate_dx ? STARPU_RW : STARPU_W;
	return DNN_TASK_INSERT_ARGS(o, &cl_maxpool_bwd, "maxpool_bwd", a, STARPU_R, x, STARPU_R, y, STARPU_R, dy,
					    dx_mode, dx, STARPU_FLOPS, flops,
					    STARPU_TASK_COLOR, (int)DNN_COLOR_POOL_BWD);
}
