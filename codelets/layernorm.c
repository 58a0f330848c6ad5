/* layernorm.c — layer normalisation: CPU kernels, codelets, insert helpers (layernorm.h). */
#include <math.h>

#include "layernorm.h"

#include "gemm_bf16.h"

// ------------------------------------------------------------------------------- CPU kernels

/* Row sums in 8 float lanes that the compiler vectorises (one double chain is latency-bound),
 * folded into a double once per row: the accuracy of a float sum over C/8 terms per lane. */
#define LN_INLINE static inline __attribute__((always_inline))
LN_INLINE double fold8(const float s[8])
{
	return (double)((s[0] + s[4]) + (s[1] + s[5])) + (double)((s[2] + s[6]) + (s[3] + s[7]));
}

// sum(p[0..n))
LN_INLINE double row_sum(const float *restrict p, int n)
{
	float s[8] = {0};
	int i = 0;
	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++)
			s[j] += p[i + j];
	for (; i < n; i++)
		s[0] += p[i];
	return fold8(s);
}

/* The second pass over a row: *sd = sum(d), *sd2 = sum(d^2), d = p[0..n) - m (m close to the
 * row's mean, so the terms are small and d exact where p is within 2x of m). */
LN_INLINE void row_dev(const float *restrict p, int n, float m, double *sd, double *sd2)
{
	float s[8] = {0}, q[8] = {0};
	int i = 0;
	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++) {
			const float d = p[i + j] - m;
			s[j] += d, q[j] += d * d;
		}
	for (; i < n; i++) {
		const float d = p[i] - m;
		s[0] += d, q[0] += d * d;
	}
	*sd = fold8(s), *sd2 = fold8(q);
}

/* One row's y, c in [c0, c1): the fp32 values of both storages. */
LN_INLINE void ln_row(float *restrict yr, const float *restrict xr, const float *restrict gamma,
			  const float *restrict beta, float m, float dm, float s, int c0, int c1)
{
	for (int c = c0; c < c1; c++)
		yr[c - c0] = ((xr[c] - m) - dm) * s * gamma[c] + beta[c];
}

LN_INLINE void ln_forward(void *y, float *restrict saved, const float *restrict x, const float *restrict gamma,
			  const float *restrict beta, const dnn_layernorm_args *a)
{
	// y (rows x C) float or bf16, saved (3 rows) or NULL, x (rows x C), gamma, beta (C)
	const int C = a->C;
	const long rows = a->rows;
	enum { BLK = 256 }; /* bf16: a row's fp32 values staged BLK at a time on the stack, then rounded */
	float stage[BLK];
	for (long r = 0; r < rows; r++) {
		const float *restrict xr = x + (size_t)r * C;
		const float m = (float)(row_sum(xr, C) / C);
		double sd, sd2;
		row_dev(xr, C, m, &sd, &sd2);
		const double dmd = sd / C, var = sd2 / C - dmd * dmd;
		const float dm = (float)dmd, s = (float)(1.0 / sqrt((var > 0 ? var : 0) + (double)a->eps));
		if (a->y_bf16) {
			uint16_t *yr = (uint16_t *)y + (size_t)r * C;
			for (int c0 = 0; c0 < C; c0 += BLK) {
				const int c1 = C - c0 < BLK ? C : c0 + BLK;
				ln_row(stage, xr, gamma, beta, m, dm, s, c0, c1);
				dnn_bf16_convert(yr + c0, stage, (size_t)(c1 - c0));
			}
		} else {
			ln_row((float *)y + (size_t)r * C, xr, gamma, beta, m, dm, s, 0, C);
		}
		if (saved)
			saved[r] = m, saved[rows + r] = s, saved[2 * rows + r] = dm;
	}
}

