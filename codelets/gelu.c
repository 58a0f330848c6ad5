/* gelu.c — the GELU activation (tanh form): CPU kernels, codelets, insert helpers (gelu.h). */
#include "gelu.h"
#include "act_formulas.h"
#include "gemm_bf16.h"

// ------------------------------------------------------------------------------- CPU kernels

/* Two forms. The portable loops are the shared formulas (act_formulas.h: PyTorch's order, with
 * libm's tanhf per element; CUDA's too). The AVX2 loops write 0.5 (1 + tanh u) as the sigmoid
 * s = 1 / (1 + e), e = exp(-2u), 8 lanes at a time (simd_exp.h), so that
 *     y = x s,   gelu'(x) = s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2),  1 - s = e s
 * (no cancellation in 1 - s); they agree with the portable form within a few ulp (the op
 * harness runs both). libm's tanhf made gelu 59% of a gpt-nano step
 * (docs/studies/2026-12-07-gpt-cpu-comparison.md). Where -2u > 88, s is 0: y and gelu' are then
 * exactly 0, as tanh's -1 gives. */
static int gelu_simd = -1; /* -1: not chosen yet; 1: the AVX2 form (16 lanes where the CPU has AVX-512F), 2: on 8 */
static int gelu_wide;      /* 1: the AVX2 form's 16-lane loop runs (AVX-512F), the same bits per element */

static void gelu_forward_portable(float *restrict y, const float *restrict x, long n)
{
	for (long i = 0; i < n; i++)
		y[i] = dnn_act_gelu(x[i]);
}

static void gelu_backward_portable(float *restrict dx, const float *restrict x, const float *restrict dy, long n,
				   int accumulate_dx)
{
	if (accumulate_dx) {
		for (long i = 0; i < n; i++)
			dx[i] += dnn_act_gelu_grad(dy[i], x[i]);
	} else {
		for (long i = 0; i < n; i++)
			dx[i] = dnn_act_gelu_grad(dy[i], x[i]);
	}
}

#if defined(__x86_64__) && defined(__GNUC__)
#include "simd_exp.h"

/* s = sigmoid(2u) and e s = 1 - s of 8 x's; 0 and 1 where -2u > 88 */
DNN_AVX2_FMA static inline __m256 gelu_sigmoid8(__m256 x, __m256 *one_minus_s)
{
	const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
	const __m256 u = _mm256_mul_ps(_mm256_set1_ps(DNN_GELU_BETA), _mm256_fmadd_ps(_mm256_set1_ps(DNN_GELU_KAPPA), x3, x));
	const __m256 m2u = _mm256_mul_ps(_mm256_set1_ps(-2.0f), u);
	const __m256 e = dnn_exp8(m2u);
	const __m256 s = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
	const __m256 big = _mm256_cmp_ps(m2u, _mm256_set1_ps(88.0f), _CMP_GT_OQ);
	*one_minus_s = _mm256_blendv_ps(_mm256_mul_ps(e, s), _mm256_set1_ps(1.0f), big);
	return _mm256_andnot_ps(big, s);
}

DNN_AVX2_FMA static void gelu_forward_avx2(float *restrict y, const float *restrict x, long n)
{
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		const __m256 v = _mm256_loadu_ps(x + i);
		__m256 oms;
		_mm256_storeu_ps(y + i, _mm256_mul_ps(v, gelu_sigmoid8(v, &oms)));
	}
	if (i < n) { /* the tail through a zero-padded block: the same lanes' arithmetic */
		float xb[8] = {0}, yb[8];
		for (long j = i; j < n; j++)
			xb[j - i] = x[j];
		gelu_forward_avx2(yb, xb, 8);
		for (long j = i; j < n; j++)
			y[j] = yb[j - i];
	}
}

DNN_AVX2_FMA static inline __m256 gelu_grad8(__m256 v, __m256 g)
{
	__m256 oms;
	const __m256 s = gelu_sigmoid8(v, &oms);
	const __m256 du = _mm256_mul_ps(_mm256_set1_ps(2.0f * DNN_GELU_BETA),
					_mm256_fmadd_ps(_mm256_set1_ps(3.0f * DNN_GELU_KAPPA), _mm256_mul_ps(v, v),
							_mm256_set1_ps(1.0f)));
	const __m256 d = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_mul_ps(v, s), oms), du, s);
	return _mm256_mul_ps(g, d);
}

