/* add.c — residual add: CPU kernels, codelets, insert helpers.
 *
 * y = a + b (n floats). Backward is a fan-out: cl_add_bwd runs once per input and gives that
 * input's gradient dy, overwritten or accumulated (dx (=|+=) dy).
 */
#include "add.h"

#include <stdlib.h>
#include <string.h>

#include "dnn_codelet.h"
#include "gemm_bf16.h"

#ifdef DNN_HAVE_CUDA
void dnn_add_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_add_bwd_cuda(void *buffers[], void *cl_arg);
#endif

// ------------------------------------------------------------------------------- CPU kernels

void dnn_add_forward_cpu(float *y, const float *a, const float *b, long n)
{
	// y (n), a (n), b (n)
	for (long i = 0; i < n; i++)
		y[i] = a[i] + b[i];
}

/* One branch per call, four loops the compiler vectorises. */
void dnn_add_forward_mixed_cpu(float *restrict y, const void *a, int a_bf16, const void *b, int b_bf16, long n)
{
	// y (n), a (n) fp32 or bf16, b (n) fp32 or bf16
	const float *af = a, *bf = b;
	const uint16_t *ah = a, *bh = b;
	if (a_bf16 && b_bf16)
		for (long i = 0; i < n; i++)
			y[i] = dnn_bf16_to_f32(ah[i]) + dnn_bf16_to_f32(bh[i]);
	else if (a_bf16)
		for (long i = 0; i < n; i++)
			y[i] = dnn_bf16_to_f32(ah[i]) + bf[i];
	else if (b_bf16)
		for (long i = 0; i < n; i++)
			y[i] = af[i] + dnn_bf16_to_f32(bh[i]);
	else
		dnn_add_forward_cpu(y, af, bf, n);
}

void dnn_add_backward_cpu(float *dx, const float *dy, long n, int accumulate_dx)
{
	// dx (n) =|+=, dy (n)
	if (accumulate_dx) {
		for (long i = 0; i < n; i++)
			dx[i] += dy[i];
	} else if (n > 0) {
		memcpy(dx, dy, (size_t)n * sizeof(float));
	}
}

// ------------------------------------------------------------------------------- codelets

static void add_fwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_add_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->n);
	const int a0 = a->x_bf16 & 1, a1 = (a->x_bf16 >> 1) & 1;
	STARPU_ASSERT(STARPU_VECTOR_GET_ELEMSIZE(buffers[0]) == (a0 ? sizeof(uint16_t) : sizeof(float)) &&
		      STARPU_VECTOR_GET_ELEMSIZE(buffers[1]) == (a1 ? sizeof(uint16_t) : sizeof(float)));
	dnn_add_forward_mixed_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[2]), (const void *)STARPU_VECTOR_GET_PTR(buffers[0]),
				  a0, (const void *)STARPU_VECTOR_GET_PTR(buffers[1]), a1, a->n);
}

static void add_bwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_add_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	dnn_add_backward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
			     (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a->n, a->accumulate_dx);
}

DNN_CODELET(cl_add_fwd, 3, add_fwd_cpu_task, dnn_add_fwd_cuda);
DNN_CODELET(cl_add_bwd, 2, add_bwd_cpu_task, dnn_add_bwd_cuda);

// ------------------------------------------------------------------------------- insert helpers

DNN_ARGS_NO_PADDING(dnn_add_args, sizeof(long) + 2 * sizeof(int));

int dnn_insert_add_fwd(const dnn_task_opts *o, const dnn_add_args *a, starpu_data_handle_t x0, starpu_data_handle_t x1,
			starpu_data_handle_t y)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_add_fwd, "add_fwd", a, STARPU_R, x0, STARPU_R, x1, STARPU_W, y, STARPU_TASK_COLOR, DNN_COLOR_ELTWISE_FWD,
					    STARPU_FLOPS, (double)a->n);
}

int dnn_insert_add_bwd(const dnn_task_opts *o, const dnn_add_args *a, starpu_data_handle_t dy, starpu_data_handle_t dx)
{
	int dx_mode = a->accumulate_dx ? STARPU_RW : STARPU_W;
	return DNN_TASK_INSERT_ARGS(o, &cl_add_bwd, "add_bwd", a, STARPU_R, dy, dx_mode, dx, STARPU_TASK_COLOR, DNN_COLOR_ELTWISE_BWD,
					    STARPU_FLOPS, a->accumulate_dx ? (double)a->n : 0.0);
}
