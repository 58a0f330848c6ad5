/* leaky_relu.cu — CUDA side of the leaky rectifier (leaky_relu.h): one thread per element. */
#include <starpu.h>

#include "dnn_cuda.h"

extern "C" {
#include "leaky_relu.h"
}
#include "act_formulas.h" /* the formulas, shared with leaky_relu.c */

// y (n) = x > 0 ? x : alpha x
static __global__ void leaky_relu_fwd_kernel(float *y, const float *x, float alpha, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = dnn_act_leaky_relu(x[i], alpha);
}

// dx (n) =|+= y > 0 ? dy : alpha dy
static __global__ void leaky_relu_bwd_kernel(float *dx, const float *y, const float *dy, float alpha, size_t n,
					     int accumulate_dx)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n) {
		const float g = dnn_act_leaky_relu_grad(dy[i], y[i], alpha);
		dx[i] = accumulate_dx ? dx[i] + g : g;
	}
}

extern "C" void dnn_leaky_relu_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_leaky_relu_args *a = (const dnn_leaky_relu_args *)cl_arg;
	const size_t n = (size_t)a->n;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n);
	if (n == 0)
		return;
	leaky_relu_fwd_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(
		(float *)STARPU_VECTOR_GET_PTR(buffers[1]), (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a->alpha, n);
	DNN_CUDA_CHECK(cudaGetLastError());
}

extern "C" void dnn_leaky_relu_bwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_leaky_relu_args *a = (const dnn_leaky_relu_args *)cl_arg;
	const size_t n = (size_t)a->n;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == n);
	if (n == 0)
		return;
	leaky_relu_bwd_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(
		(float *)STARPU_VECTOR_GET_PTR(buffers[2]), (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
		(const float *)STARPU_VECTOR_GET_PTR(buffers[1]), a->alpha, n, a->accumulate_dx);
	DNN_CUDA_CHECK(cudaGetLastError());
}
