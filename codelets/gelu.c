/* gelu.c — the GELU activation (tanh form): CPU kernels, codelets, insert helpers (gelu.h). */
#include "gelu.h"
#include "act_formulas.h"

// ------------------------------------------------------------------------------- CPU kernels

/* Plain loops over the shared formulas; tanhf is a libm call per element, which a GPT block's
 * dense layers (2 x 4C^2 multiply-adds per token against gelu's 4C tanhf) make negligible. */
void dnn_gelu_forward_cpu(float *restrict y, const float *restrict x, long n)
{
	// y (n), x (n)
	for (long i = 0; i < n; i++)
		y[i] = dnn_act_gelu(x[i]);
}

void dnn_gelu_backward_cpu(float *restrict dx, const float *restrict x, const float *restrict dy, long n,
			   int accumulate_dx)
{
	// dx (n) =|+=, x (n), dy (n)
	if (accumulate_dx) {
		for (long i = 0; i < n; i++)
			dx[i] += dnn_act_gelu_grad(dy[i], x[i]);
	} else {
		for (long i = 0; i < n; i++)
			dx[i] = dnn_act_gelu_grad(dy[i], x[i]);
	}
}

// ------------------------------------------------------------------------------- codelets

static void gelu_fwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_gelu_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	dnn_gelu_forward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[1]), (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
			     a->n);
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

/* Footprint: data sizes only (nothing in the arguments changes the cost). */
DNN_CODELET_FP(cl_gelu_fwd, 2, gelu_fwd_cpu_task, dnn_gelu_fwd_cuda, NULL);
DNN_CODELET_FP(cl_gelu_bwd, 3, gelu_bwd_cpu_task, dnn_gelu_bwd_cuda, NULL);

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