LN_INLINE int ln_backward(float *restrict dx, float *restrict dgamma, float *restrict dbeta, const float *restrict x,
			 const float *restrict gamma, const float *restrict saved, const float *restrict dy,
			 const dnn_layernorm_args *a)
{
	// dx (rows x C) =|+= or NULL, dgamma, dbeta (C) +=, x, dy (rows x C), gamma (C), saved (3 rows)
	const int C = a->C;
	const long rows = a->rows;
	/* the column sums of dgamma, dbeta in double (2C; the worker's scratch, 16-byte aligned) */
	double *restrict sg = (double *)dnn_cpu_scratch(4 * (size_t)C);
	if (!sg)
		return -1;
	double *restrict sb = sg + C;
	for (int c = 0; c < C; c++)
		sg[c] = 0, sb[c] = 0;
	for (long r = 0; r < rows; r++) {
		const float *restrict xr = x + (size_t)r * C, *restrict dyr = dy + (size_t)r * C;
		const float m = saved[r], s = saved[rows + r], dm = saved[2 * rows + r];
		for (int c = 0; c < C; c++) {
			const float xh = ((xr[c] - m) - dm) * s;
			sg[c] += (double)(dyr[c] * xh);
			sb[c] += (double)dyr[c];
		}
		if (!a->has_dx)
			continue;
		/* mean_c(g) and mean_c(g * xhat), g = dy * gamma, in 8 lanes */
		float l0[8] = {0}, l1[8] = {0};
		int c = 0;
		for (; c + 8 <= C; c += 8)
			for (int j = 0; j < 8; j++) {
				const float g = dyr[c + j] * gamma[c + j], xh = ((xr[c + j] - m) - dm) * s;
				l0[j] += g, l1[j] += g * xh;
			}
		for (; c < C; c++) {
			const float g = dyr[c] * gamma[c], xh = ((xr[c] - m) - dm) * s;
			l0[0] += g, l1[0] += g * xh;
		}
		const float mg = (float)(fold8(l0) / C), mgx = (float)(fold8(l1) / C);
		float *restrict dxr = dx + (size_t)r * C;
		if (a->accumulate_dx) {
			for (c = 0; c < C; c++)
				dxr[c] += s * (dyr[c] * gamma[c] - mg - ((xr[c] - m) - dm) * s * mgx);
		} else {
			for (c = 0; c < C; c++)
				dxr[c] = s * (dyr[c] * gamma[c] - mg - ((xr[c] - m) - dm) * s * mgx);
		}
	}
	for (int c = 0; c < C; c++)
		dgamma[c] += (float)sg[c], dbeta[c] += (float)sb[c];
	return 0;
}

/* The kernels above compiled twice: for the build's baseline ISA (SSE2 on x86-64: its 8-lane sums in
 * two registers of 4) and, where the CPU has AVX-512F, with 16-lane registers (layer norm was 7% of
 * gpt-nano's bf16 step). Every sum keeps its order (the 8 lanes are the code's, the column sums per
 * column) and fp-contract is off there, as the baseline has no FMA to contract into: the same bits
 * (the op harness compares the two). */
static int ln_wide = -1; /* -1: not chosen yet */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) /* clang has no optimize attribute */
#define LN_AVX512 __attribute__((target("avx512f"), optimize("fp-contract=off")))
LN_AVX512 static void ln_forward_avx512(void *y, float *saved, const float *x, const float *gamma, const float *beta,
					const dnn_layernorm_args *a)
{
	ln_forward(y, saved, x, gamma, beta, a);
}
LN_AVX512 static int ln_backward_avx512(float *dx, float *dgamma, float *dbeta, const float *x, const float *gamma,
					const float *saved, const float *dy, const dnn_layernorm_args *a)
{
	return ln_backward(dx, dgamma, dbeta, x, gamma, saved, dy, a);
}
int dnn_layernorm_set_simd(int on)
{
	__builtin_cpu_init();
	ln_wide = on && __builtin_cpu_supports("avx512f");
	return ln_wide;
}
#else
#define ln_forward_avx512 ln_forward
#define ln_backward_avx512 ln_backward
int dnn_layernorm_set_simd(int on)
{
	(void)on;
	ln_wide = 0;
	return 0;
}
#endif

static int ln_simd(void)
{
	if (ln_wide < 0)
		dnn_layernorm_set_simd(1);
	return ln_wide;
}

void dnn_layernorm_forward_cpu(void *y, float *saved, const float *x, const float *gamma, const float *beta,
			       const dnn_layernorm_args *a)
{
	if (ln_simd())
		ln_forward_avx512(y, saved, x, gamma, beta, a);
	else
		ln_forward(y, saved, x, gamma, beta, a);
}

int dnn_layernorm_backward_cpu(float *dx, float *dgamma, float *dbeta, const float *x, const float *gamma,
			       const float *saved, const float *dy, const dnn_layernorm_args *a)
{
	if (ln_simd())
		return ln_backward_avx512(dx, dgamma, dbeta, x, gamma, saved, dy, a);
	return ln_backward(dx, dgamma, dbeta, x, gamma, saved, dy, a);
}

