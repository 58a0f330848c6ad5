/* optim.c — the fused update of one parameter tensor: SGD with momentum, LARS, AdamW or LAMB (the
 * formulas: optim.h). */
#include "optim.h"

#include <stdlib.h>

#include "dnn_codelet.h"
#include "optim_formulas.h"

#ifdef DNN_HAVE_CUDA
void dnn_optim_update_cuda(void *buffers[], void *cl_arg);
#endif

// ------------------------------------------------------------------------------- CPU kernels

const char *dnn_optimizer_name(dnn_optimizer o)
{
	switch (o) {
	case DNN_OPT_SGD: return "sgd";
	case DNN_OPT_LARS: return "lars";
	case DNN_OPT_ADAMW: return "adamw";
	case DNN_OPT_LAMB: return "lamb";
	}
	return NULL;
}

int dnn_optimizer_state_mult(dnn_optimizer o)
{
	return o == DNN_OPT_ADAMW || o == DNN_OPT_LAMB ? 2 : 1;
}

void dnn_optim_update_cpu(float *w, float *v, float *grad, const dnn_optim_args *a)
{
	dnn_optim_update_delta_cpu(w, v, grad, NULL, a);
}

/* The element updates are optim_formulas.h's, which optim.cu's kernels call too. */
static void momentum_sgd(float *w, float *v, const float *grad, float *delta, const dnn_optim_args *a)
{
	const float lr = a->lr, mom = a->momentum, wd = a->weight_decay, scale = a->scale;
	for (long i = 0; i < a->n; i++) {
		const float di = dnn_optim_sgd(&w[i], &v[i], grad[i], lr, mom, wd, scale);
		if (delta)
			delta[i] = di;
	}
}

double dnn_lars_rate(const float *w, const float *grad, const dnn_optim_args *a)
{
	if (!a->layerwise)
		return 1.0;
	double ww = 0, gg = 0;
	for (long i = 0; i < a->n; i++) {
		double g = (double)(grad[i] * a->scale);
		ww += (double)w[i] * (double)w[i], gg += g * g;
	}
	return dnn_optim_lars_lambda(ww, gg, a->trust, a->weight_decay);
}

static void lars(float *w, float *v, const float *grad, float *delta, const dnn_optim_args *a)
{
	const float rate = (float)((double)a->lr * dnn_lars_rate(w, grad, a));
	const float mom = a->momentum, wd = a->weight_decay, scale = a->scale;
	for (long i = 0; i < a->n; i++) {
		const float di = dnn_optim_lars(&w[i], &v[i], grad[i], rate, mom, wd, scale);
		if (delta)
			delta[i] = di;
	}
}

/* AdamW on 16 lanes: dnn_optim_adamw's operations in its order (the products, the division and the
 * square root are IEEE-exact roundings on either unit), with fp-contract off, since GCC would fuse
 * the intrinsics' products and sums into FMAs under target("avx512f") and the baseline's scalar loop
 * has none: the same bits as the portable loop (unit_optim checks both). The scalar loop's sqrtf and
 * division (errno kept) stay unvectorised: on gpt-nano AdamW took about 5% of a bf16 step. The last
 * 16 (or fewer) elements are masked loads and stores. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define OPT_AVX512 __attribute__((target("avx512f"), optimize("fp-contract=off")))
OPT_AVX512 static void adamw_avx512(float *w, float *m, float *s, const float *grad, float *delta, long n,
				    const dnn_optim_args *a, float step, float sq2, float decay)
{
	const __m512 scale = _mm512_set1_ps(a->scale), b1 = _mm512_set1_ps(a->beta1), b2 = _mm512_set1_ps(a->beta2);
	const __m512 c1 = _mm512_set1_ps(1.0f - a->beta1), c2 = _mm512_set1_ps(1.0f - a->beta2);
	const __m512 vstep = _mm512_set1_ps(step), vsq2 = _mm512_set1_ps(sq2), vdec = _mm512_set1_ps(decay);
	const __m512 eps = _mm512_set1_ps(a->eps);
	for (long i = 0; i < n; i += 16) {
		const __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
		const __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, grad + i), scale);
		const __m512 w0 = _mm512_maskz_loadu_ps(k, w + i);
		/* m = beta1 m + (1 - beta1) g; s = beta2 s + ((1 - beta2) g) g */
		const __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_maskz_loadu_ps(k, m + i)), _mm512_mul_ps(c1, g));
		const __m512 si = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_maskz_loadu_ps(k, s + i)),
						_mm512_mul_ps(_mm512_mul_ps(c2, g), g));
		/* w = w decay - (step m) / (sqrt(s) / sq2 + eps) */
		const __m512 den = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(si), vsq2), eps);
		const __m512 wi = _mm512_sub_ps(_mm512_mul_ps(w0, vdec), _mm512_div_ps(_mm512_mul_ps(vstep, mi), den));
		_mm512_mask_storeu_ps(m + i, k, mi), _mm512_mask_storeu_ps(s + i, k, si), _mm512_mask_storeu_ps(w + i, k, wi);
		if (delta)
			_mm512_mask_storeu_ps(delta + i, k, _mm512_sub_ps(wi, w0));
	}
}

