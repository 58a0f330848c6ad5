/* avgpool.c — global average pool: CPU kernels, codelets, insert helpers.
 *
 * x (N,C,HW) -> y (N,C) = mean over HW; dx (N,C,HW) (=|+=) dy (N,C) / HW broadcast.
 */
#include "avgpool.h"

#include <stdlib.h>

#include "dnn_codelet.h"

#ifdef DNN_HAVE_CUDA
void dnn_avgpool_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_avgpool_bwd_cuda(void *buffers[], void *cl_arg);
#endif

// ------------------------------------------------------------------------------- CPU kernels

void dnn_avgpool_forward_cpu(float *y, const float *x, const dnn_avgpool_args *a)
{
	// y (N,C), x (N,C,HW)
	size_t rows = (size_t)a->N * a->C;
	float inv = a->HW > 0 ? 1.0f / (float)a->HW : 0.0f;
	for (size_t r = 0; r < rows; r++) {
		const float *x_r = x + r * a->HW;
		float sum = 0.0f;
		for (int i = 0; i < a->HW; i++)
			sum += x_r[i];
		y[r] = sum * inv;
	}
}

void dnn_avgpool_backward_cpu(float *dx, const float *dy, const dnn_avgpool_args *a)
{
	// dx (N,C,HW) =|+=, dy (N,C)
	size_t rows = (size_t)a->N * a->C;
	float inv = a->HW > 0 ? 1.0f / (float)a->HW : 0.0f;
	for (size_t r = 0; r < rows; r++) {
		float *dx_r = dx + r * a->HW;
		float g = dy[r] * inv;
		if (a->accumulate_dx) {
			for (int i = 0; i < a->HW; i++)
				dx_r[i] += g;
		} else {
			for (int i = 0; i < a->HW; i++)
				dx_r[i] = g;
		}
	}
}

// ------------------------------------------------------------------------------- codelets

static void avgpool_fwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_avgpool_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->C * a->HW);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->N * a->C);
	dnn_avgpool_forward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				(const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a);
}

static void avgpool_bwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_avgpool_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->N * a->C * a->HW);
	dnn_avgpool_backward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				 (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a);
}

DNN_CODELET(cl_avgpool_fwd, 2, avgpool_fwd_cpu_task, dnn_avgpool_fwd_cuda);
DNN_CODELET(cl_avgpool_bwd, 2, avgpool_bwd_cpu_task, dnn_avgpool_bwd_cuda);

// ------------------------------------------------------------------------------- insert helpers

DNN_ARGS_NO_PADDING(dnn_avgpool_args, 4 * sizeof(int));

int dnn_insert_avgpool_fwd(const dnn_task_opts *o, const dnn_avgpool_args *a, starpu_data_handle_t x, starpu_data_handle_t y)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_avgpool_fwd, "avgpool_fwd", a, STARPU_R, x, STARPU_W, y, STARPU_TASK_COLOR, DNN_COLOR_POOL_FWD,
					    STARPU_FLOPS, (double)a->N * a->C * a->HW);
}

int dnn_insert_avgpool_bwd(const dnn_task_opts *o, const dnn_avgpool_args *a, starpu_data_handle_t dy, starpu_data_handle_t dx)
{
	int dx_mode = a->accumulate_dx ? STARPU_RW : STARPU_W;
	return DNN_TASK_INSERT_ARGS(o, &cl_avgpool_bwd, "avgpool_bwd", a, STARPU_R, dy, dx_mode, dx, STARPU_TASK_COLOR, DNN_COLOR_POOL_BWD,
					    STARPU_FLOPS, (double)a->N * a->C * a->HW);
}
