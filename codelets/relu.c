/* relu.c — rectified linear unit: CPU kernels, codelets, insert helpers.
 *
 * y = max(x, 0); dx (=|+=) dy * (y > 0). Backward reads y, not x, so x can be freed early.
 */
#include "relu.h"

#include <stdlib.h>

#include "act_formulas.h"
#include "dnn_codelet.h"
#include "gemm_bf16.h"

#ifdef DNN_HAVE_CUDA
void dnn_relu_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_relu_bwd_cuda(void *buffers[], void *cl_arg);
#endif

// ------------------------------------------------------------------------------- CPU kernels

/* Both loops are branch-free so that the compiler vectorises them: a data-dependent branch on
 * the sign mispredicts half the time and made relu_bwd 10x slower than relu_fwd. */
void dnn_relu_forward_cpu(float *restrict y, const float *restrict x, long n)
{
	// y (n), x (n)
	for (long i = 0; i < n; i++)
		y[i] = dnn_act_relu(x[i]);
}

void dnn_relu_backward_cpu(float *restrict dx, const float *restrict y, const float *restrict dy, long n,
			   int accumulate_dx)
{
	// dx (n) =|+=, y (n), dy (n)
	if (accumulate_dx) {
		for (long i = 0; i < n; i++)
			dx[i] += dnn_act_relu_grad(dy[i], y[i]);
	} else {
		for (long i = 0; i < n; i++)
			dx[i] = dnn_act_relu_grad(dy[i], y[i]);
	}
}

/* In blocks that stay in L1: max(x, 0) into a float block, then one rounding pass of the block
 * (vcvtneps2bf16 where dnn_bf16_convert uses it). */
void dnn_relu_forward_bf16_cpu(uint16_t *restrict y, const float *restrict x, long n)
{
	// y (n) bf16, x (n)
	float t[1024];
	for (long i = 0; i < n; i += 1024) {
		const long m = n - i < 1024 ? n - i : 1024;
		for (long j = 0; j < m; j++)
			t[j] = dnn_act_relu(x[i + j]);
		dnn_bf16_convert(y + i, t, (size_t)m);
	}
}

void dnn_relu_backward_bf16_cpu(float *restrict dx, const uint16_t *restrict y, const float *restrict dy, long n,
				int accumulate_dx)
{
	// dx (n) =|+=, y (n) bf16, dy (n)
	if (accumulate_dx) {
		for (long i = 0; i < n; i++)
			dx[i] += dnn_act_relu_grad(dy[i], dnn_bf16_to_f32(y[i]));
	} else {
		for (long i = 0; i < n; i++)
			dx[i] = dnn_act_relu_grad(dy[i], dnn_bf16_to_f32(y[i]));
	}
}

// ------------------------------------------------------------------------------- codelets

static void relu_fwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_relu_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_ELEMSIZE(buffers[1]) == (a->y_bf16 ? sizeof(uint16_t) : sizeof(float)));
	if (a->y_bf16)
		dnn_relu_forward_bf16_cpu((uint16_t *)STARPU_VECTOR_GET_PTR(buffers[1]),
					  (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a->n);
	else
		dnn_relu_forward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				     (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a->n);
}

static void relu_bwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_relu_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_ELEMSIZE(buffers[0]) == (a->y_bf16 ? sizeof(uint16_t) : sizeof(float)));
	if (a->y_bf16) {
		dnn_relu_backward_bf16_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[2]),
					   (const uint16_t *)STARPU_VECTOR_GET_PTR(buffers[0]),
					   (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), a->n, a->accumulate_dx);
		return;
	}
	dnn_relu_backward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[2]),
			      (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
			      (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), a->n, a->accumulate_dx);
}

DNN_CODELET(cl_relu_fwd, 2, relu_fwd_cpu_task, dnn_relu_fwd_cuda);
DNN_CODELET(cl_relu_bwd, 3, relu_bwd_cpu_task, dnn_relu_bwd_cuda);

// ------------------------------------------------------------------------------- insert helpers

DNN_ARGS_NO_PADDING(dnn_relu_args, sizeof(long) + 2 * sizeof(int));

int dnn_insert_relu_fwd(const dnn_task_opts *o, const dnn_relu_args *a, starpu_data_handle_t x, starpu_data_handle_t y)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_relu_fwd, "relu_fwd", a, STARPU_R, x, STARPU_W, y, STARPU_TASK_COLOR, DNN_COLOR_ELTWISE_FWD,
					    STARPU_FLOPS, (double)a->n);
}

int dnn_insert_relu_bwd(const dnn_task_opts *o, const dnn_relu_args *a, starpu_data_handle_t y, starpu_data_handle_t dy,
			 starpu_data_handle_t dx)
{
	int dx_mode = a->accumulate_dx ? STARPU_RW : STARPU_W;
	return DNN_TASK_INSERT_ARGS(o, &cl_relu_bwd, "relu_bwd", a, STARPU_R, y, STARPU_R, dy, dx_mode, dx, STARPU_TASK_COLOR, DNN_COLOR_ELTWISE_BWD,
					    STARPU_FLOPS, (double)a->n);
}
