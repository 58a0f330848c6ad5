/* bias.c — per-channel bias on NCHW data: CPU kernels, codelets, insert helpers.
 *
 * y (N,C,HW) += b (C) broadcast; db (C) += sum over N and HW of dy (N,C,HW).
 */
#include "bias.h"

#include <stdlib.h>

#include "dnn_codelet.h"

#ifdef DNN_HAVE_CUDA
void dnn_bias_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_bias_bwd_cuda(void *buffers[], void *cl_arg);
#endif

// ------------------------------------------------------------------------------- CPU kernels

void dnn_bias_forward_cpu(float *y, const float *b, const dnn_bias_args *a)
{
	// y (N,C,HW) +=, b (C)
	for (int n = 0; n < a->N; n++)
		for (int c = 0; c < a->C; c++) {
			float *y_nc = y + ((size_t)n * a->C + c) * a->HW;
			float bc = b[c];
			for (int i = 0; i < a->HW; i++)
				y_nc[i] += bc;
		}
}

void dnn_bias_backward_cpu(float *db, const float *dy, const dnn_bias_args *a)
{
	// db (C) +=, dy (N,C,HW)
	for (int c = 0; c < a->C; c++) {
		/* 8 independent partial sums (vectorised), folded into a double per image. */
		double sum = 0.0;
		for (int n = 0; n < a->N; n++) {
			const float *restrict p = dy + ((size_t)n * a->C + c) * a->HW;
			float s[8] = {0};
			int i = 0;
			for (; i + 8 <= a->HW; i += 8)
				for (int j = 0; j < 8; j++)
					s[j] += p[i + j];
			for (; i < a->HW; i++)
				s[0] += p[i];
			sum += (double)((s[0] + s[4]) + (s[1] + s[5])) + (double)((s[2] + s[6]) + (s[3] + s[7]));
		}
		db[c] += (float)sum;
	}
}

// ------------------------------------------------------------------------------- codelets

static void bias_fwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_bias_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->C * a->HW);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->C);
	dnn_bias_forward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]),
			     (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), a);
}

static void bias_bwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_bias_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->C * a->HW);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->C);
	dnn_bias_backward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
			      (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a);
}

DNN_CODELET(cl_bias_fwd, 2, bias_fwd_cpu_task, dnn_bias_fwd_cuda);
DNN_CODELET(cl_bias_bwd, 2, bias_bwd_cpu_task, dnn_bias_bwd_cuda);

// ------------------------------------------------------------------------------- insert helpers

DNN_ARGS_NO_PADDING(dnn_bias_args, 3 * sizeof(int));

int dnn_insert_bias_fwd(const dnn_task_opts *o, const dnn_bias_args *a, starpu_data_handle_t y, starpu_data_handle_t b)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_bias_fwd, "bias_fwd", a, STARPU_RW, y, STARPU_R, b, STARPU_TASK_COLOR, DNN_COLOR_ELTWISE_FWD,
					    STARPU_FLOPS, (double)a->N * a->C * a->HW);
}

int dnn_insert_bias_bwd(const dnn_task_opts *o, const dnn_bias_args *a, starpu_data_handle_t dy, starpu_data_handle_t db, int db_mode)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_bias_bwd, "bias_bwd", a, STARPU_R, dy, db_mode, db, STARPU_TASK_COLOR, DNN_COLOR_ELTWISE_BWD,
					    STARPU_FLOPS, (double)a->N * a->C * a->HW);
}
