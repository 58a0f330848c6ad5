/* dense.c — fully connected layer: CPU kernels (OpenBLAS), codelets, insert helpers.
 *
 * x (N,IN), w (OUT,IN) (PyTorch layout), b (OUT), y (N,OUT); y = x w^T + b.
 * Backward: dx (=|+=) dy w; dw += dy^T x; db += sum over N of dy.
 * Without a bias (b, db NULL): y = x w^T; dw += dy^T x.
 */
#include "dense.h"

#include <stdlib.h>

#include "dnn_codelet.h"
#include "gemm_bf16.h"

#ifdef DNN_HAVE_CUDA
void dnn_dense_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_dense_bwd_data_cuda(void *buffers[], void *cl_arg);
void dnn_dense_bwd_weight_cuda(void *buffers[], void *cl_arg);
void dnn_dense_fwd_nobias_cuda(void *buffers[], void *cl_arg);
void dnn_dense_bwd_weight_nobias_cuda(void *buffers[], void *cl_arg);
#endif

double dnn_dense_flops_fwd(const dnn_dense_args *a)
{
	return 2.0 * a->N * a->IN * a->OUT;
}

// ------------------------------------------------------------------------------- CPU kernels

/* x (rows, IN) as a bf16 GEMM operand: fp32 rounded by the call, or bf16 read in place. */
static dnn_bf16_operand x_operand(const void *x, const dnn_dense_args *a)
{
	if (a->x_bf16)
		return (dnn_bf16_operand){.h = x, .ld = a->IN};
	return (dnn_bf16_operand){.f = x, .ld = a->IN};
}

int dnn_dense_forward_cpu(void *yv, const void *x, const float *w, const float *b, const dnn_dense_args *a)
{
	// y (N,OUT) (fp32, or bf16 with y_bf16), x (N,IN) (fp32, or bf16 with x_bf16), w (OUT,IN), b (OUT) or NULL
	int N = a->N, IN = a->IN, OUT = a->OUT;
	if ((a->x_bf16 || a->y_bf16) && !a->bf16)
		return -1;
	if (N == 0 || OUT == 0)
		return 0;
	if (a->y_bf16) /* rounded as its fp32 values would be, as they are stored */
		return dnn_gemm_bf16_out(0, 1, N, OUT, IN, 1.0f, x_operand(x, a), (dnn_bf16_operand){.f = w, .ld = IN},
					 b, yv, OUT);
	float *y = yv;
	if (a->bf16 && IN > 0) /* the bias added by the matmul itself: one pass over y, not three */
		return dnn_gemm_bf16_ex(0, 1, N, OUT, IN, 1.0f, x_operand(x, a), (dnn_bf16_operand){.f = w, .ld = IN},
					0.0f, b, y, OUT);
	for (int n = 0; n < N; n++) {
		float *y_n = y + (size_t)n * OUT;
		for (int o = 0; o < OUT; o++)
			y_n[o] = b ? b[o] : 0.0f;
	}
	if (IN == 0)
		return 0;
	return dnn_gemm(a->bf16, 0, 1, N, OUT, IN, 1.0f, x, IN, w, IN, 1.0f, y, OUT);
}

int dnn_dense_backward_data_cpu(float *dx, const float *dy, const float *w, const dnn_dense_args *a)
{
	// dx (N,IN), dy (N,OUT), w (OUT,IN)
	int N = a->N, IN = a->IN, OUT = a->OUT;
	if (N == 0 || IN == 0)
		return 0;
	if (OUT == 0) {
		if (!a->accumulate_dx)
			for (size_t i = 0; i < (size_t)N * IN; i++)
				dx[i] = 0.0f;
		return 0;
	}
	float beta = a->accumulate_dx ? 1.0f : 0.0f;
	return dnn_gemm(a->bf16, 0, 0, N, IN, OUT, 1.0f, dy, OUT, w, IN, beta, dx, IN);
}

int dnn_dense_backward_weight_cpu(float *dw, float *db, const void *x, const float *dy, const dnn_dense_args *a)
{
	// dw (OUT,IN) +=, db (OUT) += or NULL, x (N,IN) (fp32, or bf16 with x_bf16), dy (N,OUT)
	int N = a->N, IN = a->IN, OUT = a->OUT;
	if (a->x_bf16 && !a->bf16)
		return -1;
	if (N == 0 || OUT == 0)
		return 0;
	if (a->bf16 && IN > 0) /* db summed in the pass that rounds dy (the same order: the same bits) */
		return dnn_gemm_bf16_ex(1, 0, OUT, IN, N, 1.0f, (dnn_bf16_operand){.f = dy, .ld = OUT, .colsum = db},
					x_operand(x, a), 1.0f, NULL, dw, IN);
	if (IN > 0 && dnn_gemm(a->bf16, 1, 0, OUT, IN, N, 1.0f, dy, OUT, x, IN, 1.0f, dw, IN) != 0)
		return -1;
	for (int n = 0; db && n < N; n++) {
		const float *dy_n = dy + (size_t)n * OUT;
		for (int o = 0; o < OUT; o++)
			db[o] += dy_n[o];
	}
	return 0;
}

// ------------------------------------------------------------------------------- codelets