DNN_AVX2_FMA static void gelu_backward_avx2(float *restrict dx, const float *restrict x, const float *restrict dy,
					    long n, int accumulate_dx)
{
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		const __m256 d = gelu_grad8(_mm256_loadu_ps(x + i), _mm256_loadu_ps(dy + i));
		_mm256_storeu_ps(dx + i, accumulate_dx ? _mm256_add_ps(_mm256_loadu_ps(dx + i), d) : d);
	}
	if (i < n) {
		float xb[8] = {0}, gb[8] = {0}, db[8] = {0};
		for (long j = i; j < n; j++)
			xb[j - i] = x[j], gb[j - i] = dy[j], db[j - i] = accumulate_dx ? dx[j] : 0.0f;
		gelu_backward_avx2(db, xb, gb, 8, accumulate_dx);
		for (long j = i; j < n; j++)
			dx[j] = db[j - i];
	}
}

/* The same form on 16 lanes (AVX-512F): each operation of gelu_sigmoid8 and gelu_grad8 in the same
 * order (dnn_exp16 is dnn_exp8 per lane), so each element is the 8-lane loop's bit for bit (the op
 * harness checks it); the rest of a block past its last multiple of 16 goes to the 8-lane loop. The
 * AVX2 loops were 8% of gpt-nano's bf16 step, compute-bound (their data stream at a few GB/s). */
#define GELU_512 __attribute__((target("avx512f")))
GELU_512 static inline __m512 gelu_sigmoid16(__m512 x, __m512 *one_minus_s)
{
	const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
	const __m512 u = _mm512_mul_ps(_mm512_set1_ps(DNN_GELU_BETA), _mm512_fmadd_ps(_mm512_set1_ps(DNN_GELU_KAPPA), x3, x));
	const __m512 m2u = _mm512_mul_ps(_mm512_set1_ps(-2.0f), u);
	const __m512 e = dnn_exp16(m2u);
	const __m512 s = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
	const __mmask16 big = _mm512_cmp_ps_mask(m2u, _mm512_set1_ps(88.0f), _CMP_GT_OQ);
	*one_minus_s = _mm512_mask_blend_ps(big, _mm512_mul_ps(e, s), _mm512_set1_ps(1.0f));
	return _mm512_maskz_mov_ps((__mmask16)~big, s);
}

GELU_512 static long gelu_forward_avx512(float *restrict y, const float *restrict x, long n)
{
	long i = 0;
	for (; i + 16 <= n; i += 16) {
		const __m512 v = _mm512_loadu_ps(x + i);
		__m512 oms;
		_mm512_storeu_ps(y + i, _mm512_mul_ps(v, gelu_sigmoid16(v, &oms)));
	}
	return i;
}

GELU_512 static long gelu_backward_avx512(float *restrict dx, const float *restrict x, const float *restrict dy,
					  long n, int accumulate_dx)
{
	long i = 0;
	for (; i + 16 <= n; i += 16) {
		const __m512 v = _mm512_loadu_ps(x + i);
		__m512 oms;
		const __m512 s = gelu_sigmoid16(v, &oms);
		const __m512 du = _mm512_mul_ps(_mm512_set1_ps(2.0f * DNN_GELU_BETA),
						_mm512_fmadd_ps(_mm512_set1_ps(3.0f * DNN_GELU_KAPPA), _mm512_mul_ps(v, v),
								_mm512_set1_ps(1.0f)));
		const __m512 d = _mm512_mul_ps(_mm512_loadu_ps(dy + i),
					       _mm512_fmadd_ps(_mm512_mul_ps(_mm512_mul_ps(v, s), oms), du, s));
		_mm512_storeu_ps(dx + i, accumulate_dx ? _mm512_add_ps(_mm512_loadu_ps(dx + i), d) : d);
	}
	return i;
}

static void gelu_forward_simd(float *restrict y, const float *restrict x, long n)
{
	const long i = gelu_wide ? gelu_forward_avx512(y, x, n) : 0;
	gelu_forward_avx2(y + i, x + i, n - i);
}

static void gelu_backward_simd(float *restrict dx, const float *restrict x, const float *restrict dy, long n,
			       int accumulate_dx)
{
	const long i = gelu_wide ? gelu_backward_avx512(dx, x, dy, n, accumulate_dx) : 0;
	gelu_backward_avx2(dx + i, x + i, dy + i, n - i, accumulate_dx);
}

