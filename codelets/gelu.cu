/* gelu.cu — CUDA side of the GELU activation (gelu.h): one thread per element. */
#include <starpu.h>

#include "dnn_cuda.h"

extern "C" {
#include "gelu.h"
}
#include "act_formulas.h" /* the formulas, shared with gelu.c */

// y (n) = gelu(x)
static __global__ void gelu_fwd_kernel(float *y, const float *x, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = dnn_act_gelu(x[i]);
}

// dx (n) =|+= dy * gelu'(x)
static __global__ void gelu_bwd_kernel(float *dx, const float *x, const float *dy, size_t n, int accumulate_dx)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n) {
		const float g = dnn_act_gelu_grad(dy[i], x[i]);
		dx[i] = accumulate_dx ? dx[i] + g : g;
	}
}

extern "C" void dnn_gelu_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_gelu_args *a = (const dnn_gelu_args *)cl_arg;
	const size_t n = (size_t)a->n;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n);
	if (a->y_bf16) { /* the plan stores no bf16 activation with CUDA workers (graph/model.c): a bug */
		dnn_worker_error("gelu_fwd: a bf16-stored output reached a CUDA worker");
		return;
	}
	if (n == 0)
		return;
	gelu_fwd_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(
		(float *)STARPU_VECTOR_GET_PTR(buffers[1]), (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), n);
	DNN_CUDA_CHECK(cudaGetLastError());
}

extern "C" void dnn_gelu_bwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_gelu_args *a = (const dnn_gelu_args *)cl_arg;
	const size_t n = (size_t)a->n;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == n);
	if (n == 0)
		return;
	gelu_bwd_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(
		(float *)STARPU_VECTOR_GET_PTR(buffers[2]), (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
		(const float *)STARPU_VECTOR_GET_PTR(buffers[1]), n, a->accumulate_dx);
	DNN_CUDA_CHECK(cudaGetLastError());
}