static void dense_fwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_dense_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->OUT * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->OUT);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == (size_t)a->N * a->OUT);
	if (dnn_dense_forward_cpu((void *)STARPU_VECTOR_GET_PTR(buffers[3]),
				  (const void *)STARPU_VECTOR_GET_PTR(buffers[0]),
			      (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
			      (const float *)STARPU_VECTOR_GET_PTR(buffers[2]), a) != 0)
		dnn_worker_error("dense forward (bf16): out of memory for the bf16 copies, or oneDNN failed");
}

static void dense_bwd_data_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_dense_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->OUT);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->OUT * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->N * a->IN);
	if (dnn_dense_backward_data_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[2]),
				    (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
				    (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), a) != 0)
		dnn_worker_error("dense backward data (bf16): out of memory for the bf16 copies, or oneDNN failed");
}

static void dense_bwd_weight_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_dense_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->N * a->OUT);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->OUT * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == (size_t)a->OUT);
	if (dnn_dense_backward_weight_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[2]),
				      (float *)STARPU_VECTOR_GET_PTR(buffers[3]),
				      (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
				      (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), a) != 0)
		dnn_worker_error("dense backward weight (bf16): out of memory for the bf16 copies, or oneDNN failed");
}

static void dense_fwd_nobias_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_dense_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->OUT * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->N * a->OUT);
	if (dnn_dense_forward_cpu((void *)STARPU_VECTOR_GET_PTR(buffers[2]),
				  (const void *)STARPU_VECTOR_GET_PTR(buffers[0]),
			      (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), NULL, a) != 0)
		dnn_worker_error("dense forward (bf16): out of memory for the bf16 copies, or oneDNN failed");
}

static void dense_bwd_weight_nobias_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_dense_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->N * a->OUT);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->OUT * a->IN);
	if (dnn_dense_backward_weight_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[2]), NULL,
				      (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
				      (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), a) != 0)
		dnn_worker_error("dense backward weight (bf16): out of memory for the bf16 copies, or oneDNN failed");
}

DNN_CODELET(cl_dense_fwd, 4, dense_fwd_cpu_task, dnn_dense_fwd_cuda);
DNN_CODELET(cl_dense_fwd_nobias, 3, dense_fwd_nobias_cpu_task, dnn_dense_fwd_nobias_cuda);
DNN_CODELET(cl_dense_bwd_weight_nobias, 3, dense_bwd_weight_nobias_cpu_task, dnn_dense_bwd_weight_nobias_cuda);
DNN_CODELET(cl_dense_bwd_data, 3, dense_bwd_data_cpu_task, dnn_dense_bwd_data_cuda);
DNN_CODELET(cl_dense_bwd_weight, 4, dense_bwd_weight_cpu_task, dnn_dense_bwd_weight_cuda);

// ------------------------------------------------------------------------------- insert helpers

DNN_ARGS_NO_PADDING(dnn_dense_args, 7 * sizeof(int));

int dnn_insert_dense_fwd(const dnn_task_opts *o, const dnn_dense_args *a, starpu_data_handle_t x, starpu_data_handle_t w,
			  starpu_data_handle_t b, starpu_data_handle_t y)
{
	if (!b)
		return DNN_TASK_INSERT_ARGS(o, &cl_dense_fwd_nobias, "dense_fwd", a, STARPU_R, x, STARPU_R, w, STARPU_W, y,
					    STARPU_TASK_COLOR, DNN_COLOR_DENSE_FWD, STARPU_FLOPS, dnn_dense_flops_fwd(a));
	return DNN_TASK_INSERT_ARGS(o, &cl_dense_fwd, "dense_fwd", a, STARPU_R, x, STARPU_R, w, STARPU_R, b, STARPU_W, y, STARPU_TASK_COLOR, DNN_COLOR_DENSE_FWD,
					    STARPU_FLOPS, dnn_dense_flops_fwd(a) + (double)a->N * a->OUT);
}

int dnn_insert_dense_bwd_data(const dnn_task_opts *o, const dnn_dense_args *a, starpu_data_handle_t dy, starpu_data_handle_t w,
			       starpu_data_handle_t dx)
{
	int dx_mode = a->accumulate_dx ? STARPU_RW : STARPU_W;
	return DNN_TASK_INSERT_ARGS(o, &cl_dense_bwd_data, "dense_bwd_data", a, STARPU_R, dy, STARPU_R, w, dx_mode, dx, STARPU_TASK_COLOR, DNN_COLOR_DENSE_BWD,
					    STARPU_FLOPS, dnn_dense_flops_fwd(a));
}

int dnn_insert_dense_bwd_weight(const dnn_task_opts *o, const dnn_dense_args *a, starpu_data_handle_t x, starpu_data_handle_t dy,
				 starpu_data_handle_t dw, starpu_data_handle_t db, int grad_mode)
{
	if (!db)
		return DNN_TASK_INSERT_ARGS(o, &cl_dense_bwd_weight_nobias, "dense_bwd_weight", a, STARPU_R, x, STARPU_R, dy,
					    grad_mode, dw, STARPU_TASK_COLOR, DNN_COLOR_DENSE_BWD_WEIGHT, STARPU_FLOPS,
					    dnn_dense_flops_fwd(a));
	return DNN_TASK_INSERT_ARGS(o, &cl_dense_bwd_weight, "dense_bwd_weight", a, STARPU_R, x, STARPU_R, dy, grad_mode, dw,
					    grad_mode, db, STARPU_TASK_COLOR, DNN_COLOR_DENSE_BWD_WEIGHT,
					    STARPU_FLOPS, dnn_dense_flops_fwd(a) + (double)a->N * a->OUT);
}