int dnn_gelu_set_simd(int on)
{
	__builtin_cpu_init();
	const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	gelu_simd = avx2 && (on == 1 || on == 2) ? on : 0;
	gelu_wide = gelu_simd == 1 && __builtin_cpu_supports("avx512f");
	return gelu_simd;
}
#else
static void gelu_forward_simd(float *y, const float *x, long n) { gelu_forward_portable(y, x, n); }
static void gelu_backward_simd(float *dx, const float *x, const float *dy, long n, int acc)
{
	gelu_backward_portable(dx, x, dy, n, acc);
}
int dnn_gelu_set_simd(int on)
{
	(void)on;
	gelu_simd = 0;
	return 0;
}
#endif

int dnn_gelu_simd(void)
{
	if (gelu_simd < 0)
		dnn_gelu_set_simd(1);
	return gelu_simd;
}

const char *dnn_gelu_isa(void)
{
	const int s = dnn_gelu_simd();
	return s == 1 && gelu_wide ? "avx512" : s ? "avx2" : "portable";
}

void dnn_gelu_forward_cpu(float *restrict y, const float *restrict x, long n)
{
	// y (n), x (n)
	if (dnn_gelu_simd())
		gelu_forward_simd(y, x, n);
	else
		gelu_forward_portable(y, x, n);
}

void dnn_gelu_forward_bf16_cpu(uint16_t *restrict y, const float *restrict x, long n)
{
	// y (n) bf16, x (n): blocks of fp32 values on the stack, each rounded once (the values are
	// element-wise, so the blocking changes no bit)
	enum { BLK = 512 };
	float stage[BLK];
	for (long i = 0; i < n; i += BLK) {
		const long m = n - i < BLK ? n - i : BLK;
		dnn_gelu_forward_cpu(stage, x + i, m);
		dnn_bf16_convert(y + i, stage, (size_t)m);
	}
}

void dnn_gelu_backward_cpu(float *restrict dx, const float *restrict x, const float *restrict dy, long n,
			   int accumulate_dx)
{
	// dx (n) =|+=, x (n), dy (n)
	if (dnn_gelu_simd())
		gelu_backward_simd(dx, x, dy, n, accumulate_dx);
	else
		gelu_backward_portable(dx, x, dy, n, accumulate_dx);
}

// ------------------------------------------------------------------------------- codelets

static void gelu_fwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_gelu_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	if (a->y_bf16)
		dnn_gelu_forward_bf16_cpu((uint16_t *)STARPU_VECTOR_GET_PTR(buffers[1]),
					  (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a->n);
	else
		dnn_gelu_forward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				     (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a->n);
}

static void gelu_bwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_gelu_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->n);
	dnn_gelu_backward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[2]), (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
			      (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), a->n, a->accumulate_dx);
}

/* Footprint: the data sizes and the arguments (y_bf16 changes the forward's cost; StarPU's vector
 * footprint is its element count, not its element size). */
DNN_CODELET(cl_gelu_fwd, 2, gelu_fwd_cpu_task, dnn_gelu_fwd_cuda);
DNN_CODELET(cl_gelu_bwd, 3, gelu_bwd_cpu_task, dnn_gelu_bwd_cuda);

// ------------------------------------------------------------------------------- insert helpers

DNN_ARGS_NO_PADDING(dnn_gelu_args, sizeof(long) + 2 * sizeof(int));

int dnn_insert_gelu_fwd(const dnn_task_opts *o, const dnn_gelu_args *a, starpu_data_handle_t x, starpu_data_handle_t y)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_gelu_fwd, "gelu_fwd", a, STARPU_R, x, STARPU_W, y, STARPU_TASK_COLOR,
				    DNN_COLOR_ELTWISE_FWD, STARPU_FLOPS, 8.0 * (double)a->n);
}

int dnn_insert_gelu_bwd(const dnn_task_opts *o, const dnn_gelu_args *a, starpu_data_handle_t x, starpu_data_handle_t dy,
			starpu_data_handle_t dx)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_gelu_bwd, "gelu_bwd", a, STARPU_R, x, STARPU_R, dy,
				    a->accumulate_dx ? STARPU_RW : STARPU_W, dx, STARPU_TASK_COLOR, DNN_COLOR_ELTWISE_BWD,
				    STARPU_FLOPS, 16.0 * (double)a->n);
}