// ------------------------------------------------------------------------------- codelets

static void layernorm_fwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_layernorm_args *a = cl_arg;
	const size_t n = (size_t)a->rows * a->C;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == n);
	float *saved = NULL;
	if (a->save) {
		STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[4]) == 3 * (size_t)a->rows);
		saved = (float *)STARPU_VECTOR_GET_PTR(buffers[4]);
	}
	dnn_layernorm_forward_cpu((void *)STARPU_VECTOR_GET_PTR(buffers[3]), saved,
				  (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
				  (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				  (const float *)STARPU_VECTOR_GET_PTR(buffers[2]), a);
}

static void layernorm_bwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_layernorm_args *a = cl_arg;
	const size_t n = (size_t)a->rows * a->C;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == 3 * (size_t)a->rows);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[4]) == (size_t)a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[5]) == (size_t)a->C);
	float *dx = NULL;
	if (a->has_dx) {
		STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[6]) == n);
		dx = (float *)STARPU_VECTOR_GET_PTR(buffers[6]);
	}
	if (dnn_layernorm_backward_cpu(dx, (float *)STARPU_VECTOR_GET_PTR(buffers[4]),
				       (float *)STARPU_VECTOR_GET_PTR(buffers[5]),
				       (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
				       (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				       (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
				       (const float *)STARPU_VECTOR_GET_PTR(buffers[3]), a) != 0)
		dnn_worker_error("layernorm: out of memory for %d doubles of scratch", 2 * a->C);
}

DNN_CODELET(cl_layernorm_fwd, 5, layernorm_fwd_cpu_task, dnn_layernorm_fwd_cuda);
DNN_CODELET(cl_layernorm_bwd, 7, layernorm_bwd_cpu_task, dnn_layernorm_bwd_cuda);

// ------------------------------------------------------------------------------- insert helpers

DNN_ARGS_NO_PADDING(dnn_layernorm_args, sizeof(long) + sizeof(float) + 5 * sizeof(int));

int dnn_insert_layernorm_fwd(const dnn_task_opts *o, const dnn_layernorm_args *a, starpu_data_handle_t x,
			     starpu_data_handle_t gamma, starpu_data_handle_t beta, starpu_data_handle_t y,
			     starpu_data_handle_t saved)
{
	const double flops = 8.0 * (double)a->rows * a->C;
	if (a->save)
		return DNN_TASK_INSERT_ARGS(o, &cl_layernorm_fwd, "layernorm_fwd", a, STARPU_R, x, STARPU_R, gamma, STARPU_R,
					    beta, STARPU_W, y, STARPU_W, saved, STARPU_TASK_COLOR, DNN_COLOR_BN_FWD,
					    STARPU_FLOPS, flops);
	return DNN_TASK_INSERT_ARGS(o, &cl_layernorm_fwd, "layernorm_fwd", a, STARPU_R, x, STARPU_R, gamma, STARPU_R, beta,
				    STARPU_W, y, STARPU_TASK_COLOR, DNN_COLOR_BN_FWD, STARPU_FLOPS, flops);
}

int dnn_insert_layernorm_bwd(const dnn_task_opts *o, const dnn_layernorm_args *a, starpu_data_handle_t x,
			     starpu_data_handle_t gamma, starpu_data_handle_t saved, starpu_data_handle_t dy,
			     starpu_data_handle_t dgamma, starpu_data_handle_t dbeta, int grad_mode,
			     starpu_data_handle_t dx)
{
	const double flops = 14.0 * (double)a->rows * a->C;
	if (a->has_dx)
		return DNN_TASK_INSERT_ARGS(o, &cl_layernorm_bwd, "layernorm_bwd", a, STARPU_R, x, STARPU_R, gamma, STARPU_R,
					    saved, STARPU_R, dy, grad_mode, dgamma, grad_mode, dbeta,
					    a->accumulate_dx ? STARPU_RW : STARPU_W, dx, STARPU_TASK_COLOR,
					    DNN_COLOR_BN_BWD, STARPU_FLOPS, flops);
	return DNN_TASK_INSERT_ARGS(o, &cl_layernorm_bwd, "layernorm_bwd", a, STARPU_R, x, STARPU_R, gamma, STARPU_R, saved,
				    STARPU_R, dy, grad_mode, dgamma, grad_mode, dbeta, STARPU_TASK_COLOR,
				    DNN_COLOR_BN_BWD, STARPU_FLOPS, flops);
}
