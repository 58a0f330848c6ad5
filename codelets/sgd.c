/* sgd.c — fused SGD step (momentum, weight decay, 1/B scaling), PyTorch semantics:
 *   g = grad * scale + weight_decay * w;  v = momentum * v + g;  w -= lr * v;  grad = 0.
 */
#include "sgd.h"

#include <stdlib.h>

#include "dnn_codelet.h"

#ifdef DNN_HAVE_CUDA
void dnn_sgd_update_cuda(void *buffers[], void *cl_arg);
#endif

// ------------------------------------------------------------------------------- CPU kernel

void dnn_sgd_update_cpu(float *w, float *v, float *grad, const dnn_sgd_args *a)
{
	dnn_sgd_update_delta_cpu(w, v, grad, NULL, a);
}

void dnn_sgd_update_delta_cpu(float *w, float *v, float *grad, float *delta, const dnn_sgd_args *a)
{
	// w (n) RW, v (n) RW, grad (n) RW (zeroed)
	float lr = a->lr, mom = a->momentum, wd = a->weight_decay, scale = a->scale;
	for (long i = 0; i < a->n; i++) {
		float g = grad[i] * scale + wd * w[i];
		float vi = mom * v[i] + g;
		v[i] = vi;
		w[i] -= lr * vi;
		if (delta)
			delta[i] = -lr * vi;
	}
	if (!a->keep_grad)
		for (long i = 0; i < a->n; i++)
			grad[i] = 0.0f;
}

// ------------------------------------------------------------------------------- codelet

static void sgd_update_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_sgd_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->n);
	float *delta = NULL;
	if (a->write_delta) {
		STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == (size_t)a->n);
		delta = (float *)STARPU_VECTOR_GET_PTR(buffers[3]);
	}
	dnn_sgd_update_delta_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				 (float *)STARPU_VECTOR_GET_PTR(buffers[2]), delta, a);
}

/* Footprint from the data sizes only: the learning rate changes every step under a schedule.
 * 3 buffers (w, v, grad), 4 with write_delta. */
DNN_CODELET_FP(cl_sgd_update, 4, sgd_update_cpu_task, dnn_sgd_update_cuda, NULL);

// ------------------------------------------------------------------------------- insert helper

DNN_ARGS_NO_PADDING(dnn_sgd_args, sizeof(long) + 4 * sizeof(float) + 2 * sizeof(int));

int dnn_insert_sgd_update(const dnn_task_opts *o, const dnn_sgd_args *a, starpu_data_handle_t w, starpu_data_handle_t v,
			   starpu_data_handle_t grad)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_sgd_update, "sgd_update", a, STARPU_RW, w, STARPU_RW, v,
					    a->keep_grad ? STARPU_R : STARPU_RW, grad, STARPU_TASK_COLOR, DNN_COLOR_UPDATE,
					    STARPU_FLOPS, 6.0 * a->n);
}

int dnn_insert_sgd_update_delta(const dnn_task_opts *o, const dnn_sgd_args *a, starpu_data_handle_t w, starpu_data_handle_t v,
				 starpu_data_handle_t grad, starpu_data_handle_t delta)
{
	dnn_sgd_args c = *a;
	c.write_delta = 1;
	return DNN_TASK_INSERT_ARGS(o, &cl_sgd_update, "sgd_update", &c, STARPU_RW, w, STARPU_RW, v,
					    a->keep_grad ? STARPU_R : STARPU_RW, grad, STARPU_W, delta, STARPU_TASK_COLOR, DNN_COLOR_UPDATE,
					    STARPU_FLOPS, 7.0 * a->n);
}
