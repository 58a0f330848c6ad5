/* relu.cu — CUDA side of the rectified linear unit (small element-wise kernels). */
#include <starpu.h>

#include "dnn_cuda.h"

extern "C" {
#include "relu.h"
}
#include "act_formulas.h" /* the formulas, shared with relu.c */

// y (n) = max(x, 0)
static __global__ void relu_fwd_kernel(float *y, const float *x, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = dnn_act_relu(x[i]);
}

// dx (n) =|+= dy * (y > 0)
static __global__ void relu_bwd_kernel(float *dx, const float *y, const float *dy, size_t n, int accumulate_dx)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n) {
		float g = dnn_act_relu_grad(dy[i], y[i]);
		dx[i] = accumulate_dx ? dx[i] + g : g;
	}
}

extern "C" void dnn_relu_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_relu_args *a = (const dnn_relu_args *)cl_arg;
	size_t n = (size_t)a->n;
	if (a->y_bf16) { /* the plan stores no bf16 activation with CUDA workers (graph/model.c) */
		dnn_worker_error("relu: a bf16 activation reached a CUDA kernel (fp32 only)");
		return;
	}
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n);
	const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	float *y = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	if (n == 0)
		return;
	relu_fwd_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(y, x, n);
	DNN_CUDA_CHECK(cudaGetLastError());
}

extern "C" void dnn_relu_bwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_relu_args *a = (const dnn_relu_args *)cl_arg;
	size_t n = (size_t)a->n;
	if (a->y_bf16) { /* the plan stores no bf16 activation with CUDA workers (graph/model.c) */
		dnn_worker_error("relu: a bf16 activation reached a CUDA kernel (fp32 only)");
		return;
	}
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == n);
	const float *y = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	float *dx = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);
	if (n == 0)
		return;
	relu_bwd_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(dx, y, dy, n,
											 a->accumulate_dx);
	DNN_CUDA_CHECK(cudaGetLastError());
}