static int optim_simd = -1; /* -1: not chosen yet; 0: the portable loops; 1: AdamW on 16 lanes */

int dnn_optim_set_simd(int on)
{
	__builtin_cpu_init();
	optim_simd = on && __builtin_cpu_supports("avx512f");
	return optim_simd;
}
#else
static int optim_simd = 0;
int dnn_optim_set_simd(int on)
{
	(void)on;
	return 0;
}
#endif

const char *dnn_optim_isa(void)
{
	if (optim_simd < 0)
		dnn_optim_set_simd(1);
	return optim_simd ? "avx512" : "portable";
}

static void adamw(float *w, float *v, const float *grad, float *delta, const dnn_optim_args *a)
{
	float *m = v, *s = v + a->n;
	float step, sq2, decay;
	dnn_optim_adamw_consts(&step, &sq2, &decay, a->lr, a->weight_decay, a->bc1, a->bc2);
#if defined(__x86_64__) && defined(__GNUC__)
	if (optim_simd < 0)
		dnn_optim_set_simd(1);
	if (optim_simd) {
		adamw_avx512(w, m, s, grad, delta, a->n, a, step, sq2, decay);
		return;
	}
#endif
	for (long i = 0; i < a->n; i++) {
		const float di = dnn_optim_adamw(&w[i], &m[i], &s[i], grad[i], a->scale, a->beta1, a->beta2, step, sq2,
						 decay, a->eps);
		if (delta)
			delta[i] = di;
	}
}

/* Two passes: the moments and the two norms (double sums), then the step along u (recomputed from
 * the same floats, so the step is the u whose norm was taken). */
static void lamb(float *w, float *v, const float *grad, float *delta, const dnn_optim_args *a)
{
	float *m = v, *s = v + a->n;
	const float inv_bc1 = 1.0f / a->bc1, inv_bc2 = 1.0f / a->bc2;
	double ww = 0, uu = 0;
	for (long i = 0; i < a->n; i++) {
		dnn_optim_moments(&m[i], &s[i], grad[i] * a->scale, a->beta1, a->beta2);
		double u = (double)dnn_optim_lamb_dir(m[i], s[i], w[i], inv_bc1, inv_bc2, a->eps, a->weight_decay);
		ww += (double)w[i] * (double)w[i], uu += u * u;
	}
	const float rate = (float)((double)a->lr * dnn_lamb_ratio(ww, uu, a->layerwise));
	for (long i = 0; i < a->n; i++) {
		const float di = dnn_optim_lamb(&w[i], m[i], s[i], rate, inv_bc1, inv_bc2, a->eps, a->weight_decay);
		if (delta)
			delta[i] = di;
	}
}

double dnn_lamb_ratio(double ww, double uu, int layerwise)
{
	return dnn_optim_lamb_ratio(ww, uu, layerwise);
}

