/* leaky_relu.c — the leaky rectifier: CPU kernels, codelets, insert helpers (leaky_relu.h). */
#include "leaky_relu.h"
#include "act_formulas.h"

// ------------------------------------------------------------------------------- CPU kernels

/* Branch-free loops (a select), so that the compiler vectorises them, as relu's. */
void dnn_leaky_relu_forward_cpu(float *restrict y, const float *restrict x, long n, float alpha)
{
	// y (n), x (n)
	for (long i = 0; i < n; i++)
		y[i] = dnn_act_leaky_relu(x[i], alpha);
}

void dnn_leaky_relu_backward_cpu(float *restrict dx, const float *restrict y, const float *restrict dy, long n,
				 float alpha, int accumulate_dx)
{
	// dx (n) =|+=, y (n), dy (n)
	if (accumulate_dx) {
		for (long i = 0; i < n; i++)
			dx[i] += dnn_act_leaky_relu_grad(dy[i], y[i], alpha);
	} else {
		for (long i = 0; i < n; i++)
			dx[i] = dnn_act_leaky_relu_grad(dy[i], y[i], alpha);
	}
}

// ------------------------------------------------------------------------------- codelets

static void leaky_relu_fwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_leaky_relu_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	dnn_leaky_relu_forward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				   (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a->n, a->alpha);
}

static void leaky_relu_bwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_leaky_relu_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->n);
	dnn_leaky_relu_backward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[2]),
				    (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
				    (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), a->n, a->alpha, a->accumulate_dx);
}

/* Footprint: data sizes only (alpha does not change the cost). */
DNN_CODELET_FP(cl_leaky_relu_fwd, 2, leaky_relu_fwd_cpu_task, dnn_leaky_relu_fwd_cuda, NULL);
DNN_CODELET_FP(cl_leaky_relu_bwd, 3, leaky_relu_bwd_cpu_task, dnn_leaky_relu_bwd_cuda, NULL);

// ------------------------------------------------------------------------------- insert helpers

DNN_ARGS_NO_PADDING(dnn_leaky_relu_args, sizeof(long) + sizeof(float) + sizeof(int));

int dnn_insert_leaky_relu_fwd(const dnn_task_opts *o, const dnn_leaky_relu_args *a, starpu_data_handle_t x,
			      starpu_data_handle_t y)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_leaky_relu_fwd, "leaky_relu_fwd", a, STARPU_R, x, STARPU_W, y,
				    STARPU_TASK_COLOR, DNN_COLOR_ELTWISE_FWD, STARPU_FLOPS, 2.0 * (double)a->n);
}

int dnn_insert_leaky_relu_bwd(const dnn_task_opts *o, const dnn_leaky_relu_args *a, starpu_data_handle_t y,
			      starpu_data_handle_t dy, starpu_data_handle_t dx)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_leaky_relu_bwd, "leaky_relu_bwd", a, STARPU_R, y, STARPU_R, dy,
				    a->accumulate_dx ? STARPU_RW : STARPU_W, dx, STARPU_TASK_COLOR, DNN_COLOR_ELTWISE_BWD,
				    STARPU_FLOPS, 2.0 * (double)a->n);
}
