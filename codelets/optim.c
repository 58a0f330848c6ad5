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

static void adamw(float *w, float *v, const float *grad, float *delta, const dnn_optim_args *a)
{
	float *m = v, *s = v + a->n;
	float step, sq2, decay;
	dnn_optim_adamw_consts(&step, &sq2, &decay, a->lr, a->weight_decay, a->bc1, a->bc2);
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