void dnn_optim_update_delta_cpu(float *w, float *v, float *grad, float *delta, const dnn_optim_args *a)
{
	// w (n) RW, v (n, adamw 2n) RW, grad (n) RW (zeroed)
	if (a->optimizer == DNN_OPT_LARS)
		lars(w, v, grad, delta, a);
	else if (a->optimizer == DNN_OPT_ADAMW)
		adamw(w, v, grad, delta, a);
	else if (a->optimizer == DNN_OPT_LAMB)
		lamb(w, v, grad, delta, a);
	else
		momentum_sgd(w, v, grad, delta, a);
	if (!a->keep_grad)
		for (long i = 0; i < a->n; i++)
			grad[i] = 0.0f;
}

// ------------------------------------------------------------------------------- codelet

static void optim_update_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_optim_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n * (size_t)dnn_optimizer_state_mult(a->optimizer));
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->n);
	float *delta = NULL;
	if (a->write_delta) {
		STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == (size_t)a->n);
		delta = (float *)STARPU_VECTOR_GET_PTR(buffers[3]);
	}
	dnn_optim_args c = *a;
	if (a->clip) { /* the gradient times the global coefficient (optim.h) */
		const int k = 3 + (a->write_delta != 0);
		STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[k]) == 1);
		c.scale = a->scale * ((const float *)STARPU_VECTOR_GET_PTR(buffers[k]))[0];
	}
	dnn_optim_update_delta_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				 (float *)STARPU_VECTOR_GET_PTR(buffers[2]), delta, &c);
}

/* Footprint from the data sizes only: the learning rate changes every step under a schedule
 * (AdamW's and LAMB's larger state gives them their own footprint). 3 buffers (w, v, grad), 4 with
 * write_delta or clip, 5 with both. */
DNN_CODELET_FP(cl_optim_update, 5, optim_update_cpu_task, dnn_optim_update_cuda, NULL);

// ------------------------------------------------------------------------------- insert helper

DNN_ARGS_NO_PADDING(dnn_optim_args, sizeof(long) + 10 * sizeof(float) + 6 * sizeof(int));

int dnn_insert_optim_update(const dnn_task_opts *o, const dnn_optim_args *a, starpu_data_handle_t w, starpu_data_handle_t v,
			   starpu_data_handle_t grad)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_optim_update, "optim_update", a, STARPU_RW, w, STARPU_RW, v,
					    a->keep_grad ? STARPU_R : STARPU_RW, grad, STARPU_TASK_COLOR, DNN_COLOR_UPDATE,
					    STARPU_FLOPS, 6.0 * a->n);
}

int dnn_insert_optim_update_clipped(const dnn_task_opts *o, const dnn_optim_args *a, starpu_data_handle_t w,
				    starpu_data_handle_t v, starpu_data_handle_t grad, starpu_data_handle_t coef)
{
	dnn_optim_args c = *a;
	c.clip = 1, c.write_delta = 0;
	return DNN_TASK_INSERT_ARGS(o, &cl_optim_update, "optim_update", &c, STARPU_RW, w, STARPU_RW, v,
				    a->keep_grad ? STARPU_R : STARPU_RW, grad, STARPU_R, coef, STARPU_TASK_COLOR,
				    DNN_COLOR_UPDATE, STARPU_FLOPS, 6.0 * a->n);
}

int dnn_insert_optim_update_delta(const dnn_task_opts *o, const dnn_optim_args *a, starpu_data_handle_t w, starpu_data_handle_t v,
				 starpu_data_handle_t grad, starpu_data_handle_t delta)
{
	dnn_optim_args c = *a;
	c.write_delta = 1;
	return DNN_TASK_INSERT_ARGS(o, &cl_optim_update, "optim_update", &c, STARPU_RW, w, STARPU_RW, v,
					    a->keep_grad ? STARPU_R : STARPU_RW, grad, STARPU_W, delta, STARPU_TASK_COLOR, DNN_COLOR_UPDATE,
					    STARPU_FLOPS, 7.0 * a->n);
}
